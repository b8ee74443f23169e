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

from collections.abc import Callable, Iterable, Mapping

from django.apps import apps
from django.db import models
from django.db.models import Q, QuerySet
from django.db.models.functions import Cast

from memory.lessons.confidence_rebuild import confidence_rebuild
from memory.models import (
    Channel,
    Workspace,
)
from memory.privacy import trust_fields
from memory.privacy.datamap_service import service_entries
from memory.privacy.derivations import (
    confidence_owners,
    decision_for,
    errors_from_tool_calls,
    facts_from_deltas,
    knowledge_from_turns,
    ledger_for,
    lessons_only_from,
    pair_for,
    situation_lessons_from_turns,
    umbrellas_of,
)
from memory.privacy.queries import by, by_agent, session_ref, text_match
from memory.privacy.references import InJson
from memory.privacy.selection import Selector
from memory.privacy.tables import CONTENT, DERIVED, KEPT, ById, Derivation, Prefixed, Table
from memory.privacy.trust_fields import to

_LEDGER_TARGETS = ById("target_type", {"lesson": "memory.Lesson", "knowledge": "memory.Knowledge"})

# ``{"type", "id"}`` references an outcome names (in play, confirmed, contradicted).
_PLAYED = {"lesson": "memory.Lesson", "knowledge": "memory.Knowledge", "error": "memory.Knowledge"}
_LEDGER_JSON = {"lesson": "memory.Lesson", "knowledge": "memory.Knowledge"}


# --------------------------------------------------------------------------- the map
# Each derivation returns rows of its own table, computed from the *direct* matches
# of its sources (sources are content tables; nothing is derived from a derivation
# except through lineage, which the job expands per batch).


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
        Table(
            "memory.ErasureSelector",
            KEPT,
            "The selector's value only while its erasure job is pending or running (so it "
            "never travels in a broker message); the job deletes it when it ends.",
            workspace_path="job_run__workspace",
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
                    rows=lessons_only_from,
                ),
            ),
            lineage="superseded_by",
            export="lessons",
            trust=trust_fields.LESSONS_TRUST,
            quoted=("text",),
            # A merged lesson's bounded evidence list: the latest outcome ids and the
            # lessons folded into it.
            refs={
                "merged_evidence": (
                    InJson(("latest", "*"), "memory.Outcome"),
                    InJson(("merged_from", "*"), "memory.Lesson"),
                )
            },
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
                "memory.Lesson": ledger_for("lesson"),
                "memory.Knowledge": ledger_for("knowledge"),
            },
            export="evidence",
            trust={"channel": to(Channel.AGENT)},
            refs={
                "target_id": _LEDGER_TARGETS,
                # The body the first POST answered, replayed on retries.
                "response": (
                    InJson(("id",), "memory.Evidence"),
                    InJson(("target_id",), _LEDGER_JSON, by="target_type"),
                ),
            },
        ),
        Table(
            "memory.ConfidenceChange",
            DERIVED,
            "The evidence ledger: one row per confidence change of a lesson or item.",
            follows={
                "memory.Lesson": ledger_for("lesson"),
                "memory.Knowledge": ledger_for("knowledge"),
            },
            derived=(
                Derivation(
                    "confidence_without_erased_evidence",
                    ("memory.Outcome", "memory.Evidence"),
                    "a lesson or item that keeps other evidence is recomputed from what is "
                    "left; ledger rows citing erased evidence lose the citation",
                    action="rebuild",
                    owners=confidence_owners,
                    rebuild_with=confidence_rebuild,
                ),
            ),
            export="confidence_changes",
            trust={"channel": to(Channel.AGENT)},
            refs={
                "target_id": _LEDGER_TARGETS,
                "evidence_id": Prefixed("outcome:", "memory.Outcome"),
            },
        ),
        Table(
            "memory.Outcome",
            CONTENT,
            "One agent turn as the harness saw it (approach, checks, targets) and, where the "
            "workspace opted in, the goal text the harness sent (goal_text): it is erased "
            "and exported with its outcome.",
            selectors={
                "agent": by_agent(),
                "project": by("project_digest"),
                "context": by("context"),
                "session": by("session_id"),
            },
            export="outcomes",
            trust=trust_fields.OUTCOMES_TRUST,
            refs={
                "in_play": (InJson(("*", "id"), _PLAYED, by="type"),),
                # The body the first POST answered, replayed on retries.
                "response": (
                    InJson(("id",), "memory.Outcome"),
                    InJson(("confirmed", "*", "id"), _PLAYED, by="type"),
                    InJson(("contradicted", "*", "id"), _PLAYED, by="type"),
                    InJson(("lessons_created", "*"), "memory.Lesson"),
                ),
            },
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
                    | session_ref("metadata", "sessions")(qs, sel)
                ),
            },
            derived=(
                Derivation(
                    "knowledge_from_turns",
                    ("memory.ConversationTurn",),
                    "consolidation summaries and extracted items name their source sessions "
                    "(metadata.session_id or metadata.sessions)",
                    rows=knowledge_from_turns,
                ),
                Derivation(
                    "errors_from_tool_calls",
                    ("memory.ToolCall",),
                    "an error item is built from failed tool calls on its operation_key",
                    rows=errors_from_tool_calls,
                ),
            ),
            lineage="superseded_by",
            export="knowledge",
            trust=trust_fields.KNOWLEDGE_TRUST,
            export_exclude=("embedding", "search_vector"),
            quoted=("content", "entity", "metadata"),
        ),
        Table(
            "memory.ConversationTurn",
            CONTENT,
            "Raw conversation turns with their embedding and full-text vector (columns of "
            "the row: deleting the row deletes them); pruned after CAIRN_RETENTION_RAW_DAYS.",
            selectors={
                "agent": by_agent(),
                "context": by("context"),
                "session": by("session_id"),
            },
            export="conversation_turns",
            trust={"channel": to(Channel.AGENT)},
            export_exclude=("embedding", "search_vector"),
            quoted=("content",),
        ),
        Table(
            "memory.ToolCall",
            CONTENT,
            "Raw tool calls with their errors; pruned after CAIRN_RETENTION_RAW_DAYS.",
            selectors={"agent": by_agent(), "session": by("session_id")},
            export="tool_calls",
            trust={"channel": to(Channel.AGENT)},
            quoted=("error",),
        ),
        # ---- situations (per-turn recovery state, its events, machine lessons)
        Table(
            "memory.TurnRecovery",
            CONTENT,
            "One harness turn's recovery state: blockers by subject with the declared "
            "unblock and probe (no tool output is stored).",
            selectors={"agent": by_agent(), "session": by("session_id")},
            export="turn_recoveries",
            trust={"channel": to(Channel.AGENT)},
            quoted=("blockers", "escalation"),
            refs={
                "blockers": (InJson(("~", "lesson_id"), "memory.SituationLesson"),),
                "escalation": (InJson(("lesson_id",), "memory.SituationLesson"),),
            },
        ),
        Table(
            "memory.SituationLesson",
            CONTENT,
            "A remembered blocker on one machine (context machine:<digest>), written by "
            "the server from a declared blocker after an escalation or a user answer.",
            selectors={"agent": by_agent(), "context": by("context")},
            derived=(
                Derivation(
                    "situation_lessons_from_erased_turns",
                    ("memory.TurnRecovery",),
                    "a lesson learned in an erased turn goes with it",
                    rows=situation_lessons_from_turns,
                ),
            ),
            lineage="superseded_by",
            export="situation_lessons",
            trust=trust_fields.SITUATION_LESSONS_TRUST,
            quoted=("content", "detail", "unblock", "probe"),
        ),
        Table(
            "memory.SituationEvent",
            CONTENT,
            "Situation events (detected, workaround, escalated, lesson stored ...): kinds, "
            "subjects and counts; they go with their turn.",
            selectors={"agent": by_agent(), "session": by("session_id")},
            cascades_from=("memory.TurnRecovery",),
            export="situation_events",
            trust=trust_fields.SITUATION_EVENTS_TRUST,
            refs={"details": (InJson(("lesson_id",), "memory.SituationLesson"),)},
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
            selectors={"agent": by_agent(), "session": session_ref("provenance", "turns")},
            derived=(
                Derivation(
                    "facts_from_deltas",
                    ("memory.SkillDelta",),
                    "a fact learned by the same agent from a turn an erased delta cites",
                    rows=facts_from_deltas,
                ),
            ),
            lineage="superseded_by",
            export="learned_facts",
            trust=trust_fields.LEARNED_FACTS_TRUST,
            quoted=("key", "value"),
        ),
        Table(
            "memory.SkillDelta",
            CONTENT,
            "Learned adjustments; their payload can quote what they were learned from. "
            "Cached effective skills (Redis) quote them too and are forgotten with them.",
            selectors={
                "agent": by_agent(),
                "session": session_ref("provenance", "turns"),
                "skill": by("skill__name"),
            },
            derived=(
                Derivation(
                    "umbrellas_of_erased_deltas",
                    ("memory.SkillDelta",),
                    "a consolidation umbrella is written from its members' payloads",
                    rows=umbrellas_of,
                ),
            ),
            lineage="superseded_by",
            export="skill_deltas",
            trust=trust_fields.SKILL_DELTAS_TRUST,
            # A consolidation umbrella names its members (the M2M says it too).
            refs={"provenance": (InJson(("members", "*"), "memory.SkillDelta"),)},
            # decision_seen: ids and tool names to rebuild a review's diff here, not data
            # of the person; another install's ids would point at the wrong rows.
            export_exclude=("trigger_embedding", "payload_embedding", "decision_seen"),
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
            trust={"channel": to(Channel.AGENT)},
            refs={"delta_ids": "memory.SkillDelta"},
        ),
        # ---- review state
        Table(
            "memory.ReviewItem",
            DERIVED,
            "A conflicting pair a job could not settle, waiting for a person: it points at "
            "two lessons or items by id and goes when either of them is erased.",
            follows={
                "memory.Lesson": pair_for("lesson"),
                "memory.Knowledge": pair_for("knowledge"),
            },
        ),
        Table(
            "memory.PairDecision",
            DERIVED,
            "A judged pair from the reconcile job or the lesson merge (ids, judge, verdict, "
            "action; no content): it goes when either side is erased.",
            follows={
                "memory.Lesson": decision_for("lesson"),
                "memory.Knowledge": decision_for("knowledge"),
            },
        ),
        Table(
            "memory.ProjectLabel",
            CONTENT,
            "A name for a project digest: a person's, or the last path segment of the "
            "first remote a harness sent; a project or text erasure takes the name too.",
            selectors={"project": by("project_digest")},
            export="project_labels",
        ),
        *service_entries(),
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
    tables = {t.label: t for t in _entries()}
    for label in tables:
        apps.get_model(label)  # a mistyped label fails here, loudly
    return tables


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


def trigger_tables() -> list[str]:
    """Labels of the tables database triggers keep from others (``Table.by_trigger``)."""
    return [t.label for t in TABLES.values() if t.by_trigger]


def followers_of(label: str) -> list[tuple[Table, Callable[[list[int]], Q]]]:
    return [(t, t.follows[label]) for t in TABLES.values() if label in t.follows]


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
