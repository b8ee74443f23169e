"""Factories and payload builders for outcomes, lessons and knowledge used as evidence targets."""

from __future__ import annotations

import itertools

import factory

from memory.identity.projects import project_digest
from memory.lessons.lifecycle import lesson_text_normalize
from memory.models import Knowledge, Lesson, LessonScope, LessonSource, LessonState
from tests.factories.identity import WorkspaceFactory

SHOP = "https://github.com/acme/shop.git"
BLOG = "git@github.com:acme/blog.git"
DOCS = "https://gitlab.example.com/acme/docs"
_ids = itertools.count(1)


def digest(remote: str = SHOP) -> str:
    return project_digest(remote=remote)


def step(op: str, target: str = "", outcome: str = "ok", at: int = 1, mutated: bool = False):
    return {
        "operation_key": op,
        "target": target,
        "outcome": outcome,
        "step": at,
        "mutated": mutated,
    }


def check(
    at: int,
    exit_code: int | None = 0,
    ran: bool = True,
    kind: str = "test",
    label: str = "pytest",
    target: str = "tests",
):
    return {
        "kind": kind,
        "label": label,
        "target": target,
        "ran": ran,
        "exit_code": exit_code,
        "step": at,
    }


def outcome_payload(**overrides) -> dict:
    """A minimal valid outcome body (project SHOP, no checks: passed = null)."""
    n = next(_ids)
    body = {
        "outcome_id": f"out-{n}",
        "session_id": f"sess-{n}",
        "turn_index": 0,
        "project_remote": SHOP,
        "context": "global",
        "goal": "Fix the cart",
        "approach": [],
        "checks": [],
        "claim_ok": True,
        "steps": 1,
        "tokens": 100,
        "wall_s": 1.5,
        "in_play": [],
    }
    body.update(overrides)
    return body


def passed_payload(op: str = "pytest:.", target: str = "tests", **overrides) -> dict:
    """An outcome that ran ``op`` fine and whose test check passed after it."""
    body = outcome_payload(
        approach=[step(op, target, "ok", 1)],
        checks=[check(2, 0)],
    )
    body.update(overrides)
    return body


def failed_payload(op: str = "pytest:.", target: str = "tests", **overrides) -> dict:
    """An outcome in which ``op`` failed and the test check failed."""
    body = outcome_payload(
        approach=[step(op, target, "failed", 1)],
        checks=[check(2, 1)],
    )
    body.update(overrides)
    return body


def fixed_payload(failed_op: str, ok_op: str, target: str = "tests", **overrides) -> dict:
    """Failed (A, T), then ok (B, T), then a passing check: a mechanical lesson."""
    body = outcome_payload(
        approach=[step(failed_op, target, "failed", 1), step(ok_op, target, "ok", 2)],
        checks=[check(3, 0)],
    )
    body.update(overrides)
    return body


class LessonFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Lesson

    workspace = factory.SubFactory(WorkspaceFactory)
    agent = None
    text = factory.Sequence(lambda n: f"Run check number {n} from the repository root.")
    normalized_text = factory.LazyAttribute(lambda o: lesson_text_normalize(o.text))
    operation_key = "pytest:."
    scope = LessonScope.PROJECT
    project_digest = factory.LazyFunction(digest)
    confidence = 0.5
    birth_confidence = factory.LazyAttribute(lambda o: o.confidence)
    state = LessonState.ACTIVE
    source = LessonSource.MODEL


class KnowledgeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Knowledge

    workspace = factory.SubFactory(WorkspaceFactory)
    content = factory.Sequence(lambda n: f"The staging database is db{n}.internal.")
    category = "fact"
    context = "global"
    confidence = 0.5
