"""The Content-Security-Policy (script-src 'self') holds on every page, with no
violation reported by Chromium while pages load and htmx works."""

import pytest

from tests.factories.privacy import bundle, ready_agent, workspace_ready

pytestmark = pytest.mark.django_db(transaction=True)

PAGES = [
    "/dashboard/",
    "/knowledge/",
    "/lessons/",
    "/outcomes/",
    "/skills/",
    "/deltas/staged/",
    "/deltas/quarantine/",
    "/deltas/orphans/",
    "/contradictions/",
    "/agents/",
    "/jobs/",
    "/audit/",
    "/erasures/",
    "/exports/",
    "/admin/",
]


def test_no_page_violates_the_content_security_policy(login, live_server, workspace):
    workspace_ready(workspace)
    bundle(agent=ready_agent(workspace, "csp-agent"), name="csp")
    page = login(workspace=workspace, role="admin")
    violations = []
    page.on(
        "console",
        lambda msg: violations.append(msg.text) if "Content Security Policy" in msg.text else None,
    )
    page.add_init_script(
        "document.addEventListener('securitypolicyviolation', e => "
        "console.error('Content Security Policy violation: ' + e.violatedDirective + ' ' + e.blockedURI));"
    )
    for path in PAGES:
        response = page.goto(f"{live_server.url}{path}")
        assert response.status < 500, path
        assert "script-src 'self'" in response.headers.get("content-security-policy", ""), path
        page.wait_for_load_state("networkidle")
        if path == "/dashboard/":
            assert page.evaluate("typeof htmx") == "object"  # our scripts still run
    assert violations == []
