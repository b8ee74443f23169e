"""When is a new item a restatement of a stored one? Candidates from the
indexes, then word overlap (Szymkiewicz-Simpson) on the scope's live items."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import connection

from memory.core.actors import Actor
from memory.core.text import WORD
from memory.knowledge.recall import (
    set_vector_search,
    vector_literal,
)
from memory.models import (
    PRIVILEGED_CATEGORIES,
    Category,
    Knowledge,
    KnowledgeStatus,
    Workspace,
)

if TYPE_CHECKING:
    from memory.knowledge.validation import _Prepared


def normalised_words(text: str) -> frozenset[str]:
    """The word set dedup compares: case-folded runs of letters and digits."""
    return frozenset(w.casefold() for w in WORD.findall(text))


def overlap_coefficient(a: frozenset[str], b: frozenset[str]) -> float:
    """Szymkiewicz–Simpson: |A ∩ B| / min(|A|, |B|); 0 when either set is empty."""
    if not a or not b:
        return 0.0
    return len(a & b) / min(len(a), len(b))


@dataclass(frozen=True)
class _Candidate:
    pk: int
    content: str
    category: str
    sealed: bool
    pinned: bool


_DEDUP_SQL = """
    SELECT k.id, k.content, k.category, k.sealed, k.pinned FROM memory_knowledge k
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


def _dedup_candidates(workspace: Workspace, prepared: _Prepared) -> list[_Candidate]:
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
        "cap": cap,
    }
    with connection.cursor() as cursor:
        if prepared.embedding is not None:
            set_vector_search(cursor, ef_search=max(settings.CAIRN_RECALL_EF_SEARCH, cap))
        cursor.execute(sql, params)
        return [_Candidate(*row) for row in cursor.fetchall()]


def _find_duplicate(
    workspace: Workspace, prepared: _Prepared, actor: Actor
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
    best: tuple[_Candidate, float] | None = None
    for row in _dedup_candidates(workspace, prepared):
        if not actor.is_person and (
            row.sealed or row.pinned or row.category in PRIVILEGED_CATEGORIES
        ):
            continue
        score = overlap_coefficient(prepared.words, normalised_words(row.content))
        if score > settings.CAIRN_DEDUP_OVERLAP and (
            best is None or (score, -row.pk) > (best[1], -best[0].pk)
        ):
            best = (row, score)
    if best is None:
        return None
    locked = Knowledge.objects.select_for_update().get(pk=best[0].pk)
    return locked, best[1]
