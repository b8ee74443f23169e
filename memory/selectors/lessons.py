"""Reads for outcomes and lessons: lists, history, plan-time context, decision-time check.

Plan-time context (``context_build``) is deterministic: the ``stable`` text is
the same bytes for the same state. Lessons are ranked by confidence x recency,
recency = exp(-days since the lesson's last evidence / 30), where the last
evidence is its creation or its last confidence change other than decay.
Serving a lesson refreshes ``last_used_at`` (so it does not decay) but is not
evidence, so it does not lift the lesson's rank: retrieval cannot feed itself.
Since every score shares the factor exp(-now/30), the order depends on the
state only, never on the clock. At most 5 lessons within 300 tokens, tokens
estimated as ceil(characters / 4); a lesson that does not fit is skipped.
"""

from __future__ import annotations

import hashlib
import math
from datetime import datetime

from django.conf import settings
from django.db.models import (
    Count,
    DateTimeField,
    F,
    FloatField,
    IntegerField,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
)
from django.db.models.functions import Coalesce, Greatest

from cairn.errors import NotFoundError
from memory.models import (
    AuditEvent,
    Category,
    ConfidenceCause,
    ConfidenceChange,
    Knowledge,
    KnowledgeStatus,
    Lesson,
    LessonEvidence,
    LessonScope,
    LessonState,
    Outcome,
    TargetType,
    Workspace,
)
from memory.selectors.memory_block import memory_block
from memory.selectors.ops import audit_event_for_targets

DAY_S = 86400.0
BIGINT_MAX = 2**63 - 1
LESSONS_HEADING = "Lessons (earned from verified outcomes):"
ERRORS_HEADING = "Known errors for this operation:"
CHECK_MAX_LESSONS = 10


def estimate_tokens(text: str) -> int:
    """A deliberately simple, model-independent estimate: ceil(chars / 4)."""
    return math.ceil(len(text) / 4)


# --- activity (shared with decay) -------------------------------------------------------------


def _ledger(target_type: str):
    return ConfidenceChange.objects.filter(target_type=target_type, target_id=OuterRef("pk"))


def with_activity(queryset: QuerySet, *, target_type: str) -> QuerySet:
    """Annotate ``evidence_at`` (creation or last non-decay confidence change),
    ``activity_at`` (that or the last use, whichever is later) and ``decayed_since``
    (the decay the ledger recorded after ``activity_at``)."""
    last_change = (
        _ledger(target_type).exclude(cause=ConfidenceCause.DECAY).order_by("-at").values("at")[:1]
    )
    queryset = queryset.annotate(
        evidence_at=Greatest(
            F("created_at"),
            Coalesce(Subquery(last_change, output_field=DateTimeField()), F("created_at")),
        )
    ).annotate(
        activity_at=Greatest(F("evidence_at"), Coalesce(F("last_used_at"), F("evidence_at")))
    )
    decayed = (
        _ledger(target_type)
        .filter(cause=ConfidenceCause.DECAY, at__gt=OuterRef("activity_at"))
        .order_by()
        .values("target_id")
        .annotate(total=Sum(F("before") - F("after")))
        .values("total")
    )
    return queryset.annotate(
        decayed_since=Coalesce(Subquery(decayed, output_field=FloatField()), Value(0.0))
    )


def idle_days(*, activity_at: datetime, now: datetime) -> float:
    return max(0.0, (now - activity_at).total_seconds() / DAY_S)


def recency(*, evidence_at: datetime, now: datetime) -> float:
    """exp(-days since the last evidence / 30). Serving is not evidence: it does not count."""
    days = idle_days(activity_at=evidence_at, now=now)
    return math.exp(-days / settings.CAIRN_LESSON_RECENCY_DAYS)


# --- outcomes and lessons ---------------------------------------------------------------------


def lesson_ancestors(*, lesson: Lesson) -> list[Lesson]:
    """Every row that was superseded into ``lesson``, directly or not (breadth first)."""
    seen: dict[int, Lesson] = {}
    frontier = [lesson.pk]
    while frontier:
        rows = list(Lesson.objects.filter(superseded_by_id__in=frontier).exclude(pk__in=seen))
        for row in rows:
            seen[row.pk] = row
        frontier = [row.pk for row in rows]
    return list(seen.values())


def lesson_head(*, lesson: Lesson) -> Lesson:
    """The current row of a lesson's lineage (follows ``superseded_by``)."""
    seen = {lesson.pk}
    while lesson.superseded_by_id is not None and lesson.superseded_by_id not in seen:
        seen.add(lesson.superseded_by_id)
        lesson = Lesson.objects.get(pk=lesson.superseded_by_id)
    return lesson


def outcome_get(*, workspace: Workspace, outcome_id: int) -> Outcome:
    outcome = (
        Outcome.objects.filter(workspace=workspace, pk=outcome_id).first()
        if 0 < outcome_id <= BIGINT_MAX
        else None
    )
    if outcome is None:
        raise NotFoundError(f"No outcome {outcome_id} in this workspace.")
    return outcome


def _with_evidence(queryset: QuerySet) -> QuerySet:
    return queryset.prefetch_related(
        Prefetch(
            "evidence",
            queryset=LessonEvidence.objects.select_related("outcome").order_by("created_at", "id"),
        ),
        Prefetch(
            "supersedes", queryset=Lesson.objects.only("id", "superseded_by_id", "supersede_reason")
        ),
    )


def lesson_get(*, workspace: Workspace, lesson_id: int) -> Lesson:
    """A lesson of this workspace (any state); 404 for another workspace's, as for a missing id."""
    if not 0 < lesson_id <= BIGINT_MAX:
        raise NotFoundError(f"No lesson {lesson_id} in this workspace.")
    lesson = _with_evidence(Lesson.objects.filter(workspace=workspace, pk=lesson_id)).first()
    if lesson is None:
        raise NotFoundError(f"No lesson {lesson_id} in this workspace.")
    return lesson


def lesson_scope_filter(*, project_digest: str) -> Q:
    """Lessons that apply in a project: that project's and the global ones."""
    scope = Q(scope=LessonScope.GLOBAL)
    if project_digest:
        scope |= Q(scope=LessonScope.PROJECT, project_digest=project_digest)
    return scope


def lesson_list(
    *,
    workspace: Workspace,
    state: str | None = None,
    scope: str | None = None,
    operation_key: str | None = None,
    project_digest: str | None = None,
    include_superseded: bool = False,
) -> QuerySet:
    lessons = Lesson.objects.filter(workspace=workspace)
    if not include_superseded:
        lessons = lessons.filter(superseded_by__isnull=True)
    if state:
        lessons = lessons.filter(state=state)
    if scope:
        lessons = lessons.filter(scope=scope)
    if operation_key:
        lessons = lessons.filter(operation_key=operation_key)
    if project_digest:
        lessons = lessons.filter(lesson_scope_filter(project_digest=project_digest))
    return _with_evidence(lessons.order_by("-created_at", "-id"))


def lesson_evidence_summary(lesson: Lesson) -> dict:
    """Outcome ids that support and that contradicted this row (uses the prefetch)."""
    rows = list(lesson.evidence.all())
    return {
        "evidence": [r.outcome_id for r in rows if r.relation == LessonEvidence.Relation.SUPPORTS],
        "contradicted_by": [
            r.outcome_id for r in rows if r.relation == LessonEvidence.Relation.CONTRADICTS
        ],
        "sources": sorted(
            s.pk for s in lesson.supersedes.all() if s.supersede_reason == "promoted"
        ),
    }


def lesson_history(*, lesson: Lesson) -> dict:
    """The whole lineage around ``lesson``: its current row and every row superseded into
    it, oldest first, each with its evidence (outcome ids) and its ledger."""
    head = lesson_head(lesson=lesson)
    ids = [head.pk] + [row.pk for row in lesson_ancestors(lesson=head)]
    rows = list(_with_evidence(Lesson.objects.filter(pk__in=ids)).order_by("created_at", "id"))
    changes: dict[int, list[dict]] = {pk: [] for pk in ids}
    for change in ConfidenceChange.objects.filter(
        target_type=TargetType.LESSON, target_id__in=ids
    ).order_by("at", "id"):
        changes[change.target_id].append(
            {
                "before": change.before,
                "after": change.after,
                "kind": change.kind,
                "cause": change.cause,
                "evidence_id": change.evidence_id,
                "at": change.at,
            }
        )
    versions = []
    for row in rows:
        versions.append(
            {
                "lesson": row,
                "outcomes": [
                    {
                        "id": ev.outcome_id,
                        "outcome_id": ev.outcome.outcome_id,
                        "relation": ev.relation,
                        "passed": ev.outcome.passed,
                        "at": ev.created_at,
                    }
                    for ev in row.evidence.all()
                ],
                "changes": changes[row.pk],
            }
        )
    return {"id": head.pk, "versions": versions}


# --- plan time and decision time ----------------------------------------------------------------


def _served_lessons(*, workspace: Workspace, project_digest: str) -> QuerySet:
    return Lesson.objects.filter(
        lesson_scope_filter(project_digest=project_digest),
        workspace=workspace,
        superseded_by__isnull=True,
        state=LessonState.ACTIVE,
    )


def _error_items(*, workspace: Workspace, context: str | None) -> QuerySet:
    contexts = sorted({"global"} | ({context} if context else set()))
    return Knowledge.objects.filter(
        workspace=workspace,
        category=Category.ERROR,
        status=KnowledgeStatus.ACTIVE,
        superseded_by__isnull=True,
        sensitive=False,
        context__in=contexts,
    ).order_by("-pinned", "-confidence", "id")


def _lesson_line(lesson: Lesson) -> str:
    return f"- {lesson.text}"


def _error_json(item: Knowledge) -> dict:
    return {
        "id": item.pk,
        "content": item.content,
        "operation_key": item.operation_key,
        "confidence": item.confidence,
    }


def _lesson_json(lesson: Lesson, score: float | None = None) -> dict:
    body = {
        "id": lesson.pk,
        "text": lesson.text,
        "operation_key": lesson.operation_key,
        "scope": lesson.scope,
        "confidence": lesson.confidence,
    }
    if score is not None:
        body["score"] = round(score, 6)
    return body


def context_build(
    *,
    workspace: Workspace,
    project_digest: str,
    context: str | None,
    now: datetime,
) -> dict:
    """Plan-time context: ``{text, stable, dynamic, digest, lessons, errors, blockers, memory}``.

    Blockers are situations, which are not built yet: always ``[]``.
    """
    candidates = with_activity(
        _served_lessons(workspace=workspace, project_digest=project_digest),
        target_type=TargetType.LESSON,
    )
    ranked = sorted(
        (
            (lesson.confidence * recency(evidence_at=lesson.evidence_at, now=now), lesson)
            for lesson in candidates
        ),
        key=lambda pair: (-pair[0], -pair[1].confidence, pair[1].pk),
    )
    chosen: list[tuple[float, Lesson]] = []
    budget = settings.CAIRN_CONTEXT_LESSON_TOKENS
    for score, lesson in ranked:
        if len(chosen) >= settings.CAIRN_CONTEXT_MAX_LESSONS:
            break
        lines = [_lesson_line(item) for _, item in chosen] + [_lesson_line(lesson)]
        if estimate_tokens("\n".join([LESSONS_HEADING, *lines])) <= budget:
            chosen.append((score, lesson))
    lessons_text = (
        "\n".join([LESSONS_HEADING, *(_lesson_line(lesson) for _, lesson in chosen)])
        if chosen
        else ""
    )
    errors = list(
        _error_items(workspace=workspace, context=context)[: settings.CAIRN_CONTEXT_MAX_ERRORS]
    )
    memory = memory_block(workspace=workspace, context=context, now=now)
    stable = "\n\n".join(part for part in (lessons_text, memory["stable"]) if part)
    dynamic = memory["dynamic"]
    return {
        "text": "\n\n".join(part for part in (stable, dynamic) if part),
        "stable": stable,
        "dynamic": dynamic,
        "digest": hashlib.sha256(stable.encode()).hexdigest(),
        "lessons_tokens": estimate_tokens(lessons_text),
        "lessons": [_lesson_json(lesson, score) for score, lesson in chosen],
        "errors": [_error_json(item) for item in errors],
        "blockers": [],
        "memory": memory,
        "served": {
            "lessons": [lesson.pk for _, lesson in chosen],
            "knowledge": sorted({item.pk for item in errors} | {i["id"] for i in memory["items"]}),
        },
    }


def lesson_check(
    *, workspace: Workspace, project_digest: str, operation_key: str, context: str | None
) -> dict:
    """Decision time: the lessons (about or warning against this operation), known errors
    and blockers for one operation, with a one-line preamble."""
    lessons = list(
        _served_lessons(workspace=workspace, project_digest=project_digest)
        .filter(Q(operation_key=operation_key) | Q(avoid_operation_key=operation_key))
        .order_by("-confidence", "id")[:CHECK_MAX_LESSONS]
    )
    errors = list(
        _error_items(workspace=workspace, context=context).filter(operation_key=operation_key)[
            : settings.CAIRN_CONTEXT_MAX_ERRORS
        ]
    )
    parts = []
    if errors:
        parts.append(
            f"A previous run of {operation_key} failed: " + " | ".join(e.content for e in errors)
        )
    if lessons:
        parts.append("The lessons on file say: " + " ".join(lesson.text for lesson in lessons))
    return {
        "operation_key": operation_key,
        "text": "\n".join(parts),
        "lessons": [_lesson_json(lesson) for lesson in lessons],
        "errors": [_error_json(item) for item in errors],
        "blockers": [],
        "served": {
            "lessons": [lesson.pk for lesson in lessons],
            "knowledge": [item.pk for item in errors],
        },
    }


# --- the review UI's lessons browser --------------------------------------------------------

# Sort orders offered by the browser; each ends in the primary key so keyset paging works.
LESSON_ORDERS = {
    "new": ("-created_at", "-id"),
    "strong": ("-confidence", "-id"),
    "weak": ("confidence", "id"),
}


def _evidence_count(relation: str) -> Subquery:
    rows = (
        LessonEvidence.objects.filter(lesson=OuterRef("pk"), relation=relation)
        .order_by()
        .values("lesson")
        .annotate(n=Count("id"))
        .values("n")
    )
    return Coalesce(Subquery(rows, output_field=IntegerField()), Value(0))


def lesson_browse(
    *,
    workspace: Workspace,
    scope: str = "",
    project_digest: str = "",
    state: str = "",
    operation_key: str = "",
    q: str = "",
) -> QuerySet[Lesson]:
    """Current lesson rows (one per lineage), filtered, each with its evidence counts.

    ``project_digest`` means that project's own lessons (not the global ones too);
    ``q`` matches the text or the operation, case-insensitively.
    """
    lessons = Lesson.objects.filter(workspace=workspace, superseded_by__isnull=True)
    if scope in LessonScope.values:
        lessons = lessons.filter(scope=scope)
    if project_digest:
        lessons = lessons.filter(scope=LessonScope.PROJECT, project_digest=project_digest)
    if state in LessonState.values:
        lessons = lessons.filter(state=state)
    if operation_key:
        lessons = lessons.filter(operation_key=operation_key)
    if q:
        lessons = lessons.filter(Q(text__icontains=q) | Q(operation_key__icontains=q))
    return lessons.annotate(
        evidence_count=_evidence_count(LessonEvidence.Relation.SUPPORTS),
        contradiction_count=_evidence_count(LessonEvidence.Relation.CONTRADICTS),
    )


def lesson_projects(*, workspace: Workspace) -> list[str]:
    """Digests of the projects that have current lessons (for the filter; bounded)."""
    return list(
        Lesson.objects.filter(
            workspace=workspace, superseded_by__isnull=True, scope=LessonScope.PROJECT
        )
        .order_by("project_digest")
        .values_list("project_digest", flat=True)
        .distinct()[: settings.CAIRN_UI_PROJECTS_MAX]
    )


def lesson_lineage_activity(*, workspace: Workspace, lesson_ids: list[int]) -> list[AuditEvent]:
    """What people, agents and jobs did to these rows, newest first (bounded)."""
    return audit_event_for_targets(workspace=workspace, target_type="lesson", target_ids=lesson_ids)
