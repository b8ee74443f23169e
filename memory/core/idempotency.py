"""Idempotency-Key for agent write requests (SPEC section 11).

The first request with a key runs and its successful response is stored; the
same key again replays that response (nothing is applied twice). The same key
on a different request is refused. Concurrent requests with one key are
serialised by an advisory lock, so only one of them runs.

Keys belong to the token scope that sent them (agent, harness, admin): the same
key from the agent token and from its harness are two keys, so the model cannot
post first under the key its harness will use and have the harness's real write
answered with a replay of its own.
"""

from __future__ import annotations

import contextlib
import hashlib
from dataclasses import dataclass

from memory.core.locks import advisory_lock_blocking
from memory.models import Agent, IdempotencyRecord

KEY_MAX_CHARS = 200


@dataclass(frozen=True)
class StoredResponse:
    status_code: int
    body: bytes
    content_type: str
    matches: bool  # False: the key was used for a different request


def request_digest(*, method: str, path: str, body: bytes) -> str:
    return hashlib.sha256(method.encode() + b"\0" + path.encode() + b"\0" + body).hexdigest()


def idempotency_lookup(*, agent: Agent, scope: str, key: str, digest: str) -> StoredResponse | None:
    record = IdempotencyRecord.objects.filter(agent=agent, scope=scope, key=key).first()
    if record is None:
        return None
    return StoredResponse(
        status_code=record.status_code,
        body=bytes(record.response_body),
        content_type=record.content_type,
        matches=record.request_digest == digest,
    )


def idempotency_store(
    *,
    agent: Agent,
    scope: str = "agent",
    key: str,
    method: str,
    path: str,
    digest: str,
    status_code: int,
    body: bytes,
    content_type: str,
) -> None:
    # One INSERT ... ON CONFLICT DO NOTHING: a record already there (another process's,
    # under the same key) is kept, as get_or_create would, without its SELECT and savepoint.
    IdempotencyRecord.objects.bulk_create(
        [
            IdempotencyRecord(
                agent=agent,
                scope=scope,
                key=key,
                workspace_id=agent.workspace_id,
                method=method,
                path=path[:500],
                request_digest=digest,
                status_code=status_code,
                response_body=body,
                content_type=content_type[:100],
            )
        ],
        ignore_conflicts=True,
    )


@contextlib.contextmanager
def idempotency_guard(*, agent: Agent, scope: str, key: str):
    """Serialise requests that share (agent, scope, key) across processes."""
    with advisory_lock_blocking(f"idempotency:{agent.pk}:{scope}:{key}"):
        yield
