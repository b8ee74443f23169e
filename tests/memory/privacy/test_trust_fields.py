"""Trust fields declared once per table in the export data map (issue 56, item 6).

The unsigned import's clean-up (``trust_fields.as_claimed``) knows no table: it applies the
rules each ``Table.trust`` declares. The first test is built from the model registry
and fails when an exported model has a trust-like field its table does not declare;
the others import an unsigned file and look at what arrived.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import re

import pytest
from django.utils import timezone

from memory.models import Knowledge, Outcome, SituationLesson
from memory.privacy.exports import export_sections, export_write
from memory.privacy.imports import export_import
from memory.privacy.selection import Selector
from tests.factories.identity import WorkspaceFactory, person_actor
from tests.factories.privacy import bundle, ready_agent, workspace_ready

pytestmark = pytest.mark.django_db


#: What makes a column a trust field: who reported it, who protected or approved it,
#: how far it is believed, whether and until when it is served.
TRUST_LIKE = re.compile(
    r"channel|pinned|sealed|state|status|confidence|expir|trust|approv|source|verified|"
    r"passed|provenance|category"
)


def test_every_trust_like_field_of_every_exported_table_is_declared():
    missing, unknown = [], []
    for section in export_sections():
        model = section.model
        names = {f.name for f in model._meta.concrete_fields}
        for f in model._meta.concrete_fields:
            if TRUST_LIKE.search(f.name) and f.name not in section.table.trust:
                missing.append(f"{section.table.label}.{f.name}")
        unknown += [f"{section.table.label}.{n}" for n in section.table.trust if n not in names]
    assert missing == [], "declare these in the data map's Table.trust"
    assert unknown == []


def _unsigned_export(workspace) -> list[dict]:
    workspace_ready(workspace)
    agent = ready_agent(workspace, "gaia/chat")
    bundle(agent=agent, name="alpha")
    now = timezone.now()
    SituationLesson.objects.create(
        workspace=workspace,
        agent=agent,
        machine_digest="m" * 64,
        context="machine:" + "m" * 16,
        tool="gh",
        subject="github.com",
        kind="auth",
        signature="s" * 64,
        content="gh is logged out on this machine",
        detected_at=now,
        expires_at=now + dt.timedelta(days=30),
    )
    Knowledge.objects.filter(workspace=workspace).update(pinned=True, sealed=True)
    outcome = Outcome.objects.filter(workspace=workspace).first()
    out = io.StringIO()
    export_write(
        workspace=workspace,
        selector=Selector(kind="workspace", value=workspace.name),
        out=out,
        fmt="jsonl",
    )
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    lines = [line for line in lines if line["type"] != "signature"]
    # The agent's report of the same outcome id its harness reported (allowed: unique
    # per channel): both are in the export, and both must come in unsigned.
    twin = next(dict(line["record"]) for line in lines if line.get("section") == "outcomes")
    assert outcome is not None and twin["outcome_id"]
    other = dict(
        twin, id=twin["id"] + 10_000, channel="agent" if twin["channel"] != "agent" else "harness"
    )
    lines.insert(
        lines.index(next(x for x in lines if x.get("section") == "outcomes")) + 1,
        {"type": "record", "section": "outcomes", "record": other},
    )
    return lines


def test_an_unsigned_file_brings_no_protection_no_blocker_and_no_collision(workspace, tmp_path):
    lines = _unsigned_export(workspace)
    path = tmp_path / "unsigned.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    report = export_import(workspace=WorkspaceFactory(), path=path, actor=person_actor("admin"))
    assert report.signed_by == ""
    target = report.workspace
    items = Knowledge.objects.filter(workspace__name=target)
    assert items.exists()
    assert not items.filter(pinned=True).exists() and not items.filter(sealed=True).exists()
    blockers = SituationLesson.objects.filter(workspace__name=target)
    assert blockers.count() == 1
    assert not blockers.filter(state="active").exists()
    assert not blockers.filter(expires_at__gt=timezone.now()).exists()
    outcomes = Outcome.objects.filter(workspace__name=target)
    exported = [line for line in lines if line.get("section") == "outcomes"]
    assert outcomes.count() == len(exported)  # nothing lost to the unique key
    assert set(outcomes.values_list("channel", flat=True)) == {"agent"}
    ids = sorted(outcomes.values_list("outcome_id", flat=True))
    assert any(i.endswith("~harness") or i.endswith("~agent") for i in ids), ids
