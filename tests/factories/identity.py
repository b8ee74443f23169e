import factory

from memory.models import Agent, Workspace


class WorkspaceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Workspace

    name = factory.Sequence(lambda n: f"ws-{n}")
    display_name = factory.LazyAttribute(lambda o: f"Workspace {o.name}")


class AgentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Agent

    workspace = factory.SubFactory(WorkspaceFactory)
    name = factory.Sequence(lambda n: f"agent-{n}")
