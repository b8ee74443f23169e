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
    # A job's toast is polled by the toast a started job leaves (reviews/toasts.py).
    "jobs_toast": "polled by the toast of a job just started",
    "webhooks_delivery_toast": "polled by the toast of a test delivery just sent",
    # In the answer to a preview (a POST), which a crawl of GET pages never sees.
    "erasures_start": "the erasure preview's form (tests/reviews/test_erasures.py)",
    # On a skill's page only for a delta a person approved (the demo approves none).
    "skills_revert": "a skill page with an approved delta (tests/reviews/test_skills.py)",
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


def _what_the_demo_lacks(workspace, user):
    """Rows whose pages and actions the demo never reaches: a webhook with a failed
    delivery, a finished export, an erasure certificate, a retired, a pinned and
    sealed lesson, and archived knowledge."""
    from memory.core.actors import Actor
    from memory.lessons.lifecycle import lesson_pin, lesson_retire, lesson_seal
    from memory.models import ErasureReceipt, JobRun, Webhook, WebhookDelivery
    from memory.privacy.exports import export_job
    from tests.factories.lessons import KnowledgeFactory, LessonFactory

    person = Actor.for_user(user)
    webhook = Webhook.objects.create(
        workspace=workspace, url="https://hooks.example.com/x", events=["delta.staged"]
    )
    WebhookDelivery.objects.create(
        webhook=webhook, event="delta.staged", body="{}", state="failed", attempts=1
    )
    run = JobRun.objects.create(
        kind="export",
        workspace=workspace,
        params={"selector": {"kind": "workspace", "value": workspace.name}, "format": "json"},
        requested_by=f"user:{user.username}",
        status=JobRun.Status.SUCCEEDED,
    )
    export_job(run=run)
    run.save()
    JobRun.objects.create(kind="export", workspace=workspace, status="running", params={})
    ErasureReceipt.objects.create(
        workspace=workspace,
        workspace_name=workspace.name,
        requested_by=f"user:{user.username}",
        selector={"kind": "context", "value": "x"},
        digest="ab" * 32,
    )
    lesson_retire(lesson=LessonFactory(workspace=workspace), actor=person, reason="wrong")
    flagged = lesson_pin(
        lesson=LessonFactory(workspace=workspace), pinned=True, actor=person, reason="key"
    )
    lesson_seal(lesson=flagged, sealed=True, actor=person, reason="by hand")
    return KnowledgeFactory(workspace=workspace)


def test_every_link_on_every_page_of_a_demo_and_a_fresh_workspace_names_it(
    client, settings, tmp_path
):
    settings.MEDIA_ROOT = tmp_path  # the export's file stays out of var/
    call_command("cairn_demo", stdout=open("/dev/null", "w"))
    fresh = workspace_get_or_create(name="fresh-start", display_name="Fresh start")
    user, _ = user_create(workspace=fresh, username="ada", role=Role.ADMIN, password="pw-1")
    full = workspace_get_or_create(name="full-house")
    Membership.objects.create(user=user, workspace=full, role=Role.ADMIN)
    item = _what_the_demo_lacks(full, user)
    Membership.objects.create(
        user=user, workspace=workspace_get_or_create(name="demo"), role=Role.ADMIN
    )
    client.force_login(user)
    # Archived through the UI: the audit log's row links to it, and its page offers Restore.
    assert client.post(
        f"/knowledge/{item.pk}/archive/?ws=full-house", {"reason": "old"}
    ).status_code in (200, 302, 303)
    seen, problems = set(), []
    visited = set()
    for name in ("demo", "fresh-start", "full-house"):
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
