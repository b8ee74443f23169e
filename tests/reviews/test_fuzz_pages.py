"""Every review page, every query parameter it reads, hostile values: zero 5xx.

The parameter names are read from the views' source (``request.GET.get("x")`` and
the ``FILTERS`` tables), so a parameter added later is fuzzed without editing this.
"""

import re
from pathlib import Path

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from tests.factories.identity import WorkspaceFactory

REVIEWS = Path(__file__).resolve().parents[2] / "reviews"
HOSTILE = [
    "\x00",
    "a\x00b",
    "%00",
    "-1",
    "0",
    "99999999999999999999999",
    "1e309",
    "nan",
    "2026-13-45",
    "<script>alert(1)</script>",
    "' OR 1=1 --",
    "ü" * 600,
    "",
    "[]",
    "\ufffd\uffff",
]


def _param_names() -> list[str]:
    names = set()
    for source in REVIEWS.rglob("*.py"):
        text = source.read_text()
        names.update(re.findall(r'GET\.get(?:list)?\(\s*"([a-z_]+)"', text))
        for table in re.findall(r"FILTERS = \{([^}]*)\}", text):
            names.update(re.findall(r'"([a-z_]+)":', table))
    return sorted(names)


def _page_paths() -> list[str]:
    paths = []

    def walk(patterns, prefix=""):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, prefix + str(pattern.pattern))
            elif isinstance(pattern, URLPattern):
                route = prefix + str(pattern.pattern)
                if route.startswith(("api/", "admin/", "^")) or "healthz" in route:
                    continue
                route = re.sub(r"<int:\w+>", "1", route)
                route = re.sub(r"<(?:str|slug):\w+>", "x", route)
                paths.append("/" + route)

    walk(get_resolver().url_patterns)
    return sorted(set(paths))


PARAMS = _param_names()
PAGES = _page_paths()


def test_the_fuzz_finds_the_pages_and_their_parameters():
    assert {"q", "after", "size", "status", "agent"} <= set(PARAMS)
    assert {"/knowledge/", "/lessons/", "/audit/", "/jobs/"} <= set(PAGES)


@pytest.mark.django_db
@pytest.mark.parametrize("path", PAGES)
def test_no_page_answers_5xx_to_hostile_query_parameters(member_client, path):
    workspace = WorkspaceFactory()
    client = member_client(workspace=workspace, role="admin")
    client.raise_request_exception = False
    failures = []
    for value in HOSTILE:
        response = client.get(path, {name: value for name in PARAMS})
        if response.status_code >= 500:
            failures.append((value, "all", response.status_code))
    for name in PARAMS:
        for value in ("\x00", "99999999999999999999999", "<x>'\""):
            response = client.get(path, {name: value})
            if response.status_code >= 500:
                failures.append((value[:20], name, response.status_code))
    assert not failures, failures
