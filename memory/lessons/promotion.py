"""Promotion and demotion: a project lesson confirmed in enough projects becomes
global; a global lesson contradicted in a project gets a project-scoped reversal."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Exists, F, OuterRef

from memory.core.audit import audit_record
from memory.lessons.lifecycle import (
    RELATION_SUPPORTS,
    current_lessons,
    lesson_evidence_copy,
    lesson_supersede,
)
from memory.models import (
    Channel,
    Lesson,
    LessonEvidence,
    LessonScope,
    LessonState,
    Outcome,
    SupersedeReason,
)


def _confirmed_projects(lessons: list[Lesson]) -> set[str]:
    """Projects in which these project lessons have a supporting outcome of their own project."""
    return set(
        LessonEvidence.objects.filter(
            lesson__in=lessons,
            relation=RELATION_SUPPORTS,
            outcome__project_digest=F("lesson__project_digest"),
        ).values_list("lesson__project_digest", flat=True)
    )


def _equivalent(*, workspace_id, operation_key, normalized_text):
    """Live, active project lessons saying the same thing, in any project."""
    return Lesson.objects.filter(
        workspace_id=workspace_id,
        operation_key=operation_key,
        normalized_text=normalized_text,
        scope=LessonScope.PROJECT,
        state=LessonState.ACTIVE,
        superseded_by__isnull=True,
    )


def _equivalent_elsewhere(*, workspace_id, operation_key, normalized_text, project_digest):
    """Live, active project lessons saying the same thing in another project."""
    return _equivalent(
        workspace_id=workspace_id, operation_key=operation_key, normalized_text=normalized_text
    ).exclude(project_digest=project_digest)


def promotion_twins_exist() -> Exists:
    """An annotation for a Lesson queryset: does another project hold an equivalent live,
    active lesson? (What ``lesson_promote_if_confirmed`` asks first; reading it with the
    lesson saves that query.)"""
    return Exists(
        _equivalent_elsewhere(
            workspace_id=OuterRef("workspace_id"),
            operation_key=OuterRef("operation_key"),
            normalized_text=OuterRef("normalized_text"),
            project_digest=OuterRef("project_digest"),
        )
    )


@transaction.atomic(savepoint=False)
def lesson_promote_if_confirmed(
    *, lesson: Lesson, now=None, twins: bool | None = None
) -> Lesson | None:
    """The same lesson confirmed in two distinct projects becomes one global lesson.

    1. Lock the live, active project lessons with the same operation and
       equivalent text; keep those confirmed in their own project.
    2. With two or more projects among them, supersede them all by one global
       row (a live equivalent global row if there is one, else a new one at the
       highest member confidence) that inherits their evidence.
    3. Record the promotion in the audit log.

    ``twins``: what the caller read with ``promotion_twins_exist()`` in this
    transaction (None: ask now).
    """
    if lesson.scope != LessonScope.PROJECT or lesson.superseded_by_id is not None:
        return None
    if twins is None:
        twins = _equivalent_elsewhere(
            workspace_id=lesson.workspace_id,
            operation_key=lesson.operation_key,
            normalized_text=lesson.normalized_text,
            project_digest=lesson.project_digest,
        ).exists()
    if not twins:
        return None  # the common case: no other project says the same thing
    equivalent = _equivalent(
        workspace_id=lesson.workspace_id,
        operation_key=lesson.operation_key,
        normalized_text=lesson.normalized_text,
    )
    members = list(equivalent.select_for_update().order_by("id"))
    projects = _confirmed_projects(members)
    if len(projects) < 2:
        return None
    members = [m for m in members if m.project_digest in projects]
    best = max(members, key=lambda m: (m.confidence, -m.pk))
    target = (
        current_lessons(lesson.workspace)
        .filter(
            scope=LessonScope.GLOBAL,
            operation_key=lesson.operation_key,
            normalized_text=lesson.normalized_text,
        )
        .order_by("id")
        .first()
    )
    if target is None:
        target = Lesson.objects.create(
            workspace_id=lesson.workspace_id,
            agent=None,
            text=best.text,
            normalized_text=best.normalized_text,
            operation_key=best.operation_key,
            avoid_operation_key=best.avoid_operation_key,
            target=best.target,
            scope=LessonScope.GLOBAL,
            project_digest="",
            confidence=best.confidence,
            birth_confidence=best.confidence,
            state=LessonState.ACTIVE,
            source=best.source,
            channel=Channel.SYSTEM,
            pinned=any(m.pinned for m in members),
            sealed=any(m.sealed for m in members),
            use_count=sum(m.use_count for m in members),
            last_used_at=max((m.last_used_at for m in members if m.last_used_at), default=None),
        )
    for member in members:
        lesson_evidence_copy(source=member, target=target)
        lesson_supersede(member, by=target, reason=SupersedeReason.PROMOTED)
    audit_record(
        workspace=lesson.workspace,
        actor="system:promotion",
        action="lesson.promote",
        target_type="lesson",
        target_id=target.pk,
        reason=f"confirmed in {len(projects)} distinct projects",
        details={"sources": [m.pk for m in members], "projects": len(projects)},
    )
    return target


@transaction.atomic(savepoint=False)
def lesson_demote_if_foreign(*, lesson: Lesson, outcome: Outcome, now=None) -> Lesson | None:
    """A global lesson contradicted from a project that never confirmed it goes back to the
    project that last confirmed it (a new project row inheriting that project's evidence)."""
    if lesson.scope != LessonScope.GLOBAL:
        return None
    lesson = Lesson.objects.select_for_update().get(pk=lesson.pk)
    if (
        lesson.scope != LessonScope.GLOBAL
        or lesson.superseded_by_id is not None
        or lesson.state == LessonState.RETIRED
    ):
        return None
    supports = list(
        LessonEvidence.objects.filter(lesson=lesson, relation=RELATION_SUPPORTS)
        .select_related("outcome")
        .order_by("-outcome__created_at", "-outcome_id")
    )
    projects = {row.outcome.project_digest for row in supports}
    if not projects or outcome.project_digest in projects:
        return None
    last_project = supports[0].outcome.project_digest
    demoted = Lesson.objects.create(
        workspace_id=lesson.workspace_id,
        agent=lesson.agent,
        channel=Channel.SYSTEM,
        text=lesson.text,
        normalized_text=lesson.normalized_text,
        operation_key=lesson.operation_key,
        avoid_operation_key=lesson.avoid_operation_key,
        target=lesson.target,
        scope=LessonScope.PROJECT,
        project_digest=last_project,
        confidence=lesson.confidence,
        birth_confidence=lesson.confidence,
        state=lesson.state,
        source=lesson.source,
        pinned=lesson.pinned,
        sealed=lesson.sealed,
        use_count=lesson.use_count,
        last_used_at=lesson.last_used_at,
    )
    lesson_evidence_copy(source=lesson, target=demoted, only_project=last_project)
    lesson_supersede(lesson, by=demoted, reason=SupersedeReason.DEMOTED)
    audit_record(
        workspace=lesson.workspace,
        actor="system:demotion",
        action="lesson.demote",
        target_type="lesson",
        target_id=lesson.pk,
        reason=f"contradicted by outcome {outcome.pk} from a project that never confirmed it",
        details={"demoted_to": demoted.pk, "outcome": outcome.pk},
    )
    return demoted
