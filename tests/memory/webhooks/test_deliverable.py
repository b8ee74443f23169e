"""The webhook form refuses what delivery could never send (issue 56, item 7).

One rule, ``undeliverable_why``, parses the URL as delivery does (``urlsplit`` for the
host the address check sees, httpx for the request it sends) and is asked both when a
webhook is saved and before every attempt. The two forms the re-probe found are here
with variants that were not in the report.
"""

from __future__ import annotations

import pytest

from cairn.errors import ApplicationError
from memory.models import Webhook
from memory.webhooks.delivery import _pinned
from memory.webhooks.destination import undeliverable_why
from memory.webhooks.services import webhook_url_clean

pytestmark = pytest.mark.django_db

NEVER = [
    # the report's two
    "http://[fe80::1%25lo]/",
    "http://evil.example#@127.0.0.1/",
    # zone indexes, other spellings
    "http://[::1%eth0]/",
    "http://[fe80::1%2525lo]:8080/x",
    "https://[2001:db8::1%251]/",
    # fragments, other spellings
    "https://hooks.example.com/in#",
    "https://hooks.example.com/in?x=1#@10.0.0.1",
    "http://evil.example?#@127.0.0.1",
    "https://hooks.example.com#frag",
    # hosts no resolver looks up
    "http://a..b/",
    "http://-leading.example/",
    "http://trailing-.example/",
    "http://" + "x" * 64 + ".example/",
]

DELIVERABLE = [
    "https://hooks.example.com/cairn",
    "https://hooks.example.com:8443/in?team=ops",
    "http://8.8.8.8/hook",
    "https://[2606:4700:4700::1111]/hook",
    "https://bücher.example/in",
    "https://hooks.example.com./in",
]


@pytest.mark.parametrize("url", NEVER)
def test_a_url_delivery_could_never_send_is_refused_when_saved(url):
    assert undeliverable_why(url)
    with pytest.raises(ApplicationError) as refused:
        webhook_url_clean(url)
    assert refused.value.fields == {"url": [refused.value.message]}
    assert "could never deliver" in refused.value.message
    # ... and at delivery, for a row that got in before the rule (or by another path).
    assert _pinned(url) is None


@pytest.mark.parametrize("url", DELIVERABLE)
def test_urls_delivery_can_send_are_not_refused_by_the_rule(url):
    assert undeliverable_why(url) == ""


def test_the_form_shows_the_reason_and_saves_nothing(member_client, workspace):
    admin = member_client(workspace=workspace, role="admin")
    for url in ("http://[fe80::1%25lo]/", "http://evil.example#@127.0.0.1/"):
        response = admin.post("/webhooks/new/", {"url": url, "events": ["lesson.retired"]})
        assert response.status_code == 400
        assert "could never deliver" in response.content.decode()
    assert not Webhook.objects.exists()
