"""Logging filters the settings' LOGGING names."""

from __future__ import annotations

import logging


class ExpectedForbidden(logging.Filter):
    """Keep a refused request (403: a role too low, a stale CSRF token) as one warning
    line, without the traceback Django attaches: it is the guard working, not a bug."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "status_code", None) == 403:
            record.exc_info = None
            record.exc_text = None
        return True
