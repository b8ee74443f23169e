from django import forms


class ReasonForm(forms.Form):
    """The reason every confirm-with-reason action records in the audit log."""

    reason = forms.CharField(
        max_length=500,
        strip=True,
        error_messages={"required": "Say why: the reason is kept in the audit log."},
    )

    def first_error(self) -> str:
        return next(iter(e for errors in self.errors.values() for e in errors), "")


class ConfirmUntrustedForm(ReasonForm):
    """Confirming a quarantined delta: a reason and an explicit "I have read it"."""

    acknowledge = forms.BooleanField(
        error_messages={
            "required": "Tick “I have read this content and confirm it is safe” to confirm it."
        },
    )

    field_order = ["acknowledge", "reason"]
