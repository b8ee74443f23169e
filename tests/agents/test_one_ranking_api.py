"""One ranking whatever the page size (issue 54): for every search and recall
operation of the API, the first k results of a page of k are the first k of any
larger page, on LoCoMo's real questions.

Two LoCoMo conversations (conv-26 and conv-30, 788 turns in 38 sessions) are stored
the way an agent stores them (one batch call per session, each turn at its
session's time), their observations as knowledge items; a fixed sample of their
questions is then asked of each ranking operation with a small and a large page.

The operations come from the OpenAPI schema: every GET with a ``q`` and a ``limit``,
every POST whose body has a ``query`` and a ``top_k``. A new one fails
``test_every_ranking_operation_has_a_case`` until it gets a case in ``CASES``.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from drf_spectacular.generators import SchemaGenerator

pytestmark = pytest.mark.django_db

CONVERSATIONS = ("conv-26", "conv-30")
# Every SAMPLE_EVERY-th question of categories 1–4 (233 in all: 24 asked, two pages
# each of six operations); bench/bench_recall.py --halves asks all of them.
SAMPLE_EVERY = 10


def locomo_path() -> Path:
    """LoCoMo-10 in the project's shared data: beside the checkout (CI lays shared/
    there), or the workplace's copy; CAIRN_LOCOMO names another place."""
    import os

    root = Path(__file__).resolve().parents[2]
    candidates = [
        os.environ.get("CAIRN_LOCOMO", ""),
        root.parent / "shared" / "bench" / "locomo10.json",
        "/work/shared/bench/locomo10.json",
    ]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    raise AssertionError(f"LoCoMo-10 not found in any of {candidates[1:]} (set CAIRN_LOCOMO)")


def _session_date(raw: str) -> datetime:
    return datetime.strptime(raw.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def _store_locomo(api) -> list[dict]:
    """Stores both conversations (turns and observations); their questions."""
    data = {s["sample_id"]: s for s in json.loads(locomo_path().read_text())}
    questions = []
    for sample_id in CONVERSATIONS:
        sample = data[sample_id]
        conv = sample["conversation"]
        context = f"locomo:{sample_id}"
        speakers = {conv["speaker_a"]: "user", conv["speaker_b"]: "assistant"}
        numbers = sorted(int(k[8:]) for k in conv if re.fullmatch(r"session_\d+", k))
        for number in numbers:
            start = _session_date(conv[f"session_{number}_date_time"])
            turns = [
                {
                    "role": speakers.get(turn["speaker"], "user"),
                    "content": f"{turn['speaker']}: {turn['text']}",
                    "turn_index": i,
                    "at": (start + timedelta(seconds=30 * i)).isoformat(),
                    "context": context,
                }
                for i, turn in enumerate(conv[f"session_{number}"])
            ]
            response = api.post(
                f"/api/v1/sessions/{sample_id}-s{number}/turns/", {"turns": turns}, format="json"
            )
            assert response.status_code == 201, response.content
            observations = sample["observation"].get(f"session_{number}_observation", {})
            items = [
                {"content": text, "context": context, "observed_at": start.isoformat()}
                for said in observations.values()
                for text, _dia in said
            ]
            for chunk in range(0, len(items), 100):
                response = api.post(
                    "/api/v1/knowledge/batch/", {"items": items[chunk : chunk + 100]}, format="json"
                )
                assert response.status_code in (200, 201), response.content
        questions += [
            {"q": qa["question"], "context": context} for qa in sample["qa"] if qa["category"] != 5
        ]
    return questions[::SAMPLE_EVERY]


def _search(api, q, *, limit, group="turn"):
    params = {"q": q["q"][:500], "context": q["context"], "limit": limit, "group": group}
    body = api.get("/api/v1/conversations/search/", params)
    assert body.status_code == 200, body.content
    body = body.json()
    if group == "session":
        return [(s["session_id"], round(s["score"], 9)) for s in body["sessions"]]
    return [(r["id"], round(r["rank"], 9)) for r in body["results"]]


def _recall(api, q, *, limit, sources):
    body = {"query": q["q"], "context": q["context"], "top_k": limit, "sources": sources}
    response = api.post("/api/v1/recall/", body, format="json")
    assert response.status_code == 200, response.content
    return [(r["kind"], r["id"], round(r["score"], 9)) for r in response.json()["results"]]


def _knowledge_list(api, q, *, limit):
    params = {"q": q["q"][:500], "context": q["context"], "limit": limit}
    response = api.get("/api/v1/knowledge/", params)
    assert response.status_code == 200, response.content
    return [r["id"] for r in response.json()["results"]]


# (operation id, variant) -> (ask with a page size, small page, large page)
CASES = {
    ("knowledge_list", "q"): (lambda api, q, n: _knowledge_list(api, q, limit=n), 5, 200),
    ("conversations_search", "turns"): (lambda api, q, n: _search(api, q, limit=n), 5, 200),
    ("conversations_search", "group=session"): (
        lambda api, q, n: _search(api, q, limit=n, group="session"),
        5,
        50,
    ),
    ("recall", "sources=turns"): (
        lambda api, q, n: _recall(api, q, limit=n, sources="turns"),
        5,
        50,
    ),
    ("recall", "sources=knowledge"): (
        lambda api, q, n: _recall(api, q, limit=n, sources="knowledge"),
        5,
        50,
    ),
    ("recall", "sources=both"): (lambda api, q, n: _recall(api, q, limit=n, sources="both"), 5, 50),
}


def _resolve(schema: dict, node: dict) -> dict:
    while "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[-1]]
    return node


def schema_ranking_operations() -> set[str]:
    """Operation ids that rank by a query with a page size: a GET with ``q`` and
    ``limit``, a POST whose JSON body has ``query`` and ``top_k``."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    found = set()
    for operations in schema["paths"].values():
        for method, op in operations.items():
            if method == "get":
                names = {p["name"] for p in op.get("parameters", [])}
                if {"q", "limit"} <= names:
                    found.add(op["operationId"])
            elif method == "post":
                body = op.get("requestBody", {}).get("content", {}).get("application/json")
                if body:
                    props = _resolve(schema, body["schema"]).get("properties", {})
                    if {"query", "top_k"} <= set(props):
                        found.add(op["operationId"])
    return found


def test_every_ranking_operation_has_a_case():
    found = schema_ranking_operations()
    assert {"conversations_search", "recall"} <= found  # the generator sees them
    assert found == {operation for operation, _variant in CASES}


@pytest.mark.timeout(900)  # 788 turns to embed, on a 2-core machine other work shares
def test_the_first_results_do_not_depend_on_the_page_size(api):
    questions = _store_locomo(api)
    assert len(questions) >= 20
    differing: dict[tuple, list[str]] = {}
    for case, (ask, small, large) in CASES.items():
        for q in questions:
            few, many = ask(api, q, small), ask(api, q, large)
            assert len(few) == min(small, len(many))
            if few != many[:small]:
                differing.setdefault(case, []).append(q["q"])
    assert differing == {}
