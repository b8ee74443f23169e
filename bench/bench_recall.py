"""Conversation recall on LoCoMo, through the API, variant by variant in one run.

The 10 LoCoMo conversations go in the way an agent would store them: each
session through the batch form of ``POST /api/v1/sessions/{id}/turns/`` (one
call per session, every turn with its session's date as ``at``, the speaker's
name before the text, a shared photo as its caption). The 1,535 questions of
categories 1–4 are then asked through ``GET /api/v1/conversations/search/``
(turns, and ``group=session``) and ``POST /api/v1/recall/`` with
``sources=turns``, each scoped to its conversation's context.

Scores: evidence-turn any@5 (some evidence turn among the first five hits),
session any@5 (some evidence session among the sessions of the first five turn
hits, or among the first five sessions with ``group=session``), per category,
and latency per request. Variants (settings of memory/knowledge/turn_search.py
and what a turn's vector is computed from) run side by side on the same data;
each is also scored on the 40-fact paraphrase fixture stored as turns (hit@3),
so a variant that only fits LoCoMo shows.

Writes bench/results/recall.json, recall.md and recall.svg. Usage (from the
repository root, services running)::

    .venv/bin/python bench/bench_recall.py            # every variant
    .venv/bin/python bench/bench_recall.py --quick    # 3 conversations, fewer variants
    .venv/bin/python bench/bench_recall.py --halves   # issue 54: tune/report halves
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import common  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

LOCOMO = Path("/work/shared/bench/locomo10.json")
_DIA = re.compile(r"D\d+:\d+")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}

# (name, what a turn's vector is computed from, turn_search settings)
DEFAULT = {
    "CAIRN_TURN_TEXT_SCORING": "bm25",
    "CAIRN_TURN_FUSION": "score",  # both scores for every candidate
    "CAIRN_TURN_VECTOR_WEIGHT": 0.4,
    "CAIRN_TURN_TEXT_WEIGHT": 0.6,
    "CAIRN_TURN_CANDIDATE_MIN": 50,
    "CAIRN_TURN_REPLY_CREDIT": 0.5,
    "CAIRN_TURN_TIME_BOOST": 0.4,
    "CAIRN_TURN_ENTITY_BOOST": 0.2,
    "CAIRN_TURN_QUESTION_PENALTY": 0.1,
    "CAIRN_TURN_QUESTION_CREDIT": 0.2,
    "CAIRN_TURN_BEFORE_CREDIT": 0.0,
    "CAIRN_TURN_ANSWER_BOOST": 0.3,
    "CAIRN_TURN_SESSION_TEMPERATURE": 0.2,  # group=session: soft maximum of the turns
    "CAIRN_TURN_SESSION_COVERAGE": 0.4,  # ... + 0.4 × its share of the query's words
}
# Rows measured before a knob existed ran without it (merged runs keep their rows).
ABSENT = {
    "CAIRN_TURN_FUSION": "minmax",
    "CAIRN_TURN_QUESTION_PENALTY": 0.0,
    "CAIRN_TURN_QUESTION_CREDIT": 0.0,
    "CAIRN_TURN_BEFORE_CREDIT": 0.0,
    "CAIRN_TURN_ANSWER_BOOST": 0.0,
    "CAIRN_TURN_SESSION_TEMPERATURE": 0.0,
    "CAIRN_TURN_SESSION_COVERAGE": 0.0,
}
# group=session by its turns alone, before the soft maximum: best turn + 0.3 × second best.
BEST_PLUS_SECOND = {"CAIRN_TURN_SESSION_TEMPERATURE": 0.0, "CAIRN_TURN_SESSION_COVERAGE": 0.0}
# group=session by a soft maximum of its turns alone.
TURNS_ONLY = {"CAIRN_TURN_SESSION_COVERAGE": 0.0}
ALL_ENDPOINTS = ("conversations", "sessions", "recall")


def _variants(quick: bool) -> list[tuple[str, str, dict, tuple]]:
    """(name, what a turn's vector is computed from, settings, endpoints asked)."""
    # The first generation: 0.5/0.5, 20 candidates per list, no boosts.
    plain = {
        **ABSENT,
        "CAIRN_TURN_VECTOR_WEIGHT": 0.5,
        "CAIRN_TURN_TEXT_WEIGHT": 0.5,
        "CAIRN_TURN_CANDIDATE_MIN": 20,
        "CAIRN_TURN_TIME_BOOST": 0.0,
        "CAIRN_TURN_ENTITY_BOOST": 0.0,
    }
    search = ("conversations",)
    rows = [
        ("vector only, turn text", "none", {**plain, "CAIRN_TURN_TEXT_WEIGHT": 0.0}, search),
        ("vector only, contextual", "full", {**plain, "CAIRN_TURN_TEXT_WEIGHT": 0.0}, search),
        (
            "text only, ts_rank_cd (the old search's scoring)",
            "full",
            {**plain, "CAIRN_TURN_VECTOR_WEIGHT": 0.0, "CAIRN_TURN_TEXT_SCORING": "ts_rank_cd"},
            search,
        ),
        ("text only, BM25", "full", {**plain, "CAIRN_TURN_VECTOR_WEIGHT": 0.0}, search),
        (
            "RRF 0.3/0.7 ts_rank_cd, turn text (knowledge recall's)",
            "none",
            {
                **plain,
                "CAIRN_TURN_FUSION": "rrf",
                "CAIRN_TURN_VECTOR_WEIGHT": 0.3,
                "CAIRN_TURN_TEXT_WEIGHT": 0.7,
                "CAIRN_TURN_TEXT_SCORING": "ts_rank_cd",
            },
            ALL_ENDPOINTS,
        ),
        ("score 0.5/0.5 BM25, turn text", "none", plain, search),
        ("RRF 0.5/0.5 BM25, contextual", "full", {**plain, "CAIRN_TURN_FUSION": "rrf"}, search),
        ("score 0.5/0.5 BM25, contextual", "full", plain, search),
        (
            "score 0.5/0.5 BM25, contextual, reply credit 0.5",
            "full",
            {**plain, "CAIRN_TURN_REPLY_CREDIT": 0.5},
            search,
        ),
        (
            "score 0.4/0.6 BM25, contextual, 50 candidates",
            "full",
            {
                **ABSENT,
                "CAIRN_TURN_TIME_BOOST": 0.0,
                "CAIRN_TURN_ENTITY_BOOST": 0.0,
                "CAIRN_TURN_REPLY_CREDIT": 0.0,
            },
            search,
        ),
        (
            "… + time boost 0.4",
            "full",
            {**ABSENT, "CAIRN_TURN_ENTITY_BOOST": 0.0, "CAIRN_TURN_REPLY_CREDIT": 0.0},
            search,
        ),
        (
            "… + entity/number boost 0.2",
            "full",
            {**ABSENT, "CAIRN_TURN_REPLY_CREDIT": 0.0},
            ALL_ENDPOINTS,
        ),
        ("… + reply credit 0.5", "full", ABSENT, ALL_ENDPOINTS),
        (
            "… + asking turns pass to their replies (0.1 kept back, 0.2 passed)",
            "full",
            {**BEST_PLUS_SECOND, "CAIRN_TURN_FUSION": "minmax", "CAIRN_TURN_ANSWER_BOOST": 0.0},
            ("conversations",),
        ),
        (
            "… + asking turns, + answer kind 0.3 (when → time words, how many → numbers)",
            "full",
            {**BEST_PLUS_SECOND, "CAIRN_TURN_FUSION": "minmax"},
            ALL_ENDPOINTS,
        ),
        (
            "… + both scores for every candidate, cosine scaled from 0.2",
            "full",
            BEST_PLUS_SECOND,
            ALL_ENDPOINTS,
        ),
        (
            "… + in the vector only the turn before, cut to 100 characters",
            "previous100",
            BEST_PLUS_SECOND,
            ALL_ENDPOINTS,
        ),
        (
            "… + the turn before carried in the vector, not its text (0.5 of its vector)",
            "running",
            BEST_PLUS_SECOND,
            ALL_ENDPOINTS,
        ),
        (
            "… + in the text the first 40 characters of the turn before, 0.2 of its vector carried",
            "brief",
            BEST_PLUS_SECOND,
            ALL_ENDPOINTS,
        ),
        (
            "… + in the text the last 40 characters of the turn before, 0.2 of its vector carried",
            "ending",
            BEST_PLUS_SECOND,
            ALL_ENDPOINTS,
        ),
        (
            "… + in the text the last 60 characters of the turn before, 0.2 of its vector carried",
            "ending60",
            BEST_PLUS_SECOND,
            ("conversations",),
        ),
        (
            "… + the turn before cut to 100 characters; sessions by a soft maximum of their turns",
            "previous100",
            TURNS_ONLY,
            ("conversations", "sessions"),
        ),
        (
            "… + the turn before cut to 80 characters; sessions by a soft maximum of their turns",
            "previous",
            TURNS_ONLY,
            ("conversations", "sessions"),
        ),
        (
            "… + each turn's vector from its own tokens, the session read in windows of 64",
            "window",
            TURNS_ONLY,
            ("conversations", "sessions"),
        ),
        (
            "… + a session lifted by 0.5 × its idf-weighted share of the question's words",
            "window",
            {"CAIRN_TURN_SESSION_COVERAGE": 0.5},
            ("conversations", "sessions"),
        ),
        (
            "… + a month's events counted three weeks on, day spans and weeks read; lift 0.4",
            "window",
            {},
            ("conversations", "sessions"),
        ),
        (
            "0.4/0.6 + time + entity lifts, turn text (no context in the vector)",
            "none",
            {**ABSENT, "CAIRN_TURN_REPLY_CREDIT": 0.0},
            search,
        ),
    ]
    if quick:
        keep = {0, 3, 5, 24, 25}
        rows = [r for i, r in enumerate(rows) if i in keep]
    return rows


# --------------------------------------------------------------------------- data


def _session_date(raw: str) -> datetime:
    # "1:56 pm on 8 May, 2023"
    return datetime.strptime(raw.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def _locomo(limit: int | None):
    data = json.loads(LOCOMO.read_text())
    if limit:
        data = data[:limit]
    conversations, questions = [], []
    report = {"empty_evidence": 0, "unresolved_ids": 0, "dropped_items": 0}
    for index, sample in enumerate(data):
        conv = sample["conversation"]
        speakers = {conv["speaker_a"]: "user", conv["speaker_b"]: "assistant"}
        sessions, known = [], set()
        for key in sorted(
            (k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k[8:])
        ):
            number = int(key[8:])
            start = _session_date(conv[f"{key}_date_time"])
            turns = []
            for i, turn in enumerate(conv[key]):
                text = f"{turn['speaker']}: {turn['text']}"
                if turn.get("blip_caption"):
                    text += f" [shares a photo: {turn['blip_caption']}]"
                known.add(turn["dia_id"])
                turns.append(
                    {
                        "dia_id": turn["dia_id"],
                        "role": speakers.get(turn["speaker"], "user"),
                        "content": text,
                        "turn_index": i,
                        "at": (start + timedelta(seconds=30 * i)).isoformat(),
                    }
                )
            sessions.append({"id": f"{sample['sample_id']}-s{number}", "turns": turns})
        conversations.append({"sample_id": sample["sample_id"], "sessions": sessions})
        for qa in sample["qa"]:
            if qa["category"] == 5:
                continue
            evidence = set()
            for raw in qa.get("evidence") or []:
                for dia in _DIA.findall(raw):
                    if dia in known:
                        evidence.add(dia)
                    else:
                        report["unresolved_ids"] += 1
            if not qa.get("evidence"):
                report["empty_evidence"] += 1
            if not evidence:
                report["dropped_items"] += 1
                continue
            questions.append(
                {
                    # Asked when the conversation is over: its last session's time.
                    "as_of": (start + timedelta(days=1)).isoformat(),
                    # Even conversations (0, 2, …) tune, odd ones report (issue 54).
                    "half": "tune" if index % 2 == 0 else "report",
                    "context": f"locomo:{sample['sample_id']}",
                    "sample_id": sample["sample_id"],
                    "question": qa["question"],
                    "category": qa["category"],
                    "evidence": evidence,
                    "sessions": {f"{sample['sample_id']}-s{d.split(':')[0][1:]}" for d in evidence},
                }
            )
    return conversations, questions, report


def _client(name: str):
    from django.test import Client

    from memory.identity.services import agent_get_or_create, token_issue, workspace_get_or_create

    workspace = workspace_get_or_create(name=name)
    agent = agent_get_or_create(workspace=workspace, name="bench")
    return Client(HTTP_AUTHORIZATION=f"Bearer {token_issue(agent=agent).raw}")


def _ingest(client, conversations) -> tuple[dict[int, str], dict]:
    """Every session in one batch call; returns turn id → dia_id and timings."""
    dia_of: dict[int, str] = {}
    turns = 0
    started = time.perf_counter()
    for conv in conversations:
        for session in conv["sessions"]:
            body = {
                "turns": [
                    {k: t[k] for k in ("role", "content", "turn_index", "at")}
                    | {"context": f"locomo:{conv['sample_id']}"}
                    for t in session["turns"]
                ]
            }
            response = client.post(
                f"/api/v1/sessions/{session['id']}/turns/",
                data=json.dumps(body),
                content_type="application/json",
            )
            if response.status_code not in (200, 201):
                raise RuntimeError(f"turns answered {response.status_code}: {response.content}")
            for row, turn in zip(response.json()["turns"], session["turns"], strict=True):
                dia_of[row["id"]] = f"{conv['sample_id']}:{turn['dia_id']}"
            turns += len(session["turns"])
    seconds = time.perf_counter() - started
    return dia_of, {"turns": turns, "seconds": round(seconds, 1), "per_s": round(turns / seconds)}


# --------------------------------------------------------------------------- asking


def _ask(client, endpoint: str, q: dict, limit: int = 5) -> tuple[list[int], list[str]]:
    """(turn ids in rank order, session ids in rank order) of one question."""
    as_of = {"as_of": q["as_of"]} if q.get("as_of") else {}
    if endpoint == "recall":
        body = {
            "query": q["question"],
            "top_k": limit,
            "context": q["context"],
            "sources": "turns",
            **as_of,
        }
        response = client.post(
            "/api/v1/recall/", data=json.dumps(body), content_type="application/json"
        )
    else:
        params = {"q": q["question"][:500], "context": q["context"], "limit": limit, **as_of}
        if endpoint == "sessions":
            params["group"] = "session"
        response = client.get("/api/v1/conversations/search/", params)
    if response.status_code != 200:
        raise RuntimeError(f"{endpoint} answered {response.status_code}: {response.content[:300]}")
    data = response.json()
    ids = [r["id"] for r in data["results"]]
    if endpoint == "sessions":
        return ids, [s["session_id"] for s in data["sessions"]]
    sessions: list[str] = []
    for r in data["results"]:
        if r["session_id"] not in sessions:
            sessions.append(r["session_id"])
    return ids, sessions


def _score(client, endpoint: str, questions, dia_of) -> dict:
    import numpy as np

    turn_hits, session_hits, latencies = [], [], []
    by_category: dict[int, list[tuple[float, float]]] = {}
    for q in questions:
        started = time.perf_counter()
        ids, sessions = _ask(client, endpoint, q)
        latencies.append(time.perf_counter() - started)
        ranked = {dia_of.get(i) for i in ids[:5]}
        evidence = {f"{q['sample_id']}:{d}" for d in q["evidence"]}
        t = float(bool(evidence & ranked)) if endpoint != "sessions" else float("nan")
        s = float(bool(q["sessions"] & set(sessions[:5])))
        turn_hits.append(t)
        session_hits.append(s)
        by_category.setdefault(q["category"], []).append((t, s))
    out = {
        "endpoint": endpoint,
        "session_any_at_5": round(float(np.mean(session_hits)), 4),
        "latency_ms": common.percentiles(latencies),
        "by_category": {
            f"{c} {CATEGORIES[c]}": {
                "n": len(v),
                "turn_any_at_5": None
                if endpoint == "sessions"
                else round(float(np.mean([x[0] for x in v])), 4),
                "session_any_at_5": round(float(np.mean([x[1] for x in v])), 4),
            }
            for c, v in sorted(by_category.items())
        },
    }
    if endpoint != "sessions":
        out["turn_any_at_5"] = round(float(np.mean(turn_hits)), 4)
    return out


def _paraphrase_store(client) -> list[int]:
    """The 40-fact paraphrase fixture, each fact stored as a turn; their ids."""
    from tests.memory.knowledge.recall_fixture import FACTS

    body = {
        "turns": [
            {"role": "user", "content": fact, "turn_index": i} for i, (fact, _) in enumerate(FACTS)
        ]
    }
    response = client.post(
        "/api/v1/sessions/paraphrase/turns/", data=json.dumps(body), content_type="application/json"
    )
    return [row["id"] for row in response.json()["turns"]]


def _paraphrase_hits(client, ids: list[int]) -> float:
    """hit@3 of the fixture's questions through conversations/search/."""
    from tests.memory.knowledge.recall_fixture import FACTS

    hits = 0
    for turn_id, (_, question) in zip(ids, FACTS, strict=True):
        found = client.get(
            "/api/v1/conversations/search/", {"q": question, "session_id": "paraphrase", "limit": 3}
        ).json()["results"]
        hits += turn_id in [r["id"] for r in found]
    return round(hits / len(FACTS), 4)


def bench(limit: int | None, quick: bool, only: str = "") -> dict:
    from django.test import override_settings
    from tqdm import tqdm

    conversations, questions, report = _locomo(limit)
    variants = _variants(quick)
    if only:
        variants = [v for v in variants if any(part in v[0] for part in only.split("|"))]
    stores: dict[str, tuple] = {}
    ingest = {}
    for mode in sorted({v[1] for v in variants}):
        with override_settings(CAIRN_TURN_EMBED_CONTEXT=mode):
            client = _client(f"bench-recall-{mode}")
            dia_of, timing = _ingest(client, conversations)
            para_client = _client(f"bench-paraphrase-{mode}")
            para_ids = _paraphrase_store(para_client)
        stores[mode] = (client, dia_of, para_client, para_ids)
        ingest[mode] = timing
        print(f"ingested ({mode}): {timing}", flush=True)
    results = []
    for name, mode, overrides, endpoints in variants:
        client, dia_of, para_client, para_ids = stores[mode]
        settings_used = {**DEFAULT, **overrides}
        row = {"variant": name, "turn_embedding": mode, "settings": settings_used}
        with override_settings(CAIRN_TURN_EMBED_CONTEXT=mode, **settings_used):
            row["paraphrase_hit_at_3"] = _paraphrase_hits(para_client, para_ids)
            for endpoint in endpoints:
                row[endpoint] = _score(
                    client,
                    endpoint,
                    tqdm(questions, desc=f"{name[:30]} {endpoint}", mininterval=5),
                    dia_of,
                )
        results.append(row)
        c = row["conversations"]
        print(
            f"  {name:58s} turn@5 {c['turn_any_at_5']:.3f} session@5 {c['session_any_at_5']:.3f} "
            f"cat3 {c['by_category']['3 open-domain']['turn_any_at_5']:.3f} "
            f"paraphrase@3 {row['paraphrase_hit_at_3']:.3f}",
            flush=True,
        )
    return {
        "unit": "dialog turn (evidence) and session",
        "conversations": len(conversations),
        "turns": sum(len(s["turns"]) for c in conversations for s in c["sessions"]),
        "questions": len(questions),
        "questions_by_category": {
            f"{c} {CATEGORIES[c]}": sum(q["category"] == c for q in questions) for c in CATEGORIES
        },
        "data_report": report,
        "ingest": ingest,
        "results": results,
    }


# --------------------------------------------------------------------------- issue 54

# Switched off one at a time, on the configured ranking (time window: the lift of the
# period a question names, read at as_of; diversity: coverage across sessions).
HALVES_VARIANTS = [
    # The session diversity applies to group=session only (turn lists lost with it).
    ("time window and diversity on (the default)", {}, ALL_ENDPOINTS, True),
    ("diversity off", {"CAIRN_TURN_SESSION_DIVERSITY": 0.0}, ("conversations", "sessions"), True),
    ("time window off", {"CAIRN_TURN_TIME_BOOST": 0.0}, ("conversations", "sessions"), True),
    (
        "time window and diversity off",
        {"CAIRN_TURN_TIME_BOOST": 0.0, "CAIRN_TURN_SESSION_DIVERSITY": 0.0},
        ("conversations", "sessions"),
        True,
    ),
    ("as_of not sent (the server's now)", {}, ("conversations", "sessions"), False),
]
# The conversations the limit check asks (issue 54 counted 61 of their 233 questions).
STABILITY_CONVERSATIONS = ("conv-26", "conv-30")
STABILITY_PAGES = {"conversations": (5, 200), "sessions": (5, 50), "recall": (5, 50)}


def _stability(client, questions) -> dict:
    """Questions whose first five depend on the page size, per endpoint."""
    out = {}
    for endpoint, (small, large) in STABILITY_PAGES.items():
        differing = []
        for q in questions:
            few = _ask(client, endpoint, q, limit=small)
            many = _ask(client, endpoint, q, limit=large)
            key = 1 if endpoint == "sessions" else 0
            if few[key][:small] != many[key][:small]:
                differing.append(q["question"])
        out[endpoint] = {"questions": len(questions), "differing": len(differing),
                         "examples": differing[:5]}  # fmt: skip
    return out


def _write_halves(results: dict) -> str:
    out = common.RESULTS / "recall-halves"
    out.with_suffix(".json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    text = report_halves(results)
    out.with_suffix(".md").write_text(text + "\n")
    return text


def bench_halves(limit: int | None, only: str = "", results: dict | None = None) -> dict:
    """Every variant of HALVES_VARIANTS on both halves, then the page-size check; the
    result files are rewritten after each step, so a run cut short keeps what it did."""
    from django.test import override_settings
    from tqdm import tqdm

    conversations, questions, report = _locomo(limit)
    client = _client("bench-recall-halves")
    dia_of, timing = _ingest(client, conversations)
    print(f"ingested: {timing}", flush=True)
    out = results if results is not None else {}
    out.update(
        {
            "conversations": len(conversations),
            "turns": sum(len(s["turns"]) for c in conversations for s in c["sessions"]),
            "questions": {h: sum(q["half"] == h for q in questions) for h in ("tune", "report")},
            "data_report": report,
            "ingest": timing,
            "results": [],
        }
    )
    results = out["results"]
    # The page-size check first (issue 54's first target), on the configured ranking.
    picked = [q for q in questions if q["sample_id"] in STABILITY_CONVERSATIONS]
    stability = _stability(client, tqdm(picked, desc="page sizes", mininterval=10))
    print(f"  top 5 depending on the page size: {stability}", flush=True)
    out.update({"stability": stability, "stability_questions": len(picked)})
    _write_halves(out)
    variants = [v for v in HALVES_VARIANTS if not only or any(p in v[0] for p in only.split("|"))]
    for name, overrides, endpoints, with_as_of in variants:
        row: dict = {"variant": name, "settings": overrides, "as_of": with_as_of}
        with override_settings(**overrides):
            for half in ("tune", "report"):
                asked = [
                    q if with_as_of else {k: v for k, v in q.items() if k != "as_of"}
                    for q in questions
                    if q["half"] == half
                ]
                row[half] = {
                    endpoint: _score(
                        client,
                        endpoint,
                        tqdm(asked, desc=f"{name[:24]} {half} {endpoint}", mininterval=10),
                        dia_of,
                    )  # fmt: skip
                    for endpoint in endpoints
                }
        results.append(row)
        _write_halves(out)
        for half in ("tune", "report"):
            c, g = row[half]["conversations"], row[half]["sessions"]
            print(
                f"  {name:44s} {half:6s} turn@5 {c['turn_any_at_5']:.3f} "
                f"grouped session@5 {g['session_any_at_5']:.3f} "
                f"temporal turn@5 {c['by_category']['2 temporal']['turn_any_at_5']:.3f}",
                flush=True,
            )
    return out


def report_halves(results: dict) -> str:
    machine = results["machine"]
    lines = [
        "# Conversation recall on LoCoMo, by half (issue 54)",
        "",
        f"{results['turns']} turns in {results['conversations']} conversations, through the "
        "API. Even conversations (conv-26, 41, 43, 47, 49) tune, odd ones (conv-30, 42, 44, "
        f"48, 50) report: {results['questions']['tune']} and {results['questions']['report']} "
        "questions of categories 1–4. Each question is asked `as_of` the day after its "
        "conversation's last session. turn@5: an evidence turn among the first 5 hits of "
        "`conversations/search/`; grouped session@5: an evidence session among the first 5 "
        "of `group=session`; temporal and multi-hop: category 2 and 1, turn@5.",
        "",
        "| variant | half | turn@5 | recall turn@5 | session@5 (turns) | grouped session@5 "
        "| multi-hop turn@5 | multi-hop grouped@5 | temporal turn@5 | p50 ms |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results["results"]:
        for half in ("report", "tune"):
            c, g = r[half]["conversations"], r[half]["sessions"]
            rc = r[half].get("recall", {}).get("turn_any_at_5")
            cat = c["by_category"]
            lines.append(
                f"| {r['variant']} | {half} | {c['turn_any_at_5']:.3f} | {_f(rc)} "
                f"| {c['session_any_at_5']:.3f} | {g['session_any_at_5']:.3f} "
                f"| {cat['1 multi-hop']['turn_any_at_5']:.3f} "
                f"| {g['by_category']['1 multi-hop']['session_any_at_5']:.3f} "
                f"| {cat['2 temporal']['turn_any_at_5']:.3f} "
                f"| {c['latency_ms']['p50_ms']:.0f} |"
            )
    if "stability" not in results:
        return "\n".join(lines)
    lines += [
        "",
        f"Top 5 that depend on the page size ({results['stability_questions']} questions of "
        f"{', '.join(STABILITY_CONVERSATIONS)}; 5 against 200 turns, 5 against 50 sessions, "
        "top_k 5 against 50 for `/recall/` with `sources=turns`):",
        "",
    ]
    for endpoint, got in results["stability"].items():
        lines.append(f"- {endpoint}: {got['differing']} of {got['questions']}")
    lines += [
        "",
        f"Ingestion: {results['ingest']['turns']} turns in {results['ingest']['seconds']} s. "
        f"Measured at load average {machine['load_average_at_start']} on {machine['cpus']} "
        f"cores (commit {machine['commit']}): latencies are not a claim.",
        "",
        f"Data: {results['data_report']}",
    ]
    return "\n".join(lines)


# --------------------------------------------------------------------------- output


def _svg(results: dict) -> str:
    """Grouped bars per variant: evidence-turn any@5 (search, recall) and session any@5."""
    rows = results["results"]
    width, bar_h, gap, left = 980, 11, 10, 420
    scale = (width - left - 60) / 1.0
    series = [
        ("turn any@5, conversations/search", "#4c78a8", lambda r: r["conversations"]["turn_any_at_5"]),
        ("session any@5, conversations/search", "#72b7b2", lambda r: r["conversations"]["session_any_at_5"]),
        ("session any@5, group=session", "#54a24b", lambda r: r.get("sessions", {}).get("session_any_at_5")),
    ]  # fmt: skip
    height = 70 + len(rows) * (len(series) * bar_h + gap) + 30
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="10" y="20" font-size="14" font-weight="bold">LoCoMo through the API: '
        f"{results['questions']} questions (categories 1–4), {results['turns']} turns</text>",
    ]
    for i, (label, colour, _) in enumerate(series):
        x = 10 + i * 300
        parts.append(f'<rect x="{x}" y="32" width="12" height="10" fill="{colour}"/>')
        parts.append(f'<text x="{x + 16}" y="41">{label}</text>')
    for target, label in ((0.75, "turn target 0.75"), (0.95, "session target 0.95")):
        x = left + target * scale
        parts.append(
            f'<line x1="{x:.1f}" y1="55" x2="{x:.1f}" y2="{height - 25}" stroke="#999" '
            'stroke-dasharray="4,3"/>'
        )
        parts.append(f'<text x="{x:.1f}" y="{height - 10}" text-anchor="middle">{label}</text>')
    y = 62
    configured = results.get("configured_variant")
    for row in rows:
        weight = "bold" if row["variant"] == configured else "normal"
        mid = y + len(series) * bar_h / 2 + 4
        parts.append(
            f'<text x="{left - 8}" y="{mid:.1f}" text-anchor="end" font-weight="{weight}">'
            f"{row['variant']}</text>"
        )
        for _, colour, get in series:
            value = get(row)
            if value is None:
                y += bar_h
                continue
            parts.append(
                f'<rect x="{left}" y="{y}" width="{value * scale:.1f}" height="{bar_h - 1}" '
                f'fill="{colour}"/>'
            )
            parts.append(f'<text x="{left + value * scale + 4:.1f}" y="{y + 9}">{value:.3f}</text>')
            y += bar_h
        y += gap
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _f(value) -> str:
    return "–" if value is None else f"{value:.3f}"


def report(results: dict) -> str:
    lines = [
        f"# Conversation recall on LoCoMo ({results['questions']} questions of categories 1–4, "
        f"{results['turns']} turns in {results['conversations']} conversations, through the API)",
        "",
        "turn@5: some evidence turn among the first 5 hits; session@5: some evidence session "
        "among the sessions of the first 5 hits (grouped: among the first 5 sessions of "
        "`group=session`). cat 3 = open-domain inference. paraphrase@3: the 40-fact "
        "paraphrase fixture stored as turns.",
        "",
        "| variant | search turn@5 | recall turn@5 | search session@5 | grouped session@5 "
        "| cat 1 | cat 2 | cat 3 | cat 4 | paraphrase@3 | p50 ms |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results["results"]:
        c = r["conversations"]
        s = r.get("sessions", {}).get("session_any_at_5")
        rc = r.get("recall", {}).get("turn_any_at_5")
        cats = [c["by_category"][k]["turn_any_at_5"] for k in sorted(c["by_category"])]
        name = r["variant"]
        if name == results.get("configured_variant"):
            name = f"**{name}** (default)"
        lines.append(
            f"| {name} | {c['turn_any_at_5']:.3f} | {_f(rc)} | "
            f"{c['session_any_at_5']:.3f} | {_f(s)} | "
            + " | ".join(f"{x:.3f}" for x in cats)
            + f" | {r['paraphrase_hit_at_3']:.3f} | {c['latency_ms']['p50_ms']:.0f} |"
        )
    lines += ["", "Latency per request (p50 / p95 ms, in process, 2 cores shared):", ""]
    for r in results["results"]:
        for endpoint in ALL_ENDPOINTS:
            if endpoint in r:
                ms = r[endpoint]["latency_ms"]
                lines.append(
                    f"- {r['variant']}, {endpoint}: {ms['p50_ms']:.0f} / {ms['p95_ms']:.0f}"
                )
    lines += ["", "Ingestion (batch turns endpoint, one call per session):", ""]
    for mode, t in results["ingest"].items():
        lines.append(
            f"- turn vectors from `{mode}`: {t['turns']} turns in {t['seconds']} s ({t['per_s']}/s)"
        )
    lines.append("")
    lines.append(f"Data: {results['data_report']}")
    return "\n".join(lines)


def _write(results: dict, name: str) -> None:
    from django.conf import settings

    configured = {
        "CAIRN_TURN_EMBED_CONTEXT": settings.CAIRN_TURN_EMBED_CONTEXT,
        **{k: getattr(settings, k) for k in DEFAULT},
    }
    results["configured"] = configured
    results.pop("configured_variant", None)
    for row in results["results"]:
        same = row["turn_embedding"] == configured["CAIRN_TURN_EMBED_CONTEXT"] and all(
            row["settings"].get(k, ABSENT.get(k)) == configured[k] for k in DEFAULT
        )
        if same:
            results["configured_variant"] = row["variant"]
            break
    common.RESULTS.mkdir(parents=True, exist_ok=True)
    out = common.RESULTS / name
    out.with_suffix(".json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    out.with_suffix(".svg").write_text(_svg(results))
    text = report(results)
    out.with_suffix(".md").write_text(text + "\n")
    print("\n" + text)
    print(f"\nwrote {out}.json, .svg and .md")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 conversations, 5 variants")
    parser.add_argument("--conversations", type=int, default=None)
    parser.add_argument("--keep-db", action="store_true")
    parser.add_argument("--out", default="recall")
    parser.add_argument(
        "--render", action="store_true", help="only redraw .md/.svg from the .json (no run)"
    )
    parser.add_argument(
        "--only", default="", help="run the variants whose name holds this (a|b: either)"
    )
    parser.add_argument(
        "--merge", action="store_true", help="replace/add these variants' rows in the .json"
    )
    parser.add_argument(
        "--halves",
        action="store_true",
        help="issue 54: both halves, time window and diversity on and off, and the "
        "page-size check (bench/results/recall-halves.*)",
    )
    args = parser.parse_args(argv)
    if args.render:
        import os

        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cairn.settings")
        import django

        django.setup()
        _write(json.loads((common.RESULTS / args.out).with_suffix(".json").read_text()), args.out)
        return 0
    if not LOCOMO.exists():
        print(f"{LOCOMO} not found; skipped")
        return 0
    common.setup_django()
    results: dict = {"machine": common.machine()}
    if args.halves:
        try:
            bench_halves(args.conversations, args.only, results)
        finally:
            if not args.keep_db:
                common.drop_database()
        print("\n" + _write_halves(results))
        return 0
    try:
        results.update(
            bench(args.conversations or (3 if args.quick else None), args.quick, args.only)
        )
    finally:
        if not args.keep_db:
            common.drop_database()
    if args.merge:
        old = json.loads((common.RESULTS / args.out).with_suffix(".json").read_text())
        new = {r["variant"]: r for r in results["results"]}
        rows = [new.pop(r["variant"], r) for r in old["results"]] + list(new.values())
        old["results"] = rows
        old.setdefault("merged_runs", []).append(
            {"variants": [r["variant"] for r in results["results"]], "machine": results["machine"]}
        )
        results = old
    _write(results, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
