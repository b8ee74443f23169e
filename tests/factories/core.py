"""Factories for the review UI tests: job runs and audit events."""

import factory

from memory.models import AuditEvent, JobRun
from tests.factories.identity import WorkspaceFactory


class JobRunFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = JobRun

    kind = "decay"
    workspace = factory.SubFactory(WorkspaceFactory)
    status = JobRun.Status.SUCCEEDED
    counts = factory.LazyFunction(lambda: {"decayed": 3})


class AuditEventFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = AuditEvent

    workspace = factory.SubFactory(WorkspaceFactory)
    actor = "user:alice"
    action = "token.issue"
    target_type = "token"
    target_id = factory.Sequence(str)
