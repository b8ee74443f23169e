from datetime import timedelta

import pytest
from django.utils import timezone

from memory.core.actors import Actor
from memory.core.embeddings import get_embedder
from memory.knowledge.memory_block import memory_block
from memory.knowledge.recall import knowledge_search
from memory.knowledge.remember import knowledge_remember
from memory.knowledge.services import knowledge_forget, knowledge_update
from memory.models import Knowledge

pytestmark = pytest.mark.django_db


@pytest.fixture
def as_agent(agent):
    return Actor.for_agent(agent)


def _ids_in_recall(workspace, query):
    vector = get_embedder().embed_one(query)
    return [
        hit.id
        for hit in knowledge_search(
            workspace=workspace, query=query, query_embedding=vector, top_k=20
        )
    ]


# --------------------------------------------------------------------------- memory block, reminders


def _fill_block(workspace, as_agent):
    for content, category in [
        ("Prefers concise answers", "preference"),
        ("Prefers metric units", "preference"),
        ("The repo uses uv for packaging", "fact"),
        ("Deploy with make release", "skill"),
        ("pytest needs the db running", "error"),
    ]:
        knowledge_remember(workspace=workspace, actor=as_agent, content=content, category=category)
    knowledge_remember(
        workspace=workspace, actor=as_agent, content="Home address is private", sensitive=True
    )


def test_the_memory_block_is_byte_identical_for_the_same_state(workspace, as_agent):
    _fill_block(workspace, as_agent)
    now = timezone.now()
    first = memory_block(workspace=workspace, context=None, now=now)
    # Reads in between (recall refreshes use counts) do not change the block.
    _ids_in_recall(workspace, "units")
    second = memory_block(workspace=workspace, context=None, now=now)
    assert first["stable"].encode() == second["stable"].encode()
    assert first == second
    assert "Prefers concise answers" in first["stable"]
    assert "Home address" not in first["stable"]


def test_the_memory_block_leaves_out_forgotten_items(workspace, as_agent):
    _fill_block(workspace, as_agent)
    item = Knowledge.objects.get(content="Prefers metric units")
    knowledge_forget(workspace=workspace, item_id=item.pk, actor=as_agent)
    block = memory_block(workspace=workspace, context=None, now=timezone.now())
    assert "metric" not in block["stable"]


def test_reminders_show_as_overdue_until_marked_reminded(workspace, as_agent):
    now = timezone.now()
    overdue = knowledge_remember(
        workspace=workspace,
        actor=as_agent,
        content="Send the invoice",
        category="reminder",
        due_at=now - timedelta(hours=2),
    ).item
    upcoming = knowledge_remember(
        workspace=workspace,
        actor=as_agent,
        content="Dentist appointment",
        category="reminder",
        due_at=now + timedelta(days=2),
    ).item
    block = memory_block(workspace=workspace, context=None, now=now)
    assert block["reminders"] == {"overdue": [overdue.pk], "upcoming": [upcoming.pk]}
    assert "Send the invoice" in block["dynamic"]
    knowledge_update(
        workspace=workspace, item_id=overdue.pk, actor=as_agent, changes={"reminded_at": now}
    )
    block = memory_block(workspace=workspace, context=None, now=now)
    assert block["reminders"]["overdue"] == []
