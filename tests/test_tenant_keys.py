"""Every tenant table carries a workspace key, and no service query leaves it out.

The plan beyond one database (docs/operating/scaling-out.md) distributes the tenant
tables by ``workspace_id``; that only works if every table has the key and every
query names it, so each query goes to one workspace's shard.

1. Schema: every model of the ``memory`` app has a ``workspace`` foreign key, or is
   listed below as the tenant itself, a child reached only through its parent's key,
   or global, each with the reason.
2. Queries: a representative session of agent, harness and admin API calls runs with
   every SQL statement recorded together with the function that sent it. A SELECT,
   UPDATE or DELETE whose main table is keyed must filter on that table's
   ``workspace_id``; the few global look-ups are listed with the reason. A write or
   row lock by primary key passes (the request read that row through a scoped query
   first; under Citus these change too, see the docs). A by-id read that forgets the
   workspace shows up here with the function to fix.
"""

from __future__ import annotations

import re
import traceback
from pathlib import Path

import pytest
from django.apps import apps
from django.db import connection

from tests.factories.identity import api_client
from tests.factories.lessons import SHOP, passed_payload
from tests.factories.situations import MACHINE, gh_logged_out
from tests.factories.skills import declare_tools, register

ROOT = Path(__file__).resolve().parent.parent

#: The tenant itself: distributed by its own id (``workspace_id`` everywhere else).
TENANT = {"memory_workspace": "the workspace: its id is the key"}

#: Tables without their own key, reached only through a keyed parent (the foreign
#: key named): every read goes through a parent row read in the workspace. Under
#: Citus they get a ``workspace_id`` column to be co-located with the parent.
CHILDREN = {
    "memory_lessonevidence": "lesson (and outcome): the evidence rows of one lesson",
    "memory_erasureselector": "job_run: what one erasure run selected",
    "memory_skillversion": "skill: the versions of one registered skill",
    "memory_webhookdelivery": "webhook: the deliveries of one webhook",
    "memory_webhookattempt": "delivery: the attempts of one delivery",
}

#: Keyed tables read without a workspace filter, on purpose: (table, function).
GLOBAL_READS = {
    # A bearer token is how a request learns its workspace: the look-up is by the
    # token's unique hash, then the agent it belongs to.
    ("memory_apitoken", "memory/identity/services.py:_active_token"),
}

QUERY_KINDS = re.compile(r"^\s*(SELECT|UPDATE|DELETE)\b", re.I)
MAIN_TABLE = re.compile(
    r'^\s*(?:SELECT\b.*?\bFROM|UPDATE|DELETE\s+FROM)\s+"?(memory_\w+)"?', re.I | re.S
)
BY_PRIMARY_KEY = r'{}\."?id"?\s*(=|IN\b)'


def top_level(sql: str) -> str:
    """``sql`` with every parenthesised part blanked out (subqueries, function calls)."""
    out, depth = [], 0
    for char in sql:
        depth += char == "("
        out.append(char if depth == 0 else " ")
        depth -= char == ")" and depth > 0
    return "".join(out)


def keyed_tables() -> set[str]:
    return {
        model._meta.db_table
        for model in apps.get_app_config("memory").get_models()
        if any(f.column == "workspace_id" for f in model._meta.concrete_fields)
    }


def test_every_tenant_table_carries_a_workspace_key_or_says_why_not():
    tables = {m._meta.db_table for m in apps.get_app_config("memory").get_models()}
    unkeyed = tables - keyed_tables()
    listed = set(TENANT) | set(CHILDREN)
    assert unkeyed - listed == set(), "a new table without workspace_id: add the key"
    assert listed - unkeyed == set(), "listed as unkeyed but has the key (or is gone)"
    for table, reason in CHILDREN.items():
        parent = reason.split(":")[0].split(" ")[0]
        model = next(m for m in apps.get_app_config("memory").get_models()
                     if m._meta.db_table == table)  # fmt: skip
        field = model._meta.get_field(parent)
        assert field.is_relation and field.related_model._meta.db_table in (
            keyed_tables() | set(CHILDREN)
        ), table


class Recorder:
    """Every statement with the innermost project function that sent it."""

    def __init__(self):
        self.statements: list[tuple[str, str]] = []

    def __call__(self, execute, sql, params, many, context):
        where = ""
        for frame in reversed(traceback.extract_stack()):
            path = Path(frame.filename)
            if path.is_relative_to(ROOT) and path.parts[len(ROOT.parts)] in (
                "memory", "agents", "reviews", "cairn"
            ):  # fmt: skip
                where = f"{path.relative_to(ROOT)}:{frame.name}"
                break
        self.statements.append((sql, where))
        return execute(sql, params, many, context)


def unscoped(statements, keyed: set[str]) -> list[tuple[str, str, str]]:
    """(table, function, statement) of each keyed statement without its workspace.

    The main table is the first one at the top level of the statement. It is scoped
    when the condition (after its top-level WHERE, or in a JOIN's ON) filters its
    ``workspace_id``, under any name it has in the statement. An UPDATE, DELETE or
    SELECT ... FOR UPDATE by primary key writes or locks a row the request has already
    read through a scoped query, and passes; a plain SELECT must always be scoped.
    """
    out = []
    for sql, where in statements:
        if not QUERY_KINDS.match(sql):
            continue
        flat = top_level(sql)
        found = MAIN_TABLE.match(flat)
        if not found or found.group(1) not in keyed:
            continue
        table = found.group(1)
        aliases = re.findall(rf'"?{table}"?\s+(?:AS\s+)?([A-Za-z]\w*)', sql)
        names = [f'"{table}"', table] + [
            a for a in aliases if a.upper() not in ("WHERE", "INNER", "LEFT", "SET", "ON")
        ]
        parts = re.split(r"\bWHERE\b", flat, maxsplit=1, flags=re.I)
        head = parts[0]
        condition = sql[len(head) :]  # the whole condition, subqueries included
        text = condition + " " + " ".join(re.findall(r"\bON\s*\((.*?)\)", sql[: len(head)]))
        scoped = any(
            re.search(rf'(?<![\w"]){re.escape(name)}\."?workspace_id"?\s*(=|IN\b)', text, re.I)
            for name in names
        ) or re.search(r'(?<![.\w"])"?workspace_id"?\s*(=|IN\b)', text, re.I)
        write = not flat.lstrip().upper().startswith("SELECT") or "FOR UPDATE" in flat.upper()
        by_pk = any(re.search(BY_PRIMARY_KEY.format(re.escape(name)), text, re.I) for name in names)
        if scoped or (write and by_pk) or (table, where) in GLOBAL_READS:
            continue
        out.append((table, where, sql))
    return out


def session_of_calls(api, harness, admin) -> None:
    """A representative agent session, plus the admin's jobs, through the real API."""

    def ok(response, codes=(200, 201, 202, 204)):
        assert response.status_code in codes, (response.status_code, response.content[:300])
        return response.json() if response.status_code != 204 else None

    ok(api.get("/api/v1/agents/me/"))
    item = ok(api.post("/api/v1/knowledge/", {"content": "Deploys go through the staging "
                       "cache first", "context": "ops"}, format="json"))  # fmt: skip
    other = ok(api.post("/api/v1/knowledge/", {"content": "The parser rejects tabs in "
                        "column names", "context": "ops"}, format="json"))  # fmt: skip
    ok(api.post("/api/v1/knowledge/batch/", {"items": [{"content": "Backups run at two"}]},
                format="json"))  # fmt: skip
    ok(api.get("/api/v1/knowledge/"))
    ok(api.get(f"/api/v1/knowledge/{item['id']}/"))
    ok(api.patch(f"/api/v1/knowledge/{item['id']}/",
                 {"content": "Deploys go through the staging cache first, always"},
                 format="json"))  # fmt: skip
    ok(api.delete(f"/api/v1/knowledge/{other['id']}/"))
    ok(api.post("/api/v1/recall/", {"query": "staging cache deploys"}, format="json"))
    for n, text in enumerate(("how do deploys work", "through the staging cache")):
        ok(api.post("/api/v1/sessions/s-1/turns/", {"role": "user", "content": text,
                    "turn_index": n}, format="json"))  # fmt: skip
    ok(api.get("/api/v1/sessions/s-1/turns/"))
    ok(api.get("/api/v1/conversations/search/", {"q": "staging cache"}))
    ok(api.post("/api/v1/tool-calls/", {"calls": [{"session_id": "s-1", "tool": "shell",
                "operation_key": "pytest", "ok": False, "error": "exit 1"}]},
                format="json"))  # fmt: skip
    ok(api.get("/api/v1/tool-calls/stats/"))
    outcome = ok(harness.post("/api/v1/outcomes/", passed_payload(), format="json"))
    lesson = ok(harness.post("/api/v1/lessons/", {"text": "Run pytest from the root.",
                "operation_key": "pytest:.", "evidence": [outcome["id"]],
                "project_remote": SHOP}, format="json"))  # fmt: skip
    ok(harness.post("/api/v1/evidence/", {"evidence_id": "review-1", "kind": "user_confirmed",
                    "target_type": "lesson", "target_id": lesson["id"]}, format="json"))  # fmt: skip
    ok(api.get("/api/v1/lessons/"))
    ok(api.get(f"/api/v1/lessons/{lesson['id']}/"))
    ok(api.get(f"/api/v1/lessons/{lesson['id']}/history/"))
    ok(api.get("/api/v1/context/", {"project_remote": SHOP}))
    ok(api.get("/api/v1/lessons/check/", {"operation_key": "pytest:.", "project_remote": SHOP}))
    ok(harness.post(f"/api/v1/lessons/{lesson['id']}/retire/", {"reason": "done"},
                    format="json"))  # fmt: skip
    ok(harness.post("/api/v1/situations/", {"situation": gh_logged_out(),
                    "tool": "check_cli_setup", "turn_id": "t1"}, format="json"))  # fmt: skip
    ok(api.get("/api/v1/situations/known/", {"machine": MACHINE}))
    ok(register(api))
    declare_tools(api)
    ok(api.get("/api/v1/skills/triage-inbox/"))
    ok(api.get("/api/v1/skills/triage-inbox/effective/"))
    ok(api.get("/api/v1/skills/triage-inbox/deltas/"))
    ok(api.get("/api/v1/agents/me/tools/"))
    ok(admin.post("/api/v1/jobs/", {"kind": "reconcile"}, format="json"))
    job = ok(admin.post("/api/v1/exports/", {}, format="json"))
    ok(admin.get(f"/api/v1/jobs/{job['job_id']}/"))
    ok(admin.post("/api/v1/erasures/preview/", {"selector": {"context": "ops"}}, format="json"))


@pytest.mark.django_db
def test_no_service_query_leaves_the_workspace_out(agent, api, harness, make_api, workspace):
    # A neighbour with the same kinds of rows, so a missing filter would read them.
    neighbour = make_api()
    neighbour_harness = api_client(neighbour.agent, scope="harness")
    neighbour_admin = make_api(workspace=neighbour.agent.workspace, scope="admin")
    session_of_calls(neighbour, neighbour_harness, neighbour_admin)
    admin = make_api(workspace=workspace, scope="admin", name="ops")
    recorder = Recorder()
    with connection.execute_wrapper(recorder):
        session_of_calls(api, harness, admin)
    assert len(recorder.statements) > 200
    found = unscoped(recorder.statements, keyed_tables())
    report = "\n".join(
        f"{table} from {where}: {' '.join(sql.split())}" for table, where, sql in found
    )
    assert not found, "queries without the workspace:\n" + report


def test_the_check_catches_a_read_by_id_without_the_workspace():
    keyed = {"memory_knowledge"}
    by_id = (
        'SELECT "memory_knowledge"."id" FROM "memory_knowledge" WHERE "memory_knowledge"."id" = 5'
    )
    scoped = by_id + ' AND "memory_knowledge"."workspace_id" = 2'
    aliased = 'SELECT U0."id" FROM "memory_knowledge" U0 WHERE U0."workspace_id" IN (1)'
    raw = "SELECT k.id FROM memory_knowledge k WHERE k.workspace_id = %s AND k.id = 1"
    selected_only = (
        'SELECT "memory_knowledge"."workspace_id" FROM "memory_knowledge" '
        'WHERE "memory_knowledge"."id" = 5'
    )
    assert [t for t, _, _ in unscoped([(by_id, "x")], keyed)] == ["memory_knowledge"]
    assert unscoped([(scoped, "x"), (aliased, "x"), (raw, "x")], keyed) == []
    assert len(unscoped([(selected_only, "x")], keyed)) == 1
    write_by_pk = 'UPDATE "memory_knowledge" SET "status" = %s WHERE "memory_knowledge"."id" = %s'
    delete_by_agent = 'DELETE FROM "memory_knowledge" WHERE "memory_knowledge"."agent_id" = %s'
    in_subquery_only = (
        'SELECT "memory_lesson"."id" FROM "memory_lesson" WHERE "memory_lesson"."id" IN '
        '(SELECT U0."id" FROM "memory_knowledge" U0 WHERE U0."workspace_id" = 1)'
    )
    assert unscoped([(write_by_pk, "x")], keyed) == []
    assert len(unscoped([(delete_by_agent, "x")], keyed)) == 1
    assert len(unscoped([(in_subquery_only, "x")], keyed | {"memory_lesson"})) == 1
