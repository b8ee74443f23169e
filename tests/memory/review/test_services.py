"""The contradictions queue: opened by a job (idempotently), resolved by a person."""

import pytest
from django.db import IntegrityError

from cairn.errors import ApplicationError, NotFoundError
from memory.lessons.lifecycle import lesson_edit
from memory.models import AuditEvent, LessonState, RetiredBy, ReviewItem
from memory.review.services import review_item_open, review_item_resolve
from tests.factories.identity import WorkspaceFactory, person_actor
from tests.factories.lessons import KnowledgeFactory, LessonFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def pair(workspace):
    return LessonFactory(workspace=workspace), LessonFactory(workspace=workspace, sealed=True)


def open_item(workspace, a, b, **kwargs):
    return review_item_open(
        workspace=workspace,
        a_type="lesson",
        a_id=a.pk,
        b_type="lesson",
        b_id=b.pk,
        reason=kwargs.pop("reason", "B is sealed; the judge says they contradict"),
        **kwargs,
    )


def test_it_opens_one_item_per_pair_whichever_way_round(workspace, pair):
    a, b = pair
    item, created = open_item(workspace, a, b, details={"similarity": 0.91})
    assert created and item.status == "open" and item.opened_by == "system:reconcile"
    again, created_again = open_item(workspace, a, b)
    swapped, created_swapped = open_item(workspace, b, a)
    assert again.pk == swapped.pk == item.pk
    assert not created_again and not created_swapped
    assert ReviewItem.objects.count() == 1
    event = AuditEvent.objects.get(action="review.open")
    assert event.target_id == str(item.pk) and event.details["b"] == f"lesson:{b.pk}"


def test_the_database_refuses_a_second_open_item_for_a_pair(workspace, pair):
    a, b = pair
    open_item(workspace, a, b)
    with pytest.raises(IntegrityError):
        ReviewItem.objects.create(
            workspace=workspace, kind="contradiction", a_type="lesson", a_id=a.pk,
            b_type="lesson", b_id=b.pk, reason="dup",
        )  # fmt: skip


def test_it_refuses_targets_of_another_workspace_as_missing(workspace, pair):
    a, _ = pair
    foreign = LessonFactory(workspace=WorkspaceFactory())
    with pytest.raises(NotFoundError) as refused:
        open_item(workspace, a, foreign)
    assert refused.value.fields == {"b_id": ["not found"]}
    with pytest.raises(ApplicationError):
        open_item(workspace, a, a)
    with pytest.raises(ApplicationError) as blank:
        open_item(workspace, a, pair[1], reason="   ")
    assert "reason" in blank.value.fields
    assert not ReviewItem.objects.exists()


def test_keep_a_retires_b_as_a_persons_decision(workspace, pair):
    a, b = pair
    item, _ = open_item(workspace, a, b)
    resolved = review_item_resolve(
        item=item,
        resolution="keep_a",
        actor=person_actor("ada"),
        reason="A was checked on staging",
    )
    assert (resolved.status, resolved.resolution, resolved.resolved_by) == (
        "resolved", "keep_a", "user:ada",
    )  # fmt: skip
    a.refresh_from_db()
    b.refresh_from_db()
    assert a.state == LessonState.ACTIVE
    assert b.state == LessonState.RETIRED and b.retired_by == RetiredBy.PERSON  # sealed or not
    assert "A was checked on staging" in b.retired_reason
    event = AuditEvent.objects.get(action="review.resolve")
    assert (event.actor, event.reason, event.details) == (
        "user:ada", "A was checked on staging", {"resolution": "keep_a"},
    )  # fmt: skip
    # A second click changes nothing.
    review_item_resolve(item=item, resolution="keep_b", actor=person_actor("bo"), reason="no")
    a.refresh_from_db()
    assert a.state == LessonState.ACTIVE
    assert AuditEvent.objects.filter(action="review.resolve").count() == 1


def test_keep_b_retires_the_current_version_of_a(workspace, pair):
    a, b = pair
    item, _ = open_item(workspace, a, b)
    edited = lesson_edit(lesson=a, text="Run the suite from the root.", actor=person_actor("test"))
    review_item_resolve(
        item=item,
        resolution="keep_b",
        actor=person_actor("ada"),
        reason="B is right",
    )
    edited.refresh_from_db()
    assert edited.state == LessonState.RETIRED


def test_keep_both_changes_neither(workspace, pair):
    a, b = pair
    item, _ = open_item(workspace, a, b)
    review_item_resolve(
        item=item,
        resolution="keep_both",
        actor=person_actor("ada"),
        reason="both hold",
    )
    a.refresh_from_db()
    b.refresh_from_db()
    assert a.state == b.state == LessonState.ACTIVE
    # Resolved items no longer block a new item for the same pair.
    _, created = open_item(workspace, a, b)
    assert created


def test_a_resolution_needs_a_reason_and_a_known_choice(workspace, pair):
    item, _ = open_item(workspace, *pair)
    with pytest.raises(ApplicationError):
        review_item_resolve(item=item, resolution="keep_a", actor=person_actor("ada"), reason=" ")
    with pytest.raises(ApplicationError):
        review_item_resolve(
            item=item,
            resolution="flip_a_coin",
            actor=person_actor("ada"),
            reason="x",
        )
    item.refresh_from_db()
    assert item.status == "open"


def test_knowledge_pairs_can_be_opened(workspace):
    fact = KnowledgeFactory(workspace=workspace)
    lesson = LessonFactory(workspace=workspace)
    item, created = review_item_open(
        workspace=workspace,
        a_type="knowledge",
        a_id=fact.pk,
        b_type="lesson",
        b_id=lesson.pk,
        reason="written by a person",
    )
    assert created and item.a_type == "knowledge"


def test_keep_a_archives_a_knowledge_item_as_a_persons_decision(workspace):
    fact = KnowledgeFactory(workspace=workspace, content="The office is in Leeds.")
    sealed = KnowledgeFactory(workspace=workspace, content="The office is in York.", sealed=True)
    item, _ = review_item_open(
        workspace=workspace,
        a_type="knowledge",
        a_id=fact.pk,
        b_type="knowledge",
        b_id=sealed.pk,
        reason="B is sealed by a person",
    )
    review_item_resolve(
        item=item,
        resolution="keep_a",
        actor=person_actor("ada"),
        reason="we moved",
    )
    sealed.refresh_from_db()
    fact.refresh_from_db()
    assert sealed.status == "archived" and fact.status == "active"
    event = AuditEvent.objects.get(action="knowledge.archive")
    assert event.actor == "user:ada" and "we moved" in event.reason
