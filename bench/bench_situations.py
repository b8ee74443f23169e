"""Per-turn recovery state on the agent's hot path: ``POST /api/v1/turns/{id}/results/``
against a bare DRF view, p50 and p99, side by side.

Everything goes in process through Django's test client and the full middleware
stack (URL routing, bearer-token auth, DRF parsing, JSON), so the only difference
between the rows is what the endpoint itself does:

- ``bare DRF view``: an ``APIView`` with the same token auth that parses the body
  and answers a constant ``{"action": "continue"}`` (the floor);
- ``result, no blocker``: a successful tool result (the common case): lock the
  turn's row, classify nothing, save;
- ``result, classified``: a failed result with 2 KB of stderr the classifier reads
  (``permission denied`` near the end);
- ``blocker turn``: a declared blocker, then failed calls until the turn escalates
  (events, the escalation text, a lesson stored), one turn per 4 posts;
- ``known blocker``: a declared blocker that matches a live lesson: escalates on
  the first post (the lesson look-up and ``lesson_applied``).

    .venv/bin/python bench/bench_situations.py [--quick]
"""

from __future__ import annotations

import json
import os
import sys
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import RESULTS, drop_database, machine, setup_django  # noqa: E402

STDERR = ("warning: something harmless happened on this line\n" * 40)[:1900] + (
    "\nls: cannot open directory '/srv/data': Permission denied\n"
)
GH = {
    "kind": "auth",
    "subject": "gh",
    "unblock": "gh auth login",
    "interactive": True,
    "probe": {"tool": "check_cli_setup", "args": {"binary": "gh"}},
    "detail": "gh is installed but not signed in.",
    "env": "/usr/bin/gh 2.62.0",
}


def _bench_urls():
    """A URLconf with the real API plus one bare DRF view, as an importable module."""
    from django.urls import include, path
    from rest_framework.response import Response
    from rest_framework.views import APIView

    class BareApi(APIView):
        def post(self, request, turn_id: str):
            _ = request.data  # parse the body, as the real view does
            return Response({"action": "continue", "turn_id": turn_id})

    module = types.ModuleType("bench_situation_urls")
    module.urlpatterns = [
        path("bench/bare/<path:turn_id>/", BareApi.as_view()),
        path("", include("cairn.urls")),
    ]
    sys.modules[module.__name__] = module
    return module.__name__


def _stats(samples: list[float]) -> dict:
    ms = sorted(s * 1000 for s in samples)
    n = len(ms)
    return {
        "n": n,
        "p50_ms": round(ms[n // 2], 3),
        "p99_ms": round(ms[min(n - 1, int(n * 0.99))], 3),
        "mean_ms": round(sum(ms) / n, 3),
    }


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    n = 200 if quick else 1000
    setup_django()
    from django.test import Client, override_settings

    from memory.identity.services import agent_get_or_create, token_issue, workspace_get_or_create
    from memory.models import SituationLesson, TurnRecovery

    workspace = workspace_get_or_create(name="bench-situations")
    agent = agent_get_or_create(workspace=workspace, name="bench-harness")
    token = token_issue(agent=agent, scope="harness").raw
    host = machine()  # versions, commit and the load when the run starts
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")

    def post(path: str, body: dict) -> float:
        started = time.perf_counter()
        response = client.post(path, json.dumps(body), content_type="application/json")
        elapsed = time.perf_counter() - started
        if response.status_code != 200:
            raise SystemExit(f"{path} answered {response.status_code}: {response.content[:300]}")
        return elapsed

    def results(turn: str) -> str:
        return f"/api/v1/turns/{turn}/results/"

    runs: dict[str, list[float]] = {}
    # The per-token request budget (agents/budget.py) is lifted: this measures the
    # recovery path itself, thousands of posts a minute from one token.
    with override_settings(
        ROOT_URLCONF=_bench_urls(), DEBUG=False, CAIRN_SCAN_RATE_PER_MIN=10**9,
        CAIRN_SCAN_BYTES_PER_MIN=10**12,
    ):  # fmt: skip
        # Warm up every path (imports, the classifier's regexes, connections).
        for i in range(30):
            post(f"/bench/bare/warm-{i}/", {"tool": "ls", "ok": True})
            post(results(f"warm-{i}"), {"tool": "ls", "ok": True, "machine": "m-w"})
        order = ["bare DRF view", "result, no blocker", "result, classified", "blocker turn",
                 "known blocker"]  # fmt: skip
        for name in order:
            runs[name] = []
        # Interleave the paths so drift in machine load hits all of them alike.
        for i in range(n):
            turn = f"t-{i // 20}"  # 20 results per turn, as in a real turn
            runs["bare DRF view"].append(
                post(f"/bench/bare/{turn}/", {"tool": "read_file", "ok": True, "machine": "m-1"})
            )
            runs["result, no blocker"].append(
                post(results(f"ok-{turn}"), {"tool": "read_file", "ok": True, "machine": "m-1"})
            )
            runs["result, classified"].append(
                post(
                    results(f"cls-{turn}"),
                    {"tool": "list_dir", "exit_code": 1, "stderr": STDERR, "machine": "m-1"},
                )
            )
            # A fresh machine per blocker turn, so each one detects, counts and stores.
            blocked = f"blk-{i // 4}"
            body = (
                {"tool": "check_cli_setup", "ok": False, "situation": GH}
                if i % 4 == 0
                else {"tool": f"workaround{i % 4}", "ok": False}
            )
            runs["blocker turn"].append(
                post(results(blocked), {**body, "machine": f"m-blk-{i // 4}"})
            )
        # The lesson for m-blk-0 exists now: every new turn on it escalates at once.
        for i in range(n):
            runs["known blocker"].append(
                post(
                    results(f"known-{i}"),
                    {
                        "tool": "check_cli_setup",
                        "ok": False,
                        "situation": GH,
                        "probe": True,
                        "machine": "m-blk-0",
                    },
                )  # fmt: skip
            )
    escalated = TurnRecovery.objects.filter(workspace=workspace, escalated=True).count()
    lessons = SituationLesson.objects.filter(workspace=workspace).count()

    table = {name: _stats(samples) for name, samples in runs.items()}
    bare = table["bare DRF view"]
    for stats in table.values():
        stats["p50_x_bare"] = round(stats["p50_ms"] / bare["p50_ms"], 2)
        stats["p99_x_bare"] = round(stats["p99_ms"] / bare["p99_ms"], 2)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "situations.json").write_text(
        json.dumps(
            {
                "n": n,
                "machine": host,
                "load_at_end": os.getloadavg(),
                "escalated_turns": escalated,
                "lessons": lessons,
                "results": table,
            },
            indent=2,
        )
    )
    lines = [
        "| path | n | p50 | p99 | mean | p50 × bare | p99 × bare |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, s in table.items():
        lines.append(
            f"| {name} | {s['n']} | {s['p50_ms']} ms | {s['p99_ms']} ms | {s['mean_ms']} ms | "
            f"{s['p50_x_bare']} | {s['p99_x_bare']} |"
        )
    text = "\n".join(lines)
    (RESULTS / "situations.md").write_text(text + "\n")
    print(text)
    print(f"escalated turns: {escalated}, lessons stored: {lessons}")
    drop_database()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
