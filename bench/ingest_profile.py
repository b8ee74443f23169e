"""Where a batch remember's time goes, per item, beside the raw embedder.

Posts the short items (``short_items.py``, one sentence each) in batches of 100
to ``POST /api/v1/knowledge/batch/`` in process (Django's test client, with an
``Idempotency-Key``: the path agents take), with a timer around each stage of the
request; before each batch, the raw embedder embeds the same 100 texts.

Stages are inclusive wall times (a stage inside another counts in both):

- ``request``: the whole request through every middleware;
- ``guards``: the input guard and the write guard (each reads the body);
- ``idempotency``: the key's lock, lookup and stored response;
- ``view``: the batch view (validation, embedding, storage, the answer);
- ``validation``: the serializer and ``knowledge_prepare`` for every item;
- ``secret walker``: ``refuse_secrets`` inside validation;
- ``embed``: the model call (``embed_missing``);
- ``store``: everything in the transaction (locks, dedup reads, plan, writes);
- ``dedup reads``: the statement reading every item's dedup candidates;
- ``inserts``: the statement(s) adding the new rows;
- ``new rows``: building the rows to insert in Python;
- ``answer``: parsing the JSON body and rendering the JSON answer;
- ``sql``: every SQL statement of the request, wherever it runs.

The guards' time is their own (the rest of the stack they call excluded).

Run with the embedded services up::

    .venv/bin/python -m cairn.embedded run -- .venv/bin/python bench/ingest_profile.py [--n=600]

Prints a table (ms per item); writes nothing under bench/results/.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import drop_database, setup_django  # noqa: E402
from short_items import short_items  # noqa: E402

TIMES: dict[str, float] = defaultdict(float)
#: CPU seconds per stage: this process (every thread: the model's too) and the
#: PostgreSQL backend serving it (``/proc/<pid>/schedstat``). Unlike wall time, CPU
#: time hardly grows with the machine's load, so it says where the time goes even
#: on a busy machine; on a quiet one the wall time outside the model is close to it.
CPU: dict[str, float] = defaultdict(float)
THREAD: dict[str, float] = defaultdict(float)
PG_CPU: dict[str, float] = defaultdict(float)
BACKEND = {"pid": None}


def backend_cpu() -> float:
    """CPU seconds the PostgreSQL backend of this connection has run (0 if unknown)."""
    pid = BACKEND["pid"]
    if pid is None:
        return 0.0
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


@contextlib.contextmanager
def _clock(label: str):
    began, cpu, pg = time.perf_counter(), time.process_time(), backend_cpu()
    th = time.thread_time()
    try:
        yield
    finally:
        TIMES[label] += time.perf_counter() - began
        CPU[label] += time.process_time() - cpu
        THREAD[label] += time.thread_time() - th
        PG_CPU[label] += backend_cpu() - pg


#: (label, module, attribute): a function or a class whose ``__call__`` is timed.
#: A stage whose target does not exist (another version of the code) is skipped.
STAGES = (
    ("guards", "cairn.guard", "InputGuardMiddleware"),
    ("guards", "agents.guard", "WriteGuardMiddleware"),
    ("idempotency", "agents.idempotency", "idempotency_guard"),
    ("idempotency", "agents.idempotency", "idempotency_lookup"),
    ("idempotency", "agents.idempotency", "idempotency_store"),
    ("validation", "agents.apis.knowledge", "validated_list"),
    ("validation", "memory.knowledge.batch", "knowledge_prepare"),
    ("secret walker", "memory.knowledge.validation", "refuse_secrets"),
    ("embed", "memory.knowledge.batch", "embed_missing"),
    ("store", "memory.knowledge.batch", "_store_many"),
    ("store", "memory.knowledge.batch", "store_many"),
    ("dedup reads", "memory.knowledge.batch", "_candidates"),
    ("dedup reads", "memory.knowledge.batch", "batch_candidates"),
    ("inserts", "memory.knowledge.batch", "insert_new"),
    ("inserts", "django.db.models.query", "QuerySet.bulk_create"),
    ("new rows", "memory.knowledge.batch", "new_item"),
    ("answer", "rest_framework.renderers", "JSONRenderer.render"),
    ("answer", "rest_framework.parsers", "JSONParser.parse"),
)
ORDER = (
    "request", "guards", "idempotency", "view", "validation", "secret walker",
    "embed", "store", "dedup reads", "inserts", "new rows", "answer", "sql",
)  # fmt: skip


def _timed(label, fn):
    # wraps: a view keeps its schema annotations (the body caps are read from them)
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with _clock(label):
            return fn(*args, **kwargs)

    return wrapper


def _own_time(label, call):
    """A middleware's own time: its ``get_response`` (the rest of the stack) excluded."""

    def wrapper(self, request):
        inner = self.get_response
        spent = [0.0, 0.0, 0.0]

        def timed_inner(request):
            began, cpu, pg = time.perf_counter(), time.process_time(), backend_cpu()
            try:
                return inner(request)
            finally:
                spent[0] += time.perf_counter() - began
                spent[1] += time.process_time() - cpu
                spent[2] += backend_cpu() - pg

        self.get_response = timed_inner
        began, cpu, pg = time.perf_counter(), time.process_time(), backend_cpu()
        try:
            return call(self, request)
        finally:
            self.get_response = inner
            TIMES[label] += time.perf_counter() - began - spent[0]
            CPU[label] += time.process_time() - cpu - spent[1]
            PG_CPU[label] += backend_cpu() - pg - spent[2]

    return wrapper


def _timed_cm(label, fn):
    """A context manager's entering and leaving (the body it guards excluded)."""

    @contextlib.contextmanager
    def wrapper(*args, **kwargs):
        manager = fn(*args, **kwargs)
        with _clock(label):
            value = manager.__enter__()
        try:
            yield value
        except BaseException as exc:
            with _clock(label):
                if not manager.__exit__(type(exc), exc, exc.__traceback__):
                    raise
        else:
            with _clock(label):
                manager.__exit__(None, None, None)

    return wrapper


def _instrument() -> list[str]:
    found = []
    for label, module_name, attr in STAGES:
        module = importlib.import_module(module_name)
        owner, _, attr = attr.rpartition(".")
        if owner:
            module = getattr(module, owner)
        target = getattr(module, attr, None)
        if target is None:
            continue
        found.append(f"{module_name}.{owner + '.' if owner else ''}{attr}")
        if isinstance(target, type):
            target.__call__ = _own_time(label, target.__call__)
        elif attr == "idempotency_guard":
            setattr(module, attr, _timed_cm(label, target))
        else:
            setattr(module, attr, _timed(label, target))
    from agents.apis.knowledge import KnowledgeBatchApi

    KnowledgeBatchApi.post = _timed("view", KnowledgeBatchApi.post)
    return found


def _ms(seconds: float, n: int) -> str:
    return f"{1000 * seconds / n:.2f}"


def _floor(vectors: list, dims: int) -> dict[str, float]:
    """PostgreSQL CPU seconds to insert ``vectors`` (batches of 100, as the batch path
    does) into a bare table: once with no index, once with only an HNSW index built
    like the knowledge one (same opclass, m and ef_construction). The HNSW row is the
    floor of a stored item: no other work can make that insert cheaper."""
    from django.db import connection

    from memory.knowledge.vector_search import vectors_param

    out = {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT regexp_replace(indexdef, '^.* WITH ', '') FROM pg_indexes "
            "WHERE indexname = 'knowledge_embedding_hnsw'"
        )
        options = cursor.fetchone()[0]
        for name, index in (
            ("heap only", None),
            ("HNSW alone", f"USING hnsw (embedding vector_cosine_ops) WITH {options}"),
        ):
            cursor.execute("DROP TABLE IF EXISTS profile_floor")
            cursor.execute(f"CREATE UNLOGGED TABLE profile_floor (embedding vector({dims}))")
            if index:
                cursor.execute(f"CREATE INDEX ON profile_floor {index}")
            cpu = backend_cpu()
            for start in range(0, len(vectors), 100):
                cursor.execute(
                    "INSERT INTO profile_floor SELECT unnest(%s::vector[])",
                    [vectors_param(cursor, vectors[start : start + 100])],
                )
            out[name] = backend_cpu() - cpu
        cursor.execute("DROP TABLE profile_floor")
    return out


def _single(client, embedder, texts: list[str]) -> dict[str, list[float]]:
    """One item per ``POST /api/v1/knowledge/`` (an agent's usual write) against the
    model embedding that one sentence: wall and CPU (this process + PostgreSQL) each."""
    out: dict[str, list[float]] = defaultdict(list)
    for i, text in enumerate(texts):
        began, cpu = time.perf_counter(), time.process_time()
        embedder.embed([text])
        out["model wall"].append(time.perf_counter() - began)
        out["model cpu"].append(time.process_time() - cpu)
        began, cpu, pg = time.perf_counter(), time.process_time(), backend_cpu()
        response = client.post(
            "/api/v1/knowledge/",
            {"content": text, "context": "profile-single"},
            content_type="application/json",
            HTTP_IDEMPOTENCY_KEY=f"single-{i}",
        )
        out["request wall"].append(time.perf_counter() - began)
        out["request cpu"].append(time.process_time() - cpu + backend_cpu() - pg)
        out["postgres cpu"].append(backend_cpu() - pg)
        assert response.status_code == 201, response.content[:300]
    return out


def main(argv: list[str]) -> int:
    import os
    import statistics

    n, singles = 600, 100
    for arg in argv:
        if arg.startswith("--n="):
            n = int(arg.split("=", 1)[1])
        if arg.startswith("--single="):
            singles = int(arg.split("=", 1)[1])
    load_before = os.getloadavg()
    setup_django()
    from django.db import connection
    from django.test import Client

    from memory.core.embeddings import get_embedder
    from memory.identity.services import agent_get_or_create, token_issue, workspace_get_or_create
    from memory.models import Knowledge

    with connection.cursor() as cursor:
        cursor.execute(
            "TRUNCATE memory_knowledge, memory_idempotencyrecord RESTART IDENTITY CASCADE"
        )
        cursor.execute("SELECT pg_backend_pid()")
        BACKEND["pid"] = cursor.fetchone()[0]
    workspace = workspace_get_or_create(name="bench-ingest-profile")
    agent = agent_get_or_create(workspace=workspace, name="bench-agent")
    token = token_issue(agent=agent).raw
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    found = _instrument()

    def sql_timer(execute, sql, params, many, context):
        with _clock("sql"):
            return execute(sql, params, many, context)

    connection.execute_wrappers.append(sql_timer)
    texts = short_items(n + singles)
    texts, single_texts = texts[:n], texts[n:]
    embedder = get_embedder()
    embedder.embed(texts[:100])  # load the model
    # Warm the request path (URL reversing, first-use imports) outside the timings.
    client.post("/api/v1/recall/", {"query": "warm up"}, content_type="application/json")
    for table in (TIMES, CPU, PG_CPU):
        table.clear()
    for start in range(0, n, 100):
        batch = texts[start : start + 100]
        with _clock("raw embedder"):
            embedder.embed(batch)
        body = {"items": [{"content": t, "context": "profile"} for t in batch]}
        with _clock("request"):
            response = client.post(
                "/api/v1/knowledge/batch/",
                body,
                content_type="application/json",
                HTTP_IDEMPOTENCY_KEY=f"profile-{start}",
            )
        assert response.status_code == 201, response.content[:300]
    stored = Knowledge.objects.filter(workspace=workspace, context="profile")
    connection.execute_wrappers.remove(sql_timer)
    vectors = [list(v) for v in stored.order_by("pk").values_list("embedding", flat=True)]
    floor = _floor(vectors, len(vectors[0]))
    single = _single(client, embedder, single_texts)
    load_after = os.getloadavg()

    print("timed:", ", ".join(found))
    print(f"{n} short items, batches of 100; {len(vectors)} rows stored")
    print(
        "| stage | wall ms/item | CPU ms/item, this process | CPU ms/item, PostgreSQL "
        "| CPU ms/item, request thread |"
    )
    print("| --- | --- | --- | --- | --- |")
    for label in ("raw embedder", *ORDER):
        if label in TIMES:
            print(f"| {label} | {_ms(TIMES[label], n)} | {_ms(CPU[label], n)} | "
                  f"{_ms(PG_CPU[label], n)} | {_ms(THREAD[label], n)} |")  # fmt: skip
    outside_cpu = CPU["request"] - CPU["embed"] + PG_CPU["request"]
    print(f"| request minus embed | {_ms(TIMES['request'] - TIMES['embed'], n)} | "
          f"{_ms(CPU['request'] - CPU['embed'], n)} | {_ms(PG_CPU['request'], n)} | "
          f"{_ms(THREAD['request'] - THREAD['embed'], n)} |")  # fmt: skip
    for name, seconds in floor.items():
        print(f"| floor: insert into a bare table, {name} | | | {_ms(seconds, len(vectors))} | |")
    print(
        f"fixed cost outside the model (CPU, both processes): {_ms(outside_cpu, n)} ms an item; "
        f"the HNSW insert alone: {_ms(floor['HNSW alone'], len(vectors))} ms"
    )
    print(
        f"ratio (raw embedder wall / request wall): {TIMES['raw embedder'] / TIMES['request']:.2f}"
    )
    p50 = {k: 1000 * statistics.median(v) for k, v in single.items()}
    print(
        f"single POST /knowledge/ ({singles}): p50 wall {p50['request wall']:.2f} ms, "
        f"CPU {p50['request cpu']:.2f} ms (PostgreSQL {p50['postgres cpu']:.2f}); the model on one sentence: wall "
        f"{p50['model wall']:.2f} ms, CPU {p50['model cpu']:.2f} ms"
    )
    cores = os.cpu_count() or 1
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} on {cores} cores")
    if max(load_before[0], load_after[0]) > cores:
        print("the machine was busy: wall times are inflated; rerun on a quiet machine")
    drop_database()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
