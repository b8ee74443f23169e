"""Project names people gave to digests (the UI shows a short digest otherwise)."""

from __future__ import annotations

from collections.abc import Iterable

from memory.models import ProjectLabel, Workspace

DIGEST_SHORT = 10


def project_labels(*, workspace: Workspace, digests: Iterable[str]) -> dict[str, str]:
    """``{digest: label}`` for the digests that have a label (one query)."""
    wanted = sorted({d for d in digests if d})
    if not wanted:
        return {}
    return dict(
        ProjectLabel.objects.filter(workspace=workspace, project_digest__in=wanted).values_list(
            "project_digest", "label"
        )
    )
