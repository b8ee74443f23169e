"""compose.yaml is the production shape; check it parses and points at real things."""

import importlib
import shutil
from pathlib import Path

import yaml

BASE = Path(__file__).resolve().parent.parent


def _compose():
    return yaml.safe_load((BASE / "compose.yaml").read_text())


def test_it_has_the_production_services_with_health_checks():
    services = _compose()["services"]
    assert {"db", "redis", "web", "worker", "beat"} <= set(services)
    for name in ("db", "redis", "web", "worker", "beat"):
        assert "healthcheck" in services[name], name
    assert services["db"]["image"].startswith("pgvector/pgvector")


def test_app_services_are_configured_by_environment():
    services = _compose()["services"]
    for name in ("web", "worker", "beat", "migrate"):
        env = services[name]["environment"]
        assert env["DATABASE_URL"].startswith("postgres://")
        assert env["REDIS_URL"].startswith("redis://")
        assert "cairn-data:/data" in services[name]["volumes"]


def test_each_command_exists_in_the_project():
    services = _compose()["services"]
    commands = {name: services[name]["command"] for name in ("web", "worker", "beat", "migrate")}
    assert commands["web"][:2] == ["gunicorn", "cairn.wsgi"]
    assert callable(importlib.import_module("cairn.wsgi").application)
    for name in ("worker", "beat"):
        assert commands[name][:3] == ["celery", "-A", "cairn"]
        assert commands[name][3] == name
    assert commands["migrate"][:2] == ["python", "manage.py"]
    assert (BASE / "memory" / "management" / "commands" / f"{commands['migrate'][2]}.py").exists()
    # The executables the image runs are installed from pyproject's pins.
    for exe in ("gunicorn", "celery"):
        assert shutil.which(exe, path=str(BASE / ".venv" / "bin")) or shutil.which(exe), exe
    assert (BASE / "Dockerfile").exists()
