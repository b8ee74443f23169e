"""Where the harness lives, and where the model can write: the two must never meet.

The hook holds the harness token. If its code or its interpreter lies anywhere the
model's tools may write (the project, the sandbox's writable paths, a directory the
permission rules open to Edit/Write), the model can patch it and the next hook run
is the model's code holding the token. So ``cairn-hook`` checks, before it reads the
token, that none of its own files is under a path the model may write, and
``cairn-hook install`` refuses such a setup. Install with ``pipx`` or
``uv tool install``: both put the client in its own environment under your home,
outside every project.

What the model may write (Claude Code 2.1, sandbox on, as ``cairn-hook install``
sets it): the project (its working directory), Claude Code's per-user temp folder
(``/tmp/claude``, ``$TMPDIR/claude``), ``sandbox.filesystem.allowWrite``,
``permissions.additionalDirectories`` and any path an ``Edit(...)``/``Write(...)``
allow rule names, in the user, project and local settings alike.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import cairn_client

EXIT_REFUSED = 1  # Claude Code: a non-blocking hook error, shown to the person


def harness_paths() -> dict[str, Path]:
    """The files whose code runs with the token, symlinks resolved."""
    return {
        "the cairn_client package": Path(cairn_client.__file__).resolve().parent,
        "the interpreter": Path(sys.executable).resolve(),
        "the interpreter's environment": Path(sys.prefix).resolve(),
        "the interpreter's base": Path(sys.base_prefix).resolve(),
    }


def _settings_files(project: Path, home: Path) -> list[Path]:
    return [
        home / ".claude" / "settings.json",
        project / ".claude" / "settings.json",
        project / ".claude" / "settings.local.json",
    ]


def _rule_path(rule: str, project: Path, home: Path) -> Path | None:
    """``Edit(/abs/**)`` → /abs, ``Edit(~/x/**)`` → ~/x, ``Edit(./src/**)`` → project/src."""
    inner = rule[rule.index("(") + 1 : -1] if "(" in rule and rule.endswith(")") else ""
    if not inner:
        return None  # a bare ``Edit``: everywhere the tool may go anyway (the project)
    inner = inner.split("*", 1)[0].rstrip("/") or "/"
    if inner.startswith("//"):
        return Path(inner[1:])
    if inner.startswith("~"):
        return home / inner[1:].lstrip("/")
    if inner.startswith("/"):
        # Claude Code reads ``/x`` in a rule as relative to the settings file's project.
        return project / inner.lstrip("/")
    return project / inner.removeprefix("./")


def writable_roots(project: Path, *, home: Path | None = None) -> list[Path]:
    """Every directory the model's Bash (sandboxed) or Edit/Write may write under."""
    home = home or Path(os.path.expanduser("~"))
    roots = [project, Path("/tmp/claude"), Path(tempfile.gettempdir()) / "claude"]
    for path in _settings_files(project, home):
        try:
            settings = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(settings, dict):
            continue
        sandbox = settings.get("sandbox") or {}
        filesystem = sandbox.get("filesystem") or {} if isinstance(sandbox, dict) else {}
        for entry in filesystem.get("allowWrite") or []:
            roots.append(Path(os.path.expanduser(str(entry))))
        permissions = settings.get("permissions") or {}
        for entry in permissions.get("additionalDirectories") or []:
            roots.append(Path(os.path.expanduser(str(entry))))
        for rule in permissions.get("allow") or []:
            rule = str(rule)
            if rule.startswith(("Edit(", "Write(", "MultiEdit(", "NotebookEdit(")):
                found = _rule_path(rule, project, home)
                if found is not None:
                    roots.append(found)
    resolved = []
    for root in roots:
        try:
            resolved.append(root.resolve())
        except OSError:
            continue
    return resolved


def _under(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def violations(project: Path | None, *, home: Path | None = None) -> list[str]:
    """One sentence per harness file the model could write; empty when none."""
    found = []
    roots = writable_roots(project.resolve(), home=home) if project else []
    for name, path in harness_paths().items():
        for root in roots:
            if _under(path, root) or (name != "the interpreter's base" and _under(root, path)):
                found.append(f"{name} ({path}) is under {root}, which the model may write")
                break
    return found


def refusal(found: list[str]) -> str:
    return (
        "refusing to run with the harness token: "
        + "; ".join(found)
        + ". Install the client outside every project: `pipx install cairn-client` or "
        "`uv tool install cairn-client`, then run `cairn-hook install claude-code` again."
    )
