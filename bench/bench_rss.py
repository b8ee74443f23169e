"""Worker memory under sustained server-side embedding (issue 17: a gunicorn worker
grew from about 0.35 GB to about 3 GB over ~56k embeddings).

The production gunicorn (the Procfile's ``web:`` line: 2 workers × 4 threads)
serves the bench database; client threads post ``POST /api/v1/knowledge/batch/``
with 100 distinct LoCoMo-derived texts a request (dialog turns, and one in eight
a long note of several turns: varied lengths, as real traffic), so every item is
embedded by the server's own embedder. Each worker's
resident memory (VmRSS) is sampled as the embeddings add up.

Runs are kept by label in ``results/rss.json`` (``--label``; the default is
``current``), so runs of several sizes sit side by side, each the latest of its
label (earlier runs are in git's history); ``results/rss.md`` tabulates them and
``results/rss.svg`` draws them.

    .venv/bin/python bench/bench_rss.py [--quick] [--embeddings=100000] [--clients=4]
"""

from __future__ import annotations

import json
import os
import sys
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
    rss_mb,
    setup_django,
    worker_pids,
)

LOCOMO = Path(os.environ.get("CAIRN_LOCOMO", "/work/shared/bench/locomo10.json"))
BATCH = 100


def _option(argv: list[str], name: str, default: str) -> str:
    for arg in argv:
        if arg.startswith(f"--{name}="):
            return arg.split("=", 1)[1]
    return default


def _base_texts() -> list[str]:
    if LOCOMO.is_file():
        data = json.loads(LOCOMO.read_text())
        out = []
        for sample in data:
            conv = sample["conversation"]
            for key in sorted(k for k in conv if k.startswith("session_") and k[8:].isdigit()):
                out += [f"{t['speaker']}: {t['text']}" for t in conv[key]]
        return out
    # Without LoCoMo: sentences of 3 to 60 words, so lengths vary as real traffic does.
    words = "the build failed because pip could not resolve the pinned version again".split()
    return [" ".join(words[(i + j) % len(words)] for j in range(3 + i % 58)) for i in range(997)]


def _text(base: list[str], i: int) -> str:
    # Distinct per i (nothing deduplicates away), LoCoMo's wording and length spread;
    # one in eight is a long note (several turns, 150-256 tokens) as agents also store.
    if i % 8 == 7:
        turns = [base[(i * 7 + k * 131) % len(base)] for k in range(5 + i % 5)]
        return (f"Notes {i}: " + " ".join(turns))[:1900]
    return f"{base[i % len(base)]} (copy {i // len(base)} no {i})"


def _svg(runs: dict) -> str:
    """RSS of the largest worker against embeddings, one line per run."""
    width, height, left, top, plot_w, plot_h = 760, 360, 70, 40, 640, 260
    colors = ["#c0392b", "#2471a3", "#229954", "#7d3c98", "#b9770e"]
    peak = max(max(max(s["rss_mb"] or [0]) for s in run["samples"]) for run in runs.values())
    peak = max(peak, 1)
    last = max(run["samples"][-1]["embedded"] for run in runs.values()) or 1
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="12">',
        f'<text x="{left}" y="20" font-weight="bold">Largest gunicorn worker RSS (MB) '
        "against server-side embeddings</text>",
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" '
        'stroke="#333"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#333"/>',
    ]
    for frac in (0, 0.25, 0.5, 0.75, 1):
        y = top + plot_h - plot_h * frac
        out.append(
            f'<text x="{left - 8}" y="{y + 4:.0f}" text-anchor="end">{peak * frac:.0f}</text>'
        )
        x = left + plot_w * frac
        out.append(
            f'<text x="{x:.0f}" y="{top + plot_h + 16}" text-anchor="middle">{last * frac:.0f}</text>'
        )
    for n, (label, run) in enumerate(runs.items()):
        color = colors[n % len(colors)]
        points = " ".join(
            f"{left + plot_w * s['embedded'] / last:.1f},"
            f"{top + plot_h - plot_h * max(s['rss_mb'] or [0]) / peak:.1f}"
            for s in run["samples"]
        )
        out.append(f'<polyline points="{points}" fill="none" stroke="{color}" stroke-width="2"/>')
        y = top + 18 + 16 * n
        end = run["samples"][-1]
        out.append(
            f'<text x="{left + 12}" y="{y}" fill="{color}">{label}: '
            f"{max(run['samples'][0]['rss_mb'] or [0])} → {max(end['rss_mb'] or [0])} MB over "
            f"{end['embedded']} embeddings</text>"
        )
    out.append(
        f'<text x="{left + plot_w / 2:.0f}" y="{height - 8}" text-anchor="middle">'
        "embeddings</text></svg>"
    )
    return "\n".join(out)


def _markdown(runs: dict) -> str:
    lines = [
        "| run | commit | code | embeddings | embeddings/s | worker RSS at start (MB) "
        "| at end (MB) | growth (MB) | load average |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for label, run in runs.items():
        first, end = run["samples"][0], run["samples"][-1]
        lines.append(
            f"| {label} | {run['machine']['commit']} | {run.get('code', '')} | {end['embedded']} | "
            f"{run['embeddings_per_s']} | {', '.join(map(str, first['rss_mb']))} | "
            f"{', '.join(map(str, end['rss_mb']))} | "
            f"{max(end['rss_mb'] or [0]) - max(first['rss_mb'] or [0])} | "
            f"{run['machine']['load_average_at_start']} |"
        )
    lines += ["", "Samples (largest worker):", ""]
    for label, run in runs.items():
        points = ", ".join(f"{s['embedded']}: {max(s['rss_mb'] or [0])}" for s in run["samples"])
        lines.append(f"- {label}: {points}")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    import logging

    import httpx

    logging.getLogger("httpx").setLevel(logging.WARNING)
    quick = "--quick" in argv
    total = int(_option(argv, "embeddings", "5000" if quick else "100000"))
    clients = int(_option(argv, "clients", "4"))
    label = _option(argv, "label", "current")
    setup_django()
    from django.db import connection

    from memory.identity.services import agent_get_or_create, token_issue, workspace_get_or_create

    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE memory_knowledge RESTART IDENTITY CASCADE")
    workspace = workspace_get_or_create(name="bench-rss")
    agent = agent_get_or_create(workspace=workspace, name="bench-agent")
    token = token_issue(agent=agent).raw
    info = machine()
    base = _base_texts()

    server, url = gunicorn_start(free_port(), extra=["--timeout", "300"])
    client = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=300)
    statuses: dict[int, int] = {}

    def post(start: int) -> None:
        items = [
            {"content": _text(base, i), "context": f"rss-{i % 7}"}
            for i in range(start, min(start + BATCH, total))
        ]
        response = client.post("/api/v1/knowledge/batch/", json={"items": items})
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1

    try:
        # Load the model in every worker: recalls on fresh connections until each
        # worker holds it (a keep-alive connection would stay with one worker).
        pids = worker_pids(server.pid)
        for _ in range(60):
            if all((rss_mb(p) or 0) > 200 for p in pids):
                break
            httpx.post(
                f"{url}/api/v1/recall/",
                json={"query": "warm up"},
                headers={"Authorization": f"Bearer {token}", "Connection": "close"},
                timeout=60,
            )
        samples = [{"embedded": 0, "seconds": 0.0, "rss_mb": [rss_mb(p) for p in pids]}]
        print("rss", samples[-1], flush=True)
        step = max(total // 40, 500)
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=clients) as pool:
            for chunk in range(0, total, step):
                list(pool.map(post, range(chunk, min(chunk + step, total), BATCH)))
                samples.append(
                    {
                        "embedded": min(chunk + step, total),
                        "seconds": round(time.perf_counter() - started, 1),
                        "rss_mb": [rss_mb(p) for p in worker_pids(server.pid)],
                    }
                )
                print("rss", samples[-1], flush=True)
        wall = time.perf_counter() - started
    finally:
        client.close()
        server.terminate()
        server.wait(timeout=60)

    path = RESULTS / "rss.json"
    runs = json.loads(path.read_text())["runs"] if path.is_file() else {}
    runs[label] = {
        "machine": info,
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "clients": clients,
        "batch": BATCH,
        "embeddings_per_s": round(total / wall, 1),
        "statuses": statuses,
        "samples": samples,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"runs": runs}, indent=2) + "\n")
    (RESULTS / "rss.md").write_text(_markdown(runs))
    (RESULTS / "rss.svg").write_text(_svg(runs))
    print(_markdown(runs))
    drop_database()
    return 0 if set(statuses) <= {200, 201} else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
