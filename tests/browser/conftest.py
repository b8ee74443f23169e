"""Headless Chromium (Debian's package) driven by Playwright against a live server."""

import os

import pytest

CHROMIUM = "/usr/bin/chromium"
# Playwright's sync API runs an event loop in this thread; the ORM calls the
# tests make between page actions are still synchronous and safe.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    assert os.path.exists(CHROMIUM), (
        "browser tests need Debian's chromium (apt-get install chromium)"
    )
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        yield browser
        browser.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15000)
    yield page
    context.close()


@pytest.fixture
def login(live_server, page):
    """Log in through the real form as a new user with ``role`` in ``workspace``."""
    from memory.identity.services import user_create

    def do(*, workspace, role, username=None):
        username = username or f"{role}-{workspace.pk}"
        user_create(workspace=workspace, username=username, role=role, password="pw-browser-1")
        page.goto(f"{live_server.url}/login/")
        page.fill("#id_username", username)
        page.fill("#id_password", "pw-browser-1")
        page.click("button[type=submit]")
        page.wait_for_url(at(live_server.url, "/dashboard/"))
        return page

    return do


def url_is(base_url: str, path: str, query: dict[str, str] | None = None, *, exact=True):
    """A predicate for ``wait_for_url``: ``path`` on the live server (``*`` one segment,
    a trailing ``**`` anything below) whose query, ``ws`` left out and in any order, is
    ``query`` (``None``: any query; ``exact=False``: at least these pairs; a filter form
    sends its empty fields too). Every review link and GET form names its workspace
    (reviews/links.py), so where ``ws`` sits in the query is not the test's business."""
    import re
    from urllib.parse import parse_qsl, urlsplit

    body = re.escape(path).replace(r"\*\*", ".*").replace(r"\*", "[^/?#]+")
    pattern = re.compile(rf"{body}$")

    def matches(url: str) -> bool:
        if not url.startswith(base_url):
            return False
        parts = urlsplit(url[len(base_url) :])
        if not pattern.match(parts.path):
            return False
        if query is None:
            return True
        pairs = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "ws"]
        if not exact:
            return set(query.items()) <= set(pairs)
        return sorted(pairs) == sorted(query.items())

    return matches


def at(base_url: str, path: str):
    """A URL pattern for ``wait_for_url``: ``path`` on the live server, with or without
    the ``?ws=<workspace>`` every review link and redirect carries (reviews/links.py).
    A ``*`` in ``path`` stands for one path segment (an id)."""
    import re

    body = re.escape(path).replace(r"\*", "[^/?#]+")
    return re.compile(rf"^{re.escape(base_url)}{body}(\?ws=[^&#]+)?$")
