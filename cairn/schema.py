"""OpenAPI post-processing shared by every endpoint."""

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
