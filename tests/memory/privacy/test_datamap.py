"""The derived-data map covers every table, and says something true about each."""

import pytest
from django.apps import apps
from django.db import models

from memory.privacy.datamap import TABLES
from memory.privacy.queries import text_columns
from memory.privacy.tables import CONTENT, DERIVED, KEPT


def _installed(label: str) -> bool:
    try:
        apps.get_model(label)
    except LookupError:
        return False
    return True


def test_it_has_an_entry_for_every_memory_model():
    missing = [
        m._meta.label
        for m in apps.get_app_config("memory").get_models()
        if m._meta.label not in TABLES
    ]
    assert missing == [], (
        f"Add these models to memory/datamap.py (how erasure and export treat them): {missing}"
    )


def test_it_names_auth_users_and_memberships():
    assert TABLES["auth.User"].role == KEPT
    assert TABLES["memory.Membership"].role == KEPT


def test_it_gives_every_entry_a_role_and_a_reason():
    for table in TABLES.values():
        assert table.role in (CONTENT, DERIVED, KEPT), table.label
        assert len(table.why) > 20, table.label


def test_it_scopes_every_table_to_a_workspace():
    for table in TABLES.values():
        path = table.workspace_path
        assert path, table.label
        if path == "workspace_id":
            # A plain id column (tables kept by triggers, which outlive the cascade).
            field = table.model._meta.get_field(path)
            assert isinstance(field, models.BigIntegerField), table.label
        elif path != "pk":
            # The path resolves to the Workspace model.
            model = table.model
            for part in path.split("__"):
                model = model._meta.get_field(part).related_model
            assert model._meta.label == "memory.Workspace", table.label


def test_it_points_derivations_and_follows_at_tables_in_the_map():
    for table in TABLES.values():
        for derivation in table.derived:
            assert derivation.sources, derivation.name
            # A source may belong to an area not installed yet; then the derivation is idle.
            for source in derivation.sources:
                assert source in TABLES or not _installed(source), (derivation.name, source)
            assert (derivation.rows is None) == (derivation.action == "rebuild"), derivation.name
        for source in table.follows:
            assert source in TABLES, (table.label, source)
        if table.lineage:
            field = table.model._meta.get_field(table.lineage)
            assert field.related_model is table.model


def test_it_never_erases_or_exports_secrets():
    assert TABLES["memory.ApiToken"].role == KEPT
    assert TABLES["memory.ApiToken"].export is None
    assert TABLES["memory.IdempotencyRecord"].export is None


def test_it_erases_every_table_that_holds_free_text():
    """A table with free-text or JSON columns is erasable, or says why it keeps them."""
    kept_with_text = [
        t.label
        for t in TABLES.values()
        if t.role == KEPT
        and any(isinstance(f, models.TextField | models.JSONField) for f in text_columns(t.model))
    ]
    # Each of these explains itself in `why`; the list is pinned so a new one is a decision.
    assert sorted(kept_with_text) == sorted(
        [
            "memory.AgentTool",
            "memory.AuditEvent",
            "memory.ErasureReceipt",
            "memory.ErasureSelector",
            "memory.JobRun",
            "memory.SkillVersion",
            "memory.Workspace",
        ]
    )


@pytest.mark.parametrize("label", ["memory.Lesson", "memory.Knowledge", "memory.SkillDelta"])
def test_it_follows_lineage_on_superseded_chains(label):
    assert TABLES[label].lineage == "superseded_by"
