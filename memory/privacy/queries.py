"""The queries the derived-data map is written in: text matches, references
inside JSON, and the derivations that find rows computed from erased ones."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from django.contrib.postgres.expressions import ArraySubquery
from django.db import models
from django.db.models import Exists, F, OuterRef, Q, QuerySet
from django.db.models.expressions import RawSQL
from django.db.models.fields.json import KT, KeyTransform
from django.db.models.functions import Cast

from memory.models import ConfidenceChange, Evidence, Knowledge, Lesson, LessonEvidence
from memory.privacy.selection import Selector

if TYPE_CHECKING:
    from memory.privacy.datamap import Plan

SelectFn = Callable[[QuerySet, Selector], QuerySet]


def text_columns(model: type[models.Model]) -> list[models.Field]:
    """Every column a text match searches: text, JSON and bytes (not generated ones)."""
    out = []
    for f in model._meta.concrete_fields:
        if isinstance(f, models.GeneratedField) or f.primary_key:
            continue
        if isinstance(f, models.CharField | models.TextField | models.JSONField):
            out.append(f)
        elif isinstance(f, models.BinaryField):
            out.append(f)
    return out


class _ConvertFrom(models.Func):
    # Stored responses are always UTF-8 JSON written by our own middleware.
    function = "convert_from"
    template = "%(function)s(%(expressions)s, 'UTF8')"
    output_field = models.TextField()


def text_match(qs: QuerySet, sel: Selector) -> QuerySet:
    """Case-insensitive substring over every text, JSON and byte column of the table.

    JSON is searched as its text, so a value with quotes or backslashes is also
    matched in its escaped form.
    """
    needle = sel.value
    escaped = json.dumps(needle, ensure_ascii=False)[1:-1]
    q = Q()
    annotations = {}
    for f in text_columns(qs.model):
        if isinstance(f, models.JSONField):
            alias = f"_erasure_text_{f.name}"
            annotations[alias] = Cast(f.name, models.TextField())
            q |= Q(**{f"{alias}__icontains": needle})
            if escaped != needle:
                q |= Q(**{f"{alias}__icontains": escaped})
        elif isinstance(f, models.BinaryField):
            alias = f"_erasure_text_{f.name}"
            annotations[alias] = _ConvertFrom(f.name)
            q |= Q(**{f"{alias}__icontains": needle})
            if escaped != needle:
                q |= Q(**{f"{alias}__icontains": escaped})
        else:
            q |= Q(**{f"{f.name}__icontains": needle})
    if not q:
        return qs.none()
    return qs.alias(**annotations).filter(q)


def by(field_name: str) -> SelectFn:
    """A selector that matches one column against the selector's value."""
    return lambda qs, sel: qs.filter(**{field_name: sel.value})


def by_agent(field_name: str = "agent") -> SelectFn:
    return lambda qs, sel: qs.filter(**{field_name: sel.agent})


class _JsonPathExists(models.Func):
    function = "jsonb_path_exists"
    output_field = models.BooleanField()


def _session_ref(column: str, key: str) -> SelectFn:
    """Rows whose JSON ``column->key`` list names the session or one of its turns.

    Turn ids are written ``<session>#<n>`` (or ``/``, ``:``): a turn id that
    starts with the session id and a separator belongs to it.
    """
    path = f"$.{key}[*] ? (@ == $v || @ starts with $a || @ starts with $b || @ starts with $c)"

    def select(qs: QuerySet, sel: Selector) -> QuerySet:
        v = sel.value
        variables = json.dumps({"v": v, "a": v + "#", "b": v + "/", "c": v + ":"})
        return qs.filter(
            _JsonPathExists(
                F(column), RawSQL("%s::jsonpath", [path]), RawSQL("%s::jsonb", [variables])
            )
        )

    return select


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


def _knowledge_from_turns(plan: Plan) -> QuerySet:
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


def _errors_from_tool_calls(plan: Plan) -> QuerySet:
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


def _lessons_only_from(plan: Plan) -> QuerySet:
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


def _confidence_owners(plan: Plan, limit: int) -> list[tuple[str, int]]:
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


def _facts_from_deltas(plan: Plan) -> QuerySet:
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


def _umbrellas_of(plan: Plan) -> QuerySet:
    """A consolidation umbrella is built from its member deltas' payloads."""
    erased = plan.direct("memory.SkillDelta")
    return plan.scoped("memory.SkillDelta").filter(members__in=erased).distinct()


def _ledger_for(target_type: str) -> Callable[[list[int]], Q]:
    return lambda ids: Q(target_type=target_type, target_id__in=ids)


def _pair_for(target_type: str) -> Callable[[list[int]], Q]:
    return lambda ids: Q(a_type=target_type, a_id__in=ids) | Q(b_type=target_type, b_id__in=ids)


def _decision_for(target_type: str) -> Callable[[list[int]], Q]:
    return lambda ids: Q(target_type=target_type) & (Q(a_id__in=ids) | Q(b_id__in=ids))
