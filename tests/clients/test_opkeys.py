"""The shared operation key and target of one simple command (``cairn_client.opkeys``):
what the hook, ``cairn-turn`` and the agent-loop benchmark report alike."""

from __future__ import annotations

import itertools
import shlex

import pytest
from cairn_client.opkeys import operation, program_of


def op(command: str) -> tuple[str, str]:
    return operation(shlex.split(command))


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        # a test runner's target is what it tests: its path argument, or the project
        ("pytest tests/unit", ("pytest", "tests/unit")),
        ("pytest ./tests/unit/", ("pytest", "tests/unit")),
        ("pytest tests/test_cart.py::test_total -q", ("pytest", "tests/test_cart.py")),
        ("python -m pytest", ("pytest", ".")),
        ("pytest -k proto", ("pytest -k=proto", ".")),
        # package managers and build tools: their verb and the thing acted on
        ("pip install -r requirements.txt", ("pip:install", "requirements.txt")),
        ("pip install --requirement=requirements.txt", ("pip:install", "requirements.txt")),
        ("uv pip install requests", ("uv:pip-install", "requests")),
        ("npm ci", ("npm:ci", ".")),
        ("make proto-test", ("make:proto-test", ".")),
        ("make -C services/api test", ("make:test", "services/api")),
        ("just proto", ("just:proto", ".")),
        ("git-lfs pull fixtures", ("git-lfs:pull", "fixtures")),
        ("curl -sf -o fixtures https://mirror.example/fixtures", ("curl -sf", "fixtures")),
        # flags that change behaviour are part of the operation; printing flags are not
        ("pytest --cov --cov-report html", ("pytest --cov --cov-report=html", ".")),
        ("pytest --cov-report=html:cov --cov", ("pytest --cov --cov-report=html:cov", ".")),
        ("ruff src --fix", ("ruff --fix", "src")),
        ("ruff check src --fix", ("ruff:check --fix", "src")),
        ("docker-compose up -d", ("docker-compose:up -d", ".")),
        ("npm install --legacy-peer", ("npm:install --legacy-peer", ".")),
        ("pip install -e .", ("pip:install -e", ".")),
        ("gh pr list --with-token-env", ("gh:pr-list --with-token-env", ".")),
        ("pytest -q --tb short tests", ("pytest", "tests")),
        ("pytest -vv --color=yes tests", ("pytest", "tests")),
        # content is not part of an operation
        ("git commit -m 'fix the cart'", ("git:commit", ".")),
        ("", ("bash", ".")),
    ],
)
def test_it_names_the_operation_and_its_target(command, expected):
    assert op(command) == expected


def test_the_order_of_flags_does_not_change_the_operation():
    words = ["--cov", "--cov-report=html", "-x", "tests/unit"]
    keys = {op(" ".join(["pytest", *perm])) for perm in itertools.permutations(words)}
    assert keys == {("pytest --cov --cov-report=html -x", "tests/unit")}


def test_a_flag_that_changes_behaviour_makes_another_operation():
    # the same program on the same target: with the flag it is another operation, so
    # "use the one with the flag instead" can be learned
    plain, flagged = op("pytest tests/api"), op("pytest tests/api --ds=app.settings_test")
    assert plain[1] == flagged[1] and plain[0] != flagged[0]


@pytest.mark.parametrize(
    ("key", "program"),
    [("bash:uv:pip-install -e", "uv"), ("pytest --cov", "pytest"), ("make:test", "make")],
)
def test_program_of_a_key(key, program):
    assert program_of(key) == program


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("pytest -q | tail -3", ("pytest", ".")),
        ("pytest -q > out.txt 2>&1", ("pytest", ".")),
        ("pytest tests/a 1>out", ("pytest", "tests/a")),
        ("pip install -r requirements.txt 2>/dev/null", ("pip:install", "requirements.txt")),
        ("make test || true", ("make:test", ".")),
        ("ls | wc -l", ("ls", ".")),
    ],
)
def test_the_hook_names_a_command_line_by_its_first_simple_command(command, expected):
    from cairn_client.hooks import bash_operation

    assert bash_operation(command) == expected
