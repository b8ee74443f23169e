"""Factories for the knowledge area (knowledge items, turns, tool calls)."""

import factory

from memory.core.embedders import EmbeddingError
from memory.core.embeddings import get_embedder
from memory.models import ConversationTurn, Knowledge, ToolCall
from tests.factories.identity import AgentFactory, WorkspaceFactory


class KnowledgeFactory(factory.django.DjangoModelFactory):
    """A stored item with a real embedding of its content (the local model is fast)."""

    class Meta:
        model = Knowledge

    workspace = factory.SubFactory(WorkspaceFactory)
    content = factory.Sequence(lambda n: f"Fact number {n} about the build system")
    category = "fact"
    context = "global"
    embedding = factory.LazyAttribute(lambda o: get_embedder().embed_one(o.content))
    embedding_model = factory.LazyAttribute(lambda o: get_embedder().model_id)


class TurnFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ConversationTurn

    workspace = factory.SubFactory(WorkspaceFactory)
    agent = factory.SubFactory(AgentFactory, workspace=factory.SelfAttribute("..workspace"))
    session_id = "session-1"
    role = "user"
    turn_index = factory.Sequence(lambda n: n)
    content = factory.Sequence(lambda n: f"turn {n}")


class ToolCallFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ToolCall

    workspace = factory.SubFactory(WorkspaceFactory)
    session_id = "session-1"
    tool = "shell"
    operation_key = "pytest"
    ok = True


class BrokenEmbedder:
    """An embedder that is down: turns are stored without vectors (for the backfill)."""

    model_id = "broken"

    def embed(self, texts):
        raise EmbeddingError("embedder down")

    def embed_one(self, text):
        raise EmbeddingError("embedder down")
