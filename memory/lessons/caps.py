"""The cap on live lessons: beyond it per project scope (and globally), the weakest are
retired by maintenance."""

from __future__ import annotations

from collections import defaultdict

from django.conf import settings
from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from memory.lessons.evidence import lesson_retire_system
from memory.models import Lesson, LessonScope, LessonState, Workspace


def lesson_caps_enforce(*, workspace: Workspace | None = None, now=None) -> dict:
    """Beyond the cap of live lessons per project scope (and globally), retire the lowest
    confidence ones (oldest first on ties; pinned lessons are never retired by the cap)."""
    now = now or timezone.now()
    caps = {
        LessonScope.PROJECT: settings.CAIRN_LESSON_CAP_PER_PROJECT,
        LessonScope.GLOBAL: settings.CAIRN_LESSON_CAP_GLOBAL,
    }
    live = Lesson.objects.filter(superseded_by__isnull=True).exclude(state=LessonState.RETIRED)
    if workspace is not None:
        live = live.filter(workspace=workspace)
    groups = (
        live.values("workspace_id", "scope", "project_digest")
        .annotate(n=Count("id"))
        .filter(n__gt=min(caps.values()))
        .order_by("workspace_id", "scope", "project_digest")
    )
    counts: dict = defaultdict(int)
    for group in groups:
        excess = group["n"] - caps[group["scope"]]
        if excess <= 0:
            continue
        with transaction.atomic():
            victims = list(
                live.select_for_update()
                .filter(
                    workspace_id=group["workspace_id"],
                    scope=group["scope"],
                    project_digest=group["project_digest"],
                    pinned=False,
                )
                .select_related("workspace")
                .order_by("confidence", "created_at", "id")[:excess]
            )
            for lesson in victims:
                lesson_retire_system(
                    lesson=lesson,
                    actor="system:maintenance",
                    reason=f"over the cap of {caps[group['scope']]} live {group['scope']} lessons",
                    now=now,
                )
                counts["lessons_retired_by_cap"] += 1
    return {
        "lessons_retired_by_cap": counts["lessons_retired_by_cap"],
        "groups_checked": len(groups),
    }
