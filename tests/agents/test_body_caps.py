"""A body cap for every API write, derived from its request schema, charged before the
body is read (issue 56, item 4). The operations come from the API schema."""

from __future__ import annotations

import pytest
from django.conf import settings

from agents.body_caps import body_caps, operation_cap

pytestmark = pytest.mark.django_db

CAPS = body_caps()


def _url(name: str) -> str:
    import re

    from django.urls import resolve
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    for path in schema["paths"]:
        url = re.sub(r"\{[^}]+\}", "1", path)
        if resolve(url).url_name == name:
            return url
    raise AssertionError(name)


def test_every_write_operation_has_a_cap():
    assert CAPS, "no write operation found in the schema"
    for (name, method), cap in CAPS.items():
        assert cap is None or cap > 0, (name, method)


@pytest.mark.parametrize(("name", "method"), sorted(CAPS))
def test_a_body_over_its_cap_is_refused_before_it_is_read(api, name, method):
    cap = operation_cap(name, method)
    body = b'{"padding":"' + b"a" * (cap - 13) + b'"}'  # one byte over the cap
    assert len(body) == cap + 1
    response = api.generic(method, _url(name), body, content_type="application/json")
    assert response.status_code == 413, (name, method, response.status_code)
    assert response.json()["error"]["code"] == "too_large"


def test_a_knowledge_item_is_small_and_a_full_one_still_fits(api):
    cap = CAPS[("knowledge", "POST")]
    assert 2000 * 6 < cap < 128 * 1024
    response = api.post("/api/v1/knowledge/", {"content": "é" * 1990}, format="json")
    assert response.status_code in (200, 201), response.content


# Operations whose schema once had unbounded parts (nested lists without a published
# maxItems, patterns without maxLength); each must now have a cap of its own.
BOUNDED = [("knowledge-batch", "POST"), ("outcome-create", "POST"), ("tool-calls", "POST"),
           ("agent-tools", "PUT"), ("action-check", "POST"), ("exports", "POST"),
           ("erasures", "POST"), ("erasures_preview", "POST"), ("knowledge-detail", "DELETE")]  # fmt: skip


@pytest.mark.parametrize(("name", "method"), BOUNDED)
def test_the_batch_and_outcome_writes_are_bounded_by_their_schema(name, method):
    assert CAPS[(name, method)] is not None, f"{name} {method}: a part of its schema is unbounded"


def test_nested_lists_publish_their_bounds():
    from drf_spectacular.generators import SchemaGenerator

    components = SchemaGenerator().get_schema(request=None, public=True)["components"]["schemas"]
    outcome = components["OutcomeInputRequest"]["properties"]
    assert outcome["approach"]["maxItems"] == 500 and outcome["checks"]["maxItems"] == 200
    batch = components["RememberBatchDocRequest"]["properties"]["items"]
    assert batch["maxItems"] == settings.CAIRN_REMEMBER_BATCH_MAX and batch["minItems"] == 1


def test_a_batch_of_100_full_items_fits_and_its_cap_is_small(api):
    cap = operation_cap("knowledge-batch", "POST")
    assert cap == settings.CAIRN_REMEMBER_BATCH_MAX_BYTES <= 1024 * 1024
    items = [{"content": f"{n:03d} " + "é" * 1995, "category": "note"} for n in range(100)]
    response = api.post("/api/v1/knowledge/batch/", {"items": items}, format="json")
    assert response.status_code in (200, 201), response.content[:300]


def test_a_batch_over_its_cap_is_refused_with_advice(api):
    cap = operation_cap("knowledge-batch", "POST")
    body = b'{"items":[{"content":"' + b"a" * (cap - 25) + b'"}]}'
    assert len(body) == cap + 1
    response = api.generic(
        "POST", "/api/v1/knowledge/batch/", body, content_type="application/json"
    )
    assert response.status_code == 413
    assert "fewer items" in response.json()["error"]["message"]


def test_a_long_in_play_shorthand_is_refused(harness):
    from tests.factories.lessons import passed_payload

    body = passed_payload(outcome_id="long-ref", in_play=["lesson:" + "1" * 60])
    response = harness.post("/api/v1/outcomes/", body, format="json")
    assert response.status_code == 400, response.content[:300]
    assert "in_play" in str(response.json()["error"]["fields"])
