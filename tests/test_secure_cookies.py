"""Session and CSRF cookies carry ``Secure`` when the site is served over HTTPS,
behind a proxy that ends TLS included (CAIRN_BEHIND_HTTPS_PROXY, SITE_URL)."""

import os
import subprocess
import sys

import pytest

from memory.identity.services import user_create
from tests.factories.identity import WorkspaceFactory

PROXIED = {"HTTP_X_FORWARDED_PROTO": "https"}


@pytest.fixture
def behind_proxy(settings):
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.SESSION_COOKIE_SECURE = settings.CSRF_COOKIE_SECURE = False  # SITE_URL is http


def _login(client, **extra):
    workspace = WorkspaceFactory()
    user_create(workspace=workspace, username="ada", role="admin", password="pw-for-tests-only")
    return client.post("/login/", {"username": "ada", "password": "pw-for-tests-only"}, **extra)


@pytest.mark.django_db
def test_cookies_are_secure_when_the_proxy_says_https(client, behind_proxy):
    page = client.get("/login/", **PROXIED)
    assert page.cookies["csrftoken"]["secure"] is True
    response = _login(client, **PROXIED)
    assert response.status_code == 302, response.content[:500]
    assert response.cookies["sessionid"]["secure"] is True
    assert response.cookies["sessionid"]["httponly"] is True


@pytest.mark.django_db
def test_plain_http_keeps_cookies_usable_locally(client, behind_proxy):
    assert client.get("/login/").cookies["csrftoken"]["secure"] == ""
    assert _login(client).cookies["sessionid"]["secure"] == ""


@pytest.mark.django_db
def test_a_forwarded_proto_counts_only_when_the_operator_says_a_proxy_sets_it(client, settings):
    settings.SECURE_PROXY_SSL_HEADER = None
    settings.SESSION_COOKIE_SECURE = settings.CSRF_COOKIE_SECURE = False
    assert client.get("/login/", **PROXIED).cookies["csrftoken"]["secure"] == ""


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"SITE_URL": "https://cairn.example.com"}, "True True None"),
        (
            {"SITE_URL": "http://localhost:8000", "CAIRN_BEHIND_HTTPS_PROXY": "true"},
            "False False ('HTTP_X_FORWARDED_PROTO', 'https')",
        ),
        ({"SITE_URL": "https://c.example", "SESSION_COOKIE_SECURE": "false"}, "False True None"),
    ],
)
def test_the_settings_come_from_the_environment(env, expected):
    code = (
        "import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'cairn.settings'; "
        "from django.conf import settings as s; "
        "print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_PROXY_SSL_HEADER)"
    )
    clean = {
        k: v
        for k, v in os.environ.items()
        if k
        not in {
            "SITE_URL",
            "CAIRN_BEHIND_HTTPS_PROXY",
            "SESSION_COOKIE_SECURE",
            "CSRF_COOKIE_SECURE",
        }
    }
    out = subprocess.run(
        [sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True
    )
    assert out.stdout.strip() == expected, out.stderr[-2000:]
