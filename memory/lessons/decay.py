"""Decay: a function of idle time, never of how many times the job ran (SPEC section 7).

For every live, unpinned lesson and knowledge item:

1. *Last activity* = the latest of its creation, its last use (recall,
   serving, a self-report) and its last confidence change that was not decay
   (evidence, a person, reconcile).
2. *Confidence at last activity* = its confidence now plus the decay the
   ledger recorded since then (decay rows never count as activity).
3. The target confidence is that anchor decayed for the idle days:
   lessons -0.02 per 7 idle days; knowledge x0.9 per 30 idle days once idle
   30 days (category ``skill``: x0.85 per 14 idle days).
4. Only a target below the current confidence is written (through
   ``confidence_apply``, cause ``decay``), so a second run the same day
   changes nothing.
5. Lessons left below 0.2 are retired; knowledge idle 90 days is archived
   (``knowledge_restore`` brings it back). Pinned items are exempt from all of it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from cairn.errors import ApplicationError
from memory.core.actors import Actor
from memory.core.audit import audit_record
from memory.knowledge.services import knowledge_restore as knowledge_restore_item
from memory.lessons.evidence import confidence_apply, lesson_retire_system
from memory.lessons.selectors import idle_days, with_activity
from memory.models import (
    Category,
    Channel,
    ConfidenceCause,
    Knowledge,
    KnowledgeStatus,
    Lesson,
    LessonState,
    TargetType,
    Workspace,
)

_EPSILON = 1e-6


def lesson_decay_target(*, anchor: float, idle: float) -> float:
    steps = math.floor(idle / settings.CAIRN_LESSON_DECAY_PERIOD_DAYS)
    return max(
        settings.CAIRN_LESSON_CONFIDENCE_MIN, anchor - steps * settings.CAIRN_LESSON_DECAY_STEP
    )


def knowledge_decay_target(*, anchor: float, idle: float, category: str) -> float:
    if category == Category.SKILL:
        factor, period, grace = (
            settings.CAIRN_SKILL_DECAY_FACTOR,
            settings.CAIRN_SKILL_DECAY_PERIOD_DAYS,
            settings.CAIRN_SKILL_DECAY_PERIOD_DAYS,
        )
    else:
        factor, period, grace = (
            settings.CAIRN_KNOWLEDGE_DECAY_FACTOR,
            settings.CAIRN_KNOWLEDGE_DECAY_PERIOD_DAYS,
            settings.CAIRN_KNOWLEDGE_DECAY_GRACE_DAYS,
        )
    if idle < grace:
        return anchor
    return anchor * factor ** math.floor(idle / period)


def decay_run(*, now: datetime | None = None) -> dict:
    """One decay pass over every workspace; returns counts for the JobRun."""
    now = now or timezone.now()
    counts: dict[str, int] = defaultdict(int)
    per_workspace: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    _decay_lessons(now=now, counts=counts, per_workspace=per_workspace)
    _decay_knowledge(now=now, counts=counts, per_workspace=per_workspace)
    for workspace_id, ws_counts in sorted(per_workspace.items()):
        audit_record(
            workspace=Workspace.objects.get(pk=workspace_id),
            actor="system:decay",
            action="decay.run",
            target_type="workspace",
            target_id=workspace_id,
            details=dict(ws_counts),
        )
    keys = (
        "lessons_checked",
        "lessons_decayed",
        "lessons_retired",
        "knowledge_checked",
        "knowledge_decayed",
        "knowledge_archived",
    )
    return {key: counts[key] for key in keys}


def _decay_lessons(*, now, counts, per_workspace) -> None:
    live = (
        Lesson.objects.filter(superseded_by__isnull=True, pinned=False)
        .exclude(state=LessonState.RETIRED)
        .order_by("id")
    )
    rows = with_activity(live, target_type=TargetType.LESSON).values_list(
        "pk", "confidence", "activity_at", "decayed_since"
    )
    for pk, confidence, activity_at, decayed_since in rows.iterator(chunk_size=500):
        counts["lessons_checked"] += 1
        anchor = confidence + decayed_since
        target = lesson_decay_target(
            anchor=anchor, idle=idle_days(activity_at=activity_at, now=now)
        )
        decays = target < confidence - _EPSILON
        retires = min(target, confidence) < settings.CAIRN_LESSON_RETIRE_BELOW
        if not (decays or retires):
            continue
        with transaction.atomic():
            lesson = Lesson.objects.select_for_update().select_related("workspace").get(pk=pk)
            if (
                abs(lesson.confidence - confidence) > _EPSILON
                or lesson.state == LessonState.RETIRED
            ):
                continue  # evidence landed meanwhile: the next run sees the new activity
            if decays and confidence_apply(
                target=lesson,
                new=target,
                cause=ConfidenceCause.DECAY,
                kind="idle",
                at=now,
                channel=Channel.SYSTEM,
            ):
                counts["lessons_decayed"] += 1
                per_workspace[lesson.workspace_id]["lessons_decayed"] += 1
            if lesson.confidence < settings.CAIRN_LESSON_RETIRE_BELOW:
                lesson_retire_system(
                    lesson=lesson,
                    actor="system:decay",
                    reason=f"decayed below {settings.CAIRN_LESSON_RETIRE_BELOW} after "
                    f"{idle_days(activity_at=activity_at, now=now):.0f} idle days",
                    now=now,
                )
                counts["lessons_retired"] += 1
                per_workspace[lesson.workspace_id]["lessons_retired"] += 1


def _decay_knowledge(*, now, counts, per_workspace) -> None:
    live = Knowledge.objects.filter(
        status=KnowledgeStatus.ACTIVE, superseded_by__isnull=True, pinned=False
    ).order_by("id")
    rows = with_activity(live, target_type=TargetType.KNOWLEDGE).values_list(
        "pk", "confidence", "category", "activity_at", "decayed_since"
    )
    archive_after = settings.CAIRN_KNOWLEDGE_ARCHIVE_IDLE_DAYS
    for pk, confidence, category, activity_at, decayed_since in rows.iterator(chunk_size=500):
        counts["knowledge_checked"] += 1
        idle = idle_days(activity_at=activity_at, now=now)
        target = knowledge_decay_target(
            anchor=confidence + decayed_since, idle=idle, category=category
        )
        decays = target < confidence - _EPSILON
        archives = idle >= archive_after
        if not (decays or archives):
            continue
        with transaction.atomic():
            item = Knowledge.objects.select_for_update().select_related("workspace").get(pk=pk)
            if (
                abs(item.confidence - confidence) > _EPSILON
                or item.status != KnowledgeStatus.ACTIVE
            ):
                continue
            if decays and confidence_apply(
                target=item,
                new=target,
                cause=ConfidenceCause.DECAY,
                kind="idle",
                at=now,
                channel=Channel.SYSTEM,
            ):
                counts["knowledge_decayed"] += 1
                per_workspace[item.workspace_id]["knowledge_decayed"] += 1
            if archives:
                Knowledge.objects.filter(pk=pk).update(
                    status=KnowledgeStatus.ARCHIVED, archived_at=now, updated_at=now
                )
                audit_record(
                    workspace=item.workspace,
                    actor="system:decay",
                    action="knowledge.archive",
                    target_type="knowledge",
                    target_id=pk,
                    reason=f"idle {idle:.0f} days (archive after {archive_after})",
                )
                counts["knowledge_archived"] += 1
                per_workspace[item.workspace_id]["knowledge_archived"] += 1


def knowledge_restore(
    *, knowledge: Knowledge, actor: Actor, now: datetime | None = None
) -> Knowledge:
    """Bring an archived item back in one action (its idle clock restarts).

    The rule lives in ``memory.knowledge.services.knowledge_restore``; this keeps the
    decay module's name for it, with a person named by ``actor``.
    """
    if knowledge.status != KnowledgeStatus.ARCHIVED:
        raise ApplicationError(
            f"Knowledge item {knowledge.pk} is not archived.", code="not_archived"
        )
    return knowledge_restore_item(
        workspace=knowledge.workspace,
        item_id=knowledge.pk,
        actor=actor,
        now=now,
    )
