"""Which project an agent works in: the git remote of the working directory, else its
path. The server keeps only sha256 digests of either."""

from __future__ import annotations

import getpass
import hashlib
import os
import platform
import subprocess


def git_remote(cwd: str | None = None) -> str | None:
    try:
        result = subprocess.run(
            ["git", "remote", "get-url", "origin"],
            cwd=cwd or os.getcwd(),
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    remote = result.stdout.strip()
    return remote if result.returncode == 0 and remote else None


def project_fields(
    *, remote: str | None = None, path: str | None = None, cwd: str | None = None
) -> dict[str, str]:
    """``{"project_remote": ...}`` and/or ``{"project_path": ...}``: what was given, else
    the working directory's git remote, else its absolute path."""
    if remote or path:
        return {
            **({"project_remote": remote} if remote else {}),
            **({"project_path": path} if path else {}),
        }
    found = git_remote(cwd)
    if found:
        return {"project_remote": found}
    return {"project_path": os.path.abspath(cwd or os.getcwd())}


def machine_fingerprint() -> str:
    """This machine as Cairn's situation lessons know it: ``m-`` and 16 hex digits of
    a sha256 over the OS's machine id, the host name and the user, so blockers learned
    here (gh logged out, a tool missing) are served here and nowhere else. Nothing it
    is made of leaves the machine. ``CAIRN_MACHINE`` overrides it."""
    explicit = os.environ.get("CAIRN_MACHINE", "").strip()
    if explicit:
        return explicit[:128]
    parts = [platform.node(), getpass_user()]
    for source in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            with open(source) as handle:
                parts.append(handle.read().strip())
            break
        except OSError:
            continue
    return "m-" + hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def getpass_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return ""
