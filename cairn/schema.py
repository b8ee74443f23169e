"""OpenAPI generation and post-processing shared by every endpoint."""

from drf_spectacular.openapi import AutoSchema
from rest_framework import serializers


class BoundedAutoSchema(AutoSchema):
    """drf-spectacular's, plus the bounds of a nested list of serializers
    (``Serializer(many=True, max_length=N)``): DRF enforces them, drf-spectacular does
    not publish them, and each write's body cap (agents/body_caps.py) is derived from
    what the schema says. Without them a batch's cap fell back to the general limit."""

    def _map_serializer_field(self, field, direction, bypass_extensions=False):
        schema = super()._map_serializer_field(field, direction, bypass_extensions)
        if isinstance(field, serializers.ListSerializer) and schema.get("type") == "array":
            if field.max_length is not None:
                schema["maxItems"] = field.max_length
            if field.min_length is not None:
                schema["minItems"] = field.min_length
            elif not field.allow_empty:
                schema["minItems"] = 1
        return schema


IDEMPOTENCY_HEADER = {
    "in": "header",
    "name": "Idempotency-Key",
    "required": False,
    "schema": {"type": "string", "minLength": 1, "maxLength": 200},
    "description": "Retry-safe writes: the same key replays the first successful response "
    "(header `Idempotent-Replayed: true`) and applies nothing twice. A key reused for a "
    "different request is refused with 422.",
}


def add_idempotency_header(result, generator, request, public):
    for path, operations in result.get("paths", {}).items():
        if not path.startswith("/api/v1/"):
            continue
        for method, operation in operations.items():
            if method.upper() in {"POST", "PUT", "PATCH", "DELETE"}:
                params = operation.setdefault("parameters", [])
                if not any(p.get("name") == "Idempotency-Key" for p in params):
                    params.append(dict(IDEMPOTENCY_HEADER))
    return result


# Writes that an agent or harness token makes (admin endpoints and reads sent as POST
# are not): each takes `"incognito": true` and then answers 202, recording nothing.
NOT_INCOGNITO = ("/api/v1/recall/", "/api/v1/exports/", "/api/v1/erasures/")
INCOGNITO_PROPERTY = {
    "type": "boolean",
    "default": False,
    "description": "Nothing is recorded: no row, no audit entry, no idempotency replay; the "
    'answer is 202 {"recorded": false} (checked before anything else).',
}
INCOGNITO_RESPONSE = {
    "description": 'Incognito: nothing was recorded ({"recorded": false}).',
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "properties": {"recorded": {"type": "boolean"}},
                "required": ["recorded"],
            }
        }
    },
}


def _component(result, schema):
    ref = schema.get("$ref", "")
    if ref.startswith("#/components/schemas/"):
        return result.get("components", {}).get("schemas", {}).get(ref.rsplit("/", 1)[1])
    return schema


def add_incognito(result, generator, request, public):
    for path, operations in result.get("paths", {}).items():
        if not path.startswith("/api/v1/") or path.startswith(NOT_INCOGNITO):
            continue
        for method, operation in operations.items():
            if method.upper() not in {"POST", "PUT", "PATCH"}:
                continue
            content = operation.get("requestBody", {}).get("content", {})
            schema = content.get("application/json", {}).get("schema")
            target = _component(result, schema) if isinstance(schema, dict) else None
            if not target or target.get("type", "object") != "object":
                continue
            target.setdefault("properties", {}).setdefault("incognito", dict(INCOGNITO_PROPERTY))
            responses = operation.setdefault("responses", {})
            responses.setdefault("202", INCOGNITO_RESPONSE)
    return result
