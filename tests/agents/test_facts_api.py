"""PUT/GET /api/v1/facts/{namespace}/{key}/ and GET /api/v1/facts/{namespace}/."""

import pytest

from memory.models import LearnedFact
from tests.factories.skills import fact_body

pytestmark = pytest.mark.django_db


def test_facts_supersede_and_report_consumers(ready):
    url = "/api/v1/facts/priority_senders/alice@example.com/"
    created = ready.put(url, fact_body(ready, key="alice@example.com", value=True), format="json")
    assert created.status_code == 201
    assert created.json()["provenance_source"] == "user_instruction"
    assert (
        ready.put(
            url, fact_body(ready, key="alice@example.com", value=True), format="json"
        ).status_code
        == 200
    )
    assert LearnedFact.objects.count() == 1
    updated = ready.put(
        url, fact_body(ready, key="alice@example.com", value={"rank": 1}), format="json"
    )
    assert updated.status_code == 200
    assert ready.get(url).json()["value"] == {"rank": 1}
    rows = list(LearnedFact.objects.order_by("id"))
    assert len(rows) == 2
    assert rows[0].superseded_by_id == rows[1].pk
    listing = ready.get("/api/v1/facts/priority_senders/").json()
    assert listing["inert"] is False
    assert listing["consumers"] == [{"agent": ready.agent.name, "tool": "triage_inbox"}]
    assert [f["key"] for f in listing["facts"]] == ["alice@example.com"]


def test_a_fact_no_tool_reads_is_inert(ready):
    response = ready.put(
        "/api/v1/facts/followup_hours/cfo/", fact_body(ready, key="cfo", value=48), format="json"
    )
    assert response.json()["inert"] is True
    assert response.json()["consumers"] == []
    assert ready.get("/api/v1/facts/followup_hours/").json()["inert"] is True


def test_facts_refuse_credentials_bad_names_and_untrusted_sources(ready):
    secret = ready.put(
        "/api/v1/facts/creds/github/",
        fact_body(ready, value="ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
        format="json",
    )
    assert secret.status_code == 422
    assert secret.json()["error"]["code"] == "credential_refused"
    bad_ns = ready.put("/api/v1/facts/Bad%20NS/k/", fact_body(ready, value=1), format="json")
    assert bad_ns.status_code == 400
    assert "namespace" in bad_ns.json()["error"]["fields"]
    no_value = ready.put("/api/v1/facts/ns/k/", {}, format="json")
    assert no_value.status_code == 400
    observed = ready.put(
        "/api/v1/facts/ns/k/",
        {"value": 1, "provenance": {"source": "observed_content"}},
        format="json",
    )
    assert observed.status_code == 422
    assert observed.json()["error"]["code"] == "untrusted_fact"
    big = ready.put("/api/v1/facts/ns/k/", fact_body(ready, value="x" * 5000), format="json")
    assert big.status_code == 422
    assert LearnedFact.objects.count() == 0
    assert ready.get("/api/v1/facts/ns/k/").status_code == 404
