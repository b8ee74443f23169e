"""Projects are named by digests only (SPEC section 2): paths are user data.

The API accepts a git remote URL and/or a path. The remote wins when given,
normalised so that every spelling of one repository gives one digest
(``git@github.com:o/r.git``, ``https://user:pw@github.com/o/r/`` and
``ssh://git@github.com:22/o/r`` are the same project). The path is the
fallback, for checkouts without a remote.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from urllib.parse import urlsplit

from django.db import connection, transaction
from django.utils import timezone

from cairn.errors import ApplicationError
from memory.core.actors import Actor
from memory.core.audit import audit_record
from memory.core.rows import row_insert_for_each
from memory.models import AuditEvent, ProjectLabel, Workspace

_SCP_LIKE = re.compile(r"^(?:[^@/\s]+@)?(?P<host>[^:/\s]+):(?P<path>(?!//).+)$")


def remote_normalize(remote: str) -> str:
    """``host/owner/repo``: no scheme, credentials, port, ``.git`` or trailing slash."""
    value = remote.strip()
    if "://" in value:
        parts = urlsplit(value)
        host = (parts.hostname or "").lower()
        path = parts.path
    else:
        match = _SCP_LIKE.match(value)
        if match:
            host, path = match["host"].lower(), match["path"]
        else:  # a bare "github.com/o/r" or a local remote path
            host, path = "", value
    path = re.sub(r"/+", "/", path).strip("/")
    if path.endswith(".git"):
        path = path[: -len(".git")].rstrip("/")
    return f"{host}/{path}" if host else path


def path_normalize(path: str) -> str:
    value = path.strip().replace("\\", "/")
    normalized = posixpath.normpath(value) if value else ""
    return "" if normalized == "." else normalized.rstrip("/") or "/"


def project_digest(*, remote: str | None = None, path: str | None = None) -> str:
    """sha256 of the normalised remote, else of the normalised path; '' when neither."""
    if remote and remote.strip():
        normalized = remote_normalize(remote)
        if normalized:
            return hashlib.sha256(f"remote:{normalized}".encode()).hexdigest()
    if path and path.strip():
        return hashlib.sha256(f"path:{path_normalize(path)}".encode()).hexdigest()
    return ""


def project_digest_required(*, remote: str | None, path: str | None) -> str:
    digest = project_digest(remote=remote, path=path)
    if not digest:
        raise ApplicationError(
            "Name the project with project_remote (its git remote URL) or project_path.",
            code="project_required",
            fields={
                "project_remote": ["Give project_remote or project_path."],
                "project_path": ["Give project_remote or project_path."],
            },
            status_code=400,
        )
    return digest


def target_relativize(target: str, *, path: str | None) -> str:
    """A target under the project's path, made relative so that the path is not stored."""
    if not path or not target:
        return target
    root = path_normalize(path)
    if root in {"", "/"}:
        return target
    candidate = target.replace("\\", "/")
    if candidate == root:
        return "."
    if candidate.startswith(root + "/"):
        return candidate[len(root) + 1 :] or "."
    return target


PROJECT_LABEL_MAX_CHARS = 80


@transaction.atomic
def project_label_set(
    *, workspace: Workspace, project_digest: str, label: str, actor: Actor
) -> str:
    """A person names a project digest (a blank label removes the name); returns the label.

    The label is only for people reading the review UI: nothing matches on it.
    """
    if not re.fullmatch(r"[0-9a-f]{64}", project_digest or ""):
        raise ApplicationError(
            "project_digest must be a sha256 hex digest.",
            fields={"project_digest": ["invalid"]},
            status_code=400,
        )
    label = " ".join(str(label).split())
    if len(label) > PROJECT_LABEL_MAX_CHARS:
        raise ApplicationError(
            f"A project label is at most {PROJECT_LABEL_MAX_CHARS} characters.",
            fields={"label": [f"at most {PROJECT_LABEL_MAX_CHARS} characters"]},
        )
    if label:
        ProjectLabel.objects.update_or_create(
            workspace=workspace,
            project_digest=project_digest,
            defaults={"label": label, "updated_by": actor.label[:200]},
        )
    else:
        ProjectLabel.objects.filter(workspace=workspace, project_digest=project_digest).delete()
    audit_record(
        workspace=workspace,
        actor=actor.label,
        action="project.label" if label else "project.unlabel",
        target_type="project",
        target_id=project_digest[:64],
    )
    return label


def remote_label(remote: str | None) -> str:
    """A readable name from a git remote: its last path segment (``acme/widgets.git`` →
    ``widgets``); '' when the remote has none."""
    if not remote or not remote.strip():
        return ""
    last = remote_normalize(remote).rsplit("/", 1)[-1]
    return " ".join(last.split())[:PROJECT_LABEL_MAX_CHARS]


def project_label_from_remote_ctes(
    *, workspace_id: int, project_digest: str, remote: str | None, author: str
) -> list[tuple[str, str, list]]:
    """Name a project after its remote when nobody has named it yet, audited like a
    person's label, as CTEs for a caller's statement (see ``row_insert_keyed``):
    ``project_label`` (the label written, if any) and ``project_label_audit``; none
    when the remote names nothing.

    Only a missing label is written, so a person's label is never overwritten, and a
    later remote never renames the project. People edit or erase it like any label.
    A labelled project (nearly always) is found on the unique index and nothing is
    written (each try takes a number of the 64-bit id sequence); a concurrent first
    label wins quietly.
    """
    label = remote_label(remote)
    if not label or not project_digest:
        return []
    audit_sql, audit_params = row_insert_for_each(
        AuditEvent(
            workspace_id=workspace_id,
            actor=author[:200],
            action="project.label_from_remote",
            target_type="project",
            target_id=project_digest[:64],
        ),
        source="project_label",
    )
    # One statement with the outcome's insert (bench/bench_rows.py): 255 us for a
    # labelled project against 960 us (3.8x) by the ORM (save, then bulk_create with
    # ignore_conflicts and an audit create), 285 against 919 us (3.2x) for a first label.
    return [
        (
            "project_label",
            f"INSERT INTO {connection.ops.quote_name(ProjectLabel._meta.db_table)} "
            "(workspace_id, project_digest, label, updated_by, updated_at) "
            "VALUES (%s, %s, %s, %s, %s) "
            "ON CONFLICT (workspace_id, project_digest) DO NOTHING RETURNING id",
            [workspace_id, project_digest, label, author[:200], timezone.now()],
        ),
        ("project_label_audit", audit_sql, audit_params),
    ]
