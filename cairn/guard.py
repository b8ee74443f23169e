"""One gate for hostile input, before any view runs (SPEC section 10: bad input is a 4xx).

- NUL characters and lone UTF-16 surrogates are refused in the path, the query
  string and the body: PostgreSQL text cannot hold NUL, and a lone surrogate cannot
  be encoded as UTF-8 (echoing one back in an error message used to crash the
  renderer). One place, so every view — API, review UI, admin — is covered.
- JSON bodies nested deeper than ``CAIRN_JSON_MAX_DEPTH`` are refused before the
  parser recurses (Python's json module raises RecursionError at ~1,000 levels).
- A body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` is a 413, not Django's HTML 400; the
  import upload is held to ``CAIRN_IMPORT_MAX_BYTES`` instead, and its 413 says so.
- A URL over ``CAIRN_URL_MAX_CHARS`` is a 414.

API paths answer in the error shape; pages answer with a short HTML page.
"""

from __future__ import annotations

import json
import re

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.http import HttpResponse, JsonResponse
from django.http.request import RawPostDataException
from django.template import loader
from django.template.defaultfilters import filesizeformat
from django.urls import reverse

from cairn.errors import error_body, wants_json

_BAD_CHARS = re.compile("[\x00\ud800-\udfff]")
# The Export page's import form (reviews:exports_import) takes a file up to
# CAIRN_IMPORT_MAX_BYTES; every other body is held to DATA_UPLOAD_MAX_MEMORY_SIZE.
IMPORT_ROUTE = "reviews:exports_import"
UPLOAD_FORM_BYTES = 64 * 1024
# JSON strings (with escapes) are skipped when counting brackets. Possessive, and an
# unclosed string runs to the end: otherwise every quote inside an unclosed string
# (a body of '"\\"\\"...') restarts a scan to the end, quadratic in the body.
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*+(?:"|\\?\Z)', re.DOTALL)
_NOT_BRACKET = re.compile(rb"[^\[\]{}]")


def json_depth(body: bytes) -> int:
    """The deepest nesting of arrays/objects in ``body``, without parsing it."""
    brackets = _NOT_BRACKET.sub(b"", _JSON_STRING.sub(b"", body))
    depth = deepest = 0
    for byte in brackets:
        if byte in b"[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def _bad(value: str) -> str | None:
    match = _BAD_CHARS.search(value)
    if match is None:
        return None
    return "contains a NUL character" if match.group() == "\x00" else "contains a lone surrogate"


def _walk(value, path: str, out: dict) -> None:
    if isinstance(value, str):
        if problem := _bad(value):
            out.setdefault(path or "body", []).append(f"The value {problem}.")
    elif isinstance(value, dict):
        for key, inner in value.items():
            name = f"{path}.{key}" if path else str(key)
            if problem := _bad(str(key)):
                out.setdefault(path or "body", []).append(f"A key {problem}.")
                continue
            _walk(inner, name, out)
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            _walk(inner, f"{path}[{index}]" if path else f"[{index}]", out)


# Set in the WSGI environ on a response whose request body was left unread: the web
# server (cairn/gunicorn_conf.py) then says ``Connection: close`` and closes, instead
# of promising keep-alive on a connection it must drop.
CLOSE_CONNECTION = "cairn.close_connection"


def close_connection(request) -> None:
    request.META[CLOSE_CONNECTION] = True


def refuse_body(request, drain_max: int | None = None) -> None:
    """Before answering 413 (or 429) for a body that will not be read: read and discard
    it when it is at most ``drain_max`` (default ``CAIRN_REFUSED_BODY_DRAIN_BYTES``: the
    client finishes sending, reads the answer and may reuse the connection), else mark
    the connection to be closed."""
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = -1
    limit = settings.CAIRN_REFUSED_BODY_DRAIN_BYTES if drain_max is None else drain_max
    if not 0 <= length <= limit:
        close_connection(request)
        return
    # request.read() is Django's stream limited to CONTENT_LENGTH (whatever a parser
    # already consumed is not waited for again).
    try:
        while request.read(65536):
            pass
    except (OSError, ValueError, RawPostDataException):
        close_connection(request)


def bad_request(request, code: str, message: str, fields: dict, status: int = 400):
    if wants_json(request):
        return JsonResponse(error_body(code, message, fields), status=status)
    html = loader.get_template("400.html").render({"message": message, "status": status})
    return HttpResponse(html, status=status)


class InputGuardMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        try:
            refused = self.check(request)
        except SuspiciousOperation as exc:  # e.g. too many query parameters
            refused = bad_request(request, "invalid", str(exc), {"query": [str(exc)]})
        return refused or self.get_response(request)

    def check(self, request):
        fields: dict[str, list[str]] = {}
        url_max = settings.CAIRN_URL_MAX_CHARS
        if len(request.META.get("PATH_INFO", "")) + len(request.META.get("QUERY_STRING", "")) > (
            url_max
        ):
            return bad_request(
                request,
                "uri_too_long",
                f"The URL is longer than {url_max} characters; send long input in a POST body.",
                {"path": [f"longer than {url_max} characters"]},
                status=414,
            )
        if problem := _bad(request.path):
            fields["path"] = [f"The path {problem}."]
        for key, values in request.GET.lists():
            if problem := _bad(key):
                fields.setdefault("query", []).append(f"A parameter name {problem}.")
                continue
            for value in values:
                if problem := _bad(value):
                    fields.setdefault(key, []).append(f"The value {problem}.")
        if fields:
            return self.refuse(request, fields)
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        upload = request.method == "POST" and request.path == reverse(IMPORT_ROUTE)
        if upload:
            # The one route that takes a file: its limit is the import's (the file
            # streams to a temporary file; the form around it is small).
            limit = settings.CAIRN_IMPORT_MAX_BYTES + UPLOAD_FORM_BYTES
        if limit is not None and length > limit:
            return self.too_big(request, limit, upload=upload)
        if request.method not in {"POST", "PUT", "PATCH", "DELETE"}:
            return None
        content_type = request.content_type or ""
        try:
            if "json" in content_type:
                return self.check_json(request)
            if content_type in ("application/x-www-form-urlencoded", "multipart/form-data"):
                for key, values in request.POST.lists():
                    if problem := _bad(key):
                        fields.setdefault("body", []).append(f"A field name {problem}.")
                        continue
                    for value in values:
                        if problem := _bad(value):
                            fields.setdefault(key, []).append(f"The value {problem}.")
        except RequestDataTooBig:
            return self.too_big(request, limit)
        except SuspiciousOperation as exc:  # too many fields, malformed multipart
            return bad_request(request, "invalid", str(exc), {"body": [str(exc)]})
        return self.refuse(request, fields) if fields else None

    def check_json(self, request):
        body = request.body
        max_depth = settings.CAIRN_JSON_MAX_DEPTH
        if json_depth(body) > max_depth:
            return bad_request(
                request,
                "too_deep",
                f"JSON nested deeper than {max_depth} levels.",
                {"body": [f"Nested deeper than {max_depth} levels."]},
            )
        if b"\\u" not in body and b"\x00" not in body:
            return None  # nothing could decode to NUL or a surrogate
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):
            return None  # the view's parser answers with parse_error
        fields: dict[str, list[str]] = {}
        _walk(data, "", fields)
        return self.refuse(request, fields) if fields else None

    def refuse(self, request, fields):
        names = ", ".join(sorted(fields))
        return bad_request(
            request,
            "invalid_characters",
            f"Invalid input: {names} (NUL characters and lone surrogates are not accepted).",
            fields,
        )

    def too_big(self, request, limit, upload: bool = False):
        refuse_body(request)
        if upload:
            most = filesizeformat(settings.CAIRN_IMPORT_MAX_BYTES)
            message = (
                f"The file is larger than {most}, the most the Export page imports "
                "(CAIRN_IMPORT_MAX_BYTES); import it with `manage.py import_export FILE "
                "WORKSPACE` instead."
            )
            return bad_request(request, "too_large", message, {"file": [message]}, status=413)
        return bad_request(
            request,
            "too_large",
            f"The request body is larger than {limit} bytes.",
            {"body": [f"Larger than {limit} bytes."]},
            status=413,
        )
