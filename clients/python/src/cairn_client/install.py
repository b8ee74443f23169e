"""``cairn-hook install claude-code``: connect a project to Cairn without giving the
model the harness token.

Claude Code applies a settings file's ``env`` block to the model's Bash tool too, and
project settings are the file a team commits, so the token goes in neither. Instead:

- the harness token is written to a file outside the project
  (``~/.config/cairn/harness-token``, mode 0600), which ``cairn-hook`` reads itself;
- the project's ``.claude/settings.json`` gets the hooks (their command names the
  token file and Cairn's URL, never the token), and turns on Claude Code's sandbox
  for Bash: the token's directory and the hook's state are unreadable from inside it,
  sandboxed commands cannot fall back to running unsandboxed, and the sandbox's
  network allow-list does not include Cairn, so the model's ``curl`` cannot reach the
  harness endpoints; ``permissions.deny`` keeps the Read tool off the same files and
  the Edit/Write tools off ``.claude/`` (a hook written there would run unsandboxed).

The hooks and ``cairn-mcp`` run in Claude Code's own process tree, outside the
sandbox; they alone reach Cairn.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
from pathlib import Path

HOOK_EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "Stop",
)
TOOL_EVENTS = {"PreToolUse", "PostToolUse", "PostToolUseFailure"}
# Names a settings ``env`` block must not carry: the model's Bash would inherit them.
SECRET_ENV = ("CAIRN_HARNESS_TOKEN", "CAIRN_TOKEN")


def config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    return Path(base) / "cairn"


def default_token_file() -> Path:
    return config_dir() / "harness-token"


def default_state_dir() -> Path:
    # The same default as cairn_client.state.state_dir (which creates it on use).
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return Path(os.environ.get("CAIRN_STATE_DIR") or os.path.join(base, "cairn"))


def load_harness_token() -> None:
    """Put the token file's token in ``CAIRN_HARNESS_TOKEN`` for this process only,
    unless the environment already names one. The hook calls it before anything else;
    the model's tools never run this process, so they never see the value."""
    if os.environ.get("CAIRN_HARNESS_TOKEN"):
        return
    path = Path(os.environ.get("CAIRN_HARNESS_TOKEN_FILE") or default_token_file())
    try:
        token = path.read_text().strip()
    except OSError:
        return
    if token:
        os.environ["CAIRN_HARNESS_TOKEN"] = token


def token_write(path: Path, token: str) -> None:
    """Write the token readable by its owner only (the directory too)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(token.strip() + "\n")
    os.chmod(path, 0o600)


def hook_command(*, hook: str, url: str, token_file: Path) -> str:
    return " ".join(
        [
            f"CAIRN_URL={shlex.quote(url)}",
            f"CAIRN_HARNESS_TOKEN_FILE={shlex.quote(str(token_file))}",
            shlex.quote(hook),
            "claude-code",
        ]
    )


def _is_cairn_hook(entry: dict) -> bool:
    return any("cairn-hook" in str(h.get("command", "")) for h in entry.get("hooks") or [])


def _add_unique(items: list, new: list) -> list:
    return items + [item for item in new if item not in items]


def settings_merge(
    settings: dict, *, command: str, token_file: Path, state_dir: Path
) -> tuple[dict, list[str]]:
    """``settings`` with Cairn's hooks, sandbox and permission rules; returns it and
    the names of secrets it removed from the ``env`` block."""
    settings = json.loads(json.dumps(settings))  # a copy
    removed = [name for name in SECRET_ENV if name in (settings.get("env") or {})]
    for name in removed:
        del settings["env"][name]
    if "env" in settings and not settings["env"]:
        del settings["env"]

    hooks = settings.setdefault("hooks", {})
    for event in HOOK_EVENTS:
        entries = [e for e in hooks.get(event) or [] if not _is_cairn_hook(e)]
        entry = {"hooks": [{"type": "command", "command": command, "timeout": 10}]}
        if event in TOOL_EVENTS:
            entry = {"matcher": "*", **entry}
        hooks[event] = [*entries, entry]

    private = [str(token_file.parent), str(state_dir)]
    permissions = settings.setdefault("permissions", {})
    permissions["allow"] = _add_unique(permissions.get("allow") or [], ["mcp__cairn"])
    permissions["deny"] = _add_unique(
        permissions.get("deny") or [],
        [f"Read(/{path}/**)" for path in private] + ["Edit(./.claude/**)", "Write(./.claude/**)"],
    )

    sandbox = settings.setdefault("sandbox", {})
    sandbox.update(
        enabled=True,
        autoAllowBashIfSandboxed=sandbox.get("autoAllowBashIfSandboxed", True),
        # Without this the model may ask to rerun a command outside the sandbox.
        allowUnsandboxedCommands=False,
        # A missing bubblewrap must stop the session, not run Bash unconfined.
        failIfUnavailable=True,
    )
    filesystem = sandbox.setdefault("filesystem", {})
    filesystem["denyRead"] = _add_unique(filesystem.get("denyRead") or [], private)
    network = sandbox.setdefault("network", {})
    network.setdefault("allowedDomains", [])
    return settings, removed


def install_claude_code(
    *,
    project: Path,
    url: str,
    token: str | None,
    token_file: Path,
    hook: str,
    state_dir: Path,
) -> Path:
    if token:
        token_write(token_file, token)
    elif not token_file.exists():
        raise SystemExit(
            f"no harness token: set CAIRN_HARNESS_TOKEN or pass --token-stdin "
            f"(nothing at {token_file})"
        )
    path = project / ".claude" / "settings.json"
    settings = json.loads(path.read_text()) if path.exists() else {}
    merged, removed = settings_merge(
        settings,
        command=hook_command(hook=hook, url=url, token_file=token_file),
        token_file=token_file,
        state_dir=state_dir,
    )
    for name in removed:
        print(f"cairn: removed {name} from {path}'s env block (the model sees it)", file=sys.stderr)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(merged, indent=2) + "\n")
    return path


def _hook_path() -> str:
    here = Path(sys.argv[0]).resolve() if sys.argv and sys.argv[0] else None
    if here and here.name == "cairn-hook" and here.exists():
        return str(here)
    beside = Path(sys.executable).parent / "cairn-hook"
    return str(beside) if beside.exists() else (shutil.which("cairn-hook") or "cairn-hook")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="cairn-hook install")
    parser.add_argument("agent", choices=["claude-code"])
    parser.add_argument("--project", default=".", help="the project directory (default: .)")
    parser.add_argument("--url", default=os.environ.get("CAIRN_URL") or "http://localhost:8000")
    parser.add_argument(
        "--token-file",
        default=None,
        help="where the harness token is kept (default: ~/.config/cairn/harness-token)",
    )
    parser.add_argument(
        "--token-stdin",
        action="store_true",
        help="read the harness token from stdin (else CAIRN_HARNESS_TOKEN)",
    )
    args = parser.parse_args(argv)
    token = sys.stdin.read().strip() if args.token_stdin else os.environ.get("CAIRN_HARNESS_TOKEN")
    token_file = Path(args.token_file or default_token_file()).expanduser().resolve()
    path = install_claude_code(
        project=Path(args.project).resolve(),
        url=args.url,
        token=token,
        token_file=token_file,
        hook=_hook_path(),
        state_dir=default_state_dir().expanduser().resolve(),
    )
    print(f"cairn: hooks and sandbox written to {path}; harness token kept in {token_file}")
    return 0
