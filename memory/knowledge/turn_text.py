"""What a conversation turn's vector is computed from: the turn in its context.

A turn alone ("Yes, twice last year!") often means nothing without the turn
before it. So a turn is embedded as its own text first (the embedder truncates
from the end, so the turn itself is never the part cut off), then the start of
the turn before it::

    Yes, twice last year! (Have you ever been to Paris?)

``CAIRN_TURN_EMBED_CONTEXT`` chooses: ``window`` (the default: no text added; the
session's turns are read together in windows and each turn's vector pooled from
its own tokens, memory/core/windows.py, about 1.2× the time of the text alone; an
embedder without token states gets the ``previous`` text instead), ``previous``
(above: the turn before cut to 80 characters, 1.57× a LoCoMo turn's own tokens;
``previous100``, the default before ``window``, cut to 100: 1.66×, ranking no
better), ``full`` (also who said it and when, and the turn before up to 300
characters: the first default, 2.26×, for no better ranking), ``date`` (role and
date, no previous turn), ``none`` (the turn's text only), and three that spend
fewer tokens on context by carrying part of the stored vector of the turn before
(``CARRY_WEIGHT``; that vector carries its own predecessor's, so the context runs
back through the session at no cost in tokens): ``running`` (the turn's text alone), ``brief``
(the first 40 characters of the turn before) and ``ending`` (its last 40, where
the question a reply answers usually is; ``ending60``, its last 60).
bench/bench_recall.py measures them on LoCoMo.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence
from datetime import datetime

import numpy as np
from django.conf import settings

from memory.core.embedders import EmbeddingError
from memory.core.embeddings import get_embedder
from memory.core.windows import embed_sequences
from memory.models import ConversationTurn, Workspace

logger = logging.getLogger(__name__)

#: How much of the turn before goes into a turn's vector text, per mode: its first
#: (or, ``ending``, its last) characters.
PREVIOUS_MAX_CHARS = {
    "previous": 80,
    "window": 80,  # its text where the embedder gives no token states
    "previous100": 100,
    "full": 300,
    "brief": 40,
    "ending": 40,
    "ending60": 60,
}
TURN_MAX_CHARS = 1500

#: The share of the vector of the turn before that a turn's vector carries, per mode.
CARRY_WEIGHT = {"running": 0.5, "brief": 0.2, "ending": 0.2, "ending60": 0.2}


def read_with_previous(previous_role: str | None, role: str) -> bool:
    """``window``: a turn is read after the one before it when it answers it (another
    speaker); a turn by the same speaker, or the first, opens a window of its own."""
    return previous_role is not None and previous_role != role


def turn_embedding_text(
    *, content: str, role: str, at: datetime | None, previous: str | None, mode: str | None = None
) -> str:
    """The text a turn is embedded from (see the module docstring)."""
    mode = mode or settings.CAIRN_TURN_EMBED_CONTEXT
    text = " ".join(content.split())[:TURN_MAX_CHARS]
    limit = PREVIOUS_MAX_CHARS.get(mode, 0)
    before = _clip(previous, limit, end=mode.startswith("ending")) if limit else ""
    if mode in ("none", "running"):
        return text
    if limit and mode != "full":  # the turn before, in brackets after the turn
        return f"{text} ({before})" if before else text
    about = [role]
    if at is not None:
        about.append(f"{at.day} {at:%B %Y}")
    context = ", ".join(about)
    if before:
        context += f"; replying to: {before}"
    return f"{text}\n({context})"


def _clip(text: str | None, limit: int, *, end: bool = False) -> str:
    text = " ".join((text or "").split())
    if len(text) <= limit:
        return text
    return "…" + text[1 - limit :] if end else text[: limit - 1] + "…"


def carry(
    vector: Sequence[float], before: Sequence[float] | None, weight: float | None = None
) -> list[float]:
    """A turn's own vector plus ``weight`` (the mode's ``CARRY_WEIGHT``) of the one before."""
    if weight is None:
        weight = CARRY_WEIGHT.get(settings.CAIRN_TURN_EMBED_CONTEXT, 0.0)
    if before is None or not weight:
        return list(vector)
    mixed = np.asarray(vector, dtype=np.float32) + weight * np.asarray(before, dtype=np.float32)
    norm = float(np.linalg.norm(mixed))
    return (mixed / norm).tolist() if norm else list(vector)


def session_turns_embed(
    *, workspace: Workspace, session_id: str, rows: list[tuple[str, str, datetime | None, int]]
) -> list | None:
    """Vectors for new turns of one session, rows (content, role, at, turn_index) in
    any order, in one embedder call; None when the embedder fails (the turns are then
    stored without vectors and the embed_backfill job gives them one later, so an
    embedder outage never loses a turn).

    Each turn's context is the latest turn before its index: the batch's own, or the
    stored one before the batch (one indexed read). Turns sharing an index share it.
    """
    carrying = settings.CAIRN_TURN_EMBED_CONTEXT in CARRY_WEIGHT
    order = sorted(range(len(rows)), key=lambda i: (rows[i][3], rows[i][1]))
    # The stored turn before the batch; its vector only when the mode carries it.
    fields = ("content", "role") + (("embedding", "embedding_model") if carrying else ())
    stored = (
        ConversationTurn.objects.filter(
            workspace=workspace, session_id=session_id, turn_index__lt=rows[order[0]][3]
        )
        .order_by("-turn_index", "-id")
        .values_list(*fields)
        .first()
    )
    # The turn before each row: its position in ``rows``, or -1 for the stored one.
    before: dict[int, int] = {}
    last, group_before, group_index = -1, -1, None
    for i in order:
        if rows[i][3] != group_index:
            group_before, group_index = last, rows[i][3]
        before[i] = group_before
        last = i

    def previous(i: int) -> str | None:
        j = before[i]
        return rows[j][0] if j >= 0 else (stored[0] if stored else None)

    embedder = get_embedder()
    try:
        if settings.CAIRN_TURN_EMBED_CONTEXT == "window":
            read = [rows[i][0] for i in order]
            roles = [stored[1] if stored else None] + [rows[i][1] for i in order]
            joined = [read_with_previous(a, b) for a, b in itertools.pairwise(roles)]
            windowed = embed_sequences(embedder, [(read, stored[0] if stored else None, joined)])
            if windowed is not None:
                vectors: list = [None] * len(rows)
                for i, vector in zip(order, windowed[0], strict=True):
                    vectors[i] = vector
                return vectors
        texts = [
            turn_embedding_text(content=content, role=role, at=at, previous=previous(i))
            for i, (content, role, at, _index) in enumerate(rows)
        ]
        vectors = embedder.embed(texts)
    except EmbeddingError:
        logger.exception("embedding %d turns failed; stored without vectors", len(rows))
        return None
    if not carrying:
        return vectors
    stored_vector = None
    if stored and stored[2] is not None and stored[3] == embedder.model_id:
        stored_vector = stored[2]
    out: list = [None] * len(rows)
    for i in order:  # a turn's predecessor is mixed before it
        j = before[i]
        out[i] = carry(vectors[i], out[j] if j >= 0 else stored_vector)
    return out
