"""A Bash command line, read the way bash reads it: its simple commands and what joins them.

The hook names a Bash step by the command that ran and recognises a test run by its
program, so it must read the line as the shell will, not as text: ``shlex`` treats
``#z || true`` in ``pytest -p no:z#z || true`` as a comment, bash does not. This
module parses with bashlex (a port of bash's own grammar) and returns:

- every simple command (its words, assignments stripped), in source order, including
  those inside subshells, groups, functions, ``if``/``while``/``for`` bodies, command
  substitutions and pipelines;
- the control operators and constructs that decide the line's exit status
  (``&&``, ``||``, ``;``, ``&``, ``|``, ``subshell``, ``function``, ``if`` …);
- whether the line is *plain*: one simple command, or simple commands joined by
  ``&&`` only, with no construct that can change which status is reported.

A line bashlex cannot parse (an unfinished quote, syntax it does not know) is
``Parsed(ok=False)``: nothing is attributed to it. Nothing here decides what counts
as evidence; the hook never takes a model-run command as a check (see
``cairn_client.checks``), so what this module reads only names steps.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

import bashlex
import bashlex.errors

# Programs that run the command in their arguments: ``uv run pytest`` is a pytest run.
# Each maps to how many words after the program (besides options) belong to it.
WRAPPERS: dict[str, int] = {
    "env": 0,
    "time": 0,
    "nice": 0,
    "nohup": 0,
    "command": 0,
    "exec": 0,
    "builtin": 0,
    "stdbuf": 0,
    "timeout": 1,  # timeout DURATION CMD
    "xvfb-run": 0,
    "npx": 0,
    "pnpx": 0,
    "bunx": 0,
}
# ``PROGRAM run CMD``: the tool runs CMD in its environment.
RUNNERS = {"uv", "poetry", "pdm", "pipenv", "hatch", "rye", "conda", "micromamba"}
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


@dataclass(frozen=True)
class Parsed:
    ok: bool
    commands: tuple[tuple[str, ...], ...] = ()
    operators: tuple[str, ...] = ()
    error: str = ""
    constructs: frozenset[str] = field(default_factory=frozenset)

    @property
    def plain(self) -> bool:
        """One simple command, or simple commands joined by ``&&`` only."""
        return (
            self.ok
            and bool(self.commands)
            and not self.constructs
            and set(self.operators) <= {"&&"}
            and len(self.operators) == len(self.commands) - 1
        )

    @property
    def last(self) -> tuple[str, ...]:
        """The simple command whose status a plain line reports (else the last one)."""
        return self.commands[-1] if self.commands else ()


def parse(command: str) -> Parsed:
    try:
        trees = bashlex.parse(command)
    except (bashlex.errors.ParsingError, NotImplementedError, IndexError, TypeError) as exc:
        return Parsed(ok=False, error=f"{exc.__class__.__name__}: {exc}")
    except Exception as exc:  # noqa: BLE001 - bashlex raises bare errors on odd input
        return Parsed(ok=False, error=f"{exc.__class__.__name__}: {exc}")
    walker = _Walker()
    for tree in trees:
        walker.visit(tree, top=True)
    if len(trees) > 1:
        walker.operators.extend(["newline"] * (len(trees) - 1))
        walker.constructs.add("lines")
    return Parsed(
        ok=True,
        commands=tuple(tuple(c) for c in walker.commands if c),
        operators=tuple(walker.operators),
        constructs=frozenset(walker.constructs),
    )


class _Walker:
    def __init__(self):
        self.commands: list[list[str]] = []
        self.operators: list[str] = []
        self.constructs: set[str] = set()

    def visit(self, node, *, top: bool = False) -> None:
        kind = node.kind
        if kind == "list":
            for part in node.parts:
                if part.kind == "operator":
                    if top:
                        self.operators.append(part.op)
                    else:
                        self.constructs.add(part.op)
                else:
                    self.visit(part, top=top)
        elif kind == "pipeline":
            self.constructs.add("|")
            for part in node.parts:
                if part.kind != "pipe":
                    self.visit(part)
        elif kind == "command":
            words: list[str] = []
            for part in node.parts:
                if part.kind == "word":
                    words.append(part.word)
                    self._nested(part)
                elif part.kind == "assignment":
                    self._nested(part)
                    if words:  # ``cmd a=b``: an argument, not an assignment
                        words.append(part.word)
                elif part.kind == "redirect":
                    if getattr(part, "heredoc", None) is not None:
                        self.constructs.add("heredoc")
                    target = getattr(part, "output", None)
                    if target is not None and not isinstance(target, int):
                        self._nested(target)
            self.commands.append(words)
            if words and os.path.basename(words[0]) in ("eval", "source", "."):
                self.constructs.add(os.path.basename(words[0]))
        elif kind == "compound":
            words = [p.word for p in node.list if p.kind == "reservedword"]
            self.constructs.add("subshell" if words[:1] == ["("] else "group")
            for part in node.list:
                if part.kind != "reservedword":
                    self.visit(part)
        elif kind == "function":
            self.constructs.add("function")
            for part in node.parts:
                if part.kind not in ("word", "reservedword"):
                    self.visit(part)
        elif kind in ("if", "for", "while", "until", "case"):
            self.constructs.add(kind)
            for part in node.parts:
                if part.kind not in ("reservedword", "word", "pattern"):
                    self.visit(part)
        elif kind == "commandsubstitution" or kind == "processsubstitution":
            self.constructs.add("substitution")
            self.visit(node.command)
        else:
            for part in getattr(node, "parts", None) or []:
                self.visit(part)
            self.constructs.add(kind)

    def _nested(self, word) -> None:
        for part in getattr(word, "parts", None) or []:
            if part.kind in ("commandsubstitution", "processsubstitution"):
                self.constructs.add("substitution")
                self.visit(part.command)


def unwrap(argv: tuple[str, ...] | list[str]) -> list[str]:
    """The command a wrapper runs: ``env A=1 timeout 60 uv run pytest -q`` → ``pytest -q``;
    ``npx jest`` → ``jest``. Assignments before the program are dropped."""
    words = list(argv)
    for _ in range(8):  # wrappers of wrappers, bounded
        while words and ASSIGNMENT.match(words[0]):
            words = words[1:]
        if not words:
            return words
        program = os.path.basename(words[0])
        if program in WRAPPERS:
            rest = words[1:]
            while rest and (rest[0].startswith("-") or ASSIGNMENT.match(rest[0])):
                rest = rest[1:]
            words = rest[WRAPPERS[program] :]
            continue
        if program in RUNNERS and len(words) > 1 and words[1] == "run":
            rest = words[2:]
            while rest and rest[0].startswith("-"):
                rest = rest[1:]
            if rest:
                words = rest
                continue
        return words
    return words
