"""The hook's naming rules, as pure functions: a Bash line is read with a real shell
parser (bashlex) and named by the command whose status it reports; operations are
named by program and subcommand the way a person says them; a test command the model
ran is a step, never a check, whatever its form."""

from __future__ import annotations

import subprocess

import pytest
from cairn_client import shell
from cairn_client.hooks import bash_operation, command_step, exit_code_of


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
    ("command", "operation"),
    [
        # The usual forms of a test run are recognised (as steps).
        ("pytest -q", "pytest"),
        (".venv/bin/pytest -q", "pytest"),
        ("python -m pytest", "pytest"),
        ("python3.11 -m pytest -x tests", "pytest -x"),  # -x changes what runs
        ("uv run pytest -q", "pytest"),
        ("uv run --frozen python -m pytest", "pytest"),
        ("poetry run pytest", "pytest"),
        ("env CI=1 timeout 60 pytest", "pytest"),
        ("npm test", "npm:test"),
        ("npm run test", "npm:run-test"),
        ("make test", "make:test"),
        ("cargo test --all", "cargo:test --all"),
        ("go test ./...", "go:test"),
        ("cd sub && pytest -q", "pytest"),
        ("pytest -q > out.txt 2>&1", "pytest"),
        ("pytest -q # a comment", "pytest"),
    ],
)
def test_a_plain_test_run_is_named_for_its_runner_and_is_only_a_step(command, operation):
    step = command_step(command, ok=True)
    assert (step.operation, step.check, step.attributed) == (operation, "test", True)


@pytest.mark.parametrize(
    "command",
    [
        "exit 0 && pytest",
        "return 0 && pytest -q",
        "exec true && pytest",
        "pytest -p no:z#z || true",  # shlex reads '#z || true' as a comment; bash does not
        "pytest -q || true",
        "pytest -q | tail -3",
        "pytest -q; echo done",
        "pytest -q &",
        "(pytest -q)",
        "{ pytest -q; }",
        "f() { true; }; f && pytest",
        "pytest() { true; }; pytest",
        "alias pytest=true; pytest",
        "eval 'pytest -q'",
        "if true; then pytest; fi",
        "for i in 1; do pytest; done",
        "while false; do :; done; pytest",
        "echo $(pytest -q)",
        "true `pytest`",
        "cat <<EOF\nhi\nEOF\npytest -q",
        "cat <<'EOF'\n$(x)\nEOF\npytest -q",  # bashlex cannot read it: nobody owns it
        "pytest -q\ntrue",
        "! pytest -q",
        "pytest -q 'unterminated",
        "source venv/bin/activate && pytest",
    ],
)
def test_a_line_whose_status_no_one_command_owns_is_named_bash(command):
    step = command_step(command, ok=True)
    assert step.operation == "bash" and not step.attributed, step


def test_a_failed_chain_is_not_its_last_commands_failure():
    assert command_step("false && pytest -q", ok=False).operation == "bash"
    assert command_step("cd sub && pytest -q", ok=True).operation == "pytest"
    assert command_step("pytest -q", ok=False).operation == "pytest"  # its own status


@pytest.mark.parametrize(
    "command",
    [
        "pytest -p no:z#z || true",
        "exit 0 && pytest",
        "a && b || c; d & e | f",
        "echo 'a # b' && ls \"x;y\"",
        "cat <<EOF\nplain\nEOF\nls -q",
        "x=$(echo a) y=b cmd --flag=$(date)",
    ],
)
def test_the_parse_agrees_with_bash_on_what_runs(command, tmp_path):
    """No command runs that the parse does not see: bash's own xtrace of the line
    (every program a no-op function) runs only programs the parse lists."""
    parsed = shell.parse(command)
    assert parsed.ok
    programs = [c[0] for c in parsed.commands if c]
    names = sorted({p for p in programs if p.isidentifier()} - {"exit", "true", "cat", "echo"})
    stubs = "".join(f"{n}() {{ :; }}\n" for n in names)
    script = tmp_path / "line.sh"
    script.write_text(stubs + "set -x\n" + command + "\n")
    traced = subprocess.run(
        ["bash", str(script)], capture_output=True, text=True, timeout=30, cwd=tmp_path
    ).stderr
    ran = [line.lstrip("+ ").split(" ", 1)[0] for line in traced.splitlines() if line[:1] == "+"]
    ran = [word for word in ran if not shell.ASSIGNMENT.match(word)]
    assert ran and set(ran) <= set(programs) | {"set", ":"}, (ran, programs)


def test_the_exit_status_comes_from_the_failure_text():
    assert exit_code_of({"error": "Exit code 2\nE501 line too long"}, failed=True) == 2
    assert exit_code_of({"error": "Command timed out"}, failed=True) is None
    assert exit_code_of({"error": "Exit code 1", "is_interrupt": True}, failed=True) is None
    assert exit_code_of({"tool_response": {"stdout": "ok"}}, failed=False) == 0
    assert exit_code_of({"tool_response": {"interrupted": True}}, failed=False) is None
