"""No agent write changes the words of anything earned (issue 56, item 2).

The paths come from the code: every knowledge write operation in the API schema,
and every public ``knowledge_*`` service that takes an actor. Each gets a negated
and an extended variant of a confirmed item (an agent's item that two harness
confirmations raised), sent by the agent and by a job relaying the agent's words;
the confirmed item's text and confidence stay as they were, and it stays current.
A new path with no case here fails the first test.
"""

from __future__ import annotations

import inspect

import pytest
from drf_spectacular.generators import SchemaGenerator

from memory.core.actors import Actor
from memory.core.trust import knowledge_earned_ids
from memory.knowledge import batch, remember, services
from memory.knowledge.batch import knowledge_remember_many
from memory.knowledge.remember import knowledge_remember
from memory.knowledge.services import knowledge_update
from memory.lessons.evidence import evidence_apply
from memory.models import Channel, Knowledge
from tests.factories.identity import AgentFactory, api_client

pytestmark = pytest.mark.django_db

CONFIRMED = "Backups of the billing database are encrypted with the ops key."
VARIANTS = {
    "negated": "Backups of the billing database are never encrypted with the ops key.",
    "not": "Backups of the billing database are not encrypted with the ops key.",
    "contracted": "Backups of the billing database aren't encrypted with the ops key.",
    "extended": "Backups of the billing database are encrypted with the ops key and "
    "copied to the public bucket.",
    "same": "backups of the billing database are encrypted with the ops key",
}

# API write operations on knowledge: how each sends a variant against the item.
API_CASES = {
    ("POST", "/api/v1/knowledge/"): lambda item, text: ("/api/v1/knowledge/", {"content": text}),
    ("POST", "/api/v1/knowledge/batch/"): lambda item, text: (
        "/api/v1/knowledge/batch/",
        {"items": [{"content": text}, {"content": text + " Twice."}]},
    ),
    ("PATCH", "/api/v1/knowledge/{item_id}/"): lambda item, text: (
        f"/api/v1/knowledge/{item.pk}/",
        {"content": text},
    ),
}
# Knowledge writes that never carry new words (status only), with why.
API_NO_WORDS = {
    ("DELETE", "/api/v1/knowledge/{item_id}/"): "forget: archives, keeps the words",
}


def _service_cases():
    def remember_one(actor, item, text):
        knowledge_remember(workspace=item.workspace, actor=actor, content=text)

    def remember_many(actor, item, text):
        knowledge_remember_many(workspace=item.workspace, actor=actor, items=[{"content": text}])

    def update(actor, item, text):
        knowledge_update(
            workspace=item.workspace, item_id=item.pk, actor=actor, changes={"content": text}
        )

    return {
        "knowledge_remember": remember_one,
        "knowledge_remember_many": remember_many,
        "knowledge_update": update,
    }


SERVICE_CASES = _service_cases()
SERVICE_NO_WORDS = {
    "knowledge_forget": "archives the row, keeps its words",
    "knowledge_restore": "a person's restore, keeps its words",
    "knowledge_delete": "erasure (a person's), not a rewrite",
    "knowledge_store": "the inner step of knowledge_remember, covered through it",
}
# Who writes without weighing: the agent, and a job relaying words (consolidation,
# extraction: what it derived from the agent's turns, or from anyone's).
ACTORS = {
    "agent": lambda agent: Actor.for_agent(agent),
    "relaying job": lambda agent: Actor.system_relaying_agent("consolidate"),
    "system job": lambda agent: Actor.system("consolidate"),
}


def knowledge_write_operations() -> list[tuple[str, str]]:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    return sorted(
        (method.upper(), path)
        for path, operations in schema["paths"].items()
        if path.startswith("/api/v1/knowledge/")
        for method in operations
        if method in ("post", "put", "patch", "delete")
    )


def knowledge_services() -> list[str]:
    names = set()
    for module in (services, remember, batch):
        for name, function in inspect.getmembers(module, inspect.isfunction):
            if (
                name.startswith("knowledge_")
                and function.__module__ == module.__name__
                and "actor" in inspect.signature(function).parameters
            ):
                names.add(name)
    return sorted(names)


def test_every_knowledge_write_path_has_a_case():
    operations = knowledge_write_operations()
    assert ("POST", "/api/v1/knowledge/") in operations
    missing = [op for op in operations if op not in API_CASES and op not in API_NO_WORDS]
    assert not missing, f"knowledge write operations without an earned-words case: {missing}"
    names = knowledge_services()
    assert "knowledge_remember" in names
    missing = [n for n in names if n not in SERVICE_CASES and n not in SERVICE_NO_WORDS]
    assert not missing, f"knowledge services without an earned-words case: {missing}"


@pytest.fixture
def confirmed():
    """An agent's item that two harness-reported confirmations raised: earned."""
    agent = AgentFactory()
    result = knowledge_remember(
        workspace=agent.workspace, actor=Actor.for_agent(agent), content=CONFIRMED
    )
    item = result.item
    for n in (1, 2):
        evidence_apply(
            target=item, kind="test_passed", evidence_id=f"outcome:{n}", channel=Channel.HARNESS
        )
    item.refresh_from_db()
    assert item.pk in knowledge_earned_ids([item.pk], workspace_id=item.workspace_id)
    return agent, item


def _unchanged(item: Knowledge) -> None:
    after = Knowledge.objects.get(pk=item.pk)
    assert after.content == CONFIRMED
    assert after.confidence == pytest.approx(item.confidence)
    assert after.superseded_by_id is None
    assert after.status == "active"


API_OPS = sorted(API_CASES)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize(("method", "path"), API_OPS, ids=[f"{m} {p}" for m, p in API_OPS])
def test_an_agent_token_never_rewrites_an_earned_item(confirmed, method, path, variant):
    agent, item = confirmed
    url, body = API_CASES[(method, path)](item, VARIANTS[variant])
    response = getattr(api_client(agent), method.lower())(url, body, format="json")
    assert response.status_code < 500, response.content[:300]
    _unchanged(item)
    if response.status_code < 300 and method == "POST":
        # Stored beside it, as the agent's claim.
        created = Knowledge.objects.exclude(pk=item.pk).filter(workspace=item.workspace)
        assert created.exists()
        assert all(
            row.pk not in knowledge_earned_ids([row.pk], workspace_id=row.workspace_id)
            for row in created
        )
    if method == "PATCH":
        assert response.status_code == 403
        assert response.json()["error"]["code"] == "earned"


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("writer", sorted(ACTORS))
@pytest.mark.parametrize("service", sorted(SERVICE_CASES))
def test_no_service_rewrites_an_earned_item_for_a_writer_that_does_not_weigh(
    confirmed, service, writer, variant
):
    agent, item = confirmed
    actor = ACTORS[writer](agent)
    try:
        SERVICE_CASES[service](actor, item, VARIANTS[variant])
    except Exception as refused:  # a refusal is fine; a rewrite is not
        assert getattr(refused, "status_code", 500) < 500, refused
    _unchanged(item)


def test_the_harness_and_a_person_still_change_an_earned_items_words(confirmed):
    """The guard closes the agent's way, not the rule: the harness merges a restatement."""
    agent, item = confirmed
    harness = Actor.for_agent(agent, channel=Channel.HARNESS)
    result = knowledge_remember(
        workspace=item.workspace, actor=harness, content=VARIANTS["extended"]
    )
    assert result.item.pk == item.pk
    assert Knowledge.objects.get(pk=item.pk).content == VARIANTS["extended"]


def test_negation_is_never_a_restatement_between_unearned_items():
    agent = AgentFactory()
    actor = Actor.for_agent(agent)
    first = knowledge_remember(workspace=agent.workspace, actor=actor, content=CONFIRMED).item
    for text in (VARIANTS["negated"], VARIANTS["not"], VARIANTS["contracted"]):
        second = knowledge_remember(workspace=agent.workspace, actor=actor, content=text).item
        assert second.pk != first.pk
    assert Knowledge.objects.get(pk=first.pk).content == CONFIRMED
