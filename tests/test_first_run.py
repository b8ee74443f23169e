"""What a newcomer's first `make run` prints fits an 80-column terminal."""

from __future__ import annotations

import io
import re
import subprocess
from pathlib import Path

import pytest
from django.core.management import call_command

BASE_DIR = Path(__file__).resolve().parent.parent
DEFAULT_SITE_URL = "http://localhost:8000"


@pytest.mark.django_db
def test_first_start_banner_fits_80_columns(settings):
    settings.SITE_URL = DEFAULT_SITE_URL
    out = io.StringIO()
    call_command("cairn_setup", stdout=out)
    banner = out.getvalue()
    assert "Agent token" in banner and "Harness token" in banner, banner
    too_wide = [line for line in banner.splitlines() if len(line) > 80]
    assert not too_wide, too_wide


@pytest.mark.parametrize("script", ["bin/cairn-run", "bin/cairn-serve"])
def test_start_scripts_echo_lines_fit_80_columns(script):
    text = (BASE_DIR / script).read_text()
    echoed = re.findall(r'^\s*echo "(.*)"$', text, re.M)
    assert echoed, f"{script} prints nothing?"
    lines = [e.replace("$SITE_URL", DEFAULT_SITE_URL) for e in echoed]
    too_wide = [line for line in lines if len(line) > 80]
    assert not too_wide, too_wide


def test_make_run_without_chromium_says_once_that_only_the_browser_tests_need_it(tmp_path):
    """bin/cairn-run on a machine without /usr/bin/chromium: one line, then it goes on.
    (The script is run with the browser path pointed at nothing and the final exec
    replaced, so nothing is started.)"""
    script = (BASE_DIR / "bin" / "cairn-run").read_text()
    check = "[ ! -x /usr/bin/chromium ]"
    assert check in script
    probe = script.replace(check, f"[ ! -x {tmp_path / 'no-chromium'} ]").replace(
        "exec .venv/bin/python -m cairn.embedded run -- bin/cairn-serve", 'echo "went on"'
    )
    assert 'echo "went on"' in probe, (
        "bin/cairn-run no longer ends with the exec this test replaces"
    )
    (tmp_path / "bin").mkdir()
    runner = tmp_path / "bin" / "cairn-run"
    runner.write_text(probe)
    done = subprocess.run(["bash", str(runner)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    said = [line for line in lines if "chromium" in line]
    assert len(said) == 1 and "browser tests" in said[0] and len(said[0]) <= 80, lines
    assert lines[-1] == "went on"
