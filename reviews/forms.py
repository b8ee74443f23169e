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
