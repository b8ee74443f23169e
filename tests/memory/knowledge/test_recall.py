from datetime import timedelta

import numpy as np
import pytest
from django.db import connection
from django.utils import timezone

from memory.core.actors import Actor
from memory.core.embeddings import get_embedder
from memory.core.local_embedder import LOCAL_MODEL_ID
from memory.knowledge.recall import knowledge_recall, knowledge_search, recall_default_top_k
from memory.knowledge.remember import knowledge_remember
from memory.knowledge.services import knowledge_forget, knowledge_update
from memory.models import Knowledge
from tests.factories.identity import WorkspaceFactory
from tests.factories.knowledge import KnowledgeFactory
from tests.memory.knowledge.advice_fixture import ADVICE, DISTRACTORS, PREFERENCES
from tests.memory.knowledge.recall_fixture import FACTS

# Rows written straight to the table carry their model, as the services write them.
MODEL = LOCAL_MODEL_ID

pytestmark = pytest.mark.django_db


def _ids(result):
    return [hit.id for hit in result.hits]


# --------------------------------------------------------------------------- top_k rule


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("Sarah's email", 3),
        ("what editor theme do I use", 3),
        ("how do I deploy the staging server", 5),
        ("what did we decide about the database migration plan last week", 5),
        ("compare the two hosting offers", 10),
        ("history of the outage", 10),
        ("list every meeting with Sam", 10),
        (" ".join(["word"] * 21), 10),
    ],
)
def test_top_k_defaults_by_query_complexity(query, expected):
    assert recall_default_top_k(query) == expected


# --------------------------------------------------------------------------- scoring


def test_each_result_shows_its_ranks_and_a_score_from_relevance_plus_strength(workspace):
    item = KnowledgeFactory(workspace=workspace, content="The build uses Bazel", confidence=0.8)
    KnowledgeFactory(workspace=workspace, content="Lunch is served at noon")
    result = knowledge_recall(workspace=workspace, query="Bazel build", top_k=2)
    top = result.hits[0]
    assert top.id == item.pk
    assert (top.vector_rank, top.text_rank) == (1, 1)
    # First in both lists, and its text match holds every query word: the full weight.
    assert top.relevance == pytest.approx(1.0)
    assert top.score == pytest.approx(1.0 + 0.05 * 0.8)
    other = result.hits[1]
    assert other.text_rank is None and other.vector_rank == 2
    # Last of the vector list (scaled 0..1 over the list) and no text match.
    assert other.relevance == pytest.approx(0.0)


def test_reciprocal_rank_fusion_is_still_there_for_comparison(workspace, settings):
    settings.CAIRN_RECALL_FUSION = "rrf"
    KnowledgeFactory(workspace=workspace, content="The build uses Bazel")
    KnowledgeFactory(workspace=workspace, content="Lunch is served at noon")
    top, other = knowledge_recall(workspace=workspace, query="Bazel build", top_k=2).hits
    assert top.relevance == pytest.approx(1.0)  # rank 1 in both lists
    k = settings.CAIRN_RECALL_RRF_K
    w_vec, w_text = settings.CAIRN_RECALL_VECTOR_WEIGHT, settings.CAIRN_RECALL_TEXT_WEIGHT
    assert other.relevance == pytest.approx((w_vec / (k + 2)) * (k + 1) / (w_vec + w_text))


def test_strength_is_only_a_tiebreaker(workspace):
    relevant = KnowledgeFactory(
        workspace=workspace, content="The staging database is Postgres 16", confidence=0.05
    )
    strong = KnowledgeFactory(workspace=workspace, content="Bananas are yellow", confidence=1.0)
    result = knowledge_recall(workspace=workspace, query="staging Postgres database", top_k=2)
    # Rank 1 in both lists (relevance 1.0) against rank 2 in one (0.59): the 0.95
    # confidence gap is worth 0.0475, far too little to swap them.
    assert [h.id for h in result.hits] == [relevant.pk, strong.pk]
    assert result.hits[0].relevance - result.hits[1].relevance > 0.05


def test_equal_relevance_is_broken_by_confidence(workspace):
    vector = get_embedder().embed_one("deploy checklist")
    weak = KnowledgeFactory(workspace=workspace, content="deploy checklist", confidence=0.3)
    strong = KnowledgeFactory(workspace=workspace, content="deploy checklist ", confidence=0.9)
    Knowledge.objects.filter(pk__in=[weak.pk, strong.pk]).update(
        embedding=vector, embedding_model=MODEL
    )
    hits = knowledge_search(
        workspace=workspace,
        query="deploy checklist",
        query_embedding=vector,
        top_k=2,
        vector_weight=0.0,  # text-only: the two rows tie on the text rank order by id
        text_weight=1.0,
    )
    # Text ranks differ only by id order; the 0.05 × confidence gap decides.
    assert [h.id for h in hits] == [strong.pk, weak.pk]


def test_text_only_matches_still_come_back_without_vectors(workspace):
    item = KnowledgeFactory(workspace=workspace, content="Kubernetes namespace is payments-prod")
    Knowledge.objects.filter(pk=item.pk).update(embedding=None)
    result = knowledge_recall(workspace=workspace, query="payments-prod namespace")
    assert result.hits[0].id == item.pk
    assert result.hits[0].vector_rank is None and result.hits[0].text_rank == 1


# --------------------------------------------------------------------------- filters


def test_recall_filters_by_context_plus_global(workspace):
    work = KnowledgeFactory(workspace=workspace, content="Standup at ten", context="work")
    home = KnowledgeFactory(workspace=workspace, content="Standup desk at home", context="home")
    everywhere = KnowledgeFactory(workspace=workspace, content="Standup rules", context="global")
    ids = _ids(knowledge_recall(workspace=workspace, query="standup", context="work", top_k=10))
    assert set(ids) == {work.pk, everywhere.pk}
    assert home.pk not in ids


def test_recall_filters_by_category_entity_and_time(workspace):
    old = KnowledgeFactory(workspace=workspace, content="Sam likes tea", entity="person:sam")
    Knowledge.objects.filter(pk=old.pk).update(observed_at=timezone.now() - timedelta(days=30))
    new = KnowledgeFactory(workspace=workspace, content="Sam likes coffee", entity="person:sam")
    note = KnowledgeFactory(
        workspace=workspace, content="Sam likes jazz", entity="person:sam", category="note"
    )
    ann = KnowledgeFactory(workspace=workspace, content="Ann likes tea", entity="person:ann")
    by_entity = _ids(
        knowledge_recall(workspace=workspace, query="likes", entity="person:sam", top_k=10)
    )
    assert set(by_entity) == {old.pk, new.pk, note.pk}
    by_category = _ids(
        knowledge_recall(workspace=workspace, query="likes", category="note", top_k=10)
    )
    assert by_category == [note.pk]
    recent = _ids(
        knowledge_recall(
            workspace=workspace,
            query="likes",
            time_from=timezone.now() - timedelta(days=1),
            top_k=10,
        )
    )
    assert set(recent) == {new.pk, note.pk, ann.pk}
    older = _ids(
        knowledge_recall(
            workspace=workspace,
            query="likes",
            time_to=timezone.now() - timedelta(days=1),
            top_k=10,
        )
    )
    assert older == [old.pk]


def test_sensitive_items_only_on_request(workspace):
    secret = KnowledgeFactory(workspace=workspace, content="Sam's home is Elm St", sensitive=True)
    assert secret.pk not in _ids(knowledge_recall(workspace=workspace, query="where Sam lives"))
    assert secret.pk in _ids(
        knowledge_recall(workspace=workspace, query="where Sam lives", include_sensitive=True)
    )


def test_archived_and_superseded_items_never_come_back(workspace, agent):
    actor = Actor.for_agent(agent)
    archived = knowledge_remember(workspace=workspace, actor=actor, content="VPN host is vpn1").item
    knowledge_forget(workspace=workspace, item_id=archived.pk, actor=actor)
    old = knowledge_remember(workspace=workspace, actor=actor, content="Wiki lives on Confluence")
    new = knowledge_update(
        workspace=workspace,
        item_id=old.item.pk,
        actor=actor,
        changes={"content": "Wiki moved to Notion"},
    ).item
    ids = _ids(knowledge_recall(workspace=workspace, query="vpn host wiki", top_k=50))
    assert ids == [new.pk]


def test_recall_never_crosses_workspaces(workspace):
    KnowledgeFactory(workspace=WorkspaceFactory(), content="Other tenant's deploy secret place")
    mine = KnowledgeFactory(workspace=workspace, content="Our deploy runbook")
    assert _ids(knowledge_recall(workspace=workspace, query="deploy", top_k=50)) == [mine.pk]


def test_a_tight_filter_still_finds_its_rows(workspace):
    # Many rows outside the filter; the vector list must not be starved by them.
    embedder = get_embedder()
    texts = [f"Filler note {i} about assorted topics" for i in range(150)]
    Knowledge.objects.bulk_create(
        [
            Knowledge(workspace=workspace, content=t, embedding=v, embedding_model=MODEL)
            for t, v in zip(texts, embedder.embed(texts), strict=True)
        ]
    )
    wanted = [
        KnowledgeFactory(workspace=workspace, content=f"Ops fact {i}", entity="team:ops")
        for i in range(3)
    ]
    result = knowledge_recall(
        workspace=workspace, query="assorted topics", entity="team:ops", top_k=10
    )
    assert set(_ids(result)) == {w.pk for w in wanted}


def test_a_walk_cut_short_by_other_tenants_rows_is_answered_exactly(workspace, settings):
    """A small workspace on a big shared table: the HNSW walk visits at most
    CAIRN_RECALL_MAX_SCAN_TUPLES index entries, most of them another tenant's (or dead
    ones not yet vacuumed), and may come back with a few of this workspace's rows
    but not all it was asked for. Recall then answers the scope exactly."""
    settings.CAIRN_RECALL_MAX_SCAN_TUPLES = 100
    settings.CAIRN_RECALL_EXACT_BELOW = 0  # walk the index, as for a large workspace
    embedder = get_embedder()
    texts = [f"Filler note {i} about assorted topics" for i in range(600)]
    other = WorkspaceFactory()
    Knowledge.objects.bulk_create(
        [
            Knowledge(workspace=other, content=t, embedding=v, embedding_model=MODEL)
            for t, v in zip(texts, embedder.embed(texts), strict=True)
        ]
    )
    mine = ["Ops note about assorted topics"] + [f"Ops fact {i}: the pager rota" for i in range(7)]
    wanted = Knowledge.objects.bulk_create(
        [
            Knowledge(workspace=workspace, content=t, embedding=v, embedding_model=MODEL)
            for t, v in zip(mine, embedder.embed(mine), strict=True)
        ]
    )
    with connection.cursor() as cursor:
        # The plan a large table gets (walk the index, no sort); on a table this small
        # the planner would sort the workspace's few rows instead. Ends with the test.
        cursor.execute("SET LOCAL enable_sort = off")
    result = knowledge_recall(workspace=workspace, query="assorted topics", top_k=10)
    assert set(_ids(result)) == {w.pk for w in wanted}


def test_a_small_workspace_is_searched_exactly_however_crowded_the_index(workspace):
    """The advice fixture (issue 17), with 80 copies of each of its vectors stored in
    another workspace and deleted: dead entries in the shared HNSW graph, not yet
    vacuumed. The walk then came back with enough of this workspace's rows but not
    its nearest (through the API, 3 of the 20 answers in the top 3 instead of 7).
    A workspace under CAIRN_RECALL_EXACT_BELOW rows is read exactly: its nearest
    rows are the exact nearest rows. Fails with CAIRN_RECALL_EXACT_BELOW=0."""
    embedder = get_embedder()
    contents = PREFERENCES + DISTRACTORS
    vectors = np.array(embedder.embed(contents))
    mine = Knowledge.objects.bulk_create(
        Knowledge(workspace=workspace, content=c, embedding=v, embedding_model=MODEL)
        for c, v in zip(contents, vectors, strict=True)
    )
    other = WorkspaceFactory()
    columns = [
        f.column
        for f in Knowledge._meta.concrete_fields
        if f.column not in ("id", "workspace_id", "content", "search_vector")
    ]
    listed = ", ".join(columns)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO memory_knowledge (workspace_id, content, {listed}) "
            f"SELECT %s, content || ' ' || g, {listed} FROM memory_knowledge, "
            "generate_series(1, 80) g WHERE workspace_id = %s",
            [other.pk, workspace.pk],
        )
        cursor.execute("DELETE FROM memory_knowledge WHERE workspace_id = %s", [other.pk])
        cursor.execute("SET LOCAL enable_sort = off")  # the plan a large table gets
    questions = [question for _, question, _ in ADVICE]
    asked = np.array([embedder.embed_one(q) for q in questions])
    nearest = np.argsort(-(asked @ vectors.T), axis=1)[:, :3]
    for question, vector, expected in zip(questions, asked, nearest, strict=True):
        hits = knowledge_search(
            workspace=workspace,
            query=question,
            query_embedding=vector.tolist(),
            top_k=3,
            text_weight=0.0,
        )
        assert [h.id for h in hits] == [mine[i].pk for i in expected], question


# --------------------------------------------------------------------------- retrieval is not evidence


def test_recall_refreshes_use_but_never_changes_confidence(workspace):
    item = KnowledgeFactory(workspace=workspace, content="The VPN is WireGuard", confidence=0.7)
    before = Knowledge.objects.get(pk=item.pk)
    for _ in range(3):
        assert item.pk in _ids(knowledge_recall(workspace=workspace, query="which VPN"))
    after = Knowledge.objects.get(pk=item.pk)
    assert after.confidence == 0.7
    assert after.use_count == 3
    assert after.last_used_at is not None
    assert after.updated_at == before.updated_at


# --------------------------------------------------------------------------- quality


def test_recall_quality_on_paraphrased_queries(workspace):
    """hit@3 ≥ 0.9 on 40 paraphrases.

    The threshold: a paraphrase shares few words with its fact, so this tests the
    vector side and that fusion does not drown it in keyword matches. When written,
    hybrid and vector-only scored 40/40 and text-only 0/40 (AND) or 19/40 (OR). 0.9
    leaves room for another embedder's noise (CAIRN_EMBEDDER) without letting a
    broken fusion, a text-dominated weighting or a broken filter pass.
    """
    embedder = get_embedder()
    vectors = embedder.embed([fact for fact, _ in FACTS])
    items = Knowledge.objects.bulk_create(
        [
            Knowledge(workspace=workspace, content=fact, embedding=vector, embedding_model=MODEL)
            for (fact, _), vector in zip(FACTS, vectors, strict=True)
        ]
    )
    hits = 0
    misses = []
    for item, (_, question) in zip(items, FACTS, strict=True):
        ids = _ids(knowledge_recall(workspace=workspace, query=question, top_k=3))
        if item.pk in ids:
            hits += 1
        else:
            misses.append(question)
    assert hits / len(FACTS) >= 0.9, misses


def test_an_empty_index_walk_falls_back_to_an_exact_answer(settings):
    """A filtered HNSW walk that runs out of budget must not drop the vector side."""
    import numpy as np
    from django.db import connection

    mine, crowd = WorkspaceFactory(), WorkspaceFactory()
    rng = np.random.default_rng(3)
    query = rng.normal(size=384)
    query /= np.linalg.norm(query)

    def near(scale):
        v = query + scale * rng.normal(size=384)
        return (v / np.linalg.norm(v)).tolist()

    # Another workspace crowds the graph around the query; mine has one item, a bit further.
    Knowledge.objects.bulk_create(
        [Knowledge(workspace=crowd, content=f"crowd {i}", embedding=near(0.05),
                   embedding_model=MODEL) for i in range(400)]
    )  # fmt: skip
    only = Knowledge.objects.create(
        workspace=mine, content="the only one", embedding=near(0.5), embedding_model=MODEL
    )
    # The classic starvation: the walk returns its ef_search candidates, all from the
    # crowd, and the workspace filter leaves nothing.
    settings.CAIRN_RECALL_ITERATIVE_SCAN = "off"
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memory_knowledge")
        # Make the planner take the HNSW path rather than the btree + sort it would
        # choose for so small a scope (the fallback's sort has no alternative).
        cursor.execute("SET enable_seqscan = off")
        cursor.execute("SET enable_sort = off")
    try:
        hits = knowledge_search(
            workspace=mine,
            query="",
            query_embedding=query.tolist(),
            top_k=3,
            ef_search=1,
            text_weight=0.0,
        )
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET enable_seqscan")
            cursor.execute("RESET enable_sort")
    assert [h.id for h in hits] == [only.id]
    assert hits[0].vector_rank == 1


# --------------------------------------------------------------------------- use counts under locks


@pytest.mark.django_db(transaction=True)
def test_mark_used_never_waits_for_a_row_another_transaction_holds():
    """A recall marking rows another transaction holds skips them instead of waiting
    (waiting in different orders is how two recalls deadlocked)."""
    import threading

    from django.db import connection, transaction

    from memory.knowledge.recall import knowledge_mark_used

    ws = WorkspaceFactory()
    held = KnowledgeFactory(workspace=ws, content="held row")
    free = KnowledgeFactory(workspace=ws, content="free row")
    locked, release = threading.Event(), threading.Event()

    def hold():
        with transaction.atomic():
            Knowledge.objects.select_for_update().get(pk=held.pk)
            locked.set()
            release.wait(30)
        connection.close()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert locked.wait(30)
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '2s'")  # the old UPDATE would wait here
        marked = knowledge_mark_used(workspace=ws, item_ids=[free.pk, held.pk])
    finally:
        release.set()
        holder.join()
    assert marked == 1
    held.refresh_from_db()
    free.refresh_from_db()
    assert (held.use_count, free.use_count) == (0, 1)
