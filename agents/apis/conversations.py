"""Agent API: conversation turns per session, and full-text search over them
(SPEC sections 3 and 11)."""

from __future__ import annotations

from django.conf import settings
from django.utils import timezone
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
    inline_serializer,
)
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.apis.common import (
    KNOWLEDGE_ERRORS,
    SURROGATE,
    TAG_CONVERSATIONS,
    PageParams,
    StrictSerializer,
    TextField,
    actor,
    errors,
    page_body,
    paginated_serializer,
    request_workspace,
    validated,
    validated_list,
)
from agents.apis.recall import TimeWindowOut, as_of_field, time_window_body
from memory.knowledge.conversations import turn_store, turns_store_many
from memory.knowledge.selectors import turns_list
from memory.knowledge.turn_search import NEIGHBOURS_MAX, conversation_search
from memory.models.conversations import TURN_CONTENT_MAX_CHARS, TurnRole


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


class BatchTurnIn(StrictSerializer):
    role = serializers.ChoiceField(choices=TurnRole.choices)
    content = TextField(max_length=TURN_CONTENT_MAX_CHARS)
    turn_index = serializers.IntegerField(min_value=0, max_value=2**31 - 1)
    context = TextField(max_length=200, required=False, default="global")
    at = serializers.DateTimeField(required=False, help_text="When it was said (default now).")


class TurnBatchIn(StrictSerializer):
    turns = serializers.ListField(
        child=serializers.DictField(),
        min_length=1,
        max_length=settings.CAIRN_TURN_BATCH_MAX,
        help_text=f"Up to {settings.CAIRN_TURN_BATCH_MAX} turns of this session "
        "({role, content, turn_index, context?, at?}), stored all or none in one statement.",
    )
    incognito = serializers.BooleanField(required=False, default=False)


class TurnBatchRowOut(serializers.Serializer):
    id = serializers.IntegerField()
    role = serializers.CharField()
    turn_index = serializers.IntegerField()
    created = serializers.BooleanField(help_text="false when it was stored before (a retry).")


class TurnBatchOut(serializers.Serializer):
    recorded = serializers.BooleanField()
    session_id = serializers.CharField(required=False)
    created = serializers.IntegerField(required=False)
    existing = serializers.IntegerField(required=False)
    turns = TurnBatchRowOut(many=True, required=False)


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
    if len(raw) > 200 or "\x00" in raw or SURROGATE.search(raw) or not raw.strip():
        raise serializers.ValidationError(
            {"session_id": ["Must be 1–200 characters without NUL characters."]}
        )
    return raw


class SessionTurnsApi(APIView):
    @extend_schema(
        operation_id="session_turn_store",
        summary="Store a conversation turn (or a batch of turns)",
        description="201 when stored; 200 when the same turn (session, turn_index, role, "
        "content) was stored before (a retry); 409 when that turn exists with other content; "
        '202 `{"recorded": false}` for incognito. Credentials are refused (422).\n\n'
        f'**Batch form**: a body `{{"turns": [...]}}` with up to {settings.CAIRN_TURN_BATCH_MAX} '
        "turns stores them all or none in one statement (errors name `turns[i].field`); "
        "201 when any turn was new, 200 when every one was stored before.",
        request=PolymorphicProxySerializer(
            component_name="TurnOrBatchIn",
            serializers=[TurnIn, TurnBatchIn],
            resource_type_field_name=None,
        ),
        responses={
            201: PolymorphicProxySerializer(
                component_name="TurnOrBatchOut",
                serializers=[TurnOut, TurnBatchOut],
                resource_type_field_name=None,
            ),
            200: OpenApiResponse(TurnOut, description="Already stored (retry)."),
            202: OpenApiResponse(TurnOut, description="Incognito: nothing recorded."),
            **errors(400, 401, 409, 422, area=KNOWLEDGE_ERRORS),
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
        if isinstance(request.data, dict) and "turns" in request.data:
            return self._post_batch(request, session_id)
        data = validated(TurnIn, request.data)
        result = turn_store(
            workspace=request_workspace(request),
            agent=request.user,
            session_id=session_id,
            channel=actor(request).channel,
            **data,
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

    def _post_batch(self, request, session_id: str):
        data = validated(TurnBatchIn, request.data)
        turns = validated_list(BatchTurnIn, data["turns"], "turns")
        result = turns_store_many(
            workspace=request_workspace(request),
            agent=request.user,
            session_id=session_id,
            turns=turns,
            incognito=data["incognito"],
            channel=actor(request).channel,
        )
        if not result.recorded:
            return Response({"recorded": False}, status=status.HTTP_202_ACCEPTED)
        created = sum(result.created)
        return Response(
            {
                "recorded": True,
                "session_id": session_id,
                "created": created,
                "existing": len(result.created) - created,
                "turns": [
                    {"id": t.pk, "role": t.role, "turn_index": t.turn_index, "created": c}
                    for t, c in zip(result.turns, result.created, strict=True)
                ],
            },
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )

    @extend_schema(
        operation_id="session_turns_list",
        summary="A session's turns in order (paginated)",
        parameters=[PageParams],
        responses={
            200: paginated_serializer("TurnPage", TurnRowOut),
            **errors(400, 401, area=KNOWLEDGE_ERRORS),
        },
        tags=[TAG_CONVERSATIONS],
    )
    def get(self, request, session_id: str):
        session_id = _session_id(session_id)
        params = PageParams(data=request.query_params)
        params.is_valid(raise_exception=True)
        page = turns_list(
            workspace=request_workspace(request), session_id=session_id, **params.validated_data
        )
        return Response(page_body(page, TurnRowOut(page.items, many=True).data))


class ConversationSearchParams(PageParams):
    q = TextField(max_length=500, help_text="Words to find (web-search syntax).")
    session_id = TextField(max_length=200, required=False)
    context = TextField(max_length=200, required=False)
    role = serializers.ChoiceField(choices=TurnRole.choices, required=False)
    time_from = serializers.DateTimeField(required=False)
    time_to = serializers.DateTimeField(required=False)
    group = serializers.ChoiceField(
        choices=["turn", "session"],
        required=False,
        default="turn",
        help_text="`session`: rank sessions (by a soft maximum of their turns' relevance: "
        "the best turn, plus more for other good ones, plus a share for the query's words "
        "said anywhere in the session, rare words counting more); `sessions` lists them "
        "with their best turns, `results` holds those turns, and limit/offset/count count "
        "sessions. The order is the same whatever page is asked: sessions among the best "
        "CAIRN_TURN_SESSION_DEPTH (50) turns by that score, then further ones by their "
        "best turn.",
    )
    neighbours = serializers.IntegerField(
        required=False,
        default=0,
        min_value=0,
        max_value=NEIGHBOURS_MAX,
        help_text="Include this many turns before and after each hit (`neighbours` field).",
    )
    as_of = as_of_field()


class NeighbourTurnOut(serializers.Serializer):
    id = serializers.IntegerField()
    role = serializers.CharField()
    turn_index = serializers.IntegerField()
    content = serializers.CharField()
    created_at = serializers.DateTimeField()


class ConversationHitOut(serializers.Serializer):
    id = serializers.IntegerField()
    session_id = serializers.CharField()
    role = serializers.CharField()
    turn_index = serializers.IntegerField()
    context = serializers.CharField()
    created_at = serializers.DateTimeField()
    rank = serializers.FloatField(
        source="relevance",
        help_text="Fused relevance of vector and full-text ranks (1.0 = first in both).",
    )
    snippet = serializers.CharField(help_text="Matching fragments, matches in **bold**.")
    vector_rank = serializers.IntegerField(
        allow_null=True, help_text="Rank among the turns nearest in meaning (1 = nearest)."
    )
    text_rank = serializers.IntegerField(
        allow_null=True, help_text="Rank among the full-text (BM25) matches (1 = best)."
    )
    neighbours = NeighbourTurnOut(
        many=True, required=False, help_text="With `neighbours=N`: the turns around this one."
    )

    def to_representation(self, instance):
        data = super().to_representation(instance)
        if not self.context.get("neighbours"):
            data.pop("neighbours", None)
        return data


class ConversationSessionOut(serializers.Serializer):
    session_id = serializers.CharField()
    score = serializers.FloatField(
        help_text="Soft maximum of its turns' relevance (T·ln Σ exp(r/T)), plus "
        "CAIRN_TURN_SESSION_COVERAGE × the idf-weighted share of the query's words it says; "
        "a session past the best CAIRN_TURN_SESSION_DEPTH turns: its best turn's relevance."
    )
    matches = serializers.IntegerField(help_text="Turns of this session among the candidates.")
    turns = ConversationHitOut(many=True, source="hits", help_text="Its best turns.")


class ConversationSearchApi(APIView):
    @extend_schema(
        operation_id="conversations_search",
        summary="Search past conversations (hybrid: meaning and words, ranked snippets)",
        description="The same hybrid ranking as recall over turns: the turns nearest in "
        "meaning (pgvector HNSW) fused with full-text matches of any word scored by BM25 "
        "(`-word` exclusions hold on both sides). `mode: all` when some turn matches every "
        "word, else `any`. `count` counts the ranked candidates. `group=session` ranks "
        "sessions instead (`sessions`); `neighbours=N` (0–3) adds the turns around each hit.",
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
                    "time_window": TimeWindowOut(
                        allow_null=True,
                        help_text="The period the query names, read at `as_of`; null when "
                        "it names none.",
                    ),
                    "results": ConversationHitOut(many=True),
                    "sessions": ConversationSessionOut(
                        many=True, required=False, help_text="With `group=session` only."
                    ),
                },
            ),
            **errors(400, 401, area=KNOWLEDGE_ERRORS),
        },
        tags=[TAG_CONVERSATIONS],
    )
    def get(self, request):
        params = ConversationSearchParams(data=request.query_params)
        params.is_valid(raise_exception=True)
        query = dict(params.validated_data)
        as_of = query.pop("as_of", None) or timezone.now()
        result = conversation_search(workspace=request_workspace(request), as_of=as_of, **query)
        page = result.page
        context = {"neighbours": params.validated_data["neighbours"]}
        if result.sessions is not None:
            turns = [hit for s in result.sessions for hit in s.hits]
            body = page_body(page, ConversationHitOut(turns, many=True, context=context).data)
            body["sessions"] = ConversationSessionOut(
                result.sessions, many=True, context=context
            ).data
        else:
            body = page_body(page, ConversationHitOut(page.items, many=True, context=context).data)
        body["mode"] = result.mode
        body["time_window"] = time_window_body(result.window, as_of)
        return Response(body)
