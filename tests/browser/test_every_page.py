"""Every review page at desktop and phone width: no horizontal overflow, axe-core
(vendored, static/vendor/axe-4.10.3.min.js) finds no moderate, serious or critical
violation, and every internal link names its workspace (?ws=)."""

from pathlib import Path

import pytest

from memory.core.actors import Actor
from memory.knowledge.conversations import turn_store
from memory.skills.consent import delta_approve, delta_reject
from tests.browser.conftest import at
from tests.factories.knowledge import KnowledgeFactory
from tests.factories.review import OutcomeFactory
from tests.factories.skills import (
    INJECTED,
    OBSERVED_CONTENT,
    learning_agent,
    propose,
    register_v2,
)
from tests.factories.skills import (
    reviewer as make_reviewer,
)

pytestmark = pytest.mark.django_db(transaction=True)

AXE = Path(__file__).resolve().parents[2] / "static" / "vendor" / "axe-4.10.3.min.js"
PAGES = [
    "/dashboard/",
    "/deltas/staged/",
    "/deltas/quarantine/",
    "/deltas/orphans/",
    "/deltas/staged/decided/",
    "/deltas/quarantine/decided/",
    "/deltas/orphans/decided/",
    "/deltas/{delta}/",
    "/conversations/?session=sess_91f3&cite=12",
    "/skills/",
    "/skills/triage-inbox/",
    "/facts/",
    "/lessons/",
    "/outcomes/",
    "/outcomes/{outcome}/",
    "/knowledge/",
    "/knowledge/?q=escalate+the+CFO+thread",
    "/knowledge/?q=escalate+the+CFO+thread&all=1",
    "/contradictions/",
    "/jobs/",
    "/audit/",
    "/agents/",
    "/workspace/settings/",
    "/exports/",
    "/erasures/",
    "/webhooks/",
    "/webhooks/{webhook}/",
    "/members/",
    "/lessons/{lesson}/",
    "/search/?q=escalate",
]
# Paths that are not review pages (they take no workspace).
NOT_REVIEW = ("/static/", "/api/", "/docs", "/healthz", "/login", "/logout", "/favicon")


def _fill(workspace):
    agent = learning_agent(workspace, name="gaia/chat-with-a-rather-long-agent-name")
    turn_store(
        workspace=workspace,
        agent=agent,
        session_id="sess_91f3",
        role="user",
        content="Escalate anything from the CFO after 48 hours, not 72. " * 5,
        turn_index=12,
        channel="harness",
    )
    person = Actor.for_user(make_reviewer(workspace, username="ada"))
    orphan = propose(agent, "Mention the age of a thread older than a week when escalating it.")
    delta_approve(delta=orphan, actor=person, reason="ok")
    decided = propose(agent, "Keep replies short.", section="drafting-replies")
    delta_reject(delta=decided, actor=person, reason="too broad for every reply")
    register_v2(workspace)
    staged = propose(
        agent,
        "Escalate anything from the CFO after 48 hours, not 72, and mention the thread id "
        "ThisIsAVeryLongUnbrokenIdentifierThatShouldWrapOnAPhoneScreenWithoutOverflowing.",
        rationale="The user corrected the escalation window in turn 12 of sess_91f3.",
    )
    propose(agent, INJECTED, section="drafting-replies", provenance=OBSERVED_CONTENT)
    KnowledgeFactory(
        workspace=workspace,
        content="Escalate a CFO thread after 48 hours; the thread id looks like "
        "ThisIsAVeryLongUnbrokenIdentifierThatShouldWrapOnAPhoneScreenWithoutOverflowing.",
    )
    KnowledgeFactory(workspace=workspace, content="Sarah prefers tea over coffee.")
    outcome = OutcomeFactory(
        workspace=workspace,
        agent=agent,
        goal_digest="c" * 64,
        goal_text="Answer the CFO's thread about ThisIsAVeryLongUnbrokenInvoiceNumber"
        "WithoutSpacesAnywhere before the 48-hour window closes.",
    )
    from tests.factories.lessons import LessonFactory

    lesson = LessonFactory(workspace=workspace, source="model", channel="harness")
    return {
        "delta": staged.pk,
        "outcome": outcome.pk,
        "webhook": _webhook(workspace).pk,
        "lesson": lesson.pk,
    }


def _webhook(workspace):
    """A webhook with a long URL and a log of failed and delivered attempts (written
    directly: nothing is sent, so no worker is needed)."""
    from django.utils import timezone

    from memory.models import Webhook, WebhookAttempt, WebhookDelivery

    webhook = Webhook.objects.create(
        workspace=workspace,
        url="https://hooks.example.com/services/a-very-long-path-segment-that-must-wrap/"
        + "x" * 120,
        events=["delta.staged", "delta.quarantined", "delta.decided"],
    )
    for state, codes in (("failed", [500, None, 503]), ("delivered", [None, 200])):
        delivery = WebhookDelivery.objects.create(
            webhook=webhook, event="delta.staged", body="{}", state=state, attempts=len(codes)
        )
        for number, code in enumerate(codes, start=1):
            WebhookAttempt.objects.create(
                delivery=delivery,
                number=number,
                started_at=timezone.now(),
                status_code=code,
                duration_ms=1000,
                error=""
                if code == 200
                else f"HTTP {code} from the receiver."
                if code
                else "Could not connect: [Errno 111] Connection refused by the receiving host",
            )
    return webhook


@pytest.mark.parametrize("width", [1280, 360])
def test_every_page_fits_the_screen_and_passes_axe(browser, live_server, workspace, width):
    from memory.identity.services import user_create

    ids = _fill(workspace)
    user_create(workspace=workspace, username="admin-1", role="admin", password="pw-browser-1")
    # axe is injected as a script of the test's own: the page's CSP (script-src 'self',
    # checked in test_csp.py) would rightly refuse it.
    context = browser.new_context(viewport={"width": width, "height": 900}, bypass_csp=True)
    page = context.new_page()
    page.set_default_timeout(15000)
    page.goto(f"{live_server.url}/login/")
    page.fill("#id_username", "admin-1")
    page.fill("#id_password", "pw-browser-1")
    page.click("button[type=submit]")
    page.wait_for_url(at(live_server.url, "/dashboard/"))
    problems = []
    for path in PAGES:
        url = live_server.url + path.format(**ids)
        response = page.goto(url)
        assert response.status == 200, path
        overflow = page.evaluate(
            "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        if overflow > 0:
            wide = page.evaluate(
                """() => Array.from(document.querySelectorAll('body *'))
                     .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
                     .filter(e => !e.closest('.table-wrap, .diff-body, pre'))
                     .slice(0, 3).map(e => e.tagName + '.' + e.className)"""
            )
            problems.append(f"{path}: {overflow}px wider than the screen ({wide})")
        page.add_script_tag(path=str(AXE))
        violations = page.evaluate(
            """async () => {
                 const r = await axe.run(document, {resultTypes: ['violations']});
                 return r.violations.filter(v => ['moderate', 'serious', 'critical'].includes(v.impact))
                   .map(v => v.id + ': ' + v.nodes.slice(0, 2).map(n => n.target.join(' ')).join(', '));
               }"""
        )
        problems += [f"{path}: {v}" for v in violations]
        bare = page.evaluate(
            """(notReview) => Array.from(document.querySelectorAll(
                 'a[href], form[action], [hx-get], [hx-post]'))
               .map(e => e.getAttribute('href') || e.getAttribute('action')
                         || e.getAttribute('hx-get') || e.getAttribute('hx-post'))
               .filter(u => u.startsWith('/') && !notReview.some(p => u.startsWith(p)))
               .filter(u => !new URL(u, location.href).searchParams.has('ws'))""",
            list(NOT_REVIEW),
        )
        problems += [f"{path}: link without ws: {u}" for u in bare[:5]]
    # Confirm forms open inside the screen: the required checkbox can be reached.
    page.goto(f"{live_server.url}/deltas/quarantine/")
    page.locator("details[data-key-action=approve] summary").first.click()
    form = page.locator("details[data-key-action=approve][open] .confirm-form").first
    box = form.bounding_box()
    if box["x"] < 0 or box["x"] + box["width"] > width + 1:
        problems.append(f"quarantine confirm form at x={box['x']}, width {box['width']}")
    acknowledge = form.locator("input[name=acknowledge]")
    acknowledge.check()
    assert acknowledge.is_checked()
    context.close()
    assert not problems, "\n".join(problems)
