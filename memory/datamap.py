"""The derived-data map: every table Cairn keeps, and what export and erasure do with it.

One entry per model of the ``memory`` app (plus the auth tables that hold people).
The erasure preview, the erasure job and the export all read this map, so a
table cannot be forgotten by one of them and handled by another; a test fails
when a model has no entry.

Each table has one **role**:

* ``content``: holds what agents or people said or learned. Selectors match
  it directly (``selectors``) and a text match searches all its text, JSON and
  byte columns.
* ``derived``: computed from other rows only (``derived``); it goes when the
  rows it was computed from go, and is never matched on its own.
* ``kept``: identity, configuration, operations and receipts. Never erased;
  ``why`` says why it holds no erasable content.

Content tables may also be derived from others (a consolidation summary is
knowledge *and* derived from turns). ``cascades_from`` names FK parents whose
deletion deletes the row in the same statement; ``follows`` names rows that
point at another table by id without a foreign key (the confidence ledger),
deleted in the same transaction as their target. ``lineage`` is the self-FK of
a supersede chain: erasing a row erases the versions it superseded, or they
would silently become current again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from django.apps import apps
from django.db import models
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast

from memory.models import Agent, Workspace

CONTENT = "content"
DERIVED = "derived"
KEPT = "kept"

# Selector kinds. Erasure: agent, project, entity, context, session, text.
# Export: workspace, agent, project, skill.
ERASURE_SELECTORS = ("agent", "project", "entity", "context", "session", "text")
EXPORT_SELECTORS = ("workspace", "agent", "project", "skill")
# Selector values that are user data themselves: receipts keep only their sha256 + length.
HASHED_SELECTORS = {"entity", "context", "session", "text"}


@dataclass(frozen=True)
class Selector:
    """What to erase or export. ``value`` is the agent or skill name, the project
    digest, or the entity/context/session/text; ``agent`` is resolved for ``agent``."""

    kind: str
    value: str = ""
    agent: Agent | None = None

    def receipt(self) -> dict:
        """The selector as a receipt may keep it: never a content value."""
        if self.kind in HASHED_SELECTORS:
            return {
                "kind": self.kind,
                "sha256": hashlib.sha256(self.value.encode("utf-8")).hexdigest(),
                "length": len(self.value),
            }
        if self.kind == "agent":
            return {"kind": "agent", "agent": self.value, "agent_id": self.agent.pk}
        if self.kind == "project":
            return {"kind": "project", "project_digest": self.value}
        return {"kind": self.kind, "value": self.value}


SelectFn = Callable[[QuerySet, Selector], QuerySet]


@dataclass(frozen=True)
class Derivation:
    """Rows of this table computed from rows of ``sources``.

    ``rows(plan)`` is evaluated while the sources still exist: the job runs every
    derivation before it deletes anything a derivation reads. ``action`` is
    ``delete`` or ``recompute`` (the rows are deleted and their owner rebuilt from
    what is left, see ``memory.services.erasure``).
    """

    name: str
    sources: tuple[str, ...]
    how: str
    rows: Callable[[Plan], QuerySet]
    action: str = "delete"
    # For ``recompute``: the column naming the owner row, the owner's table, and
    # the service (dotted path) that deletes ``row_ids`` and rebuilds the owner.
    owner: str = ""
    owner_label: str = ""
    rebuild_path: str = ""

    def rebuild(self, *, owner_id: int, row_ids: list[int]) -> dict[str, int]:
        from django.utils.module_loading import import_string

        return import_string(self.rebuild_path)(owner_id=owner_id, row_ids=row_ids)


@dataclass(frozen=True)
class Table:
    label: str
    role: str
    why: str
    workspace_path: str | None = "workspace"
    selectors: Mapping[str, SelectFn] = field(default_factory=dict)
    derived: tuple[Derivation, ...] = ()
    cascades_from: tuple[str, ...] = ()
    # source label → (ids → Q on this table): rows referencing deleted source ids.
    follows: Mapping[str, Callable[[list[int]], Q]] = field(default_factory=dict)
    lineage: str | None = None
    # Section in the export document (None: never exported) and fields left out.
    export: str | None = None
    export_exclude: tuple[str, ...] = ()

    @property
    def model(self) -> type[models.Model]:
        return apps.get_model(self.label)

    @property
    def erasable(self) -> bool:
        return self.role in (CONTENT, DERIVED)


# --------------------------------------------------------------------------- helpers


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


def _session_ref(column_sql: str, key: str) -> Callable[[QuerySet, Selector], QuerySet]:
    """Rows whose JSON ``column->key`` list names the session or one of its turns.

    Turn ids are written ``<session>#<n>`` (or ``/``, ``:``): a turn id that
    starts with the session id and a separator belongs to it.
    """

    def select(qs: QuerySet, sel: Selector) -> QuerySet:
        table = qs.model._meta.db_table
        sql = (
            f'EXISTS (SELECT 1 FROM jsonb_array_elements_text(CASE WHEN jsonb_typeof("{table}".'
            f"\"{column_sql}\"->'{key}') = 'array' THEN \"{table}\".\"{column_sql}\"->'{key}' "
            "ELSE '[]'::jsonb END) AS t(ref) WHERE t.ref = %s OR left(t.ref, %s) IN (%s, %s, %s))"
        )
        v = sel.value
        params = [v, len(v) + 1, v + "#", v + "/", v + ":"]
        return qs.filter(RawSQL(sql, params, output_field=models.BooleanField()))

    return select


def _subquery_sql(qs: QuerySet) -> tuple[str, tuple]:
    sql, params = qs.query.sql_with_params()
    return sql, tuple(params)


def _json_list(table: str, column: str, key: str) -> str:
    """SQL for ``column->key`` as a jsonb array ('[]' when it is missing or not a list)."""
    ref = f'"{table}"."{column}"->\'{key}\''
    return f"(CASE WHEN jsonb_typeof({ref}) = 'array' THEN {ref} ELSE '[]'::jsonb END)"


# --------------------------------------------------------------------------- the plan


class Plan:
    """The rows one selector reaches in one workspace, table by table (all lazy SQL)."""

    def __init__(self, *, workspace: Workspace, selector: Selector):
        self.workspace = workspace
        self.selector = selector

    def scoped(self, label: str) -> QuerySet:
        table = TABLES[label]
        qs = table.model._default_manager.all()
        if table.workspace_path:
            qs = qs.filter(**{table.workspace_path: self.workspace})
        return qs

    def direct(self, label: str) -> QuerySet:
        """Rows of ``label`` the selector matches itself (empty for derived/kept tables)."""
        table = TABLES[label]
        if not table.erasable:
            return table.model._default_manager.none()
        kind = self.selector.kind
        if kind == "text":
            return text_match(self.scoped(label), self.selector)
        if kind == "workspace":
            return self.scoped(label)
        select = table.selectors.get(kind)
        if select is None:
            return table.model._default_manager.none()
        return select(self.scoped(label), self.selector)

    def derivations(self) -> Iterable[tuple[Table, Derivation]]:
        for table in TABLES.values():
            for derivation in table.derived:
                yield table, derivation


# --------------------------------------------------------------------------- derivations

# Each function returns rows of its own table, computed from the *direct* matches
# of its sources (sources are content tables; nothing is derived from a derivation
# except through lineage, which the job expands per batch).


def _knowledge_from_turns(plan: Plan) -> QuerySet:
    """Summaries and extracted items built from erased turns name their sessions."""
    sessions = plan.direct("memory.ConversationTurn").values("session_id")
    sql, params = _subquery_sql(sessions)
    listed = RawSQL(
        f"{_json_list('memory_knowledge', 'metadata', 'sessions')} ?| ARRAY({sql})::text[]",
        params,
        output_field=models.BooleanField(),
    )
    return plan.scoped("memory.Knowledge").filter(
        Q(metadata__session_id__in=sessions) | Q(listed),
        source__in=["consolidation", "extract"],
    )


def _errors_from_tool_calls(plan: Plan) -> QuerySet:
    """An error item is built from failed tool calls on its operation."""
    failed = plan.direct("memory.ToolCall").filter(ok=False)
    return plan.scoped("memory.Knowledge").filter(
        Q(operation_key__in=failed.values("operation_key"))
        | Q(metadata__session_id__in=failed.values("session_id")),
        category="error",
    )


def _lessons_only_from(plan: Plan) -> QuerySet:
    """Lessons with evidence, all of it from erased outcomes."""
    erased = plan.direct("memory.Outcome")
    LessonEvidence = apps.get_model("memory.LessonEvidence")
    any_erased = LessonEvidence.objects.filter(lesson=OuterRef("pk"), outcome__in=erased)
    any_kept = LessonEvidence.objects.filter(lesson=OuterRef("pk")).exclude(outcome__in=erased)
    return plan.scoped("memory.Lesson").filter(Exists(any_erased)).exclude(Exists(any_kept))


def _evidence_of_kept_lessons(plan: Plan) -> QuerySet:
    """Evidence links to erased outcomes on lessons that keep other evidence."""
    erased = plan.direct("memory.Outcome")
    return (
        apps.get_model("memory.LessonEvidence")
        .objects.filter(lesson__workspace=plan.workspace, outcome__in=erased)
        .exclude(lesson__in=_lessons_only_from(plan))
    )


def _facts_from_deltas(plan: Plan) -> QuerySet:
    """A fact learned by the same agent from any of the turns of an erased delta."""
    sql, params = _subquery_sql(plan.direct("memory.SkillDelta").values("agent_id", "provenance"))
    shared = RawSQL(
        f"{_json_list('memory_learnedfact', 'provenance', 'turns')} ?| ARRAY("
        f"SELECT jsonb_array_elements_text({_json_list('d', 'provenance', 'turns')}) "
        f'FROM ({sql}) AS d WHERE d.agent_id = "memory_learnedfact"."agent_id")::text[]',
        params,
        output_field=models.BooleanField(),
    )
    return plan.scoped("memory.LearnedFact").filter(shared)


def _umbrellas_of(plan: Plan) -> QuerySet:
    """A consolidation umbrella is built from its member deltas' payloads."""
    erased = plan.direct("memory.SkillDelta")
    return plan.scoped("memory.SkillDelta").filter(members__in=erased).distinct()


def _ledger_for(target_type: str) -> Callable[[list[int]], Q]:
    return lambda ids: Q(target_type=target_type, target_id__in=ids)


# --------------------------------------------------------------------------- the map

_KEPT_IDENTITY = "Identity and access: who may do what. Holds names and roles, no content."


def _entries() -> list[Table]:
    return [
        # ---- identity
        Table("memory.Workspace", KEPT, _KEPT_IDENTITY, workspace_path="pk"),
        Table("memory.Membership", KEPT, _KEPT_IDENTITY),
        Table(
            "memory.Agent",
            KEPT,
            "The agent's identity stays so its tokens can be revoked and its erasure "
            "audited; everything it wrote is erased with the agent selector.",
            export="agents",
        ),
        Table(
            "memory.ApiToken",
            KEPT,
            "Secrets: only a digest is stored, and it is never exported.",
        ),
        Table(
            "auth.User",
            KEPT,
            "People who log in: username and password hash, no content.",
            workspace_path="memberships__workspace",
        ),
        # ---- operations
        Table(
            "memory.JobRun",
            KEPT,
            "Operational record: kind, status, counts and ids. Erasure jobs keep only the "
            "selector's digest in their params; pruned after CAIRN_RETENTION_JOB_RUNS_DAYS.",
        ),
        Table(
            "memory.AuditEvent",
            KEPT,
            "The audit log never holds item content (audit_record's contract), so nothing "
            "in it is erasable; pruned after CAIRN_RETENTION_AUDIT_DAYS.",
        ),
        Table(
            "memory.ErasureReceipt",
            KEPT,
            "The proof of an erasure: counts per table and the selector's digest, no content.",
        ),
        Table(
            "memory.IdempotencyRecord",
            DERIVED,
            "Replays of write responses, which quote what was written: erased with the "
            "agent, by a text match, and whenever a row whose text they quote is erased.",
            selectors={"agent": by_agent()},
        ),
        # ---- knowledge
        Table(
            "memory.Knowledge",
            CONTENT,
            "What agents and people remember, with its embedding and full-text vector "
            "(columns of the row: deleting the row deletes them).",
            selectors={
                "agent": by_agent(),
                "entity": by("entity"),
                "context": by("context"),
                "session": lambda qs, sel: (
                    qs.filter(metadata__session_id=sel.value)
                    | _session_ref("metadata", "sessions")(qs, sel)
                ),
            },
            derived=(
                Derivation(
                    "knowledge_from_turns",
                    ("memory.ConversationTurn",),
                    "consolidation summaries and extracted items name their source sessions "
                    "(metadata.session_id or metadata.sessions)",
                    _knowledge_from_turns,
                ),
                Derivation(
                    "errors_from_tool_calls",
                    ("memory.ToolCall",),
                    "an error item is built from failed tool calls on its operation_key",
                    _errors_from_tool_calls,
                ),
            ),
            lineage="superseded_by",
            export="knowledge",
            export_exclude=("embedding", "search_vector"),
        ),
        # ---- skills and learned deltas
        Table(
            "memory.Skill",
            KEPT,
            "An authored skill is a document people register and manage; learned content "
            "lives in deltas.",
            export="skills",
        ),
        Table(
            "memory.SkillVersion",
            KEPT,
            "Immutable authored SKILL.md versions; people replace them, erasure does not.",
            workspace_path="skill__workspace",
            export="skill_versions",
        ),
        Table(
            "memory.AgentTool",
            KEPT,
            "The agent's declared tool registry: configuration, no content.",
            export="agent_tools",
        ),
        Table(
            "memory.SkillDelta",
            CONTENT,
            "Learned adjustments; their payload can quote what they were learned from.",
            selectors={
                "agent": by_agent(),
                "session": _session_ref("provenance", "turns"),
            },
            derived=(
                Derivation(
                    "umbrellas_of_erased_deltas",
                    ("memory.SkillDelta",),
                    "a consolidation umbrella is written from its members' payloads",
                    _umbrellas_of,
                ),
            ),
            lineage="superseded_by",
            export="skill_deltas",
            export_exclude=("trigger_embedding", "payload_embedding"),
        ),
        Table(
            "memory.OrphanNotice",
            KEPT,
            "A count of orphaned deltas per skill version, for the UI; no content.",
        ),
        Table(
            "memory.FeedbackSample",
            CONTENT,
            "Trust-ledger samples an agent posted (action type, scope, delta ids).",
            selectors={"agent": by_agent()},
            export="feedback_samples",
        ),
        Table(
            "memory.LearnedFact",
            CONTENT,
            "Tier-0 learned values tools read directly.",
            selectors={"agent": by_agent(), "session": _session_ref("provenance", "turns")},
            derived=(
                Derivation(
                    "facts_from_deltas",
                    ("memory.SkillDelta",),
                    "a fact learned from the same turns by the same agent as an erased delta",
                    _facts_from_deltas,
                ),
            ),
            lineage="superseded_by",
            export="learned_facts",
        ),
    ]


def _build() -> dict[str, Table]:
    return {t.label: t for t in _entries() if _installed(t.label)}


def _installed(label: str) -> bool:
    try:
        apps.get_model(label)
    except LookupError:
        return False
    return True


class _Tables(dict):
    """Built on first use: the app registry must be ready before models resolve."""

    def _ensure(self):
        if not dict.__len__(self):
            dict.update(self, _build())

    def __getitem__(self, key):
        self._ensure()
        return dict.__getitem__(self, key)

    def __iter__(self):
        self._ensure()
        return dict.__iter__(self)

    def __len__(self):
        self._ensure()
        return dict.__len__(self)

    def __contains__(self, key):
        self._ensure()
        return dict.__contains__(self, key)

    def values(self):
        self._ensure()
        return dict.values(self)

    def items(self):
        self._ensure()
        return dict.items(self)

    def get(self, key, default=None):
        self._ensure()
        return dict.get(self, key, default)


TABLES: Mapping[str, Table] = _Tables()


def table_for(model: type[models.Model]) -> Table | None:
    return TABLES.get(model._meta.label)


def erasable_tables() -> list[Table]:
    return [t for t in TABLES.values() if t.erasable]


def followers_of(label: str) -> list[tuple[Table, Callable[[list[int]], Q]]]:
    return [(t, t.follows[label]) for t in TABLES.values() if label in t.follows]
