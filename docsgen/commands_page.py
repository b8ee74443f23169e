"""The management commands page: each of Cairn's own commands with its ``--help``."""

from __future__ import annotations

import json
import subprocess
import sys

from docsgen.openapi_page import ROOT, offline_env

#: Django apps whose commands are Cairn's own (Django's and third parties' are not listed).
APPS = ("memory", "agents", "reviews", "cairn")

_HELP = f"""
import json, django
django.setup()
from django.core.management import get_commands, load_command_class
out = {{}}
for name, app in sorted(get_commands().items()):
    if app in {APPS!r}:
        out[name] = load_command_class(app, name).create_parser("manage.py", name).format_help()
print(json.dumps(out))
"""


def helps() -> dict[str, str]:
    done = subprocess.run(
        [sys.executable, "-c", _HELP],
        cwd=ROOT,
        env=offline_env(),
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return json.loads(done.stdout)


def markdown(texts: dict[str, str]) -> str:
    lines = [
        "# Management commands",
        "",
        "Cairn's own `manage.py` commands, each with its `--help` as the installed",
        "version prints it. Run them from the checkout with the virtualenv's Python:",
        "`.venv/bin/python manage.py COMMAND --help`.",
        "",
    ]
    for name, text in texts.items():
        lines += [f"## {name}", "", "<!-- illustrative -->", "```text", text.rstrip(), "```", ""]
    return "\n".join(lines)
