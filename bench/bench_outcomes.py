"""Outcome ingestion: throughput on this machine, and zero lost or duplicated under retries.

The production gunicorn (the Procfile's ``web:`` line: 2 workers × 4 threads,
``bench/server_settings.py`` adding one bare view) serves the bench database;
client threads on the same machine post outcomes over HTTP (``http.client``,
one keep-alive connection per thread: a light client, since it shares the two
cores with the server). Every outcome carries a lesson in play on an operation
it ran, so each one also touches that lesson: a retry that applied twice would
show up as an extra ledger row. Side by side in one run:

- ``bare DRF view``: the same body to ``POST /api/v1/_bench/bare/`` (same
  middleware, token auth and JSON parsing, a constant answer) with N clients:
  the floor of this server on this machine right now;
- ``single``: one client, one outcome at a time (latency floor);
- ``concurrent``: N client threads (default 8), agent token (self_report);
- ``harness``: N client threads, harness token (verified: each outcome confirms
  the lesson, one evidence link each): every transaction holds that one lesson's
  row from its read to its commit, so this is the hot-row worst case;
- ``harness, a lesson per client``: the same with 8 lessons, outcome i naming
  lesson i mod 8 (agents at work on different things);
- ``no lesson in play``: N threads, agent token, nothing in play: the endpoint
  without the one row every other run's outcomes touch (each of those
  transactions holds that lesson's row lock from its read to its commit);
- ``with retries``: N threads, every outcome posted twice (the second a retry
  with the same ``outcome_id``), half of them at the same moment.

The runs are interleaved: each is cut into ``ROUNDS`` shares, and every round runs
one share of each, so a drift of the shared box (its speed changed by a third
within an hour here) lands on every run alike. Each run records the load average
when its first share started; the ``× bare`` column is the number that survives a
noisy neighbour.

    .venv/bin/python bench/bench_outcomes.py [--quick] [--clients=8]
"""

from __future__ import annotations

import http.client
import json
import os
import random
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    RESULTS,
    drop_database,
    free_port,
    gunicorn_start,
    machine,
    setup_django,
)

PROJECT = "https://github.com/acme/bench.git"
ROUNDS = 4


def _outcome(oid: str, lesson_id: int) -> dict:
    return {
        "outcome_id": oid,
        "session_id": f"s-{oid}",
        "turn_index": 1,
        "project_remote": PROJECT,
        "goal": "make the tests pass",
        "approach": [
            {"operation_key": "edit:cart.py", "target": "cart.py", "outcome": "ok", "step": 1,
             "mutated": True},
            {"operation_key": "pytest", "target": "tests", "outcome": "ok", "step": 2},
        ],
        "checks": [{"kind": "test", "label": "pytest", "target": "tests", "ran": True,
                    "exit_code": 0, "step": 2}],
        "claim_ok": True,
        "in_play": [{"type": "lesson", "id": lesson_id}] if lesson_id else [],
    }  # fmt: skip


def _run(
    port: int, token: str, ids: list[str], lessons: list[int], *, threads: int, retries: bool,
    path: str = "/api/v1/outcomes/",
) -> dict:  # fmt: skip
    """Post an outcome per id; the i-th names ``lessons[i % len(lessons)]`` (none if empty)."""
    lesson_of = {oid: lessons[i % len(lessons)] if lessons else 0 for i, oid in enumerate(ids)}
    local = threading.local()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    latencies: list[float] = []
    statuses: dict[int, int] = {}

    def post(oid: str) -> None:
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        body = json.dumps(_outcome(oid, lesson_of[oid]))
        started = time.perf_counter()
        conn.request("POST", path, body=body, headers=headers)
        response = conn.getresponse()
        response.read()
        latencies.append(time.perf_counter() - started)
        statuses[response.status] = statuses.get(response.status, 0) + 1

    work = list(ids)
    if retries:
        # Every outcome twice: half the retries right behind their first post (the
        # pool sends them at the same moment), the other half at the end.
        rng = random.Random(7)
        racing = {oid for oid in ids if rng.random() < 0.5}
        work = []
        for oid in ids:
            work += [oid, oid] if oid in racing else [oid]
        work += [oid for oid in ids if oid not in racing]
    load = [round(x, 2) for x in os.getloadavg()]
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(post, work))
    wall = time.perf_counter() - started
    return _summary(
        [{"work": len(work), "ids": len(ids), "wall": wall, "latencies": latencies,
          "statuses": statuses, "load": load}],
        threads,
    )  # fmt: skip


def _summary(parts: list[dict], threads: int) -> dict:
    """One run's figures from its rounds (each a share of its outcomes, see ``ROUNDS``)."""
    latencies = sorted(x for part in parts for x in part["latencies"])
    work, ids = sum(p["work"] for p in parts), sum(p["ids"] for p in parts)
    wall = sum(p["wall"] for p in parts)
    statuses: dict[int, int] = {}
    for part in parts:
        for code, count in part["statuses"].items():
            statuses[code] = statuses.get(code, 0) + count
    return {
        "clients": threads,
        "requests": work,
        "outcomes": ids,
        "wall_s": round(wall, 2),
        "outcomes_per_s": round(ids / wall, 1),
        "requests_per_s": round(work / wall, 1),
        "p50_ms": round(statistics.median(latencies) * 1000, 1),
        "p95_ms": round(latencies[int(len(latencies) * 0.95) - 1] * 1000, 1),
        "statuses": statuses,
        "load_average_at_start": parts[0]["load"],
        "_parts": parts,
    }


def main(argv: list[str]) -> int:
    import logging

    import httpx

    logging.getLogger("httpx").setLevel(logging.WARNING)
    quick = "--quick" in argv
    n = 300 if quick else 2000
    threads = 8
    for arg in argv:
        if arg.startswith("--clients="):
            threads = int(arg.split("=", 1)[1])
    setup_django()
    from memory.identity.services import agent_get_or_create, token_issue, workspace_get_or_create
    from memory.models import ConfidenceChange, LessonEvidence, Outcome, TokenScope

    workspace = workspace_get_or_create(name="bench-outcomes")
    agent = agent_get_or_create(workspace=workspace, name="bench-agent")
    token = token_issue(agent=agent).raw
    harness_token = token_issue(agent=agent, scope=TokenScope.HARNESS).raw
    info = machine()

    port = free_port()
    server, url = gunicorn_start(port, settings="server_settings")
    try:
        # Lessons learned by the loop: the first is in play in every outcome of the
        # runs below but one, which spreads its outcomes over all eight.
        lesson_ids = []
        for k in range(8):
            seed = httpx.post(
                f"{url}/api/v1/outcomes/",
                headers={"Authorization": f"Bearer {harness_token}"},
                json={
                    **_outcome(f"seed-{k}", 0),
                    "approach": [
                        {
                            "operation_key": f"pip:install-{k}" if k else "pip:install",
                            "target": "deps",
                            "outcome": "failed",
                            "step": 1,
                        },
                        {"operation_key": "pytest", "target": "deps", "outcome": "ok", "step": 2},
                    ],
                    "in_play": [],
                },
                timeout=30,
            ).json()
            lesson_ids.append(seed["lessons_created"][0])
        # Warm both workers (imports, connections) before anything is timed.
        _run(port, token, [f"warm-{i}" for i in range(40)], [], threads=threads,
             retries=False, path="/api/v1/_bench/bare/")  # fmt: skip

        one, spread = lesson_ids[:1], lesson_ids
        outcomes = "/api/v1/outcomes/"
        runs = [
            ("bare DRF view", n, threads, False, token, "/api/v1/_bench/bare/", []),
            ("single", min(n // 4, 300), 1, False, token, outcomes, one),
            ("concurrent", n, threads, False, token, outcomes, one),
            ("harness", n, threads, False, harness_token, outcomes, one),
            ("harness, a lesson per client", n, threads, False, harness_token, outcomes, spread),
            ("no lesson in play", n, threads, False, token, outcomes, []),
            ("with retries", n, threads, True, token, outcomes, one),
        ]
        ids = {
            name: [f"{name.replace(' ', '-').replace(',', '')}-{i}" for i in range(count)]
            for name, count, *_ in runs
        }
        # Every run in ROUNDS shares, one share of each run after the other: the box
        # drifts (other tenants, its own load), and this way each run sees the same
        # drift, so the x-bare column compares like with like.
        parts: dict[str, list[dict]] = {name: [] for name, *_ in runs}
        for r in range(ROUNDS):
            for name, _count, workers, retries, who, path, lessons in runs:
                share = ids[name][r::ROUNDS]
                stats = _run(port, who, share, lessons, threads=workers, retries=retries,
                             path=path)  # fmt: skip
                parts[name] += stats["_parts"]
                print(f"round {r + 1}/{ROUNDS} {name:30s} {stats['requests_per_s']}/s", flush=True)
        results = {}
        for name, _count, workers, _retries, who, path, lessons in runs:
            stats = _summary(parts[name], workers)
            del stats["_parts"]
            if path.endswith("/bare/"):
                stats.update(lost=0, duplicated=0, double_applied=0)
                results[name] = stats
                continue
            rows = Outcome.objects.filter(agent=agent, outcome_id__in=ids[name])
            stored = set(rows.values_list("outcome_id", flat=True))
            stats["lost"] = len(set(ids[name]) - stored)
            stats["duplicated"] = rows.count() - len(stored)
            # A harness outcome confirms its in-play lesson once: one evidence link, and
            # at most one ledger row (none once the confidence is at its ceiling). An
            # agent token's outcome is a self-report: neither.
            links = LessonEvidence.objects.filter(lesson_id__in=lessons, outcome__in=rows).count()
            stats["confirmations"] = links
            evidence = [f"outcome:{pk}" for pk in rows.values_list("pk", flat=True)]
            stats["ledger_rows"] = ConfidenceChange.objects.filter(
                target_type="lesson", target_id__in=lessons, evidence_id__in=evidence
            ).count()
            expected = len(stored) if who == harness_token else 0
            stats["double_applied"] = max(links - expected, stats["ledger_rows"] - expected, 0)
            results[name] = stats
            print(f"{name:14s} {stats}", flush=True)
    finally:
        server.terminate()
        server.wait(timeout=30)

    bare = results["bare DRF view"]["requests_per_s"]
    for stats in results.values():
        stats["x_bare"] = round(stats["requests_per_s"] / bare, 2) if bare else None
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "outcomes.json").write_text(
        json.dumps(
            {
                "n": n,
                "clients": threads,
                "server": "Procfile web: gunicorn, 2 workers x 4 threads (gthread)",
                "machine": info,
                "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
                "results": results,
            },
            indent=2,
        )
    )
    lines = [
        f"{threads} clients on the same machine; server: the Procfile's gunicorn "
        f"(2 workers × 4 threads); commit {info['commit']}.",
        "",
        "| run | outcomes | requests | outcomes/s | requests/s | × bare | p50 | p95 | lost "
        "| duplicated | applied twice | load average at start |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, s in results.items():
        lines.append(
            f"| {name} | {s['outcomes']} | {s['requests']} | {s['outcomes_per_s']} | "
            f"{s['requests_per_s']} | {s['x_bare']} | {s['p50_ms']} ms | {s['p95_ms']} ms | "
            f"{s['lost']} | {s['duplicated']} | {s['double_applied']} | "
            f"{', '.join(map(str, s['load_average_at_start']))} |"
        )
    table = "\n".join(lines)
    (RESULTS / "outcomes.md").write_text(table + "\n")
    print(table)
    drop_database()
    bad = [
        name
        for name, s in results.items()
        if s["lost"] or s["duplicated"] or s["double_applied"] or s["statuses"].get(500)
    ]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
