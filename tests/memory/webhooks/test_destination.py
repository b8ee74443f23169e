"""Webhooks cannot scan: internal destinations are refused when saved and again at
delivery, no redirect is followed, and the delivery log says only delivered or not.

No test here sends traffic anywhere but 127.0.0.1: every refusal happens before a
connection, and the only receivers listen on loopback.
"""

import pytest

from memory.models import DeliveryState, Webhook, WebhookAttempt, WebhookDelivery
from memory.webhooks.delivery import NOT_DELIVERED, delivery_attempt
from memory.webhooks.destination import address_refusal
from memory.webhooks.services import webhook_create, webhook_url_clean
from tests.factories.webhooks import Receiver, admin_actor, receiver_start

pytestmark = pytest.mark.django_db

REFUSED = [
    # every loopback spelling, this machine's names, the unspecified address
    "127.0.0.1",
    "127.1",
    "0x7f.1",
    "0x7f000001",
    "2130706433",
    "017700000001",
    "0177.0.0.1",
    "127.0.0.2",
    "[::1]",
    "[::ffff:127.0.0.1]",
    "[::ffff:7f00:1]",
    "[64:ff9b::7f00:1]",
    "[2002:7f00:1::]",
    "localhost",
    "LOCALHOST.",
    "LocalHost",
    "anything.localhost",
    "0.0.0.0",
    "0",
    "[::]",
    # cloud metadata
    "169.254.169.254",
    "[::ffff:169.254.169.254]",
    "metadata.google.internal",
    "METADATA.GOOGLE.INTERNAL.",
    "[fd00:ec2::254]",
    # private, unique-local, link-local, CGNAT, multicast, reserved
    "10.0.0.1",
    "192.168.1.1",
    "172.16.0.1",
    "172.31.255.255",
    "100.64.0.1",
    "[fd12:3456::1]",
    "[fe80::1]",
    "169.254.1.1",
    "224.0.0.1",
    "[ff02::1]",
    "240.0.0.1",
    "255.255.255.255",
]


# Loopback spelled so that httpx cannot parse the URL at all.
UNREADABLE = {"0177.0.0.1"}


@pytest.fixture(autouse=True)
def nothing_allowed(settings):
    settings.CAIRN_WEBHOOK_ALLOW_HOSTS = []
    settings.CAIRN_WEBHOOK_RETRY_S = []  # one attempt: nothing left queued on the broker


@pytest.mark.parametrize("host", REFUSED)
@pytest.mark.parametrize("template", ["http://{host}/hook", "https://{host}:6379/x"])
def test_internal_destinations_are_refused_when_saved(host, template, workspace):
    with pytest.raises(Exception) as refused:
        webhook_create(
            workspace=workspace,
            url=template.format(host=host),
            events=["ping"],
            actor=admin_actor(workspace),
        )
    if host in UNREADABLE:
        # A spelling the HTTP client cannot read is refused before the address check:
        # delivery could never send to it, internal or not.
        assert refused.value.code == "invalid", refused.value
        assert "could never deliver" in refused.value.message, refused.value
    else:
        assert refused.value.code == "destination_refused", refused.value
        assert "CAIRN_WEBHOOK_ALLOW_HOSTS" in refused.value.message
    assert not Webhook.objects.exists()


@pytest.mark.parametrize(
    "host", ["8.8.8.8", "1.1.1.1", "[2606:4700:4700::1111]", "hooks.example.com"]
)
def test_public_addresses_and_names_not_yet_resolvable_are_saved(host):
    """Public literals pass; a name that does not resolve here is saved and checked
    again at every delivery (where it fails until it resolves to a public address)."""
    assert webhook_url_clean(f"https://{host}/hook") == f"https://{host}/hook"


def test_the_allow_list_admits_a_named_internal_receiver_but_never_metadata(settings):
    settings.CAIRN_WEBHOOK_ALLOW_HOSTS = ["10.20.0.0/16", "127.0.0.1"]
    assert webhook_url_clean("http://10.20.3.4/h") == "http://10.20.3.4/h"
    assert webhook_url_clean("http://127.1:8080/h") == "http://127.1:8080/h"  # 127.0.0.1
    for still_refused in ("http://10.21.0.1/h", "http://127.0.0.2/h"):
        with pytest.raises(Exception, match="public addresses only"):
            webhook_url_clean(still_refused)
    settings.CAIRN_WEBHOOK_ALLOW_HOSTS = ["169.254.0.0/16", "metadata.google.internal"]
    for metadata in ("http://169.254.169.254/", "http://metadata.google.internal/"):
        with pytest.raises(Exception, match="metadata"):
            webhook_url_clean(metadata)


def test_address_rules_cover_each_kind():
    import ipaddress

    assert address_refusal(ipaddress.ip_address("93.184.216.34")) == ""
    assert address_refusal(ipaddress.ip_address("100.64.0.1")) == "a carrier-grade NAT address"
    assert address_refusal(ipaddress.ip_address("fd00:ec2::254")) == "a cloud metadata address"


@pytest.fixture
def receiver():
    r = Receiver()
    server = receiver_start(r)
    yield r
    server.shutdown()


def _stored_hook(workspace, url) -> WebhookDelivery:
    """A webhook whose address was fine when saved (as when DNS answered differently
    then, or the operator's list changed since), and one delivery for it."""
    webhook = Webhook.objects.create(workspace=workspace, url=url, events=["ping"])
    return WebhookDelivery.objects.create(webhook=webhook, event="ping", body="{}")


def test_the_destination_is_checked_again_at_delivery(workspace, receiver, settings):
    delivery = _stored_hook(workspace, receiver.url)  # 127.0.0.1, no longer allowed
    assert delivery_attempt(delivery_id=delivery.pk, number=1) == DeliveryState.FAILED
    assert receiver.received == []  # refused before connecting
    settings.CAIRN_WEBHOOK_ALLOW_HOSTS = ["127.0.0.1"]
    again = _stored_hook(workspace, receiver.url)
    assert delivery_attempt(delivery_id=again.pk, number=1) == DeliveryState.DELIVERED
    assert len(receiver.received) == 1


def test_redirects_are_not_followed(workspace, receiver, settings):
    settings.CAIRN_WEBHOOK_ALLOW_HOSTS = ["127.0.0.1"]
    receiver.statuses = [307]
    delivery = _stored_hook(workspace, receiver.url)
    assert delivery_attempt(delivery_id=delivery.pk, number=1) == DeliveryState.FAILED
    assert len(receiver.received) == 1


def test_the_delivery_log_cannot_tell_a_closed_port_from_a_404(workspace, receiver, settings):
    """A port scanner reads refused vs answered, status codes and timings: the log
    has none of them."""
    import socket

    settings.CAIRN_WEBHOOK_ALLOW_HOSTS = ["127.0.0.1"]
    receiver.statuses = [404]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]  # bound, never listening: connection refused
        answered = _stored_hook(workspace, receiver.url)
        refused = _stored_hook(workspace, f"http://127.0.0.1:{closed}/hook")
        for delivery in (answered, refused):
            assert delivery_attempt(delivery_id=delivery.pk, number=1) == DeliveryState.FAILED
    rows = [
        WebhookAttempt.objects.values("status_code", "duration_ms", "error").get(delivery=d)
        for d in (answered, refused)
    ]
    assert rows[0] == rows[1] == {"status_code": None, "duration_ms": 0, "error": NOT_DELIVERED}
    for delivery in (answered, refused):
        delivery.refresh_from_db()
        assert delivery.last_status_code is None
        attempt = WebhookAttempt.objects.get(delivery=delivery)
        assert delivery.finished_at == attempt.started_at  # no timing in the finish either
