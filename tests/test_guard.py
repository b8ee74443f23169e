"""Hostile input is a 4xx in the error shape before any view runs (cairn/guard.py)."""

import json

import pytest
from django.test import Client

from cairn.guard import json_depth
from tests.factories.identity import WorkspaceFactory


def test_json_depth_ignores_brackets_inside_strings():
    assert json_depth(b'{"a": [1, {"b": "[[[[{{{{"}]}') == 3
    assert json_depth(b'"\\"[[["') == 0
    assert json_depth(b"[" * 1000 + b"]" * 1000) == 1000


@pytest.mark.django_db
def test_json_nested_a_thousand_deep_is_a_400_naming_the_body(api):
    body = '{"content": "x", "metadata": ' + '{"a": ' * 1000 + "1" + "}" * 1000 + "}"
    response = api.post("/api/v1/knowledge/", body, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "too_deep"
    assert "body" in response.json()["error"]["fields"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("url", "body", "field"),
    [
        ("/api/v1/knowledge/", {"content": "a fact", "category": "\ud800"}, "category"),
        ("/api/v1/evidence/", {"kind": "\udfff", "target_type": "lesson"}, "kind"),
        ("/api/v1/knowledge/", {"content": "nul \x00 inside"}, "content"),
        ("/api/v1/knowledge/batch/", {"items": [{"content": "\ud83d"}]}, "items[0].content"),
    ],
)
def test_lone_surrogates_and_nul_in_json_are_refused_by_field(api, url, body, field):
    raw = json.dumps(body)  # ensure_ascii: the surrogate travels as a \ud800 escape
    response = api.post(url, raw, content_type="application/json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid_characters"
    assert field in error["fields"]
    assert "\ud800" not in response.content.decode("utf-8", "replace")


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path",
    ["/api/v1/facts/%00/", "/api/v1/skills/%00/effective/", "/api/v1/facts/ns/a%00b/"],
)
def test_nul_in_a_path_segment_is_a_json_400(api, path):
    response = api.get(path)
    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {"path": ["The path contains a NUL character."]}


@pytest.mark.django_db
def test_nul_in_a_query_parameter_names_the_parameter(api):
    response = api.get("/api/v1/knowledge/", {"category": "fact\x00"})
    assert response.status_code == 400
    assert "category" in response.json()["error"]["fields"]


@pytest.mark.django_db
def test_nul_in_a_ui_query_is_an_html_400(member_client):
    client = member_client(workspace=WorkspaceFactory(), role="viewer")
    response = client.get("/knowledge/", {"q": "a\x00b"})
    assert response.status_code == 400
    assert b"could not be read" in response.content


@pytest.mark.django_db
def test_nul_in_a_form_post_is_refused(member_client):
    client = member_client(workspace=WorkspaceFactory(), role="admin")
    response = client.post("/agents/new/", {"name": "x\x00y"})
    assert response.status_code == 400


@pytest.mark.django_db
def test_a_ten_megabyte_body_is_a_json_413(api):
    body = json.dumps({"content": "x" * 10_000_000})
    response = api.post("/api/v1/knowledge/", body, content_type="application/json")
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"


@pytest.mark.django_db
def test_anonymous_admin_login_page_renders():
    response = Client().get("/admin/login/")
    assert response.status_code == 200
    assert b"password" in response.content.lower()


@pytest.mark.django_db
def test_admin_list_filter_shows_only_the_users_workspaces(member_client):
    from memory.models import Skill

    mine, other = WorkspaceFactory(name="Mine-ws"), WorkspaceFactory(name="Secret-other-ws")
    Skill.objects.create(workspace=mine, name="mine")
    Skill.objects.create(workspace=other, name="theirs")
    client = member_client(workspace=mine, role="admin")
    client.user.is_staff = True
    client.user.save()
    response = client.get("/admin/memory/skill/")
    assert response.status_code == 200
    assert b"Mine-ws" in response.content
    assert b"Secret-other-ws" not in response.content
