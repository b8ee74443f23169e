"""Provenance on everything served (SPEC section 4a).

Generated: every response schema of the API that carries an item's words (a body with
an ``id``, a ``confidence`` and its ``content`` or ``text``) must carry ``provenance``;
a new serializer of served items fails here the day it is added. Then the plan-time and
decision-time bodies, whose item lists are free-form, are read for real."""

from __future__ import annotations

import pytest
from drf_spectacular.generators import SchemaGenerator

from memory.models import Channel, Source
from tests.factories.lessons import SHOP, KnowledgeFactory, LessonFactory


def served_item_schemas() -> list[str]:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    names = []
    for name, component in schema["components"]["schemas"].items():
        props = component.get("properties") or {}
        if {"id", "confidence"} <= set(props) and ({"content", "text"} & set(props)):
            names.append(name)
    return sorted(names)


SERVED = served_item_schemas()


def test_the_schema_has_served_item_bodies():
    assert {"Knowledge", "RecallHitOut"} & set(SERVED), SERVED


@pytest.mark.parametrize("name", SERVED)
def test_every_served_item_body_carries_provenance(name):
    schema = SchemaGenerator().get_schema(request=None, public=True)
    props = schema["components"]["schemas"][name]["properties"]
    assert "provenance" in props, f"{name} serves an item's words without its provenance"


def _provenances(body, found):
    if isinstance(body, dict):
        if "id" in body and ("content" in body or "text" in body) and "confidence" in body:
            found.append(body.get("provenance"))
        for value in body.values():
            _provenances(value, found)
    elif isinstance(body, list):
        for value in body:
            _provenances(value, found)
    return found


def test_context_check_and_recall_label_every_item(api, workspace):
    KnowledgeFactory(workspace=workspace, content="The staging database is db1.internal.")
    KnowledgeFactory(
        workspace=workspace,
        content="npm failed on npm:test: run the fixer",
        category="error",
        source=Source.ERROR_AUTO,
        channel=Channel.HARNESS,
        operation_key="npm:test",
    )
    LessonFactory(workspace=workspace, operation_key="npm:test", channel=Channel.HARNESS)
    bodies = [
        api.get("/api/v1/context/", {"project_remote": SHOP}).json(),
        api.get(
            "/api/v1/lessons/check/", {"project_remote": SHOP, "operation_key": "npm:test"}
        ).json(),
        api.post("/api/v1/recall/", {"query": "staging database"}, format="json").json(),
    ]
    found = [p for body in bodies for p in _provenances(body, [])]
    assert len(found) >= 5 and all(isinstance(p, dict) for p in found), bodies
    context = bodies[0]
    assert context["errors"][0]["provenance"] == {"origin": "quoted", "earned": False}
    assert context["lessons"][0]["provenance"] == {"origin": "harness", "earned": True}
    assert {i["provenance"]["origin"] for i in context["memory"]["items"]} == {"agent", "quoted"}
    assert bodies[2]["results"][0]["provenance"] == {"origin": "agent", "earned": False}
