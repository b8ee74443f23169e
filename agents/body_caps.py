"""The largest body each API write can need, derived from its request schema.

Every write operation's request body is described by its serializer (through the
drf-spectacular schema): strings have a ``maxLength``, lists a ``maxItems``. The cap
is the size of the largest valid body, written as JSON with every character escaped
(``\\uXXXX``, six bytes), plus a little room for whitespace. A body whose
``Content-Length`` is over its operation's cap is refused (413) before it is read,
so a 2.4 MB body to ``/knowledge/`` costs nothing but the refusal.

A schema part without a bound (a free-form JSON object, a string without
``maxLength``) falls back to ``DATA_UPLOAD_MAX_MEMORY_SIZE``, which Django enforces for
every request anyway; ``body_caps()`` lists them, and ``docs/operating/limits.md``
says which they are. An operation may also declare a smaller bound for its whole body
(``DECLARED_CAPS``: the knowledge batch).
"""

from __future__ import annotations

import functools
import re
import threading

from django.conf import settings
from django.urls import Resolver404, resolve

#: A character as JSON may carry it: ``\\uXXXX``.
ESCAPED_CHAR_BYTES = 6
#: Room for a client's whitespace and key order around the largest valid body.
SLACK_BYTES = 4096
SCALAR_BYTES = 32
# A DELETE's schema has no body: its cap is the slack alone (a body is read, parsed
# and scanned by the write guard like any write's, so it needs one).
WRITE_METHODS = ("post", "put", "patch", "delete")
_MAX_DEPTH = 12


def _size(schema: dict, components: dict, depth: int = 0) -> int | None:
    """Bytes of the largest JSON value ``schema`` admits, or None when unbounded."""
    if depth > _MAX_DEPTH:
        return None
    if "x-max-bytes" in schema:  # a JSON value bounded by its size (metadata)
        return schema["x-max-bytes"] * ESCAPED_CHAR_BYTES
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return _size(components.get(name, {}), components, depth + 1)
    for key in ("allOf", "oneOf", "anyOf"):
        if key in schema:
            parts = [_size(part, components, depth + 1) for part in schema[key]]
            if any(p is None for p in parts):
                return None
            return sum(parts) if key == "allOf" else max(parts, default=0)
    kind = schema.get("type")
    if kind == "string":
        if "enum" in schema:
            return (
                max((len(str(v)) for v in schema["enum"] if v is not None), default=0)
                * (ESCAPED_CHAR_BYTES)
                + 2
            )
        if "maxLength" in schema:
            return schema["maxLength"] * ESCAPED_CHAR_BYTES + 2
        if schema.get("format") in ("date-time", "date", "uuid", "decimal"):
            return 64
        return None
    if kind in ("integer", "number", "boolean"):
        return SCALAR_BYTES
    if kind == "array":
        item = _size(schema.get("items", {}), components, depth + 1)
        if item is None or "maxItems" not in schema:
            return None
        return schema["maxItems"] * (item + 1) + 2
    if kind == "object" or "properties" in schema:
        if schema.get("additionalProperties") not in (None, False):
            return None
        properties = schema.get("properties")
        if not properties:
            return None  # free-form JSON
        total = 2
        for name, part in properties.items():
            value = _size(part, components, depth + 1)
            if value is None:
                return None
            total += len(name) * ESCAPED_CHAR_BYTES + 4 + value
        return total
    return None


# drf-spectacular's schema generation is not thread-safe (its extensions load their
# target classes lazily): two server threads building it at once answered a 500.
_BUILDING = threading.Lock()


def body_caps() -> dict[tuple[str, str], int | None]:
    """``{(url name, METHOD): cap in bytes, or None when the schema has no bound}`` for
    every write operation of the agent API; built once, by one thread."""
    with _BUILDING:
        return _body_caps()


@functools.cache
def _body_caps() -> dict[tuple[str, str], int | None]:
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    components = schema.get("components", {}).get("schemas", {})
    caps: dict[tuple[str, str], int | None] = {}
    for path, operations in schema["paths"].items():
        url = re.sub(r"\{[^}]+\}", "1", path)
        try:
            match = resolve(url)
        except Resolver404:
            continue
        if match.namespace != "agents":
            continue
        for method, operation in operations.items():
            if method not in WRITE_METHODS:
                continue
            content = operation.get("requestBody", {}).get("content", {})
            body = content.get("application/json", {}).get("schema")
            size = _size(body, components) if body else 0
            caps[(match.url_name, method.upper())] = None if size is None else size + SLACK_BYTES
    return caps


#: Operations whose whole body has a declared bound below what its fields could add up
#: to: ``{(url name, METHOD): (setting, what to do instead)}``. A batch of 100
#: knowledge items of 2,000 characters is about 250 KB of UTF-8 JSON; its fields'
#: worst case (each item's metadata and vector at their limits, every character
#: escaped) is eight megabytes, which no agent sends and an attacker would.
DECLARED_CAPS = {
    ("knowledge-batch", "POST"): (
        "CAIRN_REMEMBER_BATCH_MAX_BYTES",
        "Send fewer items per batch (all items of a batch are stored or none).",
    ),
}


def operation_cap(url_name: str, method: str) -> int:
    """The cap on a body sent to this operation: the least of its fields' cap, its
    declared cap and Django's own limit."""
    caps = [settings.DATA_UPLOAD_MAX_MEMORY_SIZE]
    if (derived := body_caps().get((url_name, method))) is not None:
        caps.append(derived)
    if (url_name, method) in DECLARED_CAPS:
        caps.append(getattr(settings, DECLARED_CAPS[(url_name, method)][0]))
    return min(caps)


def cap_advice(url_name: str, method: str) -> str:
    """What a client refused for its body's size can do instead."""
    declared = DECLARED_CAPS.get((url_name, method))
    return declared[1] if declared else "That is the most this operation's fields can hold."
