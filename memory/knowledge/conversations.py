"""Conversation turns and tool calls (SPEC section 3; sessions in section 2).

Incognito is honest: nothing from an incognito request is written anywhere (no
row, no error item, no audit entry), and the answer says ``recorded: false``.
The flag is per request: Cairn cannot remember that a session is incognito
without recording it, so clients send it with every turn and tool call.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from cairn.errors import ApplicationError
from memory.core.embedders import EmbeddingError
from memory.core.embeddings import get_embedder
from memory.core.locks import advisory_xact_locks
from memory.core.secrets import refuse_secrets
from memory.core.validation import (
    bad_request,
    check_aware,
    check_text,
    prefix_fields,
)
from memory.knowledge.error_items import (
    FailureRecord,
    error_item_content,
    knowledge_record_failures,
    knowledge_resolve_failure,
)
from memory.knowledge.turn_text import session_turns_embed
from memory.knowledge.vector_search import vector_literal
from memory.models import (
    TURN_CONTENT_MAX_CHARS,
    Agent,
    Channel,
    ConversationTurn,
    Knowledge,
    ToolCall,
    TurnRole,
    Workspace,
)

logger = logging.getLogger(__name__)

SESSION_ID_MAX = 200
DURATION_MS_MAX = 2**31 - 1


def _check_session_id(value: Any, field_name: str = "session_id") -> str:
    return check_text(field_name, value, max_chars=SESSION_ID_MAX, allow_blank=False)


# --------------------------------------------------------------------------- turns


@dataclass(frozen=True)
class TurnResult:
    recorded: bool
    turn: ConversationTurn | None = None
    created: bool = False


def _check_turn(
    *, role: Any, content: Any, context: Any, turn_index: Any, at: Any
) -> tuple[str, str, str, int, datetime]:
    """One turn's fields, validated (400 naming the field) and credential-checked (422)."""
    if role not in TurnRole.values:
        raise bad_request("role", f"must be one of {', '.join(TurnRole.values)}")
    content = check_text("content", content, max_chars=TURN_CONTENT_MAX_CHARS, allow_blank=False)
    context = check_text("context", context or "global", max_chars=200, allow_blank=False)
    if not isinstance(turn_index, int) or isinstance(turn_index, bool) or turn_index < 0:
        raise bad_request("turn_index", "must be a whole number >= 0")
    at = check_aware("at", at) or timezone.now()
    refuse_secrets({"content": content, "context": context})
    return role, content, context, turn_index, at


def turn_store(
    *,
    workspace: Workspace,
    agent: Agent | None,
    session_id: str,
    role: str,
    content: str,
    turn_index: int,
    context: str = "global",
    incognito: bool = False,
    at: datetime | None = None,
    channel: str = Channel.AGENT,
) -> TurnResult:
    """Store one conversation turn.

    1. Incognito: return ``recorded=False``; nothing is validated further or written.
    2. Validate (400 naming the field) and refuse credentials (422).
    3. The same (agent, session, turn index, role) again: identical content returns
       the stored turn (a retry); different content is a 409, never an overwrite.
    """
    if incognito:
        return TurnResult(recorded=False)
    session_id = _check_session_id(session_id)
    role, content, context, turn_index, at = _check_turn(
        role=role, content=content, context=context, turn_index=turn_index, at=at
    )
    refuse_secrets({"session_id": session_id})
    key = {
        "workspace": workspace,
        "agent": agent,
        "session_id": session_id,
        "turn_index": turn_index,
        "role": role,
    }
    vectors = session_turns_embed(
        workspace=workspace, session_id=session_id, rows=[(content, role, at, turn_index)]
    )
    try:
        with transaction.atomic():
            turn = ConversationTurn.objects.create(
                **key,
                content=content,
                context=context,
                created_at=at,
                channel=channel,
                embedding=vectors[0] if vectors else None,
                embedding_model=get_embedder().model_id if vectors else "",
            )
        return TurnResult(recorded=True, turn=turn, created=True)
    except IntegrityError:
        existing = ConversationTurn.objects.filter(**key).first()
        if existing is None:  # pragma: no cover - another constraint failed
            raise
    if existing.content != content:
        raise ApplicationError(
            f"Turn {turn_index} ({role}) of session '{session_id}' is already stored with "
            "different content; turns are not overwritten. Use the next turn_index.",
            code="conflict",
            fields={"turn_index": ["already stored with different content"]},
            status_code=409,
        )
    return TurnResult(recorded=True, turn=existing, created=False)


@dataclass(frozen=True)
class TurnBatchResult:
    recorded: bool
    turns: list[ConversationTurn] = field(default_factory=list)
    created: list[bool] = field(default_factory=list)


_TURNS_INSERT_SQL = """
    INSERT INTO memory_conversationturn
        (workspace_id, agent_id, session_id, role, turn_index, content, context, created_at,
         channel, embedding, embedding_model)
    SELECT %(workspace_id)s, %(agent_id)s, %(session_id)s, t.role, t.turn_index, t.content,
           t.context, t.created_at, %(channel)s, t.embedding::vector,
           CASE WHEN t.embedding IS NULL THEN '' ELSE %(embedding_model)s END
    FROM unnest(%(roles)s::text[], %(indexes)s::int[], %(contents)s::text[],
                %(contexts)s::text[], %(ats)s::timestamptz[], %(embeddings)s::text[])
         AS t(role, turn_index, content, context, created_at, embedding)
    ON CONFLICT ON CONSTRAINT turn_unique_per_session DO NOTHING
    RETURNING id, turn_index, role
"""


def turns_store_many(
    *,
    workspace: Workspace,
    agent: Agent | None,
    session_id: str,
    turns: list[dict[str, Any]],
    incognito: bool = False,
    channel: str = Channel.AGENT,
) -> TurnBatchResult:
    """Store up to CAIRN_TURN_BATCH_MAX turns of one session: all or none.

    1. Incognito: ``recorded=False``, nothing validated further or written.
    2. Validate every turn (400 / 422 naming ``turns[i].field``) before writing any;
       the same (turn_index, role) twice in one batch with other content is a 400.
    3. One ``INSERT … SELECT FROM unnest(…) ON CONFLICT DO NOTHING`` for the batch,
       then one read of the turns that were already stored: identical content is a
       retry (``created`` false), other content a 409 naming the turn and nothing of
       the batch is kept.
    """
    if incognito:
        return TurnBatchResult(recorded=False)
    session_id = _check_session_id(session_id)
    if not isinstance(turns, list) or not turns:
        raise bad_request("turns", "must be a non-empty list")
    if len(turns) > settings.CAIRN_TURN_BATCH_MAX:
        raise bad_request("turns", f"at most {settings.CAIRN_TURN_BATCH_MAX} turns per batch")
    refuse_secrets({"session_id": session_id})
    checked: list[tuple[str, str, str, int, datetime]] = []
    origin: list[int] = []
    seen: dict[tuple[int, str], tuple[int, str]] = {}
    for index, raw in enumerate(turns):
        try:
            if not isinstance(raw, dict):
                raise bad_request("turns", "must be an object")
            row = _check_turn(
                role=raw.get("role"),
                content=raw.get("content"),
                context=raw.get("context"),
                turn_index=raw.get("turn_index"),
                at=raw.get("at"),
            )
            key = (row[3], row[0])
            if key in seen and seen[key][1] != row[1]:
                raise bad_request(
                    "turn_index", f"turns[{seen[key][0]}] has this turn_index and role"
                )
        except ApplicationError as exc:
            raise prefix_fields(exc, f"turns[{index}]") from None
        if key in seen:
            continue
        seen[key] = (index, row[1])
        checked.append(row)
        origin.append(index)
    # One embedder call for the batch, outside the transaction; each turn in the
    # context of the one before it (the batch's own, or the stored one before the batch).
    vectors = session_turns_embed(
        workspace=workspace,
        session_id=session_id,
        rows=[(r[1], r[0], r[4], r[3]) for r in checked],
    )
    params = {
        "workspace_id": workspace.pk,
        "agent_id": agent.pk if agent is not None else None,
        "session_id": session_id,
        "channel": str(channel),
        "embedding_model": get_embedder().model_id if vectors else "",
        "embeddings": [vector_literal(v) for v in vectors] if vectors else [None] * len(checked),
        "roles": [r[0] for r in checked],
        "contents": [r[1] for r in checked],
        "contexts": [r[2] for r in checked],
        "indexes": [r[3] for r in checked],
        "ats": [r[4] for r in checked],
    }
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(_TURNS_INSERT_SQL, params)
            inserted = {(ti, role): pk for pk, ti, role in cursor.fetchall()}
        missing = [(r[3], r[0]) for r in checked if (r[3], r[0]) not in inserted]
        existing: dict[tuple[int, str], ConversationTurn] = {}
        if missing:
            q = Q()
            for turn_index, role in missing:
                q |= Q(turn_index=turn_index, role=role)
            for turn in ConversationTurn.objects.filter(
                q, workspace=workspace, agent=agent, session_id=session_id
            ):
                existing[(turn.turn_index, turn.role)] = turn
        for position, (role, content, _context, turn_index, _at) in enumerate(checked):
            old = existing.get((turn_index, role))
            if (turn_index, role) not in inserted and (old is None or old.content != content):
                raise ApplicationError(
                    f"Turn {turn_index} ({role}) of session '{session_id}' is already stored "
                    "with different content; turns are not overwritten. Nothing of this batch "
                    "was stored.",
                    code="conflict",
                    fields={
                        f"turns[{origin[position]}].turn_index": [
                            "already stored with other content"
                        ]
                    },
                    status_code=409,
                )
        rows = {
            (t.turn_index, t.role): t
            for t in ConversationTurn.objects.filter(pk__in=inserted.values()).defer("content")
        }
    result = TurnBatchResult(recorded=True)
    for role, _content, _context, turn_index, _at in checked:
        key = (turn_index, role)
        result.turns.append(rows[key] if key in rows else existing[key])
        result.created.append(key in rows)
    return result


# --------------------------------------------------------------------------- tool calls


@dataclass
class ToolCallLogResult:
    recorded: int = 0
    incognito: int = 0
    error_items: list[Knowledge] = field(default_factory=list)
    resolved_items: list[Knowledge] = field(default_factory=list)


def _check_call(index: int, raw: dict[str, Any]) -> dict[str, Any]:
    try:
        call = {
            "session_id": _check_session_id(raw.get("session_id")),
            "tool": check_text("tool", raw.get("tool"), max_chars=100, allow_blank=False),
            "operation_key": check_text(
                "operation_key", raw.get("operation_key"), max_chars=200, allow_blank=False
            ),
            "error": check_text(
                "error",
                raw.get("error") or "",
                max_chars=settings.CAIRN_TOOL_CALL_ERROR_MAX_CHARS,
            ),
            "at": check_aware("at", raw.get("at")) or timezone.now(),
        }
        ok = raw.get("ok")
        if not isinstance(ok, bool):
            raise bad_request("ok", "must be true or false")
        call["ok"] = ok
        known = raw.get("known_error", True)
        if not isinstance(known, bool):
            raise bad_request("known_error", "must be true or false")
        call["known_error"] = known
        duration = raw.get("duration_ms")
        if duration is not None and (
            not isinstance(duration, int)
            or isinstance(duration, bool)
            or not 0 <= duration <= DURATION_MS_MAX
        ):
            raise bad_request("duration_ms", f"must be a whole number 0..{DURATION_MS_MAX}")
        call["duration_ms"] = duration
        refuse_secrets(
            {
                "session_id": call["session_id"],
                "tool": call["tool"],
                "operation_key": call["operation_key"],
                "error": call["error"],
            }
        )
    except ApplicationError as exc:
        raise prefix_fields(exc, f"calls[{index}]") from None
    return call


def _row(call: dict[str, Any]) -> dict[str, Any]:
    """A checked call's model fields (``known_error`` steers the error item only)."""
    return {key: value for key, value in call.items() if key != "known_error"}


def tool_calls_log(
    *,
    workspace: Workspace,
    agent: Agent | None,
    calls: list[dict[str, Any]],
    channel: str = Channel.AGENT,
) -> ToolCallLogResult:
    """Log a batch of tool calls, all or nothing.

    1. Drop calls marked incognito (counted, never written).
    2. Validate every call (400 / 422 naming ``calls[i].field``) before writing any.
    3. Embed the error items' texts in one batch, outside the transaction.
    4. In one transaction: insert the calls, then walk them in time order: a failure
       stores or refreshes the operation's one active ``error`` item (unless the
       harness says it is no known error: a failing test run, a search that found
       nothing); a success archives it (memory/knowledge/error_items.py holds both rules).
    """
    if len(calls) > settings.CAIRN_TOOL_CALL_BATCH_MAX:
        raise bad_request("calls", f"at most {settings.CAIRN_TOOL_CALL_BATCH_MAX} calls per batch")
    result = ToolCallLogResult()
    checked = []
    for index, raw in enumerate(calls):
        if raw.get("incognito"):
            result.incognito += 1
            continue
        checked.append(_check_call(index, raw))
    if not checked:
        return result
    contents = sorted(
        {
            error_item_content(tool=c["tool"], operation_key=c["operation_key"], error=c["error"])
            for c in checked
            if not c["ok"] and c["known_error"]
        }
    )
    embeddings: dict[str, list[float]] = {}
    if contents:
        try:
            embeddings = dict(zip(contents, get_embedder().embed(contents), strict=True))
        except EmbeddingError:
            logger.exception("embedding error items failed; storing them without vectors")
    with transaction.atomic():
        # One active error item per failing operation (a unique index): batches that
        # touch the same operations take turns.
        advisory_xact_locks(f"error_item:{workspace.pk}:{c['operation_key']}" for c in checked)
        ToolCall.objects.bulk_create(
            [
                ToolCall(workspace=workspace, agent=agent, channel=channel, **_row(c))
                for c in checked
            ]
        )
        result.recorded = len(checked)
        for call in sorted(checked, key=lambda c: c["at"]):
            if call["ok"]:
                resolved = knowledge_resolve_failure(
                    workspace=workspace,
                    operation_key=call["operation_key"],
                    at=call["at"],
                    channel=channel,
                )
                if resolved is not None:
                    result.resolved_items.append(resolved)
            elif call["known_error"]:
                result.error_items.extend(
                    knowledge_record_failures(
                        failures=[
                            FailureRecord(
                                workspace=workspace,
                                agent=agent,
                                tool=call["tool"],
                                operation_key=call["operation_key"],
                                error=call["error"],
                                at=call["at"],
                                session_id=call["session_id"],
                                channel=channel,
                            )
                        ],
                        embeddings=embeddings,
                    )
                )
    # An item can fail and then be resolved within one batch: report final states once.
    result.error_items = _unique_latest(result.error_items)
    result.resolved_items = _unique_latest(result.resolved_items)
    return result


def _unique_latest(items: list[Knowledge]) -> list[Knowledge]:
    by_id = {item.pk: item for item in items}
    return [by_id[pk] for pk in sorted(by_id)]
