"""Declared checks run confined (bubblewrap, no Cairn variable, no network, the token
and state folders hidden) and count only when the runner's own report shows a test
that ran. A model-written ``conftest.py`` tries to take the token every way it can."""

from __future__ import annotations

import json
import socket
import sys
import threading

import pytest
from cairn_client.checks import Declared, clean_env, detect, run_confined, summary_counts

PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider -p no:django"
TOKEN = "cairn_h_" + "s3cr3t" * 6

THIEF = """
import json, os, socket, pathlib, pytest

def _try(fn):
    try:
        return fn()
    except Exception as exc:
        return f"failed: {exc.__class__.__name__}"

def pytest_sessionstart(session):
    found = {
        "env": {k: v for k, v in os.environ.items() if "CAIRN" in k or "TOKEN" in k},
        "file": _try(lambda: pathlib.Path(TOKEN_FILE).read_text()),
        "dir": _try(lambda: os.listdir(os.path.dirname(TOKEN_FILE))),
        "state": _try(lambda: os.listdir(STATE_DIR)),
        "cairn": _try(lambda: socket.create_connection(("127.0.0.1", PORT), timeout=3).close()),
        "parent_env": _try(lambda: open(f"/proc/{os.getppid()}/environ").read()),
    }
    pathlib.Path("stolen.json").write_text(json.dumps(found))

def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(pytest.mark.skip(reason="nothing to see"))
"""


@pytest.fixture
def project(tmp_path):
    path = tmp_path / "shop"
    path.mkdir()
    (path / "test_cart.py").write_text("def test_total():\n    assert 2 + 2 == 4\n")
    return path


@pytest.fixture
def secrets(tmp_path, monkeypatch):
    """A token folder and a state folder as the hook has them, and a listening Cairn."""
    token_dir = tmp_path / "home" / ".config" / "cairn"
    token_dir.mkdir(parents=True)
    (token_dir / "harness-token").write_text(TOKEN + "\n")
    state = tmp_path / "home" / ".local" / "state" / "cairn"
    state.mkdir(parents=True)
    (state / "s.json").write_text("{}")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    reached = []
    threading.Thread(target=lambda: reached.append(listener.accept()), daemon=True).start()
    monkeypatch.setenv("CAIRN_HARNESS_TOKEN", TOKEN)
    monkeypatch.setenv("CAIRN_HARNESS_TOKEN_FILE", str(token_dir / "harness-token"))
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_not_for_checks")
    yield {
        "token_file": token_dir / "harness-token",
        "hidden": [token_dir, state],
        "state": state,
        "port": listener.getsockname()[1],
        "reached": reached,
    }
    listener.close()


def test_a_model_written_conftest_gets_nothing_and_its_skips_are_no_pass(project, secrets):
    (project / "conftest.py").write_text(
        f"TOKEN_FILE = {str(secrets['token_file'])!r}\n"
        f"STATE_DIR = {str(secrets['state'])!r}\nPORT = {secrets['port']}\n" + THIEF
    )
    run = run_confined(
        Declared("test", PYTEST), project=project, hidden=secrets["hidden"], timeout=120
    )
    stolen = json.loads((project / "stolen.json").read_text())
    assert stolen["env"] == {}  # no CAIRN_*, no *TOKEN* variable
    assert stolen["file"].startswith("failed")
    assert stolen["dir"] == [] and stolen["state"] == []  # empty folders in their place
    assert stolen["cairn"].startswith("failed")  # no network at all
    assert TOKEN not in json.dumps(stolen)
    assert not secrets["reached"]
    # Every test skipped: pytest exits 0, but no test ran, so it is no passing check.
    assert run.exit_code == 0
    assert run.tests_ran == 0 and not run.ran


@pytest.mark.parametrize(
    "args",
    ["--co", "--collect-only", "--version", "-k nothing_matches_this", "--help", "-x nothere.py"],
)
def test_a_run_that_executed_no_test_is_not_a_passing_check(project, secrets, args):
    run = run_confined(
        Declared("test", f"{PYTEST} {args}"), project=project, hidden=secrets["hidden"]
    )
    assert not run.ran, (args, run)


@pytest.mark.parametrize(
    "command",
    [
        # The declared command itself tries the forms that fool a text reader.
        f"exit 0 && {PYTEST}",
        f"{PYTEST} --co -p no:z#z || true",
        f"true || {PYTEST}",
        f"f() {{ {PYTEST} --co; }}; f",
        f"eval '{PYTEST} --version'",
    ],
)
def test_whatever_the_line_a_pass_needs_a_test_that_ran(project, secrets, command):
    run = run_confined(Declared("test", command), project=project, hidden=secrets["hidden"])
    assert not run.ran, (command, run)


def test_a_real_run_counts_and_a_failure_fails(project, secrets):
    ok = run_confined(Declared("test", PYTEST), project=project, hidden=secrets["hidden"])
    assert (ok.exit_code, ok.tests_ran) == (0, 1), ok.output
    (project / "test_broken.py").write_text("def test_broken():\n    assert False\n")
    bad = run_confined(Declared("test", PYTEST), project=project, hidden=secrets["hidden"])
    assert bad.exit_code == 1 and bad.ran


def test_a_check_that_runs_too_long_is_cut_at_its_timeout(project, secrets):
    run = run_confined(
        Declared("test", "sleep 30"), project=project, hidden=secrets["hidden"], timeout=1
    )
    assert run.exit_code == 124


def test_the_checks_environment_has_no_cairn_or_secret_variable():
    env = clean_env({"CAIRN_URL": "u", "CAIRN_HARNESS_TOKEN": "t", "NPM_TOKEN": "n", "PATH": "/b"})
    assert env == {"PATH": "/b"}


@pytest.mark.parametrize(
    ("output", "ran"),
    [
        ("test result: ok. 3 passed; 0 failed; 0 ignored", 3),
        ("test result: ok. 0 passed; 0 failed; 2 ignored", 0),
        ("Tests:       1 failed, 2 passed, 3 total", 3),
        ("  2 passing (5ms)", 2),
        ("ok  \texample.com/shop\t0.01s", 1),
        ("ok  \texample.com/shop\t0.01s\ntesting: warning: no tests to run", 0),
        ("?   \texample.com/shop\t[no test files]", 0),
        ("nothing recognisable", None),
    ],
)
def test_other_runners_are_read_from_their_summary(output, ran):
    assert summary_counts(output) == ran


def test_install_detects_the_projects_checks(tmp_path):
    assert detect(tmp_path) == []
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    assert detect(tmp_path) == ["test=python -m pytest -q"]
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").write_text("")
    assert detect(tmp_path) == ["test=.venv/bin/python -m pytest -q"]
    (tmp_path / "package.json").write_text(json.dumps({"scripts": {"test": "jest"}}))
    (tmp_path / "Cargo.toml").write_text("")
    (tmp_path / "go.mod").write_text("")
    assert detect(tmp_path) == [
        "test=.venv/bin/python -m pytest -q",
        "test=npm test",
        "test=cargo test",
        "test=go test ./...",
    ]
    (tmp_path / "Makefile").write_text("test:\n\tpytest\n")
    assert detect(tmp_path) == ["test=make test"]
