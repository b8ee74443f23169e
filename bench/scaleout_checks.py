"""What the scale-out run checks afterwards, from the database and the processes'
flight recorder (``scaleout_settings.py``): writes stored once, task messages finished
once, beat ticks once, advisory-lock holders never overlapping; and the latency figures.

Not a benchmark itself (no ``bench_`` prefix), so ``run_all.py`` does not run it.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path

from common import percentiles


def read_events(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def check(events_path: Path, people, traffic, faults: list[dict], wall0: float) -> dict:
    from memory.models import ConversationTurn, JobRun, Knowledge, Outcome

    log = read_events(events_path)
    # Writes: each acknowledged one stored exactly once.
    writes = {}
    agents = [t["agent"] for t in people]
    markers = Counter()
    for content in Knowledge.objects.filter(context="bench-scaleout").values_list(
        "content", flat=True
    ):
        markers[content.split(" ", 1)[0]] += 1
    outcome_ids = Counter(
        Outcome.objects.filter(agent__in=agents).values_list("outcome_id", flat=True)
    )
    sessions = Counter(
        ConversationTurn.objects.filter(agent__in=agents).values_list("session_id", flat=True)
    )
    for kind, stored in (("remember", markers), ("outcome", outcome_ids), ("turn", sessions)):
        keys = [key for _, key, _ in traffic.ack[kind]]
        writes[kind] = {
            "acknowledged": len(keys),
            "lost": sum(1 for key in keys if stored.get(key, 0) == 0),
            "doubled": sum(1 for key in keys if stored.get(key, 0) > 1),
        }
    # Tasks: every message sent finished exactly once.
    sent = {e["id"]: e for e in log if e["ev"] == "publish"}
    started = Counter(e["id"] for e in log if e["ev"] == "prerun")
    finished = Counter(e["id"] for e in log if e["ev"] == "postrun")
    never = [i for i in sent if finished[i] == 0]
    twice = [i for i in sent if finished[i] > 1]
    rerun = [i for i in sent if started[i] > 1]
    starts = defaultdict(list)
    for e in log:
        if e["ev"] == "prerun":
            starts[e["id"]].append(e["t"])
    # From a killed run's start to its second start (the message came back).
    rerun_after = [round(sorted(starts[i])[1] - sorted(starts[i])[0], 1) for i in rerun]
    by_task = Counter(e["task"] for e in sent.values())
    # Beat: each tick sent once; ticks per entry and the smallest gap between two.
    ticks = defaultdict(list)
    for e in log:
        if e["ev"] == "publish" and e["role"] == "beat":
            ticks[e["task"]].append(e["t"])
    beat = {}
    for task, times in sorted(ticks.items()):
        times.sort()
        gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
        beat[task.rsplit(".", 1)[-1]] = {
            "ticks": len(times),
            "min_gap_s": round(min(gaps), 2) if gaps else None,
            "finished_once": sum(
                1
                for e in log
                if e["ev"] == "publish"
                and e["role"] == "beat"
                and e["task"] == task
                and finished[e["id"]] == 1
            ),
        }
    # Job runs recorded in the database.
    runs = JobRun.objects.filter(created_at__gte=_aware(wall0))
    statuses = Counter(runs.values_list("status", flat=True))
    # A message whose worker was killed has two runs: the killed one (``interrupted`` by
    # the reaper, or ``failed`` with "Interrupted ..." by the run that resumed from its
    # checkpoint) and the one that did the work. Only the second may complete.
    per_task = Counter(
        runs.filter(status__in=["succeeded", "skipped"])
        .exclude(task_id="")
        .values_list("task_id", flat=True)
    )
    killed_runs = runs.filter(status="interrupted").count() + (
        runs.filter(status="failed", error__startswith="Interrupted").count()
    )
    failed = list(
        runs.filter(status="failed")
        .exclude(error__startswith="Interrupted")
        .values_list("kind", "error")[:5]
    )
    # Advisory locks: no two recorded holders of one name overlap.
    kill_wall = next((f["wall"] for f in faults if "wall" in f), None)
    holds = defaultdict(list)
    closed = set()
    for e in log:
        if e["ev"] == "locked":
            holds[e["name"]].append((e["t0"], e["t1"]))
            closed.add((e["pid"], e["name"], e["t0"]))
    cut = 0
    for e in log:
        if e["ev"] == "lock" and (e["pid"], e["name"], e["t0"]) not in closed:
            # A holder killed mid-hold: held at least until the kill.
            holds[e["name"]].append((e["t0"], kill_wall or e["t0"]))
            cut += 1
    overlaps = 0
    for intervals in holds.values():
        intervals.sort()
        overlaps += sum(1 for a, b in zip(intervals, intervals[1:], strict=False) if b[0] < a[1])
    statuses_http = Counter(code for _, _, code in traffic.statuses)
    result = {
        "requests": len(traffic.statuses),
        "http_status": {str(k): v for k, v in sorted(statuses_http.items())},
        "server_errors": sum(v for k, v in statuses_http.items() if k >= 500),
        "client_errors": sum(v for k, v in statuses_http.items() if 400 <= k < 500),
        "connections_refused_retried": traffic.refused,
        "writes": writes,
        "faults": [{k: v for k, v in f.items() if k != "wall"} for f in faults],
        "tasks": {
            "sent": len(sent),
            "by_task": dict(by_task.most_common()),
            "never_finished": len(never),
            "finished_twice": len(twice),
            "run_again_after_kill": len(rerun),
            "rerun_tasks": [sent[i]["task"] for i in rerun],
            "rerun_after_s": rerun_after,
        },
        "beat": beat,
        "beat_ticks": sum(b["ticks"] for b in beat.values()),
        "job_runs": dict(statuses),
        "job_runs_left_open": statuses.get("queued", 0) + statuses.get("running", 0),
        "job_runs_finished_twice_per_message": sum(1 for n in per_task.values() if n > 1),
        "failed_runs": [f"{k}: {e[:160]}" for k, e in failed],
        "killed_runs": killed_runs,
        "locks": {
            "names": len(holds),
            "holds": sum(len(v) for v in holds.values()),
            "cut_by_kill": cut,
            "overlaps": overlaps,
        },
        "latency": latency(traffic),
        "timeline": timeline(traffic),
    }
    result["ok"] = (
        all(w["lost"] == 0 and w["doubled"] == 0 for w in writes.values())
        and not never
        and not twice
        and overlaps == 0
        and result["server_errors"] == 0
        and result["job_runs_left_open"] == 0
        and result["job_runs_finished_twice_per_message"] == 0
        and not failed
        and all(b["finished_once"] == b["ticks"] for b in beat.values())
    )
    return result


def _aware(wall: float):
    from datetime import UTC, datetime

    return datetime.fromtimestamp(wall - 5, tz=UTC)


def latency(traffic) -> dict:
    return {kind: percentiles([s for _, s in v]) for kind, v in sorted(traffic.samples.items())}


def timeline(traffic, bucket: float = 5.0) -> list[dict]:
    """Answers per ``bucket`` seconds: 2xx, other, and the p95 latency of the 2xx."""
    rows = defaultdict(lambda: {"ok": 0, "other": 0, "lat": []})
    for at, _, code in traffic.statuses:
        rows[int(at // bucket)]["ok" if code < 300 else "other"] += 1
    for samples in traffic.samples.values():
        for at, elapsed in samples:
            rows[int(at // bucket)]["lat"].append(elapsed)
    out = []
    for n in sorted(rows):
        lat = sorted(rows[n]["lat"])
        p95 = lat[min(len(lat) - 1, int(len(lat) * 0.95))] * 1000 if lat else 0
        out.append(
            {
                "t": n * bucket,
                "ok": rows[n]["ok"],
                "other": rows[n]["other"],
                "p95_ms": round(p95, 1),
            }
        )
    return out
