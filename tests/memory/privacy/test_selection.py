"""Erasure selectors: bad ones are refused naming the field; content is kept only as a
digest."""

import pytest

from memory.privacy.selection import ERASURE_SELECTORS, Selector, selector_parse

pytestmark = pytest.mark.django_db


# What each selector reaches in a bundle: the marker is planted only there.
@pytest.mark.parametrize(
    ("data", "field", "status"),
    [
        ({}, "selector", 400),
        ({"agent": "a", "context": "c"}, "selector", 400),
        ({"text": "ab"}, "selector.text", 400),
        ({"skill": "x"}, "selector.skill", 400),
        ({"agent": "nobody"}, "selector.agent", 422),
        ({"entity": 5}, "selector.entity", 400),
        ("agent", "selector", 400),
    ],
)
def test_it_refuses_bad_selectors_naming_the_field(workspace, data, field, status):
    from cairn.errors import ApplicationError

    with pytest.raises(ApplicationError) as caught:
        selector_parse(workspace=workspace, data=data, allowed=ERASURE_SELECTORS)
    assert field in caught.value.fields
    assert caught.value.status_code == status


def test_it_keeps_only_a_digest_of_content_selectors():
    selector = Selector(kind="text", value="Sarah Chen")
    form = selector.receipt()
    assert "Sarah" not in str(form)
    assert form["length"] == 10
    assert len(form["sha256"]) == 64
