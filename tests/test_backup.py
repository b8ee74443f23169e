"""`make backup` / `make restore`: a backup restored into a fresh var/ has the same
rows in every table, the same secret key, and a person can log in."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from memory.identity.services import user_create
from memory.models import Knowledge
from tests.factories.identity import WorkspaceFactory

BASE = Path(__file__).resolve().parent.parent


def _run(args, **env_extra):
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "CAIRN_DATABASE_NAME"}}
    env.update(env_extra)
    return subprocess.run(
        [sys.executable, *args], cwd=BASE, env=env, capture_output=True, text=True, timeout=300
    )


LOGIN_CHECK = """
import django, json
django.setup()
from django.test import Client
from memory.models import Knowledge
client = Client(HTTP_HOST="localhost")
response = client.post("/login/", {"username": "restored", "password": "restore-pw-1"})
print(json.dumps({"login": response.status_code, "home": client.get("/dashboard/").status_code,
                  "knowledge": Knowledge.objects.count()}))
"""


@pytest.mark.django_db(transaction=True)
def test_backup_restores_into_a_fresh_var_with_identical_counts_and_a_working_login(tmp_path):
    workspace = WorkspaceFactory()
    user_create(workspace=workspace, username="restored", role="admin", password="restore-pw-1")
    Knowledge.objects.bulk_create(
        Knowledge(workspace=workspace, content=f"kept fact {i}") for i in range(25)
    )
    archive = tmp_path / "b.tar"
    out = _run(
        ["-m", "cairn.backup", "backup", str(archive)],
        CAIRN_DATABASE_NAME=settings.DATABASES["default"]["NAME"],
    )
    assert out.returncode == 0, out.stderr
    assert oct(archive.stat().st_mode & 0o777) == "0o600"

    fresh = tmp_path / "v"  # short: unix socket paths have a ~100-byte limit
    try:
        out = _run(["-m", "cairn.backup", "restore", str(archive)], CAIRN_VAR_DIR=str(fresh))
        assert out.returncode == 0, out.stderr[-3000:]
        assert json.loads(out.stdout.splitlines()[-1])["matches_manifest"] is True
        assert (fresh / "secret_key").read_text() == (BASE / "var" / "secret_key").read_text()
        out = _run(
            ["-c", LOGIN_CHECK],
            CAIRN_VAR_DIR=str(fresh),
            DJANGO_SETTINGS_MODULE="cairn.settings_test",  # static files without collectstatic
            CAIRN_REDIS_DB="5",
        )
        assert out.returncode == 0, out.stderr[-3000:]
        result = json.loads(out.stdout.splitlines()[-1])
        assert result == {"login": 302, "home": 200, "knowledge": Knowledge.objects.count()}
    finally:
        _run(["-m", "cairn.embedded", "stop"], CAIRN_VAR_DIR=str(fresh))
