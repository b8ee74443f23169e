"""Maintenance jobs: reconcile at scale, its pair recall, and consolidation throughput.

Writes bench/results/maintenance.json, .md and .svg (drawn by this script) and
prints the tables. Runs in the bench database (created and dropped, see common.py).

(a) Reconcile time at 10k / 50k / 100k items (``--sizes``) in one workspace:
    clustered synthetic vectors (as in bench_knowledge.py) with ~5% of the items in
    planted groups of 2-6 near-duplicates (cosine ~0.92 to each other) whose texts
    differ by a number, so the built-in judge calls them contradictions and the job
    supersedes. Timed: ``reconcile_workspace`` end to end (index scan, judging,
    actions, audit). Near-linear means 100k within 15x of 10k.
(b) Pair recall on a 5k sample: the candidate pairs reconcile finds through the HNSW
    index (bounded neighbours per item) against the exact all-pairs answer
    (numpy, every pair above the threshold).
(c) Consolidation throughput: sessions of 8 turns, three weeks old, through
    ``consolidate_run`` (extractive summaries on MiniLM embeddings, writes through
    the normal knowledge path).
"""

from __future__ import annotations

import argparse
import json
import sys

import common  # noqa: E402
from bench_knowledge import DIMS, Clustered, _copy_rows, _texts, _truncate_knowledge, _vocabulary


def _planted(rng, n: int, vocab: list[str]):
    """Vectors and texts for ``n`` items, ~5% in near-duplicate groups (contiguous)."""
    import numpy as np

    clusters = Clustered(rng, n)
    vectors = clusters.draw(n)
    texts = _texts(rng, n, vocab)
    groups = []
    i = 0
    budget = int(n * 0.05)
    while budget > 0 and i < n - 6:
        size = int(rng.integers(2, 7))
        base = vectors[i].copy()
        for j in range(size):
            noise = rng.standard_normal(DIMS).astype(np.float32)
            noise *= 0.3 / np.linalg.norm(noise)
            v = base + noise
            vectors[i + j] = v / np.linalg.norm(v)
            texts[i + j] = f"{texts[i]} runs on version {j + 1}"
        groups.append(list(range(i, i + size)))
        budget -= size
        i += size + int(rng.integers(20, 60))
    return vectors, texts, groups


def _load(n: int, rng, vocab, name: str):
    from django.db import connection

    from memory.identity.services import workspace_get_or_create

    _truncate_knowledge()
    workspace = workspace_get_or_create(name=name)
    vectors, texts, groups = _planted(rng, n, vocab)
    with connection.cursor() as cursor:
        cursor.execute("DROP INDEX IF EXISTS knowledge_embedding_hnsw")
    with common.stopwatch() as load:
        _copy_rows(workspace.pk, vectors, texts)
    with common.stopwatch() as build:
        with connection.cursor() as cursor:
            cursor.execute("SET maintenance_work_mem = '1GB'")
            cursor.execute(
                "CREATE INDEX knowledge_embedding_hnsw ON memory_knowledge "
                "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
            )
            cursor.execute("RESET maintenance_work_mem")
            cursor.execute("ANALYZE memory_knowledge")
    print(f"loaded {n:,} in {load['s']:.1f}s, HNSW in {build['s']:.1f}s", flush=True)
    return workspace, vectors, groups


def _uses_hnsw(workspace_id: int) -> bool:
    from django.db import connection

    from memory.maintenance.reconcile import _NEIGHBOURS_SQL

    sql = _NEIGHBOURS_SQL.format(after="")
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql, {"ws": workspace_id, "batch": 200, "neighbours": 8})
        plan = "\n".join(row[0] for row in cursor.fetchall())
    return "knowledge_embedding_hnsw" in plan


def bench_reconcile(n: int, rng, vocab) -> dict:
    from django.conf import settings

    from memory.maintenance.judge import HeuristicJudge
    from memory.maintenance.reconcile import reconcile_workspace

    print(f"\n== reconcile: {n:,} items ==", flush=True)
    workspace, _, groups = _load(n, rng, vocab, f"bench-reconcile-{n}")
    uses_hnsw = _uses_hnsw(workspace.pk)
    settings.CAIRN_RECONCILE_MAX_PAIRS = 10**9
    with common.stopwatch() as took:
        counts = reconcile_workspace(workspace=workspace, judge=HeuristicJudge())
    row = {
        "items": n,
        "planted_groups": len(groups),
        "planted_items": sum(len(g) for g in groups),
        "seconds": round(took["s"], 2),
        "items_per_s": round(n / took["s"], 1),
        "plan_uses_hnsw": uses_hnsw,
        **counts,
    }
    print(json.dumps(row), flush=True)
    return row


def bench_pair_recall(n: int, rng, vocab) -> dict:
    import numpy as np
    from django.conf import settings

    from memory.maintenance.reconcile import candidate_batch

    print(f"\n== pair recall: {n:,} items ==", flush=True)
    workspace, vectors, _ = _load(n, rng, vocab, f"bench-recall-{n}")
    threshold = settings.CAIRN_RECONCILE_SIMILARITY
    with common.stopwatch() as exact_took:
        sims = vectors @ vectors.T
        upper = np.triu(sims > threshold, k=1)
        exact = {(int(a) + 1, int(b) + 1) for a, b in zip(*np.nonzero(upper), strict=True)}
    out = {"items": n, "threshold": threshold, "exact_pairs": len(exact)}
    out["exact_all_pairs_seconds"] = round(exact_took["s"], 2)
    for neighbours in (4, settings.CAIRN_RECONCILE_NEIGHBOURS, 16):
        found: set[tuple[int, int]] = set()
        after = None
        with common.stopwatch() as took:
            while True:
                seeds, pairs = candidate_batch(
                    workspace_id=workspace.pk,
                    after=after,
                    batch=settings.CAIRN_RECONCILE_BATCH,
                    neighbours=neighbours,
                    threshold=threshold,
                )
                if not seeds:
                    break
                found |= {(p.a_id, p.b_id) for p in pairs}
                after = seeds[-1]
        # ids are 1..n in COPY order (RESTART IDENTITY), matching the vector rows.
        hit = len(found & exact)
        out[f"neighbours_{neighbours}"] = {
            "found": len(found),
            "true_positives": hit,
            "recall": round(hit / len(exact), 4) if exact else 1.0,
            "seconds": round(took["s"], 2),
        }
    print(json.dumps(out), flush=True)
    return out


SESSION = [
    ("user", "We need to move the {w0} service to the new cluster this sprint."),
    ("assistant", "I checked the {w0} manifests; they still point at the old {w1} cluster."),
    ("user", "I prefer blue-green deploys for the {w0} service."),
    ("assistant", "Blue-green is configured; the new cluster serves ten percent of {w0}."),
    ("user", "Keep the old {w1} cluster warm until Friday, then scale it down."),
    ("assistant", "Noted: the {w1} cluster stays up until Friday and then scales down."),
    ("user", "Also update the {w2} runbook with the new cluster address."),
    ("assistant", "The {w2} runbook now lists the new cluster address and the rollback steps."),
]


def bench_consolidate(sessions: int, rng, vocab) -> dict:
    from datetime import timedelta

    from django.utils import timezone

    from memory.identity.services import workspace_get_or_create
    from memory.maintenance.consolidate import consolidate_run
    from memory.models import ConversationTurn, JobRun

    print(f"\n== consolidate: {sessions} sessions ==", flush=True)
    _truncate_knowledge()
    workspace = workspace_get_or_create(name=f"bench-consolidate-{sessions}")
    at = timezone.now() - timedelta(days=21)
    rows = []
    for s in range(sessions):
        words = {f"w{i}": str(rng.choice(vocab[:2000])) for i in range(3)}
        for i, (role, text) in enumerate(SESSION):
            rows.append(
                ConversationTurn(
                    workspace=workspace,
                    session_id=f"bench-{s:05d}",
                    role=role,
                    turn_index=i,
                    content=text.format(**words),
                    created_at=at,
                )
            )
    ConversationTurn.objects.bulk_create(rows, batch_size=2000)
    run = JobRun.objects.create(kind="consolidate", workspace=workspace)
    with common.stopwatch() as took:
        counts = consolidate_run(run=run)
    out = {
        "sessions": sessions,
        "turns": len(rows),
        "seconds": round(took["s"], 2),
        "sessions_per_s": round(sessions / took["s"], 2),
        "turns_per_s": round(len(rows) / took["s"], 1),
        **counts,
    }
    print(json.dumps(out), flush=True)
    return out


def _svg(results: dict) -> str:
    rows = results.get("reconcile", [])
    width, height, left, top = 760, 330, 70, 50
    plot_w, plot_h = 300, 200
    parts = [
        f'<text x="20" y="28" font-size="16" font-weight="bold">Reconcile time by size '
        f"(heuristic judge, {results['machine']['cpus']} CPUs)</text>"
    ]
    top_s = max((r["seconds"] for r in rows), default=1) * 1.15
    bar = plot_w / max(1, len(rows)) * 0.6
    for i, r in enumerate(rows):
        x = left + i * plot_w / max(1, len(rows)) + bar * 0.3
        h = plot_h * r["seconds"] / top_s
        y = top + plot_h - h
        parts.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{h:.1f}" fill="#4a7bd0"/>'
        )
        parts.append(
            f'<text x="{x + bar / 2:.1f}" y="{y - 5:.1f}" font-size="11" text-anchor="middle">{r["seconds"]} s</text>'
        )
        parts.append(
            f'<text x="{x + bar / 2:.1f}" y="{top + plot_h + 16:.1f}" font-size="11" text-anchor="middle">{r["items"] // 1000}k items</text>'
        )
    parts.append(
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="#333"/>'
    )
    parts.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#333"/>')
    parts.append(
        f'<text x="{left - 8}" y="{top + 10}" font-size="11" text-anchor="end">{top_s:.0f} s</text>'
    )
    x0 = left + plot_w + 60
    lines = ["Side by side"]
    if len(rows) >= 2:
        base = rows[0]
        for r in rows[1:]:
            lines.append(
                f"{r['items'] // 1000}k vs {base['items'] // 1000}k: "
                f"{r['seconds'] / base['seconds']:.1f}x time for {r['items'] / base['items']:.0f}x items"
            )
    for r in rows:
        lines.append(
            f"{r['items'] // 1000}k: {r['items_per_s']:,} items/s, {r['pairs_found']:,} pairs"
        )
    recall = results.get("pair_recall")
    if recall:
        key = f"neighbours_{results['settings']['CAIRN_RECONCILE_NEIGHBOURS']}"
        lines.append(
            f"pair recall on {recall['items'] // 1000}k: {recall[key]['recall']:.3f} "
            f"({recall[key]['true_positives']}/{recall['exact_pairs']} exact pairs)"
        )
    cons = results.get("consolidate")
    if cons:
        lines.append(
            f"consolidate: {cons['sessions_per_s']} sessions/s ({cons['turns_per_s']} turns/s)"
        )
    for i, line in enumerate(lines):
        weight = "bold" if i == 0 else "normal"
        parts.append(
            f'<text x="{x0}" y="{top + 10 + i * 20}" font-size="12" font-weight="{weight}">{line}</text>'
        )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>'
        + "".join(parts)
        + "</svg>\n"
    )  # fmt: skip


def report(results: dict) -> str:
    out = [f"# Maintenance benchmarks\n\nMachine: `{json.dumps(results['machine'])}`\n"]
    rows = results.get("reconcile", [])
    if rows:
        out.append("## Reconcile time by size\n")
        base = rows[0]
        for r in rows:
            r["time_vs_smallest"] = f"{r['seconds'] / base['seconds']:.1f}x"
            r["size_vs_smallest"] = f"{r['items'] / base['items']:.0f}x"
        cols = ["items", "size_vs_smallest", "seconds", "time_vs_smallest", "items_per_s"]
        cols += ["pairs_found", "contradictions_superseded", "duplicates_merged", "plan_uses_hnsw"]
        out.append(common.table(rows, cols) + "\n")
    recall = results.get("pair_recall")
    if recall:
        out.append(
            f"## Pair recall against exact all-pairs ({recall['items']:,} items, "
            f"cosine > {recall['threshold']})\n\nExact pairs: {recall['exact_pairs']} "
            f"(numpy all-pairs in {recall['exact_all_pairs_seconds']} s)\n"
        )
        table = [
            {"neighbours": k.split("_")[1], **v}
            for k, v in recall.items()
            if k.startswith("neighbours_")
        ]
        out.append(
            common.table(table, ["neighbours", "found", "true_positives", "recall", "seconds"])
            + "\n"
        )
    cons = results.get("consolidate")
    if cons:
        out.append("## Consolidation throughput\n")
        out.append(
            common.table(
                [cons],
                [
                    "sessions",
                    "turns",
                    "seconds",
                    "sessions_per_s",
                    "turns_per_s",
                    "summaries",
                    "extracted",
                ],
            )
            + "\n"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,50000,100000")
    parser.add_argument("--recall-items", type=int, default=5000)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument(
        "--quick", action="store_true", help="2k/5k/10k items, 2k sample, 40 sessions"
    )
    parser.add_argument("--keep-db", action="store_true")
    parser.add_argument("--out", default="maintenance")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.recall_items, args.sessions = "2000,5000,10000", 2000, 40
    common.setup_django()
    import numpy as np
    from django.conf import settings

    rng = np.random.default_rng(20261201)
    vocab = _vocabulary()
    results: dict = {"machine": common.machine()}
    results["settings"] = {
        name: getattr(settings, name)
        for name in dir(settings)
        if name.startswith("CAIRN_RECONCILE_")
    }
    try:
        results["pair_recall"] = bench_pair_recall(args.recall_items, rng, vocab)
        results["reconcile"] = [bench_reconcile(int(n), rng, vocab) for n in args.sizes.split(",")]
        results["consolidate"] = bench_consolidate(args.sessions, rng, vocab)
    finally:
        if not args.keep_db:
            common.drop_database()
    common.RESULTS.mkdir(parents=True, exist_ok=True)
    out = common.RESULTS / args.out
    text = report(results)
    out.with_suffix(".json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    out.with_suffix(".svg").write_text(_svg(results))
    out.with_suffix(".md").write_text(text + "\n")
    print("\n" + text)
    print(f"\nwrote {out}.json, .svg and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
