"""Knowledge store benchmarks (SPEC section 10), run side by side in one process.

(a) scale: recall through the API (Django test client, in process) vs the raw SQL
    it wraps vs an exact scan, p50/p95 at each size; HNSW recall@10 against the
    exact answer with no filter and under a 1% filter, iterative scans off and on.
(b) remember throughput through the API, one item per request and batched.
(c) LoCoMo retrieval quality: evidence-turn hit@5 / recall@5 / recall@10 for
    vector-only, text-only and hybrid at several fusion weights.

Writes bench/results/knowledge.json and bench/results/knowledge.svg and prints
markdown tables. Usage (from the repository root, services running)::

    .venv/bin/python bench/bench_knowledge.py              # 10k and 100k
    .venv/bin/python bench/bench_knowledge.py --quick      # 2k and 10k, fewer queries/configs
    .venv/bin/python bench/bench_knowledge.py --quick --skip scale,remember  # LoCoMo only
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import common  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

LOCOMO = Path("/work/shared/bench/locomo10.json")
DIMS = 384
SYLLABLES = [
    "ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "be", "da",
    "fe", "go", "hu", "ji", "ko", "la", "mo", "nu", "pi", "re",
]  # fmt: skip
GRID = [(0.3, 0.7), (0.4, 0.6), (0.5, 0.5), (0.6, 0.4), (0.7, 0.3), (0.8, 0.2), (0.9, 0.1)]
# A weighting must keep this hit@3 on the paraphrase fixture to be chosen.
PARAPHRASE_FLOOR = 0.95


# --------------------------------------------------------------------------- helpers


def _vocabulary(size: int = 4000) -> list[str]:
    words = []
    for a in SYLLABLES:
        for b in SYLLABLES:
            for c in SYLLABLES:
                words.append(a + b + c)
    return words[:size]


def _texts(rng, n: int, vocab: list[str]) -> list[str]:
    # Zipf-distributed words, 8–14 per item: a few very common words, a long tail.
    ranks = rng.zipf(1.3, size=(n, 14)) - 1
    lengths = rng.integers(8, 15, size=n)
    out = []
    for row, length in zip(ranks, lengths, strict=True):
        out.append(" ".join(vocab[min(int(r), len(vocab) - 1)] for r in row[:length]))
    return out


def _unit(rng, n: int):
    import numpy as np

    vectors = rng.standard_normal((n, DIMS), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


class Clustered:
    """Unit vectors around random topic centres, like real embeddings.

    One centre per 100 items; each vector is its centre plus Gaussian noise of the
    same norm (cosine to its centre ≈ 0.71, to another member ≈ 0.5, to other topics
    ≈ 0). Queries are drawn the same way, so a query's true neighbours are members
    of its topic at similar distances: HNSW has to rank within a crowd.
    """

    def __init__(self, rng, n: int):
        self.rng = rng
        self.centres = _unit(rng, max(1, n // 100))

    def draw(self, n: int):
        import numpy as np

        picks = self.rng.integers(0, len(self.centres), size=n)
        noise = self.rng.standard_normal((n, DIMS), dtype=np.float32) / np.sqrt(DIMS)
        vectors = self.centres[picks] + noise
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors


def _agent_client(workspace_name: str):
    from django.test import Client

    from memory.identity.services import agent_get_or_create, token_issue, workspace_get_or_create

    workspace = workspace_get_or_create(name=workspace_name)
    agent = agent_get_or_create(workspace=workspace, name="bench")
    raw = token_issue(agent=agent).raw
    return workspace, Client(HTTP_AUTHORIZATION=f"Bearer {raw}")


def _post(client, path: str, body: dict):
    response = client.post(path, data=json.dumps(body), content_type="application/json")
    if response.status_code >= 300:
        raise RuntimeError(f"{path} answered {response.status_code}: {response.content[:300]}")
    return response


def _truncate_knowledge() -> None:
    from django.db import connection

    common.assert_bench_database()
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE memory_knowledge RESTART IDENTITY CASCADE")


# --------------------------------------------------------------------------- (a) scale


def _copy_rows(workspace_id: int, vectors, texts: list[str]) -> None:
    """One workspace; entity and metadata spread the rows over 100 buckets."""
    from django.utils import timezone
    from psycopg.types.json import Jsonb
    from tqdm import tqdm

    now = timezone.now()
    common.copy_knowledge(
        (
            workspace_id, texts[i], "fact", "", f"bucket:{i % 100}", "global", False,
            "import", 0.5, 0, Jsonb({"b": i % 100}), "", False, False, "active",
            vectors[i], "client", "agent", now, now, now,
        )
        for i in tqdm(range(len(texts)), desc="copy rows", unit="row", mininterval=1.0)
    )  # fmt: skip


def _explain(sql: str, params: dict) -> str:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql, params)
        return "\n".join(row[0] for row in cursor.fetchall())


def _explain_uses_hnsw(sql: str, params: dict) -> bool:
    return "knowledge_embedding_hnsw" in _explain(sql, params)


def bench_scale(n: int, queries: int, rng, vocab, data: str = "clustered") -> dict:
    import numpy as np
    from django.conf import settings
    from django.db import connection, transaction

    from memory.knowledge.recall import recall_filters_sql, recall_sql, recall_sql_params
    from memory.knowledge.vector_search import set_vector_search, vector_literal

    print(f"\n== scale: {n:,} items ==", flush=True)
    _truncate_knowledge()
    workspace, client = _agent_client(f"bench-scale-{n}")
    if data == "clustered":
        clusters = Clustered(rng, n)
        vectors, query_vectors = clusters.draw(n), clusters.draw(queries)
    else:
        vectors, query_vectors = _unit(rng, n), _unit(rng, queries)
    texts = _texts(rng, n, vocab)
    with connection.cursor() as cursor:
        cursor.execute("DROP INDEX IF EXISTS knowledge_embedding_hnsw")
    with common.stopwatch() as load:
        _copy_rows(workspace.pk, vectors, texts)
    print(f"loaded {n:,} rows in {load['s']:.1f}s; building the HNSW index ...", flush=True)
    with common.stopwatch() as build:
        with connection.cursor() as cursor:
            cursor.execute("SET maintenance_work_mem = '1GB'")
            cursor.execute("SET max_parallel_maintenance_workers = 1")
            cursor.execute(
                "CREATE INDEX knowledge_embedding_hnsw ON memory_knowledge "
                "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
            )
            cursor.execute("RESET maintenance_work_mem")
            cursor.execute("ANALYZE memory_knowledge")
    print(f"HNSW built in {build['s']:.1f}s", flush=True)

    query_texts = [" ".join(rng.choice(vocab[:300], size=2)) for _ in range(queries)]
    top_k = 10
    ef = settings.CAIRN_RECALL_EF_SEARCH

    where, base = recall_filters_sql(
        workspace_id=workspace.pk,
        context=None,
        category=None,
        entity=None,
        time_from=None,
        time_to=None,
        include_sensitive=False,
    )
    hybrid = recall_sql(
        where=where,
        use_vector=True,
        use_text=True,
        text_mode=settings.CAIRN_RECALL_TEXT_MODE,
        fusion=settings.CAIRN_RECALL_FUSION,
    )

    def hybrid_params(i: int) -> dict:
        return {
            **base,
            "qvec": vector_literal(query_vectors[i]),
            "emodel": "client",  # the rows' model: client vectors
            "text": query_texts[i],
            "n": 40,
            "top_k": top_k,
            **recall_sql_params(
                w_vec=settings.CAIRN_RECALL_VECTOR_WEIGHT,
                w_text=settings.CAIRN_RECALL_TEXT_WEIGHT,
                rrf_k=settings.CAIRN_RECALL_RRF_K,
                text_gate=True,
            ),
        }

    def vector_sql(extra: str = "") -> str:
        return (
            f"SELECT k.id FROM memory_knowledge k WHERE {where} {extra} "
            "AND k.embedding IS NOT NULL ORDER BY k.embedding <=> %(qvec)s::vector LIMIT %(k)s"
        )

    def ann(sql: str, params: dict, *, ef_search: int, iterative: str) -> list[int]:
        with transaction.atomic(), connection.cursor() as cursor:
            set_vector_search(cursor, ef_search=ef_search, iterative_scan=iterative)
            cursor.execute(sql, params)
            return [row[0] for row in cursor.fetchall()]

    def exact(sql: str, params: dict) -> list[int]:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SET LOCAL enable_indexscan = off")
            cursor.execute("SET LOCAL enable_bitmapscan = off")
            cursor.execute(sql, params)
            return [row[0] for row in cursor.fetchall()]

    def vparams(i: int, **extra) -> dict:
        return {**base, "qvec": vector_literal(query_vectors[i]), "k": top_k, **extra}

    def hybrid_raw(i: int) -> None:
        with transaction.atomic(), connection.cursor() as cursor:
            set_vector_search(cursor, ef_search=max(ef, 40))
            cursor.execute(hybrid, hybrid_params(i))
            cursor.fetchall()

    def api_with_vector(i: int) -> None:
        _post(
            client,
            "/api/v1/recall/",
            {"query": query_texts[i], "embedding": query_vectors[i].tolist(), "top_k": top_k},
        )

    def api_with_text(i: int) -> None:
        _post(client, "/api/v1/recall/", {"query": query_texts[i], "top_k": top_k})

    # Warm caches (and the embedder) before measuring anything.
    for i in range(min(5, queries)):
        api_with_text(i)
        exact(vector_sql(), vparams(i))
    plain = vector_sql()
    latency = {
        "api_recall_client_vector": common.percentiles(common.timed(api_with_vector, queries)),
        "api_recall_server_embeds": common.percentiles(common.timed(api_with_text, queries)),
        "sql_hybrid": common.percentiles(common.timed(hybrid_raw, queries)),
        "sql_vector_hnsw": common.percentiles(
            common.timed(
                lambda i: ann(plain, vparams(i), ef_search=ef, iterative="relaxed_order"), queries
            )
        ),
        "sql_vector_exact": common.percentiles(
            common.timed(lambda i: exact(plain, vparams(i)), queries)
        ),
    }

    truth = [exact(plain, vparams(i)) for i in range(queries)]

    def recall_at_10(sql: str, params_for, truths, *, ef_search: int, iterative: str) -> float:
        scores = []
        for i in range(queries):
            got = ann(sql, params_for(i), ef_search=ef_search, iterative=iterative)
            scores.append(len(set(got) & set(truths[i])) / max(1, len(truths[i])))
        return round(float(np.mean(scores)), 4)

    sweep = []
    for ef_search in (40, 100, 200, 400):
        samples = common.timed(
            lambda i, e=ef_search: ann(plain, vparams(i), ef_search=e, iterative="relaxed_order"),
            queries,
        )
        sweep.append(
            {
                "ef_search": ef_search,
                "recall_at_10": recall_at_10(
                    plain, vparams, truth, ef_search=ef_search, iterative="relaxed_order"
                ),
                **common.percentiles(samples),
            }
        )

    # A 1% filter on a column with no index: only the HNSW scan (or a full scan) can
    # answer it, so this shows what iterative scans buy.
    bucket_sql = vector_sql("AND (k.metadata->>'b') = %(bucket)s")

    def bucket_params(i: int) -> dict:
        return vparams(i, bucket=str(i % 100))

    bucket_truth = [exact(bucket_sql, bucket_params(i)) for i in range(queries)]
    # The product's own tight filter (entity, which has a btree index): the planner
    # picks the index it likes; the answer must be right either way.
    entity_sql = vector_sql("AND k.entity = %(entity)s")

    def entity_params(i: int) -> dict:
        return vparams(i, entity=f"bucket:{i % 100}")

    entity_truth = [exact(entity_sql, entity_params(i)) for i in range(queries)]
    filtered = {
        "tight_filter_fraction": 0.01,
        "no_filter": recall_at_10(plain, vparams, truth, ef_search=ef, iterative="relaxed_order"),
        "unindexed_filter_iterative_off": recall_at_10(
            bucket_sql, bucket_params, bucket_truth, ef_search=ef, iterative="off"
        ),
        "unindexed_filter_iterative_relaxed": recall_at_10(
            bucket_sql, bucket_params, bucket_truth, ef_search=ef, iterative="relaxed_order"
        ),
        "unindexed_filter_uses_hnsw": _explain_uses_hnsw(bucket_sql, bucket_params(0)),
        "entity_filter_iterative_relaxed": recall_at_10(
            entity_sql, entity_params, entity_truth, ef_search=ef, iterative="relaxed_order"
        ),
        "entity_filter_uses_hnsw": _explain_uses_hnsw(entity_sql, entity_params(0)),
        "unindexed_filter_latency_relaxed": common.percentiles(
            common.timed(
                lambda i: ann(
                    bucket_sql, bucket_params(i), ef_search=ef, iterative="relaxed_order"
                ),
                queries,
            )
        ),
        "unindexed_filter_latency_exact": common.percentiles(
            common.timed(lambda i: exact(bucket_sql, bucket_params(i)), queries)
        ),
    }
    speedup = latency["sql_vector_exact"]["p50_ms"] / max(
        latency["sql_vector_hnsw"]["p50_ms"], 1e-6
    )
    api_factor = latency["api_recall_client_vector"]["p50_ms"] / max(
        latency["sql_hybrid"]["p50_ms"], 1e-6
    )
    hybrid_plan = _explain(hybrid, hybrid_params(0))
    return {
        "items": n,
        "queries": queries,
        "fusion": settings.CAIRN_RECALL_FUSION,
        "hybrid_uses_hnsw": "knowledge_embedding_hnsw" in hybrid_plan,
        "hybrid_uses_gin": "knowledge_search_gin" in hybrid_plan,
        "load_s": round(load["s"], 2),
        "hnsw_build_s": round(build["s"], 2),
        "ef_search": ef,
        "latency": latency,
        "hnsw_speedup_p50": round(speedup, 1),
        "api_over_sql_p50": round(api_factor, 2),
        "ef_sweep": sweep,
        "recall_at_10": filtered,
        "data": (
            "clustered unit vectors (a topic centre per 100 items)"
            if data == "clustered"
            else "uniform random unit vectors (the worst case for HNSW)"
        ),
    }


# --------------------------------------------------------------------------- (b) remember


def bench_remember(rng, vocab, single: int, batches: int, batch_size: int) -> dict:
    print("\n== remember throughput ==", flush=True)
    _, client = _agent_client("bench-remember")
    texts = _texts(rng, single + batches * batch_size, vocab)
    texts = [f"Benchmark fact {i}: {t}" for i, t in enumerate(texts)]

    def one(i: int) -> None:
        _post(client, "/api/v1/knowledge/", {"content": texts[i], "context": "bench"})

    one_samples = common.timed(one, single)
    offset = single

    def batch(i: int) -> None:
        start = offset + i * batch_size
        items = [{"content": t, "context": "bench"} for t in texts[start : start + batch_size]]
        _post(client, "/api/v1/knowledge/batch/", {"items": items})

    batch_samples = common.timed(batch, batches)
    # The same, with the client sending vectors: what the database side sustains when
    # the CPU embedder (MiniLM on this machine's cores) is out of the loop.
    offset2 = offset + batches * batch_size
    more = _texts(rng, batches * batch_size, vocab)
    more = [f"Benchmark fact {offset2 + i}: {t}" for i, t in enumerate(more)]
    vectors = Clustered(rng, len(more)).draw(len(more))

    def batch_with_vectors(i: int) -> None:
        start = i * batch_size
        items = [
            {"content": more[j], "context": "bench", "embedding": vectors[j].tolist()}
            for j in range(start, start + batch_size)
        ]
        _post(client, "/api/v1/knowledge/batch/", {"items": items})

    vector_samples = common.timed(batch_with_vectors, batches)
    return {
        "single": {
            "items": single,
            "items_per_s": round(single / sum(one_samples), 1),
            **common.percentiles(one_samples),
        },
        "batched": {
            "items": batches * batch_size,
            "batch_size": batch_size,
            "items_per_s": round(batches * batch_size / sum(batch_samples), 1),
            **common.percentiles(batch_samples),
        },
        "batched_client_vectors": {
            "items": batches * batch_size,
            "batch_size": batch_size,
            "items_per_s": round(batches * batch_size / sum(vector_samples), 1),
            **common.percentiles(vector_samples),
        },
    }


# --------------------------------------------------------------------------- (c) LoCoMo

_DIA = re.compile(r"D\d+:\d+")


def _locomo_load(path: Path, limit_conversations: int | None):
    data = json.loads(path.read_text())
    if limit_conversations:
        data = data[:limit_conversations]
    turns, questions = [], []
    report = {"empty_evidence": 0, "repaired_ids": 0, "unresolved_ids": 0, "dropped_items": 0}
    by_category = {}
    for sample in data:
        context = f"locomo:{sample['sample_id']}"
        conv = sample["conversation"]
        known = set()
        for key, value in conv.items():
            if not re.fullmatch(r"session_\d+", key):
                continue
            for turn in value:
                known.add(turn["dia_id"])
                turns.append(
                    {
                        "context": context,
                        "dia_id": turn["dia_id"],
                        "content": f"{turn['speaker']}: {turn['text']}",
                    }
                )
        for qa in sample["qa"]:
            category = qa["category"]
            by_category[category] = by_category.get(category, 0) + 1
            if category == 5:
                continue
            evidence = set()
            for raw in qa.get("evidence") or []:
                ids = _DIA.findall(raw)
                if len(ids) != 1 or ids[0] != raw.strip():
                    report["repaired_ids"] += 1
                for dia in ids:
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
                    "context": context,
                    "question": qa["question"],
                    "category": category,
                    "evidence": evidence,
                }
            )
    report["qa_by_category"] = dict(sorted(by_category.items()))
    return turns, questions, report


def _fixture_hits(configs, name: str, pairs, extra: list[str]) -> dict[str, float]:
    """hit@3 of each config on a fixture of (answer, question) pairs, in its own
    workspace with ``extra`` items beside the answers."""
    from memory.core.embeddings import get_embedder
    from memory.identity.services import workspace_get_or_create
    from memory.knowledge.recall import knowledge_search
    from memory.models import Knowledge

    workspace = workspace_get_or_create(name=name)
    embedder = get_embedder()
    contents = [answer for answer, _ in pairs] + extra
    items = Knowledge.objects.bulk_create(
        [
            Knowledge(
                workspace=workspace,
                content=content,
                embedding=vector,
                embedding_model=embedder.model_id,
            )
            for content, vector in zip(contents, embedder.embed(contents), strict=True)
        ]
    )
    questions = embedder.embed([q for _, q in pairs])
    out = {}
    for config, w_vec, w_text, mode, fusion in configs:
        hits = 0
        for item, (_, question), vector in zip(items, pairs, questions, strict=False):
            found = knowledge_search(
                workspace=workspace,
                query=question,
                query_embedding=vector,
                top_k=3,
                vector_weight=w_vec,
                text_weight=w_text,
                text_mode=mode,
                fusion=fusion,
            )
            hits += item.pk in [h.id for h in found]
        out[config] = round(hits / len(pairs), 4)
    return out


def _paraphrase_hits(configs) -> dict[str, float]:
    """hit@3 on the 40-fact paraphrase fixture."""
    from tests.memory.knowledge.recall_fixture import FACTS

    return _fixture_hits(configs, "bench-paraphrase", FACTS, [])


def _advice_hits(configs) -> dict[str, float]:
    """hit@3 on the advice fixture: 20 preferences among 200 distractors."""
    from tests.memory.knowledge.advice_fixture import ADVICE, DISTRACTORS

    pairs = [(preference, question) for preference, question, _ in ADVICE]
    return _fixture_hits(configs, "bench-advice", pairs, DISTRACTORS)


def bench_locomo(limit_conversations: int | None, quick: bool = False) -> dict:
    import numpy as np
    from django.conf import settings

    from memory.core.embeddings import get_embedder
    from memory.identity.services import workspace_get_or_create
    from memory.knowledge.recall import knowledge_search
    from memory.models import Knowledge

    print("\n== LoCoMo retrieval ==", flush=True)
    if not LOCOMO.exists():
        return {"skipped": f"{LOCOMO} not found"}
    _truncate_knowledge()
    workspace = workspace_get_or_create(name="bench-locomo")
    turns, questions, report = _locomo_load(LOCOMO, limit_conversations)
    embedder = get_embedder()
    with common.stopwatch() as embed_turns:
        vectors = embedder.embed([t["content"][:2000] for t in turns])
    # Stored directly (no dedup): "Bye!" in two sessions must stay two turns.
    rows = Knowledge.objects.bulk_create(
        [
            Knowledge(
                workspace=workspace,
                content=t["content"][:2000],
                category="note",
                context=t["context"],
                source="import",
                metadata={"dia_id": t["dia_id"]},
                embedding=v,
                embedding_model=embedder.model_id,
            )
            for t, v in zip(turns, vectors, strict=True)
        ],
        batch_size=500,
    )
    dia_of = {row.pk: row.metadata["dia_id"] for row in rows}
    with common.stopwatch() as embed_questions:
        qvectors = embedder.embed([q["question"] for q in questions])
    print(
        f"{len(turns):,} turns embedded in {embed_turns['s']:.1f}s; "
        f"{len(questions):,} questions in {embed_questions['s']:.1f}s",
        flush=True,
    )

    configs = [("vector only", 1.0, 0.0, "and", "rrf"), ("text only (AND)", 0.0, 1.0, "and", "rrf")]
    configs.append(("text only (OR)", 0.0, 1.0, "or", "rrf"))
    configs.append(("text only (OR, BM25)", 0.0, 1.0, "or", "score"))
    for fusion, modes in (("rrf", ("and", "or")), ("score", ("or",))):
        for mode in modes:
            for w_vec, w_text in GRID:
                name = f"hybrid {w_vec}/{w_text} ({mode.upper()}"
                name += ", score)" if fusion == "score" else ")"
                configs.append((name, w_vec, w_text, mode, fusion))
    if quick:
        # The configured fusion and the old one, at the weights both use, and each side alone.
        keep = {"vector only", "text only (OR)", "text only (OR, BM25)"}
        keep |= {"hybrid 0.3/0.7 (OR)", "hybrid 0.3/0.7 (OR, score)", "hybrid 0.4/0.6 (OR, score)"}
        configs = [c for c in configs if c[0] in keep]

    from tqdm import tqdm

    paraphrase = _paraphrase_hits(configs)
    advice = _advice_hits(configs)
    results = []
    for name, w_vec, w_text, mode, fusion in configs:
        hit5, rec5, rec10 = [], [], []
        per_category: dict[int, list[float]] = {}
        for q, vector in tqdm(
            list(zip(questions, qvectors, strict=True)), desc=name, unit="q", mininterval=2.0
        ):
            hits = knowledge_search(
                workspace=workspace,
                query=q["question"],
                query_embedding=vector,
                top_k=10,
                context=q["context"],
                vector_weight=w_vec,
                text_weight=w_text,
                text_mode=mode,
                fusion=fusion,
            )
            ranked = [dia_of[h.id] for h in hits]
            evidence = q["evidence"]
            h5 = float(bool(evidence & set(ranked[:5])))
            hit5.append(h5)
            rec5.append(len(evidence & set(ranked[:5])) / len(evidence))
            rec10.append(len(evidence & set(ranked[:10])) / len(evidence))
            per_category.setdefault(q["category"], []).append(h5)
        results.append(
            {
                "config": name,
                "vector_weight": w_vec,
                "text_weight": w_text,
                "text_mode": mode,
                "fusion": fusion,
                "hit_at_5": round(float(np.mean(hit5)), 4),
                "recall_at_5": round(float(np.mean(rec5)), 4),
                "recall_at_10": round(float(np.mean(rec10)), 4),
                "paraphrase_hit_at_3": paraphrase[name],
                "advice_hit_at_3": advice[name],
                "hit_at_5_by_category": {
                    str(c): round(float(np.mean(v)), 4) for c, v in sorted(per_category.items())
                },
            }
        )
        print(
            f"  {name:28s} hit@5 {results[-1]['hit_at_5']:.3f}  "
            f"recall@10 {results[-1]['recall_at_10']:.3f}  paraphrase@3 {paraphrase[name]:.3f}  "
            f"advice@3 {advice[name]:.3f}",
            flush=True,
        )
    hybrids = [r for r in results if r["config"].startswith("hybrid")]
    eligible = [r for r in hybrids if r["paraphrase_hit_at_3"] >= PARAPHRASE_FLOOR] or hybrids
    best = max(eligible, key=lambda r: (r["hit_at_5"], r["recall_at_10"]))
    current = next(
        (
            r
            for r in hybrids
            if r["vector_weight"] == settings.CAIRN_RECALL_VECTOR_WEIGHT
            and r["text_weight"] == settings.CAIRN_RECALL_TEXT_WEIGHT
            and r["text_mode"] == settings.CAIRN_RECALL_TEXT_MODE
            and r["fusion"] == settings.CAIRN_RECALL_FUSION
        ),
        None,
    )
    return {
        "unit": "dialog turn",
        "turns": len(turns),
        "questions": len(questions),
        "categories": "1-4 (multi-hop, temporal, open-domain, single-hop); 5 (adversarial) left out",
        "data_report": report,
        "embed_turns_s": round(embed_turns["s"], 1),
        "results": results,
        "choice_rule": "best hit@5 among hybrids with paraphrase hit@3 >= "
        f"{PARAPHRASE_FLOOR} (ties: recall@10)",
        "best_hybrid": best["config"],
        "configured": current["config"] if current else None,
    }


# --------------------------------------------------------------------------- output


def _svg(results: dict) -> str:
    """Two bar charts, drawn by hand: recall latency per method, LoCoMo hit@5 per config."""
    width, bar_h, gap = 860, 16, 6
    parts = []
    y = 30

    def text(x, yy, s, size=12, anchor="start", weight="normal"):
        s = str(s).replace("&", "&amp;").replace("<", "&lt;")
        parts.append(
            f'<text x="{x}" y="{yy}" font-size="{size}" text-anchor="{anchor}" '
            f'font-weight="{weight}" font-family="sans-serif">{s}</text>'
        )

    text(
        10,
        y,
        "Recall latency, p50 (bar) and p95 (tick), milliseconds, log scale",
        14,
        weight="bold",
    )
    y += 20
    import math

    labels = {
        "api_recall_client_vector": "API (client vector)",
        "api_recall_server_embeds": "API (server embeds)",
        "sql_hybrid": "raw hybrid SQL",
        "sql_vector_hnsw": "raw vector SQL, HNSW",
        "sql_vector_exact": "exact scan",
    }
    colours = ["#4c78a8", "#72b7b2", "#f58518", "#54a24b", "#e45756"]
    all_ms = [v["p95_ms"] for s in results.get("scale", []) for v in s["latency"].values()] or [1.0]
    top = math.log10(max(all_ms) * 1.5)
    bottom = (
        math.log10(
            max(
                min(v["p50_ms"] for s in results.get("scale", []) for v in s["latency"].values())
                / 2,
                0.01,
            )
        )
        if results.get("scale")
        else -1
    )  # noqa: E501
    left, span = 230, width - 230 - 80

    def xpos(ms):
        return left + span * (math.log10(max(ms, 10**bottom)) - bottom) / (top - bottom)

    for scale in results.get("scale", []):
        text(10, y + 12, f"{scale['items']:,} items", 12, weight="bold")
        y += 18
        for (key, label), colour in zip(labels.items(), colours, strict=True):
            stats = scale["latency"][key]
            text(left - 8, y + 12, label, 11, anchor="end")
            parts.append(
                f'<rect x="{left}" y="{y}" width="{xpos(stats["p50_ms"]) - left:.1f}" '
                f'height="{bar_h}" fill="{colour}"/>'
            )
            x95 = xpos(stats["p95_ms"])
            parts.append(
                f'<line x1="{x95:.1f}" y1="{y}" x2="{x95:.1f}" y2="{y + bar_h}" '
                'stroke="#333" stroke-width="2"/>'
            )
            text(x95 + 6, y + 12, f"{stats['p50_ms']:.1f} / {stats['p95_ms']:.1f}", 10)
            y += bar_h + gap
        y += 8
    y += 20
    locomo = results.get("locomo", {})
    if locomo.get("results"):
        text(10, y, "LoCoMo evidence-turn hit@5 (bar) and recall@10 (tick)", 14, weight="bold")
        y += 16
        for row in locomo["results"]:
            text(left - 8, y + 12, row["config"], 11, anchor="end")
            w = span * row["hit_at_5"]
            colour = "#54a24b" if row["config"] == locomo.get("configured") else "#4c78a8"
            parts.append(
                f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{colour}"/>'
            )
            x10 = left + span * row["recall_at_10"]
            parts.append(
                f'<line x1="{x10:.1f}" y1="{y}" x2="{x10:.1f}" y2="{y + bar_h}" '
                'stroke="#333" stroke-width="2"/>'
            )
            text(
                max(left + w, x10) + 6,
                y + 12,
                f"{row['hit_at_5']:.3f} / {row['recall_at_10']:.3f}",
                10,
            )
            y += bar_h + gap
        text(left, y + 14, "green: the configured default", 10)
        y += 24
    height = y + 10
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}"><rect width="100%" height="100%" fill="white"/>'
        + "".join(parts)
        + "</svg>\n"
    )


def report(results: dict) -> str:
    lines = []
    if results.get("scale"):
        rows = []
        for s in results["scale"]:
            for key, stats in s["latency"].items():
                rows.append(
                    {"items": f"{s['items']:,}", "path": key, "p50 ms": stats["p50_ms"],
                     "p95 ms": stats["p95_ms"]}
                )  # fmt: skip
        lines += ["Recall latency", common.table(rows, ["items", "path", "p50 ms", "p95 ms"]), ""]
        rows = []
        for s in results["scale"]:
            r = s["recall_at_10"]
            rows.append(
                {
                    "items": f"{s['items']:,}",
                    "HNSW vs exact (p50)": f"{s['hnsw_speedup_p50']}x",
                    "API / raw SQL (p50)": f"{s['api_over_sql_p50']}x",
                    "recall@10 no filter": r["no_filter"],
                    "1% filter, iterative off": r["unindexed_filter_iterative_off"],
                    "1% filter, relaxed_order": r["unindexed_filter_iterative_relaxed"],
                    "entity filter": r["entity_filter_iterative_relaxed"],
                    "build s": s["hnsw_build_s"],
                }
            )
        lines += [
            "HNSW",
            common.table(rows, list(rows[0])),
            "",
            "ef_search sweep (no filter, largest size)",
            common.table(
                results["scale"][-1]["ef_sweep"], ["ef_search", "recall_at_10", "p50_ms", "p95_ms"]
            ),
            "",
        ]
    if results.get("remember"):
        r = results["remember"]
        rows = [
            {"mode": "one item per request", "items/s": r["single"]["items_per_s"],
             "p50 ms per request": r["single"]["p50_ms"]},
            {"mode": f"batches of {r['batched']['batch_size']}",
             "items/s": r["batched"]["items_per_s"],
             "p50 ms per request": r["batched"]["p50_ms"]},
            {"mode": f"batches of {r['batched']['batch_size']}, client vectors",
             "items/s": r["batched_client_vectors"]["items_per_s"],
             "p50 ms per request": r["batched_client_vectors"]["p50_ms"]},
        ]  # fmt: skip
        lines += ["Remember throughput", common.table(rows, list(rows[0])), ""]
    locomo = results.get("locomo", {})
    if locomo.get("results"):
        rows = [
            {"config": r["config"], "hit@5": r["hit_at_5"], "recall@5": r["recall_at_5"],
             "recall@10": r["recall_at_10"], "paraphrase hit@3": r["paraphrase_hit_at_3"],
             "advice hit@3": r.get("advice_hit_at_3", "")}
            for r in locomo["results"]
        ]  # fmt: skip
        lines += [
            f"LoCoMo ({locomo['questions']} questions, {locomo['turns']} turns, unit: turn)",
            common.table(
                rows,
                ["config", "hit@5", "recall@5", "recall@10", "paraphrase hit@3", "advice hit@3"],
            ),
            f"best hybrid: {locomo['best_hybrid']}; configured: {locomo['configured']}",
            "",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument(
        "--quick", action="store_true", help="2k and 10k items, 30 queries, 6 LoCoMo configs"
    )
    parser.add_argument("--skip", default="", help="comma list of: scale,remember,locomo")
    parser.add_argument("--locomo-conversations", type=int, default=None)
    parser.add_argument("--keep-db", action="store_true")
    parser.add_argument(
        "--data", choices=["clustered", "uniform"], default="clustered", help="scale vectors"
    )
    parser.add_argument("--out", default="knowledge", help="results file name (no suffix)")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.queries = "2000,10000", 30
    skip = {s for s in args.skip.split(",") if s}
    common.setup_django()
    import numpy as np

    rng = np.random.default_rng(20261129)
    vocab = _vocabulary()
    results: dict = {"machine": common.machine()}
    from django.conf import settings

    results["settings"] = {
        name: getattr(settings, name)
        for name in dir(settings)
        if name.startswith(("CAIRN_RECALL_", "CAIRN_DEDUP_"))
    }
    try:
        if "scale" not in skip:
            results["scale"] = [
                bench_scale(int(n), args.queries, rng, vocab, args.data)
                for n in args.sizes.split(",")
            ]
        if "remember" not in skip:
            results["remember"] = bench_remember(rng, vocab, single=200, batches=10, batch_size=50)
        if "locomo" not in skip:
            results["locomo"] = bench_locomo(args.locomo_conversations, args.quick)
    finally:
        if not args.keep_db:
            common.drop_database()
    common.RESULTS.mkdir(parents=True, exist_ok=True)
    out = common.RESULTS / args.out
    out.with_suffix(".json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    out.with_suffix(".svg").write_text(_svg(results))
    text = report(results)
    out.with_suffix(".md").write_text(text + "\n")
    print("\n" + text)
    print(f"\nwrote {out}.json, .svg and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
