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
