"""Factories for the review UI of lessons, outcomes and the contradictions queue."""

import factory

from memory.models import LessonEvidence, Outcome, ReviewItem
from tests.factories.identity import AgentFactory, WorkspaceFactory
from tests.factories.lessons import check, digest, step


class OutcomeFactory(factory.django.DjangoModelFactory):
    """A passed turn: one ok step then a passing pytest check (stored as the service would)."""

    class Meta:
        model = Outcome

    workspace = factory.SubFactory(WorkspaceFactory)
    agent = factory.SubFactory(AgentFactory, workspace=factory.SelfAttribute("..workspace"))
    outcome_id = factory.Sequence(lambda n: f"turn-{n}")
    session_id = "sess-1"
    turn_index = factory.Sequence(lambda n: n)
    project_digest = factory.LazyFunction(digest)
    approach = factory.LazyFunction(lambda: [step("pytest:.", "tests", "ok", 1)])
    checks = factory.LazyFunction(lambda: [check(2, 0)])
    passed = True
    channel = "harness"  # what the harness saw: evidence that counts
    response = factory.LazyFunction(
        lambda: {"confirmed": [], "contradicted": [], "lessons_created": []}
    )


class LessonEvidenceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = LessonEvidence

    relation = LessonEvidence.Relation.SUPPORTS


class ReviewItemFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ReviewItem

    workspace = factory.SubFactory(WorkspaceFactory)
    kind = "contradiction"
    a_type = "lesson"
    b_type = "lesson"
    reason = "B is sealed by a person; the judge says they contradict"
