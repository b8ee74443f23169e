"""POST /api/v1/erasures/ and POST /api/v1/erasures/preview/ (admin token)."""

import pytest

from memory.models import ErasureReceipt, Knowledge
from tests.factories.identity import WorkspaceFactory
from tests.factories.privacy import bundle, new_marker, ready_agent, sql_sweep, workspace_ready


@pytest.mark.django_db
@pytest.mark.parametrize(
    "body", [{"selector": {"context": "c"}}, {"selector": {"context": "c"}, "confirm": "nope"}]
)
def test_it_wants_the_workspace_name_typed_to_erase(admin, body):
    response = admin.post("/api/v1/erasures/", body, format="json")
    assert response.status_code == 422
    assert "confirm" in response.json()["error"]["fields"]
    assert not ErasureReceipt.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"confirm": "w"}, 400, "selector"),
        ({"selector": {}, "confirm": "w"}, 400, "selector"),
        ({"selector": {"text": "ab"}, "confirm": "w"}, 400, "selector.text"),
        ({"selector": {"skill": "triage"}, "confirm": "w"}, 400, "selector.skill"),
        ({"selector": {"agent": "nobody"}, "confirm": "w"}, 422, "selector.agent"),
        ({"selector": {"context": "a", "session": "b"}, "confirm": "w"}, 400, "selector"),
        ({"selector": "everything", "confirm": "w"}, 400, "selector.non_field_errors"),
    ],
)
def test_it_names_the_bad_field(admin, body, status, field):
    response = admin.post("/api/v1/erasures/", body, format="json")
    assert response.status_code == status, response.json()
    assert field in response.json()["error"]["fields"]


@pytest.mark.django_db
def test_it_previews_counts_per_table_without_deleting(admin, workspace):
    workspace_ready(workspace)
    agent = ready_agent(workspace, "gaia/chat")
    gone = bundle(agent=agent, name="gone")
    response = admin.post(
        "/api/v1/erasures/preview/", {"selector": {"session": gone.session}}, format="json"
    )
    assert response.status_code == 200
    body = response.json()
    assert body["counts"]["memory.Knowledge"] == 2  # the item and the session's error item
    assert body["counts"]["memory.SkillDelta"] == 1
    assert body["total"] == sum(body["counts"].values())
    assert Knowledge.objects.filter(pk__in=gone.knowledge).exists()


@pytest.mark.django_db(transaction=True)
def test_it_erases_in_a_worker_and_answers_with_a_receipt(
    celery_worker_process, make_api, wait_job
):
    workspace = WorkspaceFactory()
    workspace_ready(workspace)
    marker = new_marker()
    agent = ready_agent(workspace, "gaia/chat")
    bundle(agent=agent, name="gone", marker=marker, marked=frozenset({"knowledge", "delta"}))
    kept = bundle(agent=agent, name="kept")
    admin = make_api(workspace=workspace, scope="admin", name="ops")
    response = admin.post(
        "/api/v1/erasures/",
        {"selector": {"text": marker}, "confirm": workspace.name, "reason": "ticket 7"},
        format="json",
    )
    assert response.status_code == 202
    job = wait_job(admin, response.json()["job_id"])
    assert job["kind"] == "erasure" and job["status"] == "succeeded"
    receipt = job["receipt"]
    assert receipt["status"] == "completed"
    assert receipt["counts"]["memory.Knowledge"] == 1
    assert receipt["counts"]["memory.SkillDelta"] == 1
    assert receipt["selector"] == {
        "kind": "text",
        "sha256": receipt["selector"]["sha256"],
        "length": len(marker),
    }
    assert receipt["requested_by"] == "agent:ops"
    assert len(receipt["digest"]) == 64
    assert sql_sweep(marker) == {}
    assert Knowledge.objects.filter(pk__in=kept.knowledge).exists()
