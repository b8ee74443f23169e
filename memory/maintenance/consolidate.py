"""Consolidate: old sessions become a summary note plus extracted items, and
near-identical lessons merge (SPEC section 7; the lessons in ``merge.py``).

A session is due when its last turn is ``CAIRN_CONSOLIDATE_IDLE_DAYS`` old, it has
at least ``CAIRN_CONSOLIDATE_MIN_TURNS`` turns and some are not consolidated yet.
For each due session (in session-id order, resumable by a cursor), in one
transaction:

1. Read its unconsolidated user and assistant turns (at most
   ``CAIRN_CONSOLIDATE_MAX_TURNS`` per chunk, oldest first).
2. Drop what must never enter a summary: sentences that look like a credential and
   sentences repeating a sensitive item written from this session. (Incognito
   turns are never stored, so they cannot enter one.)
3. Summarise: by default extractively, on the sentences' embeddings (the ones
   closest to the session's centroid, diverse, in their original order); with a
   chat model configured (``CAIRN_JUDGE_URL``), by the model. A model that does not
   answer leaves the session for the next run.
4. Store the summary (category ``note``, source ``consolidation``) and the durable
   statements the user made (source ``extract``) through ``knowledge_remember``
   (dedup, credential refusal), each with ``metadata.sessions`` and
   ``metadata.turn_ids``: the shape erasure by session follows.
5. Mark the turns consolidated.

Words keep their speaker: what is derived from turns posted with an agent token (a
"user" turn there is the model's report of what the user said) is stored on the
agent channel, never the system's. The summary of a chunk with any such turn is an
agent-channel note; a statement extracted from such a turn is an agent-channel item
of source ``agent`` (not ``extract``, which says the user said it), so it weighs and
is reconciled like anything the model wrote itself (it never supersedes or lowers a
confirmed item).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Max, Q
from django.utils import timezone

from memory.core.actors import Actor
from memory.core.embeddings import get_embedder
from memory.core.secrets import find_secret
from memory.knowledge.dedup import normalised_words, overlap_coefficient
from memory.knowledge.remember import knowledge_remember
from memory.maintenance.judge import JudgeUnavailable, chat_complete, chat_configured
from memory.maintenance.merge import lesson_maintain
from memory.maintenance.runs import run_checkpoint, run_resume_cursor, run_total
from memory.models import (
    CONTENT_MAX_CHARS,
    Category,
    Channel,
    ConversationTurn,
    JobRun,
    Knowledge,
    Source,
    TurnRole,
    Workspace,
)

ACTOR = Actor.system("consolidate")
# The same job writing what it derived from agent-channel turns: the agent's word.
AGENT_WORD_ACTOR = Actor.system_relaying_agent("consolidate")
COUNT_KEYS = ("sessions", "turns", "summaries", "extracted", "deduplicated", "left_for_model")
LESSON_KEYS = ("lessons_merged", "lesson_conflicts_queued")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
# What a user says that is worth keeping beyond the session.
_DURABLE = re.compile(
    r"\b(i|we) (prefer|always|never|use|like|want)\b|\bremember\b|\bfrom now on\b", re.I
)
SUMMARY_PROMPT = (
    "Summarise this conversation between a user and an AI agent in at most three short "
    "sentences a future session would need. Plain text, no preamble."
)


@dataclass(frozen=True)
class Sentence:
    text: str
    turn_id: int
    role: str
    channel: str = Channel.HARNESS


def sessions_due(*, workspace: Workspace, now: datetime | None = None) -> list[str]:
    """Session ids due for consolidation, in order."""
    now = now or timezone.now()
    idle_before = now - timedelta(days=settings.CAIRN_CONSOLIDATE_IDLE_DAYS)
    rows = (
        ConversationTurn.objects.filter(workspace=workspace)
        .values("session_id")
        .annotate(
            last=Max("created_at"),
            turns=Count("id"),
            open=Count("id", filter=Q(consolidated_at__isnull=True)),
        )
        .filter(last__lt=idle_before, turns__gte=settings.CAIRN_CONSOLIDATE_MIN_TURNS, open__gt=0)
        .order_by("session_id")
    )
    return [row["session_id"] for row in rows]


def _sentences(turns: list[ConversationTurn]) -> list[Sentence]:
    out = []
    for turn in turns:
        if turn.role not in (TurnRole.USER, TurnRole.ASSISTANT):
            continue
        for part in _SENTENCE.split(turn.content):
            part = " ".join(part.split())
            if len(part.split()) >= 4:
                out.append(Sentence(part[:500], turn.pk, turn.role, turn.channel))
    return out


def _safe(sentences: list[Sentence], *, workspace: Workspace, session_id: str) -> list[Sentence]:
    """Without credentials, and without what a sensitive item from this session says."""
    sensitive = [
        normalised_words(text)
        for text in Knowledge.objects.filter(
            workspace=workspace, sensitive=True, metadata__session_id=session_id
        ).values_list("content", flat=True)
    ]
    kept = []
    for sentence in sentences:
        if find_secret(sentence.text) is not None:
            continue
        words = normalised_words(sentence.text)
        if any(overlap_coefficient(words, other) >= 0.6 for other in sensitive):
            continue
        kept.append(sentence)
    return kept


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def extractive_summary(sentences: list[Sentence], *, limit: int) -> list[Sentence]:
    """The ``limit`` sentences nearest the centroid of all, skipping near-repeats, in
    their original order."""
    if len(sentences) <= limit:
        return sentences
    vectors = get_embedder().embed([s.text for s in sentences])
    centroid = [sum(column) / len(vectors) for column in zip(*vectors, strict=True)]
    ranked = sorted(range(len(sentences)), key=lambda i: -_cosine(vectors[i], centroid))
    chosen: list[int] = []
    for i in ranked:
        if all(_cosine(vectors[i], vectors[j]) < 0.9 for j in chosen):
            chosen.append(i)
        if len(chosen) == limit:
            break
    return [sentences[i] for i in sorted(chosen)]


def _summary_text(session_id: str, turns: list[ConversationTurn], body: str) -> str:
    first, last = turns[0].created_at.date(), turns[-1].created_at.date()
    head = f"Session {session_id[:12]} ({len(turns)} turns, {first} to {last}): "
    return (head + body)[:CONTENT_MAX_CHARS]


def session_consolidate(*, workspace: Workspace, session_id: str, counts: dict) -> bool:
    """Consolidate one chunk of a session; False when nothing was left (or the model
    did not answer)."""
    turns = list(
        ConversationTurn.objects.filter(
            workspace=workspace, session_id=session_id, consolidated_at__isnull=True
        ).order_by("turn_index", "id")[: settings.CAIRN_CONSOLIDATE_MAX_TURNS]
    )
    if not turns:
        return False
    sentences = _safe(_sentences(turns), workspace=workspace, session_id=session_id)
    turn_ids = [t.pk for t in turns]
    meta = {"sessions": [session_id], "turn_ids": turn_ids}
    agent_words = any(t.channel == Channel.AGENT for t in turns)
    contexts = [t.context for t in turns]
    context = max(set(contexts), key=contexts.count)
    body = ""
    if sentences and chat_configured():
        try:
            body = chat_complete(
                system=SUMMARY_PROMPT,
                user="\n".join(f"{s.role}: {s.text}" for s in sentences)[:12000],
            )
        except JudgeUnavailable:
            counts["left_for_model"] += 1
            return False
        if find_secret(body) is not None:
            body = ""  # the model repeated something credential-shaped: keep no summary text
    elif sentences:
        picked = extractive_summary(sentences, limit=settings.CAIRN_CONSOLIDATE_SUMMARY_SENTENCES)
        body = " ".join(s.text for s in picked)
    durable = [s for s in sentences if s.role == TurnRole.USER and _DURABLE.search(s.text)]
    with transaction.atomic():
        locked = ConversationTurn.objects.select_for_update().filter(
            pk__in=turn_ids, consolidated_at__isnull=True
        )
        if len(locked) != len(turn_ids):
            return True  # another run took some of them: read the session again
        if body:
            result = knowledge_remember(
                workspace=workspace,
                actor=AGENT_WORD_ACTOR if agent_words else ACTOR,
                content=_summary_text(session_id, turns, body),
                category=Category.NOTE,
                context=context,
                source=Source.CONSOLIDATION,
                metadata=meta,
            )
            counts["summaries"] += 1
            counts["deduplicated"] += int(not result.created)
        for sentence in durable[:5]:
            category = Category.PREFERENCE if "prefer" in sentence.text.lower() else Category.FACT
            said_by_agent = sentence.channel == Channel.AGENT
            result = knowledge_remember(
                workspace=workspace,
                actor=AGENT_WORD_ACTOR if said_by_agent else ACTOR,
                content=sentence.text,
                category=category,
                context=context,
                source=Source.AGENT if said_by_agent else Source.EXTRACT,
                metadata={"sessions": [session_id], "turn_ids": [sentence.turn_id]},
            )
            counts["extracted"] += int(result.created)
            counts["deduplicated"] += int(not result.created)
        ConversationTurn.objects.filter(pk__in=turn_ids).update(consolidated_at=timezone.now())
    counts["turns"] += len(turn_ids)
    return True


def consolidate_run(*, run: JobRun, now: datetime | None = None) -> dict:
    """The consolidate job over one workspace (``run.workspace``) or all, resumable."""
    cursor = run_resume_cursor(run=run) or {}
    workspaces = Workspace.objects.order_by("pk")
    if run.workspace_id:
        workspaces = workspaces.filter(pk=run.workspace_id)
    counts = dict.fromkeys(COUNT_KEYS + LESSON_KEYS, 0)
    due = [(ws, sid) for ws in workspaces for sid in sessions_due(workspace=ws, now=now)]
    run_total(run=run, total=len(due))
    done = 0
    for workspace, session_id in due:
        done += 1
        if cursor and (workspace.pk, session_id) <= (cursor["workspace"], cursor["session"]):
            continue  # finished by the interrupted run this one resumes
        while session_consolidate(workspace=workspace, session_id=session_id, counts=counts):
            pass
        counts["sessions"] += 1
        step = {"workspace": workspace.pk, "session": session_id}
        run_checkpoint(run=run, cursor=step, counts=counts, done=done)
    # Then near-identical lessons merge (cheap, idempotent: no cursor needed).
    for workspace in workspaces:
        for key, value in lesson_maintain(workspace=workspace).items():
            counts[key] += value
    run.result = {**(run.result or {}), "cursor": None}
    return counts
