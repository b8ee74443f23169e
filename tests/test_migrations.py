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
    assert any("(agent_id, outcome_id)" in i for i in indexes)
    assert any("(workspace_id, project_digest" in i for i in indexes)
    assert [fk.split(" REFERENCES ")[1].split("(")[0] for fk in foreign_keys] == [
        "memory_agent",
        "memory_workspace",
    ]
