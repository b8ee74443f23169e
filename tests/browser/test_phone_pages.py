"""Every page at 1280 and 360 px, in the demo and in a fresh workspace: nothing wider than
the screen (wide tables and code scroll inside their own box), exactly one h1, and axe-core
(vendored, static/vendor/axe-4.10.3.min.js) finds no critical, serious or moderate issue."""

from pathlib import Path

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.django_db(transaction=True)

AXE = Path(__file__).resolve().parents[2] / "static" / "vendor" / "axe-4.10.3.min.js"
LISTS = [
    "/dashboard/",
    "/deltas/staged/",
    "/deltas/quarantine/",
    "/deltas/orphans/",
    "/deltas/staged/decided/",
    "/deltas/quarantine/decided/",
    "/deltas/orphans/decided/",
    "/contradictions/",
    "/lessons/",
    "/outcomes/",
    "/knowledge/",
    "/situations/",
    "/skills/",
    "/facts/",
    "/jobs/",
    "/audit/",
    "/agents/",
    "/workspace/settings/",
    "/exports/",
    "/erasures/",
    "/webhooks/",
    "/members/",
    "/search/?q=pytest",
]


def _demo_pages(workspace) -> list[str]:
    from memory.models import JobRun, Knowledge, Lesson, Outcome, SkillDelta

    pages = []
    for model, path in (
        (SkillDelta, "/deltas/{}/"),
        (Outcome, "/outcomes/{}/"),
        (Lesson, "/lessons/{}/"),
        (Knowledge, "/knowledge/{}/"),
        (JobRun, "/jobs/{}/"),
    ):
        for pk in model.objects.filter(workspace=workspace).values_list("pk", flat=True)[:2]:
            pages.append(path.format(pk))
    # The lesson with the longest confidence history, and every decided delta.
    pages += [
        f"/deltas/{pk}/"
        for pk in SkillDelta.objects.filter(workspace=workspace)
        .exclude(status__in=["staged", "quarantined", "orphaned"])
        .values_list("pk", flat=True)[:3]
    ]
    pages.append("/skills/triage-inbox/")
    return pages


CHECK = """async () => {
  const doc = document.documentElement;
  const wide = Array.from(document.querySelectorAll('body *'))
    .filter(e => e.getBoundingClientRect().right > window.innerWidth)
    .filter(e => !e.closest('.table-wrap, .diff-body, pre, [hidden], dialog:not([open])'))
    .slice(0, 3).map(e => e.tagName + '.' + e.className);
  // A table wider than its box scrolls inside it: the box must show that it does (a
  // shadow at the clipped edge), or the cut-off columns look like the whole table.
  const uncued = Array.from(document.querySelectorAll('.table-wrap'))
    .filter(e => e.scrollWidth > e.clientWidth + 1 && e.offsetParent !== null)
    .filter(e => !getComputedStyle(e).backgroundImage.includes('gradient'))
    .slice(0, 3).map(e => (e.querySelector('table') || e).className);
  const r = await axe.run(document, {resultTypes: ['violations']});
  return {
    overflow: doc.scrollWidth - doc.clientWidth,
    wide: wide,
    uncued: uncued,
    h1: document.querySelectorAll('h1').length,
    axe: r.violations.filter(v => ['critical', 'serious', 'moderate'].includes(v.impact))
      .map(v => v.impact + ' ' + v.id + ': ' + v.nodes.slice(0, 2).map(n => n.target.join(' ')).join(', ')),
  };
}"""


@pytest.mark.parametrize("width", [1280, 360])
@pytest.mark.parametrize("data", ["fresh", "demo"])
def test_every_page_fits_has_one_h1_and_passes_axe(browser, live_server, data, width):
    from memory.identity.services import user_create, workspace_get_or_create
    from memory.models import Workspace

    fresh = workspace_get_or_create(name="default")
    user_create(workspace=fresh, username="admin-1", role="admin", password="pw-browser-1")
    pages = list(LISTS)
    if data == "demo":
        call_command("cairn_demo", stdout=open("/dev/null", "w"))
        demo = Workspace.objects.get(name="demo")
        pages = [f"{p}{'&' if '?' in p else '?'}ws=demo" for p in LISTS + _demo_pages(demo)]
    context = browser.new_context(viewport={"width": width, "height": 800}, bypass_csp=True)
    page = context.new_page()
    page.set_default_timeout(15000)
    page.goto(f"{live_server.url}/login/")
    page.fill("#id_username", "admin-1")
    page.fill("#id_password", "pw-browser-1")
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/login/" not in url)  # wherever login lands
    problems = []
    for path in pages:
        response = page.goto(live_server.url + path)
        assert response.status == 200, path
        page.add_script_tag(path=str(AXE))
        found = page.evaluate(CHECK)
        if found["overflow"] > 0:
            problems.append(f"{path}: {found['overflow']}px wider than the screen {found['wide']}")
        if found["uncued"]:
            problems.append(f"{path}: tables clipped with no scroll cue {found['uncued']}")
        if found["h1"] != 1:
            problems.append(f"{path}: {found['h1']} h1 elements")
        problems += [f"{path}: {v}" for v in found["axe"]]
    context.close()
    assert not problems, "\n".join(problems)


def test_the_lessons_filter_leaves_a_phone_screen_for_the_lessons(browser, live_server):
    from memory.identity.services import user_create, workspace_get_or_create

    workspace = workspace_get_or_create(name="default")
    user_create(workspace=workspace, username="admin-1", role="admin", password="pw-browser-1")
    context = browser.new_context(viewport={"width": 360, "height": 800})
    page = context.new_page()
    page.goto(f"{live_server.url}/login/")
    page.fill("#id_username", "admin-1")
    page.fill("#id_password", "pw-browser-1")
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/login/" not in url)
    page.goto(f"{live_server.url}/lessons/")
    height = page.locator("form.lesson-filters").bounding_box()["height"]
    context.close()
    # Eight fields one under the other took most of the screen: two a row where they fit.
    assert height < 800 * 0.5, f"the filter is {height:.0f}px tall"
