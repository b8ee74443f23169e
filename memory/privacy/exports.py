"""Export everything learned for a workspace, agent, project or skill; import it back.

The document is built from the derived-data map (``memory.privacy.datamap``): every
table with an ``export`` section, its rows chosen by the same selectors erasure
uses, serialised generically (ids kept, so lineage ``superseded_by`` chains and
evidence links read as ids inside the document). Never exported: token
digests, embeddings (recomputed on import), idempotency replays, job runs and
the audit log. Paths are never stored, so none can leak.

Format (``version`` 1)::

    {"format": "cairn-export", "version": 1, "exported_at", "workspace": {...},
     "selector": {...}, "counts": {section: n},
     "sections": {section: {"model", "references": {field: section}, "records": [...]}}}

JSON Lines: a ``header`` line (the same without records), one ``record`` line
per row ``{"type": "record", "section", "record"}``, then an ``end`` line.
Sections come in import order: a section's columns only reference earlier
sections (or itself, for supersede chains); ids inside JSON values (declared
``{"json": [{"path", "section"}]}`` in ``references``) may point anywhere and
are rewritten once every row exists.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import models, transaction
from django.db.models import QuerySet
from django.utils import timezone

from cairn.errors import ApplicationError
from memory.core.actors import Actor
from memory.core.audit import audit_record
from memory.core.jobs import job_enqueue, job_progress, job_run_create
from memory.models import JobRun, Workspace
from memory.privacy.datamap import TABLES, Plan, followers_of
from memory.privacy.references import json_specs
from memory.privacy.selection import Selector, selector_from_message
from memory.privacy.signing import SigningWriter
from memory.privacy.tables import ById, Table

FORMAT = "cairn-export"
VERSION = 1
FORMATS = ("json", "jsonl")


# --------------------------------------------------------------------------- schema


@dataclass(frozen=True)
class Section:
    name: str
    table: Table
    fields: tuple[models.Field, ...]
    references: dict[str, str]  # field → section it points into
    m2m: tuple[models.ManyToManyField, ...] = ()

    @property
    def model(self) -> type[models.Model]:
        return self.table.model


def _exported_fields(table: Table) -> list[models.Field]:
    out = []
    for f in table.model._meta.concrete_fields:
        if f.primary_key or f.name in table.export_exclude:
            continue
        if isinstance(f, models.GeneratedField | models.BinaryField):
            continue
        if f.name == "workspace" and f.is_relation:
            continue
        out.append(f)
    return out


def ref_targets(spec) -> set[str]:
    """Tables a ``refs`` entry points into."""
    if isinstance(spec, str):
        return {spec}
    if isinstance(spec, ById):
        return set(spec.targets.values())
    if json_specs(spec):
        return set().union(*(s.labels() for s in spec))
    return {spec.target}


def _ref_json(spec, names: dict[str, str]):
    """A reference spec as the document's header states it (sections, not labels)."""
    if isinstance(spec, str):
        return names[spec]
    if isinstance(spec, ById):
        return {"by": spec.type_field, "sections": {k: names[v] for k, v in spec.targets.items()}}
    if json_specs(spec):
        return {"json": [s.as_json(names) for s in spec]}
    return {"prefix": spec.prefix, "section": names[spec.target]}


def export_sections() -> list[Section]:
    """Exported tables in import order: every section comes after the sections it
    references (a nullable reference may point forward when two tables point at
    each other, like a skill and its current version; import fills it in last)."""
    by_label = {t.label: t for t in TABLES.values() if t.export}
    names = {label: t.export for label, t in by_label.items()}
    sections: dict[str, Section] = {}
    required: dict[str, set[str]] = {}
    preferred: dict[str, set[str]] = {}
    for label, table in by_label.items():
        fields = _exported_fields(table)
        refs = {}
        required[label], preferred[label] = set(), set()
        for f in fields:
            if f.is_relation and f.related_model._meta.label in names:
                target = f.related_model._meta.label
                refs[f.name] = names[target]
                if target != label:
                    (preferred if f.null else required)[label].add(target)
        m2m = tuple(
            f for f in table.model._meta.many_to_many if f.related_model._meta.label in names
        )
        for f in m2m:
            refs[f.name] = names[f.related_model._meta.label]
        for name, spec in table.refs.items():
            refs[name] = _ref_json(spec, names)
            if not json_specs(spec):  # ids inside JSON are rewritten after every insert
                required[label] |= {t for t in ref_targets(spec) if t != label}
        sections[label] = Section(table.export, table, tuple(fields), refs, m2m)
    ordered: list[Section] = []
    done: set[str] = set()
    pending = list(by_label)
    while pending:
        ready = [lb for lb in pending if (required[lb] | preferred[lb]) <= done]
        if not ready:
            ready = [lb for lb in pending if required[lb] <= done][:1]
        if not ready:
            raise RuntimeError(f"export sections have a required-reference cycle: {pending}")
        for lb in ready:
            ordered.append(sections[lb])
            done.add(lb)
        pending = [lb for lb in pending if lb not in done]
    return ordered


# --------------------------------------------------------------------------- selecting rows


def _rows(plan: Plan, table: Table) -> QuerySet:
    """Rows of ``table`` the export's selector reaches (everything for ``workspace``)."""
    kind = plan.selector.kind
    scoped = plan.scoped(table.label)
    if kind == "workspace":
        return scoped
    select = table.selectors.get(kind)
    ids: set[int] = set()
    if select is not None:
        ids |= set(select(scoped, plan.selector).values_list("pk", flat=True))
    for owner, derivation in plan.derivations():
        if owner.label == table.label and derivation.action == "delete":
            ids |= set(derivation.rows(plan).values_list("pk", flat=True))
    return table.model._default_manager.filter(pk__in=ids)


def export_plan(*, workspace: Workspace, selector: Selector) -> dict[str, list[int]]:
    """Ids per section, closed over references so the document stands on its own.

    1. Each table's own selection (selector matches, and rows derived from them).
    2. Rows that follow a selected row by id or cascade from it (ledger, evidence).
    3. Rows the selection references (agents, skills) and, for a selected skill
       or agent, its versions and tool registry.
    """
    plan = Plan(workspace=workspace, selector=selector)
    sections = export_sections()
    ids: dict[str, set[int]] = {s.table.label: set() for s in sections}
    for s in sections:
        ids[s.table.label] |= set(_rows(plan, s.table).values_list("pk", flat=True))
    if selector.kind != "workspace":
        _close(ids, sections)
    return {s.name: sorted(ids[s.table.label]) for s in sections}


def _close(ids: dict[str, set[int]], sections: list[Section]) -> None:
    labels = {s.table.label for s in sections}
    for _ in range(4):  # references are at most a few levels deep
        before = sum(len(v) for v in ids.values())
        for s in sections:
            label = s.table.label
            # Rows pointing at selected rows through a required FK (evidence links,
            # versions of a skill, an agent's tools) or following them by id.
            for f in s.fields:
                if f.is_relation and f.related_model._meta.label in labels and not f.null:
                    target = f.related_model._meta.label
                    if ids[target] and s.table.role != "content":
                        ids[label] |= set(
                            s.model._default_manager.filter(
                                **{f"{f.name}__in": ids[target]}
                            ).values_list("pk", flat=True)
                        )
            for source_label in list(ids):
                for follower, q in followers_of(source_label):
                    if follower.label == label and ids[source_label]:
                        ids[label] |= set(
                            s.model._default_manager.filter(
                                q(sorted(ids[source_label]))
                            ).values_list("pk", flat=True)
                        )
            # Rows selected rows point at (their agent, skill, anchor version).
            if ids[label]:
                for f in s.fields:
                    if f.is_relation and f.related_model._meta.label in labels:
                        target = f.related_model._meta.label
                        ids[target] |= {
                            v
                            for v in s.model._default_manager.filter(pk__in=ids[label]).values_list(
                                f.name, flat=True
                            )
                            if v is not None
                        }
        if sum(len(v) for v in ids.values()) == before:
            break


# --------------------------------------------------------------------------- serialising


def _value(f: models.Field, value):
    if value is None:
        return None
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, bytes | memoryview):
        return None
    return value


def _records(section: Section, ids: list[int]) -> Iterator[dict]:
    chunk = settings.CAIRN_EXPORT_CHUNK
    names = [f.attname for f in section.fields]
    for start in range(0, len(ids), chunk):
        part = ids[start : start + chunk]
        m2m_values: dict[str, dict[int, list[int]]] = {}
        for f in section.m2m:
            through = f.remote_field.through
            src = f.m2m_field_name() + "_id"
            dst = f.m2m_reverse_field_name() + "_id"
            found: dict[int, list[int]] = defaultdict(list)
            for a, b in through.objects.filter(**{f"{src}__in": part}).values_list(src, dst):
                found[a].append(b)
            m2m_values[f.name] = found
        rows = section.model._default_manager.filter(pk__in=part).order_by("pk")
        for row in rows.values("pk", *names):
            record = {"id": row["pk"]}
            for f in section.fields:
                record[f.name] = _value(f, row[f.attname])
            for name, found in m2m_values.items():
                record[name] = sorted(found.get(row["pk"], []))
            yield record


def _header(workspace: Workspace, selector: Selector, counts: dict[str, int]) -> dict:
    sections = export_sections()
    return {
        "format": FORMAT,
        "version": VERSION,
        "exported_at": timezone.now().isoformat(),
        "workspace": {"name": workspace.name, "display_name": workspace.display_name},
        "selector": selector.receipt(),
        "counts": counts,
        "schema": {s.name: {"model": s.table.label, "references": s.references} for s in sections},
    }


def export_write(
    *,
    workspace: Workspace,
    selector: Selector,
    out,
    fmt: str = "json",
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, int]:
    """Write the export to the text stream ``out``, signed with this installation's
    export key; returns record counts per section."""
    if fmt not in FORMATS:
        raise ApplicationError(
            f"format must be one of {', '.join(FORMATS)}.", fields={"format": ["invalid"]}
        )
    plan = export_plan(workspace=workspace, selector=selector)
    counts = {name: len(ids) for name, ids in plan.items()}
    total = sum(counts.values())
    header = _header(workspace, selector, counts)
    done = 0
    signed_out, out = out, SigningWriter(out)

    def dumps(obj) -> str:
        return json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":"))

    if fmt == "jsonl":
        out.write(dumps({"type": "header", **header}) + "\n")
    else:
        out.write("{" + dumps(header)[1:-1] + ',"sections":{')
    sections = export_sections()
    for index, section in enumerate(sections):
        if fmt == "json":
            out.write(("," if index else "") + json.dumps(section.name) + ":{")
            out.write(
                f'"model":{json.dumps(section.table.label)},'
                f'"references":{dumps(section.references)},"records":['
            )
        first = True
        for record in _records(section, plan[section.name]):
            if fmt == "jsonl":
                out.write(dumps({"type": "record", "section": section.name, "record": record}))
                out.write("\n")
            else:
                out.write(("" if first else ",") + dumps(record))
            first = False
            done += 1
            if progress and (done % 200 == 0 or done == total):
                progress(done, total)
        if fmt == "json":
            out.write("]}")
    # The signature covers every byte before it (memory/privacy/signing.py).
    if fmt == "jsonl":
        out.write(dumps({"type": "end", "counts": counts}) + "\n")
        signed_out.write(dumps({"type": "signature", **out.signature()}) + "\n")
    else:
        out.write("}")
        signed_out.write(',"signature":' + dumps(out.signature()) + "}\n")
    if progress:
        progress(total, total)
    return counts


# --------------------------------------------------------------------------- files and jobs


def export_dir(workspace: Workspace) -> Path:
    return Path(settings.MEDIA_ROOT) / "exports" / workspace.name


@transaction.atomic
def export_request(*, workspace: Workspace, selector: Selector, fmt: str, actor: Actor) -> JobRun:
    """Queue an export job (audited); the file appears under MEDIA_ROOT/exports/<workspace>/."""
    if fmt not in FORMATS:
        raise ApplicationError(
            f"format must be one of {', '.join(FORMATS)}.", fields={"format": ["invalid"]}
        )
    params = {"selector": {"kind": selector.kind, "value": selector.value}, "format": fmt}
    run = job_run_create(
        kind="export", workspace=workspace, params=params, requested_by=actor.label
    )
    audit_record(
        workspace=workspace,
        actor=actor.label,
        action="export.request",
        target_type="job_run",
        target_id=run.pk,
        details={"selector": selector.receipt(), "format": fmt},
    )
    job_enqueue("memory.tasks.export_run", run)
    return run


def export_job(*, run: JobRun) -> None:
    """The export task body: write the file atomically (temp name, then rename)."""

    workspace = run.workspace
    selector = selector_from_message(workspace=workspace, message=run.params["selector"])
    fmt = run.params.get("format", "json")
    directory = export_dir(workspace)
    directory.mkdir(parents=True, exist_ok=True)
    # A resumed run starts over: the partial file of an attempt whose worker died
    # holds records too, and must not outlive it.
    for stale in directory.glob(f"export-{run.pk}-*.part"):
        stale.unlink(missing_ok=True)
    stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
    name = f"export-{run.pk}-{selector.kind}-{stamp}.{fmt}"
    path = directory / name
    partial = directory / (name + ".part")

    def progress(done: int, total: int) -> None:
        job_progress(run=run, done=done, total=total)

    try:
        with open(partial, "w", encoding="utf-8") as out:
            counts = export_write(
                workspace=workspace, selector=selector, out=out, fmt=fmt, progress=progress
            )
        os.replace(partial, path)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        size = path.stat().st_size
    except FileNotFoundError:
        # An erasure in this workspace deletes every export file, partial ones too (they
        # may hold erased rows): this export is void. Said plainly, without our paths.
        partial.unlink(missing_ok=True)
        path.unlink(missing_ok=True)
        raise ApplicationError(
            "The export file was deleted while it was being written (an erasure in this "
            "workspace removes export files). Request the export again.",
            code="export_removed",
        ) from None
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise ApplicationError(
            f"The export file could not be written ({exc.strerror or type(exc).__name__}). "
            "Check the server's disk and request the export again.",
            code="export_unwritable",
        ) from None
    run.counts = counts
    run.result = {
        **(run.result or {}),  # "resumed": n, from the reaper
        "file": str(path.relative_to(settings.MEDIA_ROOT)),
        "bytes": size,
        "sha256": digest,
        "format": fmt,
        "records": sum(counts.values()),
    }


def export_file_get(*, run: JobRun) -> Path | None:
    """The export file of a finished export run, if it still exists."""
    if run.kind != "export" or run.status != JobRun.Status.SUCCEEDED:
        return None
    rel = (run.result or {}).get("file")
    if not rel or run.result.get("expired"):
        return None
    root = (Path(settings.MEDIA_ROOT) / "exports").resolve()
    path = (Path(settings.MEDIA_ROOT) / rel).resolve()
    if root not in path.parents or not path.is_file():
        return None
    return path


def export_file_missing_why(*, run: JobRun | None) -> str:
    """Why an export run has no file to download, in a sentence."""
    if run is None or run.kind != "export":
        return "No such export in this workspace."
    if run.status != JobRun.Status.SUCCEEDED:
        return f"Export #{run.pk} has no file: it is {run.status}."
    why = (run.result or {}).get("deleted_by") or {}
    if why.get("erasure"):
        return (
            f"The file of export #{run.pk} was deleted by erasure #{why['erasure']} "
            "(an erasure deletes every export file of the workspace)."
        )
    if why.get("retention_days"):
        return f"The file of export #{run.pk} expired after {why['retention_days']} days."
    return f"The file of export #{run.pk} is gone (expired or missing)."


def export_download_record(*, run: JobRun, actor: Actor) -> None:
    """A download hands everything learned to someone: the audit log says who."""
    audit_record(
        workspace=run.workspace,
        actor=actor.label,
        action="export.download",
        target_type="job_run",
        target_id=run.pk,
        details={"file": Path(run.result.get("file", "")).name},
    )


def _export_paths(workspace: Workspace, *, older_than: dt.datetime | None = None) -> list[Path]:
    """The files ``export_files_forget`` deletes: every file in the workspace's export
    directory, or those written before ``older_than``."""
    directory = export_dir(workspace)
    if not directory.is_dir():
        return []
    paths = []
    for path in sorted(directory.iterdir()):
        if not path.is_file():
            continue
        if older_than is not None:
            mtime = dt.datetime.fromtimestamp(path.stat().st_mtime, tz=dt.UTC)
            if mtime >= older_than:
                continue
        paths.append(path)
    return paths


@dataclass(frozen=True)
class ExportFile:
    """An export file on disk, and the export run that wrote it (None: no run names it,
    e.g. a file copied in by hand)."""

    name: str
    size: int
    run_id: int | None


def export_files_list(*, workspace: Workspace) -> list[ExportFile]:
    """The export files an erasure of ``workspace`` would delete (all of them, by the
    same listing ``export_files_forget`` deletes from), newest run first."""
    runs = {
        Path(run.result["file"]).name: run.pk
        for run in JobRun.objects.filter(
            workspace=workspace, kind="export", result__has_key="file"
        ).only("pk", "result")
    }
    files = []
    for path in _export_paths(workspace):
        try:
            size = path.stat().st_size
        except FileNotFoundError:  # deleted meanwhile (retention, another erasure)
            continue
        files.append(ExportFile(name=path.name, size=size, run_id=runs.get(path.name)))
    return sorted(files, key=lambda f: (f.run_id is None, -(f.run_id or 0), f.name))


def export_files_forget(
    *,
    workspace: Workspace,
    older_than: dt.datetime | None = None,
    erasure: int | None = None,
) -> int:
    """Delete export files of ``workspace`` (all, or those older than a moment).

    Erasure deletes all of them (``erasure`` is its receipt's id): a file written
    before the erasure may hold erased rows. Retention deletes old ones. The runs
    stay, marked expired with the reason (``deleted_by``: ``{"erasure": N}``,
    ``{"retention_days": D}``, ``{}`` when no reason was given, or
    ``{"missing": true}`` for a file that went some other way), so their rows
    say why the download is gone.
    """
    deleted: set[str] = set()
    for path in _export_paths(workspace, older_than=older_than):
        path.unlink(missing_ok=True)
        deleted.add(path.name)
    if erasure is not None:
        why = {"erasure": erasure}
    elif older_than is not None:
        why = {"retention_days": settings.CAIRN_RETENTION_EXPORT_DAYS}
    else:
        why = {}
    for run in JobRun.objects.filter(workspace=workspace, kind="export", result__has_key="file"):
        path = run.result["file"]
        if not run.result.get("expired") and not (Path(settings.MEDIA_ROOT) / path).exists():
            reason = why if Path(path).name in deleted else {"missing": True}
            run.result = {**run.result, "expired": True, "deleted_by": reason}
            run.save(update_fields=["result"])
    return len(deleted)


# --------------------------------------------------------------------------- import
