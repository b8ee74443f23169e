"""Audit events read as sentences with links, never as raw Python values."""

import pytest

from memory.models import AuditEvent
from reviews.audit_sentences import Lookups, audit_readable, who
from tests.factories.core import AuditEventFactory
from tests.factories.skills import learning_agent, propose
from tests.reviews import without_ws

pytestmark = pytest.mark.django_db


def event(**fields):
    return AuditEvent(
        actor=fields.pop("actor", "user:alice"),
        action=fields.pop("action"),
        target_type=fields.pop("target_type", ""),
        target_id=str(fields.pop("target_id", "")),
        reason=fields.pop("reason", ""),
        details=fields.pop("details", {}),
    )


def readable(lookups=None, **fields):
    result = audit_readable(event(**fields), lookups)
    return str(result.sentence), [(k, str(v)) for k, v in result.details]


@pytest.mark.parametrize(
    ("actor", "name"),
    [
        ("user:alice", "alice"),
        ("agent:gaia/chat", "agent gaia/chat"),
        ("harness:gaia/chat", "harness gaia/chat"),
        ("system:reconcile", "reconcile"),
        ("system", "Cairn"),
    ],
)
def test_it_names_the_actor(actor, name):
    assert who(actor) == name


def test_an_approval_names_the_delta_its_skill_and_the_reason():
    sentence, details = readable(
        Lookups(delta_skills={3: "deploy-checklist"}),
        action="delta.approve",
        target_type="skill_delta",
        target_id=3,
        reason="matches what I said",
        details={"from": "staged", "to": "active"},
    )
    assert sentence == (
        '<strong>alice</strong> approved <a href="/deltas/3/">delta #3</a> to skill '
        "deploy-checklist: “matches what I said”"
    )
    assert details == [("from", "staged"), ("to", "active")]


def test_reconcile_merges_read_as_merged_into():
    sentence, details = readable(
        actor="system:reconcile",
        action="reconcile.decide",
        target_type="knowledge",
        target_id=12,
        details={
            "pair": [9, 12],
            "similarity": 0.9712,
            "judge": "heuristic",
            "verdict": "duplicate",
            "action": "merged",
            "kept": 9,
        },
    )
    assert sentence == (
        '<strong>reconcile</strong> merged <a href="/knowledge/12/">knowledge #12</a> into '
        '<a href="/knowledge/9/">#9</a>'
    )
    assert details == [("similarity", "0.97"), ("judge", "heuristic")]


def test_none_and_lists_are_readable_not_python():
    sentence, details = readable(
        actor="agent:gaia/chat",
        action="delta.create",
        target_type="skill_delta",
        target_id=5,
        details={
            "skill": "triage-inbox",
            "kind": "preference",
            "status": "quarantined",
            "source": None,
            "findings": ["ignore_instructions", "exfiltration_url"],
        },
    )
    assert sentence == (
        '<strong>agent gaia/chat</strong> proposed <a href="/deltas/5/">delta #5</a> to skill '
        "triage-inbox (quarantined)"
    )
    assert ("source", "—") in details
    assert ("findings", "ignore instructions, exfiltration url") in details
    assert not any("None" in value or "[" in value for _, value in details)


def test_a_supersede_links_both_items():
    sentence, _ = readable(
        action="knowledge.supersede",
        target_type="knowledge",
        target_id=4,
        details={"superseded_by": 7, "category": "fact"},
    )
    assert sentence == (
        '<strong>alice</strong> replaced <a href="/knowledge/4/">knowledge #4</a> with '
        '<a href="/knowledge/7/">#7</a>'
    )


def test_a_lesson_merge_lists_what_was_folded():
    sentence, _ = readable(
        actor="system:merge",
        action="lesson.merge",
        target_type="lesson",
        target_id=2,
        details={"kept": 1, "merged": [2, 3], "judge": "heuristic"},
    )
    assert sentence == (
        '<strong>merge</strong> merged lessons <a href="/lessons/2/">#2</a>, '
        '<a href="/lessons/3/">#3</a> into <a href="/lessons/1/">lesson #1</a>'
    )


def test_unknown_kinds_fall_back_to_a_readable_sentence():
    sentence, details = readable(
        action="widget.frobnicate",
        target_type="gizmo",
        target_id=8,
        details={"supersedes": None, "colours": ["red", "blue"], "ok": True, "n": 3},
    )
    assert sentence == "<strong>alice</strong> did widget.frobnicate on gizmo #8"
    assert details == [("supersedes", "—"), ("colours", "red, blue"), ("ok", "yes"), ("n", "3")]
    sentence, _ = readable(action="token.revoke", target_type="token", target_id=12)
    assert sentence == "<strong>alice</strong> revoked token #12"


def test_everything_is_escaped():
    sentence, details = readable(
        actor="user:<b>eve</b>",
        action="lesson.retire",
        target_type="lesson",
        target_id=1,
        reason="<script>alert(1)</script>",
        details={"by": "<i>x</i>"},
    )
    assert "<script>" not in sentence and "&lt;script&gt;" in sentence
    assert "&lt;b&gt;eve&lt;/b&gt;" in sentence
    assert details == [("by", "&lt;i&gt;x&lt;/i&gt;")]


def test_a_setting_change_reads_on_or_off():
    sentence, details = readable(
        action="workspace.setting",
        target_type="workspace",
        target_id=1,
        details={"setting": "store_goal_text", "value": True},
    )
    assert sentence == "<strong>alice</strong> turned the setting store_goal_text on"
    assert details == []


def test_the_audit_page_shows_sentences_with_links(member_client, workspace):
    viewer = member_client(workspace=workspace, role="viewer")
    delta = propose(learning_agent(workspace))
    AuditEventFactory(
        workspace=workspace,
        actor="user:alice",
        action="delta.reject",
        target_type="skill_delta",
        target_id=str(delta.pk),
        reason="not what I said",
        details={"from": "staged", "to": "archived"},
    )
    html = member_client(workspace=workspace, role="viewer").get("/audit/").content.decode()
    assert (
        f'<strong>alice</strong> rejected <a href="/deltas/{delta.pk}/">delta #{delta.pk}</a> '
        "to skill triage-inbox: “not what I said”"
    ) in without_ws(html)
    assert viewer.get("/audit/").status_code == 200


def test_webhook_events_read_as_sentences_linking_the_webhook():
    sentence, details = readable(
        action="webhook.rotate_secret",
        target_type="webhook",
        target_id=7,
        reason="leaked in a screenshot",
    )
    assert sentence == (
        '<strong>alice</strong> rotated the secret of <a href="/webhooks/7/">webhook #7</a>: '
        "“leaked in a screenshot”"
    )
    sentence, details = readable(
        action="webhook.create",
        target_type="webhook",
        target_id=7,
        details={"host": "hooks.example.com", "events": ["delta.staged", "delta.decided"]},
    )
    assert sentence.startswith('<strong>alice</strong> added <a href="/webhooks/7/">')
    assert ("events", "delta.staged, delta.decided") in details
