"""The rows computed from rows a selector matches: what goes with them (summaries of
erased turns, error items of erased tool calls, lessons whose only evidence is
erased, facts and umbrellas of erased deltas), what is rebuilt without them (the
confidence of what keeps other evidence), and rows that name them by id without a
foreign key (ledger, review pairs, pair decisions).

Each function reads a plan only through ``PlanRows``: the map (``datamap``) builds
the plan and names these functions, so they must not import it."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib.postgres.expressions import ArraySubquery
from django.db import models
from django.db.models import Exists, F, OuterRef, Q, QuerySet
from django.db.models.fields.json import KT, KeyTransform

from memory.models import ConfidenceChange, Evidence, Knowledge, Lesson, LessonEvidence
from memory.privacy.tables import PlanRows


class _JsonListOverlaps(models.Func):
    """``column->key`` (a JSON list of strings) shares an element with an array subquery.

    Compiled with the column's own alias, so it works inside subqueries too.
    """

    output_field = models.BooleanField()

    def __init__(self, column: str, key: str, array):
        super().__init__(F(column), array)
        self.key = key

    def as_sql(self, compiler, connection, **extra):
        col_sql, col_params = compiler.compile(self.source_expressions[0])
        arr_sql, arr_params = compiler.compile(self.source_expressions[1])
        ref = f"({col_sql} -> %s)"
        sql = (
            f"(CASE WHEN jsonb_typeof({ref}) = 'array' THEN {ref} ELSE '[]'::jsonb END)"
            f" ?| ({arr_sql})::text[]"
        )
        return sql, (*col_params, self.key, *col_params, self.key, *arr_params)


def _json_elements(column: str, key: str) -> models.Func:
    return models.Func(
        KeyTransform(key, column),
        function="jsonb_array_elements_text",
        output_field=models.TextField(),
    )


def knowledge_from_turns(plan: PlanRows) -> QuerySet:
    """Summaries and extracted items built from erased turns name their sessions."""
    sessions = plan.direct("memory.ConversationTurn").values("session_id")
    return (
        plan.scoped("memory.Knowledge")
        .alias(_session=KT("metadata__session_id"))
        .filter(
            Q(_session__in=sessions)
            | Q(_JsonListOverlaps("metadata", "sessions", ArraySubquery(sessions))),
            source__in=["consolidation", "extract"],
        )
    )


def errors_from_tool_calls(plan: PlanRows) -> QuerySet:
    """An error item is built from failed tool calls on its operation."""
    failed = plan.direct("memory.ToolCall").filter(ok=False)
    return (
        plan.scoped("memory.Knowledge")
        .alias(_session=KT("metadata__session_id"))
        .filter(
            Q(operation_key__in=failed.values("operation_key"))
            | Q(_session__in=failed.values("session_id")),
            category="error",
        )
    )


def lessons_only_from(plan: PlanRows) -> QuerySet:
    """Lessons with evidence, all of it from erased outcomes."""
    erased = plan.direct("memory.Outcome")
    any_erased = LessonEvidence.objects.filter(lesson=OuterRef("pk"), outcome__in=erased)
    any_kept = LessonEvidence.objects.filter(lesson=OuterRef("pk")).exclude(outcome__in=erased)
    posted_kept = Evidence.objects.filter(target_type="lesson", target_id=OuterRef("pk")).exclude(
        pk__in=plan.direct("memory.Evidence")
    )
    return (
        plan.scoped("memory.Lesson")
        .filter(Exists(any_erased))
        .exclude(Exists(any_kept))
        .exclude(Exists(posted_kept))
    )


def confidence_owners(plan: PlanRows, limit: int) -> list[tuple[str, int]]:
    """Lessons and knowledge items that keep living but cite erased evidence: an
    evidence link to an erased outcome, or a ledger row citing one (or citing
    posted evidence that is erased)."""
    going = {
        "lesson": Lesson.objects.filter(plan.going("memory.Lesson")).values("pk"),
        "knowledge": Knowledge.objects.filter(plan.going("memory.Knowledge")).values("pk"),
    }
    lessons = set(
        LessonEvidence.objects.filter(
            lesson__workspace=plan.workspace, outcome__in=plan.direct("memory.Outcome")
        )
        .exclude(lesson__in=going["lesson"])
        .order_by("lesson_id")
        .values_list("lesson_id", flat=True)
        .distinct()[:limit]
    )
    owners = {("memory.Lesson", pk) for pk in lessons}
    cited = (
        ConfidenceChange.objects.filter(
            workspace=plan.workspace, evidence_id__in=plan.erased_evidence_ids()
        )
        .exclude(target_type="lesson", target_id__in=going["lesson"])
        .exclude(target_type="knowledge", target_id__in=going["knowledge"])
        .order_by("target_type", "target_id")
        .values_list("target_type", "target_id")
        .distinct()[:limit]
    )
    labels = {"lesson": "memory.Lesson", "knowledge": "memory.Knowledge"}
    owners |= {(labels[t], pk) for t, pk in cited}
    return sorted(owners)[:limit]


def facts_from_deltas(plan: PlanRows) -> QuerySet:
    """A fact learned by the same agent from any of the turns of an erased delta."""
    turns = (
        plan.direct("memory.SkillDelta")
        .filter(agent_id=OuterRef("agent_id"))
        .annotate(turn=_json_elements("provenance", "turns"))
        .values("turn")
    )
    return plan.scoped("memory.LearnedFact").filter(
        _JsonListOverlaps("provenance", "turns", ArraySubquery(turns))
    )


def umbrellas_of(plan: PlanRows) -> QuerySet:
    """A consolidation umbrella is built from its member deltas' payloads."""
    erased = plan.direct("memory.SkillDelta")
    return plan.scoped("memory.SkillDelta").filter(members__in=erased).distinct()


def ledger_for(target_type: str) -> Callable[[list[int]], Q]:
    """Ledger rows (evidence, confidence changes) about deleted ids of ``target_type``."""
    return lambda ids: Q(target_type=target_type, target_id__in=ids)


def pair_for(target_type: str) -> Callable[[list[int]], Q]:
    """Review items whose either side is a deleted id of ``target_type``."""
    return lambda ids: Q(a_type=target_type, a_id__in=ids) | Q(b_type=target_type, b_id__in=ids)


def decision_for(target_type: str) -> Callable[[list[int]], Q]:
    """Pair decisions whose either side is a deleted id of ``target_type``."""
    return lambda ids: Q(target_type=target_type) & (Q(a_id__in=ids) | Q(b_id__in=ids))


def situation_lessons_from_turns(plan: PlanRows) -> QuerySet:
    """A machine lesson learned in an erased turn."""
    return plan.scoped("memory.SituationLesson").filter(
        turn__in=plan.direct("memory.TurnRecovery").values("pk")
    )
