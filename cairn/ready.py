"""Say "open <url>" only when it works, and put the first-start credentials last.

`bin/cairn-serve` starts web, worker and beat under honcho; their banners scroll for a
while, and ``/healthz`` answers 503 until a worker answers its ping. This runs beside
them: it asks ``/healthz`` on the local port until it is green, then prints where to
go and, on a first start, the credentials box again (read from stdin: it is never
written to disk or put in an environment), so it is the last thing on the screen.

Usage: ``printf '%s' "$box" | python -m cairn.ready`` (PORT and SITE_URL from the
environment). Exits 0 once announced, 1 if the server was not healthy in time.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request

WAIT_S = float(os.environ.get("CAIRN_READY_WAIT_S", "180"))
POLL_S = 0.5


def healthy(url: str) -> tuple[bool, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status == 200, ""
    except urllib.error.HTTPError as exc:
        try:
            body = json.loads(exc.read() or b"{}")
        except ValueError:
            body = {}
        return False, "; ".join(body.get("problems", [])) or f"HTTP {exc.code}"
    except (OSError, urllib.error.URLError) as exc:
        return False, str(getattr(exc, "reason", exc))


def banner(site_url: str, box: str) -> str:
    lines = [
        "",
        f"cairn: ready (/healthz is green). Open {site_url}/",
        f"       API docs: {site_url}/api/v1/docs/",
        f"       health:   {site_url}/healthz",
        "       Ctrl-C stops web, worker and beat, then the embedded services.",
    ]
    if box.strip():
        lines += ["", "cairn: the first-start credentials again (shown this once):", box.rstrip()]
    return "\n".join(lines) + "\n"


def main() -> int:
    port = os.environ.get("PORT", "8000")
    site_url = os.environ.get("SITE_URL", f"http://localhost:{port}").rstrip("/")
    box = sys.stdin.read() if not sys.stdin.isatty() else ""
    url = f"http://127.0.0.1:{port}/healthz"
    deadline = time.monotonic() + WAIT_S
    last = ""
    while time.monotonic() < deadline:
        ok, last = healthy(url)
        if ok:
            sys.stdout.write(banner(site_url, box))
            sys.stdout.flush()
            return 0
        time.sleep(POLL_S)
    sys.stdout.write(
        f"\ncairn: {url} is still not healthy after {WAIT_S:.0f} s ({last}); "
        "see the web and worker lines above.\n"
    )
    if box.strip():
        sys.stdout.write(box.rstrip() + "\n")
    return 1


if __name__ == "__main__":
    sys.exit(main())
