"""GET /api/v1/skills/{name}/effective/: base ⊕ active deltas, off-state, determinism, cache."""

import hashlib

import pytest

from memory.core.actors import Actor
from memory.models import SkillDelta
from memory.skills.consent import delta_approve, delta_reapprove
from memory.skills.jobs import delta_budget_enforce
from memory.skills.registry import agent_tools_set, skill_register
from tests.factories.skills import (
    TRIAGE_BODY,
    declare_tools,
    post_delta,
    preference,
    register,
    reviewer,
    skill_md,
)

pytestmark = pytest.mark.django_db


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def ready(api):
    register(api)
    declare_tools(api)
    api.person = reviewer(api.agent.workspace)
    return api


def approve(api, response):
    assert response.status_code == 201, response.json()
    delta = SkillDelta.objects.get(pk=response.json()["id"])
    return delta_approve(delta=delta, actor=Actor.for_user(api.person), reason="test")


def effective(api, name="triage-inbox", **params):
    response = api.get(f"/api/v1/skills/{name}/effective/", params)
    assert response.status_code == 200, response.json()
    return response.json()


def hint(api, prefer=(), drop=()):
    return post_delta(
        api,
        kind="tool-hint",
        anchor={"section": "escalation"},
        payload={"prefer": list(prefer), "drop": list(drop)},
    )


def test_learned_false_is_byte_identical_to_a_build_with_no_deltas(ready, make_api):
    approve(ready, preference(ready))
    approve(ready, hint(ready, prefer=["pre_scan_inbox"], drop=["summarize_thread"]))
    on = effective(ready)
    assert "## Learned adjustments" in on["text"]
    off = effective(ready, learned="false")
    fresh = make_api()
    register(fresh)
    baseline = effective(fresh)
    assert sha(off["text"]) == sha(baseline["text"]) == sha(TRIAGE_BODY)
    assert off["digest"] == baseline["digest"] == sha(TRIAGE_BODY)
    assert off["skill_tools"] == baseline["skill_tools"] == ["triage_inbox", "summarize_thread"]
    assert off["applied"] == baseline["applied"] == []
    assert sha(repr(sorted(off.items()))) == sha(repr(sorted(baseline.items())))


def test_it_renders_active_deltas_in_canonical_order_under_their_sections(ready):
    example = post_delta(
        ready,
        kind="example",
        anchor={"section": "drafting-replies"},
        payload={"input": "Recruiter  asks\nfor a call", "output": "Thanks, not looking."},
    )
    escalate = preference(ready, text="Escalate CFO threads after 48 hours.")
    draft = preference(ready, text="Sign off with first name only.", section="drafting-replies")
    staged = preference(ready, text="Never rendered: still staged.")
    quarantined = post_delta(
        ready,
        kind="preference",
        anchor={"section": "escalation"},
        payload={"body": "Never rendered: quarantined."},
        provenance={"source": "observed_content"},
    )
    for response in (draft, escalate, example):  # approval order does not matter
        approve(ready, response)
    body = effective(ready)
    expected = TRIAGE_BODY + (
        "\n## Learned adjustments\n\n"
        "### Drafting replies\n"
        "- Example: Recruiter asks for a call → Thanks, not looking.\n"
        "- Sign off with first name only.\n\n"
        "### Escalation\n"
        "- Escalate CFO threads after 48 hours.\n"
    )
    assert body["text"] == expected
    assert body["text"].startswith(TRIAGE_BODY)
    assert body["digest"] == sha(expected)
    assert body["base_digest"] == sha(TRIAGE_BODY)
    assert [a["id"] for a in body["applied"]] == [
        example.json()["id"],
        escalate.json()["id"],
        draft.json()["id"],
    ]
    assert {a["via"] for a in body["applied"]} == {"resident"}
    assert staged.json()["id"] not in {a["id"] for a in body["applied"]}
    assert quarantined.json()["id"] not in {a["id"] for a in body["applied"]}


def test_same_state_gives_the_same_bytes(ready):
    for text in ("b rule", "a rule", "c rule"):
        approve(ready, preference(ready, text=text))
    approve(ready, hint(ready, prefer=["pre_scan_inbox"]))
    first, second = effective(ready), effective(ready, session_id="s-9")
    third = effective(ready, session_id="s-10")
    assert first["text"].encode() == second["text"].encode() == third["text"].encode()
    assert first["digest"] == second["digest"] == sha(first["text"])
    assert first["skill_tools"] == second["skill_tools"]


def test_tool_hints_change_only_skill_tools(ready):
    approve(ready, hint(ready, prefer=["pre_scan_inbox", "triage_inbox"]))
    approve(ready, hint(ready, prefer=["summarize_thread"], drop=["triage_inbox"]))
    body = effective(ready)
    assert body["text"] == TRIAGE_BODY
    assert body["digest"] == sha(TRIAGE_BODY)
    # base tools, then preferred registry tools, minus drops (restrictive wins)
    assert body["skill_tools"] == ["summarize_thread", "pre_scan_inbox"]
    assert [a["via"] for a in body["applied"]] == ["tool", "tool"]
    # A tool that left the registry (or became write-path) is never preferred.
    agent_tools_set(
        agent=ready.agent,
        tools=[{"name": "pre_scan_inbox", "mutating": True}, {"name": "summarize_thread"}],
    )
    assert effective(ready)["skill_tools"] == ["summarize_thread"]


def test_it_is_resolved_once_per_session(ready):
    delta = preference(ready)
    before = effective(ready, session_id="session-1")
    assert before["applied"] == [] and before["cached"] is False
    approve(ready, delta)
    during = effective(ready, session_id="session-1")
    assert during["cached"] is True
    assert during["text"] == before["text"] == TRIAGE_BODY
    after = effective(ready, session_id="session-2")
    assert [a["id"] for a in after["applied"]] == [delta.json()["id"]]
    effective(ready, session_id="session-2")
    row = SkillDelta.objects.get(pk=delta.json()["id"])
    assert row.use_count == 1  # counted once per session, not per request
    assert row.last_used_at is not None
    # Another agent's cache is its own, even for the same session id.


def test_sessions_are_per_agent(ready, make_api):
    approve(ready, preference(ready))
    colleague = make_api(workspace=ready.agent.workspace)
    assert effective(ready, session_id="shared")["applied"]
    assert effective(colleague, session_id="shared")["applied"] == []


def test_retrieval_only_deltas_render_when_the_goal_matches(ready, settings):
    resident = approve(ready, preference(ready, text="Escalate CFO threads after 48 hours."))
    resident.use_count = 5
    resident.save(update_fields=["use_count"])
    recruiter = approve(
        ready,
        post_delta(
            ready,
            kind="preference",
            anchor={"section": "drafting-replies"},
            payload={
                "body": "Decline recruiters in two sentences and never mention salary.",
                "trigger": "replying to a recruiter",
            },
        ),
    )
    settings.CAIRN_SKILL_RESIDENT_TOKEN_BUDGET = resident.tokens + 1
    counts = delta_budget_enforce(workspace=ready.agent.workspace)
    assert counts["demoted"] == 1
    recruiter.refresh_from_db()
    assert recruiter.retrieval_only is True
    settings.CAIRN_SKILL_RESIDENT_TOKEN_BUDGET = 600
    no_goal = effective(ready)
    assert [a["id"] for a in no_goal["applied"]] == [resident.pk]
    unrelated = effective(ready, goal="summarize the quarterly finance thread")
    assert [a["id"] for a in unrelated["applied"]] == [resident.pk]
    matched = effective(ready, goal="replying to a recruiter")
    assert [(a["id"], a["via"]) for a in matched["applied"]] == [
        (resident.pk, "resident"),
        (recruiter.pk, "retrieval"),
    ]
    assert "never mention salary" in matched["text"]


def test_the_rendered_block_stays_within_the_budget(ready, settings):
    first = approve(ready, preference(ready, text="a" * 40))
    second = approve(ready, preference(ready, text="b" * 40))
    settings.CAIRN_SKILL_RESIDENT_TOKEN_BUDGET = first.tokens + 2
    body = effective(ready)
    assert [a["id"] for a in body["applied"]] == [first.pk]
    assert body["omitted"] == [second.pk]
    assert "b" * 40 not in body["text"]


def test_orphans_do_not_apply_and_stale_reapprovals_are_flagged(ready):
    delta = approve(ready, preference(ready))
    workspace = ready.agent.workspace
    new_body = TRIAGE_BODY.replace("follow-up window", "24-hour window")
    skill_register(
        workspace=workspace,
        skill_md=skill_md(version="2.0.0", body=new_body),
        actor=Actor.system("t"),
    )
    orphaned = effective(ready)
    assert orphaned["text"] == new_body
    assert orphaned["applied"] == []
    delta_reapprove(deltas=[delta], actor=Actor.for_user(ready.person), reason="still right")
    body = effective(ready)
    assert body["stale"] == [delta.pk]
    assert body["applied"][0]["stale"] is True
    assert body["text"].startswith(new_body)


def test_effective_validates_its_query_and_scopes_to_the_workspace(ready):
    assert ready.get("/api/v1/skills/nope/effective/").status_code == 404
    response = ready.get("/api/v1/skills/triage-inbox/effective/", {"learned": "maybe"})
    assert response.status_code == 400
    assert "learned" in response.json()["error"]["fields"]
