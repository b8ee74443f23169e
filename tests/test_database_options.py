"""Statements are bound and prepared on the server (PostgreSQL plans a hot statement
once per connection), unless CAIRN_DB_PREPARE=0 turns it off for a pooler that
cannot keep prepared statements."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

BASE = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.django_db


def test_a_statement_run_twice_is_prepared_on_the_server(workspace):
    from memory.models import Lesson

    def prepared() -> list[str]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT statement FROM pg_prepared_statements")
            return [row[0] for row in cursor.fetchall() if "memory_lesson" in row[0]]

    before = prepared()
    for _ in range(3):
        assert not Lesson.objects.filter(workspace=workspace, operation_key="pytest").exists()
    assert len(prepared()) == len(before) + 1


def _options(**env_extra) -> str:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "cairn.settings", **env_extra}
    out = subprocess.run(
        [sys.executable, "-c", "from django.conf import settings; "
         "print(sorted(settings.DATABASES['default']['OPTIONS'].items()))"],
        cwd=BASE, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_cairn_db_prepare_0_turns_it_off():
    assert "('prepare_threshold', 2), ('server_side_binding', True)" in _options()
    off = _options(CAIRN_DB_PREPARE="0")
    assert "prepare_threshold" not in off and "server_side_binding" not in off


@pytest.mark.django_db(transaction=True)  # its own transaction, not the test's
def test_a_search_transaction_plans_for_its_own_values():
    from django.db import transaction

    from memory.knowledge.vector_search import set_vector_search

    def mode() -> str:
        with connection.cursor() as cursor:
            cursor.execute("SHOW plan_cache_mode")
            return cursor.fetchone()[0]

    with transaction.atomic():
        with connection.cursor() as cursor:
            set_vector_search(cursor, ef_search=100)
        assert mode() == "force_custom_plan"
    assert mode() == "auto"  # everything else may use a prepared statement's generic plan
