"""Settings for the benchmarks' gunicorn: production's, plus one bare DRF view.

``DJANGO_SETTINGS_MODULE=server_settings`` (with ``bench/`` on the path) serves the
real URLconf and ``POST /api/v1/_bench/bare/``: an ``APIView`` with the default
authentication and permission (the bearer token), behind the same middleware
(the write guard scans its body as it scans any API write), that parses the JSON
body and answers a constant. What an endpoint costs beyond that is its own work.
The per-token request budgets (``CAIRN_SCAN_*_PER_MIN``, ``CAIRN_WRITE_*_PER_MIN``,
``CAIRN_RECALL_RATE_PER_MIN``, ``CAIRN_WORKSPACE_CONCURRENT_REQUESTS``, a guard against one runaway agent) are lifted: a benchmark drives one token far faster than
an agent does, and a 429 with its Retry-After would time the bench's own pacing.
The middleware still runs and still counts.
Not a benchmark itself (no ``bench_`` prefix), so ``run_all.py`` does not run it.
"""

from cairn.settings import *  # noqa: F403

ROOT_URLCONF = "server_urls"
CAIRN_SCAN_RATE_PER_MIN = 10**9
CAIRN_SCAN_BYTES_PER_MIN = 10**12
CAIRN_WRITE_RATE_PER_MIN = 10**9
CAIRN_WRITE_BYTES_PER_MIN = 10**12
CAIRN_RECALL_RATE_PER_MIN = 10**9
CAIRN_WORKSPACE_CONCURRENT_REQUESTS = 1000
