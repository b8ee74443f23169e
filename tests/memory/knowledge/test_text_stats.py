"""Per-workspace full-text statistics (issue 52): recall's BM25 reads its idf counts
from kept statistics and matches a small workspace's rows directly, and ranks exactly
as counting did.

The ranking test loads LoCoMo conversations (/work/shared/bench/locomo10.json) as
knowledge in a small workspace (below ``CAIRN_RECALL_EXACT_BELOW``: matched row by
row) and a large one (GIN path), each beside another workspace's rows, then compares
every LoCoMo question's ranked list with the statistics on and off: the same ids,
ranks and relevance, to the last bit. The statistics themselves are compared with a
recount after every kind of write the triggers must follow.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from django.db import connection
from django.test import override_settings

from memory.core.local_embedder import LOCAL_MODEL_ID
from memory.knowledge import text_stats
from memory.knowledge.recall import knowledge_search
from memory.knowledge.vector_search import ef_search_for_rows, set_vector_search_for_workspace
from memory.models import Knowledge, TextStat, TextStatDelta
from tests.factories.identity import WorkspaceFactory

pytestmark = pytest.mark.django_db

LOCOMO = Path("/work/shared/bench/locomo10.json")


def _turns(conversation: dict) -> list[str]:
    out = []
    for key, value in conversation.items():
        if key.startswith("session_") and isinstance(value, list):
            out.extend(f"{t['speaker']}: {t['text']}" for t in value)
    return out


@pytest.fixture(scope="module")
def locomo():
    return json.loads(LOCOMO.read_text())


def _load(workspace, texts: list[str], rng: random.Random) -> list[Knowledge]:
    vectors = np.random.default_rng(rng.randrange(1 << 30)).normal(size=(len(texts), 384))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return Knowledge.objects.bulk_create(
        [
            Knowledge(
                workspace=workspace,
                content=text,
                sensitive=rng.random() < 0.1,
                context=rng.choice(["global", "project-a", "project-b"]),
                embedding=vector.tolist(),
                embedding_model=LOCAL_MODEL_ID,
            )
            for text, vector in zip(texts, vectors, strict=True)
        ]
    )


def _counted() -> dict:
    """Every workspace's statistics as a recount from the knowledge table finds them."""
    with connection.cursor() as cursor:
        cursor.execute(text_stats.COUNT_SQL)
        return {(w, lx): (n, ns) for w, lx, n, ns in cursor.fetchall()}


def _kept() -> dict:
    """The kept statistics: folded counts plus pending deltas, zeros left out."""
    out: dict = {}
    for model in (TextStat, TextStatDelta):
        for w, lx, n, ns in model.objects.values_list("workspace_id", "lexeme", "n", "n_sensitive"):
            a, b = out.get((w, lx), (0, 0))
            out[(w, lx)] = (a + n, b + ns)
    return {k: v for k, v in out.items() if v != (0, 0)}


def _ranked(workspace, question: str, vector, **kw):
    hits = knowledge_search(
        workspace=workspace, query=question, query_embedding=vector, top_k=30, **kw
    )
    return [(h.id, h.vector_rank, h.text_rank, h.relevance, h.score) for h in hits]


def _compare(workspace, questions, rng, **kw) -> int:
    """Each question's list with the statistics off (counting) and on; returns how many
    lists held a text match (so the comparison is known to have compared something)."""
    matched = 0
    for question in questions:
        vector = np.random.default_rng(rng.randrange(1 << 30)).normal(size=384)
        vector = (vector / np.linalg.norm(vector)).tolist()
        for weights in ({"vector_weight": 0.0}, {}):
            with override_settings(CAIRN_RECALL_TEXT_STATS=False):
                before = _ranked(workspace, question, vector, **weights, **kw)
            after = _ranked(workspace, question, vector, **weights, **kw)
            assert after == before, question
            matched += any(r[2] is not None for r in after)
    return matched


def test_bm25_ranking_is_identical_with_statistics_on_locomo(locomo):
    rng = random.Random(52)
    small, large, other = (WorkspaceFactory() for _ in range(3))
    small_rows = _turns(locomo[0]["conversation"])
    large_rows = [t for c in locomo[1:4] for t in _turns(c["conversation"])]
    assert len(small_rows) < 1000 < len(large_rows)  # both ways of matching are compared
    _load(small, small_rows, rng)
    _load(large, large_rows, rng)
    _load(other, [t for c in locomo[4:6] for t in _turns(c["conversation"])], rng)
    assert _kept() == _counted()

    small_q = [qa["question"] for qa in locomo[0]["qa"][:40]]
    large_q = [qa["question"] for c in locomo[1:4] for qa in c["qa"][:15]]
    assert _compare(small, small_q, rng) > 30
    assert _compare(large, large_q, rng) > 30
    # With sensitive rows in, and with a filter (counted as before, small matched directly).
    assert _compare(small, small_q[:10], rng, include_sensitive=True) > 5
    assert _compare(large, large_q[:10], rng, include_sensitive=True) > 5
    assert _compare(large, large_q[:10], rng, context="project-a") > 5

    # Writes the counts must follow; ranking still identical, before and after a fold.
    items = list(Knowledge.objects.filter(workspace=large).order_by("id"))
    for item in items[:40]:
        item.status = "archived"
    for item in items[40:80]:
        item.sensitive = not item.sensitive
    for item in items[80:120]:
        item.content = item.content + " tortoise"
    Knowledge.objects.bulk_update(items[:120], ["status", "sensitive", "content"])
    Knowledge.objects.filter(pk__in=[i.pk for i in items[120:140]]).update(superseded_by=items[200])
    Knowledge.objects.filter(pk__in=[i.pk for i in items[140:160]]).delete()
    Knowledge.objects.filter(pk__in=[i.pk for i in items[:10]]).update(status="active")
    assert _kept() == _counted()
    assert _compare(large, large_q[:15] + ["where is the tortoise"], rng) > 10
    assert text_stats.fold()["folded"] > 0
    assert TextStatDelta.objects.count() == 0
    assert _kept() == _counted()
    assert _compare(large, large_q[:15], rng) > 10


def test_recall_use_counts_write_no_deltas(workspace):
    Knowledge.objects.create(workspace=workspace, content="the heron nests by the weir")
    text_stats.fold()
    Knowledge.objects.filter(workspace=workspace).update(use_count=3, confidence=0.9)
    assert TextStatDelta.objects.count() == 0


def test_random_writes_keep_counts_exact():
    rng = random.Random(7)
    spaces = [WorkspaceFactory() for _ in range(3)]
    words = "heron weir tortoise river kettle lamp orchard violin ledger".split()
    for step in range(60):
        op = rng.choice(["create", "create", "archive", "edit", "sensitive", "delete", "fold"])
        qs = Knowledge.objects.filter(workspace=rng.choice(spaces))
        if op == "create":
            Knowledge.objects.bulk_create(
                Knowledge(
                    workspace=rng.choice(spaces),
                    content=" ".join(rng.choices(words, k=rng.randint(1, 6))),
                    sensitive=rng.random() < 0.3,
                )
                for _ in range(rng.randint(1, 5))
            )
        elif op == "archive":
            qs.filter(pk__in=qs.values("pk")[:2]).update(status=rng.choice(["archived", "active"]))
        elif op == "edit":
            qs.filter(pk__in=qs.values("pk")[:3]).update(content=" ".join(rng.choices(words, k=3)))
        elif op == "sensitive":
            qs.filter(pk__in=qs.values("pk")[:2]).update(sensitive=rng.random() < 0.5)
        elif op == "delete":
            qs.filter(pk__in=qs.values("pk")[:1]).delete()
        else:
            text_stats.fold()
        assert _kept() == _counted(), (step, op)
    # A deleted workspace's counts fold away to nothing.
    spaces[0].delete()
    text_stats.fold()
    assert not TextStat.objects.filter(workspace_id=spaces[0].pk).exists()
    assert _kept() == _counted()


def test_rebuild_counts_what_the_table_holds(workspace):
    Knowledge.objects.create(workspace=workspace, content="lamp orchard")
    text_stats.fold()
    # As after a bulk load with the triggers off: rows the counts do not hold.
    Knowledge.objects.create(workspace=workspace, content="violin ledger")
    TextStatDelta.objects.all().delete()
    assert _kept() != _counted()
    text_stats.rebuild()
    assert _kept() == _counted()
    assert (workspace.pk, "violin") in _kept()


def test_truncate_empties_the_counts(workspace):
    Knowledge.objects.create(workspace=workspace, content="heron weir")
    text_stats.fold()
    Knowledge.objects.create(workspace=workspace, content="kettle lamp")
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # no FK check pending at TRUNCATE
        cursor.execute("TRUNCATE memory_knowledge CASCADE")
    assert _kept() == _counted() == {}


@override_settings(
    CAIRN_RECALL_EF_SEARCH=100,
    CAIRN_RECALL_EF_SEARCH_GROW_FROM=100_000,
    CAIRN_RECALL_EF_SEARCH_GROWTH=0.6,
    CAIRN_RECALL_EF_SEARCH_MAX=400,
)
def test_walk_widens_with_the_workspace_only_past_the_threshold():
    assert [ef_search_for_rows(n) for n in (0, 1_000, 100_000)] == [100, 100, 100]
    grown = [ef_search_for_rows(n) for n in (200_000, 500_000, 1_000_000, 10_000_000)]
    assert grown == sorted(grown) and 100 < grown[0] < grown[-1]
    assert grown[2] == 398 and grown[3] == 400


@override_settings(
    CAIRN_RECALL_EF_SEARCH=100,
    CAIRN_RECALL_EF_SEARCH_GROW_FROM=100_000,
    CAIRN_RECALL_EF_SEARCH_GROWTH=0.6,
    CAIRN_RECALL_EF_SEARCH_MAX=400,
)
@pytest.mark.parametrize("rows", [0, 99_999, 100_000, 100_001, 250_000, 1_000_000, 10_000_000])
@pytest.mark.parametrize("floor", [10, 150])
def test_recall_sets_the_walk_from_the_kept_count_in_one_statement(rows, floor):
    """The statement recall runs gives the walk ef_search_for_rows gives, folded and
    pending counts added, never below the hits asked for."""
    workspace = WorkspaceFactory()
    TextStat.objects.create(workspace_id=workspace.pk, lexeme="", n=rows // 2)
    TextStatDelta.objects.create(workspace_id=workspace.pk, lexeme="", n=rows - rows // 2)
    with connection.cursor() as cursor:
        set_vector_search_for_workspace(cursor, workspace_id=workspace.pk, floor=floor)
        cursor.execute("SHOW hnsw.ef_search")
        assert int(cursor.fetchone()[0]) == max(ef_search_for_rows(rows), floor)
