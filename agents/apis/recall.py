"""Agent API: recall, the hybrid search of the knowledge store (SPEC sections 3 and 11)."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import (
    OpenApiExample,
    PolymorphicProxySerializer,
    extend_schema,
    inline_serializer,
)
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.apis.common import (
    INCOGNITO_READ_HELP,
    KNOWLEDGE_ERRORS,
    TAG_KNOWLEDGE,
    EmbeddingField,
    StrictSerializer,
    TextField,
    errors,
    request_workspace,
    validated,
)
from agents.apis.knowledge import KnowledgeItemFields
from memory.knowledge.recall_sources import SOURCES, recall_sources
from memory.models import CONTENT_MAX_CHARS, Category


class RecallIn(StrictSerializer):
    query = TextField(max_length=CONTENT_MAX_CHARS)
    context = TextField(
        max_length=200,
        required=False,
        help_text="Only items in this context or in global. Omit for every context.",
    )
    category = serializers.ChoiceField(choices=Category.choices, required=False)
    entity = TextField(max_length=200, required=False, allow_blank=True)
    top_k = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=settings.CAIRN_RECALL_TOP_K_MAX,
        help_text="Default by query complexity: 3 for short simple queries (≤ 7 words), 10 "
        "for long ones (> 20 words) or breadth words (compare, history, all, every, list, "
        "across, between), else 5.",
    )
    time_from = serializers.DateTimeField(
        required=False, help_text="observed_at lower bound (when it was said or seen)"
    )
    time_to = serializers.DateTimeField(required=False, help_text="observed_at upper bound")
    include_sensitive = serializers.BooleanField(required=False, default=False)
    embedding = EmbeddingField()
    sources = serializers.ChoiceField(
        choices=SOURCES,
        required=False,
        default="knowledge",
        help_text="What to search: `knowledge` (default), conversation `turns`, or `both`, "
        "merged into one ranking by score; each hit says its `kind`. category and entity "
        "select knowledge only (a 400 with turns or both).",
    )
    incognito = serializers.BooleanField(
        required=False, default=False, help_text=INCOGNITO_READ_HELP
    )


class RecallHitOut(KnowledgeItemFields):
    metadata = serializers.DictField()
    due_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    observed_at = serializers.DateTimeField(help_text="When it was said or seen.")
    updated_at = serializers.DateTimeField()
    vector_rank = serializers.IntegerField(
        allow_null=True, help_text="Rank in the vector candidate list (1 = nearest)."
    )
    text_rank = serializers.IntegerField(
        allow_null=True, help_text="Rank in the full-text candidate list (1 = best)."
    )
    relevance = serializers.FloatField(
        help_text="Reciprocal-rank fusion w_vec/(60+vector_rank) + w_text/(60+text_rank), "
        "scaled so that rank 1 in both lists is 1.0."
    )
    score = serializers.FloatField(help_text="relevance + 0.05 × confidence")
    kind = serializers.ChoiceField(
        choices=["knowledge"], help_text="`knowledge`: an item of the knowledge store."
    )


class RecallTurnHitOut(serializers.Serializer):
    kind = serializers.ChoiceField(
        choices=["turn"], help_text="`turn`: a conversation turn (sources=turns or both)."
    )
    source = serializers.ChoiceField(choices=["turn"], help_text="Always `turn` for turns.")
    id = serializers.IntegerField()
    content = serializers.CharField()
    session_id = serializers.CharField()
    role = serializers.CharField()
    turn_index = serializers.IntegerField()
    context = serializers.CharField()
    created_at = serializers.DateTimeField()
    observed_at = serializers.DateTimeField(source="created_at", help_text="When it was said.")
    vector_rank = serializers.IntegerField(allow_null=True)
    text_rank = serializers.IntegerField(allow_null=True)
    relevance = serializers.FloatField(
        help_text="Fused relevance of the turn's vector and full-text (BM25) ranks."
    )
    score = serializers.FloatField(help_text="The turn's place in the merged ranking.")


def _hit_body(mixed) -> dict:
    if mixed.kind == "turn":
        fields = {**vars(mixed.hit), "kind": "turn", "source": "turn", "score": mixed.score}
        return RecallTurnHitOut(fields).data
    return RecallHitOut({**vars(mixed.hit), "kind": "knowledge"}).data


class RecallApi(APIView):
    @extend_schema(
        operation_id="recall",
        summary="Recall: hybrid search of the knowledge store (and conversation turns)",
        description=(
            "Vector (pgvector cosine, HNSW) and full-text candidates fused by reciprocal rank; "
            "score = relevance + 0.05 × confidence, so strength only breaks near-ties. "
            "Archived and superseded items never appear; sensitive ones only with "
            "include_sensitive. Recalled items get last_used_at and use_count refreshed "
            "(not with `incognito: true`); "
            "recall never changes confidence. With `sources=turns` or `both`, conversation "
            "turns are ranked the same way (vector + BM25, see conversations/search/) and "
            "merged by score; turn hits carry `kind: turn` and their session."
        ),
        request=RecallIn,
        responses={
            200: inline_serializer(
                "RecallOut",
                {
                    "query": serializers.CharField(),
                    "top_k": serializers.IntegerField(),
                    "results": PolymorphicProxySerializer(
                        component_name="RecallResult",
                        serializers=[RecallHitOut, RecallTurnHitOut],
                        resource_type_field_name=None,
                        many=True,
                    ),
                },
            ),
            **errors(400, 401, area=KNOWLEDGE_ERRORS),
        },
        examples=[
            OpenApiExample(
                "When does Sarah like to meet?",
                value={"query": "when does Sarah like to meet?", "context": "work"},
                request_only=True,
            )
        ],
        tags=[TAG_KNOWLEDGE],
    )
    def post(self, request):
        data = validated(RecallIn, request.data)
        incognito = data.pop("incognito")
        result = recall_sources(workspace=request_workspace(request), record=not incognito, **data)
        return Response(
            {
                "query": data["query"],
                "top_k": result.top_k,
                "results": [_hit_body(hit) for hit in result.hits],
            }
        )
