"""Import an export document into an empty workspace, remapping ids."""

from __future__ import annotations

import datetime as dt
import json
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import DatabaseError, models, transaction
from django.utils.dateparse import parse_datetime

from cairn.errors import ApplicationError
from memory.core.actors import Actor
from memory.core.audit import audit_record
from memory.core.embedders import EmbeddingError
from memory.core.embeddings import get_embedder
from memory.core.secrets import scan_fields
from memory.models import (
    Knowledge,
    SkillDelta,
    Workspace,
)
from memory.privacy.exports import FORMAT, VERSION, Section, export_sections
from memory.privacy.integrity import references_dangling
from memory.privacy.references import json_remap, json_specs
from memory.privacy.signing import SIGNATURE_KEYS, TRAILER_TYPE, OpenedExport, export_open
from memory.privacy.tables import ById
from memory.privacy.trust_fields import as_claimed, unique_after_demotion
from memory.skills.skillmd import delta_line


@dataclass
class _Loaded:
    header: dict
    sections: dict[str, list[dict]] = field(default_factory=dict)
    signed_by: str = ""


def _misplaced_signature() -> ApplicationError:
    return ApplicationError(
        "The file holds a signature among its records (a second signature, or records "
        "after it): a signature is only the file's last line or member. Nothing was imported.",
        code="invalid_export",
        fields={"file": ["misplaced signature"]},
    )


def _load(opened: OpenedExport) -> _Loaded:
    """The records of a verified file: parsed from its body only, after ``export_open``
    has cut off and checked the signature (memory/privacy/signing.py)."""
    text = opened.body.decode("utf-8")
    if opened.kind == "jsonl":
        lines = iter(text.split("\n"))
        loaded = _Loaded(header=json.loads(next(lines)))
        for raw in lines:
            if not raw.strip():
                continue
            item = json.loads(raw)
            if item.get("type") == TRAILER_TYPE:
                raise _misplaced_signature()
            if item.get("type") == "record":
                loaded.sections.setdefault(item["section"], []).append(item["record"])
        return loaded
    document = json.loads(text)
    if "signature" in document:
        # A signature member the cut did not find (a file re-serialised with other
        # spacing): it signs nothing, so the file is unsigned; one holding anything
        # besides a signature's keys, or inside signed bytes, is refused.
        signature = document.pop("signature")
        if opened.signed_by or not isinstance(signature, dict):
            raise _misplaced_signature()
        if set(signature) - SIGNATURE_KEYS:
            raise _misplaced_signature()
    sections = document.pop("sections", {})
    loaded = _Loaded(header=document)
    for name, body in sections.items():
        loaded.sections[name] = body.get("records", [])
    return loaded


def workspace_is_empty(*, workspace: Workspace) -> bool:
    """True when ``workspace`` holds no learned data an import could collide with
    (agents may exist: they are matched by name)."""
    for section in export_sections():
        if section.table.label == "memory.Agent":
            continue  # agents are matched by name
        if (
            section.table.workspace_path
            and section.model._default_manager.filter(
                **{section.table.workspace_path: workspace}
            ).exists()
        ):
            return False
    return True


def _parse(f: models.Field, value):
    if value is None:
        return None
    if isinstance(f, models.DateTimeField):
        return parse_datetime(value)
    if isinstance(f, models.DateField):
        return dt.date.fromisoformat(value)
    return value


@dataclass
class ImportReport:
    """What an import did: rows created per section, records it could not import
    (a required reference outside the export), and references per ``section.field``
    rewritten to the new ids or dropped because their target was not exported."""

    workspace: str = ""
    source: str = ""
    rows: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    remapped: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    dropped: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    # The trusted key that signed the file ("" when unsigned or untrusted: then every
    # row arrived as the agent's word, claimed, pending review).
    signed_by: str = ""

    @property
    def total_rows(self) -> int:
        return sum(self.rows.values())

    @property
    def total_remapped(self) -> int:
        return sum(self.remapped.values())

    @property
    def total_dropped(self) -> int:
        return sum(self.dropped.values())

    def as_dict(self) -> dict:
        return {
            "workspace": self.workspace,
            "source": self.source,
            "rows": dict(self.rows),
            "skipped": {k: v for k, v in self.skipped.items() if v},
            "references_remapped": dict(sorted(self.remapped.items())),
            "references_dropped": dict(sorted(self.dropped.items())),
            "signed_by": self.signed_by,
        }

    def lines(self) -> list[str]:
        """The report as a person reads it (command line and UI)."""
        rows = ", ".join(f"{name} {n}" for name, n in self.rows.items() if n) or "nothing"
        out = [f"Imported {self.total_rows} rows into {self.workspace}: {rows}."]
        skipped = {k: v for k, v in self.skipped.items() if v}
        if skipped:
            out.append(
                "Not imported (a required reference outside the export): "
                + ", ".join(f"{k} {v}" for k, v in skipped.items())
                + "."
            )
        if self.signed_by:
            out.append(f"Signed by a trusted key ({self.signed_by}): rows keep who reported them.")
        else:
            out.append(
                "Not signed by a key this installation trusts: every row arrived as the "
                "agent's word (lessons claimed, deltas quarantined for review, no learned "
                "facts)."
            )
        out.append(f"References remapped: {self.total_remapped}.")
        dropped = self.total_dropped
        detail = ", ".join(f"{k} {v}" for k, v in sorted(self.dropped.items()))
        out.append(
            f"References dropped (target not in the export): {dropped}"
            + (f" ({detail})." if detail else ".")
        )
        return out


Progress = Callable[[int, int], None]


def import_check(*, path: Path) -> _Loaded:
    """Read a file and refuse (422) one that is not a Cairn export of a known version.

    The signature is verified first and the records parsed from the signed bytes only
    (``export_open``); ``signed_by`` on the result says which trusted key signed them."""
    opened = export_open(Path(path))
    try:
        loaded = _load(opened)
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, AttributeError) as exc:
        raise ApplicationError(
            "Not a Cairn export file (it is not readable JSON).", fields={"file": ["invalid"]}
        ) from exc
    if loaded.header.get("format") != FORMAT or loaded.header.get("version") != VERSION:
        raise ApplicationError(
            f"Not a {FORMAT} version {VERSION} file.", fields={"file": ["unsupported"]}
        )
    loaded.signed_by = opened.signed_by
    return loaded


# What a hand-edited or damaged file raises from inside the import: a wrong type where
# a record field is read, a value a column refuses, a reference that cannot resolve.
MALFORMED = (
    KeyError,
    TypeError,
    ValueError,
    AttributeError,
    IndexError,
    DatabaseError,
    ValidationError,
    RuntimeError,
)


def export_import(
    *, workspace: Workspace, path: Path, actor: Actor, progress: Progress | None = None
) -> ImportReport:
    """``export_import_run``, with any damage in the file answered as a 422 naming the
    file (nothing is imported: the import is one transaction), never a traceback."""
    try:
        return export_import_run(workspace=workspace, path=path, actor=actor, progress=progress)
    except ApplicationError:
        raise
    except MALFORMED as exc:
        raise ApplicationError(
            "The file is not a well-formed Cairn export (a record has a missing or wrong "
            f"value: {type(exc).__name__}). Nothing was imported.",
            code="invalid_export",
            fields={"file": ["malformed export"]},
        ) from exc


def credentials_refuse(loaded: _Loaded) -> None:
    """Refuse (422) a file holding what looks like a credential in any record: the
    import is a write like any other, and Cairn never stores secrets."""
    for name, records in loaded.sections.items():
        for record in records:
            if not isinstance(record, dict):
                continue
            found = scan_fields({f"{name}.{key}": value for key, value in record.items()})
            if found:
                where = next(iter(found))
                raise ApplicationError(
                    f"Refused: {where} (record {record.get('id')}) looks like it contains a "
                    f"{found[where].kind}. Cairn never stores secrets; remove it from the "
                    "file and import again. Nothing was imported.",
                    code="credential_refused",
                    fields={"file": [f"{where} looks like a {found[where].kind}"]},
                )


@transaction.atomic
def export_import_run(
    *, workspace: Workspace, path: Path, actor: Actor, progress: Progress | None = None
) -> ImportReport:
    """Load an export into an EMPTY workspace in one transaction; returns the report.

    1. Refuse (422) a workspace that already holds learned data, files that are
       not a Cairn export of a known version, and files holding credentials. A file not signed by a trusted
       key (``memory.privacy.signing``) is imported as the agent's word
       (``as_claimed``), without learned facts.
    2. Create sections in order, mapping every exported id to the new row's id;
       self references (supersede chains) are inserted newest first so the
       "one current row" constraints hold at every insert.
    3. Restore timestamps and many-to-many links, rewrite the ids inside JSON
       values the map declares, and recompute embeddings.
    4. Walk every declared reference of the workspace: one that does not resolve
       is a bug, and the whole import rolls back.
    """
    loaded = import_check(path=path)
    credentials_refuse(loaded)
    if not workspace_is_empty(workspace=workspace):
        raise ApplicationError(
            f"Workspace {workspace.name!r} already holds data; import only into an empty "
            "workspace (create one first, e.g. `manage.py create_user NEW_WORKSPACE USER admin "
            "--create-workspace`).",
            code="workspace_not_empty",
            fields={"workspace": ["not empty"]},
        )
    report = ImportReport(
        workspace=workspace.name,
        source=loaded.header.get("workspace", {}).get("name", ""),
        signed_by=loaded.signed_by,
    )
    idmap: dict[str, dict[int, int]] = defaultdict(dict)
    sections = export_sections()
    total = sum(len(loaded.sections.get(s.name, [])) for s in sections)
    done = 0
    position = {s.table.label: i for i, s in enumerate(sections)}
    for index, section in enumerate(sections):
        forward = [
            f
            for f in section.fields
            if f.is_relation and f.null and position.get(f.related_model._meta.label, -1) > index
        ]
        records = loaded.sections.get(section.name, [])
        if not report.signed_by and section.table.label in UNSIGNED_NEVER:
            report.skipped[section.name] = len(loaded.sections.get(section.name, []))
            report.rows[section.name] = 0
            continue
        report.rows[section.name] = _import_section(
            workspace, section, records, idmap, forward, report
        )
        report.skipped[section.name] = len(records) - report.rows[section.name]
        done += len(records)
        if progress:
            progress(done, total)
    for index, section in enumerate(sections):
        for f in section.fields:
            if f.is_relation and f.null and position.get(f.related_model._meta.label, -1) > index:
                _fill_forward(section, f, loaded.sections.get(section.name, []), idmap, report)
    for section in sections:
        for f in section.m2m:
            _import_m2m(section, f, loaded.sections.get(section.name, []), idmap, report)
        for name, spec in section.table.refs.items():
            if json_specs(spec):
                _remap_json(
                    section, name, spec, loaded.sections.get(section.name, []), idmap, report
                )
    _reembed(idmap, loaded)
    dangling = references_dangling(workspace=workspace)
    if dangling:
        raise RuntimeError(f"import left {len(dangling)} dangling references: {dangling[:5]}")
    audit_record(
        workspace=workspace,
        actor=actor.label,
        action="export.import",
        target_type="workspace",
        target_id=workspace.pk,
        details={
            "counts": report.rows,
            "from_workspace": report.source,
            "references_remapped": sum(report.remapped.values()),
            "references_dropped": sum(report.dropped.values()),
        },
    )
    return report


def _import_m2m(section: Section, f, records: list[dict], idmap, report: ImportReport) -> None:
    through = f.remote_field.through
    src = f.m2m_field_name() + "_id"
    dst = f.m2m_reverse_field_name() + "_id"
    target = idmap[f.related_model._meta.label]
    key = f"{section.name}.{f.name}"
    rows = []
    for record in records:
        mine = idmap[section.table.label].get(record["id"])
        if not mine:
            continue
        for other in record.get(f.name) or []:
            if other in target:
                rows.append(through(**{src: mine, dst: target[other]}))
                report.remapped[key] += 1
            else:
                report.dropped[key] += 1
    through.objects.bulk_create(rows, ignore_conflicts=True)


def _remap_json(section: Section, name: str, specs, records: list[dict], idmap, report) -> None:
    """Rewrite the ids inside one JSON column of the imported rows (every row exists now)."""
    model = section.model
    mine = idmap[section.table.label]
    key = f"{section.name}.{name}"

    def resolve(label: str | None, pk: int) -> int | None:
        return idmap[label].get(pk) if label else None

    changed = []
    for record in records:
        pk = mine.get(record["id"])
        value = record.get(name)
        if pk is None or value is None:
            continue
        new, tally = json_remap(specs, value, resolve)
        report.remapped[key] += tally.remapped
        report.dropped[key] += tally.dropped
        if tally.found:
            changed.append(model(pk=pk, **{name: new}))
    for start in range(0, len(changed), 500):
        model._default_manager.bulk_update(changed[start : start + 500], [name])


def _import_section(
    workspace: Workspace,
    section: Section,
    records: list[dict],
    idmap: dict[str, dict[int, int]],
    forward: list[models.Field],
    report: ImportReport,
) -> int:
    """Insert one section's records; rows whose required reference is missing
    (outside a partial export) are skipped. Returns rows created."""
    model = section.model
    label = section.table.label
    if label == "memory.Agent":
        for record in records:
            agent, _ = model._default_manager.get_or_create(
                workspace=workspace, name=record["name"]
            )
            idmap[label][record["id"]] = agent.pk
        return len(records)
    has_workspace = any(f.name == "workspace" for f in model._meta.concrete_fields)
    self_refs = [f.name for f in section.fields if f.is_relation and f.related_model is model]
    timestamps = [
        f
        for f in section.fields
        if isinstance(f, models.DateTimeField) and (f.auto_now or f.auto_now_add)
    ]
    made: list[tuple[dict, models.Model]] = []
    # Rows go in id order, so ids keep their relative order. A self reference to a
    # later row (a superseded version pointing at its successor) is filled in when
    # that row arrives; the earlier row first points at itself ("steps aside", as
    # fact_put does) so "one current row" constraints hold at every insert.
    waiting: dict[int, list[tuple[int, str]]] = defaultdict(list)
    unique_seen: dict[str, set] = {}
    for record in sorted(records, key=lambda r: r["id"]):
        kwargs = {}
        later: list[tuple[str, int]] = []
        counted: list[tuple[str, str]] = []  # (remapped|dropped, key), kept if the row is
        for f in section.fields:
            value = record.get(f.name)
            key = f"{section.name}.{f.name}"
            if f.is_relation:
                target = None
                if value is not None and f not in forward:
                    target = idmap[f.related_model._meta.label].get(value)
                    if target is None and f.name in self_refs and value >= record["id"]:
                        later.append((f.attname, value))
                    elif target is None:
                        counted.append(("dropped", key))
                    else:
                        counted.append(("remapped", key))
                if target is None and not f.null:
                    break
                kwargs[f.attname] = target
            elif f.name in section.table.refs and not json_specs(section.table.refs[f.name]):
                mapped, tally = _remap(section.table.refs[f.name], value, record, idmap)
                if mapped is _DANGLING:
                    break
                counted += [("remapped", key)] * tally[0] + [("dropped", key)] * tally[1]
                kwargs[f.attname] = mapped
            else:
                kwargs[f.attname] = _parse(f, value)
        else:
            for what, key in counted:
                getattr(report, what)[key] += 1
            for pk, attname in waiting.get(record["id"], []):
                model._default_manager.filter(pk=pk).update(**{attname: pk})
            if has_workspace:
                kwargs["workspace_id"] = workspace.pk
            if not report.signed_by:
                claimed_channel = kwargs.get("channel")
                as_claimed(section.table, kwargs)
                kwargs["_claimed_channel"] = claimed_channel
                unique_after_demotion(section.table, kwargs, unique_seen)
                kwargs.pop("_claimed_channel")
            obj = model(**kwargs)
            obj.save(force_insert=True)
            idmap[label][record["id"]] = obj.pk
            made.append((record, obj))
            for attname, target in later:
                waiting[target].append((obj.pk, attname))
            for pk, attname in waiting.pop(record["id"], []):
                model._default_manager.filter(pk=pk).update(**{attname: obj.pk})
                report.remapped[f"{section.name}.{attname.removesuffix('_id')}"] += 1
    for entries in waiting.values():  # a successor that was not exported
        for _, attname in entries:
            report.dropped[f"{section.name}.{attname.removesuffix('_id')}"] += 1
    if timestamps and made:
        # auto_now(_add) overwrote them on insert; bulk_update writes values as given.
        for record, obj in made:
            for f in timestamps:
                value = _parse(f, record.get(f.name))
                if value is not None:
                    setattr(obj, f.attname, value)
        model._default_manager.bulk_update([obj for _, obj in made], [f.name for f in timestamps])
    return len(made)


_DANGLING = object()

# Rows an unsigned import never brings: a learned fact is read by tools the moment
# it exists, with no review in between.
UNSIGNED_NEVER = {"memory.LearnedFact"}


def _remap(spec, value, record: dict, idmap: dict[str, dict[int, int]]):
    """An id reference in a column without a foreign key, in the importing
    workspace's ids; returns ``(value, (remapped, dropped))``.

    A reference to a row outside the export is dangling: the record is skipped
    for a single id, dropped from a list, and emptied inside a string (the
    ledger's ``outcome:42`` would otherwise name this workspace's outcome 42).
    """
    if value is None:
        return None, (0, 0)
    if isinstance(spec, str):
        if isinstance(value, list):
            kept = [idmap[spec][v] for v in value if v in idmap[spec]]
            return kept, (len(kept), len(value) - len(kept))
        return idmap[spec].get(value, _DANGLING), (1, 0)
    if isinstance(spec, ById):
        label = spec.targets.get(record.get(spec.type_field))
        return (idmap[label].get(value, _DANGLING) if label else _DANGLING), (1, 0)
    if isinstance(value, str) and value.startswith(spec.prefix):
        rest = value[len(spec.prefix) :]
        if rest.isdigit() and int(rest) in idmap[spec.target]:
            return f"{spec.prefix}{idmap[spec.target][int(rest)]}", (1, 0)
        return "", (0, 1)
    return value, (0, 0)


def _fill_forward(
    section: Section, f: models.Field, records: list[dict], idmap, report: ImportReport
) -> None:
    """Set a nullable reference into a later section (a skill's current version)."""
    mine_map = idmap[section.table.label]
    target_map = idmap[f.related_model._meta.label]
    key = f"{section.name}.{f.name}"
    for record in records:
        mine, value = mine_map.get(record["id"]), record.get(f.name)
        if not mine or value is None:
            continue
        if value in target_map:
            section.model._default_manager.filter(pk=mine).update(**{f.attname: target_map[value]})
            report.remapped[key] += 1
        else:
            report.dropped[key] += 1


def _reembed(idmap: dict[str, dict[int, int]], loaded: _Loaded) -> None:
    """Embeddings are not exported: recompute them, with this server's embedder, for
    the rows that had one (``embedding_model`` was set in the export)."""

    def had_vectors(section: str, label: str) -> list[int]:
        return [
            idmap[label][r["id"]]
            for r in loaded.sections.get(section, [])
            if r.get("embedding_model") and r["id"] in idmap[label]
        ]

    try:
        embedder = get_embedder()
    except EmbeddingError:
        return
    knowledge = list(Knowledge.objects.filter(pk__in=had_vectors("knowledge", "memory.Knowledge")))
    batch = settings.CAIRN_EMBEDDING_BATCH
    try:
        for start in range(0, len(knowledge), batch):
            part = knowledge[start : start + batch]
            vectors = embedder.embed([k.content for k in part])
            for item, vector in zip(part, vectors, strict=True):
                item.embedding = vector
                item.embedding_model = embedder.model_id
            Knowledge.objects.bulk_update(part, ["embedding", "embedding_model"])
        deltas = list(
            SkillDelta.objects.filter(pk__in=had_vectors("skill_deltas", "memory.SkillDelta"))
        )
        for delta in deltas:
            delta.trigger_embedding, delta.payload_embedding = embedder.embed(
                [delta.trigger_text, delta_line(kind=delta.kind, payload=delta.payload)]
            )
            delta.embedding_model = embedder.model_id
        SkillDelta.objects.bulk_update(
            deltas, ["trigger_embedding", "payload_embedding", "embedding_model"]
        )
    except EmbeddingError:
        return  # rows keep no vector; the embed backfill job fills them later
