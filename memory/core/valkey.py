"""Valkey's files on disk after an erasure.

Valkey keeps the broker, result backend and cache in memory and, with the embedded
server's ``appendonly yes``, logs every write to its append-only file. A deleted
key (a cached effective skill quoting an erased delta, a task message) is gone from
memory but its write stays in that file until the file is rewritten. The erasure
job asks for a rewrite (BGREWRITEAOF): the new file holds only the live dataset,
and Valkey deletes the old one.
"""

from __future__ import annotations

import logging
import time

from django.core.cache import cache
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)


def valkey_aof_rewrite(*, timeout_s: float = 30.0) -> bool:
    """Rewrite the append-only file and wait for it; False if that could not be done."""
    try:
        client = cache._cache.get_client(write=True)
        if client.info("persistence").get("aof_enabled") in (0, "0"):
            return True  # nothing on disk to rewrite
        client.bgrewriteaof()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            info = client.info("persistence")
            if not info.get("aof_rewrite_in_progress") and not info.get("aof_rewrite_scheduled"):
                return info.get("aof_last_bgrewrite_status", "ok") == "ok"
            time.sleep(0.05)
    except RedisError as exc:
        if "already in progress" in str(exc):
            return valkey_aof_rewrite(timeout_s=timeout_s)
        logger.warning("could not rewrite Valkey's append-only file: %s", exc)
    return False
