"""Settings for the benchmarks' gunicorn: production's, plus one bare DRF view.

``DJANGO_SETTINGS_MODULE=server_settings`` (with ``bench/`` on the path) serves the
real URLconf and ``POST /api/v1/_bench/bare/``: an ``APIView`` with the default
authentication and permission (the bearer token), behind the same middleware
(the write guard scans its body as it scans any API write), that parses the JSON
body and answers a constant. What an endpoint costs beyond that is its own work.
Not a benchmark itself (no ``bench_`` prefix), so ``run_all.py`` does not run it.
"""

from cairn.settings import *  # noqa: F403

ROOT_URLCONF = "server_urls"
