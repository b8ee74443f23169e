"""Schema-driven fuzzing of the admin endpoints with an ADMIN token (zero 5xx).

The shared fuzz test (test_fuzz_api.py) uses an agent token, which these
endpoints refuse with 403 before reading the body; this one gets past the gate.
"""

from __future__ import annotations

import os

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from tests.agents.test_fuzz_api import in_test_transaction  # noqa: F401 (fixture)

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "30"))

schema = schemathesis.openapi.from_wsgi("/api/v1/schema/", get_wsgi_application()).include(
    tag="admin"
)


@pytest.fixture
def admin_auth(make_api, in_test_transaction):  # noqa: F811
    from memory.models import JobRun

    client = make_api(scope="admin", name="ops")
    workspace = client.agent.workspace
    runs = [JobRun.objects.create(kind="export", workspace=workspace) for _ in range(2)]
    token = client._credentials["HTTP_AUTHORIZATION"]
    return {"Authorization": token}, [r.pk for r in runs]


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_no_admin_operation_answers_5xx(case, admin_auth):
    headers, run_ids = admin_auth
    for name, value in list((case.path_parameters or {}).items()):
        if name.endswith("id") and isinstance(value, int) and value % 2 == 0:
            case.path_parameters[name] = run_ids[value % len(run_ids)]
    response = case.call(headers=headers)
    assert response.status_code < 500, (
        f"{case.method} {case.formatted_path} -> {response.status_code}\n"
        f"body={case.body!r}\n{response.text[:2000]}"
    )
    case.validate_response(response, checks=[not_a_server_error])
