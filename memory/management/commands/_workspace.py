"""The workspace an operator command names: refused when missing, unless asked to create it."""

from django.core.management.base import CommandError

from memory.identity.services import workspace_get_or_create
from memory.models import Workspace


def workspace_for(name: str, *, create: bool):
    """The workspace called ``name``; a missing one is an error unless ``create``.

    Returns ``(workspace, created)``. A mistyped name must not quietly make a new,
    empty workspace that the person then cannot find their data in.
    """
    workspace = Workspace.objects.filter(name=name).first()
    if workspace is not None:
        return workspace, False
    if not create:
        known = ", ".join(sorted(Workspace.objects.values_list("name", flat=True))[:10])
        raise CommandError(
            f"No workspace named {name!r}"
            + (f" (existing: {known})" if known else "")
            + ". Check the name, or add --create-workspace to create it."
        )
    return workspace_get_or_create(name=name), True
