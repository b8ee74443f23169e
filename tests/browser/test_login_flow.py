import pytest

from tests.browser.conftest import at

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_person_logs_in_sees_the_dashboard_and_logs_out(login, live_server, workspace):
    page = login(workspace=workspace, role="reviewer")
    assert page.locator("h1").inner_text() == workspace.display_name
    assert "curl -s -H" in page.locator("pre").first.inner_text()
    # htmx loaded from our own static files, and the CSRF header is on <body>.
    assert page.evaluate("typeof htmx") == "object"
    assert "X-CSRFToken" in page.locator("body").get_attribute("hx-headers")
    page.click("text=Log out")
    page.wait_for_url(at(live_server.url, "/login/"))


def test_a_wrong_password_says_so(page, live_server, workspace):
    page.goto(f"{live_server.url}/login/")
    page.fill("#id_username", "nobody")
    page.fill("#id_password", "wrong")
    page.click("button[type=submit]")
    assert "didn't match" in page.locator(".error").inner_text()
