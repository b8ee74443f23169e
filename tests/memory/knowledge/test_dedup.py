import pytest

from cairn.errors import ApplicationError
from memory.core.actors import Actor
from memory.core.embeddings import get_embedder
from memory.knowledge.batch import knowledge_remember_many
from memory.knowledge.dedup import _dedup_candidates, normalised_words, overlap_coefficient
from memory.knowledge.remember import knowledge_remember
from memory.knowledge.services import knowledge_forget
from memory.knowledge.validation import knowledge_prepare
from memory.models import Knowledge
from tests.factories.identity import AgentFactory, WorkspaceFactory
from tests.factories.knowledge import KnowledgeFactory

pytestmark = pytest.mark.django_db

AWS_KEY = "AKIA" + "IOSFODNN7EXAMPLE"


@pytest.fixture
def as_agent(agent):
    return Actor.for_agent(agent)


# --------------------------------------------------------------------------- dedup


def test_overlap_is_szymkiewicz_simpson_over_normalised_words():
    a = normalised_words("User prefers DARK mode.")
    b = normalised_words("user prefers dark mode in the editor")
    assert a == {"user", "prefers", "dark", "mode"}
    assert overlap_coefficient(a, b) == 1.0
    assert overlap_coefficient(a, normalised_words("user likes light mode")) == 0.5
    assert overlap_coefficient(a, frozenset()) == 0.0


def test_it_updates_the_item_a_new_one_repeats(workspace, as_agent):
    first = knowledge_remember(
        workspace=workspace, actor=as_agent, content="User prefers dark mode", category="preference"
    )
    second = knowledge_remember(
        workspace=workspace,
        actor=as_agent,
        content="User prefers dark mode in the editor",
        category="preference",
    )
    assert not second.created
    assert second.deduplicated_into == first.item.pk
    assert second.overlap == 1.0
    item = Knowledge.objects.get()
    assert item.content == "User prefers dark mode in the editor"
    assert item.metadata["dedup_count"] == 1
    assert item.confidence == 0.5  # a repeat is not evidence


def test_it_adds_a_new_item_at_exactly_0_8_overlap(workspace, as_agent):
    knowledge_remember(
        workspace=workspace, actor=as_agent, content="alpha beta gamma delta epsilon"
    )
    result = knowledge_remember(
        workspace=workspace, actor=as_agent, content="alpha beta gamma delta zeta"
    )
    assert result.created  # 4/5 = 0.8 is not "more than 0.8"
    assert Knowledge.objects.count() == 2


@pytest.mark.parametrize(
    "other",
    [{"category": "note"}, {"context": "work"}, {"entity": "person:sam"}],
)
def test_it_dedups_only_within_category_context_and_entity(workspace, as_agent, other):
    knowledge_remember(workspace=workspace, actor=as_agent, content="Standup is at ten")
    result = knowledge_remember(
        workspace=workspace, actor=as_agent, content="Standup is at ten", **other
    )
    assert result.created
    assert Knowledge.objects.count() == 2


def test_it_does_not_dedup_into_archived_items(workspace, as_agent):
    first = knowledge_remember(workspace=workspace, actor=as_agent, content="Standup is at ten")
    knowledge_forget(workspace=workspace, item_id=first.item.pk, actor=as_agent)
    assert knowledge_remember(
        workspace=workspace, actor=as_agent, content="Standup is at ten"
    ).created


def test_it_does_not_dedup_across_workspaces(workspace, as_agent):
    other = WorkspaceFactory()
    knowledge_remember(
        workspace=other, actor=Actor.for_agent(AgentFactory(workspace=other)), content="Same words"
    )
    assert knowledge_remember(workspace=workspace, actor=as_agent, content="Same words").created


def test_an_agent_never_overwrites_a_sealed_item_through_dedup(workspace, as_agent):
    sealed = KnowledgeFactory(
        workspace=workspace, content="Deploys need two approvals", sealed=True
    )
    result = knowledge_remember(
        workspace=workspace, actor=as_agent, content="Deploys need two approvals"
    )
    assert result.created
    sealed.refresh_from_db()
    assert sealed.content == "Deploys need two approvals"


def test_dedup_reads_a_bounded_candidate_list_from_the_indexes(workspace, as_agent):
    # 60 items all sharing words with the new one: the candidate list stays capped.
    Knowledge.objects.bulk_create(
        [
            Knowledge(workspace=workspace, content=f"shared words item {i} variant {i * 7}")
            for i in range(60)
        ]
    )
    prepared = knowledge_prepare(actor=as_agent, content="shared words item")
    prepared.embedding = get_embedder().embed_one(prepared.content)
    candidates = _dedup_candidates(workspace, prepared)
    assert 0 < len(candidates) <= 20  # 20 from the GIN list; no vectors stored to add more


def test_concurrent_style_repeats_in_one_batch_dedup_into_the_first(workspace, as_agent):
    results = knowledge_remember_many(
        workspace=workspace,
        actor=as_agent,
        items=[{"content": "Sarah likes tea"}, {"content": "Sarah likes tea in the morning"}],
    )
    assert results[0].created and not results[1].created
    assert results[1].deduplicated_into == results[0].item.pk
    assert Knowledge.objects.count() == 1


def test_a_batch_is_all_or_nothing_and_names_the_item(workspace, as_agent):
    with pytest.raises(ApplicationError) as caught:
        knowledge_remember_many(
            workspace=workspace,
            actor=as_agent,
            items=[{"content": "fine"}, {"content": "key " + AWS_KEY}],
        )
    assert list(caught.value.fields) == ["items[1].content"]
    assert not Knowledge.objects.exists()


def test_error_items_dedup_by_operation_key(workspace, as_agent):
    first = knowledge_remember(
        workspace=workspace,
        actor=as_agent,
        content="pytest fails: database missing",
        category="error",
        operation_key="pytest",
    )
    second = knowledge_remember(
        workspace=workspace,
        actor=as_agent,
        content="completely different wording of the failure",
        category="error",
        operation_key="pytest",
    )
    assert second.deduplicated_into == first.item.pk
    assert Knowledge.objects.filter(category="error").count() == 1


# --------------------------------------------------------------------------- never lose content

NEAR_MISSES = [
    ("I bought a red tennis racket yesterday", "I bought a blue tennis racket yesterday"),
    (
        "The deploy takes 5 minutes on the big runner",
        "The deploy takes 50 minutes on the big runner",
    ),
    ("We met Anna at the cafe near the office", "We met Maria at the cafe near the office"),
    ("The release is planned for Monday at noon", "The release is planned for Friday at noon"),
    ("Standup moved to ten in the small room", "Standup moved to eleven in the small room"),
    (
        "Caroline went to the support group in May 2023",
        "Caroline went to the support group in June 2023",
    ),
    ("She has two dogs and a cat at home", "She has three dogs and a cat at home"),
    ("My sister loves hiking in the mountains", "My brother loves hiking in the mountains"),
    (
        "The build cache lives on the NAS in rack four",
        "The build cache lives on the SAN in rack four",
    ),
]


def test_near_misses_are_never_merged(workspace, as_agent):
    for a, b in NEAR_MISSES:
        first = knowledge_remember(workspace=workspace, actor=as_agent, content=a)
        second = knowledge_remember(workspace=workspace, actor=as_agent, content=b)
        assert first.created and second.created, (a, b)
    stored = set(Knowledge.objects.values_list("content", flat=True))
    assert stored == {text for pair in NEAR_MISSES for text in pair}


def test_near_misses_in_one_batch_are_never_merged(workspace, as_agent):
    items = [{"content": text} for pair in NEAR_MISSES for text in pair]
    results = knowledge_remember_many(workspace=workspace, actor=as_agent, items=items)
    assert all(r.created for r in results)
    assert Knowledge.objects.count() == len(items)


def test_transcript_turns_are_never_merged(workspace, as_agent):
    items = [
        {"content": "Yes, I love it so much!", "metadata": {"dia_id": "D1:3"}},
        {"content": "Yes, I love it so much!", "metadata": {"dia_id": "D4:7"}},
        {"content": "Wow, that sounds great", "metadata": {"kind": "turn"}},
        {"content": "Wow, that sounds really great", "metadata": {"kind": "turn"}},
    ]
    results = knowledge_remember_many(workspace=workspace, actor=as_agent, items=items)
    assert all(r.created for r in results)


def test_a_merge_keeps_every_source_and_the_fuller_wording(workspace, as_agent):
    first = knowledge_remember(
        workspace=workspace,
        actor=as_agent,
        content="Sarah likes green tea in the morning",
        metadata={"session": "s1", "note": "first"},
    )
    second = knowledge_remember(
        workspace=workspace,
        actor=as_agent,
        content="Sarah likes green tea",
        metadata={"session": "s2", "extra": "x"},
    )
    assert second.deduplicated_into == first.item.pk
    item = Knowledge.objects.get()
    assert item.content == "Sarah likes green tea in the morning"  # the shorter adds nothing
    assert item.metadata["session"] == "s1" and item.metadata["note"] == "first"
    assert item.metadata["extra"] == "x"
    assert item.metadata["merged"] == [
        {"source": "agent", "metadata": {"session": "s2", "extra": "x"}}
    ]
    assert item.metadata["dedup_count"] == 1


def test_dedup_needs_the_vectors_to_agree_as_well_as_the_words(workspace, as_agent):
    dims = len(get_embedder().embed_one("x"))
    one, other = [1.0] + [0.0] * (dims - 1), [0.0, 1.0] + [0.0] * (dims - 2)
    knowledge_remember(
        workspace=workspace, actor=as_agent, content="Standup is at ten", embedding=one
    )
    again = knowledge_remember(
        workspace=workspace, actor=as_agent, content="Standup is at ten", embedding=other
    )
    assert again.created
    same = knowledge_remember(
        workspace=workspace, actor=as_agent, content="Standup is at ten", embedding=one
    )
    assert not same.created


# --------------------------------------------------------------------------- set-based batches


def test_a_batch_of_100_takes_a_handful_of_queries(
    workspace, as_agent, django_assert_max_num_queries
):
    knowledge_remember(workspace=workspace, actor=as_agent, content="Sarah likes green tea")
    items = [{"content": f"Item {i} says the build number is {i * 13}"} for i in range(98)]
    items += [
        {"content": "Sarah likes green tea in the morning", "metadata": {"session": "b"}},
        {"content": "Item 3 says the build number is 39", "metadata": {"session": "c"}},
    ]
    get_embedder().embed([i["content"] for i in items])  # warm: the model call is not a query
    # lock, search settings, vector types, earned guard (one query), candidates, quoted
    # read, insert, update, and the savepoint pair: set-based, not one per item.
    with django_assert_max_num_queries(11):
        results = knowledge_remember_many(workspace=workspace, actor=as_agent, items=items)
    assert sum(r.created for r in results) == 98
    tea = results[98]
    assert not tea.created and tea.item.content == "Sarah likes green tea in the morning"
    assert tea.item.metadata["merged"] == [{"source": "agent", "metadata": {"session": "b"}}]
    assert results[99].deduplicated_into == results[3].item.pk
    assert Knowledge.objects.count() == 99
    stored = Knowledge.objects.get(pk=tea.item.pk)
    assert stored.content == "Sarah likes green tea in the morning"
    assert stored.metadata["dedup_count"] == 1


def test_the_set_based_batch_decides_like_item_by_item(workspace, as_agent):
    other = WorkspaceFactory()
    other_actor = Actor.for_agent(AgentFactory(workspace=other))
    texts = [text for pair in NEAR_MISSES for text in pair] + [
        "User prefers dark mode",
        "User prefers dark mode in the editor",
        "Standup is at ten",
        "Standup is at ten",
        "Sarah likes tea",
        "Sarah likes tea in the morning",
    ]
    batch = knowledge_remember_many(
        workspace=workspace, actor=as_agent, items=[{"content": t} for t in texts]
    )
    one_by_one = [knowledge_remember(workspace=other, actor=other_actor, content=t) for t in texts]
    assert [r.created for r in batch] == [r.created for r in one_by_one]
    assert sorted(
        Knowledge.objects.filter(workspace=workspace).values_list("content", flat=True)
    ) == sorted(Knowledge.objects.filter(workspace=other).values_list("content", flat=True))


def test_vectors_are_kept_in_the_row_not_in_toast(workspace, as_agent):
    """pgvector's default EXTERNAL storage moved a knowledge item's vector out of line
    once its row passed the 2 kB TOAST threshold, so each exact distance in the batch
    dedup check read it through the TOAST index; migration 0024 keeps them inline."""
    from django.db import connection

    words = " ".join(f"word{i} detail{i * 7}" for i in range(60))  # a row over 2 kB
    item = knowledge_remember(
        workspace=workspace, actor=as_agent, content=f"The staging notes: {words}"
    ).item
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT attrelid::regclass::text, attname, attstorage FROM pg_attribute "
            "WHERE attname LIKE '%%embedding' AND attrelid::regclass::text LIKE 'memory_%%'"
        )
        storage = {(t, c): s for t, c, s in cursor.fetchall()}
        cursor.execute(
            "SELECT pg_column_toast_chunk_id(embedding), pg_column_size(k.*) "
            "FROM memory_knowledge k WHERE id = %s",
            [item.pk],
        )
        chunk, row_size = cursor.fetchone()
    assert storage == {
        ("memory_knowledge", "embedding"): "p",
        ("memory_conversationturn", "embedding"): "p",
        ("memory_skilldelta", "trigger_embedding"): "p",
        ("memory_skilldelta", "payload_embedding"): "p",
    }
    assert row_size > 1500 and chunk is None  # in the row, not a TOAST pointer
    # The control: with pgvector's default storage the same kind of row's vector is toasted.
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # no pending trigger events
        cursor.execute("ALTER TABLE memory_knowledge ALTER COLUMN embedding SET STORAGE EXTERNAL")
    other = knowledge_remember(
        workspace=workspace, actor=as_agent, content=f"The production notes: {words.upper()}"
    ).item
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_column_toast_chunk_id(embedding) FROM memory_knowledge WHERE id = %s",
            [other.pk],
        )
        assert cursor.fetchone()[0] is not None
