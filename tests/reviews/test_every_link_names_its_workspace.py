"""Every internal link, form and htmx URL on every review page names its workspace.

The pages are found by crawling, from the dashboard, a real demo workspace (the
``cairn_demo`` command) and a fresh one; the set of review views the crawl must
reach comes from the URL resolver, so a new page that no link leads to, or a link
that drops ``?ws=``, fails here.
"""

from collections import Counter, deque
from html.parser import HTMLParser
from urllib.parse import parse_qs, urljoin, urlsplit

import pytest
from django.core.management import call_command
from django.urls import Resolver404, get_resolver, resolve

from memory.identity.services import user_create, workspace_get_or_create
from memory.models import Membership, Role

pytestmark = pytest.mark.django_db

URL_ATTRIBUTES = {"href", "action", "formaction", "hx-get", "hx-post", "hx-put", "hx-delete"}
PER_VIEW = 3  # pages of one view visited per workspace (a list's first rows are enough)

# Views no page links to, and why.
UNLINKED = {
    # Reached by its form's POST (the switcher), never named in a link of its own.
    "switch_workspace": "the workspace menu's POST (checked separately below)",
    # A job's toast is polled by the toast a started job leaves (reviews/toasts.py).
    "jobs_toast": "polled by the toast of a job just started",
    "webhooks_delivery_toast": "polled by the toast of a test delivery just sent",
}


class Links(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.urls: list[tuple[str, str, str]] = []  # (tag, attribute, url)
        self.get_forms: list[tuple[str, bool]] = []  # (action, has a ws field)
        self._form = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for name, value in attrs.items():
            if name in URL_ATTRIBUTES and value:
                self.urls.append((tag, name, value))
        if tag == "form" and (attrs.get("method") or "get").lower() == "get":
            self._form = [attrs.get("action") or attrs.get("hx-get") or "", False]
            self.get_forms.append(self._form)
        if tag == "input" and attrs.get("name") == "ws" and self._form is not None:
            self._form[1] = True

    def handle_endtag(self, tag):
        if tag == "form":
            self._form = None


def _review_name(path):
    try:
        match = resolve(path)
    except Resolver404:
        return None
    return match.url_name if "reviews" in match.namespaces else None


def _crawl(client, workspace_name, seen_names, problems):
    start = f"/dashboard/?ws={workspace_name}"
    queue, visited, per_view = deque([start]), set(), Counter()
    while queue:
        url = queue.popleft()
        if url in visited:
            continue
        visited.add(url)
        response = client.get(url)
        assert response.status_code in (200, 302), (url, response.status_code)
        if response.status_code == 302:
            location = response["Location"]
            if _review_name(urlsplit(location).path):
                ws = parse_qs(urlsplit(location).query).get("ws")
                if ws != [workspace_name]:
                    problems.append(f"{url}: redirect to {location} without ws={workspace_name}")
            continue
        if not response.get("Content-Type", "").startswith("text/html"):
            continue
        links = Links()
        links.feed(response.content.decode())
        for action, has_ws in links.get_forms:
            path = urlsplit(urljoin(url, action)).path
            if _review_name(path) and not has_ws:
                problems.append(f"{url}: GET form to {action or '(this page)'} has no ws field")
        for tag, attribute, value in links.urls:
            absolute = urljoin(url, value)
            parts = urlsplit(absolute)
            if parts.netloc or not value.strip() or value.startswith("#"):
                continue
            name = _review_name(parts.path)
            if name is None:
                continue
            seen_names.add(name)
            if parse_qs(parts.query).get("ws") != [workspace_name]:
                problems.append(f"{url}: <{tag} {attribute}={value!r}> lacks ws={workspace_name}")
                continue
            if attribute in {"href", "hx-get"} and per_view[name] < PER_VIEW:
                target = parts.path + "?" + parts.query
                if target not in visited:
                    per_view[name] += 1
                    queue.append(target)
    return visited


def test_every_link_on_every_page_of_a_demo_and_a_fresh_workspace_names_it(client):
    call_command("cairn_demo", stdout=open("/dev/null", "w"))
    fresh = workspace_get_or_create(name="fresh-start", display_name="Fresh start")
    user, _ = user_create(workspace=fresh, username="ada", role=Role.ADMIN, password="pw-1")
    Membership.objects.create(
        user=user, workspace=workspace_get_or_create(name="demo"), role=Role.ADMIN
    )
    client.force_login(user)
    seen, problems = set(), []
    visited = set()
    for name in ("demo", "fresh-start"):
        visited |= _crawl(client, name, seen, problems)
    assert not problems, "\n".join(problems[:40])
    names = {
        pattern.name
        for pattern in get_resolver().namespace_dict["reviews"][1].url_patterns
        if pattern.name
    }
    unreached = names - seen - set(UNLINKED)
    assert not unreached, f"no page links to: {sorted(unreached)}"
    assert len(visited) > 60


def test_an_item_of_another_of_my_workspaces_offers_to_open_it_there(client):
    call_command("cairn_demo", stdout=open("/dev/null", "w"))
    fresh = workspace_get_or_create(name="fresh-start")
    demo = workspace_get_or_create(name="demo")
    user, _ = user_create(workspace=fresh, username="ada", role=Role.REVIEWER, password="pw-1")
    Membership.objects.create(user=user, workspace=demo, role=Role.VIEWER)
    from memory.models import Lesson

    lesson = Lesson.objects.filter(workspace=demo).first()
    client.force_login(user)
    client.get("/dashboard/?ws=fresh-start")
    response = client.get(f"/lessons/{lesson.pk}/")
    assert response.status_code == 404
    html = response.content.decode()
    assert "it is in your workspace <b>demo</b>" in html
    assert f'href="/lessons/{lesson.pk}/?ws=demo"' in html
    # Asking did not move the session: the next page is still the fresh workspace's.
    assert "fresh-start" in client.get("/dashboard/").content.decode()
    # Following the offer opens it there.
    assert client.get(f"/lessons/{lesson.pk}/?ws=demo").status_code == 200
    # A lesson in no workspace of theirs: the plain 404, naming nothing.
    stranger = workspace_get_or_create(name="secret")
    other_user, _ = user_create(workspace=stranger, username="bo", role=Role.ADMIN)
    client.force_login(other_user)
    response = client.get(f"/lessons/{lesson.pk}/")
    assert response.status_code == 404 and "open-elsewhere" not in response.content.decode()
