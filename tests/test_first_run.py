"""What a newcomer's first `make run` prints fits an 80-column terminal."""

from __future__ import annotations

import io
import re
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
