"""cairn.browser: the message middleware runs for pages, not for the agent API."""

from django.contrib.messages import get_messages
from django.http import HttpResponse
from django.test import RequestFactory

from cairn.browser import MessageMiddleware


def _storage_seen(path: str):
    seen = {}

    def view(request):
        seen["storage"] = getattr(request, "_messages", None)
        return HttpResponse("ok")

    request = RequestFactory().get(path)
    request.session = {}
    request.COOKIES = {}
    MessageMiddleware(view)(request)
    return seen["storage"]


def test_a_page_request_gets_message_storage():
    storage = _storage_seen("/lessons/")
    assert storage is not None
    assert list(get_messages(type("R", (), {"_messages": storage})())) == []


def test_an_api_request_skips_it():
    assert _storage_seen("/api/v1/outcomes/") is None
    assert _storage_seen("/api/v1/recall/") is None


def test_settings_use_it_in_place_of_djangos():
    from django.conf import settings

    assert "cairn.browser.MessageMiddleware" in settings.MIDDLEWARE
    assert "django.contrib.messages.middleware.MessageMiddleware" not in settings.MIDDLEWARE
