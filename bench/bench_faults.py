"""Mixed agent traffic at a fixed rate while a gunicorn worker and the Celery worker
are killed (SIGKILL) and come back: zero lost or doubled writes, 5xx only in the
kill windows, p95 latency per kind. Loopback only; bounded (``--seconds``).

Traffic (per tick, round robin): remember (POST /knowledge/ with an
Idempotency-Key), recall, an outcome (retried with the same outcome_id and key
until acknowledged, up to 8 times), a conversation turn (retried likewise), and
every 20 s an export job (the worker's share). Faults: at 1/3 of the run one
gunicorn worker gets SIGKILL (the master forks another); at 1/2 the whole Celery
worker does, and a new one starts 5 s later (its reaper resumes the export it
was running). Afterwards every acknowledged write is counted in the database:
each must be there exactly once.

    .venv/bin/python bench/bench_faults.py [--seconds 180] [--rate 16] [--quick]
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import RESULTS, ROOT, drop_database, machine, percentiles, setup_django, table  # noqa: E402

KILL_WINDOW_S = 12  # after a kill, this long counts as "during the kill"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _env() -> dict:
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="cairn.settings",
        CAIRN_DATABASE_NAME=os.environ["CAIRN_DATABASE_NAME"],
        CAIRN_REDIS_DB="6",
        CAIRN_REAPER_GRACE_S="0",
    )
    return env


def _worker(log) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "cairn", "worker", "--concurrency", "1"]
        + ["--hostname", f"bench-{time.monotonic_ns()}@%h", "--without-mingle"]
        + ["--without-gossip", "--loglevel", "WARNING"],
        cwd=ROOT,
        env=_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def main(argv: list[str]) -> int:
    seconds = 60 if "--quick" in argv else 180
    rate = 16.0
    if "--seconds" in argv:
        seconds = int(argv[argv.index("--seconds") + 1])
    if "--rate" in argv:
        rate = float(argv[argv.index("--rate") + 1])
    setup_django()
    import logging

    import httpx

    logging.getLogger("httpx").setLevel(logging.WARNING)
    import redis
    from django.conf import settings

    from memory.identity.services import token_issue
    from memory.models import ConversationTurn, JobRun, Knowledge, Outcome
    from tests.factories.identity import AgentFactory, WorkspaceFactory
    from tests.factories.lessons import passed_payload

    redis.Redis.from_url(settings.REDIS_URL.rsplit("/", 1)[0] + "/6").flushdb()
    workspace = WorkspaceFactory(name="bench-faults")
    agent = AgentFactory(workspace=workspace, name="bench/agent")
    token = token_issue(agent=agent).raw
    admin = token_issue(agent=AgentFactory(workspace=workspace, name="ops"), scope="admin").raw
    port = _free_port()
    log = open(ROOT / "var" / "bench-faults-processes.log", "w")
    web = subprocess.Popen(
        [str(Path(sys.executable).parent / "gunicorn"), "cairn.wsgi", "--bind", f"127.0.0.1:{port}"]
        + ["--workers", "2", "--threads", "4", "--logger-class", "cairn.accesslog.RedactingLogger"],
        cwd=ROOT,
        env=_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    worker = _worker(log)
    base = f"http://127.0.0.1:{port}/api/v1"
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
            break
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)

    auth = {"Authorization": f"Bearer {token}"}
    samples: dict[str, list[float]] = {k: [] for k in ("remember", "recall", "outcome", "turn")}
    statuses: list[tuple[float, str, int]] = []
    acknowledged: dict[str, list[str]] = {"remember": [], "outcome": [], "turn": []}
    exports: list[int] = []
    kills: list[tuple[str, float]] = []
    lock = threading.Lock()
    client = httpx.Client(timeout=30)
    t0 = time.monotonic()

    def call(kind: str, method: str, url: str, body: dict, key: str | None, retries: int):
        for _ in range(retries):
            headers = dict(auth)
            if key:
                headers["Idempotency-Key"] = key
            started = time.monotonic()
            try:
                response = client.request(method, url, json=body, headers=headers)
                code = response.status_code
            except httpx.TransportError:
                code = 0  # connection reset by the killed worker: retry
            elapsed = time.monotonic() - started
            with lock:
                statuses.append((started - t0, kind, code))
                if 200 <= code < 300:
                    samples[kind].append(elapsed)
            if 200 <= code < 300:
                return True
            if 400 <= code < 500:
                return False
            time.sleep(0.5)
        return False

    def one(tick: int):
        kind = ("remember", "recall", "outcome", "turn")[tick % 4]
        if kind == "remember":
            marker = uuid.uuid4().hex
            body = {"content": f"{marker} {uuid.uuid4().hex} bench note", "context": "bench"}
            if call(kind, "POST", f"{base}/knowledge/", body, marker, 8):
                acknowledged["remember"].append(marker)
        elif kind == "recall":
            call(kind, "POST", f"{base}/recall/", {"query": "bench note"}, None, 1)
        elif kind == "outcome":
            oid = f"bench-{uuid.uuid4().hex}"
            body = passed_payload(outcome_id=oid, session_id=f"s-{tick}")
            if call(kind, "POST", f"{base}/outcomes/", body, oid, 8):
                acknowledged["outcome"].append(oid)
        else:
            session = f"bench-sess-{uuid.uuid4().hex[:12]}"
            body = {"role": "user", "content": "a bench turn", "turn_index": 0}
            url = f"{base}/sessions/{session}/turns/"
            if call(kind, "POST", url, body, session, 8):
                acknowledged["turn"].append(session)

    def faults():
        time.sleep(seconds / 3)
        children = subprocess.run(
            ["pgrep", "-P", str(web.pid)], capture_output=True, text=True
        ).stdout.split()
        if children:
            os.kill(int(children[0]), signal.SIGKILL)
            kills.append(("gunicorn worker", time.monotonic() - t0))
        time.sleep(seconds / 2 - seconds / 3)
        nonlocal worker
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
        kills.append(("celery worker", time.monotonic() - t0))
        time.sleep(5)
        worker = _worker(log)

    def export_requests():
        while time.monotonic() - t0 < seconds - 20:
            try:
                response = client.post(
                    f"{base}/exports/", json={}, headers={"Authorization": f"Bearer {admin}"}
                )
                if response.status_code == 202:
                    exports.append(response.json()["job_id"])
            except httpx.TransportError:
                pass
            time.sleep(20)

    threading.Thread(target=faults, daemon=True).start()
    threading.Thread(target=export_requests, daemon=True).start()
    with ThreadPoolExecutor(max_workers=16) as pool:
        tick = 0
        while time.monotonic() - t0 < seconds:
            pool.submit(one, tick)
            tick += 1
            time.sleep(max(0.0, t0 + tick / rate - time.monotonic()))
    # Let the worker finish queued exports before counting.
    finish = time.monotonic() + 120
    while (
        time.monotonic() < finish
        and JobRun.objects.filter(pk__in=exports, status__in=["queued", "running"]).exists()
    ):
        time.sleep(1)
    web.terminate()
    os.killpg(worker.pid, signal.SIGTERM)
    web.wait(timeout=30)
    worker.wait(timeout=30)

    def in_kill_window(at: float) -> bool:
        return any(k <= at <= k + KILL_WINDOW_S for _, k in kills)

    server_errors = [(at, kind, code) for at, kind, code in statuses if code >= 500]
    outside = [s for s in server_errors if not in_kill_window(s[0])]
    rows_remember = Knowledge.objects.filter(workspace=workspace, context="bench")
    stored = {}
    for row in rows_remember.values_list("content", flat=True):
        marker = row.split(" ", 1)[0]
        stored[marker] = stored.get(marker, 0) + 1
    lost_remember = sum(1 for m in acknowledged["remember"] if stored.get(m, 0) == 0)
    doubled_remember = sum(1 for n in stored.values() if n > 1)
    outcome_ids = list(Outcome.objects.filter(agent=agent).values_list("outcome_id", flat=True))
    lost_outcomes = len(set(acknowledged["outcome"]) - set(outcome_ids))
    doubled_outcomes = len(outcome_ids) - len(set(outcome_ids))
    turn_sessions = list(
        ConversationTurn.objects.filter(agent=agent).values_list("session_id", flat=True)
    )
    lost_turns = len(set(acknowledged["turn"]) - set(turn_sessions))
    doubled_turns = len(turn_sessions) - len(set(turn_sessions))
    export_states = dict.fromkeys(["succeeded", "failed", "interrupted", "queued", "running"], 0)
    for status in JobRun.objects.filter(pk__in=exports).values_list("status", flat=True):
        export_states[status] = export_states.get(status, 0) + 1

    result = {
        "machine": machine(),
        "seconds": seconds,
        "rate_per_s": rate,
        "requests": len(statuses),
        "kills": [{"what": w, "at_s": round(at, 1)} for w, at in kills],
        "kill_window_s": KILL_WINDOW_S,
        "server_errors_total": len(server_errors),
        "server_errors_outside_kill_windows": len(outside),
        "connection_errors": sum(1 for _, _, code in statuses if code == 0),
        "writes": {
            "remember": {
                "acknowledged": len(acknowledged["remember"]),
                "lost": lost_remember,
                "doubled": doubled_remember,
            },
            "outcome": {
                "acknowledged": len(acknowledged["outcome"]),
                "lost": lost_outcomes,
                "doubled": doubled_outcomes,
            },
            "turn": {
                "acknowledged": len(acknowledged["turn"]),
                "lost": lost_turns,
                "doubled": doubled_turns,
            },
        },
        "exports": export_states,
        "latency": {kind: percentiles(s) if s else {} for kind, s in samples.items()},
    }
    (RESULTS / "faults.json").write_text(json.dumps(result, indent=2))
    rows = [
        {"kind": kind, **result["latency"][kind], **result["writes"].get(kind, {})}
        for kind in samples
    ]
    kill_text = ", ".join(f"{k['what']} at {k['at_s']} s" for k in result["kills"])
    md = [
        f"# Load with faults ({seconds} s at {rate}/s, {result['requests']} requests)",
        "",
        f"Kills: {kill_text}. "
        f"5xx: {len(server_errors)} in total, {len(outside)} outside the "
        f"{KILL_WINDOW_S} s kill windows; connection resets retried: "
        f"{result['connection_errors']}. Exports: {export_states}.",
        "",
        table(rows, ["kind", "n", "p50_ms", "p95_ms", "acknowledged", "lost", "doubled"]),
        "",
        f"Machine: {result['machine']}",
    ]
    (RESULTS / "faults.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    drop_database()
    ok = not outside and all(
        w["lost"] == 0 and w["doubled"] == 0 for w in result["writes"].values()
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
