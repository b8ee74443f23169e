"""A person's repeated confirmation is one piece of evidence per person, target and window."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from memory.core.actors import Actor
from memory.lessons.posted_evidence import evidence_confirm_by_person
from memory.models import ConfidenceChange, Evidence, Knowledge
from tests.factories.knowledge import KnowledgeFactory

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def host(workspace):
    return KnowledgeFactory(workspace=workspace, content="The staging database host is db3.")


@pytest.mark.django_db
def test_a_double_clicked_confirm_counts_once(member_client, workspace, host):
    reviewer = member_client(workspace=workspace, role="reviewer")
    for _ in range(2):
        response = reviewer.post(f"/knowledge/{host.pk}/confirm/", {"reason": "checked"}, **HX)
        assert response.status_code == 200
    host.refresh_from_db()
    assert host.confidence == pytest.approx(0.65)
    assert Evidence.objects.filter(target_id=host.pk).count() == 1
    assert ConfidenceChange.objects.filter(target_id=host.pk).count() == 1


@pytest.mark.django_db
def test_another_person_or_another_window_counts_again(member_client, workspace, host, settings):
    member_client(workspace=workspace, role="reviewer").post(
        f"/knowledge/{host.pk}/confirm/", {"reason": "checked"}, **HX
    )
    second = member_client(workspace=workspace, role="reviewer")
    second.post(f"/knowledge/{host.pk}/confirm/", {"reason": "me too"}, **HX)
    host.refresh_from_db()
    assert host.confidence == pytest.approx(0.8)
    settings.CAIRN_PERSON_CONFIRM_WINDOW_S = 1  # every second is a new window
    time.sleep(1.1)
    second.post(f"/knowledge/{host.pk}/confirm/", {"reason": "still true"}, **HX)
    host.refresh_from_db()
    assert host.confidence == pytest.approx(0.95)


@pytest.mark.django_db(transaction=True)
def test_concurrent_confirmations_by_one_person_apply_once(member_client, workspace, host):
    user = member_client(workspace=workspace, role="reviewer").user
    actor = Actor.for_user(user)
    barrier, errors = threading.Barrier(6), []

    def confirm():
        try:
            barrier.wait()
            evidence_confirm_by_person(workspace=workspace, target_type="knowledge",
                                       target_id=host.pk, actor=actor, reason="ok")  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=confirm) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert Knowledge.objects.get(pk=host.pk).confidence == pytest.approx(0.65)
    assert Evidence.objects.filter(target_id=host.pk).count() == 1
