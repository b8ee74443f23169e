"""Outcome ingestion: throughput on this machine, and zero lost or duplicated under retries.

A real gunicorn (the production server) serves the bench database; client
threads post outcomes over HTTP. Every outcome carries a lesson in play on an
operation it ran, so each one also confirms that lesson: a retry that applied
twice would show up as an extra ledger row. Side by side in one run:

- ``single``: one client, one outcome at a time (latency floor);
- ``concurrent``: N client threads;
- ``with retries``: N threads, and every outcome is posted twice (the second a
  retry with the same ``outcome_id``), half of them at the same moment.

    .venv/bin/python bench/bench_outcomes.py [--quick]
"""

from __future__ import annotations

import json
import os
import random
import socket
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from common import BENCH_DATABASE, RESULTS, ROOT, drop_database, setup_django  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

PROJECT = "https://github.com/acme/bench.git"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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
        "in_play": [{"type": "lesson", "id": lesson_id}],
    }  # fmt: skip


def _run(
    url: str, token: str, ids: list[str], lesson_id: int, *, threads: int, retries: bool
) -> dict:
    import httpx

    headers = {"Authorization": f"Bearer {token}"}
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    client = httpx.Client(base_url=url, headers=headers, timeout=60)

    def post(oid: str) -> None:
        started = time.perf_counter()
        response = client.post("/api/v1/outcomes/", json=_outcome(oid, lesson_id))
        latencies.append(time.perf_counter() - started)
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1

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
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(post, work))
    wall = time.perf_counter() - started
    client.close()
    latencies.sort()
    return {
        "requests": len(work),
        "outcomes": len(ids),
        "wall_s": round(wall, 2),
        "outcomes_per_s": round(len(ids) / wall, 1),
        "requests_per_s": round(len(work) / wall, 1),
        "p50_ms": round(statistics.median(latencies) * 1000, 1),
        "p95_ms": round(latencies[int(len(latencies) * 0.95) - 1] * 1000, 1),
        "statuses": statuses,
    }


def main(argv: list[str]) -> int:
    import logging

    logging.getLogger("httpx").setLevel(logging.WARNING)
    quick = "--quick" in argv
    n = 300 if quick else 2000
    threads = 8
    setup_django()
    from memory.identity.services import agent_get_or_create, token_issue, workspace_get_or_create
    from memory.models import ConfidenceChange, Lesson, LessonEvidence, Outcome

    workspace = workspace_get_or_create(name="bench-outcomes")
    agent = agent_get_or_create(workspace=workspace, name="bench-agent")
    token = token_issue(agent=agent).raw

    port = _free_port()
    env = {**os.environ, "CAIRN_DATABASE_NAME": BENCH_DATABASE,
           "DJANGO_SETTINGS_MODULE": "cairn.settings", "CAIRN_REDIS_DB": "2"}  # fmt: skip
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "cairn.wsgi", "--bind", f"127.0.0.1:{port}",
         "--workers", "2", "--threads", "4", "--log-level", "warning"],
        cwd=ROOT, env=env,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        import httpx

        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/api/v1/schema/", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("gunicorn did not start")
            time.sleep(0.3)

        # A lesson learned by the loop, in play in every outcome below.
        seed = httpx.post(
            f"{url}/api/v1/outcomes/",
            headers={"Authorization": f"Bearer {token}"},
            json={
                **_outcome("seed", 0),
                "approach": [
                    {
                        "operation_key": "pip:install",
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
        lesson_id = seed["lessons_created"][0]
        lesson = Lesson.objects.get(pk=lesson_id)

        results = {}
        for name, count, workers, retries in (
            ("single", min(n // 4, 300), 1, False),
            ("concurrent", n, threads, False),
            ("with retries", n, threads, True),
        ):
            ids = [f"{name.replace(' ', '-')}-{i}" for i in range(count)]
            ledger_before = ConfidenceChange.objects.filter(target_id=lesson.pk).count()
            stats = _run(url, token, ids, lesson_id, threads=workers, retries=retries)
            rows = Outcome.objects.filter(agent=agent, outcome_id__in=ids)
            stored = set(rows.values_list("outcome_id", flat=True))
            stats["lost"] = len(set(ids) - stored)
            stats["duplicated"] = rows.count() - len(stored)
            # Each outcome confirms the in-play lesson once: one evidence link each.
            links = LessonEvidence.objects.filter(lesson=lesson, outcome__in=rows).count()
            stats["confirmations"] = links
            stats["double_applied"] = links - len(stored)
            stats["ledger_rows"] = (
                ConfidenceChange.objects.filter(target_id=lesson.pk).count() - ledger_before
            )
            results[name] = stats
            print(f"{name:14s} {stats}", flush=True)
    finally:
        server.terminate()
        server.wait(timeout=30)

    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "outcomes.json").write_text(
        json.dumps({"n": n, "threads": threads, "load": os.getloadavg(), "results": results},
                   indent=2)
    )  # fmt: skip
    lines = [
        "| run | outcomes | requests | outcomes/s | requests/s | p50 | p95 | lost | duplicated "
        "| applied twice |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, s in results.items():
        lines.append(
            f"| {name} | {s['outcomes']} | {s['requests']} | {s['outcomes_per_s']} | "
            f"{s['requests_per_s']} | {s['p50_ms']} ms | {s['p95_ms']} ms | {s['lost']} | "
            f"{s['duplicated']} | {s['double_applied']} |"
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
