"""What a conversation turn's vector is computed from: the turn in its context.

A turn alone ("Yes, twice last year!") often means nothing without the turn
before it. So a turn is embedded as its own text first (the embedder truncates
from the end, so the turn itself is never the part cut off), then the start of
the turn before it::

    Yes, twice last year! (Have you ever been to Paris?)

``CAIRN_TURN_EMBED_CONTEXT`` chooses: ``previous`` (the default, above: the turn
before cut to 100 characters), ``full`` (also who said it and when, and the turn
before up to 300 characters: the first default, 2.26× a LoCoMo turn's own tokens
against 1.66×, for no better ranking), ``date`` (role and date, no previous turn)
or ``none`` (the turn's text only). bench/bench_recall.py measures them on LoCoMo.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.conf import settings

from memory.core.embedders import EmbeddingError
from memory.core.embeddings import get_embedder
from memory.models import ConversationTurn, Workspace

logger = logging.getLogger(__name__)

#: How much of the turn before goes into a turn's vector text, per mode.
PREVIOUS_MAX_CHARS = {"previous": 100, "full": 300}
TURN_MAX_CHARS = 1500


def turn_embedding_text(
    *, content: str, role: str, at: datetime | None, previous: str | None, mode: str | None = None
) -> str:
    """The text a turn is embedded from (see the module docstring)."""
    mode = mode or settings.CAIRN_TURN_EMBED_CONTEXT
    text = " ".join(content.split())[:TURN_MAX_CHARS]
    before = _clip(previous, PREVIOUS_MAX_CHARS[mode]) if mode in PREVIOUS_MAX_CHARS else ""
    if mode == "none":
        return text
    if mode == "previous":
        return f"{text} ({before})" if before else text
    about = [role]
    if at is not None:
        about.append(f"{at.day} {at:%B %Y}")
    context = ", ".join(about)
    if before:
        context += f"; replying to: {before}"
    return f"{text}\n({context})"


def _clip(text: str | None, limit: int) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def previous_content(*, workspace: Workspace, session_id: str, turn_index: int) -> str | None:
    """The text of the latest turn of the session before ``turn_index`` (one indexed read)."""
    return (
        ConversationTurn.objects.filter(
            workspace=workspace, session_id=session_id, turn_index__lt=turn_index
        )
        .order_by("-turn_index", "-id")
        .values_list("content", flat=True)
        .first()
    )


def turns_embed(rows: list[tuple[str, str, datetime | None, str | None]]) -> list | None:
    """Embed turns (content, role, at, previous content) in one embedder call.

    None when the embedder fails: the turns are stored without vectors and the
    embed_backfill job gives them one later, so an embedder outage never loses a turn.
    """
    texts = [
        turn_embedding_text(content=content, role=role, at=at, previous=previous)
        for content, role, at, previous in rows
    ]
    try:
        return get_embedder().embed(texts)
    except EmbeddingError:
        logger.exception("embedding %d turns failed; stored without vectors", len(texts))
        return None
