"""The words of a mechanical lesson (SPEC section 4): commands in code spans, in the
words a person types, never operation keys. Pure: no database, so the agent-loop
benchmark's agent reads served lessons with the same rule that wrote them."""

from __future__ import annotations

import re

PROJECT = "."  # the target of a command that names none: the project
PROJECT_WORDS = "this project"
_MECHANICAL = re.compile(
    r"^Use `(?P<ok>[^`]+)` instead of `(?P<failed>[^`]+)` for (?P<target>.+)\.$"
)


def operation_words(operation_key: str) -> str:
    """``bash:pip:install`` → ``pip install``; ``pytest --cov --cov-report=html`` stays
    as it is: the program, its verb, and the flags that are part of the operation."""
    head, _, flags = operation_key.removeprefix("bash:").partition(" ")
    words = head.replace(":", " ", 1)
    return f"{words} {flags}" if flags else words


def target_words(target: str) -> str:
    return PROJECT_WORDS if target in ("", PROJECT) else target


def mechanical_text(*, failed_op: str, ok_op: str, target: str) -> str:
    """ "Use `uv pip install` instead of `pip install` for requirements.txt." """
    return (
        f"Use `{operation_words(ok_op)}` instead of `{operation_words(failed_op)}` "
        f"for {target_words(target)}."
    )


def mechanical_parse(text: str) -> tuple[str, str, str] | None:
    """``mechanical_text``'s inverse: (ok words, failed words, target), or None."""
    found = _MECHANICAL.match(text.strip())
    if found is None:
        return None
    target = found["target"]
    return found["ok"], found["failed"], PROJECT if target == PROJECT_WORDS else target
