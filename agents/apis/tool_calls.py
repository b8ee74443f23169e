"""Agent API: tool-call logging (which keeps one error item per failing operation)
and per-tool statistics (SPEC sections 3 and 11)."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.apis.common import (
    KNOWLEDGE_ERRORS,
    TAG_CONVERSATIONS,
    StrictSerializer,
    TextField,
    actor,
    errors,
    request_workspace,
    validated,
    validated_list,
)
from memory.knowledge.conversations import tool_calls_log
from memory.knowledge.selectors import tool_call_stats
from memory.models import KnowledgeStatus


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
    known_error = serializers.BooleanField(
        required=False,
        default=True,
        help_text="false: a failure that says nothing about how to run the operation (a "
        "failing test run, a search that found nothing); logged, never made a known error",
    )
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
            "`operation_key` (source error_auto) unless it says `known_error: false`; a later "
            "successful call on the same operation "
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
            **errors(400, 401, 422, area=KNOWLEDGE_ERRORS),
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
        data = validated(ToolCallsIn, request.data)
        calls = validated_list(ToolCallIn, data["calls"], "calls")
        result = tool_calls_log(
            workspace=request_workspace(request),
            agent=request.user,
            calls=calls,
            channel=actor(request).channel,
        )
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
            **errors(400, 401, area=KNOWLEDGE_ERRORS),
        },
        tags=[TAG_CONVERSATIONS],
    )
    def get(self, request):
        params = ToolStatsParams(data=request.query_params)
        params.is_valid(raise_exception=True)
        stats = tool_call_stats(workspace=request_workspace(request), **params.validated_data)
        return Response(stats)
