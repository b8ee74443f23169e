"""Many processes, one database: three web processes and two Celery workers with one
beat, each a separate process on its own port or hostname, against one PostgreSQL
(``DATABASE_URL``) and one broker (``REDIS_URL``), under mixed agent traffic.

Traffic (open loop at ``--rate`` per second, three workspaces, spread over the three
web ports; a refused connection is retried on the next port with the same
Idempotency-Key, as a load balancer would): remember (POST /knowledge/), outcomes,
conversation turns, recall, conversation search, reads of a remembered item, and an
export and a reconcile "run now" per workspace now and then. Beat ticks fast
(heartbeat every 3 s, reconcile every 15 s, the reaper every 30 s, ...).

Faults: at 1/2 of the run the worker running a reconcile (else any job) gets SIGKILL
with its whole process group and a new one starts 5 s later; at 2/3 one web process
is stopped (SIGTERM, graceful) and started again on its port.

Afterwards, from the database and the processes' flight recorder
(``bench/scaleout_settings.py``): every acknowledged write is stored exactly once,
every task message sent was finished exactly once (a killed one was run again once
its message came back), every beat tick was sent once, no two holders of one
advisory lock overlapped, and no answer was a 5xx.

    .venv/bin/python bench/bench_scaleout.py [--seconds 300] [--rate 20] [--quick]
                                             [--results DIR]
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote, urlencode

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    BENCH_DATABASE,
    RESULTS,
    ROOT,
    drop_database,
    free_port,
    machine,
    setup_django,
)
from scaleout_checks import check, read_events  # noqa: E402
from scaleout_report import write_report  # noqa: E402

REDIS_DB = "7"
WORKSPACES = 3
# Beat intervals for the run (seconds): every periodic job ticks several times.
BEAT = {
    "CAIRN_HEARTBEAT_S": 3,
    "CAIRN_RECONCILE_EVERY_S": 15,
    "CAIRN_CONSOLIDATE_EVERY_S": 30,
    "CAIRN_REAPER_EVERY_S": 30,
    "CAIRN_SKILL_BUDGET_EVERY_S": 60,
    "CAIRN_SKILL_CONSOLIDATE_EVERY_S": 60,
    "CAIRN_DECAY_INTERVAL_S": 60,
    "CAIRN_MAINTENANCE_INTERVAL_S": 60,
    "CAIRN_PRUNE_EVERY_S": 60,
    "CAIRN_EMBED_BACKFILL_S": 60,
}
# The broker gives a killed worker's unacknowledged message to another worker after
# this long (production: 6 h); short here so the redelivery happens within the run.
VISIBILITY_S = 30
WORDS = (
    "deploy cache index schema token retry worker queue branch commit lint format "
    "socket timeout vector embed recall lesson outcome harness proxy shard replica "
    "backup restore migrate column table parser budget signal review merge window"
).split()


class Stack:
    """The processes: web on three ports, two workers, one beat."""

    def __init__(self, env: dict, log):
        self.env, self.log = env, log
        self.ports = [free_port() for _ in range(3)]
        self.web: dict[int, subprocess.Popen] = {}
        self.workers: dict[str, subprocess.Popen] = {}
        self.beat = None
        self.schedule = Path(tempfile.mkdtemp(prefix="cairn-beat-")) / "celerybeat-schedule"

    def _spawn(self, cmd: list[str], role: str) -> subprocess.Popen:
        env = {**self.env, "CAIRN_SCALEOUT_ROLE": role}
        return subprocess.Popen(
            cmd,
            cwd=ROOT,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def start_web(self, n: int) -> None:
        gunicorn = str(Path(sys.executable).parent / "gunicorn")
        self.web[n] = self._spawn(
            [gunicorn, "cairn.wsgi", "-c", "python:cairn.gunicorn_conf"]
            + ["--bind", f"127.0.0.1:{self.ports[n]}", "--workers", "1", "--threads", "4"]
            + ["--graceful-timeout", "10", "--log-level", "warning"],
            f"web{n + 1}",
        )

    def start_worker(self, name: str) -> None:
        self.workers[name] = self._spawn(
            [sys.executable, "-m", "celery", "-A", "cairn", "worker", "--concurrency", "1"]
            + ["--hostname", f"{name}@%h", "--without-mingle", "--without-gossip"]
            + ["--loglevel", "WARNING"],
            name,
        )

    def start(self) -> None:
        for n in range(3):
            self.start_web(n)
        self.start_worker("worker1")
        self.start_worker("worker2")
        self.beat = self._spawn(
            [sys.executable, "-m", "celery", "-A", "cairn", "beat", "--loglevel", "WARNING"]
            + ["-s", str(self.schedule)],
            "beat",
        )
        for port in self.ports:
            wait_answering(port)

    def stop(self) -> None:
        procs = [*self.web.values(), *self.workers.values(), self.beat]
        for proc in procs:
            if proc and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            if proc:
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()


def wait_answering(port: int, timeout: float = 120) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"web on port {port} did not answer")
        time.sleep(0.3)


def process_env(events: Path) -> dict:
    """What every process gets: the one database and broker by URL, as in production."""
    from django.conf import settings

    db = settings.DATABASES["default"]
    host = db.get("HOST") or "127.0.0.1"
    auth = quote(db.get("USER") or "", safe="")
    if db.get("PASSWORD"):
        auth += ":" + quote(db["PASSWORD"], safe="")
    database_url = f"postgres://{auth}@{quote(host, safe='')}:{db.get('PORT') or 5432}/{db['NAME']}"
    env = {k: v for k, v in os.environ.items() if k not in ("CAIRN_DATABASE_NAME",)}
    env.update(
        DATABASE_URL=database_url,
        REDIS_URL=f"{settings.REDIS_BASE_URL}/{REDIS_DB}",
        DJANGO_SETTINGS_MODULE="scaleout_settings",
        PYTHONPATH=os.pathsep.join([str(ROOT / "bench"), str(ROOT)]),
        CAIRN_SCALEOUT_EVENTS=str(events),
        CAIRN_BROKER_VISIBILITY_TIMEOUT_S=str(VISIBILITY_S),
        **{k: str(v) for k, v in BEAT.items()},
    )
    return env


def tenants():
    from memory.identity.services import token_issue
    from tests.factories.identity import AgentFactory, WorkspaceFactory

    out = []
    for n in range(WORKSPACES):
        workspace = WorkspaceFactory(name=f"bench-scaleout-{n}")
        agent = AgentFactory(workspace=workspace, name=f"bench/agent-{n}")
        admin = AgentFactory(workspace=workspace, name=f"ops-{n}")
        out.append(
            {
                "workspace": workspace,
                "agent": agent,
                "token": token_issue(agent=agent).raw,
                "admin": token_issue(agent=admin, scope="admin").raw,
            }
        )
    return out


class Traffic:
    """Mixed agent traffic and what the server acknowledged."""

    MIX = (
        "remember",
        "outcome",
        "turn",
        "recall",
        "remember",
        "read",
        "turn",
        "outcome",
        "remember",
        "search",
    )

    def __init__(self, stack: Stack, tenants: list[dict], t0: float):
        import httpx

        self.stack, self.tenants, self.t0 = stack, tenants, t0
        self.client = httpx.Client(timeout=60)
        self.lock = threading.Lock()
        self.samples: dict[str, list[tuple[float, float]]] = defaultdict(list)
        self.statuses: list[tuple[float, str, int]] = []
        self.refused = 0
        self.ack: dict[str, list[tuple[int, str, int | None]]] = defaultdict(list)
        self.known: dict[int, list[int]] = defaultdict(list)  # workspace -> item ids
        self.job_ids: list[int] = []
        self.rng = random.Random(7)

    def call(
        self, kind: str, method: str, path: str, token: str, body=None, key=None, retries: int = 8
    ):
        import httpx

        start_port = self.rng.randrange(3)
        for attempt in range(retries):
            port = self.stack.ports[(start_port + attempt) % 3]
            headers = {"Authorization": f"Bearer {token}"}
            if key:
                headers["Idempotency-Key"] = key
            started = time.monotonic()
            try:
                response = self.client.request(
                    method, f"http://127.0.0.1:{port}/api/v1{path}", json=body, headers=headers
                )
            except httpx.TransportError:
                with self.lock:
                    self.refused += 1
                time.sleep(0.2)
                continue
            elapsed = time.monotonic() - started
            with self.lock:
                self.statuses.append((started - self.t0, kind, response.status_code))
                if response.status_code < 300:
                    self.samples[kind].append((started - self.t0, elapsed))
            if response.status_code < 300:
                return response
            # 409: the same key still in flight (a retry racing its first try); 429: busy.
            if response.status_code < 500 and response.status_code not in (409, 429):
                return None
            time.sleep(0.5)
        return None

    def sentence(self) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(8))

    def one(self, tick: int) -> None:
        kind = self.MIX[tick % len(self.MIX)]
        n = (tick // len(self.MIX) + tick) % WORKSPACES
        tenant = self.tenants[n]
        ws = tenant["workspace"].pk
        token = tenant["token"]
        if kind == "remember":
            marker = uuid.uuid4().hex
            body = {"content": f"{marker} {self.sentence()}", "context": "bench-scaleout"}
            response = self.call(kind, "POST", "/knowledge/", token, body, marker)
            if response is not None:
                item = response.json().get("id")
                with self.lock:
                    self.ack["remember"].append((ws, marker, item))
                    if item:
                        self.known[ws].append(item)
        elif kind == "outcome":
            from tests.factories.lessons import passed_payload

            oid = f"scaleout-{uuid.uuid4().hex}"
            body = passed_payload(outcome_id=oid, session_id=f"s-{tick}")
            if self.call(kind, "POST", "/outcomes/", token, body, oid) is not None:
                with self.lock:
                    self.ack["outcome"].append((ws, oid, None))
        elif kind == "turn":
            session = f"scaleout-{uuid.uuid4().hex[:16]}"
            body = {"role": "user", "content": self.sentence(), "turn_index": 0}
            url = f"/sessions/{session}/turns/"
            if self.call(kind, "POST", url, token, body, session) is not None:
                with self.lock:
                    self.ack["turn"].append((ws, session, None))
        elif kind == "recall":
            self.call(kind, "POST", "/recall/", token, {"query": self.sentence()}, retries=3)
        elif kind == "search":
            url = "/conversations/search/?" + urlencode({"q": self.sentence()})
            self.call(kind, "GET", url, token, retries=3)
        else:
            with self.lock:
                items = list(self.known[ws][-50:])
            if items:
                self.call(kind, "GET", f"/knowledge/{self.rng.choice(items)}/", token, retries=3)

    def start_job(self, tenant: dict, kind: str) -> None:
        if kind == "export":
            response = self.call("job", "POST", "/exports/", tenant["admin"], {}, retries=3)
        else:
            response = self.call(
                "job", "POST", "/jobs/", tenant["admin"], {"kind": kind}, retries=3
            )
        if response is not None:
            with self.lock:
                self.job_ids.append(response.json()["job_id"])


def running_task(events_path: Path, name: str) -> int | None:
    """The pid of a worker child running a ``name`` task now (prerun, no postrun)."""
    open_runs = {}
    for event in read_events(events_path):
        if event["ev"] == "prerun" and (not name or event["task"] == name):
            open_runs[event["id"]] = event["pid"]
        elif event["ev"] == "postrun":
            open_runs.pop(event["id"], None)
    return next(iter(open_runs.values()), None)


def main(argv: list[str]) -> int:
    seconds = 60 if "--quick" in argv else 300
    rate = 20.0
    if "--seconds" in argv:
        seconds = int(argv[argv.index("--seconds") + 1])
    if "--rate" in argv:
        rate = float(argv[argv.index("--rate") + 1])
    results = RESULTS
    if "--results" in argv:  # the test writes elsewhere than the committed results
        results = Path(argv[argv.index("--results") + 1])
    setup_django()
    import logging

    import redis
    from django.conf import settings

    logging.getLogger("httpx").setLevel(logging.WARNING)
    redis.Redis.from_url(f"{settings.REDIS_BASE_URL}/{REDIS_DB}").flushdb()
    events = ROOT / "var" / f"{BENCH_DATABASE}-scaleout-events.jsonl"
    events.unlink(missing_ok=True)
    people = tenants()
    log = open(ROOT / "var" / f"{BENCH_DATABASE}-scaleout-processes.log", "w")
    stack = Stack(process_env(events), log)
    stack.start()
    t0 = time.monotonic()
    wall0 = time.time()
    traffic = Traffic(stack, people, t0)
    faults: list[dict] = []

    def at(fraction: float) -> None:
        time.sleep(max(0.0, t0 + seconds * fraction - time.monotonic()))

    def fault_plan() -> None:
        at(0.42)
        for tenant in people:  # a reconcile per workspace, so one is running at the kill
            traffic.start_job(tenant, "reconcile")
        at(0.5)
        victim_pid, what = None, "any job"
        for _ in range(100):
            victim_pid = running_task(events, "memory.tasks.reconcile")
            if victim_pid:
                what = "reconcile"
                break
            time.sleep(0.1)
        victim_pid = victim_pid or running_task(events, "")
        name = next(
            (n for n, p in stack.workers.items() if victim_pid and os.getpgid(victim_pid) == p.pid),
            "worker1",
        )
        proc = stack.workers[name]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        faults.append(
            {
                "what": f"SIGKILL {name} (mid {what if victim_pid else 'idle'})",
                "at_s": round(time.monotonic() - t0, 1),
                "wall": time.time(),
            }
        )
        time.sleep(5)
        stack.start_worker(name)
        faults.append({"what": f"{name} started again", "at_s": round(time.monotonic() - t0, 1)})
        at(2 / 3)
        web = stack.web[1]
        os.killpg(web.pid, signal.SIGTERM)
        web.wait(timeout=60)
        faults.append({"what": "web2 stopped (SIGTERM)", "at_s": round(time.monotonic() - t0, 1)})
        stack.start_web(1)
        wait_answering(stack.ports[1])
        faults.append({"what": "web2 answering again", "at_s": round(time.monotonic() - t0, 1)})

    def job_plan() -> None:
        n = 0
        while time.monotonic() - t0 < seconds - 20:
            traffic.start_job(people[n % WORKSPACES], ("export", "reconcile", "consolidate")[n % 3])
            n += 1
            time.sleep(10)

    threads = [threading.Thread(target=f, daemon=True) for f in (fault_plan, job_plan)]
    for thread in threads:
        thread.start()
    with ThreadPoolExecutor(max_workers=24) as pool:
        tick = 0
        while time.monotonic() - t0 < seconds:
            pool.submit(traffic.one, tick)
            tick += 1
            time.sleep(max(0.0, t0 + tick / rate - time.monotonic()))
    traffic_s = time.monotonic() - t0
    for thread in threads:
        thread.join(timeout=120)
    drain_s = settle(events, timeout=VISIBILITY_S + 90)
    stack.stop()
    result = check(events, people, traffic, faults, wall0)
    result.update(
        machine=machine(),
        seconds=seconds,
        rate_per_s=rate,
        traffic_s=round(traffic_s, 1),
        drain_s=round(drain_s, 1),
        visibility_timeout_s=VISIBILITY_S,
        beat_intervals_s=BEAT,
        processes={
            "web": 3,
            "web_workers_x_threads": "1x4",
            "celery_workers": 2,
            "celery_concurrency": 1,
            "beat": 1,
        },
    )
    (results / "scaleout.json").write_text(json.dumps(result, indent=2))
    print(write_report(result, results))
    drop_database()
    return 0 if result["ok"] else 1


def settle(events: Path, timeout: float) -> float:
    """Wait until every task message sent has finished (a killed worker's message comes
    back after the visibility timeout) or ``timeout``; return how long it took."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        log = read_events(events)
        sent = {e["id"] for e in log if e["ev"] == "publish"}
        done = {e["id"] for e in log if e["ev"] == "postrun"}
        if sent <= done:
            break
        time.sleep(2)
    return time.monotonic() - started


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
