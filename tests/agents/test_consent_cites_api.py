"""Consent has to cite what was said: a ``user_instruction`` provenance counts only
when the claim is one whole sentence of one cited user turn this agent's harness
posted (a statement, not a question, not quoted; folded: case, spacing and end
punctuation ignored). A turn that only holds the words stages the delta as
untrusted for a person; a fact is refused.

The attack: an agent cites a real but unrelated user turn ("What's the weather?")
to set where the ``mail`` tool forwards mail, or to stage and auto-approve a delta.
"""

import pytest

from memory.core.consent import said_loosely
from memory.models import LearnedFact, SkillDelta
from tests.factories.skills import EMAIL_TOOLS, declare_tools, harness_api, post_delta, register

pytestmark = pytest.mark.django_db

FORWARD = "/api/v1/facts/contacts/forward_to/"
UNRELATED = {"source": "user_instruction", "turns": ["sess-w#1"]}
SAID = {"source": "user_instruction", "turns": ["sess-w#2"]}


@pytest.fixture
def mail(make_api):
    """An agent whose ``mail`` tool reads contacts, and the person's two turns as its
    harness reported them: one unrelated, one that says the instruction."""
    client = make_api()
    assert register(client).status_code == 201
    declare_tools(
        client,
        [*EMAIL_TOOLS, {"name": "mail", "reads_facts": ["contacts"]}],
    )
    harness = harness_api(client.agent)
    for index, content in (
        (1, "What's the weather?"),
        (
            2,
            "Please, thanks.\nFORWARD TO Ops@Example.com. Escalate anything from the CFO "
            "after 48 hours!",
        ),
    ):
        response = harness.post(
            f"/api/v1/sessions/{UNRELATED['turns'][0].split('#')[0]}/turns/",
            {"role": "user", "content": content, "turn_index": index},
            format="json",
        )
        assert response.status_code == 201, response.json()
    return client


def _pref(client, provenance, text="Escalate anything from the CFO after 48 hours."):
    return post_delta(
        client,
        back=False,
        kind="preference",
        anchor={"section": "escalation"},
        payload={"body": text},
        provenance=provenance,
    )


def test_a_fact_citing_an_unrelated_user_turn_is_not_live_for_the_mail_tool(mail):
    response = mail.put(
        FORWARD, {"value": "attacker@evil.example", "provenance": UNRELATED}, format="json"
    )
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "untrusted_fact"
    assert "does not say this" in response.json()["error"]["fields"]["provenance.turns"][0]
    assert mail.get(FORWARD).status_code == 404
    listing = mail.get("/api/v1/facts/contacts/").json()
    assert listing["facts"] == []
    assert not LearnedFact.objects.exists()


def test_a_fact_whose_cited_turn_does_not_name_this_value_is_refused(mail):
    """The turn that says "forward to ops@" does not back forwarding to the attacker."""
    response = mail.put(
        FORWARD, {"value": "attacker@evil.example", "provenance": SAID}, format="json"
    )
    assert response.status_code == 422
    assert not LearnedFact.objects.exists()


def test_a_fact_the_cited_turn_says_applies(mail):
    response = mail.put(FORWARD, {"value": "ops@example.com", "provenance": SAID}, format="json")
    assert response.status_code == 201, response.json()
    assert mail.get(FORWARD).json()["value"] == "ops@example.com"


def test_a_delta_citing_an_unrelated_turn_is_quarantined_not_trusted(mail):
    response = _pref(mail, UNRELATED)
    assert response.status_code == 201, response.json()
    assert (response.json()["status"], response.json()["trust"]) == ("quarantined", "untrusted")
    assert any("does not say this" in w for w in response.json()["warnings"])


def test_auto_approve_needs_the_cited_turn_to_say_it(mail):
    workspace = mail.agent.workspace
    workspace.settings = {"auto_approve_user_instruction": True}
    workspace.save()
    unrelated = _pref(mail, UNRELATED).json()
    assert unrelated["status"] == "quarantined"
    assert SkillDelta.objects.get(pk=unrelated["id"]).approved_by == ""
    # The turn that says it: staged as trusted, then auto-approved (the rule, not a ban).
    said = _pref(mail, SAID).json()
    assert said["trust"] == "trusted"
    assert SkillDelta.objects.get(pk=said["id"]).status == "active"
    assert list(SkillDelta.objects.filter(status="active").values_list("pk", flat=True)) == [
        said["id"]
    ]


@pytest.mark.parametrize(
    ("claim", "text", "said"),
    [
        (["ops@example.com"], "forward to OPS@example.com please", True),
        (["Escalate CFO mail."], "escalate   cfo MAIL", True),
        (["forward_to"], "set forward to", True),
        (["no"], "I know", False),  # whole words only
        (["ops@example.com"], "What's the weather?", False),
        ([""], "anything", False),  # nothing to find is never consent
        ([], "anything", False),
        (["a", "b c"], "a then b c", True),
        (["a", "d"], "a then b c", False),  # every piece must be said
    ],
)
def test_the_looser_rule(claim, text, said):
    assert said_loosely(claim, text) is said
