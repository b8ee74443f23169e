"""A body cap for every API write, derived from its request schema, charged before the
body is read (issue 56, item 4). The operations come from the API schema."""

from __future__ import annotations

import pytest
from django.conf import settings

from agents.body_caps import body_caps

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
    general = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    cap = min(CAPS[(name, method)] or general, general)
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
