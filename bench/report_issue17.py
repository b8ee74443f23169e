"""Issue 17's numbers, before and after, side by side: ``results/issue17.md`` and
``results/issue17.svg``, from the result files the benches wrote (ingest.json,
outcomes.json, rss.json) and the issue's own figures as "before"; with
``outcomes-before.json`` (bench_outcomes.py run on the code before the change, on
the same machine just before) those rows compare like with like.

``run_all.py`` runs this after the benches; on its own:

    .venv/bin/python bench/report_issue17.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"

# As the issue measured them (2-core machine, the code before issue 17).
BEFORE = {
    "batch remember (items/s)": "11–35",
    "batch remember × raw embedder": "≈0.01–0.035 (11–35/s against ≈1,000/s)",
    "turns (items/s)": "74 (one per request, 6 clients)",
    "outcomes/s, 8 clients": "164",
    "queries per outcome": "≈23 (counted on the old code: 13, 21 with an Idempotency-Key)",
    "worker RSS over server-side embeddings": "0.35 GB → 3 GB over 56k",
    "LoCoMo evidence-turn any@5": "0.543 (conversations/search), 0.593 (/recall/)",
    "LoCoMo session any@5": "0.799 (conversations/search), 0.863 (/recall/)",
    "LoCoMo category 3 evidence-turn any@5": "0.370",
}


def _recall_default() -> dict | None:
    """The default variant's row of recall.json (bench_recall.py), if it ran."""
    recall = _load("recall.json")
    if not recall:
        return None
    for row in recall["results"]:
        if row["variant"] == recall["configured_variant"]:
            return row
    return None


def _knowledge_advice() -> tuple[dict, dict] | None:
    """The RRF 0.3/0.7 row and the configured row of bench_knowledge.py's LoCoMo grid,
    from the newest result file that has the advice fixture's hit@3."""
    for name in ("knowledge.json", "knowledge-advice-locomo.json"):
        locomo = (_load(name) or {}).get("locomo") or {}
        rows = {r["config"]: r for r in locomo.get("results", [])}
        before, after = rows.get("hybrid 0.3/0.7 (OR)"), rows.get(locomo.get("configured"))
        if before and after and "advice_hit_at_3" in before:
            return before, after
    return None


def _load(name: str) -> dict | None:
    path = RESULTS / name
    return json.loads(path.read_text()) if path.is_file() else None


def rows() -> list[tuple[str, str, str]]:
    out = []
    ingest, outcomes, rss = _load("ingest.json"), _load("outcomes.json"), _load("rss.json")
    if ingest:
        b, t = ingest["batch_remember"], ingest["batch_turns"]
        out.append(("batch remember (items/s)", BEFORE["batch remember (items/s)"],
                    f"{b['items_per_s']} (raw embedder {ingest['raw_embedder']['items_per_s']} "
                    "in the same run)"))  # fmt: skip
        out.append(("batch remember × raw embedder", BEFORE["batch remember × raw embedder"],
                    f"{b['ratio_to_raw_embedder']}"))  # fmt: skip
        out.append(("turns (items/s)", BEFORE["turns (items/s)"],
                    f"{t['turns_per_s']} (500 per request, 2 clients)"))  # fmt: skip
        others = [(m, ingest[f"batch_turns_{m}"]) for m in ingest.get("other_turn_contexts", [])]
        out.append(("batch turns × raw embedder (target ≥ 0.7)", "–",
                    f"{t['ratio_to_raw_embedder']} (`{ingest.get('turn_context', 'previous')}`)"
                    + "".join(f"; {o['ratio_to_raw_embedder']} with `{m}`" for m, o in others)))  # fmt: skip
    if outcomes:
        r = outcomes["results"]
        bare = r.get("bare DRF view", {})
        conc = r.get("concurrent", {})
        free = r.get("no lesson in play", {})
        out.append((
            "outcomes/s, 8 clients",
            BEFORE["outcomes/s, 8 clients"],
            f"{conc.get('outcomes_per_s')} ({conc.get('x_bare')}× a bare DRF view at "
            f"{bare.get('requests_per_s')}/s in the same run; {free.get('outcomes_per_s')} "
            "with no lesson in play)",
        ))  # fmt: skip
    old = _load("outcomes-before.json")
    if outcomes and old:
        for run in ("concurrent", "harness", "no lesson in play", "with retries"):
            a, b = outcomes["results"].get(run), old["results"].get(run)
            if a and b:
                out.append((
                    f"outcomes/s, 8 clients, {run}: the code before issue 17's outcome work "
                    f"({old['machine'].get('commit') or 'outcomes-before.json'}) against this "
                    "code's latest run, the same day (× the bare DRF view of each code in its "
                    "run, and the load at the run's start)",
                    f"{b['outcomes_per_s']} ({_x_bare(old, b)}×, load "
                    f"{b['load_average_at_start'][0]})",
                    f"{a['outcomes_per_s']} ({_x_bare(outcomes, a)}×, load "
                    f"{a['load_average_at_start'][0]})",
                ))  # fmt: skip
    out.append(("queries per outcome", BEFORE["queries per outcome"],
                "2 with nothing in play (token, insert), and for an agent token's outcome with "
                "a lesson in play (what it named read and its recency written with others' in "
                "the background); "
                "3 for a harness outcome confirming a lesson at its ceiling (no transaction, "
                "no lock); 7 for one that moves its lesson (11 with an Idempotency-Key), "
                "pinned by tests/agents/test_outcomes_queries.py"))  # fmt: skip
    recall = _recall_default()
    if recall:
        conv, grouped = recall["conversations"], recall.get("sessions", {})
        out.append(("LoCoMo evidence-turn any@5 (target ≥ 0.75)",
                    BEFORE["LoCoMo evidence-turn any@5"],
                    f"{conv['turn_any_at_5']} (conversations/search and /recall/?sources=turns)"))  # fmt: skip
        out.append(("LoCoMo session any@5 (target ≥ 0.95)", BEFORE["LoCoMo session any@5"],
                    f"{grouped.get('session_any_at_5')} (group=session); "
                    f"{conv['session_any_at_5']} from the top 5 turns"))  # fmt: skip
        out.append(("LoCoMo category 3 evidence-turn any@5",
                    BEFORE["LoCoMo category 3 evidence-turn any@5"],
                    f"{conv['by_category']['3 open-domain']['turn_any_at_5']}"))  # fmt: skip
    advice = _knowledge_advice()
    if advice:
        before, after = advice
        out.append((
            "advice questions: answer in /recall/'s top 3 (tests/memory/knowledge/advice_fixture.py)",
            f"{round(before['advice_hit_at_3'] * 20)} of 20 (RRF 0.3/0.7)",
            f"{round(after['advice_hit_at_3'] * 20)} of 20 ({after['config']}); LoCoMo knowledge "
            f"hit@5 {before['hit_at_5']} → {after['hit_at_5']}, paraphrase hit@3 "
            f"{before['paraphrase_hit_at_3']} → {after['paraphrase_hit_at_3']}",
        ))  # fmt: skip
    if rss:
        for label, run in rss["runs"].items():
            first, last = run["samples"][0], run["samples"][-1]
            out.append((
                f"worker RSS, {label} (largest worker)",
                BEFORE["worker RSS over server-side embeddings"] if label == "before" else "",
                f"{max(first['rss_mb'])} MB → {max(last['rss_mb'])} MB over "
                f"{last['embedded']} embeddings",
            ))  # fmt: skip
    return out


def _svg(data: list[tuple[str, float, float, str]]) -> str:
    """Paired bars (before, after) per metric, each metric scaled to its own maximum."""
    row_h, left, bar_w = 54, 330, 330
    height = 40 + row_h * len(data) + 20
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="760" height="{height}" '
        'font-family="sans-serif" font-size="12">',
        '<text x="10" y="20" font-weight="bold">Issue 17: before (the issue) and after '
        "(this bench), each metric on its own scale</text>",
        '<rect x="500" y="8" width="12" height="12" fill="#c0392b"/>'
        '<text x="516" y="18">before</text>',
        '<rect x="580" y="8" width="12" height="12" fill="#229954"/>'
        '<text x="596" y="18">after</text>',
    ]
    for i, (label, before, after, unit) in enumerate(data):
        y = 40 + row_h * i
        top = max(before, after) or 1
        out.append(f'<text x="10" y="{y + 22}">{label}</text>')
        for j, (value, color) in enumerate(((before, "#c0392b"), (after, "#229954"))):
            w = bar_w * value / top
            yy = y + j * 20
            out.append(f'<rect x="{left}" y="{yy}" width="{w:.1f}" height="16" fill="{color}"/>')
            out.append(f'<text x="{left + w + 6:.1f}" y="{yy + 12}">{value:g} {unit}</text>')
    out.append("</svg>")
    return "\n".join(out)


def chart_data() -> list[tuple[str, float, float, str]]:
    data = []
    ingest, outcomes, rss = _load("ingest.json"), _load("outcomes.json"), _load("rss.json")
    old = _load("outcomes-before.json")
    if outcomes and old:
        for run in ("harness", "no lesson in play"):
            if run in outcomes["results"] and run in old["results"]:
                data.append((f"outcomes/s, {run} (same machine)",
                             float(old["results"][run]["outcomes_per_s"]),
                             float(outcomes["results"][run]["outcomes_per_s"]), "/s"))  # fmt: skip
    # Counted by tests/agents/test_outcomes_queries.py (before: the same count on the old code).
    data.append(("SQL queries, outcome moving a lesson", 13.0, 7.0, ""))
    data.append(("… with an Idempotency-Key", 21.0, 11.0, ""))
    recall = _recall_default()
    if recall:
        conv, grouped = recall["conversations"], recall.get("sessions", {})
        data.append(("LoCoMo evidence-turn any@5", 0.543, float(conv["turn_any_at_5"]), ""))
        if grouped.get("session_any_at_5") is not None:
            data.append(("LoCoMo session any@5 (group=session)", 0.799,
                         float(grouped["session_any_at_5"]), ""))  # fmt: skip
    if ingest:
        data.append(("turns/s", 74.0, float(ingest["batch_turns"]["turns_per_s"]), "/s"))
        data.append(("batch remember × raw embedder (best case before)", 0.035,
                     float(ingest["batch_remember"]["ratio_to_raw_embedder"]), "×"))  # fmt: skip
    if rss and "current" in rss["runs"]:
        after = rss["runs"]["current"]["samples"]
        before = rss["runs"].get("before", {}).get("samples")
        data.append(("worker RSS growth (MB)",
                     float(max(before[-1]["rss_mb"]) - max(before[0]["rss_mb"])) if before
                     else 2650.0,
                     float(max(after[-1]["rss_mb"]) - max(after[0]["rss_mb"])), "MB"))  # fmt: skip
    return data


def _x_bare(run_set: dict, run: dict) -> float:
    """A run's outcomes/s as a share of the bare view's requests/s in the same bench run."""
    bare = run_set["results"]["bare DRF view"]["requests_per_s"]
    return round(run["outcomes_per_s"] / bare, 2)


def main(argv: list[str]) -> int:
    table = ["| metric | before (issue 17) | after (this bench) |", "| --- | --- | --- |"]
    table += [f"| {m} | {b} | {a} |" for m, b, a in rows()]
    (RESULTS / "issue17.md").write_text("\n".join(table) + "\n")
    (RESULTS / "issue17.svg").write_text(_svg(chart_data()))
    print("\n".join(table))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
