"""The derived-data map: every table Cairn keeps, and what export and erasure do with it.

One entry per model of the ``memory`` app (plus the auth tables that hold people).
The erasure preview, the erasure job and the export all read this map, so a
table cannot be forgotten by one of them and handled by another; a test fails
when a model has no entry.

Each table has one **role**:

* ``content``: holds what agents or people said or learned. Selectors match
  it directly (``selectors``) and a text match searches all its text, JSON and
  byte columns.
* ``derived``: computed from other rows (``derived``, ``follows``); it goes
  when the rows it was computed from go. A text match searches it too, since
  derived rows can quote what they were computed from.
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
from django.contrib.postgres.expressions import ArraySubquery
from django.db import models
from django.db.models import Exists, F, OuterRef, Q, QuerySet
from django.db.models.expressions import RawSQL
from django.db.models.fields.json import KT, KeyTransform
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
class ById:
    """A polymorphic id: ``type_field`` says which table ``targets[type]`` it points into."""

    type_field: str
    targets: Mapping[str, str]


@dataclass(frozen=True)
class Prefixed:
    """An id inside a string, ``<prefix><id>`` (the ledger's ``outcome:42``)."""

    prefix: str
    target: str


_LEDGER_TARGETS = ById("target_type", {"lesson": "memory.Lesson", "knowledge": "memory.Knowledge"})


@dataclass(frozen=True)
class Derivation:
    """Rows of this table computed from rows of ``sources``.

    ``delete``: ``rows(plan)`` are erased; it is evaluated while the sources still
    exist (the job runs every derivation before it deletes anything directly).
    ``rebuild``: ``owners(plan)`` lists ``(label, id)`` of rows that stay but were
    computed partly from erased rows; the service at ``rebuild_path`` removes the
    erased part and recomputes them from what is left. After a rebuild the owner
    no longer cites erased rows, so ``owners`` shrinks to nothing.
    """

    name: str
    sources: tuple[str, ...]
    how: str
    rows: Callable[[Plan], QuerySet] | None = None
    action: str = "delete"
    owners: Callable[[Plan, int], list[tuple[str, int]]] | None = None
    rebuild_path: str = ""

    def rebuild(self, *, plan: Plan, label: str, pk: int) -> dict[str, int]:
        from django.utils.module_loading import import_string

        return import_string(self.rebuild_path)(plan=plan, label=label, pk=pk)


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
    # References by id without a foreign key, so export and import can remap them:
    # field → "memory.X" (an id or a list of ids), ById(type_field, {type: label})
    # (polymorphic) or Prefixed("outcome:", "memory.Outcome") (an id inside a string).
    refs: Mapping[str, object] = field(default_factory=dict)
    # Columns whose values are content an API response echoes back: a stored
    # idempotency replay quoting one of them goes when the row goes.
    quoted: tuple[str, ...] = ()

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
            qs = qs.filter(**{table.workspace_path: self.workspace.pk})
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
        """Every derivation whose source tables exist, in map order."""
        for table in TABLES.values():
            for derivation in table.derived:
                if all(source in TABLES for source in derivation.sources):
                    yield table, derivation

    def going(self, label: str) -> Q:
        """Rows of ``label`` the job deletes: direct matches and delete-derivations
        (lineage is expanded per batch by the job and not included here)."""
        table = TABLES[label]
        q = Q(pk__in=self.direct(label).values("pk"))
        for derivation in table.derived:
            if derivation.action == "delete" and all(s in TABLES for s in derivation.sources):
                q |= Q(pk__in=derivation.rows(self).values("pk"))
        return q

    def erased_evidence_ids(self) -> QuerySet:
        """Ledger ``evidence_id`` values that cite an erased outcome or posted evidence."""
        from django.db.models.functions import Concat

        cited = self.direct("memory.Outcome").annotate(
            cite=Concat(
                models.Value("outcome:"),
                Cast("pk", models.TextField()),
                output_field=models.TextField(),
            )
        )
        return cited.values("cite").union(self.direct("memory.Evidence").values("evidence_id"))


# --------------------------------------------------------------------------- derivations

# Each function returns rows of its own table, computed from the *direct* matches
# of its sources (sources are content tables; nothing is derived from a derivation
# except through lineage, which the job expands per batch).


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
    LessonEvidence = apps.get_model("memory.LessonEvidence")
    any_erased = LessonEvidence.objects.filter(lesson=OuterRef("pk"), outcome__in=erased)
    any_kept = LessonEvidence.objects.filter(lesson=OuterRef("pk")).exclude(outcome__in=erased)
    posted_kept = (
        apps.get_model("memory.Evidence")
        .objects.filter(target_type="lesson", target_id=OuterRef("pk"))
        .exclude(pk__in=plan.direct("memory.Evidence"))
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
    LessonEvidence = apps.get_model("memory.LessonEvidence")
    ConfidenceChange = apps.get_model("memory.ConfidenceChange")
    Lesson = apps.get_model("memory.Lesson")
    Knowledge = apps.get_model("memory.Knowledge")
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


# --------------------------------------------------------------------------- the map

_KEPT_IDENTITY = "Identity and access: who may do what. Holds names and roles, no content."


def _entries() -> list[Table]:
    """Every table, in the order the erasure job visits them (children before parents
    where it matters: rows derived from outcomes are handled before outcomes go)."""
    return [
        # ---- identity and access
        Table("memory.Workspace", KEPT, _KEPT_IDENTITY, workspace_path="pk"),
        Table("memory.Membership", KEPT, _KEPT_IDENTITY),
        Table(
            "auth.User",
            KEPT,
            "People who log in: username and password hash, no content.",
            workspace_path="memberships__workspace",
        ),
        Table(
            "memory.Agent",
            KEPT,
            "The agent's identity stays so its tokens can be revoked and its erasure "
            "audited; everything it wrote is erased with the agent selector.",
            selectors={"agent": lambda qs, sel: qs.filter(pk=sel.agent.pk)},
            export="agents",
        ),
        Table(
            "memory.ApiToken",
            KEPT,
            "Secrets: only a digest is stored, and it is never exported.",
        ),
        # ---- operations
        Table(
            "memory.JobRun",
            KEPT,
            "Operational record: kind, status, counts and ids. Erasure runs keep only the "
            "selector's digest; pruned after CAIRN_RETENTION_JOB_RUNS_DAYS.",
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
        # ---- lessons and evidence (derived from outcomes, so before outcomes go)
        Table(
            "memory.Lesson",
            CONTENT,
            "One imperative sentence earned from outcomes.",
            selectors={"agent": by_agent(), "project": by("project_digest")},
            derived=(
                Derivation(
                    "lessons_only_from_erased_outcomes",
                    ("memory.Outcome",),
                    "a lesson whose every evidence link is to an erased outcome goes with them",
                    rows=_lessons_only_from,
                ),
            ),
            lineage="superseded_by",
            export="lessons",
            quoted=("text",),
        ),
        Table(
            "memory.LessonEvidence",
            DERIVED,
            "Links from a lesson to the outcomes that support or contradict it.",
            workspace_path="lesson__workspace",
            cascades_from=("memory.Lesson", "memory.Outcome"),
            export="lesson_evidence",
        ),
        Table(
            "memory.Evidence",
            CONTENT,
            "Evidence agents posted (diff accepted, user confirmed, self report).",
            selectors={"agent": by_agent()},
            follows={
                "memory.Lesson": _ledger_for("lesson"),
                "memory.Knowledge": _ledger_for("knowledge"),
            },
            export="evidence",
            refs={"target_id": _LEDGER_TARGETS},
        ),
        Table(
            "memory.ConfidenceChange",
            DERIVED,
            "The evidence ledger: one row per confidence change of a lesson or item.",
            follows={
                "memory.Lesson": _ledger_for("lesson"),
                "memory.Knowledge": _ledger_for("knowledge"),
            },
            derived=(
                Derivation(
                    "confidence_without_erased_evidence",
                    ("memory.Outcome", "memory.Evidence"),
                    "a lesson or item that keeps other evidence is recomputed from what is "
                    "left; ledger rows citing erased evidence lose the citation",
                    action="rebuild",
                    owners=_confidence_owners,
                    rebuild_path="memory.services.erasure.confidence_rebuild",
                ),
            ),
            export="confidence_changes",
            refs={
                "target_id": _LEDGER_TARGETS,
                "evidence_id": Prefixed("outcome:", "memory.Outcome"),
            },
        ),
        Table(
            "memory.Outcome",
            CONTENT,
            "One agent turn as the harness saw it (approach, checks, targets).",
            selectors={
                "agent": by_agent(),
                "project": by("project_digest"),
                "context": by("context"),
                "session": by("session_id"),
            },
            export="outcomes",
            quoted=("approach", "checks"),
        ),
        # ---- knowledge and raw history
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
                    rows=_knowledge_from_turns,
                ),
                Derivation(
                    "errors_from_tool_calls",
                    ("memory.ToolCall",),
                    "an error item is built from failed tool calls on its operation_key",
                    rows=_errors_from_tool_calls,
                ),
            ),
            lineage="superseded_by",
            export="knowledge",
            export_exclude=("embedding", "search_vector"),
            quoted=("content", "entity", "metadata"),
        ),
        Table(
            "memory.ConversationTurn",
            CONTENT,
            "Raw conversation turns; pruned after CAIRN_RETENTION_RAW_DAYS.",
            selectors={
                "agent": by_agent(),
                "context": by("context"),
                "session": by("session_id"),
            },
            export="conversation_turns",
            export_exclude=("search_vector",),
            quoted=("content",),
        ),
        Table(
            "memory.ToolCall",
            CONTENT,
            "Raw tool calls with their errors; pruned after CAIRN_RETENTION_RAW_DAYS.",
            selectors={"agent": by_agent(), "session": by("session_id")},
            export="tool_calls",
            quoted=("error",),
        ),
        # ---- skills and learned deltas
        Table(
            "memory.Skill",
            KEPT,
            "An authored skill is a document people register and manage; learned content "
            "lives in deltas.",
            selectors={"skill": by("name")},
            export="skills",
        ),
        Table(
            "memory.SkillVersion",
            KEPT,
            "Immutable authored SKILL.md versions; people replace them, erasure does not.",
            workspace_path="skill__workspace",
            selectors={"skill": by("skill__name")},
            export="skill_versions",
        ),
        Table(
            "memory.AgentTool",
            KEPT,
            "The agent's declared tool registry: configuration, no content.",
            selectors={"agent": by_agent()},
            export="agent_tools",
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
                    "a fact learned by the same agent from a turn an erased delta cites",
                    rows=_facts_from_deltas,
                ),
            ),
            lineage="superseded_by",
            export="learned_facts",
            quoted=("key", "value"),
        ),
        Table(
            "memory.SkillDelta",
            CONTENT,
            "Learned adjustments; their payload can quote what they were learned from. "
            "Cached effective skills (Redis) quote them too and are forgotten with them.",
            selectors={
                "agent": by_agent(),
                "session": _session_ref("provenance", "turns"),
                "skill": by("skill__name"),
            },
            derived=(
                Derivation(
                    "umbrellas_of_erased_deltas",
                    ("memory.SkillDelta",),
                    "a consolidation umbrella is written from its members' payloads",
                    rows=_umbrellas_of,
                ),
            ),
            lineage="superseded_by",
            export="skill_deltas",
            export_exclude=("trigger_embedding", "payload_embedding"),
            quoted=("payload", "trigger_text", "findings"),
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
            refs={"delta_ids": "memory.SkillDelta"},
        ),
        # ---- review state
        Table(
            "memory.ReviewItem",
            DERIVED,
            "A conflicting pair a job could not settle, waiting for a person: it points at "
            "two lessons or items by id and goes when either of them is erased.",
            follows={
                "memory.Lesson": _pair_for("lesson"),
                "memory.Knowledge": _pair_for("knowledge"),
            },
        ),
        Table(
            "memory.ProjectLabel",
            CONTENT,
            "A person's name for a project digest; a project erasure takes the name too.",
            selectors={"project": by("project_digest")},
            export="project_labels",
        ),
        # ---- replays (last: other steps delete the records that quote their rows)
        Table(
            "memory.IdempotencyRecord",
            DERIVED,
            "Replays of write responses, which quote what was written: erased with the "
            "agent, by a text match, and with any erased row whose text they quote.",
            selectors={"agent": by_agent()},
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


class _Tables(Mapping):
    """The map, built on first use: the app registry must be ready before models resolve."""

    _data: dict[str, Table] | None = None

    def _tables(self) -> dict[str, Table]:
        if self._data is None:
            self._data = _build()
        return self._data

    def __getitem__(self, key: str) -> Table:
        return self._tables()[key]

    def __iter__(self):
        return iter(self._tables())

    def __len__(self) -> int:
        return len(self._tables())


TABLES: Mapping[str, Table] = _Tables()


def table_for(model: type[models.Model]) -> Table | None:
    return TABLES.get(model._meta.label)


def erasable_tables() -> list[Table]:
    return [t for t in TABLES.values() if t.erasable]


def followers_of(label: str) -> list[tuple[Table, Callable[[list[int]], Q]]]:
    return [(t, t.follows[label]) for t in TABLES.values() if label in t.follows]
