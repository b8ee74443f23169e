from __future__ import annotations

from django.db.models import Q

from memory.models import Agent, ApiToken, JobRun, Workspace


def dashboard_counts(*, workspace: Workspace) -> dict:
    """Counts for the dashboard; later issues add their queues here."""
    return {
        "agents": Agent.objects.filter(workspace=workspace).count(),
        "active_tokens": ApiToken.objects.filter(
            workspace=workspace, revoked_at__isnull=True
        ).count(),
        "recent_jobs": list(
            # Newest by id: the primary key index stops after five rows (see ops.JOB_RUN_ORDER).
            JobRun.objects.filter(Q(workspace=workspace) | Q(workspace__isnull=True)).order_by(
                "-id"
            )[:5]
        ),
    }
