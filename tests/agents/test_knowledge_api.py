from datetime import timedelta

import pytest
from django.utils import timezone

from memory.models import Knowledge
from tests.factories.knowledge import KnowledgeFactory

pytestmark = pytest.mark.django_db

URL = "/api/v1/knowledge/"
GITHUB_TOKEN = "ghp_" + "Ab12" * 9


def _remember(api, **body):
    return api.post(URL, {"content": "The CI runs on GitHub Actions", **body}, format="json")


def _error(response):
    body = response.json()
    assert set(body) == {"error"}
    return body["error"]


# --------------------------------------------------------------------------- POST /knowledge/


def test_it_remembers_and_answers_201_with_the_item(api):
    response = _remember(api, category="fact", context="work", entity="project:cairn")
    assert response.status_code == 201
    body = response.json()
    assert body["content"] == "The CI runs on GitHub Actions"
    assert (body["category"], body["context"], body["entity"]) == ("fact", "work", "project:cairn")
    assert body["deduplicated_into"] is None
    assert body["embedding_model"] == "all-MiniLM-L6-v2-onnx-int8"
    assert "embedding" not in body
    assert Knowledge.objects.get(pk=body["id"]).workspace == api.agent.workspace


def test_a_repeat_answers_200_with_deduplicated_into(api):
    first = _remember(api).json()
    response = _remember(api, content="The CI runs on GitHub Actions runners")
    assert response.status_code == 200
    assert response.json()["deduplicated_into"] == first["id"]
    assert response.json()["id"] == first["id"]
    assert Knowledge.objects.count() == 1


def test_content_over_2000_characters_is_a_400_naming_content(api):
    response = _remember(api, content="a" * 2001)
    assert response.status_code == 400
    assert list(_error(response)["fields"]) == ["content"]
    assert not Knowledge.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"content": ""}, "content"),
        ({"content": "   "}, "content"),
        ({"category": "gossip"}, "category"),
        ({"due_at": "not a date"}, "due_at"),
        ({"metadata": ["not", "an", "object"]}, "metadata"),
        ({"embedding": [0.1, 0.2]}, "embedding"),
        ({"confidence": 0.99}, "confidence"),
        ({"source": "user"}, "source"),
        ({"category": "reminder"}, "due_at"),
        ({"context": "x" * 201}, "context"),
    ],
)
def test_each_validation_error_is_a_400_naming_the_field(api, body, field):
    response = _remember(api, **body)
    assert response.status_code == 400, response.json()
    assert field in _error(response)["fields"]
    assert not Knowledge.objects.exists()


def test_a_privileged_category_is_a_403_that_says_so(api):
    response = _remember(api, category="permission")
    assert response.status_code == 403
    error = _error(response)
    assert error["code"] == "privileged_category"
    assert "403" in error["message"] and error["fields"] == {
        "category": ["writable only by people"]
    }


@pytest.mark.parametrize(
    "content",
    [
        "my token is " + GITHUB_TOKEN,
        "AWS key " + "AKIA" + "ABCDEFGHIJKLMNOP",
        "AWS key " + "AKIA" + " IOSF ODNN 7EXA MPLE",
        "login with https://bob:" + "pa55word" + "@intranet.example.com",
        "-----BEGIN " + "EC PRIVATE KEY-----",
    ],
)
def test_credentials_are_refused_with_422(api, content):
    response = _remember(api, content=content)
    assert response.status_code == 422
    error = _error(response)
    assert error["code"] == "credential_refused"
    assert list(error["fields"]) == ["content"]
    assert GITHUB_TOKEN not in response.content.decode()
    assert not Knowledge.objects.exists()


def test_a_reminder_is_stored_with_its_due_time(api):
    due = (timezone.now() + timedelta(days=1)).replace(microsecond=0)
    response = _remember(
        api, content="Renew the TLS certificate", category="reminder", due_at=due.isoformat()
    )
    assert response.status_code == 201
    assert Knowledge.objects.get().due_at == due


def test_it_needs_a_token(client):
    response = client.post(URL, {"content": "x"}, content_type="application/json")
    assert response.status_code == 401
    assert _error(response)["code"] == "not_authenticated"


# --------------------------------------------------------------------------- batch


def test_a_batch_stores_all_items(api):
    response = api.post(
        URL + "batch/",
        {"items": [{"content": "Fact one about builds"}, {"content": "Another, on deploys"}]},
        format="json",
    )
    assert response.status_code == 201
    assert response.json()["created"] == 2
    assert Knowledge.objects.count() == 2


def test_a_batch_with_one_bad_item_stores_nothing_and_names_it(api):
    response = api.post(
        URL + "batch/",
        {"items": [{"content": "fine"}, {"content": "b" * 2001}]},
        format="json",
    )
    assert response.status_code == 400
    assert list(_error(response)["fields"]) == ["items[1].content"]
    response = api.post(
        URL + "batch/",
        {"items": [{"content": "fine"}, {"content": "token " + GITHUB_TOKEN}]},
        format="json",
    )
    assert response.status_code == 422
    assert list(_error(response)["fields"]) == ["items[1].content"]
    assert not Knowledge.objects.exists()


def _batch(n: int, tag: str) -> dict:
    return {
        "items": [{"content": f"Hana prefers squash merges on {tag} project {i}"} for i in range(n)]
    }


def test_a_retried_batch_is_answered_from_its_key_and_stores_nothing_twice(api):
    body = _batch(100, "the retried")
    first = api.post(URL + "batch/", body, format="json", HTTP_IDEMPOTENCY_KEY="batch-1")
    assert first.status_code == 201 and first.json()["created"] == 100
    again = api.post(URL + "batch/", body, format="json", HTTP_IDEMPOTENCY_KEY="batch-1")
    assert again.status_code == 201
    assert again["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    assert Knowledge.objects.count() == 100
    ids = [r["id"] for r in first.json()["results"]]
    assert sorted(Knowledge.objects.values_list("id", flat=True)) == sorted(ids)


def test_a_batch_that_failed_midway_stores_everything_once_on_retry(api):
    """The database refuses the 61st row of the batch's INSERT: nothing of the batch
    is kept and the key is not used up, so the retry stores all 100 items, once."""
    from django.db import connection

    body = _batch(100, "the failing")
    body["items"][60]["content"] += " (the disk fills here)"
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE FUNCTION test_refuse_row() RETURNS trigger LANGUAGE plpgsql AS $$ "
            "BEGIN IF NEW.content LIKE '%(the disk fills here)' THEN "
            "RAISE EXCEPTION 'could not extend file'; END IF; RETURN NEW; END $$"
        )
        cursor.execute(
            "CREATE TRIGGER test_refuse_row BEFORE INSERT ON memory_knowledge "
            "FOR EACH ROW EXECUTE FUNCTION test_refuse_row()"
        )
    api.raise_request_exception = False
    failed = api.post(URL + "batch/", body, format="json", HTTP_IDEMPOTENCY_KEY="batch-2")
    assert failed.status_code == 500
    assert not Knowledge.objects.exists()
    with connection.cursor() as cursor:
        cursor.execute("DROP TRIGGER test_refuse_row ON memory_knowledge")
    retried = api.post(URL + "batch/", body, format="json", HTTP_IDEMPOTENCY_KEY="batch-2")
    assert retried.status_code == 201 and "Idempotent-Replayed" not in retried
    assert retried.json()["created"] == 100
    stored = list(Knowledge.objects.values_list("content", flat=True))
    assert sorted(stored) == sorted(item["content"] for item in body["items"])
    replayed = api.post(URL + "batch/", body, format="json", HTTP_IDEMPOTENCY_KEY="batch-2")
    assert replayed["Idempotent-Replayed"] == "true"
    assert Knowledge.objects.count() == 100


# --------------------------------------------------------------------------- GET list


def test_the_list_is_paginated_newest_first(api):
    items = [KnowledgeFactory(workspace=api.agent.workspace, content=f"item {i}") for i in range(5)]
    first = api.get(URL, {"limit": 2}).json()
    assert (first["count"], first["limit"], first["offset"], first["next_offset"]) == (5, 2, 0, 2)
    assert [r["id"] for r in first["results"]] == [items[4].pk, items[3].pk]
    last = api.get(URL, {"limit": 2, "offset": 4}).json()
    assert [r["id"] for r in last["results"]] == [items[0].pk]
    assert last["next_offset"] is None


def test_the_list_filters(api):
    ws = api.agent.workspace
    note = KnowledgeFactory(workspace=ws, category="note", context="work")
    KnowledgeFactory(workspace=ws, category="fact", context="work")
    archived = KnowledgeFactory(workspace=ws, status="archived")
    KnowledgeFactory(workspace=ws, sensitive=True)
    assert [r["id"] for r in api.get(URL, {"category": "note"}).json()["results"]] == [note.pk]
    assert api.get(URL, {"context": "work"}).json()["count"] == 2
    assert [r["id"] for r in api.get(URL, {"status": "archived"}).json()["results"]] == [
        archived.pk
    ]
    assert api.get(URL).json()["count"] == 2  # active, not sensitive
    assert api.get(URL, {"include_sensitive": "true"}).json()["count"] == 3


@pytest.mark.parametrize(
    "params", [{"limit": 0}, {"limit": 201}, {"offset": -1}, {"status": "gone"}]
)
def test_bad_list_parameters_are_a_400(api, params):
    response = api.get(URL, params)
    assert response.status_code == 400
    assert list(_error(response)["fields"]) == list(params)


def test_the_list_runs_a_fixed_number_of_queries(api, django_assert_num_queries):
    for i in range(10):
        KnowledgeFactory(workspace=api.agent.workspace, content=f"row {i}")
    api.get(URL)  # the token's first use also records last_used_at
    # token look-up, the page, the count: the same for 10 rows as for 1
    with django_assert_num_queries(3):
        assert api.get(URL).status_code == 200


# --------------------------------------------------------------------------- GET, PATCH, DELETE one


def test_it_reads_one_item(api):
    item = KnowledgeFactory(workspace=api.agent.workspace)
    response = api.get(f"{URL}{item.pk}/")
    assert response.status_code == 200
    assert response.json()["content"] == item.content


def test_a_missing_item_is_a_404(api):
    assert api.get(f"{URL}999999/").status_code == 404
    assert api.get(f"{URL}99999999999999999999999/").status_code == 404


def test_patch_changes_fields_in_place(api):
    item = KnowledgeFactory(workspace=api.agent.workspace)
    response = api.patch(f"{URL}{item.pk}/", {"domain": "ci", "sensitive": True}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert (body["id"], body["domain"], body["sensitive"], body["supersedes"]) == (
        item.pk,
        "ci",
        True,
        None,
    )


def test_patch_with_new_content_answers_with_the_new_version(api):
    item = KnowledgeFactory(workspace=api.agent.workspace, content="Standup at ten")
    response = api.patch(f"{URL}{item.pk}/", {"content": "Standup at eleven"}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert body["supersedes"] == item.pk and body["id"] != item.pk
    assert body["content"] == "Standup at eleven"
    old = api.get(f"{URL}{item.pk}/").json()
    assert old["superseded_by"] == body["id"] and old["content"] == "Standup at ten"
    again = api.patch(f"{URL}{item.pk}/", {"content": "Standup at noon"}, format="json")
    assert again.status_code == 409
    assert _error(again)["code"] == "superseded"


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"content": "c" * 2001}, 400, "content"),
        ({"content": "use " + GITHUB_TOKEN}, 422, "content"),
        ({"category": "system"}, 403, "category"),
        ({"confidence": 1.0}, 400, "confidence"),
        ({"pinned": True}, 400, "pinned"),
        ({"due_at": "tomorrow"}, 400, "due_at"),
    ],
)
def test_patch_validation_errors_name_the_field(api, body, status, field):
    item = KnowledgeFactory(workspace=api.agent.workspace, content="unchanged")
    response = api.patch(f"{URL}{item.pk}/", body, format="json")
    assert response.status_code == status
    assert field in _error(response)["fields"]
    item.refresh_from_db()
    assert (item.content, item.category, item.confidence, item.pinned) == (
        "unchanged",
        "fact",
        0.5,
        False,
    )


def test_an_agent_cannot_patch_a_sealed_item(api):
    item = KnowledgeFactory(workspace=api.agent.workspace, sealed=True)
    response = api.patch(f"{URL}{item.pk}/", {"domain": "x"}, format="json")
    assert response.status_code == 403
    assert _error(response)["code"] == "protected"


def test_delete_by_an_agent_archives_and_says_so(api):
    item = KnowledgeFactory(workspace=api.agent.workspace, content="VPN is WireGuard")
    response = api.delete(f"{URL}{item.pk}/")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "archived" and "restorable" in body["message"]
    item.refresh_from_db()
    assert item.status == "archived"
    recall = api.post("/api/v1/recall/", {"query": "VPN"}, format="json").json()
    assert item.pk not in [r["id"] for r in recall["results"]]
    assert api.delete(f"{URL}{item.pk}/").status_code == 200  # idempotent
    assert api.get(f"{URL}{item.pk}/").json()["status"] == "archived"


# --------------------------------------------------------------------------- isolation


def test_another_workspace_can_neither_read_nor_change_nor_detect_items(api, make_api):
    item = KnowledgeFactory(workspace=api.agent.workspace, content="Workspace A's secret plan")
    other = make_api()
    missing = other.get(f"{URL}999999/")
    for response in (
        other.get(f"{URL}{item.pk}/"),
        other.patch(f"{URL}{item.pk}/", {"domain": "stolen"}, format="json"),
        other.patch(f"{URL}{item.pk}/", {"content": "overwritten"}, format="json"),
        other.delete(f"{URL}{item.pk}/"),
    ):
        assert response.status_code == 404
        assert response.json() == {
            "error": {**missing.json()["error"], "message": f"No knowledge item {item.pk}."}
        }
    assert other.get(URL).json()["count"] == 0
    recall = other.post("/api/v1/recall/", {"query": "secret plan"}, format="json").json()
    assert recall["results"] == []
    item.refresh_from_db()
    assert (item.content, item.domain, item.status) == ("Workspace A's secret plan", "", "active")


def test_remember_accepts_observed_at_and_recall_filters_by_it(api):
    old = "2023-05-08T13:56:00+00:00"
    body = api.post(
        "/api/v1/knowledge/",
        {"content": "Caroline went to the LGBTQ support group", "observed_at": old},
        format="json",
    ).json()
    assert body["observed_at"].startswith("2023-05-08T13:56")
    api.post("/api/v1/knowledge/", {"content": "Caroline went to the pottery class"}, format="json")
    batch = api.post(
        "/api/v1/knowledge/batch/",
        {"items": [{"content": "Melanie painted a sunrise", "observed_at": old}]},
        format="json",
    )
    assert batch.status_code == 201, batch.content
    in_may = api.post(
        "/api/v1/recall/",
        {
            "query": "what did Caroline and Melanie do",
            "time_from": "2023-05-01T00:00:00Z",
            "time_to": "2023-05-31T23:59:59Z",
            "top_k": 10,
        },
        format="json",
    ).json()["results"]
    assert {r["content"] for r in in_may} == {
        "Caroline went to the LGBTQ support group",
        "Melanie painted a sunrise",
    }
    assert all(r["observed_at"].startswith("2023-05-08") for r in in_may)


def test_remember_refuses_observed_at_in_the_future(api):
    response = api.post(
        "/api/v1/knowledge/",
        {"content": "a note from tomorrow", "observed_at": "2999-01-01T00:00:00Z"},
        format="json",
    )
    assert response.status_code == 400
    assert "observed_at" in response.json()["error"]["fields"]
    assert not api.get("/api/v1/knowledge/").json()["results"]
