"""Agent API: knowledge, recall, conversation turns and tool calls (SPEC sections 3, 11).

Every view scopes to the token's workspace (``request.auth.workspace``): another
workspace's ids answer 404, exactly like ids that do not exist. Views validate
shapes with serializers (400) and call memory services and selectors only.
"""

from __future__ import annotations

import re

from django.conf import settings
from django.urls import path
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    inline_serializer,
)
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from memory.models import CONTENT_MAX_CHARS, EMBEDDING_DIMENSIONS, Category, KnowledgeStatus
from memory.models.conversations import TURN_CONTENT_MAX_CHARS, TurnRole
from memory.selectors.conversations import conversation_search, tool_call_stats, turns_list
from memory.selectors.knowledge import knowledge_get, knowledge_list
from memory.services.conversations import tool_calls_log, turn_store
from memory.services.knowledge import (
    AGENT_SOURCES,
    Actor,
    knowledge_forget,
    knowledge_recall,
    knowledge_remember,
    knowledge_remember_many,
    knowledge_update,
)

TAG_KNOWLEDGE = "knowledge"
TAG_CONVERSATIONS = "conversations"
OFFSET_MAX = 1_000_000

# --------------------------------------------------------------------------- fields

_SURROGATE = re.compile(r"[\ud800-\udfff]")


class TextField(serializers.CharField):
    """CharField that also refuses lone surrogates (PostgreSQL cannot encode them).

    DRF's CharField already refuses NUL characters.
    """

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if _SURROGATE.search(value):
            raise serializers.ValidationError("Must not contain lone surrogate characters.")
        return value


class StrictSerializer(serializers.Serializer):
    """Unknown keys are an error, not silently ignored (a typo should not lose data)."""

    def to_internal_value(self, data):
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError(
                    {name: ["Unknown field."] for name in unknown}, code="unknown_field"
                )
        return super().to_internal_value(data)


@extend_schema_field(
    {
        "type": "array",
        "items": {"type": "number"},
        "minItems": EMBEDDING_DIMENSIONS,
        "maxItems": EMBEDDING_DIMENSIONS,
        "nullable": True,
    }
)
class EmbeddingField(serializers.Field):
    """A client vector. Only its shape is checked here; the service validates it in
    full (memory.embeddings.validate_vector, a 400 naming ``embedding``), once.

    (A ListField of FloatFields would run 384 field validations per item.)
    """

    def __init__(self, **kwargs):
        kwargs.setdefault("required", False)
        kwargs.setdefault("allow_null", True)
        kwargs.setdefault(
            "help_text",
            f"Optional: your own {EMBEDDING_DIMENSIONS}-dimensional vector for the text, from "
            "the same model as the server's (see embedding_model in answers). Without it the "
            "server embeds the text before answering.",
        )
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, list) or len(data) != EMBEDDING_DIMENSIONS:
            raise serializers.ValidationError(f"Must be a list of {EMBEDDING_DIMENSIONS} numbers.")
        return data

    def to_representation(self, value):
        return list(value)


def _metadata_field(**kwargs):
    return serializers.DictField(
        required=False,
        help_text='Free JSON object (at most 8 KB), e.g. {"source_url": "..."}.',
        **kwargs,
    )


ErrorSerializer = inline_serializer(
    "KnowledgeError",
    {
        "error": inline_serializer(
            "KnowledgeErrorBody",
            {
                "code": serializers.CharField(),
                "message": serializers.CharField(),
                "fields": serializers.DictField(
                    child=serializers.ListField(child=serializers.CharField())
                ),
            },
        )
    },
)


def _errors(*codes: int, **described: str) -> dict:
    texts = {
        400: "Invalid input; `error.fields` names each field at fault.",
        401: "Missing or invalid bearer token.",
        403: "Not allowed for this token (e.g. a privileged category or a protected item).",
        404: "No such item in this workspace (items of other workspaces look the same).",
        409: "Conflicts with the stored state (see the message).",
        422: "Refused by a rule, e.g. `credential_refused`: the text looks like a secret.",
    }
    texts.update({int(k[1:]): v for k, v in described.items()})
    return {code: OpenApiResponse(ErrorSerializer, description=texts[code]) for code in codes}


def _validated_list(serializer_class, items: list, name: str) -> list[dict]:
    """Validate list elements one by one so errors read ``calls[2].ok``, not ``calls.2.ok``."""
    validated, errors = [], []
    for raw in items:
        element = serializer_class(data=raw)
        errors.append({} if element.is_valid() else element.errors)
        validated.append(element.validated_data if not errors[-1] else None)
    if any(errors):
        raise serializers.ValidationError({name: errors})
    return validated


def _workspace(request):
    return request.auth.workspace


def _actor(request) -> Actor:
    return Actor.for_agent(request.user)


# --------------------------------------------------------------------------- output shapes


class KnowledgeOut(serializers.Serializer):
    id = serializers.IntegerField()
    content = serializers.CharField()
    category = serializers.CharField()
    domain = serializers.CharField()
    entity = serializers.CharField()
    context = serializers.CharField()
    sensitive = serializers.BooleanField()
    source = serializers.CharField()
    confidence = serializers.FloatField()
    use_count = serializers.IntegerField()
    last_used_at = serializers.DateTimeField(allow_null=True)
    due_at = serializers.DateTimeField(allow_null=True)
    reminded_at = serializers.DateTimeField(allow_null=True)
    metadata = serializers.DictField()
    operation_key = serializers.CharField()
    pinned = serializers.BooleanField()
    sealed = serializers.BooleanField()
    status = serializers.CharField()
    superseded_by = serializers.IntegerField(source="superseded_by_id", allow_null=True)
    embedding_model = serializers.CharField(
        help_text="Model of the stored vector; empty when the item has none yet."
    )
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    archived_at = serializers.DateTimeField(allow_null=True)


class RememberOut(KnowledgeOut):
    deduplicated_into = serializers.IntegerField(
        allow_null=True,
        help_text="Set when the new item repeated an active one (word overlap > 0.8 in the "
        "same category, context and entity): that item was updated instead; this is its id.",
    )
    overlap = serializers.FloatField(allow_null=True)


def _page_body(page, results) -> dict:
    return {
        "count": page.count,
        "limit": page.limit,
        "offset": page.offset,
        "next_offset": page.next_offset,
        "results": results,
    }


def _paginated(name: str, item) -> serializers.Serializer:
    return inline_serializer(
        name,
        {
            "count": serializers.IntegerField(),
            "limit": serializers.IntegerField(),
            "offset": serializers.IntegerField(),
            "next_offset": serializers.IntegerField(allow_null=True),
            "results": item(many=True) if isinstance(item, type) else item,
        },
    )


class PageParams(serializers.Serializer):
    limit = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=settings.CAIRN_LIST_PAGE_SIZE_MAX,
        help_text=f"Page size (default {settings.CAIRN_LIST_PAGE_SIZE}, "
        f"at most {settings.CAIRN_LIST_PAGE_SIZE_MAX}).",
    )
    offset = serializers.IntegerField(required=False, min_value=0, max_value=OFFSET_MAX, default=0)


# --------------------------------------------------------------------------- knowledge

REMEMBER_EXAMPLE = {
    "content": "Sarah prefers morning meetings, never before 9:00",
    "category": "preference",
    "entity": "person:sarah_chen",
    "context": "work",
}


class RememberIn(StrictSerializer):
    content = TextField(
        max_length=CONTENT_MAX_CHARS,
        help_text=f"What to remember, 1–{CONTENT_MAX_CHARS} characters. Longer is a 400, "
        "never a silent cut.",
    )
    category = serializers.ChoiceField(
        choices=Category.choices,
        default=Category.FACT,
        help_text="fact, preference, error, skill, note or reminder. system, profile and "
        "permission are writable only by people (403 for agents).",
    )
    domain = TextField(max_length=100, required=False, allow_blank=True, default="")
    entity = TextField(
        max_length=200,
        required=False,
        allow_blank=True,
        default="",
        help_text="Who or what it is about, e.g. person:sarah_chen.",
    )
    context = TextField(
        max_length=200,
        required=False,
        default="global",
        help_text="Scope such as work or personal; recall in a context also sees global.",
    )
    sensitive = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Sensitive items are left out of recall unless asked for, and out of the "
        "memory block.",
    )
    source = serializers.ChoiceField(choices=sorted(AGENT_SOURCES), required=False, default="agent")
    metadata = _metadata_field()
    due_at = serializers.DateTimeField(
        required=False, allow_null=True, help_text="Required for category reminder."
    )
    operation_key = TextField(
        max_length=200,
        required=False,
        allow_blank=True,
        default="",
        help_text="For error items: the failing operation. One active error item per "
        "operation; a repeat updates it.",
    )
    embedding = EmbeddingField()
    embedding_model = TextField(max_length=100, required=False, allow_blank=True, default="")


def _remember_body(result) -> dict:
    body = dict(KnowledgeOut(result.item).data)
    body["deduplicated_into"] = result.deduplicated_into
    body["overlap"] = None if result.overlap is None else round(result.overlap, 4)
    return body


class KnowledgeListParams(PageParams):
    category = serializers.ChoiceField(choices=Category.choices, required=False)
    context = TextField(max_length=200, required=False)
    entity = TextField(max_length=200, required=False, allow_blank=True)
    domain = TextField(max_length=100, required=False, allow_blank=True)
    status = serializers.ChoiceField(
        choices=[*KnowledgeStatus.values, "all"], required=False, default=KnowledgeStatus.ACTIVE
    )
    q = TextField(max_length=500, required=False, help_text="Full-text filter (web-search syntax).")
    include_sensitive = serializers.BooleanField(required=False, default=False)
    include_superseded = serializers.BooleanField(required=False, default=False)
    due_before = serializers.DateTimeField(required=False)
    due_after = serializers.DateTimeField(required=False)
    created_from = serializers.DateTimeField(required=False)
    created_to = serializers.DateTimeField(required=False)


class KnowledgeCollectionApi(APIView):
    @extend_schema(
        operation_id="knowledge_remember",
        summary="Remember: store a knowledge item (or update the one it repeats)",
        description=(
            "Embeds the content before answering. A new item whose words overlap an active "
            "item in the same category + context + entity by more than 0.8 "
            "(Szymkiewicz–Simpson) updates that item instead: 200 with `deduplicated_into`. "
            "Content that looks like a credential (API keys, tokens, private keys, "
            "passwords in URLs or assignments) is refused with 422 `credential_refused`."
        ),
        request=RememberIn,
        responses={
            201: OpenApiResponse(RememberOut, description="Stored as a new item."),
            200: OpenApiResponse(RememberOut, description="Deduplicated into an existing item."),
            **_errors(400, 401, 403, 422),
        },
        examples=[
            OpenApiExample("A preference", value=REMEMBER_EXAMPLE, request_only=True),
            OpenApiExample(
                "A reminder",
                value={
                    "content": "Renew the TLS certificate",
                    "category": "reminder",
                    "due_at": "2026-12-01T09:00:00Z",
                },
                request_only=True,
            ),
        ],
        tags=[TAG_KNOWLEDGE],
    )
    def post(self, request):
        data = RememberIn(data=request.data)
        data.is_valid(raise_exception=True)
        result = knowledge_remember(
            workspace=_workspace(request), actor=_actor(request), **data.validated_data
        )
        return Response(
            _remember_body(result),
            status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK,
        )

    @extend_schema(
        operation_id="knowledge_list",
        summary="List knowledge items, newest first (paginated)",
        description="Active, current (not superseded), non-sensitive items unless asked "
        "otherwise. Listing does not count as use.",
        parameters=[KnowledgeListParams],
        responses={200: _paginated("KnowledgePage", KnowledgeOut), **_errors(400, 401)},
        tags=[TAG_KNOWLEDGE],
    )
    def get(self, request):
        params = KnowledgeListParams(data=request.query_params)
        params.is_valid(raise_exception=True)
        page = knowledge_list(workspace=_workspace(request), **params.validated_data)
        return Response(_page_body(page, KnowledgeOut(page.items, many=True).data))


class RememberBatchIn(StrictSerializer):
    items = serializers.ListField(
        child=serializers.DictField(),
        min_length=1,
        max_length=settings.CAIRN_REMEMBER_BATCH_MAX,
    )


class RememberBatchDoc(StrictSerializer):
    """The documented shape; elements are validated one by one with RememberIn."""

    items = RememberIn(
        many=True,
        allow_empty=False,
        max_length=settings.CAIRN_REMEMBER_BATCH_MAX,
        help_text=f"1–{settings.CAIRN_REMEMBER_BATCH_MAX} items, each shaped like the body "
        "of POST /api/v1/knowledge/.",
    )


class KnowledgeBatchApi(APIView):
    @extend_schema(
        operation_id="knowledge_remember_batch",
        summary="Remember several items at once (all or none)",
        description="Each item is validated, deduplicated and stored like a single remember; "
        "the batch is embedded in one call. Any refusal names the item "
        "(`items[3].content`) and stores nothing.",
        request=RememberBatchDoc,
        responses={
            201: inline_serializer(
                "RememberBatchOut",
                {
                    "created": serializers.IntegerField(),
                    "deduplicated": serializers.IntegerField(),
                    "results": inline_serializer(
                        "RememberBatchResult",
                        {
                            "id": serializers.IntegerField(),
                            "created": serializers.BooleanField(),
                            "deduplicated_into": serializers.IntegerField(allow_null=True),
                        },
                        many=True,
                    ),
                },
            ),
            **_errors(400, 401, 403, 422),
        },
        examples=[
            OpenApiExample(
                "Two facts",
                value={
                    "items": [
                        {"content": "The CI runs on GitHub Actions"},
                        {"content": "Staging deploys every night at 02:00 UTC"},
                    ]
                },
                request_only=True,
            )
        ],
        tags=[TAG_KNOWLEDGE],
    )
    def post(self, request):
        data = RememberBatchIn(data=request.data)
        data.is_valid(raise_exception=True)
        items = _validated_list(RememberIn, data.validated_data["items"], "items")
        results = knowledge_remember_many(
            workspace=_workspace(request), actor=_actor(request), items=items
        )
        created = sum(1 for r in results if r.created)
        return Response(
            {
                "created": created,
                "deduplicated": len(results) - created,
                "results": [
                    {
                        "id": r.item.pk,
                        "created": r.created,
                        "deduplicated_into": r.deduplicated_into,
                    }
                    for r in results
                ],
            },
            status=status.HTTP_201_CREATED,
        )


class KnowledgePatchIn(StrictSerializer):
    content = TextField(max_length=CONTENT_MAX_CHARS, required=False)
    category = serializers.ChoiceField(choices=Category.choices, required=False)
    domain = TextField(max_length=100, required=False, allow_blank=True)
    entity = TextField(max_length=200, required=False, allow_blank=True)
    context = TextField(max_length=200, required=False)
    sensitive = serializers.BooleanField(required=False)
    metadata = _metadata_field()
    due_at = serializers.DateTimeField(required=False, allow_null=True)
    reminded_at = serializers.DateTimeField(
        required=False,
        allow_null=True,
        help_text="Set when you have reminded the user; moving due_at clears it.",
    )
    embedding = EmbeddingField()
    embedding_model = TextField(max_length=100, required=False, allow_blank=True)


class UpdateOut(KnowledgeOut):
    supersedes = serializers.IntegerField(
        allow_null=True,
        help_text="When the content changed, the edit is a new version with a new id; this is "
        "the id of the version it replaced (kept, pointing here via superseded_by).",
    )


class ForgetOut(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.CharField()
    archived_at = serializers.DateTimeField()
    message = serializers.CharField()


class KnowledgeDetailApi(APIView):
    @extend_schema(
        operation_id="knowledge_read",
        summary="Read one knowledge item",
        responses={200: KnowledgeOut, **_errors(401, 404)},
        tags=[TAG_KNOWLEDGE],
    )
    def get(self, request, item_id: int):
        item = knowledge_get(workspace=_workspace(request), item_id=item_id)
        return Response(KnowledgeOut(item).data)

    @extend_schema(
        operation_id="knowledge_update",
        summary="Update a knowledge item (a new content is a new version)",
        description=(
            "Only the given fields change. A changed `content` supersedes: the answer is a new "
            "item (new id, fresh embedding) and `supersedes` names the old one, which is kept "
            "and leaves recall. Other fields change in place. Same validation as remember. "
            "Agents cannot edit pinned, sealed or privileged items (403); editing a "
            "superseded or archived version is a 409."
        ),
        request=KnowledgePatchIn,
        responses={200: UpdateOut, **_errors(400, 401, 403, 404, 409, 422)},
        examples=[
            OpenApiExample(
                "Reword",
                value={"content": "Sarah prefers meetings after 10:00"},
                request_only=True,
            ),
            OpenApiExample(
                "Mark a reminder done",
                value={"reminded_at": "2026-12-01T09:05:00Z"},
                request_only=True,
            ),
        ],
        tags=[TAG_KNOWLEDGE],
    )
    def patch(self, request, item_id: int):
        data = KnowledgePatchIn(data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        result = knowledge_update(
            workspace=_workspace(request),
            item_id=item_id,
            actor=_actor(request),
            changes=dict(data.validated_data),
        )
        body = dict(KnowledgeOut(result.item).data)
        body["supersedes"] = result.supersedes
        return Response(body)

    @extend_schema(
        operation_id="knowledge_forget",
        summary="Forget: archive a knowledge item",
        description="An agent's DELETE archives: the item leaves recall and the memory block "
        "but the row is kept, and a person can restore it. Forgetting an archived item "
        "answers the same. Only a person can really delete (in the review UI).",
        responses={200: ForgetOut, **_errors(401, 403, 404)},
        tags=[TAG_KNOWLEDGE],
    )
    def delete(self, request, item_id: int):
        item = knowledge_forget(
            workspace=_workspace(request), item_id=item_id, actor=_actor(request)
        )
        return Response(
            {
                "id": item.pk,
                "status": item.status,
                "archived_at": item.archived_at,
                "message": "Archived: out of recall, kept, restorable by a person.",
            }
        )


# --------------------------------------------------------------------------- recall


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
    time_from = serializers.DateTimeField(required=False, help_text="created_at lower bound")
    time_to = serializers.DateTimeField(required=False, help_text="created_at upper bound")
    include_sensitive = serializers.BooleanField(required=False, default=False)
    embedding = EmbeddingField()


class RecallHitOut(serializers.Serializer):
    id = serializers.IntegerField()
    content = serializers.CharField()
    category = serializers.CharField()
    domain = serializers.CharField()
    entity = serializers.CharField()
    context = serializers.CharField()
    sensitive = serializers.BooleanField()
    source = serializers.CharField()
    confidence = serializers.FloatField()
    metadata = serializers.DictField()
    due_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
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


class RecallApi(APIView):
    @extend_schema(
        operation_id="recall",
        summary="Recall: hybrid search of the knowledge store",
        description=(
            "Vector (pgvector cosine, HNSW) and full-text candidates fused by reciprocal rank; "
            "score = relevance + 0.05 × confidence, so strength only breaks near-ties. "
            "Archived and superseded items never appear; sensitive ones only with "
            "include_sensitive. Recalled items get last_used_at and use_count refreshed; "
            "recall never changes confidence."
        ),
        request=RecallIn,
        responses={
            200: inline_serializer(
                "RecallOut",
                {
                    "query": serializers.CharField(),
                    "top_k": serializers.IntegerField(),
                    "results": RecallHitOut(many=True),
                },
            ),
            **_errors(400, 401),
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
        data = RecallIn(data=request.data)
        data.is_valid(raise_exception=True)
        result = knowledge_recall(workspace=_workspace(request), **data.validated_data)
        return Response(
            {
                "query": data.validated_data["query"],
                "top_k": result.top_k,
                "results": RecallHitOut(result.hits, many=True).data,
            }
        )


# --------------------------------------------------------------------------- conversations


class TurnIn(StrictSerializer):
    role = serializers.ChoiceField(choices=TurnRole.choices)
    content = TextField(max_length=TURN_CONTENT_MAX_CHARS)
    turn_index = serializers.IntegerField(min_value=0, max_value=2**31 - 1)
    context = TextField(max_length=200, required=False, default="global")
    at = serializers.DateTimeField(required=False, help_text="When it was said (default now).")
    incognito = serializers.BooleanField(
        required=False,
        default=False,
        help_text='Nothing is recorded; the answer is 202 {"recorded": false}. Send it with '
        "every turn and tool call of an incognito session.",
    )


class TurnOut(serializers.Serializer):
    recorded = serializers.BooleanField()
    id = serializers.IntegerField(required=False)
    session_id = serializers.CharField(required=False)
    role = serializers.CharField(required=False)
    turn_index = serializers.IntegerField(required=False)
    context = serializers.CharField(required=False)
    created_at = serializers.DateTimeField(required=False)


class TurnRowOut(serializers.Serializer):
    id = serializers.IntegerField()
    session_id = serializers.CharField()
    role = serializers.CharField()
    turn_index = serializers.IntegerField()
    content = serializers.CharField()
    context = serializers.CharField()
    created_at = serializers.DateTimeField()


def _session_id(raw: str) -> str:
    if len(raw) > 200 or "\x00" in raw or _SURROGATE.search(raw) or not raw.strip():
        raise serializers.ValidationError(
            {"session_id": ["Must be 1–200 characters without NUL characters."]}
        )
    return raw


class SessionTurnsApi(APIView):
    @extend_schema(
        operation_id="session_turn_store",
        summary="Store a conversation turn",
        description="201 when stored; 200 when the same turn (session, turn_index, role, "
        "content) was stored before (a retry); 409 when that turn exists with other content; "
        '202 `{"recorded": false}` for incognito. Credentials are refused (422).',
        request=TurnIn,
        responses={
            201: TurnOut,
            200: OpenApiResponse(TurnOut, description="Already stored (retry)."),
            202: OpenApiResponse(TurnOut, description="Incognito: nothing recorded."),
            **_errors(400, 401, 409, 422),
        },
        examples=[
            OpenApiExample(
                "User turn",
                value={
                    "role": "user",
                    "content": "Can you move the standup to 10?",
                    "turn_index": 0,
                },
                request_only=True,
            )
        ],
        tags=[TAG_CONVERSATIONS],
    )
    def post(self, request, session_id: str):
        session_id = _session_id(session_id)
        data = TurnIn(data=request.data)
        data.is_valid(raise_exception=True)
        result = turn_store(
            workspace=_workspace(request),
            agent=request.user,
            session_id=session_id,
            **data.validated_data,
        )
        if not result.recorded:
            return Response({"recorded": False}, status=status.HTTP_202_ACCEPTED)
        turn = result.turn
        return Response(
            {
                "recorded": True,
                "id": turn.pk,
                "session_id": turn.session_id,
                "role": turn.role,
                "turn_index": turn.turn_index,
                "context": turn.context,
                "created_at": serializers.DateTimeField().to_representation(turn.created_at),
            },
            status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK,
        )

    @extend_schema(
        operation_id="session_turns_list",
        summary="A session's turns in order (paginated)",
        parameters=[PageParams],
        responses={200: _paginated("TurnPage", TurnRowOut), **_errors(400, 401)},
        tags=[TAG_CONVERSATIONS],
    )
    def get(self, request, session_id: str):
        session_id = _session_id(session_id)
        params = PageParams(data=request.query_params)
        params.is_valid(raise_exception=True)
        page = turns_list(
            workspace=_workspace(request), session_id=session_id, **params.validated_data
        )
        return Response(_page_body(page, TurnRowOut(page.items, many=True).data))


class ConversationSearchParams(PageParams):
    q = TextField(max_length=500, help_text="Words to find (web-search syntax).")
    session_id = TextField(max_length=200, required=False)
    context = TextField(max_length=200, required=False)
    role = serializers.ChoiceField(choices=TurnRole.choices, required=False)
    time_from = serializers.DateTimeField(required=False)
    time_to = serializers.DateTimeField(required=False)


class ConversationHitOut(serializers.Serializer):
    id = serializers.IntegerField()
    session_id = serializers.CharField()
    role = serializers.CharField()
    turn_index = serializers.IntegerField()
    context = serializers.CharField()
    created_at = serializers.DateTimeField()
    rank = serializers.FloatField()
    snippet = serializers.CharField(help_text="Matching fragments, matches in **bold**.")


class ConversationSearchApi(APIView):
    @extend_schema(
        operation_id="conversations_search",
        summary="Search past conversations (full text, ranked snippets)",
        description="Turns matching every word rank first; when none match every word, turns "
        "matching any word are returned (`mode: any`).",
        parameters=[ConversationSearchParams],
        responses={
            200: inline_serializer(
                "ConversationSearchOut",
                {
                    "count": serializers.IntegerField(),
                    "limit": serializers.IntegerField(),
                    "offset": serializers.IntegerField(),
                    "next_offset": serializers.IntegerField(allow_null=True),
                    "mode": serializers.ChoiceField(choices=["all", "any"]),
                    "results": ConversationHitOut(many=True),
                },
            ),
            **_errors(400, 401),
        },
        tags=[TAG_CONVERSATIONS],
    )
    def get(self, request):
        params = ConversationSearchParams(data=request.query_params)
        params.is_valid(raise_exception=True)
        page, mode = conversation_search(workspace=_workspace(request), **params.validated_data)
        body = _page_body(page, ConversationHitOut(page.items, many=True).data)
        body["mode"] = mode
        return Response(body)


# --------------------------------------------------------------------------- tool calls


class ToolCallIn(StrictSerializer):
    session_id = TextField(max_length=200)
    tool = TextField(max_length=100)
    operation_key = TextField(
        max_length=200, help_text="The operation, e.g. `git push` or `pytest tests/api`."
    )
    ok = serializers.BooleanField()
    error = TextField(
        max_length=settings.CAIRN_TOOL_CALL_ERROR_MAX_CHARS, required=False, allow_blank=True
    )
    duration_ms = serializers.IntegerField(required=False, min_value=0, max_value=2**31 - 1)
    at = serializers.DateTimeField(required=False, help_text="When it ran (default now).")
    incognito = serializers.BooleanField(required=False, default=False)


class ToolCallsIn(StrictSerializer):
    calls = serializers.ListField(
        child=serializers.DictField(), min_length=1, max_length=settings.CAIRN_TOOL_CALL_BATCH_MAX
    )


class ToolCallsDoc(StrictSerializer):
    """The documented shape; elements are validated one by one with ToolCallIn."""

    calls = ToolCallIn(many=True, allow_empty=False, max_length=settings.CAIRN_TOOL_CALL_BATCH_MAX)


class ToolCallsApi(APIView):
    @extend_schema(
        operation_id="tool_calls_log",
        summary="Log tool calls (batch, all or none)",
        description=(
            "A failed call stores (or refreshes) one active `error` knowledge item per "
            "`operation_key` (source error_auto); a later successful call on the same operation "
            "archives it. Calls marked incognito are not recorded; when nothing was recorded "
            "the answer is 202 with `recorded: false`."
        ),
        request=ToolCallsDoc,
        responses={
            201: inline_serializer(
                "ToolCallsOut",
                {
                    "recorded": serializers.BooleanField(),
                    "count": serializers.IntegerField(),
                    "incognito": serializers.IntegerField(),
                    "error_items": serializers.ListField(child=serializers.IntegerField()),
                    "resolved_items": serializers.ListField(child=serializers.IntegerField()),
                },
            ),
            202: OpenApiResponse(
                OpenApiTypes.OBJECT, description="Nothing recorded (all calls incognito)."
            ),
            **_errors(400, 401, 422),
        },
        examples=[
            OpenApiExample(
                "A failure then a fix",
                value={
                    "calls": [
                        {
                            "session_id": "s-42",
                            "tool": "shell",
                            "operation_key": "pytest",
                            "ok": False,
                            "error": "3 failed",
                            "duration_ms": 5400,
                        },
                        {
                            "session_id": "s-42",
                            "tool": "shell",
                            "operation_key": "pytest",
                            "ok": True,
                            "duration_ms": 5100,
                        },
                    ]
                },
                request_only=True,
            )
        ],
        tags=[TAG_CONVERSATIONS],
    )
    def post(self, request):
        data = ToolCallsIn(data=request.data)
        data.is_valid(raise_exception=True)
        calls = _validated_list(ToolCallIn, data.validated_data["calls"], "calls")
        result = tool_calls_log(workspace=_workspace(request), agent=request.user, calls=calls)
        body = {
            "recorded": result.recorded > 0,
            "count": result.recorded,
            "incognito": result.incognito,
            "error_items": [i.pk for i in result.error_items if i.status == KnowledgeStatus.ACTIVE],
            "resolved_items": [i.pk for i in result.resolved_items],
        }
        return Response(
            body, status=status.HTTP_201_CREATED if result.recorded else status.HTTP_202_ACCEPTED
        )


class ToolStatsParams(serializers.Serializer):
    tool = TextField(max_length=100, required=False)
    since = serializers.DateTimeField(required=False)


class ToolCallStatsApi(APIView):
    @extend_schema(
        operation_id="tool_calls_stats",
        summary="Per-tool success rates and recent errors",
        parameters=[ToolStatsParams],
        responses={
            200: inline_serializer(
                "ToolStatsOut",
                {
                    "tools": inline_serializer(
                        "ToolStat",
                        {
                            "tool": serializers.CharField(),
                            "total": serializers.IntegerField(),
                            "ok": serializers.IntegerField(),
                            "failed": serializers.IntegerField(),
                            "success_rate": serializers.FloatField(),
                            "avg_duration_ms": serializers.FloatField(allow_null=True),
                            "last_at": serializers.DateTimeField(),
                            "last_error": serializers.CharField(allow_null=True),
                        },
                        many=True,
                    ),
                    "recent_errors": inline_serializer(
                        "ToolError",
                        {
                            "tool": serializers.CharField(),
                            "operation_key": serializers.CharField(),
                            "error": serializers.CharField(),
                            "at": serializers.DateTimeField(),
                            "session_id": serializers.CharField(),
                        },
                        many=True,
                    ),
                },
            ),
            **_errors(400, 401),
        },
        tags=[TAG_CONVERSATIONS],
    )
    def get(self, request):
        params = ToolStatsParams(data=request.query_params)
        params.is_valid(raise_exception=True)
        stats = tool_call_stats(workspace=_workspace(request), **params.validated_data)
        return Response(stats)


urlpatterns = [
    path("knowledge/", KnowledgeCollectionApi.as_view(), name="knowledge"),
    path("knowledge/batch/", KnowledgeBatchApi.as_view(), name="knowledge-batch"),
    path("knowledge/<int:item_id>/", KnowledgeDetailApi.as_view(), name="knowledge-detail"),
    path("recall/", RecallApi.as_view(), name="recall"),
    path("sessions/<str:session_id>/turns/", SessionTurnsApi.as_view(), name="session-turns"),
    path("conversations/search/", ConversationSearchApi.as_view(), name="conversations-search"),
    path("tool-calls/", ToolCallsApi.as_view(), name="tool-calls"),
    path("tool-calls/stats/", ToolCallStatsApi.as_view(), name="tool-calls-stats"),
]
