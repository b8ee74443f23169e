import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_models_and_migrations_agree():
    # Fails when a model changed without a migration.
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)


@pytest.mark.django_db
def test_outcome_foreign_keys_stay_without_indexes_of_their_own():
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE tablename = 'memory_outcome'")
        indexes = [row[0] for row in cursor.fetchall()]
        cursor.execute(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conrelid = 'memory_outcome'::regclass AND contype = 'f'"
        )
        foreign_keys = sorted(row[0] for row in cursor.fetchall())
    # Each lookup by agent or workspace is still served by an index leading with it.
    assert not [i for i in indexes if i.endswith('("agent_id")') or i.endswith("(agent_id)")]
    assert not [i for i in indexes if i.endswith("(workspace_id)")]
    assert any("(agent_id, channel, outcome_id)" in i for i in indexes)
    assert any("(workspace_id, project_digest" in i for i in indexes)
    assert [fk.split(" REFERENCES ")[1].split("(")[0] for fk in foreign_keys] == [
        "memory_agent",
        "memory_workspace",
    ]


# ------------------------------------------------------------------ the squashed history
# memory/migrations holds three migrations that replace the 38 written before them.
# tests/migrations_legacy keeps those 38 so this test can build a database the way an
# existing install has it (at 0025_outcome_fk_indexes_covered, with rows in it), then
# upgrade it with the squashed set, in subprocesses on databases of their own.

LEGACY_HEAD = "0025_outcome_fk_indexes_covered"
SQUASHED = ["0001_pgvector_extension", "0002_schema", "0003_vectors_inline"]

# The fill writes through the models as they stood at the old head (the migration
# state, not today's classes, which may already carry columns added after the squash):
# one row in every memory table it can build, its foreign keys pointing at rows made
# first, each field given a plain value of its type (the first of its choices).
FILL = """
import datetime
import django
django.setup()
from django.db import connection, models, transaction
from django.db.migrations.loader import MigrationLoader
from pgvector.django import VectorField

apps = MigrationLoader(connection).project_state(("memory", "LEGACY_HEAD")).apps
made = {}
# Values a check constraint needs that a plain default does not give.
OVERRIDES = {"Lesson": {"project_digest": "d" * 64}}

def value(field):
    if field.choices:
        return field.choices[0][0]
    if isinstance(field, VectorField):
        return [0.1] * field.dimensions
    if isinstance(field, (models.DateTimeField,)):
        return datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    if isinstance(field, models.DateField):
        return datetime.date(2026, 1, 1)
    if isinstance(field, models.BooleanField):
        return False
    if isinstance(field, (models.IntegerField, models.BigIntegerField)):
        return 1
    if isinstance(field, (models.FloatField, models.DecimalField)):
        return 0.5
    if isinstance(field, models.JSONField):
        return {}
    if isinstance(field, models.BinaryField):
        return b"x"
    if isinstance(field, models.UUIDField):
        import uuid
        return uuid.uuid4()
    if isinstance(field, (models.CharField, models.TextField)):
        return ("x" * 64)[: field.max_length or 64]
    return None

def make(model, depth=0):
    if model in made or depth > 8:
        return made.get(model)
    kwargs = {}
    for field in model._meta.concrete_fields:
        if field.primary_key or field.has_default() or field.null:
            continue
        if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
            continue
        if field.is_relation:
            kwargs[field.name] = make(field.related_model, depth + 1)
        else:
            kwargs[field.name] = value(field)
    kwargs.update(OVERRIDES.get(model.__name__, {}))
    try:
        with transaction.atomic():
            made[model] = model.objects.create(**kwargs)
    except Exception as error:
        made[model] = None
        print("skipped", model.__name__, str(error).splitlines()[0][:160])
    return made[model]

for model in apps.get_app_config("memory").get_models():
    make(model)
print("filled", sum(1 for row in made.values() if row is not None), "of", len(made))
""".replace("LEGACY_HEAD", LEGACY_HEAD)

SCHEMA_QUERIES = {
    "columns": (
        "SELECT table_name, column_name, data_type, udt_name, is_nullable, column_default,"
        " character_maximum_length, is_identity, is_generated, generation_expression"
        " FROM information_schema.columns WHERE table_schema = 'public'"
    ),
    "storage": (
        "SELECT c.relname, a.attname, a.attstorage FROM pg_attribute a"
        " JOIN pg_class c ON c.oid = a.attrelid"
        " WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r'"
        " AND a.attnum > 0 AND NOT a.attisdropped"
    ),
    "indexes": "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'",
    "constraints": (
        "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint"
        " WHERE connamespace = 'public'::regnamespace"
    ),
    "options": (
        "SELECT relname, reloptions::text FROM pg_class"
        " WHERE relnamespace = 'public'::regnamespace AND reloptions IS NOT NULL"
    ),
    "extensions": "SELECT extname FROM pg_extension",
}


def _server(dbname: str):
    import psycopg
    from django.conf import settings

    db = settings.DATABASES["default"]
    return psycopg.connect(
        host=db.get("HOST") or None,
        port=db.get("PORT") or None,
        user=db.get("USER") or None,
        password=db.get("PASSWORD") or None,
        dbname=dbname,
        autocommit=True,
    )


def _manage(dbname: str, *args: str, settings_module: str = "cairn.settings_test", code=None):
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = dict(os.environ)
    env["DJANGO_SETTINGS_MODULE"] = settings_module
    env["CAIRN_DATABASE_NAME"] = dbname
    # Jobs the fill enqueues go to a broker db no test worker reads.
    env["CAIRN_REDIS_DB"] = "6"
    base = Path(__file__).resolve().parent.parent
    command = [sys.executable, "-c", code] if code else [sys.executable, "manage.py", *args]
    result = subprocess.run(command, cwd=base, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def _schema(dbname: str) -> dict[str, list]:
    with _server(dbname) as conn:
        return {
            name: sorted(conn.execute(sql).fetchall(), key=repr)
            for name, sql in SCHEMA_QUERIES.items()
        }


def _rows(dbname: str) -> dict[str, tuple]:
    """Each table's row count and a digest of its rows (migration records aside)."""
    with _server(dbname) as conn:
        tables = [
            t
            for (t,) in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
                " AND tablename <> 'django_migrations'"
            )
        ]
        return {
            table: conn.execute(
                f"SELECT count(*), md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), ''))"
                f' FROM "{table}" t'
            ).fetchone()
            for table in tables
        }


@pytest.fixture
def scratch_databases():
    import os
    import uuid

    import redis
    from django.conf import settings

    names = [f"cairn_squash_{os.getpid()}_{uuid.uuid4().hex[:6]}_{n}" for n in ("old", "new")]
    with _server("postgres") as conn:
        for name in names:
            conn.execute(f'CREATE DATABASE "{name}"')
    yield names
    with _server("postgres") as conn:
        for name in names:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    broker = settings.CELERY_BROKER_URL.rsplit("/", 1)[0]
    redis.Redis.from_url(f"{broker}/6").flushdb()


def test_a_database_at_the_old_head_upgrades_to_the_squashed_set_unchanged(scratch_databases):
    old, new = scratch_databases
    _manage(old, "migrate", "--no-input", settings_module="tests.migrations_legacy.settings")
    with _server(old) as conn:
        applied = {
            n for (n,) in conn.execute("SELECT name FROM django_migrations WHERE app = 'memory'")
        }
    assert LEGACY_HEAD in applied and len(applied) == 38
    filled = _manage(old, settings_module="tests.migrations_legacy.settings", code=FILL)
    rows_before, schema_before = _rows(old), _schema(old)
    ours = [table for table in rows_before if table.startswith("memory_")]
    empty = [table for table in ours if not rows_before[table][0]]
    assert len(empty) <= 0.2 * len(ours), (empty, filled)
    for table in ["memory_knowledge", "memory_outcome", "memory_lesson", "memory_skilldelta"]:
        assert rows_before[table][0] > 0, (table, filled)

    # The squashed set sees its 38 predecessors applied: nothing runs, nothing changes.
    squashed_head = SQUASHED[-1]
    plan = _manage(old, "migrate", "memory", squashed_head, "--plan")
    assert "No planned migration operations" in plan
    _manage(old, "migrate", "memory", squashed_head, "--no-input")
    assert _rows(old) == rows_before
    assert _schema(old) == schema_before
    with _server(old) as conn:
        recorded = {
            n for (n,) in conn.execute("SELECT name FROM django_migrations WHERE app = 'memory'")
        }
    assert set(SQUASHED) <= recorded
    # Migrations written after the squash then run on it as on any install.
    _manage(old, "migrate", "--no-input")
    _manage(old, "makemigrations", "--check", "--dry-run")

    # A new install runs the three first and, at their head, has the very schema the
    # old path made; the later migrations follow.
    fresh = _manage(new, "migrate", "memory", "--plan")
    planned = [line.strip() for line in fresh.splitlines() if line.startswith("memory.")]
    assert planned[: len(SQUASHED)] == [f"memory.{name}" for name in SQUASHED]
    assert not any(name.startswith("memory.00") and "merge" in name for name in planned)
    with _server(old) as conn:
        others = [a for (a,) in conn.execute("SELECT DISTINCT app FROM django_migrations")]
    for app in sorted(set(others) - {"memory"}):
        _manage(new, "migrate", app, "--no-input")
    _manage(new, "migrate", "memory", squashed_head, "--no-input")
    assert _schema(new) == schema_before
    _manage(new, "migrate", "--no-input")
    assert _schema(new) == _schema(old)
    _manage(new, "makemigrations", "--check", "--dry-run")


@pytest.mark.django_db(transaction=True)
def test_ids_per_channel_migrate_existing_rows():
    """Outcomes and evidence keep their ids; a stored idempotency answer that says it was
    the harness's becomes a harness key; afterwards the agent channel may use the same
    ids without standing in for the harness's."""
    import json

    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    graph = executor.loader.graph
    [node] = [n for n in graph.nodes if n[0] == "memory" and n[1].endswith("_trust_seams")]
    [before] = sorted(graph.node_map[node].parents, key=lambda n: n[1])[-1:]
    leaves = executor.loader.graph.leaf_nodes()
    executor.migrate([before])
    try:
        old = MigrationExecutor(connection).loader.project_state(before).apps
        workspace = old.get_model("memory", "Workspace").objects.create(name="migrating")
        agent = old.get_model("memory", "Agent").objects.create(workspace=workspace, name="a")
        outcome = old.get_model("memory", "Outcome").objects.create(
            workspace=workspace,
            agent=agent,
            outcome_id="run-1",
            session_id="s",
            project_digest="d" * 64,
            channel="harness",
        )
        evidence = old.get_model("memory", "Evidence").objects.create(
            workspace=workspace,
            evidence_id="review-1",
            kind="user_confirmed",
            target_type="lesson",
            target_id=1,
            channel="harness",
        )
        records = old.get_model("memory", "IdempotencyRecord").objects
        for key, path, body in [
            ("k-harness", "/api/v1/outcomes/", {"id": 1, "channel": "harness"}),
            ("k-agent", "/api/v1/evidence/", {"id": 2, "channel": "agent"}),
            ("k-turn", "/api/v1/sessions/s/turns/", {"channel": "harness"}),
            ("k-raw", "/api/v1/outcomes/", None),
        ]:
            records.create(
                workspace=workspace,
                agent=agent,
                key=key,
                method="POST",
                path=path,
                request_digest="x",
                status_code=201,
                response_body=b"not json" if body is None else json.dumps(body).encode(),
            )
        executor = MigrationExecutor(connection)
        executor.migrate([node])
        new = MigrationExecutor(connection).loader.project_state(node).apps
        scopes = dict(
            new.get_model("memory", "IdempotencyRecord").objects.values_list("key", "scope")
        )
        # Only outcome and evidence answers say whose they were; the rest were agents'.
        assert scopes == {
            "k-harness": "harness",
            "k-agent": "agent",
            "k-turn": "agent",
            "k-raw": "agent",
        }
        outcomes = new.get_model("memory", "Outcome").objects
        assert outcomes.get(pk=outcome.pk).outcome_id == "run-1"
        outcomes.create(
            workspace_id=workspace.pk,
            agent_id=agent.pk,
            outcome_id="run-1",
            session_id="s",
            project_digest="d" * 64,
            channel="agent",
        )
        assert outcomes.filter(outcome_id="run-1").count() == 2
        assert new.get_model("memory", "Evidence").objects.get(pk=evidence.pk).channel == "harness"
    finally:
        MigrationExecutor(connection).migrate(leaves)
