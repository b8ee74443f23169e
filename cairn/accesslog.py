"""Gunicorn's access log without user data (the Procfile passes ``--logger-class``).

Gunicorn logs the raw request line by default: query strings (a ``project_remote``
may carry ``https://user:token@host/``), referers, and paths whose segments are
user data (session ids, fact keys, skill names) that an erasure cannot reach in a
log file. Each line here holds the method, the path's *shape*, status, size and
duration: no query string, no referer, no user agent; the words of our own URL
patterns and numeric ids kept, every other segment replaced by ``-``.

    127.0.0.1 [01/Dec/2026:15:00:00 +0000] "GET /api/v1/conversations/-/turns/" 200 512 0.012
"""

from __future__ import annotations

import functools
import re

from gunicorn.glogging import Logger

FORMAT = '%(h)s %(t)s "%(m)s %(U)s" %(s)s %(b)s %(L)s'
_USERINFO = re.compile(r"//[^/@\s]*@")


@functools.cache
def _route_words() -> frozenset[str]:
    """The literal segments of every URL pattern ("api", "v1", "turns", "effective")."""
    from django.urls import URLPattern, URLResolver, get_resolver

    words: set[str] = set()

    def walk(patterns):
        for pattern in patterns:
            text = str(pattern.pattern)
            if not text.startswith("^"):
                words.update(p for p in text.split("/") if p and "<" not in p)
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns)
            elif not isinstance(pattern, URLPattern):
                continue

    walk(get_resolver().url_patterns)
    return frozenset(words)


def path_shape(path: str) -> str:
    """Route words and numeric ids kept; every other segment (user data) is ``-``."""
    path = _USERINFO.sub("//[redacted]@", path)
    segments = [p for p in path.split("/") if p]
    if segments and segments[0] == "static":
        return "/static/-"
    words = _route_words()
    shaped = [s if s in words or s.isdigit() else "-" for s in segments]
    trailing = "/" if path.endswith("/") and shaped else ""
    return "/" + "/".join(shaped) + trailing


class RedactingLogger(Logger):
    def setup(self, cfg):
        cfg.set("access_log_format", FORMAT)  # whatever --access-logformat said
        super().setup(cfg)

    def atoms(self, resp, req, environ, request_time):
        atoms = super().atoms(resp, req, environ, request_time)
        shape = path_shape(environ.get("PATH_INFO") or "/")
        atoms.update(
            {
                "r": f"{environ['REQUEST_METHOD']} {shape} {environ['SERVER_PROTOCOL']}",
                "U": shape,
                "q": "",
                "f": "-",
                "a": "-",
                "u": "-",
            }
        )
        # Headers and environ atoms ({...}i, {...}e) could hold cookies and tokens.
        for key in [k for k in atoms if k.startswith("{")]:
            del atoms[key]
        return atoms
