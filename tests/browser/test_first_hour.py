"""A new admin's first hour, in real Chromium against a live server and a real worker:
from the first start's credentials to a confirmed lesson, by following the dashboard
(Connect your agent, the checklist), the Agents page's install line and the docs'
own shell example (docs/connect.md, run as the snippet tests run it)."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

from docsgen.snippets import shell_snippets

pytestmark = pytest.mark.django_db(transaction=True)


def _loop_snippet():
    found = [
        s
        for s in shell_snippets()
        if s.marker == "runnable" and "cairn-turn context" in s.code and s.path.name == "connect.md"
    ]
    assert len(found) == 1, "docs/connect.md has one runnable shell loop with cairn-turn context"
    return found[0]


def _steps(page):
    return {
        item.get_attribute("data-step"): item.get_attribute("class")
        for item in page.locator("[data-testid=checklist] li").all()
    }


def test_a_new_admin_reaches_a_confirmed_lesson_from_the_dashboard_and_the_docs(
    browser, live_server, celery_worker_process, settings
):
    settings.SITE_URL = live_server.url
    out = io.StringIO()
    call_command("cairn_setup", stdout=out)  # what `make run` does on a first start
    password = re.search(r"Password\s+(\S+)", out.getvalue())[1]

    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20000)
    page.goto(f"{live_server.url}/login/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/dashboard/"))

    # The dashboard leads with "Connect your agent", linking the docs, and a checklist.
    card = page.locator("[data-testid=first-hour]")
    assert card.is_visible()
    assert page.locator("h2").first.inner_text() == "Connect your agent"
    assert card.locator("[data-testid=connect-docs]").get_attribute("href").endswith("/connect/")
    assert set(_steps(page).values()) == {"todo"}

    # The card's Agents link; a harness token for the agent the first start made.
    card.get_by_role("link", name="Agents").click()
    page.wait_for_url(re.compile(r"/agents/"))
    agent_card = page.locator("section.agent", has=page.locator("code", has_text="my-agent"))
    agent_card.locator("select[name=scope]").select_option("harness")
    agent_card.get_by_role("button", name="Issue token").click()
    line = page.locator("[data-testid=install-line]").inner_text()
    assert f"cairn-hook install claude-code --url {live_server.url}" in line
    token = re.search(r"CAIRN_HARNESS_TOKEN=(\S+)", line)[1]

    # The docs' own two-turn loop, with that token, as a shell user runs it.
    snippet = _loop_snippet()
    env = {
        **os.environ,
        "HARNESS_TOKEN": token,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    done = subprocess.run(
        [
            "bash",
            "-c",
            "set -euo pipefail\n" + snippet.code.replace("http://localhost:8000", live_server.url),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, f"{snippet.where}:\n{done.stdout}\n{done.stderr}"

    # Back on the dashboard the checklist has ticked itself.
    page.get_by_role("link", name="Dashboard").first.click()
    page.wait_for_url(re.compile(r"/dashboard/"))
    steps = _steps(page)
    assert steps == {
        "remembered": "todo",  # the shell loop remembers nothing
        "outcome": "done",
        "lesson": "done",
        "confirmed": "done",
    }, steps

    # The lesson's page says where it came from and who confirmed it, in words.
    page.get_by_role("link", name="Lessons").first.click()
    # "Use `uv pip install` instead of `pip install` for requirements.txt." (code spans
    # or not, as the list shows them)
    lesson = re.compile(r"Use \W?uv pip.install\W? instead of \W?pip install")
    page.locator("a", has_text=lesson).first.click()
    page.wait_for_url(re.compile(r"/lessons/\d+/\?ws=default"))
    assert "sent by the harness" in page.locator("[data-testid=provenance]").inner_text()
    why = page.locator("[data-testid=ledger-why]").all_inner_texts()
    assert any("an outcome passed with this lesson in play" in w for w in why), why
    context.close()
