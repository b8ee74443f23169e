"""An unknown selector key is refused with 400 naming it, never read as "everything"."""

from __future__ import annotations

import pytest

from memory.models import JobRun

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("selector", "named"),
    [
        ({"agnet": "gaia/chat"}, ["selector.agnet"]),
        ({"agnet": ""}, ["selector.agnet"]),
        ({"agnet": None}, ["selector.agnet"]),
        ({"agent": "gaia/chat", "skil": "x", "zzz": 1}, ["selector.skil", "selector.zzz"]),
        ({"text": "deploy"}, ["selector.text"]),  # an erasure selector, not an export one
    ],
)
def test_an_export_with_an_unknown_selector_key_is_refused(admin, selector, named):
    response = admin.post("/api/v1/exports/", {"format": "jsonl", "selector": selector},
                          format="json")  # fmt: skip
    assert response.status_code == 400, response.json()
    error = response.json()["error"]
    assert sorted(error["fields"]) == named
    for name in named:
        assert name.split(".", 1)[1] in error["message"]
    assert not JobRun.objects.exists()


def test_an_erasure_preview_with_an_unknown_key_is_refused(admin):
    response = admin.post("/api/v1/erasures/preview/", {"selector": {"contxt": "c"}},
                          format="json")  # fmt: skip
    assert response.status_code == 400
    assert list(response.json()["error"]["fields"]) == ["selector.contxt"]


def test_the_whole_workspace_is_still_exported_on_an_empty_selector(admin):
    response = admin.post("/api/v1/exports/", {"format": "jsonl", "selector": {}}, format="json")
    assert response.status_code == 202
