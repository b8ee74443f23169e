"""Input checks shared by every write path, so the API, the UI and jobs agree.

Serializers check shapes first (400); these repeat the checks that matter to
the database (NUL characters and lone surrogates that PostgreSQL cannot store,
column sizes) for callers that do not come through a serializer.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone

from cairn.errors import ApplicationError
from memory.core.secrets import refuse_secrets

_SURROGATE = re.compile(r"[\ud800-\udfff]")


def bad_request(field_name: str, message: str) -> ApplicationError:
    """A 400 in the API error shape naming ``field_name``."""
    return ApplicationError(
        f"Invalid input: {field_name}: {message}",
        code="invalid",
        fields={field_name: [message]},
        status_code=400,
    )


def unstorable(value: str) -> bool:
    """True for text PostgreSQL cannot store (NUL) or encode (lone surrogates)."""
    return "\x00" in value or bool(_SURROGATE.search(value))


def check_text(field_name: str, value: Any, *, max_chars: int, allow_blank: bool = True) -> str:
    if not isinstance(value, str):
        raise bad_request(field_name, "must be a string")
    if unstorable(value):
        raise bad_request(field_name, "must not contain NUL characters or lone surrogates")
    if not allow_blank and not value.strip():
        raise bad_request(field_name, "must not be blank")
    if len(value) > max_chars:
        raise bad_request(
            field_name,
            f"must be at most {max_chars} characters (got {len(value)}); "
            "split it into several items rather than truncating",
        )
    return value


def check_json_strings(field_name: str, value: Any) -> None:
    if isinstance(value, str):
        if unstorable(value):
            raise bad_request(field_name, "must not contain NUL characters or lone surrogates")
    elif isinstance(value, dict):
        for key, inner in value.items():
            check_json_strings(field_name, key)
            check_json_strings(field_name, inner)
    elif isinstance(value, list):
        for inner in value:
            check_json_strings(field_name, inner)


def check_metadata(value: Any, field_name: str = "metadata") -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise bad_request(field_name, "must be a JSON object")
    check_json_strings(field_name, value)
    try:
        size = len(json.dumps(value, ensure_ascii=False).encode())
    except (TypeError, ValueError):
        raise bad_request(field_name, "must be plain JSON") from None
    if size > settings.CAIRN_METADATA_MAX_BYTES:
        raise bad_request(
            field_name, f"must be at most {settings.CAIRN_METADATA_MAX_BYTES} bytes as JSON"
        )
    return value


def check_aware(field_name: str, value: Any) -> datetime | None:
    """An aware datetime (naive ones are taken as the default time zone, UTC)."""
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise bad_request(field_name, "must be an ISO 8601 date-time")
    if timezone.is_naive(value):
        value = timezone.make_aware(value, timezone.get_default_timezone())
    return value


def prefix_fields(exc: ApplicationError, prefix: str) -> ApplicationError:
    """Re-point an error at a list element: ``content`` → ``items[3].content``."""
    exc.fields = {f"{prefix}.{name}": value for name, value in exc.fields.items()}
    exc.message = f"{prefix}: {exc.message}"
    exc.args = (exc.message,)
    return exc


RATIONALE_MAX_CHARS = 400


def rationale_clean(rationale) -> str:
    """An agent's reason for a proposal (a delta, a lesson): optional, ≤ 400 chars.

    Whitespace is collapsed; NUL characters are a 400 and credentials a 422
    (``credential_refused``), both naming ``rationale``.
    """
    if rationale is None:
        return ""
    if not isinstance(rationale, str):
        raise bad_request("rationale", "The rationale is a string.")
    check_json_strings("rationale", rationale)
    cleaned = " ".join(rationale.split())
    if len(cleaned) > RATIONALE_MAX_CHARS:
        raise bad_request("rationale", f"At most {RATIONALE_MAX_CHARS} characters.")
    refuse_secrets({"rationale": cleaned})
    return cleaned
