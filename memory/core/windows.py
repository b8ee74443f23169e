"""Vectors for consecutive texts read together ("late chunking").

A conversation turn alone ("Yes, twice last year!") often means nothing without
the turns around it. Writing the turn before into each turn's text (the
``previous`` turn text, memory/knowledge/turn_text.py) pays for those tokens a
second time. Here the model reads a session's turns in windows of about
``WINDOW_TOKENS`` tokens (each window opening with the first ``CONTEXT_TOKENS``
tokens of the turn before it), and each turn's vector is the mean of the model's
states over its own tokens only: a window's context is its first 16 tokens, not
a second copy of the turn before (``bench_ingest.py``: the model reads 1.38× the
turns' own tokens, special tokens included, against 1.57× for ``previous``), and
each turn is still read in its context.

Only a model that returns its token states can do this (the local MiniLM; not an
OpenAI-compatible endpoint): ``embed_sequences`` answers None for the others.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from memory.core.embedders import Embedder
from memory.core.local_embedder import MAX_TOKENS

#: Turns share a window while it holds at most this many tokens (a longer turn gets
#: a window of its own, up to MAX_TOKENS).
WINDOW_TOKENS = 64
#: Each window opens with this many tokens from the start of the turn before it.
CONTEXT_TOKENS = 16


def embed_sequences(
    embedder: Embedder,
    sequences: Sequence[tuple[Sequence[str], str | None, Sequence[bool] | None]],
) -> list[list[list[float]]] | None:
    """Vectors for each sequence's texts, read in windows (see the module docstring).

    A sequence is (its texts in order, the text before its first or None, and for
    each text whether it is read with the one before it: None for all). A text not
    read with the one before (a turn by the same speaker as the one before: a log
    of notes, not a dialogue) opens a window of its own with no context, so
    unrelated notes are never mixed. One model call for all; None when
    ``embedder`` cannot give token states."""
    states = getattr(embedder, "token_states", None)
    if states is None:
        return None
    tokenizer = embedder.tokenizer()  # type: ignore[attr-defined]
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    windows: list[list[int]] = []
    spans: list[list[tuple[int, int, int, int]]] = []  # (sequence, text, start, end)
    for s, (texts, before, joined) in enumerate(sequences):
        own = [e.ids[1:-1] for e in tokenizer.encode_batch(list(texts))] if texts else []
        head = tokenizer.encode(before).ids[1:-1][:CONTEXT_TOKENS] if before else []
        joined = [True] * len(own) if joined is None else list(joined)
        i = 0
        while i < len(own):
            context = (head if i == 0 else own[i - 1][:CONTEXT_TOKENS]) if joined[i] else []
            ids = [cls, *context]
            span: list[tuple[int, int, int, int]] = []
            while i < len(own) and (
                not span or (joined[i] and len(ids) + len(own[i]) < WINDOW_TOKENS)
            ):
                take = own[i][: MAX_TOKENS - 1 - len(ids)]
                span.append((s, i, len(ids), len(ids) + len(take)))
                ids += take
                i += 1
            windows.append([*ids, sep])
            spans.append(span)
    hidden_states = states(windows) if windows else []
    if hidden_states is None:  # the model pools its own output
        return None
    out: list[list[list[float] | None]] = [[None] * len(seq[0]) for seq in sequences]
    for hidden, span in zip(hidden_states, spans, strict=True):
        for s, i, start, end in span:
            vector = hidden[start:end].mean(axis=0) if end > start else hidden.mean(axis=0)
            out[s][i] = (vector / max(float(np.linalg.norm(vector)), 1e-12)).tolist()
    return out  # type: ignore[return-value]
