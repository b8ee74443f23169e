"""Is an agent's new item a quote? (SPEC section 4a.) Text the model copied from a
stored conversation turn (a tool's output, a pasted issue, a web page the harness
logged) is ``quoted``, whoever writes it, exactly or nearly (most of its words, in one
turn). Decided once, when the item is written, from what Cairn stored: one read of the
turns' full-text index for a whole batch."""

from __future__ import annotations

from functools import reduce
from operator import or_

from django.contrib.postgres.search import SearchQuery, SearchRank
from django.db.models import F

from memory.knowledge.dedup import content_words, normalised_words
from memory.models import ConversationTurn, Workspace

MIN_WORDS = 4  # shorter notes ("use uv") are too common to call a quote
PROBE_WORDS = 6  # the item's longest plain words: the turns sharing most come first
OVERLAP = 0.8  # share of the item's words found in the turn
CANDIDATES = 20  # turns read per item


def _words(text: str) -> frozenset[str]:
    """Content words, as dedup counts them (function words come and go in a restatement)."""
    return content_words(normalised_words(text))


def _probe(content: str, words: frozenset[str]) -> str | None:
    # Plain words only: the english parser keeps a URL or a path as one token, so a
    # word inside one ("toolchain" in get.toolchain-setup.dev) is no lexeme of its own.
    plain = {w.strip(".,:;!?()[]{}'\"`").casefold() for w in content.split()}
    plain = {w for w in plain if w.isalpha() and w in words}
    if len(words) < MIN_WORDS or not plain:
        return None
    return " ".join(sorted(plain, key=lambda w: (-len(w), w))[:PROBE_WORDS])


def quoted_sources(*, workspace: Workspace, contents: list[str]) -> list[str | None]:
    """For each text, ``turn:<id>`` of a stored turn it repeats, else None."""
    words = [_words(c) for c in contents]
    probes = [_probe(c, w) for c, w in zip(contents, words, strict=True)]
    # Any probe word (a near repeat may add or drop a word), the turns sharing the most
    # of them first.
    terms = sorted({w for p in probes if p for w in p.split()})
    if not terms:
        return [None] * len(contents)
    query = reduce(or_, (SearchQuery(t, search_type="plain", config="english") for t in terms))
    rows = list(
        ConversationTurn.objects.filter(workspace=workspace, search_vector=query)
        .annotate(rank=SearchRank(F("search_vector"), query))
        .order_by("-rank", "-id")
        .values_list("id", "content")[: CANDIDATES * sum(1 for p in probes if p)]
    )
    turns = [(turn_id, _words(text)) for turn_id, text in rows]
    found: list[str | None] = []
    for probe, mine in zip(probes, words, strict=True):
        hit = None
        if probe:
            hit = next(
                (
                    f"turn:{tid}"
                    for tid, theirs in turns
                    if len(mine & theirs) >= OVERLAP * len(mine)
                ),
                None,
            )
        found.append(hit)
    return found


def quoted_source(*, workspace: Workspace, content: str) -> str | None:
    return quoted_sources(workspace=workspace, contents=[content])[0]
