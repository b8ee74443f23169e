"""When is a new item a restatement of a stored one?

Dedup must never lose content, so a merge needs all of:

1. same workspace, category, context and entity (the candidate query's scope);
2. word overlap (Szymkiewicz-Simpson) above CAIRN_DEDUP_OVERLAP;
3. cosine similarity of the two vectors at least CAIRN_DEDUP_MIN_SIMILARITY, when both
   have one from the same model;
4. one side's content words contained in the other's (a restatement adds or drops
   words, it does not swap them: "a red racket" / "a blue racket" stay two items);
5. no number, date or name that the other side lacks, except on the fuller side
   (which is the wording kept), and no negation that the other side lacks ("never",
   "not", "n't" are never stopwords: "are never encrypted" does not restate "are
   encrypted");
6. neither is a transcript turn (metadata ``kind: "turn"``, ``turn_index``, ``dia_id``
   or ``role``): turns are distinct utterances even when they repeat each other;
7. the stored item's words may change by this writer
   (``memory.core.trust.words_may_change``): an earned item is never rewritten by an
   agent; the agent's item is stored beside it as a claim.

``merge_metadata`` then keeps every source (services.py keeps the fuller wording)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.conf import settings
from django.db import connection

from memory.core.actors import Actor
from memory.core.text import WORD
from memory.core.trust import knowledge_earned_ids, words_may_change
from memory.knowledge.prepared import Prepared
from memory.knowledge.selectors import json_value
from memory.knowledge.vector_search import set_vector_search, vector_literal
from memory.models import (
    PRIVILEGED_CATEGORIES,
    Category,
    Knowledge,
    KnowledgeStatus,
    Workspace,
)


def normalised_words(text: str) -> frozenset[str]:
    """The word set dedup compares: case-folded runs of letters and digits."""
    return frozenset(w.casefold() for w in WORD.findall(text))


# Function words: a restatement may add or drop these freely.
STOPWORDS = frozenset(
    """a an the and or but of to in on at for with by from as is are was were be been being
    am do does did has have had i me my we our you your he him his she her it its they them
    their this that these those there here so very really just also too then than
    yes about into over up out if what which who whom when where why how can could would
    should will shall may might must all any some each every more most much many""".split()
)

# Never stopwords: a restatement that adds or drops one says the opposite. "t" is what
# the word pattern leaves of "n't" (don't -> don, t).
NEGATIONS = frozenset(
    """not no never nor none nobody nothing neither nowhere cannot without t""".split()
)

_NUMBER_WORDS = frozenset(
    """zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen
    fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy
    eighty ninety hundred thousand million billion first second third fourth fifth half
    dozen once twice""".split()
)
_DATE_WORDS = frozenset(
    """january february march april may june july august september october november december
    jan feb mar apr jun jul aug sep sept oct nov dec monday tuesday wednesday thursday friday
    saturday sunday yesterday today tomorrow tonight morning afternoon evening night weekend
    week month year last next ago""".split()
)
_NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][\w'-]*")


def key_terms(text: str) -> frozenset[str]:
    """Numbers, dates and names in ``text``: two items that differ in these are two facts."""
    words = normalised_words(text)
    terms = {w for w in words if any(c.isdigit() for c in w)}
    terms |= words & _NUMBER_WORDS
    terms |= words & _DATE_WORDS
    names = {m.group(0).casefold() for m in _NAME.finditer(text.strip())}
    terms |= names - STOPWORDS
    return frozenset(terms)


def content_words(words: frozenset[str]) -> frozenset[str]:
    return words - STOPWORDS


#: Metadata marking an item as a transcript turn (never merged).
TURN_MARKERS = ("turn_index", "dia_id", "role")


def is_turn(metadata: dict | None) -> bool:
    metadata = metadata or {}
    return metadata.get("kind") == "turn" or any(key in metadata for key in TURN_MARKERS)


def is_restatement(
    new_text: str, new_words: frozenset[str], old_text: str, old_words: frozenset[str]
) -> bool:
    """Rules 4 and 5 of the module docstring: the smaller side's content words, and
    its numbers, dates and names, all appear in the fuller side (which is kept)."""
    if (new_words ^ old_words) & NEGATIONS:
        return False
    a, b = content_words(new_words), content_words(old_words)
    if a <= b:
        return key_terms(new_text) <= key_terms(old_text)
    if b <= a:
        return key_terms(old_text) <= key_terms(new_text)
    return False


def overlap_coefficient(a: frozenset[str], b: frozenset[str]) -> float:
    """Szymkiewicz–Simpson: |A ∩ B| / min(|A|, |B|); 0 when either set is empty."""
    if not a or not b:
        return 0.0
    return len(a & b) / min(len(a), len(b))


@dataclass(frozen=True)
class Candidate:
    """A stored item a new one may restate, with the cosine similarity of the two
    (None when they have no vectors of the same model); one item's or a batch's."""

    pk: int
    content: str
    category: str
    sealed: bool
    pinned: bool
    metadata: dict
    similarity: float | None


_DEDUP_SQL = """
    SELECT k.id, k.content, k.category, k.sealed, k.pinned, k.metadata,
           CASE WHEN %(qvec)s::vector IS NOT NULL AND k.embedding IS NOT NULL
                     AND k.embedding_model = %(emodel)s
                THEN 1 - (k.embedding <=> %(qvec)s::vector) END
    FROM memory_knowledge k
    WHERE k.id IN (
        (SELECT t.id FROM memory_knowledge t
         WHERE {scope_t} AND t.search_vector @@ websearch_to_tsquery('english', %(terms)s)
         ORDER BY ts_rank_cd(t.search_vector, websearch_to_tsquery('english', %(terms)s)) DESC,
                  t.id
         LIMIT %(cap)s)
        UNION
        (SELECT v.id FROM memory_knowledge v
         WHERE {scope_v} AND %(qvec)s::vector IS NOT NULL AND v.embedding IS NOT NULL
         ORDER BY v.embedding <=> %(qvec)s::vector
         LIMIT %(cap)s)
    )
    ORDER BY k.id
"""


def _dedup_candidates(workspace: Workspace, prepared: Prepared) -> list[Candidate]:
    """A bounded candidate list from the indexes (never a scan of the scope in Python).

    One statement: rows sharing any of the new item's words, best ``ts_rank_cd`` first
    (GIN), united with the nearest rows by cosine distance (HNSW, iterative scan so the
    scope filter cannot starve it); each side capped at CAIRN_DEDUP_CANDIDATES.
    """
    cap = settings.CAIRN_DEDUP_CANDIDATES
    scope = (
        "{a}.workspace_id = %(workspace_id)s AND {a}.category = %(category)s "
        "AND {a}.context = %(context)s AND {a}.entity = %(entity)s "
        "AND {a}.status = 'active' AND {a}.superseded_by_id IS NULL"
    )
    sql = _DEDUP_SQL.format(scope_t=scope.format(a="t"), scope_v=scope.format(a="v"))
    params = {
        "workspace_id": workspace.pk,
        "category": prepared.category,
        "context": prepared.context,
        "entity": prepared.entity,
        # Words joined by "or": a row sharing any one of them is a candidate.
        "terms": " or ".join(sorted(prepared.words)[:200]),
        "qvec": None if prepared.embedding is None else vector_literal(prepared.embedding),
        "emodel": prepared.embedding_model,
        "cap": cap,
    }
    with connection.cursor() as cursor:
        if prepared.embedding is not None:
            set_vector_search(cursor, ef_search=max(settings.CAIRN_RECALL_EF_SEARCH, cap))
        cursor.execute(sql, params)
        return [
            Candidate(*row[:5], metadata=json_value(row[5]) or {}, similarity=row[6])
            for row in cursor.fetchall()
        ]


def find_duplicate(
    workspace: Workspace, prepared: Prepared, actor: Actor
) -> tuple[Knowledge, float] | None:
    """The active item this new one should update instead of adding, and the overlap.

    An error item with an ``operation_key`` has exactly one active row per operation;
    otherwise the best word overlap above CAIRN_DEDUP_OVERLAP in the same
    category + context + entity wins. Agents never overwrite what a person protected
    (privileged, sealed, pinned): their item is stored beside it instead.
    """
    if prepared.category == Category.ERROR and prepared.operation_key:
        row = (
            Knowledge.objects.select_for_update()
            .filter(
                workspace=workspace,
                category=Category.ERROR,
                operation_key=prepared.operation_key,
                status=KnowledgeStatus.ACTIVE,
                superseded_by__isnull=True,
            )
            .first()
        )
        if row is not None:
            return row, overlap_coefficient(prepared.words, normalised_words(row.content))
    if is_turn(prepared.metadata):
        return None
    best: tuple[Candidate, float] | None = None
    candidates = _dedup_candidates(workspace, prepared)
    earned = (
        knowledge_earned_ids((row.pk for row in candidates), workspace_id=workspace.pk)
        if not actor.weighs
        else set()
    )
    for row in candidates:
        if not words_may_change(actor=actor, earned=row.pk in earned):
            continue
        if not actor.is_person and (
            row.sealed or row.pinned or row.category in PRIVILEGED_CATEGORIES
        ):
            continue
        if is_turn(row.metadata):
            continue
        if row.similarity is not None and row.similarity < settings.CAIRN_DEDUP_MIN_SIMILARITY:
            continue
        row_words = normalised_words(row.content)
        score = overlap_coefficient(prepared.words, row_words)
        if not is_restatement(prepared.content, prepared.words, row.content, row_words):
            continue
        if score > settings.CAIRN_DEDUP_OVERLAP and (
            best is None or (score, -row.pk) > (best[1], -best[0].pk)
        ):
            best = (row, score)
    if best is None:
        return None
    locked = Knowledge.objects.select_for_update().get(pk=best[0].pk)
    return locked, best[1]
