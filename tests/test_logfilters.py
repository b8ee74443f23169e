"""A refused request is one warning line, not a traceback."""

import logging
import sys

from cairn.logfilters import ExpectedForbidden


def _record(status: int) -> logging.LogRecord:
    try:
        raise PermissionError("This needs the admin role in this workspace.")
    except PermissionError:
        info = sys.exc_info()
    record = logging.LogRecord(
        "django.request", logging.WARNING, __file__, 1, "Forbidden: %s", ("/members/",), info
    )
    record.status_code = status
    return record


def test_a_403_keeps_its_line_and_loses_its_traceback():
    record = _record(403)
    assert ExpectedForbidden().filter(record) is True
    text = logging.Formatter("%(levelname)s %(message)s").format(record)
    assert text == "WARNING Forbidden: /members/" and "Traceback" not in text


def test_other_errors_keep_their_traceback():
    record = _record(500)
    ExpectedForbidden().filter(record)
    assert "Traceback" in logging.Formatter().format(record)
