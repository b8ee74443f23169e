"""The one active ``error`` item per failing operation: a failed tool call stores or
refreshes it (message, failure count, time), a later success archives it. The
tool-call log (``conversations.tool_calls_log``) applies both, in time order."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import transaction
from django.utils import timezone

from memory.core.actors import Actor
from memory.core.audit import audit_record
from memory.core.embeddings import get_embedder
from memory.core.provenance import QUOTED_KEY
from memory.knowledge.validation import DEFAULT_CONFIDENCE
from memory.models import (
    CONTENT_MAX_CHARS,
    Agent,
    Category,
    Channel,
    Knowledge,
    KnowledgeStatus,
    Source,
    ToolCall,
    Workspace,
)

ERROR_ITEM_ACTOR = Actor.system("tool-calls")


def _iso(moment: datetime) -> str:
    """A sortable UTC timestamp for metadata (string order = time order)."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def error_item_content(*, tool: str, operation_key: str, error: str) -> str:
    """What an automatic error item says; cut to the content cap with a visible mark."""
    text = f"{tool} failed on {operation_key}"
    if error.strip():
        text += ": " + " ".join(error.split())
    if len(text) > CONTENT_MAX_CHARS:
        text = text[: CONTENT_MAX_CHARS - 1] + "…"
    return text


@dataclass(frozen=True)
class FailureRecord:
    workspace: Workspace
    agent: Agent | None
    tool: str
    operation_key: str
    error: str
    at: datetime
    session_id: str = ""
    # The channel the failing call came through: an error item derived from an agent
    # token's report is the agent's word (channel agent), not the system's.
    channel: str = Channel.HARNESS


@transaction.atomic
def knowledge_record_failures(
    *, failures: list[FailureRecord], embeddings: dict[str, list[float]] | None = None
) -> list[Knowledge]:
    """Store or refresh the one active ``error`` item per failing operation.

    Runs in the caller's transaction when there is one (the tool-call batch). Each
    failure:
    1. If a success on the same operation was logged after it, nothing (it is fixed).
    2. The active error item for the operation (unique per workspace) gets the latest
       message, a failure count and the time; else the newest item archived by a
       success comes back; else a new item (source error_auto) is inserted.
    """

    embeddings = embeddings or {}
    touched: dict[int, Knowledge] = {}
    for failure in failures:
        successes = ToolCall.objects.filter(
            workspace=failure.workspace,
            operation_key=failure.operation_key,
            ok=True,
            at__gt=failure.at,
        )
        if failure.channel != Channel.AGENT:
            # The model's word that it fixed something does not cancel what the
            # harness saw fail.
            successes = successes.exclude(channel=Channel.AGENT)
        if successes.exists():
            continue
        content = error_item_content(
            tool=failure.tool, operation_key=failure.operation_key, error=failure.error
        )
        vector = embeddings.get(content)
        base = Knowledge.objects.select_for_update().filter(
            workspace=failure.workspace,
            category=Category.ERROR,
            operation_key=failure.operation_key,
            superseded_by__isnull=True,
        )
        item = base.filter(status=KnowledgeStatus.ACTIVE).first()
        if item is None:
            item = (
                base.filter(status=KnowledgeStatus.ARCHIVED, metadata__archived_by="success")
                .order_by("-archived_at", "-id")
                .first()
            )
        stamp = _iso(failure.at)
        if item is None:
            item = Knowledge.objects.create(
                workspace=failure.workspace,
                agent=failure.agent,
                # Whoever reported it, the words are the tool's output: quoted, never the
                # system's own observation (SPEC section 4a).
                channel=Channel.AGENT if failure.channel == Channel.AGENT else Channel.HARNESS,
                content=content,
                category=Category.ERROR,
                domain=failure.tool[:100],
                context="global",
                source=Source.ERROR_AUTO,
                confidence=DEFAULT_CONFIDENCE,
                operation_key=failure.operation_key,
                metadata={
                    "tool": failure.tool,
                    "failures": 1,
                    "first_failed_at": stamp,
                    "last_failed_at": stamp,
                    "session_id": failure.session_id,
                    QUOTED_KEY: "tool_output",
                },
                embedding=vector,
                embedding_model=get_embedder().model_id if vector is not None else "",
            )
        else:
            was_archived = item.status == KnowledgeStatus.ARCHIVED
            metadata = dict(item.metadata)
            last = metadata.get("last_failed_at") or ""
            metadata["failures"] = int(metadata.get("failures", 0)) + 1
            metadata["tool"] = failure.tool
            metadata[QUOTED_KEY] = "tool_output"
            metadata.pop("archived_by", None)
            if stamp >= last:
                metadata["last_failed_at"] = stamp
                metadata["session_id"] = failure.session_id
                # A person's wording (pinned or sealed) stays; the count still moves.
                if content != item.content and not (item.pinned or item.sealed):
                    item.content = content
                    item.embedding = vector
                    item.embedding_model = get_embedder().model_id if vector is not None else ""
            item.metadata = metadata
            if failure.channel != Channel.AGENT and item.channel == Channel.AGENT:
                # The harness has now seen it fail too: no longer only the model's word.
                item.channel = Channel.HARNESS
            item.status = KnowledgeStatus.ACTIVE
            item.archived_at = None
            item.save()
            if was_archived:
                audit_record(
                    workspace=failure.workspace,
                    actor=ERROR_ITEM_ACTOR.label,
                    action="knowledge.error_reopened",
                    target_type="knowledge",
                    target_id=item.pk,
                    details={"operation_key": failure.operation_key},
                )
        touched[item.pk] = item
    return list(touched.values())


@transaction.atomic
def knowledge_resolve_failure(
    *, workspace: Workspace, operation_key: str, at: datetime, channel: str = Channel.HARNESS
) -> Knowledge | None:
    """A success on an operation archives its active error item, if the failure it
    records is not newer than the success. Returns the archived item.

    A success an agent token reports is the model's word: it archives only an error
    item that came from the agent's own reports, never one the harness saw fail."""
    item = (
        Knowledge.objects.select_for_update()
        .filter(
            workspace=workspace,
            category=Category.ERROR,
            operation_key=operation_key,
            status=KnowledgeStatus.ACTIVE,
            superseded_by__isnull=True,
        )
        .first()
    )
    if item is None:
        return None
    if channel == Channel.AGENT and item.channel != Channel.AGENT:
        return None
    last_failed = item.metadata.get("last_failed_at")
    if last_failed and last_failed > _iso(at):
        return None
    if item.pinned or item.sealed:
        return None
    item.status = KnowledgeStatus.ARCHIVED
    item.archived_at = timezone.now()
    item.metadata = {**item.metadata, "archived_by": "success", "resolved_at": _iso(at)}
    item.save(update_fields=["status", "archived_at", "metadata", "updated_at"])
    audit_record(
        workspace=workspace,
        actor=ERROR_ITEM_ACTOR.label,
        action="knowledge.error_resolved",
        target_type="knowledge",
        target_id=item.pk,
        details={"operation_key": operation_key},
    )
    return item
