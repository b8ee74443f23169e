import pytest
import yaml

pytestmark = pytest.mark.django_db


def test_schema_is_served_and_documents_bearer_auth(client):
    response = client.get("/api/v1/schema/")
    assert response.status_code == 200
    schema = yaml.safe_load(response.content)
    assert schema["openapi"].startswith("3.")
    assert schema["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    assert "/api/v1/agents/me/" in schema["paths"]


def test_schema_generates_without_a_warning(tmp_path):
    """drf-spectacular's warnings (enum name collisions, unresolvable types) are schema
    bugs a client generator trips on; the schema must build with none."""
    from django.core.management import call_command

    call_command(
        "spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml")
    )
    assert "HitTurnEnum" in (tmp_path / "schema.yaml").read_text()


def test_docs_are_served_without_a_cdn(client):
    response = client.get("/api/v1/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "swagger" in html.lower()
    assert "cdn" not in html.lower() and "jsdelivr" not in html.lower()


def test_unknown_api_path_answers_json_404(client):
    response = client.get("/api/v1/no-such-thing/")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_malformed_json_is_a_400_naming_the_problem(api):
    response = api.generic(
        "PUT", "/api/v1/agents/me/", "{not json", content_type="application/json"
    )
    assert response.status_code in {400, 405}
    assert "error" in response.json()
