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

from cairn_client import checks as checks_module
from cairn_client import confine

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


def hook_command(
    *, hook: str, url: str, token_file: Path, checks: list[str] = (), check_timeout: float = 0
) -> str:
    words = [
        f"CAIRN_URL={shlex.quote(url)}",
        f"CAIRN_HARNESS_TOKEN_FILE={shlex.quote(str(token_file))}",
        shlex.quote(hook),
        "claude-code",
    ]
    for check in checks:
        words += ["--check", shlex.quote(check)]
    if checks and check_timeout:
        words += ["--check-timeout", f"{check_timeout:g}"]
    return " ".join(words)


def install_paths() -> list[Path]:
    """Where the client's code and interpreter live (symlinks resolved): the model's
    Edit and Write tools are denied there, as are the token and state folders."""
    import cairn_client

    paths = [Path(cairn_client.__file__).resolve().parent, Path(sys.prefix).resolve()]
    return [p for i, p in enumerate(paths) if not any(p != q and q in p.parents for q in paths)]


def _is_cairn_hook(entry: dict) -> bool:
    return any("cairn-hook" in str(h.get("command", "")) for h in entry.get("hooks") or [])


def _add_unique(items: list, new: list) -> list:
    return items + [item for item in new if item not in items]


def settings_merge(
    settings: dict,
    *,
    command: str,
    token_file: Path,
    state_dir: Path,
    stop_command: str | None = None,
    stop_timeout: int = 10,
    protected: list[Path] = (),
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
        if event == "Stop" and stop_command:
            # The declared checks run inside this one Stop hook: nothing else races it,
            # and its timeout covers them.
            entry = {
                "hooks": [{"type": "command", "command": stop_command, "timeout": stop_timeout}]
            }
        if event in TOOL_EVENTS:
            entry = {"matcher": "*", **entry}
        hooks[event] = [*entries, entry]

    private = [str(token_file.parent), str(state_dir)]
    # The hook's code and interpreter, and the token and state folders: no Edit/Write
    # (``//abs`` is an absolute path in Claude Code's rules; the sandbox's Bash cannot
    # write outside the project anyway).
    guarded = [*private, *(str(p) for p in protected)]
    permissions = settings.setdefault("permissions", {})
    permissions["allow"] = _add_unique(permissions.get("allow") or [], ["mcp__cairn"])
    permissions["deny"] = _add_unique(
        permissions.get("deny") or [],
        [f"Read(/{path}/**)" for path in private]
        + ["Edit(./.claude/**)", "Write(./.claude/**)"]
        + [f"{tool}(/{path}/**)" for path in guarded for tool in ("Edit", "Write")],
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
    checks: list[str] = (),
    check_timeout: float = 600,
) -> Path:
    path = project / ".claude" / "settings.json"
    settings = json.loads(path.read_text()) if path.exists() else {}
    # Refuse a client the model could patch: it would hold the token next time it runs.
    found = confine.violations(project)
    if found:
        raise SystemExit("cairn-hook install: " + confine.refusal(found))
    if token:
        token_write(token_file, token)
    elif not token_file.exists():
        raise SystemExit(
            f"no harness token: set CAIRN_HARNESS_TOKEN or pass --token-stdin "
            f"(nothing at {token_file})"
        )
    merged, removed = settings_merge(
        settings,
        command=hook_command(hook=hook, url=url, token_file=token_file),
        stop_command=hook_command(
            hook=hook, url=url, token_file=token_file, checks=checks, check_timeout=check_timeout
        ),
        stop_timeout=int(check_timeout * max(len(checks), 1) + 30) if checks else 10,
        token_file=token_file,
        state_dir=state_dir,
        protected=install_paths(),
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
    parser.add_argument(
        "--check",
        action="append",
        default=None,
        metavar="KIND=COMMAND",
        help="a check the Stop hook runs itself, confined (test=, lint=, build=); "
        "default: the checks detected in the project",
    )
    parser.add_argument(
        "--no-checks", action="store_true", help="declare no check (outcomes stay unjudged)"
    )
    parser.add_argument("--check-timeout", type=float, default=600.0, help="seconds per check")
    args = parser.parse_args(argv)
    project = Path(args.project).resolve()
    declared = [] if args.no_checks else (args.check or checks_module.detect(project))
    for check in declared:
        if checks_module.parse_declared(check) is None:
            raise SystemExit(f"cairn-hook install: --check {check!r}: write it as test=CMD")
    token = sys.stdin.read().strip() if args.token_stdin else os.environ.get("CAIRN_HARNESS_TOKEN")
    token_file = Path(args.token_file or default_token_file()).expanduser().resolve()
    path = install_claude_code(
        project=project,
        checks=declared,
        check_timeout=args.check_timeout,
        url=args.url,
        token=token,
        token_file=token_file,
        hook=_hook_path(),
        state_dir=default_state_dir().expanduser().resolve(),
    )
    print(f"cairn: hooks and sandbox written to {path}; harness token kept in {token_file}")
    if declared:
        print("cairn: declared checks (run by the Stop hook, confined, without the token):")
        for check in declared:
            print(f"    {check}")
    else:
        print(
            "cairn: no check declared, so no outcome is judged passed or failed; declare "
            "one with --check 'test=CMD'"
        )
    return 0
