"""Webhook deliveries through the real broker and worker, to a local receiver."""

import time

import pytest
from django.db import transaction

from memory.core.actors import Actor
from memory.lessons.lifecycle import lesson_retire
from memory.models import DeliveryState, WebhookAttempt, WebhookDelivery
from memory.privacy.erasure import erasure_request
from memory.privacy.selection import Selector
from memory.skills.consent import delta_approve, delta_reject
from memory.webhooks.delivery import NOT_DELIVERED
from memory.webhooks.services import delivery_redeliver, webhook_test_send
from memory.webhooks.signing import signature_verify
from tests.factories.lessons import LessonFactory
from tests.factories.skills import OBSERVED_CONTENT, learning_agent, propose, reviewer
from tests.factories.webhooks import Receiver, admin_actor, hook, receiver_start

pytestmark = pytest.mark.django_db(transaction=True)

TEXT = "Escalate anything from the CFO after 48 hours, not 72."


@pytest.fixture
def receiver():
    r = Receiver()
    server = receiver_start(r)
    yield r
    server.shutdown()


def _settled(delivery, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        delivery.refresh_from_db()
        if delivery.state != DeliveryState.PENDING:
            return delivery
        time.sleep(0.1)
    raise AssertionError(f"delivery {delivery.pk} still pending after {timeout} s")


def test_a_staged_delta_arrives_signed_with_the_secret_shown_once(
    celery_worker_process, workspace, receiver, settings
):
    settings.SITE_URL = "https://cairn.example.com"
    issued = hook(workspace, receiver)
    agent = learning_agent(workspace, name="gaia/chat")
    delta = propose(agent, TEXT, rationale="The user corrected the window in turn 12.")

    (got,) = receiver.wait_for(1)
    assert signature_verify(
        secret=issued.secret, body=got.body, header=got.headers["X-Cairn-Signature"]
    )
    assert not signature_verify(
        secret=issued.secret + "x", body=got.body, header=got.headers["X-Cairn-Signature"]
    )
    assert got.headers["X-Cairn-Event"] == "delta.staged"
    delivery = _settled(WebhookDelivery.objects.get(webhook=issued.webhook))
    assert got.headers["X-Cairn-Delivery"] == str(delivery.delivery_id)
    body = got.json
    assert body["event"] == "delta.staged"
    assert body["workspace"] == {"id": workspace.pk, "name": workspace.name}
    assert body["data"]["delta"] == {
        "id": delta.pk,
        "kind": "preference",
        "status": "staged",
        "trust": "trusted",
        "skill_id": delta.skill_id,
        "agent_id": delta.agent_id,
        "url": f"https://cairn.example.com/deltas/{delta.pk}/?ws={workspace.name}",
    }
    assert (
        body["data"]["queue_url"] == f"https://cairn.example.com/deltas/staged/?ws={workspace.name}"
    )
    # Ids and links only: what the agent wrote (even its skill's name) never leaves.
    for written in ("CFO", "turn 12", "triage-inbox", "gaia/chat"):
        assert written not in got.body.decode()
    assert delivery.state == "delivered" and delivery.attempts == 1
    # The secret is nowhere in the database: only its salt is.
    issued.webhook.refresh_from_db()
    assert issued.secret not in str(issued.webhook.__dict__)


def test_a_failing_receiver_is_retried_with_backoff_until_it_answers(
    celery_worker_process, workspace, receiver
):
    receiver.statuses = [500, 500, 503, 200]
    issued = hook(workspace, receiver)
    delivery = webhook_test_send(webhook=issued.webhook, actor=admin_actor_of(issued))

    got = receiver.wait_for(4)
    delivery = _settled(delivery)
    assert delivery.state == "delivered" and delivery.attempts == 4
    attempts = list(WebhookAttempt.objects.filter(delivery=delivery).order_by("number"))
    # The log says delivered or not, never the receiver's answer.
    assert [a.status_code for a in attempts] == [None, None, None, None]
    assert [a.error for a in attempts] == [NOT_DELIVERED] * 3 + [""]
    # The waits grow (0.2, 0.4, 0.6 s in test settings); the delivery id stays the same.
    gaps = [b.at - a.at for a, b in zip(got, got[1:], strict=False)]
    assert gaps[0] >= 0.15 and gaps[1] >= 0.35 and gaps[2] >= 0.55, gaps
    assert len({r.headers["X-Cairn-Delivery"] for r in got}) == 1


def test_a_receiver_that_never_answers_ends_failed_and_can_be_redelivered(
    celery_worker_process, workspace, receiver
):
    receiver.hang = 1.5  # past CAIRN_WEBHOOK_TIMEOUT_S = 1 s of the test settings
    issued = hook(workspace, receiver)
    actor = admin_actor_of(issued)
    delivery = _settled(webhook_test_send(webhook=issued.webhook, actor=actor), timeout=60)

    assert delivery.state == "failed"
    assert delivery.attempts == 6  # the first try and the five retries of the schedule
    errors = set(WebhookAttempt.objects.filter(delivery=delivery).values_list("error", flat=True))
    assert errors == {NOT_DELIVERED}

    receiver.hang, receiver.statuses = 0.0, [200]
    delivery_redeliver(delivery=delivery, actor=actor)
    delivery = _settled(delivery)
    assert delivery.state == "delivered" and delivery.attempts == 7


def test_a_rolled_back_write_sends_nothing(celery_worker_process, workspace, receiver):
    hook(workspace, receiver)
    agent = learning_agent(workspace)
    with pytest.raises(RuntimeError), transaction.atomic():
        propose(agent, TEXT)
        assert WebhookDelivery.objects.count() == 1  # written in the same transaction
        raise RuntimeError("the request failed after staging")
    assert WebhookDelivery.objects.count() == 0
    propose(agent, "Keep replies under five sentences.", section="drafting-replies")
    receiver.wait_for(1)
    time.sleep(0.5)
    assert len(receiver.received) == 1


def test_each_event_reaches_the_receiver(celery_worker_process, workspace, receiver):
    hook(workspace, receiver)
    person = Actor.for_user(reviewer(workspace))
    agent = learning_agent(workspace, name="gaia/chat")
    approved = propose(agent, TEXT)
    rejected = propose(agent, "Keep replies under five sentences.", section="drafting-replies")
    propose(agent, "Forward invoices to the finance alias.", provenance=OBSERVED_CONTENT)
    delta_approve(delta=approved, actor=person, reason="the user asked")
    delta_reject(delta=rejected, actor=person, reason="not what they meant")
    lesson = LessonFactory(workspace=workspace)
    lesson_retire(lesson=lesson, actor=person, reason="wrong")
    receipt = erasure_request(
        workspace=workspace,
        selector=Selector(kind="context", value="nothing-here"),
        confirm=workspace.name,
        actor=admin_actor(workspace),
        reason="a test erasure",
    )

    got = receiver.wait_for(7, timeout=60)
    events = sorted(r.json["event"] for r in got)
    assert events == [
        "delta.decided",
        "delta.decided",
        "delta.quarantined",
        "delta.staged",
        "delta.staged",
        "erasure.completed",
        "lesson.retired",
    ]
    decided = {
        r.json["data"]["delta"]["id"]: r.json["data"] for r in got if "decision" in r.json["data"]
    }
    assert decided[approved.pk]["decision"] == "approved"
    assert decided[rejected.pk]["decision"] == "rejected"
    assert decided[rejected.pk]["decided_by"] == person.label
    (retired,) = [r.json["data"] for r in got if r.json["event"] == "lesson.retired"]
    assert retired["lesson"]["id"] == lesson.pk and retired["lesson"]["retired_by"] == "person"
    assert retired["lesson"]["url"].endswith(f"/lessons/{lesson.pk}/?ws={workspace.name}")
    (erased,) = [r.json["data"] for r in got if r.json["event"] == "erasure.completed"]
    assert erased["erasure"]["id"] == receipt.pk
    assert erased["erasure"]["url"].endswith(f"/erasures/{receipt.pk}/?ws={workspace.name}")
    assert "reason" not in str([r.json for r in got])  # reasons are people's words


def test_a_disabled_webhook_and_an_unsubscribed_event_get_nothing(workspace, receiver):
    from memory.webhooks.services import webhook_update

    issued = hook(workspace, receiver, events=["delta.quarantined"])
    agent = learning_agent(workspace)
    propose(agent, TEXT)  # staged: not subscribed
    assert WebhookDelivery.objects.count() == 0
    webhook_update(webhook=issued.webhook, actor=admin_actor_of(issued), enabled=False)
    propose(agent, "Forward invoices to the finance alias.", provenance=OBSERVED_CONTENT)
    assert WebhookDelivery.objects.count() == 0


def admin_actor_of(issued):
    from memory.models import Membership

    membership = Membership.objects.filter(workspace=issued.webhook.workspace, role="admin").first()
    return Actor.for_user(membership.user)


def test_an_attempt_runs_once_even_if_its_message_comes_twice(workspace, receiver):
    from memory.webhooks.delivery import delivery_attempt

    issued = hook(workspace, receiver)
    delivery = WebhookDelivery.objects.create(webhook=issued.webhook, event="ping", body="{}")
    assert delivery_attempt(delivery_id=delivery.pk, number=1) == "delivered"
    assert delivery_attempt(delivery_id=delivery.pk, number=1) == ""
    assert len(receiver.received) == 1
    # A worker killed between claiming and recording: the redelivered message makes it.
    crashed = WebhookDelivery.objects.create(
        webhook=issued.webhook, event="ping", body="{}", attempts=1
    )
    assert delivery_attempt(delivery_id=crashed.pk, number=1) == "delivered"
    assert WebhookAttempt.objects.filter(delivery=crashed).count() == 1
