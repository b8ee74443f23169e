"""Schema-driven fuzzing of the whole agent API (SPEC section 10: zero 5xx).

Schemathesis reads the served OpenAPI schema and generates valid and invalid
requests for every operation in it, so endpoints added by other areas are fuzzed
as soon as they are in the schema. Requests go in-process to the WSGI app with a
real agent token. Bounded: a fixed number of examples per operation, derandomised
so a run is reproducible; raise FUZZ_EXAMPLES locally for a longer hunt.
"""

from __future__ import annotations

import json
import os
import re

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from tests.factories.knowledge import KnowledgeFactory

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "30"))

# Loaded when the module is collected: generating the schema needs no database.
# (schemathesis.pytest.from_fixture would defer it, but its lazy mode writes a private
# pytest node attribute that pytest 9 no longer has.)
schema = schemathesis.openapi.from_wsgi("/api/v1/schema/", get_wsgi_application())


@pytest.fixture
def in_test_transaction(db):
    """Keep the test's transaction open across WSGI requests.

    Django closes "obsolete" connections when a request ends; inside a test
    transaction that would drop it. Django's own test client disconnects these
    handlers for the same reason.
    """
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.fixture
def fuzz_auth(api, in_test_transaction, celery_worker_process):
    """A real agent token, and a few real items so some ids resolve (success paths too).

    A real Celery worker runs, so /healthz is healthy: its 503 means "a part is down",
    and the contract is zero 5xx from a working deployment.
    """
    items = [
        KnowledgeFactory(workspace=api.agent.workspace, content=f"Fuzz seed fact {i}")
        for i in range(3)
    ]
    return {"Authorization": f"Bearer {api.raw_token}"}, [i.pk for i in items]


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_no_operation_answers_5xx(case, fuzz_auth):
    headers, item_ids = fuzz_auth
    # Half the generated ids point at real items, so PATCH/DELETE/GET succeed sometimes.
    for name, value in list((case.path_parameters or {}).items()):
        if name.endswith("id") and isinstance(value, int) and value % 2 == 0:
            case.path_parameters[name] = item_ids[value % len(item_ids)]
    response = case.call(headers=headers)
    assert response.status_code < 500, (
        f"{case.method} {case.formatted_path} -> {response.status_code}\n"
        f"query={case.query!r}\nbody={case.body!r}\n{response.text[:2000]}"
    )
    case.validate_response(response, checks=[not_a_server_error])


# --- hostile input the generators rarely produce -------------------------------------
# Every operation in the schema, with a NUL in each path parameter, a lone surrogate or
# a NUL in every body property, and a body nested 1,000 deep: 4xx in the error shape.

HOSTILE_VALUES = ["\ud800", "\x00", "ok\udfffok"]


def _operations():
    raw = schema.raw_schema
    for path, item in raw["paths"].items():
        for method, operation in item.items():
            if method in {"get", "post", "put", "patch", "delete"}:
                yield path, method, operation


def _body_properties(operation) -> list[str]:
    content = (operation.get("requestBody") or {}).get("content", {})
    ref = content.get("application/json", {}).get("schema", {}).get("$ref", "")
    if not ref:
        return []
    component = schema.raw_schema["components"]["schemas"][ref.rsplit("/", 1)[-1]]
    return sorted(component.get("properties", {}))


OPERATIONS = sorted(_operations(), key=lambda op: (op[0], op[1]))


@pytest.mark.django_db
@pytest.mark.parametrize(("path", "method", "operation"), OPERATIONS, ids=lambda v: str(v)[:40])
def test_hostile_input_is_a_4xx_in_the_error_shape(api, path, method, operation):
    api.raise_request_exception = False
    url = "/api/v1/" + path.removeprefix("/api/v1/")
    responses = []
    if "{" in url:
        for name in re.findall(r"\{(\w+)\}", url):
            responses.append(
                ("nul-path", api.generic(method.upper(), url.replace(f"{{{name}}}", "a%00")))
            )
    concrete = re.sub(r"\{\w+\}", "1", url)
    responses.append(("nul-query", api.generic(method.upper(), concrete + "?q=%00&format=%00")))
    if method in {"post", "put", "patch"}:
        deep = '{"a": ' * 1000 + "1" + "}" * 1000
        responses.append(("deep", api.generic(method.upper(), concrete, deep, "application/json")))
        for value in HOSTILE_VALUES:
            body = {name: value for name in _body_properties(operation)} or {"x": value}
            raw = json.dumps(body)
            responses.append(
                (repr(value), api.generic(method.upper(), concrete, raw, "application/json"))
            )
    for label, response in responses:
        assert 400 <= response.status_code < 500, (label, response.status_code, response.content)
        assert set(response.json()["error"]) == {"code", "message", "fields"}, label
