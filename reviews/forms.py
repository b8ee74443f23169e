from django import forms

from memory.core.secrets import scan_fields
from memory.models import Category


class ReasonForm(forms.Form):
    """The reason every confirm-with-reason action records in the audit log."""

    reason = forms.CharField(
        max_length=500,
        strip=True,
        error_messages={"required": "Say why: the reason is kept in the audit log."},
    )

    def clean(self):
        """Every text field of a person's form goes through the one secret walker too:
        reasons end up in the audit log, edits in memory."""
        cleaned = super().clean()
        texts = {name: value for name, value in cleaned.items() if isinstance(value, str)}
        for name, finding in scan_fields(texts).items():
            self.add_error(
                name,
                f"Looks like a {finding.kind}: Cairn never stores secrets. Say where it "
                "is kept instead.",
            )
        return cleaned

    def first_error(self) -> str:
        return next(iter(e for errors in self.errors.values() for e in errors), "")


class LessonEditForm(ReasonForm):
    """A person's edit: the new wording and operation (the service checks the rules)."""

    text = forms.CharField(
        max_length=2000,
        strip=True,
        error_messages={"required": "A lesson is one imperative sentence; it cannot be blank."},
    )
    operation_key = forms.CharField(
        max_length=200,
        strip=True,
        error_messages={"required": "Name the operation the lesson is about."},
    )


def form_errors_from(form: forms.Form, exc) -> None:
    """Map an ``ApplicationError``'s fields onto the form, once for every UI form.

    A field the form does not have is reported as a form-wide error.
    """
    named = False
    for name in exc.fields or {}:
        if name in form.fields:
            form.add_error(name, exc.message)
            named = True
    if not named:
        form.add_error(None, exc.message)


class ConfirmUntrustedForm(ReasonForm):
    """Confirming a quarantined delta: a reason and an explicit "I have read it"."""

    acknowledge = forms.BooleanField(
        error_messages={
            "required": "Tick “I have read this content and confirm it is safe” to confirm it."
        },
    )

    field_order = ["acknowledge", "reason"]


class KnowledgeEditForm(ReasonForm):
    """A person's edit of a knowledge item; the knowledge service checks the rules
    (length, credentials, privileged categories), so its words reach the person."""

    content = forms.CharField(
        max_length=20000,
        strip=True,
        error_messages={"required": "Content cannot be blank."},
    )
    category = forms.ChoiceField(choices=[(c, c) for c in Category.values])
    context = forms.CharField(max_length=200, strip=True, required=False)
    entity = forms.CharField(max_length=200, strip=True, required=False)
    domain = forms.CharField(max_length=100, strip=True, required=False)
    sensitive = forms.BooleanField(required=False)

    def clean_context(self) -> str:
        return self.cleaned_data["context"] or "global"
