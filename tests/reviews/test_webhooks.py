"""Webhook screens: admin only, URL checked, secret shown once, every change audited,
a delivery log per webhook (page and fragment), test events and redelivery."""

import re

import pytest
from django.test import Client

from memory.models import AuditEvent, DeliveryState, Webhook, WebhookAttempt, WebhookDelivery
from memory.webhooks.signing import webhook_secret
from tests.factories.identity import WorkspaceFactory
from tests.reviews import without_ws

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}
ALL = ["delta.staged", "delta.quarantined", "delta.decided", "lesson.retired", "erasure.completed"]


@pytest.fixture
def admin(member_client, workspace):
    return member_client(workspace=workspace, role="admin")


def _create(client, url="https://hooks.example.com/cairn", events=ALL):
    return client.post("/webhooks/new/", {"url": url, "events": events})


def _secrets(html: str) -> list[str]:
    return re.findall(r"whsec_[0-9a-f]{64}", html)


def test_an_admin_adds_a_webhook_and_sees_its_secret_once(admin, workspace):
    response = _create(admin)
    assert response.status_code == 200
    assert "no-cache" in response["Cache-Control"] or "no-store" in response["Cache-Control"]
    webhook = Webhook.objects.get(workspace=workspace)
    assert webhook.url == "https://hooks.example.com/cairn" and webhook.events == ALL
    (secret,) = set(_secrets(response.content.decode()))
    assert secret == webhook_secret(webhook_id=webhook.pk, salt=webhook.salt)
    # Never again: not on the list, not on its page; and nowhere in the database.
    assert _secrets(admin.get("/webhooks/").content.decode()) == []
    assert _secrets(admin.get(f"/webhooks/{webhook.pk}/").content.decode()) == []
    event = AuditEvent.objects.get(action="webhook.create", target_id=str(webhook.pk))
    assert event.actor == f"user:{admin.user.username}"
    assert event.details == {"host": "hooks.example.com", "events": ALL}


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("ftp://files.example.com/in", "Only http:// and https:// URLs are allowed (got ftp:)"),
        ("javascript:alert(1)", "Only http:// and https:// URLs are allowed"),
        ("https://", "The URL needs a host"),
        ("not a url", "must not contain spaces"),
        ("", "Enter the URL"),
        ("https://bob:hunter2hunter2@example.com/x", "Cairn never stores secrets"),
        ("https://example.com/" + "a" * 600, "at most 500"),
    ],
)
def test_a_bad_url_is_a_form_error_and_nothing_is_written(admin, url, says):
    response = _create(admin, url=url)
    assert response.status_code == 400
    html = response.content.decode()
    assert says in html
    assert 'aria-invalid="true"' in html
    # Under the URL field, inside its box, before the events and the button.
    field = html.split('<label for="webhook-url">')[1].split("</div>")[0]
    assert 'id="webhook-url-error"' in field and says in field
    assert Webhook.objects.count() == 0
    assert not AuditEvent.objects.filter(target_type="webhook").exists()


def test_no_event_chosen_is_a_form_error(admin):
    response = _create(admin, events=[])
    assert response.status_code == 400
    html = response.content.decode()
    # Under the events it is about, not under the URL.
    events = html.split('<fieldset class="events-choice"')[1].split("<button")[0]
    assert 'aria-describedby="webhook-events-error"' in events
    assert "Choose at least one event." in events and "webhook-url-error" not in html


@pytest.mark.parametrize("role", ["viewer", "reviewer"])
def test_non_admins_can_neither_see_nor_manage_webhooks(member_client, workspace, role):
    webhook = Webhook.objects.create(workspace=workspace, url="https://a.example/h", events=ALL)
    client = member_client(workspace=workspace, role=role)
    assert client.get("/webhooks/").status_code == 403
    assert client.get(f"/webhooks/{webhook.pk}/").status_code == 403
    for path in ("update", "rotate", "delete", "test"):
        response = client.post(f"/webhooks/{webhook.pk}/{path}/", {"reason": "x", "enabled": "no"})
        assert response.status_code == 403, path
    assert _create(client).status_code == 403
    assert Webhook.objects.count() == 1 and WebhookDelivery.objects.count() == 0
    assert "/webhooks/" not in client.get("/dashboard/").content.decode()


def test_another_workspaces_webhook_is_not_found(admin):
    other = Webhook.objects.create(
        workspace=WorkspaceFactory(), url="https://a.example/h", events=ALL
    )
    assert admin.get(f"/webhooks/{other.pk}/").status_code == 404
    assert admin.post(f"/webhooks/{other.pk}/delete/", {"reason": "x"}).status_code == 404
    assert Webhook.objects.filter(pk=other.pk).exists()


def test_disable_enable_change_events_rotate_and_delete_are_audited(admin, workspace):
    _create(admin)
    webhook = Webhook.objects.get()
    old_salt = webhook.salt
    assert admin.post(f"/webhooks/{webhook.pk}/update/", {"enabled": "no"}).status_code == 303
    webhook.refresh_from_db()
    assert not webhook.enabled
    admin.post(f"/webhooks/{webhook.pk}/update/", {"enabled": "yes", "next": "list"})
    admin.post(f"/webhooks/{webhook.pk}/update/", {"events": ["delta.quarantined"]})
    webhook.refresh_from_db()
    assert webhook.enabled and webhook.events == ["delta.quarantined"]

    refused = admin.post(f"/webhooks/{webhook.pk}/rotate/", {"reason": ""})
    assert refused.status_code == 400 and "Say why" in refused.content.decode()
    rotated = admin.post(f"/webhooks/{webhook.pk}/rotate/", {"reason": "the old one leaked"})
    webhook.refresh_from_db()
    assert webhook.salt != old_salt
    assert _secrets(rotated.content.decode()) == [
        webhook_secret(webhook_id=webhook.pk, salt=webhook.salt)
    ]
    assert admin.post(f"/webhooks/{webhook.pk}/delete/", {"reason": "done"}).status_code == 303
    assert not Webhook.objects.exists()
    actions = list(
        AuditEvent.objects.filter(target_type="webhook")
        .order_by("id")
        .values_list("action", "reason")
    )
    assert actions == [
        ("webhook.create", ""),
        ("webhook.disable", ""),
        ("webhook.enable", ""),
        ("webhook.update", ""),
        ("webhook.rotate_secret", "the old one leaked"),
        ("webhook.delete", "done"),
    ]


def _delivery(webhook, state, attempts=()):
    delivery = WebhookDelivery.objects.create(
        webhook=webhook, event="delta.staged", body="{}", state=state, attempts=len(attempts)
    )
    for number, (status, error) in enumerate(attempts, start=1):
        WebhookAttempt.objects.create(
            delivery=delivery,
            number=number,
            started_at=delivery.created_at,
            status_code=status,
            duration_ms=12,
            error=error,
        )
    return delivery


def test_the_delivery_log_is_a_page_and_a_fragment(admin, workspace, django_assert_max_num_queries):
    webhook = Webhook.objects.create(workspace=workspace, url="https://a.example/h", events=ALL)
    failed = _delivery(webhook, DeliveryState.FAILED, [(500, "HTTP 500 from the receiver.")] * 3)
    for _ in range(10):
        _delivery(webhook, DeliveryState.DELIVERED, [(None, "No answer"), (200, "")])
    page = admin.get(f"/webhooks/{webhook.pk}/")
    html = page.content.decode()
    assert "<html" in html and 'id="delivery-log"' in html
    assert html.count("HTTP 500 from the receiver.") == 3
    assert f"/webhooks/{webhook.pk}/deliveries/{failed.pk}/redeliver/" in html
    assert html.count("Redeliver</button>") == 1
    assert "10 s, then 1 min, then 5 min" not in html  # test settings: tenths of a second
    with django_assert_max_num_queries(12):
        fragment = admin.get(f"/webhooks/{webhook.pk}/", **HX)
    body = fragment.content.decode()
    assert "<html" not in body and body.lstrip().startswith(
        '<section class="card" id="delivery-log"'
    )
    assert fragment["Vary"].count("HX-Request") == 1


def test_send_test_event_and_redeliver_queue_deliveries(admin, workspace):
    webhook = Webhook.objects.create(workspace=workspace, url="https://a.example/h", events=ALL)
    assert admin.post(f"/webhooks/{webhook.pk}/test/").status_code == 303
    ping = WebhookDelivery.objects.get(webhook=webhook)
    assert ping.event == "ping" and ping.state == "pending"
    # Only a failed delivery is sent again.
    refused = admin.post(f"/webhooks/{webhook.pk}/deliveries/{ping.pk}/redeliver/", follow=True)
    assert "only a failed delivery is redelivered" in refused.content.decode()
    WebhookDelivery.objects.filter(pk=ping.pk).update(state="failed", attempts=6)
    admin.post(f"/webhooks/{webhook.pk}/deliveries/{ping.pk}/redeliver/")
    ping.refresh_from_db()
    assert ping.state == "pending" and ping.attempts == 6
    assert list(
        AuditEvent.objects.filter(target_type="webhook")
        .order_by("id")
        .values_list("action", flat=True)
    ) == ["webhook.test", "webhook.redeliver"]


def test_the_dashboard_highlights_quarantine_only_when_it_holds_something(member_client, workspace):
    from tests.factories.skills import OBSERVED_CONTENT, learning_agent, propose

    client = member_client(workspace=workspace, role="viewer")
    card = re.compile(r'<a class="stat queue-stat( warn)?" href="/deltas/quarantine/">')
    assert card.search(without_ws(client.get("/dashboard/").content.decode())).group(1) is None
    propose(learning_agent(workspace), "Forward invoices to finance.", provenance=OBSERVED_CONTENT)
    assert card.search(without_ws(client.get("/dashboard/").content.decode())).group(1) == " warn"


def test_a_test_event_toast_follows_its_delivery(admin, workspace):
    from datetime import timedelta

    from django.utils import timezone

    webhook = Webhook.objects.create(workspace=workspace, url="https://a.example/h", events=ALL)
    page = admin.post(f"/webhooks/{webhook.pk}/test/", follow=True).content.decode()
    ping = WebhookDelivery.objects.get(webhook=webhook)
    toast = f"/webhooks/{webhook.pk}/deliveries/{ping.pk}/toast/"
    assert f'hx-get="{toast}"' in without_ws(page) and "Test event queued" in page
    assert admin.get(toast, **HX).status_code == 204  # in flight: the toast stays
    retry = timezone.now() + timedelta(minutes=5)
    WebhookDelivery.objects.filter(pk=ping.pk).update(
        attempts=1, last_status_code=500, next_retry_at=retry
    )
    html = admin.get(toast, **HX).content.decode()
    assert 'class="toast warning ended"' in html and "attempt 1 failed (HTTP 500)" in html
    WebhookDelivery.objects.filter(pk=ping.pk).update(
        state="delivered", attempts=2, last_status_code=200, next_retry_at=None
    )
    html = admin.get(toast, **HX).content.decode()
    assert 'class="toast success ended"' in html and "ping delivered (HTTP 200)." in html
    assert "hx-get" not in html
    # Redelivery's toast follows the same delivery; an ended session changes nothing.
    WebhookDelivery.objects.filter(pk=ping.pk).update(state="failed", attempts=6)
    again = admin.post(f"/webhooks/{webhook.pk}/deliveries/{ping.pk}/redeliver/", follow=True)
    assert f'hx-get="{toast}"' in without_ws(again.content.decode())
    assert admin.get(toast, **HX).status_code == 204
    assert Client().get(toast, **HX).status_code == 204  # logged out
    other = Webhook.objects.create(workspace=WorkspaceFactory(), url="https://b.example/h")
    assert admin.get(f"/webhooks/{other.pk}/deliveries/{ping.pk}/toast/", **HX).content == b""
