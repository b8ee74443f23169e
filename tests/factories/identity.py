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


def api_client(agent: Agent, *, scope: str = "agent"):
    """An APIClient for ``agent`` with a new token of ``scope`` (agent, harness, admin)."""
    from rest_framework.test import APIClient

    from memory.identity.services import token_issue

    client = APIClient()
    issued = token_issue(agent=agent, scope=scope)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.raw}")
    client.agent = agent
    client.token = issued.token
    client.raw_token = issued.raw
    return client


def person_actor(username: str = "ada"):
    """A signed-in person as the services see one (a real user: an Actor is made only
    by its constructors)."""
    from django.contrib.auth import get_user_model

    from memory.core.actors import Actor

    user, _ = get_user_model().objects.get_or_create(username=username)
    return Actor.for_user(user)
