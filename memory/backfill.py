"""Re-embed rows whose vectors came from another embedder (or none).

Changing ``CAIRN_EMBEDDER`` must not mix vector spaces: recall's vector side
only reads rows embedded by the current model (or supplied by the client in
that model's space), and this job brings the rest over in batches.
"""

from __future__ import annotations

from django.conf import settings
from django.db.models import OuterRef, Q, Subquery

from memory.core.embeddings import get_embedder
from memory.core.jobs import job_progress
from memory.core.windows import embed_sequences
from memory.knowledge.turn_text import (
    CARRY_WEIGHT,
    carry,
    read_with_previous,
    turn_embedding_text,
)
from memory.models import ConversationTurn, Knowledge, SkillDelta
from memory.skills.skillmd import delta_line

CLIENT_MODEL = "client"


def _knowledge_pending(model_id: str):
    return Knowledge.objects.filter(
        Q(embedding__isnull=True) | ~Q(embedding_model__in=[model_id, CLIENT_MODEL])
    )


def _turns_pending(model_id: str):
    return ConversationTurn.objects.filter(Q(embedding__isnull=True) | ~Q(embedding_model=model_id))


def _deltas_pending(model_id: str):
    return (
        SkillDelta.objects.filter(tier=3).exclude(trigger_text="").exclude(embedding_model=model_id)
    )


def embed_backfill_pending() -> dict:
    model_id = get_embedder().model_id
    return {
        "knowledge": _knowledge_pending(model_id).count(),
        "deltas": _deltas_pending(model_id).count(),
        "turns": _turns_pending(model_id).count(),
    }


def embed_backfill_run(*, run=None, batch_size: int | None = None) -> dict:
    """Re-embed pending knowledge, conversation turns and skill deltas; returns counts.

    1. Count what is pending (the progress total).
    2. Walk each table by id in batches; embed each batch in one call.
    3. Write a vector only if the row's text is still the text that was embedded,
       so a concurrent edit (which embeds itself) is never overwritten.
    """

    embedder = get_embedder()
    model_id = embedder.model_id
    batch_size = batch_size or settings.CAIRN_EMBEDDING_BATCH
    total = sum(embed_backfill_pending().values())
    done = 0
    counts = {"knowledge": 0, "deltas": 0, "turns": 0, "skipped_changed": 0, "model": model_id}
    if run is not None:
        job_progress(run=run, done=0, total=total)

    last_id = 0
    while True:
        rows = list(
            _knowledge_pending(model_id)
            .filter(id__gt=last_id)
            .order_by("id")
            .values_list("id", "content")[:batch_size]
        )
        if not rows:
            break
        vectors = embedder.embed([content for _, content in rows])
        for (pk, content), vector in zip(rows, vectors, strict=True):
            updated = Knowledge.objects.filter(pk=pk, content=content).update(
                embedding=vector, embedding_model=model_id
            )
            counts["knowledge" if updated else "skipped_changed"] += 1
        last_id = rows[-1][0]
        done += len(rows)
        if run is not None:
            job_progress(run=run, done=done)

    last_id = 0
    while True:
        deltas = list(_deltas_pending(model_id).filter(id__gt=last_id).order_by("id")[:batch_size])
        if not deltas:
            break
        texts = []
        for delta in deltas:
            texts += [delta.trigger_text, delta_line(kind=delta.kind, payload=delta.payload)]
        vectors = embedder.embed(texts)
        for index, delta in enumerate(deltas):
            updated = SkillDelta.objects.filter(
                pk=delta.pk, trigger_text=delta.trigger_text, payload=delta.payload
            ).update(
                trigger_embedding=vectors[2 * index],
                payload_embedding=vectors[2 * index + 1],
                embedding_model=model_id,
            )
            counts["deltas" if updated else "skipped_changed"] += 1
        last_id = deltas[-1].pk
        done += len(deltas)
        if run is not None:
            job_progress(run=run, done=done)
    # Turns are never edited: each gets the text it would have been stored with
    # (memory/knowledge/turn_text.py), the turn before it found by the session index
    # and read with the rest of the batch's in one query. A mode that carries the
    # vector of the turn before takes this batch's if it is in it, else the stored
    # one (in the current model's space), else none.
    before = ConversationTurn.objects.filter(
        workspace_id=OuterRef("workspace_id"),
        session_id=OuterRef("session_id"),
        turn_index__lt=OuterRef("turn_index"),
    ).order_by("-turn_index", "-id")
    carrying = settings.CAIRN_TURN_EMBED_CONTEXT in CARRY_WEIGHT
    fields = ("id", "content", "role") + (("embedding", "embedding_model") if carrying else ())
    last_id = 0
    while True:
        turns = list(
            _turns_pending(model_id)
            .filter(id__gt=last_id)
            .order_by("id")
            .annotate(previous_id=Subquery(before.values("id")[:1]))
            .values_list("id", "content", "role", "created_at", "previous_id")[:batch_size]
        )
        if not turns:
            break
        previous = {
            row["id"]: row
            for row in ConversationTurn.objects.filter(
                pk__in={t[4] for t in turns if t[4] is not None}
            ).values(*fields)
        }
        before_text = {pk: previous[prev]["content"] if prev in previous else None
                       for pk, *_, prev in turns}  # fmt: skip
        windowed = None
        if settings.CAIRN_TURN_EMBED_CONTEXT == "window":  # each turn a window of its own
            windowed = embed_sequences(
                embedder,
                [
                    (
                        [content],
                        before_text[pk],
                        [read_with_previous(previous.get(prev, {}).get("role"), role)],
                    )
                    for pk, content, role, _at, prev in turns
                ],
            )
        if windowed is not None:
            vectors = [sequence[0] for sequence in windowed]
        else:
            vectors = embedder.embed(
                [
                    turn_embedding_text(content=content, role=role, at=at, previous=before_text[pk])
                    for pk, content, role, at, _prev in turns
                ]
            )
        done_here: dict[int, list[float]] = {}
        for (pk, *_, prev), vector in zip(turns, vectors, strict=True):
            if carrying:
                stored = previous.get(prev)
                same_space = stored is not None and stored["embedding_model"] == model_id
                vector = carry(
                    vector, done_here.get(prev, stored["embedding"] if same_space else None)
                )
            done_here[pk] = vector
            ConversationTurn.objects.filter(pk=pk).update(
                embedding=vector, embedding_model=model_id
            )
            counts["turns"] += 1
        last_id = turns[-1][0]
        done += len(turns)
        if run is not None:
            job_progress(run=run, done=done)
    return counts
