"""An ordinary /recall/ while eight clients send adversarial tool output.

    .venv/bin/python bench/bench_load.py [--quick] [--seconds=N]

Starts the production gunicorn (the Procfile's ``web:`` line: 2 workers x 4
threads) on the bench database, on loopback. Then, for a bounded time each:

1. **unloaded**: one client posts an ordinary ``POST /api/v1/recall/`` back to back;
2. **loaded**: the same, while 8 clients, each with its own agent token, post the
   adversarial inputs that once stalled the server (``"the agent"`` + 60,000
   spaces, 20,000 newlines before a near-match, repeated keywords) to
   ``/situations/classify/`` and ``/turns/{id}/results/`` as fast as they are
   answered, 429s included (the request budget, agents/budget.py).

Reports p50/p95/p99 of /recall/ in both phases and their ratio (the target: loaded
p99 within 2x of unloaded), and what the 8 clients got (2xx, 429, 413, errors).
Writes ``results/load.md`` and ``results/load.json``.
"""

from __future__ import annotations

import json
import sys
import threading
import time

from common import RESULTS, free_port, gunicorn_start, machine, setup_django, table

ADVERSARIAL = [
    {"tool": "x", "exit_code": 1, "stderr": "the agent" + " " * 60_000},
    {"tool": "x", "exit_code": 1, "stderr": "\n" * 20_000 + "  usage"},
    {"tool": "x", "exit_code": 1, "stdout": "agent should " * 4_000},
    {"tool": "x", "exit_code": 1, "output": "ignore all previous " * 3_000},
]
CLIENTS = 8


def _p(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def _recall_loop(url: str, token: str, stop: threading.Event, out: list[float], errors: list):
    import httpx

    with httpx.Client(base_url=url, timeout=60) as http:
        while not stop.is_set():
            started = time.perf_counter()
            response = http.post(
                "/api/v1/recall/",
                json={"query": "when is the staging database rebuilt", "top_k": 5},
                headers={"Authorization": f"Bearer {token}"},
            )
            out.append(time.perf_counter() - started)
            if response.status_code != 200:
                errors.append(response.status_code)


def _attacker(url: str, token: str, stop: threading.Event, counts: dict, lock, k: int):
    import httpx

    with httpx.Client(base_url=url, timeout=60) as http:
        i = 0
        while not stop.is_set():
            body = ADVERSARIAL[i % len(ADVERSARIAL)]
            path = (
                "/api/v1/situations/classify/"
                if i % 2 == 0
                else f"/api/v1/turns/load-{k}-{i // 50}/results/"
            )
            wait = 0.0
            try:
                response = http.post(path, json=body, headers={"Authorization": f"Bearer {token}"})
                status = response.status_code
                if status == 429:  # a client that honours Retry-After, as ours does
                    wait = float(response.headers.get("Retry-After", "1"))
            except httpx.HTTPError as exc:
                status = type(exc).__name__
            with lock:
                counts[status] = counts.get(status, 0) + 1
            i += 1
            stop.wait(wait)


def main(argv: list[str]) -> int:
    import logging

    import httpx

    logging.getLogger("httpx").setLevel(logging.WARNING)
    quick = "--quick" in argv
    seconds = 10 if quick else 30
    for arg in argv:
        if arg.startswith("--seconds="):
            seconds = int(arg.split("=", 1)[1])
    setup_django()
    from memory.identity.services import agent_get_or_create, token_issue, workspace_get_or_create
    from memory.models import TokenScope

    workspace = workspace_get_or_create(name="bench-load")
    reader = agent_get_or_create(workspace=workspace, name="bench-reader")
    reader_token = token_issue(agent=reader).raw
    attackers = [
        token_issue(
            agent=agent_get_or_create(workspace=workspace, name=f"bench-noisy-{k}"),
            scope=TokenScope.HARNESS,
        ).raw
        for k in range(CLIENTS)
    ]
    info = machine()
    server, url = gunicorn_start(free_port())
    try:
        facts = [
            "The staging database is rebuilt every Sunday night.",
            "Deploys freeze on Fridays after noon.",
            "Backups run at 02:00 UTC and are kept for 30 days.",
            "The CI runners have 4 GB of memory each.",
            "Release notes go in CHANGELOG.md under Unreleased.",
        ]
        for k, fact in enumerate(facts * 4):
            httpx.post(f"{url}/api/v1/knowledge/",
                       json={"content": f"{fact} (note {k})", "category": "fact"},
                       headers={"Authorization": f"Bearer {reader_token}"}, timeout=60)  # fmt: skip
        for _ in range(20):  # warm both workers: imports, the embedder, connections
            httpx.post(f"{url}/api/v1/recall/", json={"query": "warm up"},
                       headers={"Authorization": f"Bearer {reader_token}"}, timeout=60)  # fmt: skip

        def phase(with_attackers: bool):
            stop, lock = threading.Event(), threading.Lock()
            samples, errors, counts = [], [], {}
            threads = [threading.Thread(target=_recall_loop,
                                        args=(url, reader_token, stop, samples, errors))]  # fmt: skip
            if with_attackers:
                threads += [
                    threading.Thread(target=_attacker, args=(url, t, stop, counts, lock, k))
                    for k, t in enumerate(attackers)
                ]
            for thread in threads:
                thread.start()
            time.sleep(seconds)
            stop.set()
            for thread in threads:
                thread.join(timeout=120)
            return samples, errors, counts

        unloaded, unloaded_errors, _ = phase(False)
        loaded, loaded_errors, counts = phase(True)
    finally:
        server.terminate()
        server.wait(timeout=30)

    rows = []
    for name, samples in (("unloaded", unloaded), ("loaded (8 adversarial clients)", loaded)):
        rows.append({"phase": name, "recalls": len(samples),
                     **{f"p{int(q * 100)} ms": f"{_p(samples, q):.1f}" for q in (0.5, 0.95, 0.99)}})  # fmt: skip
    ratio = _p(loaded, 0.99) / _p(unloaded, 0.99)
    attack_total = sum(counts.values())
    md = [
        "# /recall/ under adversarial load (bench/bench_load.py)",
        "",
        f"{info['when']}, commit {info['commit']}, {info['cpus']} CPUs, load at start "
        f"{info['load_average_at_start']}. Production gunicorn (Procfile: 2 workers x 4 "
        f"threads), loopback. Each phase {seconds} s: one client posting an ordinary "
        "/recall/ back to back; in the loaded phase 8 more clients, one agent token each, "
        'post 60 KB adversarial tool outputs ("the agent" + 60,000 spaces, 20,000 '
        "newlines, repeated keywords) to /situations/classify/ and /turns/{id}/results/ "
        "as fast as they are answered, waiting out a 429's Retry-After.",
        "",
        table(rows, ["phase", "recalls", "p50 ms", "p95 ms", "p99 ms"]),
        "",
        f"**p99 loaded / unloaded: {ratio:.2f}x** (target: within 2x). /recall/ errors: "
        f"unloaded {len(unloaded_errors)}, loaded {len(loaded_errors)}.",
        "",
        f"The 8 adversarial clients sent {attack_total} requests in {seconds} s: "
        + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items(), key=lambda kv: str(kv[0])))
        + " (429: over the per-token request budget).",
        "",
    ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "load.md").write_text("\n".join(md))
    (RESULTS / "load.json").write_text(json.dumps({
        "machine": info, "seconds": seconds, "ratio_p99": ratio,
        "unloaded_ms": [s * 1000 for s in unloaded], "loaded_ms": [s * 1000 for s in loaded],
        "attackers": {str(k): v for k, v in counts.items()},
        "recall_errors": {"unloaded": unloaded_errors, "loaded": loaded_errors},
    }, indent=1))  # fmt: skip
    print("\n".join(md))
    return 0 if ratio <= 2 and not loaded_errors else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
