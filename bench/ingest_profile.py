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
import importlib
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import drop_database, setup_django  # noqa: E402
from short_items import short_items  # noqa: E402

TIMES: dict[str, float] = defaultdict(float)

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
    def wrapper(*args, **kwargs):
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            TIMES[label] += time.perf_counter() - started

    return wrapper


def _own_time(label, call):
    """A middleware's own time: its ``get_response`` (the rest of the stack) excluded."""

    def wrapper(self, request):
        inner = self.get_response
        spent = [0.0]

        def timed_inner(request):
            began = time.perf_counter()
            try:
                return inner(request)
            finally:
                spent[0] += time.perf_counter() - began

        self.get_response = timed_inner
        started = time.perf_counter()
        try:
            return call(self, request)
        finally:
            self.get_response = inner
            TIMES[label] += time.perf_counter() - started - spent[0]

    return wrapper


def _timed_cm(label, fn):
    @contextlib.contextmanager
    def wrapper(*args, **kwargs):
        started = time.perf_counter()
        with fn(*args, **kwargs):
            TIMES[label] += time.perf_counter() - started
            yield
            started = time.perf_counter()
        TIMES[label] += time.perf_counter() - started

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


def main(argv: list[str]) -> int:
    n = 600
    for arg in argv:
        if arg.startswith("--n="):
            n = int(arg.split("=", 1)[1])
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
    workspace = workspace_get_or_create(name="bench-ingest-profile")
    agent = agent_get_or_create(workspace=workspace, name="bench-agent")
    token = token_issue(agent=agent).raw
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    found = _instrument()

    def sql_timer(execute, sql, params, many, context):
        began = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            TIMES["sql"] += time.perf_counter() - began

    connection.execute_wrappers.append(sql_timer)
    texts = short_items(n)
    embedder = get_embedder()
    embedder.embed(texts[:100])  # load the model
    # Warm the request path (URL reversing, first-use imports) outside the timings.
    client.post("/api/v1/recall/", {"query": "warm up"}, content_type="application/json")
    TIMES.clear()
    raw = 0.0
    for start in range(0, n, 100):
        batch = texts[start : start + 100]
        began = time.perf_counter()
        embedder.embed(batch)
        raw += time.perf_counter() - began
        body = {"items": [{"content": t, "context": "profile"} for t in batch]}
        began = time.perf_counter()
        response = client.post(
            "/api/v1/knowledge/batch/",
            body,
            content_type="application/json",
            HTTP_IDEMPOTENCY_KEY=f"profile-{start}",
        )
        TIMES["request"] += time.perf_counter() - began
        assert response.status_code == 201, response.content[:300]
    stored = Knowledge.objects.filter(workspace=workspace, context="profile").count()
    print("timed:", ", ".join(found))
    print(f"{n} short items, batches of 100; {stored} rows stored")
    print(f"| stage | ms per item |\n| --- | --- |\n| raw embedder | {1000 * raw / n:.2f} |")
    for label in ORDER:
        if label in TIMES:
            print(f"| {label} | {1000 * TIMES[label] / n:.2f} |")
    outside = TIMES["request"] - TIMES["embed"]
    print(f"| request minus embed | {1000 * outside / n:.2f} |")
    print(f"ratio (raw embedder time / request time): {raw / TIMES['request']:.2f}")
    drop_database()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
