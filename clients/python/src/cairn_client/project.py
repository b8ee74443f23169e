"""Which project an agent works in: the git remote of the working directory, else its
path. The server keeps only sha256 digests of either."""

from __future__ import annotations

import os
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
