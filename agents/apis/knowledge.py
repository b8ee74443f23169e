"""Agent API: knowledge items: remember (one or a batch), list, read, update, forget
(SPEC sections 3 and 11).

Every view scopes to the token's workspace (``request.auth.workspace``): another
workspace's ids answer 404, exactly like ids that do not exist. Views validate
shapes with serializers (400) and call memory services and selectors only.
"""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.apis.common import (
    KNOWLEDGE_ERRORS,
    TAG_KNOWLEDGE,
    EmbeddingField,
    PageParams,
    StrictSerializer,
    TextField,
    actor,
    errors,
    metadata_field,
    page_body,
    paginated_serializer,
    request_workspace,
    validated,
    validated_list,
)
from agents.apis.provenance import ProvenanceField
from memory.knowledge.batch import knowledge_remember_many
from memory.knowledge.remember import knowledge_remember
from memory.knowledge.selectors import knowledge_get, knowledge_list
from memory.knowledge.services import knowledge_forget, knowledge_update
from memory.knowledge.validation import AGENT_SOURCES
from memory.models import CONTENT_MAX_CHARS, Category, KnowledgeStatus


# The fields every knowledge item shows, listed or recalled: a base, never a schema
# component. (No docstring: drf-spectacular would copy it into every subclass's schema.)
class KnowledgeItemFields(serializers.Serializer):
    id = serializers.IntegerField()
    content = serializers.CharField()
    category = serializers.CharField()
    domain = serializers.CharField()
    entity = serializers.CharField()
    context = serializers.CharField()
    sensitive = serializers.BooleanField()
    source = serializers.CharField()
    confidence = serializers.FloatField()
    provenance = ProvenanceField()


class KnowledgeOut(KnowledgeItemFields):
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
    observed_at = serializers.DateTimeField(
        help_text="When it was said or seen (created_at unless the writer gave observed_at)."
    )
    updated_at = serializers.DateTimeField()
    archived_at = serializers.DateTimeField(allow_null=True)


class RememberOut(KnowledgeOut):
    deduplicated_into = serializers.IntegerField(
        allow_null=True,
        help_text="Set when the new item restated an active one (same category, context and "
        "entity; word overlap > 0.8, similar vectors, no new or conflicting numbers, dates or "
        "names; never transcript turns): that item was updated instead, keeping every source "
        "in metadata.merged; this is its id.",
    )
    overlap = serializers.FloatField(allow_null=True)


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
    metadata = metadata_field()
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
    observed_at = serializers.DateTimeField(
        required=False,
        allow_null=True,
        help_text="When it was said or seen, for imported history (not in the future; "
        "default now). Recall's time_from/time_to and recency use it.",
    )


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
            **errors(400, 401, 403, 422, area=KNOWLEDGE_ERRORS),
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
        data = validated(RememberIn, request.data)
        result = knowledge_remember(
            workspace=request_workspace(request), actor=actor(request), **data
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
        responses={
            200: paginated_serializer("KnowledgePage", KnowledgeOut),
            **errors(400, 401, area=KNOWLEDGE_ERRORS),
        },
        tags=[TAG_KNOWLEDGE],
    )
    def get(self, request):
        params = KnowledgeListParams(data=request.query_params)
        params.is_valid(raise_exception=True)
        page = knowledge_list(workspace=request_workspace(request), **params.validated_data)
        return Response(page_body(page, KnowledgeOut(page.items, many=True).data))


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
            **errors(400, 401, 403, 422, area=KNOWLEDGE_ERRORS),
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
        data = validated(RememberBatchIn, request.data)
        items = validated_list(RememberIn, data["items"], "items")
        results = knowledge_remember_many(
            workspace=request_workspace(request), actor=actor(request), items=items
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
    metadata = metadata_field()
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
        responses={200: KnowledgeOut, **errors(401, 404, area=KNOWLEDGE_ERRORS)},
        tags=[TAG_KNOWLEDGE],
    )
    def get(self, request, item_id: int):
        item = knowledge_get(workspace=request_workspace(request), item_id=item_id)
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
        responses={200: UpdateOut, **errors(400, 401, 403, 404, 409, 422, area=KNOWLEDGE_ERRORS)},
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
            workspace=request_workspace(request),
            item_id=item_id,
            actor=actor(request),
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
        responses={200: ForgetOut, **errors(401, 403, 404, area=KNOWLEDGE_ERRORS)},
        tags=[TAG_KNOWLEDGE],
    )
    def delete(self, request, item_id: int):
        item = knowledge_forget(
            workspace=request_workspace(request), item_id=item_id, actor=actor(request)
        )
        return Response(
            {
                "id": item.pk,
                "status": item.status,
                "archived_at": item.archived_at,
                "message": "Archived: out of recall, kept, restorable by a person.",
            }
        )
