from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from cairn.errors import ApplicationError, NotFoundError
from memory.core.actors import Actor
from memory.core.embeddings import get_embedder
from memory.core.local_embedder import LOCAL_MODEL_ID
from memory.knowledge.recall import knowledge_search
from memory.knowledge.remember import knowledge_remember
from memory.knowledge.services import (
    knowledge_delete,
    knowledge_forget,
    knowledge_restore,
    knowledge_update,
)
from memory.models import AuditEvent, Knowledge
from tests.factories.identity import WorkspaceFactory
from tests.factories.knowledge import KnowledgeFactory

pytestmark = pytest.mark.django_db

AWS_KEY = "AKIA" + "IOSFODNN7EXAMPLE"


@pytest.fixture
def as_agent(agent):
    return Actor.for_agent(agent)


@pytest.fixture
def as_person(db):
    user = get_user_model().objects.create_user("reviewer-k", password="x")
    return Actor.for_user(user)


def _ids_in_recall(workspace, query):
    vector = get_embedder().embed_one(query)
    return [
        hit.id
        for hit in knowledge_search(
            workspace=workspace, query=query, query_embedding=vector, top_k=20
        )
    ]


# --------------------------------------------------------------------------- remember


def test_it_remembers_with_an_embedding_before_answering(workspace, as_agent):
    result = knowledge_remember(
        workspace=workspace, actor=as_agent, content="The CI runs on GitHub Actions"
    )
    item = Knowledge.objects.get(pk=result.item.pk)
    assert result.created and result.deduplicated_into is None
    assert item.embedding is not None and len(item.embedding) == 384
    assert item.embedding_model == LOCAL_MODEL_ID
    assert (item.category, item.context, item.source) == ("fact", "global", "agent")
    assert item.confidence == 0.5
    assert item.agent == as_agent.agent


def test_it_refuses_content_over_2000_characters_with_a_400_and_writes_nothing(workspace, as_agent):
    with pytest.raises(ApplicationError) as caught:
        knowledge_remember(workspace=workspace, actor=as_agent, content="x" * 2001)
    assert caught.value.status_code == 400
    assert list(caught.value.fields) == ["content"]
    assert not Knowledge.objects.exists()


def test_it_stores_exactly_2000_characters(workspace, as_agent):
    result = knowledge_remember(workspace=workspace, actor=as_agent, content="y" * 2000)
    assert len(Knowledge.objects.get(pk=result.item.pk).content) == 2000


def test_it_refuses_blank_content(workspace, as_agent):
    with pytest.raises(ApplicationError) as caught:
        knowledge_remember(workspace=workspace, actor=as_agent, content="   \n ")
    assert caught.value.fields == {"content": ["must not be blank"]}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("content", "the deploy key is " + AWS_KEY),
        ("content", "-----BEGIN " + "PRIVATE KEY-----\nMIIE"),
        ("content", "db is postgres://app:" + "s3cretpw" + "@db:5432/app"),
        ("entity", "token=" + "ghp_" + "x1" * 18),
        ("domain", "sk-" + "abcdefghijklmnopqrstuvwx"),
    ],
)
def test_it_refuses_credentials_in_any_field_with_credential_refused(
    workspace, as_agent, field, value
):
    fields = {"content": "a harmless fact", field: value}
    with pytest.raises(ApplicationError) as caught:
        knowledge_remember(workspace=workspace, actor=as_agent, **fields)
    assert caught.value.status_code == 422
    assert caught.value.code == "credential_refused"
    assert field in caught.value.fields
    assert not Knowledge.objects.exists()


def test_it_refuses_credentials_inside_metadata(workspace, as_agent):
    with pytest.raises(ApplicationError) as caught:
        knowledge_remember(
            workspace=workspace,
            actor=as_agent,
            content="the staging database",
            metadata={"conn": {"password": "'" + "hunter22" + "'"}},
        )
    assert caught.value.code == "credential_refused"
    assert list(caught.value.fields) == ["metadata.conn.password"]


@pytest.mark.parametrize(
    "content",
    ["use port 5432", "the password policy requires 12 chars", "rotate the API key yearly"],
)
def test_it_does_not_mistake_ordinary_text_for_a_credential(workspace, as_agent, content):
    assert knowledge_remember(workspace=workspace, actor=as_agent, content=content).created


@pytest.mark.parametrize("category", ["system", "profile", "permission"])
def test_it_refuses_privileged_categories_from_agents_with_403(workspace, as_agent, category):
    with pytest.raises(ApplicationError) as caught:
        knowledge_remember(workspace=workspace, actor=as_agent, content="x", category=category)
    assert caught.value.status_code == 403
    assert caught.value.code == "privileged_category"
    assert "403" in caught.value.message
    assert not Knowledge.objects.exists()


def test_it_lets_people_write_privileged_categories_sealed(workspace, as_person):
    result = knowledge_remember(
        workspace=workspace, actor=as_person, content="Never push to main", category="permission"
    )
    assert result.item.sealed and result.item.source == "user"


@pytest.mark.parametrize(
    ("field", "value"), [("confidence", 0.9), ("pinned", True), ("sealed", True)]
)
def test_it_does_not_let_agents_set_strength_or_protection(workspace, as_agent, field, value):
    with pytest.raises(ApplicationError) as caught:
        knowledge_remember(workspace=workspace, actor=as_agent, content="x", **{field: value})
    assert list(caught.value.fields) == [field]


def test_it_refuses_sources_reserved_for_jobs_and_people(workspace, as_agent):
    with pytest.raises(ApplicationError) as caught:
        knowledge_remember(workspace=workspace, actor=as_agent, content="x", source="user")
    assert list(caught.value.fields) == ["source"]


def test_it_requires_due_at_for_reminders(workspace, as_agent):
    with pytest.raises(ApplicationError) as caught:
        knowledge_remember(
            workspace=workspace, actor=as_agent, content="call Sam", category="reminder"
        )
    assert list(caught.value.fields) == ["due_at"]


def test_it_accepts_a_valid_client_embedding_and_records_its_model(workspace, as_agent):
    vector = [0.0] * 384
    vector[7] = 1.0
    result = knowledge_remember(
        workspace=workspace,
        actor=as_agent,
        content="client embedded",
        embedding=vector,
        embedding_model="my-model",
    )
    item = Knowledge.objects.get(pk=result.item.pk)
    assert list(item.embedding) == vector
    assert item.embedding_model == "my-model"


@pytest.mark.parametrize("vector", [[0.1] * 3, [0.0] * 384, ["a"] * 384])
def test_it_refuses_bad_client_embeddings(workspace, as_agent, vector):
    with pytest.raises(ApplicationError) as caught:
        knowledge_remember(workspace=workspace, actor=as_agent, content="x", embedding=vector)
    assert caught.value.status_code == 400
    assert list(caught.value.fields) == ["embedding"]


# --------------------------------------------------------------------------- update


def test_it_updates_other_fields_in_place(workspace, as_agent):
    item = knowledge_remember(workspace=workspace, actor=as_agent, content="Standup at ten").item
    result = knowledge_update(
        workspace=workspace,
        item_id=item.pk,
        actor=as_agent,
        changes={"domain": "meetings", "metadata": {"k": 1}},
    )
    assert result.item.pk == item.pk and result.supersedes is None
    item.refresh_from_db()
    assert (item.domain, item.metadata) == ("meetings", {"k": 1})


def test_a_new_content_supersedes_and_is_re_embedded(workspace, as_agent):
    old = knowledge_remember(workspace=workspace, actor=as_agent, content="Standup is at ten").item
    result = knowledge_update(
        workspace=workspace,
        item_id=old.pk,
        actor=as_agent,
        changes={"content": "Standup moved to half past eleven"},
    )
    new = result.item
    old.refresh_from_db()
    assert result.supersedes == old.pk and new.pk != old.pk
    assert old.superseded_by_id == new.pk and old.content == "Standup is at ten"
    assert new.content == "Standup moved to half past eleven"
    assert list(new.embedding) != list(old.embedding)
    assert new.embedding_model == LOCAL_MODEL_ID
    ids = _ids_in_recall(workspace, "when is standup")
    assert new.pk in ids and old.pk not in ids
    with pytest.raises(ApplicationError) as caught:
        knowledge_update(
            workspace=workspace, item_id=old.pk, actor=as_agent, changes={"content": "again"}
        )
    assert caught.value.status_code == 409


def test_an_update_is_validated_like_a_write(workspace, as_agent):
    item = knowledge_remember(workspace=workspace, actor=as_agent, content="Standup at ten").item
    for changes, status, field in [
        ({"content": "z" * 2001}, 400, "content"),
        ({"content": "key " + AWS_KEY}, 422, "content"),
        ({"confidence": 0.99}, 400, "confidence"),
        ({"category": "system"}, 403, "category"),
        ({"category": "reminder"}, 400, "due_at"),
    ]:
        with pytest.raises(ApplicationError) as caught:
            knowledge_update(workspace=workspace, item_id=item.pk, actor=as_agent, changes=changes)
        assert (caught.value.status_code, list(caught.value.fields)) == (status, [field])
    item.refresh_from_db()
    assert (item.content, item.category, item.confidence) == ("Standup at ten", "fact", 0.5)


@pytest.mark.parametrize("protection", [{"sealed": True}, {"pinned": True}])
def test_agents_cannot_edit_or_forget_what_a_person_protected(workspace, as_agent, protection):
    item = KnowledgeFactory(workspace=workspace, **protection)
    for call in (
        lambda: knowledge_update(
            workspace=workspace, item_id=item.pk, actor=as_agent, changes={"domain": "x"}
        ),
        lambda: knowledge_forget(workspace=workspace, item_id=item.pk, actor=as_agent),
    ):
        with pytest.raises(ApplicationError) as caught:
            call()
        assert caught.value.status_code == 403
    item.refresh_from_db()
    assert item.status == "active" and item.domain == ""


def test_moving_due_at_re_arms_a_reminder(workspace, as_agent):
    due = timezone.now() + timedelta(days=1)
    item = knowledge_remember(
        workspace=workspace,
        actor=as_agent,
        content="Renew the cert",
        category="reminder",
        due_at=due,
    ).item
    knowledge_update(
        workspace=workspace,
        item_id=item.pk,
        actor=as_agent,
        changes={"reminded_at": timezone.now()},
    )
    knowledge_update(
        workspace=workspace,
        item_id=item.pk,
        actor=as_agent,
        changes={"due_at": due + timedelta(days=7)},
    )
    item.refresh_from_db()
    assert item.reminded_at is None and item.due_at == due + timedelta(days=7)


# --------------------------------------------------------------------------- forget, restore, delete


def test_forget_archives_keeps_the_row_and_leaves_recall(workspace, as_agent):
    item = knowledge_remember(workspace=workspace, actor=as_agent, content="Lunch is at noon").item
    assert item.pk in _ids_in_recall(workspace, "lunch time")
    knowledge_forget(workspace=workspace, item_id=item.pk, actor=as_agent)
    item.refresh_from_db()
    assert item.status == "archived" and item.archived_at is not None
    assert item.pk not in _ids_in_recall(workspace, "lunch time")
    again = knowledge_forget(workspace=workspace, item_id=item.pk, actor=as_agent)
    assert again.archived_at == item.archived_at
    event = AuditEvent.objects.get(action="knowledge.archive")
    assert event.target_id == str(item.pk) and "noon" not in str(event.details)


def test_only_people_restore(workspace, as_agent, as_person):
    item = knowledge_remember(workspace=workspace, actor=as_agent, content="Lunch is at noon").item
    knowledge_forget(workspace=workspace, item_id=item.pk, actor=as_agent)
    with pytest.raises(ApplicationError) as caught:
        knowledge_restore(workspace=workspace, item_id=item.pk, actor=as_agent)
    assert caught.value.status_code == 403
    knowledge_restore(workspace=workspace, item_id=item.pk, actor=as_person)
    item.refresh_from_db()
    assert item.status == "active" and item.archived_at is None
    assert item.pk in _ids_in_recall(workspace, "lunch time")


def test_a_person_really_deletes_with_the_older_versions_and_an_audit_without_content(
    workspace, as_agent, as_person
):
    old = knowledge_remember(workspace=workspace, actor=as_agent, content="Office on floor 3").item
    new = knowledge_update(
        workspace=workspace,
        item_id=old.pk,
        actor=as_agent,
        changes={"content": "Office on floor 5"},
    ).item
    with pytest.raises(ApplicationError):
        knowledge_delete(workspace=workspace, item_id=new.pk, actor=as_agent)
    assert knowledge_delete(workspace=workspace, item_id=new.pk, actor=as_person) == 2
    assert not Knowledge.objects.exists()
    event = AuditEvent.objects.get(action="knowledge.delete")
    assert event.actor == "user:reviewer-k"
    assert "floor" not in str(event.details) + event.reason
    assert event.details["deleted_ids"] == sorted([old.pk, new.pk])


def test_other_workspaces_items_are_not_found(workspace, as_agent):
    foreign = KnowledgeFactory(workspace=WorkspaceFactory())
    for call in (
        lambda: knowledge_update(
            workspace=workspace, item_id=foreign.pk, actor=as_agent, changes={"domain": "x"}
        ),
        lambda: knowledge_forget(workspace=workspace, item_id=foreign.pk, actor=as_agent),
    ):
        with pytest.raises(NotFoundError):
            call()
    foreign.refresh_from_db()
    assert foreign.status == "active" and foreign.domain == ""
