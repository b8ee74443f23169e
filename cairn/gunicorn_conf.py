"""Gunicorn settings for ``make run`` (Procfile ``web:``): the bounds on one request.

- ``timeout`` (``WEB_TIMEOUT``, 30 s): a worker silent that long is killed and
  replaced. No request comes near it: the slowest thing a request can do with
  outside text, scanning it, is linear and bounded (docs/operating/limits.md).
- ``limit_request_line`` at gunicorn's maximum (8190): Django answers URLs over
  ``CAIRN_URL_MAX_CHARS`` with 414 in the API's JSON error shape (cairn/guard.py);
  a request line past gunicorn's own limit never reaches Django, so this worker
  answers it in the same JSON shape instead of gunicorn's HTML page.
- A response the application marks with ``CLOSE_CONNECTION`` in the WSGI environ
  (a 413 whose body was never read) is sent with ``Connection: close`` and the
  connection closed: gunicorn would otherwise say keep-alive, find more unread body
  than it drains (64 KB), and drop the connection under the client.
"""

from __future__ import annotations

import json
import os

from gunicorn import util
from gunicorn.http.errors import LimitRequestLine
from gunicorn.workers.gthread import ThreadWorker

timeout = int(os.environ.get("WEB_TIMEOUT", "30"))
graceful_timeout = 10
limit_request_line = 8190
limit_request_fields = 100
limit_request_field_size = 8190
worker_class = "cairn.gunicorn_conf.CairnWorker"
CLOSE_CONNECTION = "cairn.close_connection"  # the same name as cairn.guard's


class CairnWorker(ThreadWorker):
    """gunicorn's threaded worker: the over-long request line answered in JSON, and a
    response the application marks as closing sent with ``Connection: close``."""

    def load_wsgi(self):
        super().load_wsgi()
        app = self.wsgi

        def closing_when_asked(environ, start_response):
            def start(status, headers, exc_info=None):
                if environ.get(CLOSE_CONNECTION):
                    start_response.__self__.force_close()  # gunicorn's Response
                return start_response(status, headers, exc_info)

            return app(environ, start)

        self.wsgi = closing_when_asked

    def handle_error(self, req, client, addr, exc):
        if not isinstance(exc, LimitRequestLine):
            return super().handle_error(req, client, addr, exc)
        body = json.dumps(
            {
                "error": {
                    "code": "uri_too_long",
                    "message": f"The request line is longer than {limit_request_line} "
                    "characters; send long input in a POST body.",
                    "fields": {"path": ["too long"]},
                }
            }
        ).encode()
        head = (
            "HTTP/1.1 414 URI Too Long\r\nConnection: close\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode("latin-1")
        self.log.warning("Invalid request from ip=%s: %s", (addr or ("",))[0], exc)
        try:
            util.write_nonblock(client, head + body)
        except Exception:  # noqa: BLE001 - the client went away: nothing to tell it
            self.log.debug("Failed to send the 414.")
        return None
