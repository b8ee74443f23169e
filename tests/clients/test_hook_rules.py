"""The hook's naming and attribution rules, as pure functions: operations are named
by program and subcommand the way a person says them, and a check counts only when
the exit status Claude Code reports is the check's own."""

from __future__ import annotations

import pytest
from cairn_client.hooks import attributed_check, bash_operation, exit_code_of


@pytest.mark.parametrize(
    ("command", "operation", "target"),
    [
        ("pip install -r requirements.txt", "pip:install", "requirements.txt"),
        ("uv pip install -r requirements.txt", "uv:pip-install", "requirements.txt"),
        ("uv sync", "uv:sync", "."),
        ("gh pr list --state open", "gh:pr-list --state=open", "."),
        ("npm run build", "npm:run-build", "."),
        ("npm test", "npm:test", "."),
        ("docker compose up -d", "docker:compose-up -d", "."),
        ("git commit -m 'x'", "git:commit", "."),
        ("python -m pytest -q tests", "pytest", "tests"),
        ("python3.12 -m pip install x", "pip:install", "x"),
        ("FOO=1 pytest -q", "pytest", "."),
        ("/usr/bin/make test", "make:test", "."),
        ("ls -la", "ls -la", "."),
    ],
)
def test_operations_are_named_by_program_and_subcommand(command, operation, target):
    assert bash_operation(command) == (operation, target)


@pytest.mark.parametrize(
    ("command", "code", "background", "expected"),
    [
        ("pytest -q", 0, False, ("test", None)),
        ("pytest -q", 2, False, ("test", None)),
        ("pytest -q > out.txt 2>&1", 1, False, ("test", None)),
        ("cd sub && pytest -q", 0, False, ("test", None)),
        ("cd sub && pytest -q", 1, False, ("test", "a chain that failed")),
        ("pytest -q && echo ok", 0, False, ("test", "not the last command")),
        ("pytest -q | tail -3", 0, False, ("test", "compound command")),
        ("pytest -q || true", 0, False, ("test", "compound command")),
        ("pytest -q; true", 0, False, ("test", "compound command")),
        ("pytest -q &", 0, False, ("test", "compound command")),
        ("echo $(pytest -q)", 0, False, (None, None)),  # never a check
        ("pytest -q", 0, True, ("test", "run in the background")),
        ("pytest -q", None, False, ("test", "exit status unknown")),
        ("ls | wc -l", 0, False, (None, None)),
    ],
)
def test_a_check_counts_only_with_its_own_status(command, code, background, expected):
    assert attributed_check(command, exit_code=code, background=background) == expected


def test_the_exit_status_comes_from_the_failure_text():
    assert exit_code_of({"error": "Exit code 2\nE501 line too long"}, failed=True) == 2
    assert exit_code_of({"error": "Command timed out"}, failed=True) is None
    assert exit_code_of({"error": "Exit code 1", "is_interrupt": True}, failed=True) is None
    assert exit_code_of({"tool_response": {"stdout": "ok"}}, failed=False) == 0
    assert exit_code_of({"tool_response": {"interrupted": True}}, failed=False) is None
