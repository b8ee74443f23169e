"""Ingestion at the speed of the embedder: batch remember and batch turns against
the raw embedder, measured in the same run.

A real gunicorn (2 workers, the production server) serves the bench database;
client threads on the same machine post over HTTP. Texts are LoCoMo dialog turns
(``/work/shared/bench/locomo10.json``), made distinct per copy.

- ``short items``: 600 one-sentence items (``short_items.py``, about 14 tokens, the
  way agents store preferences and facts) through ``POST /api/v1/knowledge/batch/``,
  100 a request, one client; before each request this process embeds the same 100
  texts with the server's model (the raw embedder, interleaved batch by batch so
  both see the same load); then every batch again with its ``Idempotency-Key``;
  three rounds, each into a scope of its own;
- ``raw embedder``: this process embeds the LoCoMo texts in batches of 100 with the
  server's model (the ceiling for anything that embeds server-side; the yardstick
  of the turn rows);
- ``batch remember``: ``POST /api/v1/knowledge/batch/`` (100 items, server embeds),
  2 client threads, two batches at a time, each pair after the raw embedder on the
  same two batches (interleaved, as for short items); then the same batches again
  with the same ``Idempotency-Key`` (retries: nothing may be lost or doubled);
- ``batch turns``: ``POST /api/v1/sessions/{id}/turns/`` with ``{"turns": [...]}``
  (500 turns), 2 client threads, then every batch again (retries); the server
  embeds each turn in context (``CAIRN_TURN_EMBED_CONTEXT``), so the raw embedder
  is also timed on those very texts;
- ``batch turns, <mode>``: the same on a server of its own for each other turn
  context of ``MODES`` (``window``, the default: no text added, the session read
  in windows, memory/core/windows.py; ``previous``: 80 characters of the turn
  before; ``ending``: its last 40 characters and 0.2 of its vector carried);
- ``worker RSS``: with ``--rss-items=N``, each gunicorn worker's resident memory
  over N server-side embeddings through batch remember (the issue's 100k curve,
  before and after, is ``bench_rss.py``'s).

The server is the Procfile's gunicorn (``common.gunicorn_start``: 2 workers × 4
threads), with a 300 s timeout for big batches.

Flags: ``--quick`` (1,000 LoCoMo texts instead of 4,000), ``--short`` (the short
items alone: a quick check of batch remember's overhead), ``--rss-items=N``.
The load average before and after the run is printed beside the short-item figures;
above one per core no target is judged (``short_verdict``): rerun on a quiet machine.
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
    setup_django,
)
from ingest_chart import ingest_svg  # noqa: E402
from short_items import short_items  # noqa: E402

#: Short items posted (batches of 100, one client), and how many times (each round
#: into a scope of its own, so the 6 requests of one round are not the whole sample).
SHORT_ITEMS = 600
SHORT_ROUNDS = 3

#: Turn contexts measured: the configured one, then each other on a server of its own.
MODES = ("window", "previous", "ending")

LOCOMO = Path(os.environ.get("CAIRN_LOCOMO", "/work/shared/bench/locomo10.json"))


def _locomo_texts() -> list[str]:
    data = json.loads(LOCOMO.read_text())
    out = []
    for sample in data:
        conv = sample["conversation"]
        for key in sorted(k for k in conv if k.startswith("session_") and k[8:].isdigit()):
            out += [f"{t['speaker']}: {t['text']}" for t in conv[key]]
    return out


def _texts(n: int, base: list[str]) -> list[str]:
    # Distinct texts: a copy number keeps LoCoMo's wording but changes the facts.
    return [f"{base[i % len(base)]} (copy {i // len(base)} no {i})" for i in range(n)]


def _worker_rss(server_pid: int) -> list[int]:
    """RSS in MB of each gunicorn worker (the server's children)."""
    out = []
    children = Path(f"/proc/{server_pid}/task/{server_pid}/children")
    for pid in children.read_text().split():
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    out.append(int(line.split()[1]) // 1024)
        except FileNotFoundError:
            pass
    return sorted(out)


def _post_all(url, token, jobs, threads=2):
    """POST each (path, body, key) job; returns wall seconds and status counts."""
    import httpx

    statuses: dict[int, int] = {}
    client = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=300)

    def post(job):
        path, body, key = job
        headers = {"Idempotency-Key": key} if key else {}
        response = client.post(path, json=body, headers=headers)
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        return response

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        responses = list(pool.map(post, jobs))
    wall = time.perf_counter() - started
    client.close()
    return wall, statuses, responses


def _interleaved(url, token, jobs, texts, embedder, clients):
    """Post ``jobs`` ``clients`` at a time (one batch a client); before each group the
    raw embedder embeds the same batches' ``texts`` here, one after another. Both
    walls are summed over the groups, so a change in the machine's load weighs on
    both alike. Returns (raw seconds, posting seconds, statuses, responses)."""
    raw = posting = 0.0
    statuses: dict[int, int] = {}
    responses = []
    for start in range(0, len(jobs), clients):
        began = time.perf_counter()
        for batch in texts[start : start + clients]:
            embedder.embed(batch)
        raw += time.perf_counter() - began
        wall, got, answered = _post_all(url, token, jobs[start : start + clients], clients)
        posting += wall
        responses += answered
        for code, count in got.items():
            statuses[code] = statuses.get(code, 0) + count
    return raw, posting, statuses, responses


def _remember_batches(url, token, workspace, embedder, texts, context, clients, rounds=1) -> dict:
    """Batch remember of ``texts`` (100 a request) against the raw embedder on the same
    batches, interleaved; then every batch again under its key (retries). Each round
    posts the texts again into a scope of its own (``context-r``): nothing merges."""
    from memory.models import Knowledge

    batches = [texts[s : s + 100] for s in range(0, len(texts), 100)]
    raw = wall = again_wall = 0.0
    statuses: dict[int, int] = {}
    again_statuses: dict[int, int] = {}
    per_round = []
    for r in range(rounds):
        scope = context if rounds == 1 else f"{context}-{r}"
        jobs = [
            (
                "/api/v1/knowledge/batch/",
                {"items": [{"content": t, "context": scope} for t in batch]},
                f"{scope}-{i}",
            )
            for i, batch in enumerate(batches)
        ]
        raw_r, wall_r, got, _ = _interleaved(url, token, jobs, batches, embedder, clients)
        again_r, got_again, _ = _post_all(url, token, jobs, clients)
        raw, wall, again_wall = raw + raw_r, wall + wall_r, again_wall + again_r
        per_round.append(round(raw_r / wall_r, 2))
        for into, counts in ((statuses, got), (again_statuses, got_again)):
            for code, count in counts.items():
                into[code] = into.get(code, 0) + count
    lost = doubled = 0
    for r in range(rounds):
        stored = Knowledge.objects.filter(
            workspace=workspace, context=context if rounds == 1 else f"{context}-{r}"
        )
        distinct = stored.values("content").distinct().count()
        lost += len(texts) - distinct
        doubled += stored.count() - distinct
    n = len(texts) * rounds
    return {
        "items": len(texts),
        "rounds": rounds,
        "batch": 100,
        "clients": clients,
        "tokens_per_item": _tokens_per_item(texts),
        "raw_items_per_s": round(n / raw, 1),
        "items_per_s": round(n / wall, 1),
        "ratio_to_raw_embedder": round(raw / wall, 2),
        "ratio_per_round": per_round,
        "ms_per_item_outside_model": round(1000 * (wall - raw) / n, 2),
        "statuses": statuses,
        "retry_statuses": again_statuses,
        "retry_wall_s": round(again_wall, 2),
        "lost": lost,
        "doubled": doubled,
    }


def _tokens_per_item(texts: list[str]) -> float:
    """Mean tokens the model reads per text (special tokens included)."""
    from tokenizers import Tokenizer

    from memory.core.local_embedder import TOKENIZER_PATH

    tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return round(sum(len(e.ids) for e in tokenizer.encode_batch(texts)) / len(texts), 1)


def _raw_in_context(embedder, texts: list[str], mode: str) -> dict:
    """The raw embedder on the texts a batch of turns is embedded from under ``mode``
    (each turn after the one before it, 500 to a session), 500 a call."""
    from django.utils import timezone
    from tokenizers import Tokenizer

    from memory.core.local_embedder import TOKENIZER_PATH
    from memory.knowledge.turn_text import turn_embedding_text

    tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    now = timezone.now()
    # No text is added under ``window``: its context is counted in the windows read.
    contextual = texts if mode == "window" else [
        turn_embedding_text(
            content=t,
            role="user" if (i % 500) % 2 == 0 else "assistant",
            at=now,
            previous=texts[i - 1] if i % 500 else None,
            mode=mode,
        )
        for i, t in enumerate(texts)
    ]  # fmt: skip
    started = time.perf_counter()
    if mode == "window":  # the session's turns read together, as the server does
        from memory.core.windows import embed_sequences

        counting = _WindowTokens(embedder)
        embed_sequences(  # the bench's turns alternate user and assistant
            counting, [(texts[s : s + 500], None, None) for s in range(0, len(texts), 500)]
        )
    else:
        for start in range(0, len(texts), 500):
            embedder.embed(contextual[start : start + 500])
    wall = time.perf_counter() - started
    own = sum(len(e.ids) for e in tokenizer.encode_batch(texts))
    read = (
        counting.tokens
        if mode == "window"
        else sum(len(e.ids) for e in tokenizer.encode_batch(contextual))
    )
    return {
        "mode": mode,
        "items": len(texts),
        "items_per_s": round(len(texts) / wall, 1),
        "tokens_ratio": round(read / own, 2),  # what the model read, special tokens included
    }


class _WindowTokens:
    """The embedder, counting the tokens of the windows ``embed_sequences`` has it read
    (each window's context and special tokens included)."""

    def __init__(self, embedder):
        self.embedder, self.tokens = embedder, 0

    def tokenizer(self):
        return self.embedder.tokenizer()

    def token_states(self, windows):
        self.tokens += sum(len(w) for w in windows)
        return self.embedder.token_states(windows)


def _batch_turns(url, token, texts, workspace, prefix, raw, raw_same) -> dict:
    """Post the texts as sessions of 500 turns (2 clients), then every batch again."""
    from memory.models import ConversationTurn

    n = len(texts)
    jobs = []
    for s in range(0, n, 500):
        turns = [
            {"role": "user" if i % 2 == 0 else "assistant", "content": t, "turn_index": i}
            for i, t in enumerate(texts[s : s + 500])
        ]
        jobs.append((f"/api/v1/sessions/{prefix}-{s}/turns/", {"turns": turns}, None))
    wall, statuses, _ = _post_all(url, token, jobs)
    _again_wall, again_statuses, _ = _post_all(url, token, jobs)
    turns = ConversationTurn.objects.filter(
        workspace=workspace, session_id__startswith=f"{prefix}-"
    )
    distinct = turns.values("session_id", "turn_index").distinct().count()
    return {
        "turns": n,
        "batch": 500,
        "turns_per_s": round(n / wall, 1),
        "ratio_to_raw_embedder": round(n / wall / raw["items_per_s"], 2),
        "ratio_to_raw_on_same_texts": round(n / wall / raw_same["items_per_s"], 2),
        "statuses": statuses,
        "retry_statuses": again_statuses,
        "lost": n - distinct,
        "doubled": turns.count() - distinct,
    }


def _short_lines(short: dict) -> list[str]:
    return [
        f"| raw embedder on the same batches (in process, interleaved) | "
        f"{short['raw_items_per_s']} | 1.00 | | |",
        f"| batch remember (100/request, 1 client) | {short['items_per_s']} | "
        f"{short['ratio_to_raw_embedder']} | {short['lost']} | {short['doubled']} |",
    ]


#: Issue 55's targets for short items, on a quiet machine.
SHORT_TARGET_RATIO = 0.7  # batch remember ÷ raw embedder, same texts, batches of 100
SHORT_TARGET_FIXED_MS = 1.2  # ms an item outside the model


def short_verdict(short: dict, load_before: tuple, load_after: tuple, cores: int) -> str:
    """The short-item figures beside the load they were measured at, and a verdict on
    the targets only when the machine was quiet: above one runnable process per core
    the embedder slows several-fold and a fixed cost outside it vanishes into the
    ratio, so a busy run can neither meet nor miss a target."""
    ratio, fixed = short["ratio_to_raw_embedder"], short["ms_per_item_outside_model"]
    figures = (
        f"short items: {ratio}× the raw embedder, {fixed} ms an item outside the model "
        f"(load average {load_before[0]:.2f} before, {load_after[0]:.2f} after, on {cores} cores)"
    )
    if max(load_before[0], load_after[0]) > cores:
        return f"{figures}: the machine was busy, no target is judged; rerun on a quiet machine"
    met = ratio >= SHORT_TARGET_RATIO and fixed <= SHORT_TARGET_FIXED_MS
    return f"{figures}: targets (≥ {SHORT_TARGET_RATIO}×, ≤ {SHORT_TARGET_FIXED_MS} ms) " + (
        "met" if met else "missed"
    )


def main(argv: list[str]) -> int:
    import logging

    logging.getLogger("httpx").setLevel(logging.WARNING)
    quick = "--quick" in argv
    only_short = "--short" in argv
    rss_items = 0  # the RSS curve is bench_rss.py's; --rss-items=N still draws one here
    for arg in argv:
        if arg.startswith("--rss-items="):
            rss_items = int(arg.split("=", 1)[1])
    n = 1000 if quick else 4000
    setup_django()
    from django.db import connection

    from memory.core.embeddings import get_embedder
    from memory.identity.services import agent_get_or_create, token_issue, workspace_get_or_create

    with connection.cursor() as cursor:
        cursor.execute(
            "TRUNCATE memory_knowledge, memory_conversationturn, memory_idempotencyrecord "
            "RESTART IDENTITY CASCADE"
        )
    workspace = workspace_get_or_create(name="bench-ingest")
    agent = agent_get_or_create(workspace=workspace, name="bench-agent")
    token = token_issue(agent=agent).raw
    results: dict = {"n": n, "rss_items": rss_items}
    embedder = get_embedder()
    short = short_items(SHORT_ITEMS)
    embedder.embed(short[:100])  # load the model

    load_before = os.getloadavg()
    print(f"load average before: {', '.join(f'{x:.2f}' for x in load_before)}", flush=True)
    if only_short:
        server, url = gunicorn_start(free_port(), extra=["--timeout", "300"])
        try:
            _post_all(url, token, [("/api/v1/recall/", {"query": "warm up"}, None)] * 4)
            results["short_items"] = _remember_batches(
                url, token, workspace, embedder, short, "short", clients=1, rounds=SHORT_ROUNDS
            )
        finally:
            server.terminate()
            server.wait(timeout=60)
        results["load"] = os.getloadavg()
        print("short items", results["short_items"], flush=True)
        print(short_verdict(results["short_items"], load_before, results["load"], os.cpu_count()))
        drop_database()
        s = results["short_items"]
        return 1 if s["lost"] or s["doubled"] else 0

    base = _locomo_texts()
    texts = _texts(n, base)
    # Raw embedder on the LoCoMo texts, the batches the API gets: the turn rows' yardstick.
    embedder.embed(texts[:100])
    started = time.perf_counter()
    for start in range(0, n, 100):
        embedder.embed(texts[start : start + 100])
    raw_wall = time.perf_counter() - started
    results["raw_embedder"] = {"items": n, "items_per_s": round(n / raw_wall, 1)}
    print("raw embedder", results["raw_embedder"], flush=True)

    # The raw embedder on what the server embeds for a turn: its text in context
    # (memory/knowledge/turn_text.py), 500 a call; for the configured context and
    # for each other mode of ``MODES``.
    from django.conf import settings

    configured = settings.CAIRN_TURN_EMBED_CONTEXT
    results["turn_context"] = configured
    other_modes = [m for m in MODES if m != configured]
    results["other_turn_contexts"] = other_modes
    results["raw_embedder_turns_in_context"] = _raw_in_context(embedder, texts, configured)
    for mode in other_modes:
        results[f"raw_embedder_turns_{mode}"] = _raw_in_context(embedder, texts, mode)
    print("raw embedder, turns in context", results["raw_embedder_turns_in_context"], flush=True)

    server, url = gunicorn_start(free_port(), extra=["--timeout", "300"])
    try:
        # Warm both workers' models.
        _post_all(url, token, [("/api/v1/recall/", {"query": "warm up"}, None)] * 4)
        results["rss_start_mb"] = _worker_rss(server.pid)

        # Short items, one client, against the raw embedder batch by batch.
        results["short_items"] = _remember_batches(
            url, token, workspace, embedder, short, "short", clients=1, rounds=SHORT_ROUNDS
        )
        print("short items", results["short_items"], flush=True)

        # Batch remember of LoCoMo texts, two clients, the same interleaving.
        results["batch_remember"] = _remember_batches(
            url, token, workspace, embedder, texts, "bench", clients=2
        )
        print("batch remember", results["batch_remember"], flush=True)

        # Batch turns.
        results["batch_turns"] = _batch_turns(
            url, token, texts, workspace, "bench", results["raw_embedder"],
            results["raw_embedder_turns_in_context"],
        )  # fmt: skip
        print("batch turns", results["batch_turns"], flush=True)

        # Worker RSS over sustained server-side embedding (bench_rss.py draws the full curve).
        rss = [{"embedded": 0, "rss_mb": _worker_rss(server.pid)}]
        more = _texts(rss_items, base)
        step = max(rss_items // 10, 100)
        for chunk in range(0, rss_items, step) if rss_items else ():
            jobs = [
                (
                    "/api/v1/knowledge/batch/",
                    {"items": [{"content": t, "context": "rss"} for t in more[s : s + 100]]},
                    None,
                )
                for s in range(chunk, min(chunk + step, rss_items), 100)
            ]
            _post_all(url, token, jobs)
            rss.append(
                {"embedded": min(chunk + step, rss_items), "rss_mb": _worker_rss(server.pid)}
            )
            print("rss", rss[-1], flush=True)
        results["rss"] = rss
    finally:
        server.terminate()
        server.wait(timeout=60)

    # Batch turns again on a server for each other turn context.
    for mode in other_modes:
        os.environ["CAIRN_TURN_EMBED_CONTEXT"] = mode
        server, url = gunicorn_start(free_port(), extra=["--timeout", "300"])
        try:
            _post_all(url, token, [("/api/v1/recall/", {"query": "warm up"}, None)] * 4)
            results[f"batch_turns_{mode}"] = _batch_turns(
                url, token, texts, workspace, mode, results["raw_embedder"],
                results[f"raw_embedder_turns_{mode}"],
            )  # fmt: skip
            print(f"batch turns, {mode}", results[f"batch_turns_{mode}"], flush=True)
        finally:
            os.environ.pop("CAIRN_TURN_EMBED_CONTEXT")
            server.terminate()
            server.wait(timeout=60)

    RESULTS.mkdir(parents=True, exist_ok=True)
    results["load"] = [round(x, 2) for x in os.getloadavg()]
    (RESULTS / "ingest.json").write_text(json.dumps(results, indent=2))
    r, b, t = results["raw_embedder"], results["batch_remember"], results["batch_turns"]
    sh = results["short_items"]
    c = results["raw_embedder_turns_in_context"]
    others = [(m, results[f"batch_turns_{m}"], results[f"raw_embedder_turns_{m}"])
              for m in other_modes]  # fmt: skip
    lines = [
        f"Short items ({sh['items']} one-sentence preferences and facts, "
        f"{sh['tokens_per_item']} tokens each on average, posted {sh['rounds']} times; the raw "
        "embedder timed on each batch just before it is posted):",
        "",
        "| path | items/s | × raw embedder | lost | doubled |",
        "| --- | --- | --- | --- | --- |",
        *_short_lines(sh),
        "",
        f"Batch remember is {sh['ms_per_item_outside_model']} ms an item slower than the "
        f"model alone on short items; ratio by round: "
        f"{', '.join(f'{x}×' for x in sh['ratio_per_round'])}.",
        "",
        short_verdict(sh, load_before, results["load"], os.cpu_count()) + ".",
        "",
        f"LoCoMo turns ({n}, {b['tokens_per_item']} tokens each on average):",
        "",
        "| path | items/s | × raw embedder | lost | doubled |",
        "| --- | --- | --- | --- | --- |",
        f"| raw embedder on the same batches (in process, interleaved) | "
        f"{b['raw_items_per_s']} | 1.00 | | |",
        f"| batch remember (100/request, 2 clients) | {b['items_per_s']} | "
        f"{b['ratio_to_raw_embedder']} | {b['lost']} | {b['doubled']} |",
        f"| raw embedder (batches of 100, in process, before the server starts) | "
        f"{r['items_per_s']} | 1.00 | | |",
        f"| batch turns (500/request, 2 clients) | {t['turns_per_s']} | "
        f"{t['ratio_to_raw_embedder']} | {t['lost']} | {t['doubled']} |",
        f"| raw embedder on the turns as the server embeds them (`{results['turn_context']}`, "
        f"500 a call) | {c['items_per_s']} | {round(c['items_per_s'] / r['items_per_s'], 2)} | | |",
        *[
            line
            for m, te, ce in others
            for line in (
                f"| batch turns, `CAIRN_TURN_EMBED_CONTEXT={m}` | {te['turns_per_s']} | "
                f"{te['ratio_to_raw_embedder']} | {te['lost']} | {te['doubled']} |",
                f"| raw embedder on the turns as `{m}` embeds them | {ce['items_per_s']} | "
                f"{round(ce['items_per_s'] / r['items_per_s'], 2)} | | |",
            )
        ],
        "",
        f"Batch turns against the raw embedder on the same contextual texts: "
        f"{t['ratio_to_raw_on_same_texts']}× (tokens per turn in context: "
        f"{c['tokens_ratio']}× the turn's own)"
        + "".join(
            f"; with `{m}`: {te['ratio_to_raw_on_same_texts']}× ({ce['tokens_ratio']}× the tokens)"
            for m, te, ce in others
        )
        + ".",
        "",
        f"Load average at the end of the run (1, 5, 15 min): "
        f"{', '.join(map(str, results['load']))} on {os.cpu_count()} cores.",
        "",
        "| server-side embeddings | worker RSS (MB) |",
        "| --- | --- |",
        *[f"| {p['embedded']} | {', '.join(map(str, p['rss_mb']))} |" for p in results["rss"]],
    ]
    (RESULTS / "ingest.md").write_text("\n".join(lines) + "\n")
    (RESULTS / "ingest.svg").write_text(ingest_svg(results))
    print("\n".join(lines))
    drop_database()
    bad = any(x["lost"] or x["doubled"] for x in (sh, b, t, *(te for _, te, _ in others)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
