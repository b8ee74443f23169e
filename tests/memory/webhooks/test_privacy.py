"""Webhooks in export and erasure: exported without secret material; a text erasure
that matches the URL (it can name a person) takes the webhook and its log, and so
does removing the workspace."""

import io
import json

import pytest

from memory.models import Webhook, WebhookAttempt, WebhookDelivery
from memory.privacy.erasure import erasure_execute
from memory.privacy.exports import export_write
from memory.privacy.selection import EXPORT_SELECTORS, Selector, selector_parse
from tests.factories.webhooks import Receiver, hook

pytestmark = pytest.mark.django_db


def _logged(workspace):
    receiver = Receiver(url="https://hooks.example.com/cairn")
    issued = hook(workspace, receiver, events=["delta.staged"])
    delivery = WebhookDelivery.objects.create(webhook=issued.webhook, event="ping", body="{}")
    WebhookAttempt.objects.create(delivery=delivery, number=1, started_at=delivery.created_at)
    return issued


def test_export_has_the_webhook_but_no_secret_material(workspace):
    issued = _logged(workspace)
    out = io.StringIO()
    selector = selector_parse(workspace=workspace, data={}, allowed=EXPORT_SELECTORS)
    export_write(workspace=workspace, selector=selector, out=out, fmt="json")
    text = out.getvalue()
    (record,) = json.loads(text)["sections"]["webhooks"]["records"]
    assert record["url"] == "https://hooks.example.com/cairn"
    assert record["events"] == ["delta.staged"]
    assert "salt" not in record
    assert issued.webhook.salt not in text and issued.secret not in text
    assert '"ping"' not in text  # the delivery log is not exported


def test_a_text_erasure_matching_the_url_removes_the_webhook_and_its_log(workspace):
    _logged(workspace)
    kept = Webhook.objects.create(workspace=workspace, url="https://other.example/h", events=[])
    body = erasure_execute(
        workspace=workspace, selector=Selector(kind="text", value="hooks.example.com")
    )
    assert list(Webhook.objects.all()) == [kept]
    assert not WebhookDelivery.objects.exists() and not WebhookAttempt.objects.exists()
    assert body["counts"]["memory.Webhook"] == 1


def test_removing_the_workspace_removes_its_webhooks(workspace):
    _logged(workspace)
    workspace.delete()
    assert not Webhook.objects.exists() and not WebhookAttempt.objects.exists()
