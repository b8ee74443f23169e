"""Test settings: the same real services, a separate broker db and fast hashing."""

import os

os.environ.setdefault("CAIRN_REDIS_DB", "1")

from cairn.env import envbool  # noqa: E402
from cairn.settings import *  # noqa: E402,F403
from cairn.settings import STATIC_ROOT  # noqa: E402

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
CELERY_BEAT_SCHEDULE = {}
# The shared test worker starts once per session; a heartbeat of its own would land
# in whichever test is running then. The test of the start heartbeat turns it on.
CAIRN_HEARTBEAT_ON_START = os.environ.get("CAIRN_HEARTBEAT_ON_START") == "1"
# Tests serve static files through the finders; an empty STATIC_ROOT keeps
# whitenoise from warning on every request in a fresh clone.
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
# Webhook retries in tenths of a second, so a test watches the whole schedule.
CAIRN_WEBHOOK_RETRY_S = [0.2, 0.4, 0.6, 0.8, 1.0]
CAIRN_WEBHOOK_TIMEOUT_S = 1.0
# Most tests run inside a transaction that holds its tables' locks until the end:
# an erasure's rewrite there waits this long, then falls back to a plain VACUUM.
CAIRN_ERASURE_VACUUM_WAIT_S = 0.2
# ... and its VACUUM's truncation step waits 5 s (PostgreSQL's own timeout) for each
# table such a transaction holds: off in the test process. The test Celery worker,
# which erases committed rows (the file sweep of tests/memory/privacy/
# test_erasure_every_copy.py reads what it leaves), keeps it on (tests/conftest.py).
CAIRN_ERASURE_VACUUM_TRUNCATE = envbool("CAIRN_ERASURE_VACUUM_TRUNCATE", False)
# The test receivers listen on 127.0.0.1 (tests/factories/webhooks.py): the one
# internal receiver tests allow. The destination tests set their own list.
CAIRN_WEBHOOK_ALLOW_HOSTS = ["127.0.0.1"]
# Recency marks at once, after each outcome's commit: the rows a test reads live in
# its transaction, which the background writer cannot see (tests/memory/lessons/
# test_recency.py runs the background writer against committed rows).
CAIRN_RECENCY_FLUSH_MS = 0
# Per-token budgets (agents/budget.py) far above what any test sends: many tests post
# hundreds of writes with one token. The budget tests set small ones themselves.
CAIRN_WRITE_RATE_PER_MIN = 10**9
CAIRN_WRITE_BYTES_PER_MIN = 10**12
CAIRN_RECALL_RATE_PER_MIN = 10**9
# The race tests send eight requests of one workspace at once.
CAIRN_WORKSPACE_CONCURRENT_REQUESTS = 64
