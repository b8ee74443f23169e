"""Reads for agents and tokens, always scoped to one workspace."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Count, Prefetch, Q, QuerySet

from memory.models import Agent, ApiToken, ProjectLabel, Workspace

# An agent's card shows at most this many tokens (newest first); revoked tokens
# pile up over years and must not make the agents page grow without bound.
AGENT_TOKENS_SHOWN = 20


def agent_list(*, workspace: Workspace, name_contains: str = "") -> QuerySet[Agent]:
    """Agents of ``workspace`` by name with token counts and their newest tokens prefetched."""
    tokens = ApiToken.objects.select_related("created_by").order_by("-created_at", "-id")
    qs = (
        Agent.objects.filter(workspace=workspace)
        .annotate(
            active_token_count=Count("tokens", filter=Q(tokens__revoked_at__isnull=True)),
            token_count=Count("tokens"),
        )
        .prefetch_related(
            Prefetch("tokens", queryset=tokens[:AGENT_TOKENS_SHOWN], to_attr="recent_tokens")
        )
    )
    if name_contains:
        qs = qs.filter(name__icontains=name_contains)
    return qs.order_by("name", "id")


def agent_get(*, workspace: Workspace, pk) -> Agent | None:
    """The agent ``pk`` if it belongs to ``workspace``; None for other workspaces' ids too."""
    return agent_list(workspace=workspace).filter(pk=pk).first()


def token_get(*, workspace: Workspace, pk) -> ApiToken | None:
    return (
        ApiToken.objects.select_related("agent", "created_by")
        .filter(workspace=workspace, pk=pk)
        .first()
    )


def token_active_count(*, workspace: Workspace) -> int:
    return ApiToken.objects.filter(workspace=workspace, revoked_at__isnull=True).count()


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
