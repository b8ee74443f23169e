"""A populated workspace for export and erasure tests, built through real services.

``bundle`` writes one agent's activity in one project, context, session and
entity: knowledge, outcomes and the lesson they teach, a learned delta (and the
cached effective skill that renders it), a learned fact, a feedback sample and
an idempotency record that quotes the delta. ``marked`` says which of those
carry a marker string, so a test plants the marker only where its selector can
reach, and the SQL sweep afterwards proves the marker is gone everywhere.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field

from django.apps import apps
from django.conf import settings
from django.db import connection

from memory.core.actors import Actor
from memory.core.idempotency import idempotency_store, request_digest
from memory.identity.projects import project_digest, project_label_set
from memory.knowledge.conversations import tool_calls_log, turn_store
from memory.knowledge.remember import knowledge_remember
from memory.lessons.outcomes import outcome_record
from memory.models import Agent, Channel, ProjectLabel, Workspace
from memory.review.services import review_item_open
from memory.skills.deltas import delta_create
from memory.skills.effective import effective_skill_resolve
from memory.skills.facts import fact_claim, fact_put
from memory.skills.registry import agent_tools_set, skill_register
from tests.factories.identity import person_actor
from tests.factories.lessons import check, step
from tests.factories.skills import EMAIL_TOOLS, backed, harness_feedback, skill_md

EVERYTHING = frozenset(
    {
        "knowledge",
        "outcome",
        "lesson",
        "delta",
        "fact",
        "feedback",
        "turns",
        "tool_calls",
        "project_label",
    }
)


def new_marker() -> str:
    return f"zqmark{uuid.uuid4().hex[:12]}"


@dataclass
class Bundle:
    agent: Agent
    project_remote: str
    context: str
    session: str
    entity: str
    knowledge: list[int] = field(default_factory=list)
    outcomes: list[int] = field(default_factory=list)
    lessons: list[int] = field(default_factory=list)
    deltas: list[int] = field(default_factory=list)
    facts: list[int] = field(default_factory=list)
    error_items: list[int] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)
    review_items: list[int] = field(default_factory=list)


def workspace_ready(workspace: Workspace) -> None:
    """A registered skill and auto-approval, so deltas render in effective skills; goal
    texts are kept, so erasure and export are checked on them too."""
    workspace.settings = {"auto_approve_user_instruction": True, "store_goal_text": True}
    workspace.save(update_fields=["settings"])
    skill_register(workspace=workspace, skill_md=skill_md(), actor=Actor.system("test"))


def bundle(
    *,
    agent: Agent,
    name: str,
    marker: str = "",
    marked: frozenset[str] = frozenset(),
    project_remote: str | None = None,
    context: str | None = None,
    session: str | None = None,
    entity: str | None = None,
) -> Bundle:
    """One agent's activity; text in ``marked`` parts carries ``marker``."""

    def text(part: str, plain: str) -> str:
        return f"{plain} {marker}" if marker and part in marked else plain

    b = Bundle(
        agent=agent,
        project_remote=project_remote or f"https://github.com/acme/{name}.git",
        context=context or f"ctx-{name}",
        session=session or f"sess-{name}",
        entity=entity or f"person:{name}",
    )
    workspace = agent.workspace
    # Knowledge (an item in the bundle's context, about its entity, from its session).
    item = knowledge_remember(
        workspace=workspace,
        actor=Actor.for_agent(agent),
        content=text("knowledge", f"The {name} team deploys on Fridays."),
        entity=b.entity,
        context=b.context,
        metadata={"session_id": b.session},
    ).item
    b.knowledge.append(item.pk)
    # An outcome that teaches a mechanical lesson: pip failed, uv worked, on one target.
    target = text("lesson", f"requirements-{name}.txt").replace(" ", "-")
    body, _ = outcome_record(
        agent=agent,
        outcome_id=f"out-{name}-1",
        session_id=b.session,
        project_remote=b.project_remote,
        context=b.context,
        goal=text("outcome", f"Install the {name} dependencies"),
        goal_text=text("outcome", f"Get the {name} dependencies installed"),
        approach=[
            step("pip install", target, "failed", 1),
            step("uv pip install", target, "ok", 2),
        ],
        checks=[check(3, 0, label=text("outcome", "pytest"))],
        in_play=[{"type": "knowledge", "id": item.pk}],
        channel="harness",
    )
    b.outcomes.append(body["id"])
    b.lessons.extend(body["lessons_created"])
    # A person's name for the project, and a contradiction a job left for review.
    project_label_set(
        workspace=workspace,
        project_digest=project_digest(remote=b.project_remote),
        label=text("project_label", f"{name} shop"),
        actor=person_actor("test"),
    )
    b.labels.append(
        ProjectLabel.objects.get(
            workspace=workspace, project_digest=project_digest(remote=b.project_remote)
        ).pk
    )
    if b.lessons:
        review, _ = review_item_open(
            workspace=workspace,
            a_type="knowledge",
            a_id=item.pk,
            b_type="lesson",
            b_id=b.lessons[0],
            reason="conflicting advice on installs",
        )
        b.review_items.append(review.pk)
    # The person's turn (posted by the harness) the learned preference cites.
    _raw_history(b, name=name, text=text)
    # A learned preference (auto-approved: the workspace opted in) and a fact.
    # One sentence, marker inside: the person's turn says it as one of their sentences.
    body = text("delta", f"Escalate threads from the {name} board after a day") + "."
    write = delta_create(
        channel="agent",
        agent=agent,
        skill_name="triage-inbox",
        kind="preference",
        anchor={"section": "escalation"},
        payload={"body": body},
        provenance=backed(
            agent, {"source": "user_instruction", "turns": [f"{b.session}#1"]}, said=body
        ),
    )
    b.deltas.append(write.delta.pk)
    value = text("fact", f"lead@{name}.example.com")
    fact, _ = fact_put(
        channel="agent",
        workspace=workspace,
        agent=agent,
        namespace="priority_senders",
        key=f"{name}-lead",
        value=value,
        provenance=backed(
            agent,
            {"source": "user_instruction", "turns": [f"{b.session}#2"]},
            said=fact_claim(key=f"{name}-lead", value=value),
        ),
    )
    b.facts.append(fact.pk)
    harness_feedback(
        agent=agent,
        action_type="triage",
        scope=text("feedback", f"skill:triage-inbox:{name}").replace(" ", "-"),
        positive=True,
        delta_ids=[write.delta.pk],
    )
    # The delta write as the API answered it, kept for Idempotency-Key replays.
    replay = json.dumps(
        {
            "id": write.delta.pk,
            "status": write.delta.status,
            "payload": write.delta.payload,
            "provenance": write.delta.provenance,
            "scope": write.delta.scope,
        }
    ).encode()
    idempotency_store(
        agent=agent,
        key=f"key-{name}",
        method="POST",
        path="/api/v1/skills/triage-inbox/deltas/",
        digest=request_digest(method="POST", path="/x", body=replay),
        status_code=201,
        body=replay,
        content_type="application/json",
    )
    # The effective skill cached for the session renders the active delta.
    effective_skill_resolve(agent=agent, skill_name="triage-inbox", session_id=b.session)
    return b


def _raw_history(b: Bundle, *, name: str, text) -> None:
    """A turn, and a failed tool call (which writes the operation's error item)."""
    workspace = b.agent.workspace
    turn_store(
        workspace=workspace,
        agent=b.agent,
        session_id=b.session,
        role="user",
        turn_index=1,
        content=text("turns", f"Please install the {name} dependencies."),
        context=b.context,
        channel=Channel.HARNESS,  # the harness posts what the person said
    )
    logged = tool_calls_log(
        workspace=workspace,
        agent=b.agent,
        calls=[
            {
                "session_id": b.session,
                "tool": "shell",
                "operation_key": f"pip:{name}",
                "ok": False,
                "error": text("tool_calls", f"pip: no matching distribution for {name}"),
            }
        ],
    )
    b.error_items.extend(item.pk for item in logged.error_items)


def confirm_lesson(*, agent: Agent, lesson_id: int, session: str, outcome_id: str, **kw) -> int:
    """A passed outcome with the lesson in play: one more supporting outcome."""
    body, _ = outcome_record(
        agent=agent,
        outcome_id=outcome_id,
        session_id=session,
        approach=[step("uv pip install", "setup.cfg", "ok", 1)],
        checks=[check(2, 0)],
        in_play=[{"type": "lesson", "id": lesson_id}],
        **kw,
        channel="harness",
    )
    return body["id"]


def ready_agent(workspace: Workspace, name: str) -> Agent:
    from memory.identity.services import agent_get_or_create

    agent = agent_get_or_create(workspace=workspace, name=name)
    agent_tools_set(agent=agent, tools=EMAIL_TOOLS)
    return agent


# --------------------------------------------------------------------------- sweeps


def sql_sweep(marker: str) -> dict[str, int]:
    """Every text, JSON, byte and full-text column of every table, enumerated from
    information_schema (not a hand list): rows still containing ``marker``."""
    found: dict[str, int] = {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = 'public' AND data_type IN "
            "('text', 'character varying', 'character', 'json', 'jsonb', 'bytea', 'tsvector')"
        )
        columns = cursor.fetchall()
        assert len(columns) > 50, "the sweep should see every text column"
        for table, column, data_type in columns:
            if data_type == "bytea":
                where = f"position(convert_to(%s, 'UTF8') in \"{column}\") > 0"
                param = marker
            else:
                where = f'"{column}"::text ILIKE %s'
                param = f"%{marker.lower()}%"
            cursor.execute(f'SELECT count(*) FROM "{table}" WHERE {where}', [param])
            count = cursor.fetchone()[0]
            if count:
                found[f"{table}.{column}"] = count
    return found


def redis_sweep(marker: str) -> list[str]:
    """Keys of the cache and broker database whose name or value holds ``marker``."""
    import redis

    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    needle = marker.encode()
    hits = []
    for key in client.scan_iter(count=500):
        kind = client.type(key).decode()
        if kind == "string":
            values = [client.get(key) or b""]
        elif kind == "hash":
            values = list(client.hgetall(key).items())
            values = [v for pair in values for v in pair]
        elif kind == "list":
            values = client.lrange(key, 0, -1)
        elif kind == "set":
            values = list(client.smembers(key))
        elif kind == "zset":
            values = client.zrange(key, 0, -1)
        else:
            values = []
        if needle in key or any(needle in (v or b"") for v in values):
            hits.append(key.decode(errors="replace"))
    return hits


def table_counts(workspace: Workspace) -> dict[str, int]:
    """Rows per erasable table in ``workspace``."""
    from memory.privacy.datamap import Plan, erasable_tables
    from memory.privacy.selection import Selector

    plan = Plan(workspace=workspace, selector=Selector(kind="workspace"))
    return {t.label: plan.scoped(t.label).count() for t in erasable_tables()}


def rows_of(bundle: Bundle, *, error_items: bool = True) -> dict[str, list[int]]:
    return {
        "memory.Knowledge": bundle.knowledge + (bundle.error_items if error_items else []),
        "memory.Outcome": bundle.outcomes,
        "memory.Lesson": bundle.lessons,
        "memory.SkillDelta": bundle.deltas,
        "memory.LearnedFact": bundle.facts,
        "memory.ProjectLabel": bundle.labels,
        "memory.ReviewItem": bundle.review_items,
    }


def exists(label: str, pk: int) -> bool:
    return apps.get_model(label).objects.filter(pk=pk).exists()


def disk_sweep(marker: str, *, extra_text: str = "") -> list[str]:
    """Files under var/ (Valkey's append-only files and config, export files, worker
    logs, the secret key...) that hold ``marker``, plus ``extra_text`` (captured
    logs). PostgreSQL's own directory is left out: its write-ahead log holds every
    insert until it is recycled (docs/operating/logging-and-retention.md); the database is swept
    row by row with sql_sweep, after VACUUM."""
    from cairn.embedded import var_dir

    needle = marker.encode()
    hits = []
    root = var_dir()
    for path in root.rglob("*"):
        if not path.is_file() or path.is_relative_to(root / "postgres"):
            continue
        try:
            if needle in path.read_bytes():
                hits.append(str(path.relative_to(root)))
        except OSError:
            continue
    if marker in extra_text:
        hits.append("captured logs")
    return hits
