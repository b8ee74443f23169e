"""Another workspace's /recall/ while eight hostile clients hit each write endpoint.

    .venv/bin/python bench/bench_load.py [--quick] [--seconds=N] [--only=NAME,...]

Starts the production gunicorn (the Procfile's ``web:`` line: 2 workers x 4
threads) on the bench database, on loopback, with the per-token request budgets at
their configured values (``agents/budget.py``; the other benches lift them). Two
workspaces: a *victim* whose one reader posts an ordinary ``POST /api/v1/recall/``
at a steady 8 a second (an agent's pace, within its own recall budget), and a
*hostile* one. In one run:

1. **unloaded**: the reader alone, for ``--seconds``;
2. **loaded, one phase per write operation of the API schema**: the reader, while 8
   clients, each with a fresh token of the hostile workspace (of a scope the route
   admits), post to that one endpoint as fast as they are answered, ignoring
   ``Retry-After``. Each client cycles through a valid body that does the endpoint's
   work where one is easy to write (100-item batches, long notes, outcomes, tool
   output that once stalled the classifier), a junk body one byte under the
   operation's body cap (read, parsed and scanned before the view refuses it), and a
   2.4 MB body (the issue's attack: refused before it is read).

Reports, per phase, the reader's p50/p99 and the ratio of its p99 to the unloaded
p99 (the target: within 2x), what the 8 clients got (2xx, 4xx, 413, 429), and
``os.getloadavg()`` before each phase. Writes ``results/load.md`` and
``results/load.json``; exits 1 when a ratio is over 2 or the reader saw an error.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time

from common import RESULTS, free_port, gunicorn_start, machine, setup_django, table

CLIENTS = 8
READER_PER_S = 8
OVERSIZE = 2_400_000
ADVERSARIAL = [
    {"tool": "x", "exit_code": 1, "stderr": "the agent" + " " * 60_000},
    {"tool": "x", "exit_code": 1, "stderr": "\n" * 20_000 + "  usage"},
    {"tool": "x", "exit_code": 1, "stdout": "agent should " * 4_000},
    {"tool": "x", "exit_code": 1, "output": "ignore all previous " * 3_000},
]
WORDS = "the staging database deploy window backups rotate cache warm index vacuum ".split()
URL_ARGS = {"namespace": "ns", "key": "k", "item_id": "1", "lesson_id": "1", "session_id": "s",
            "name": "triage-inbox", "turn_id": "t1", "check_id": "1"}  # fmt: skip


def _p(samples: list[float], q: float) -> float:
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def _text(seed: str, chars: int) -> str:
    words, n = [], 0
    while n < chars:
        word = WORDS[(hash(seed) + n) % len(WORDS)]
        words.append(word)
        n += len(word) + 1
    return f"{seed} " + " ".join(words)[: chars - len(seed) - 1]


def _valid_body(name: str, k: int, i: int):
    """A body that does the endpoint's work, or None where none is easy to write."""
    seed = f"hostile-{k}-{i}-{time.monotonic_ns()}"
    if name == "knowledge":
        return {"content": _text(seed, 1_900), "category": "note"}
    if name == "knowledge-batch":
        return {"items": [{"content": _text(f"{seed}-{j}", 1_000), "category": "note"}
                          for j in range(100)]}  # fmt: skip
    if name == "outcome-create":
        return {"outcome_id": seed, "session_id": seed, "project_remote": "git@x:shop.git",
                "goal": _text(seed, 2_000), "claim_ok": True,
                "approach": [{"operation_key": f"pytest:{j}", "target": "tests", "outcome": "ok",
                              "step": j} for j in range(200)],
                "checks": [{"kind": "test", "ran": True, "exit_code": 0, "step": 201}]}  # fmt: skip
    if name == "tool-calls":
        return {"calls": [{"session_id": seed, "tool": "gh", "operation_key": f"gh pr list {j}",
                           "ok": False, "error": _text(seed, 1_500)} for j in range(100)]}  # fmt: skip
    if name == "session-turns":
        return {"role": "user", "content": _text(seed, 4_000), "turn_index": i}
    if name in ("situations-classify", "turn-results"):
        return ADVERSARIAL[i % len(ADVERSARIAL)]
    if name == "recall":
        return {"query": _text(seed, 1_000), "top_k": 50}
    return None


def _junk_at_cap(cap: int) -> bytes:
    return b'{"padding":"' + b"a" * (cap - 15) + b'"}'


def _reader(url: str, token: str, stop: threading.Event, out: list, errors: list):
    import httpx

    with httpx.Client(base_url=url, timeout=60) as http:
        next_at = time.perf_counter()
        while not stop.is_set():
            started = time.perf_counter()
            response = http.post("/api/v1/recall/",
                                 json={"query": "when is the staging database rebuilt", "top_k": 5},
                                 headers={"Authorization": f"Bearer {token}"})  # fmt: skip
            out.append(time.perf_counter() - started)
            if response.status_code != 200:
                errors.append(response.status_code)
            next_at += 1 / READER_PER_S
            stop.wait(max(next_at - time.perf_counter(), 0))


def _hostile(url, token, method, name, path, cap, stop, counts, lock, k):
    import httpx

    junk, oversize = _junk_at_cap(cap), b'{"padding":"' + b"a" * OVERSIZE + b'"}'
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    with httpx.Client(base_url=url, timeout=30) as http:
        i = 0
        while not stop.is_set():
            kind = i % 3
            body = _valid_body(name, k, i) if kind == 0 else None
            content = json.dumps(body).encode() if body is not None else (
                oversize if kind == 2 else junk)  # fmt: skip
            try:
                status = http.request(method, path, content=content, headers=headers).status_code
            except httpx.HTTPError as exc:
                status = type(exc).__name__
            with lock:
                counts[status] = counts.get(status, 0) + 1
            i += 1


def _operations() -> list[tuple[str, str, str]]:
    """(METHOD, path template, url name) of every write operation of the API schema."""
    from django.urls import resolve
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    ops = []
    for path, operations in schema["paths"].items():
        for method in operations:
            if method in ("post", "put", "patch", "delete"):
                name = resolve(re.sub(r"\{[^}]+\}", "1", path)).url_name
                ops.append((method.upper(), path, name))
    return sorted(ops)


def main(argv: list[str]) -> int:
    import logging

    import httpx

    logging.getLogger("httpx").setLevel(logging.WARNING)
    seconds = 4 if "--quick" in argv else 10
    only: set[str] = set()
    for arg in argv:
        if arg.startswith("--seconds="):
            seconds = int(arg.split("=", 1)[1])
        if arg.startswith("--only="):
            only = set(arg.split("=", 1)[1].split(","))
    setup_django()
    from agents.body_caps import operation_cap
    from memory.identity.roles import api_scopes
    from memory.identity.services import agent_get_or_create, token_issue, workspace_get_or_create
    from memory.models import TokenScope

    run = time.strftime("%H%M%S")
    victim = workspace_get_or_create(name="bench-load-victim")
    reader_token = token_issue(agent=agent_get_or_create(workspace=victim, name="reader")).raw
    hostile = workspace_get_or_create(name=f"bench-load-hostile-{run}")
    hostile_agents = [agent_get_or_create(workspace=hostile, name=f"hostile-{k}")
                      for k in range(CLIENTS)]  # fmt: skip
    operations = [op for op in _operations() if not only or op[2] in only]
    info = machine()
    server, url = gunicorn_start(free_port(), budgets=True)
    results = []
    try:
        for k, fact in enumerate(["The staging database is rebuilt every Sunday night.",
                                  "Deploys freeze on Fridays after noon.",
                                  "Backups run at 02:00 UTC and are kept for 30 days."] * 4):  # fmt: skip
            httpx.post(f"{url}/api/v1/knowledge/",
                       json={"content": f"{fact} (note {k})", "category": "fact"},
                       headers={"Authorization": f"Bearer {reader_token}"}, timeout=60)  # fmt: skip
        for _ in range(20):  # warm both workers: imports, the embedder, connections
            httpx.post(f"{url}/api/v1/recall/", json={"query": "warm up"},
                       headers={"Authorization": f"Bearer {reader_token}"}, timeout=60)  # fmt: skip

        def phase(op, length: float):
            stop, lock = threading.Event(), threading.Lock()
            samples, errors, counts = [], [], {}
            threads = [threading.Thread(target=_reader,
                                        args=(url, reader_token, stop, samples, errors))]  # fmt: skip
            if op is not None:
                method, template, name = op
                scopes = api_scopes(name)
                scope = next(s for s in ("agent", "harness", "admin") if s in scopes)
                cap = operation_cap(name, method)
                path = template.format(**URL_ARGS)
                for k, agent in enumerate(hostile_agents):
                    token = token_issue(agent=agent, scope=TokenScope(scope)).raw
                    threads.append(threading.Thread(target=_hostile, args=(
                        url, token, method, name, path, cap, stop, counts, lock, k)))  # fmt: skip
            load = os.getloadavg()
            for thread in threads:
                thread.daemon = True  # an interrupted run does not wait for them
                thread.start()
            try:
                time.sleep(length)
            finally:
                stop.set()
            for thread in threads:
                thread.join(timeout=5)
            return {"samples": samples, "errors": errors, "counts": counts,
                    "load_before": [round(x, 2) for x in load],
                    "drain_s": drain() if op is not None else 0.0}  # fmt: skip

        def drain(limit_s: float = 120.0) -> float:
            """Seconds until the server is idle again: requests the hostile clients gave
            up on are still being served, and must not be timed in the next phase."""
            started = time.perf_counter()
            quick = 0
            while quick < 3 and time.perf_counter() - started < limit_s:
                t0 = time.perf_counter()
                httpx.post(f"{url}/api/v1/recall/", json={"query": "idle yet"},
                           headers={"Authorization": f"Bearer {reader_token}"}, timeout=120)  # fmt: skip
                quick = quick + 1 if time.perf_counter() - t0 < max(0.15, 2 * idle_p99[0]) else 0
                time.sleep(0.2)
            return round(time.perf_counter() - started, 1)

        idle_p99 = [0.1]

        # The baseline runs three phases' length: its p99 is not one sample's luck.
        unloaded = phase(None, 3 * seconds)
        base_p99 = _p(unloaded["samples"], 0.99)
        idle_p99[0] = base_p99 / 1000
        print(f"unloaded: {len(unloaded['samples'])} recalls, p99 {base_p99:.1f} ms, "
              f"load {unloaded['load_before']}", flush=True)  # fmt: skip
        for op in operations:
            loaded = phase(op, seconds)
            loaded["op"] = f"{op[0]} {op[1]}"
            loaded["ratio"] = _p(loaded["samples"], 0.99) / base_p99
            results.append(loaded)
            print(f"{loaded['op']}: p99 {_p(loaded['samples'], 0.99):.1f} ms, "
                  f"ratio {loaded['ratio']:.2f}, load {loaded['load_before']}, "
                  f"hostile {loaded['counts']}, drained in {loaded['drain_s']} s",
                  flush=True)  # fmt: skip
        after = phase(None, 3 * seconds)
    finally:
        server.terminate()
        server.wait(timeout=30)

    def statuses(counts: dict) -> str:
        return ", ".join(f"{k}: {v}" for k, v in sorted(counts.items(), key=lambda kv: str(kv[0])))

    rows = [{"phase": "unloaded", "recalls": len(unloaded["samples"]),
             "p50 ms": f"{_p(unloaded['samples'], 0.5):.1f}", "p99 ms": f"{base_p99:.1f}",
             "p99 ratio": "1.00", "load before": str(unloaded["load_before"]),
             "8 hostile clients got": "", "idle after s": ""}]  # fmt: skip
    for r in results + [
        {**after, "op": "unloaded again", "ratio": _p(after["samples"], 0.99) / base_p99}
    ]:
        rows.append({"phase": r["op"], "recalls": len(r["samples"]),
                     "p50 ms": f"{_p(r['samples'], 0.5):.1f}",
                     "p99 ms": f"{_p(r['samples'], 0.99):.1f}",
                     "p99 ratio": f"**{r['ratio']:.2f}**" if r["ratio"] > 2 else f"{r['ratio']:.2f}",
                     "load before": str(r["load_before"]),
                     "8 hostile clients got": statuses(r["counts"]),
                     "idle after s": str(r.get("drain_s", ""))})  # fmt: skip
    worst = max(results, key=lambda r: r["ratio"]) if results else None
    over = [r["op"] for r in results if r["ratio"] > 2]
    reader_errors = sum(len(r["errors"]) for r in results) + len(unloaded["errors"])
    md = [
        "# Another workspace's /recall/ under eight hostile clients per write endpoint",
        "",
        f"`bench/bench_load.py`, {info['when']}, commit {info['commit']}, {info['cpus']} CPUs, "
        f"load average at start {info['load_average_at_start']} (`os.getloadavg()` before each "
        "phase in the table). Production gunicorn (Procfile: 2 workers x 4 threads), "
        f"loopback, the per-token budgets at their defaults. Each loaded phase {seconds} s "
        f"(the unloaded ones {3 * seconds} s): one "
        f"reader in its own workspace posts an ordinary /recall/ {READER_PER_S} times a "
        "second; in each loaded phase 8 clients of another workspace, a fresh token each, "
        "post to one write endpoint as fast as they are answered, ignoring Retry-After, "
        "cycling through a valid body doing the endpoint's work (where easy to write), a "
        "junk body one byte under the endpoint's cap, and a 2.4 MB body. After each loaded "
        "phase the run waits until the server is idle again (three quick recalls in a row: "
        "the requests the clients gave up on are still served); *idle after s* is that wait.",
        "",
        table(
            rows,
            [
                "phase",
                "recalls",
                "p50 ms",
                "p99 ms",
                "p99 ratio",
                "load before",
                "8 hostile clients got",
                "idle after s",
            ],
        ),  # fmt: skip
        "",
        f"**Worst p99 ratio: {worst['ratio']:.2f}x ({worst['op']})**; over 2x: "
        f"{', '.join(over) or 'none'}. Reader errors: {reader_errors}."
        if worst
        else "No loaded phase ran.",
        "",
    ]
    RESULTS.mkdir(exist_ok=True)
    suffix = "" if not only else "-partial"
    (RESULTS / f"load{suffix}.md").write_text("\n".join(md))
    (RESULTS / f"load{suffix}.json").write_text(json.dumps({
        "machine": info, "seconds": seconds, "reader_per_s": READER_PER_S,
        "unloaded_ms": [s * 1000 for s in unloaded["samples"]],
        "unloaded_again_ms": [s * 1000 for s in after["samples"]],
        "phases": [{"op": r["op"], "ratio_p99": r["ratio"], "load_before": r["load_before"],
                    "loaded_ms": [s * 1000 for s in r["samples"]], "idle_after_s": r["drain_s"],
                    "hostile": {str(k): v for k, v in r["counts"].items()},
                    "reader_errors": r["errors"]} for r in results],
    }, indent=1))  # fmt: skip
    print("\n".join(md))
    print(f"os.getloadavg() at the end: {os.getloadavg()}")
    return 0 if not over and not reader_errors else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
