"""Keyset pagination: every row exactly once, both directions, ties, bad cursors."""

from datetime import timedelta

import pytest
from django.utils import timezone

from memory.models import AuditEvent
from reviews.pagination import _encode, keyset_page
from tests.factories.identity import WorkspaceFactory

pytestmark = pytest.mark.django_db

ORDER = ("-created_at", "-id")


@pytest.fixture
def events():
    workspace = WorkspaceFactory()
    AuditEvent.objects.filter(workspace=workspace).delete()
    now = timezone.now()
    rows = AuditEvent.objects.bulk_create(
        [AuditEvent(workspace=workspace, actor="system", action="t") for _ in range(11)]
    )
    # Pairs share a timestamp so the id tie-breaker matters.
    for i, row in enumerate(rows):
        AuditEvent.objects.filter(pk=row.pk).update(created_at=now - timedelta(seconds=i // 2))
    return AuditEvent.objects.filter(workspace=workspace)


def _expected(qs):
    return list(qs.order_by(*ORDER).values_list("pk", flat=True))


def test_forward_pages_cover_every_row_once_in_order(events):
    seen, cursor = [], None
    while True:
        page = keyset_page(events, ordering=ORDER, size=4, after=cursor)
        seen += [e.pk for e in page]
        if not page.next_cursor:
            break
        cursor = page.next_cursor
    assert seen == _expected(events)


def test_backward_pages_mirror_forward_ones(events):
    first = keyset_page(events, ordering=ORDER, size=4)
    second = keyset_page(events, ordering=ORDER, size=4, after=first.next_cursor)
    third = keyset_page(events, ordering=ORDER, size=4, after=second.next_cursor)
    assert len(third) == 3 and third.next_cursor is None
    back = keyset_page(events, ordering=ORDER, size=4, before=third.prev_cursor)
    assert [e.pk for e in back] == [e.pk for e in second]
    assert not back.is_first
    start = keyset_page(events, ordering=ORDER, size=4, before=back.prev_cursor)
    assert [e.pk for e in start] == [e.pk for e in first]


def test_paging_back_past_the_start_shows_a_full_first_page(events):
    expected = _expected(events)
    second = keyset_page(events, ordering=ORDER, size=4, after=_encode_row(events, expected[1]))
    back = keyset_page(events, ordering=ORDER, size=4, before=second.prev_cursor)
    assert back.is_first and [e.pk for e in back] == expected[:4]


def _encode_row(qs, pk):
    row = qs.get(pk=pk)
    return _encode([row.created_at, row.id])


def test_the_first_page_has_no_previous(events):
    page = keyset_page(events, ordering=ORDER, size=20)
    assert page.is_first and page.prev_cursor is None and page.next_cursor is None
    assert not page.has_other_pages and len(page) == 11


@pytest.mark.parametrize(
    "cursor", ["garbage", "!!!", _encode([1]), _encode(["not-a-date", 3]), _encode([None, 1])]
)
def test_a_bad_cursor_means_the_first_page(events, cursor):
    page = keyset_page(events, ordering=ORDER, size=4, after=cursor)
    assert [e.pk for e in page] == _expected(events)[:4]
    page = keyset_page(events, ordering=ORDER, size=4, before=cursor)
    assert [e.pk for e in page] == _expected(events)[:4]


def test_ascending_orderings_work_too(events):
    seen, cursor = [], None
    while True:
        page = keyset_page(events, ordering=("created_at", "id"), size=3, after=cursor)
        seen += [e.pk for e in page]
        if not page.next_cursor:
            break
        cursor = page.next_cursor
    assert seen == list(events.order_by("created_at", "id").values_list("pk", flat=True))


def test_a_page_is_one_query(events, django_assert_num_queries):
    first = keyset_page(events, ordering=ORDER, size=4)
    with django_assert_num_queries(1):
        keyset_page(events, ordering=ORDER, size=4, after=first.next_cursor)
