"""Agent API: outside evidence about a lesson or knowledge item (SPEC sections 4 and 11)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.apis.common import BIGINT_MAX, LEARNING_ERRORS, TAG_OUTCOMES, actor, errors, validated
from memory.lessons.posted_evidence import evidence_record
from memory.models import EvidenceKind, TargetType


class EvidenceCreateApi(APIView):
    class EvidenceInputSerializer(serializers.Serializer):
        evidence_id = serializers.CharField(max_length=200)
        kind = serializers.ChoiceField(
            choices=[
                EvidenceKind.DIFF_ACCEPTED,
                EvidenceKind.USER_CONFIRMED,
                EvidenceKind.SELF_REPORT,
            ]
        )
        target_type = serializers.ChoiceField(choices=TargetType.choices)
        target_id = serializers.IntegerField(min_value=1, max_value=BIGINT_MAX)

    class EvidenceOutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        evidence_id = serializers.CharField()
        kind = serializers.CharField()
        target_type = serializers.CharField()
        target_id = serializers.IntegerField()
        channel = serializers.ChoiceField(
            choices=["agent", "harness"], help_text="the token's channel of trust"
        )
        counted_as = serializers.CharField(
            help_text="the kind that was applied: from an agent token, self_report"
        )
        confidence_before = serializers.FloatField()
        confidence_after = serializers.FloatField()
        state = serializers.CharField(allow_null=True, help_text="the lesson's state after")

    @extend_schema(
        operation_id="evidence_create",
        summary="Post evidence about a lesson or knowledge item",
        description=(
            "`diff_accepted` and `user_confirmed` add +0.15 and need a **harness-scoped** "
            "token (the process that talks to the person; an agent token gets 403). "
            "`self_report` is recorded and worth zero (it refreshes recency only). "
            "Idempotent on `evidence_id` per workspace and token scope: the same id again answers 200 "
            "with the same body."
        ),
        request=EvidenceInputSerializer,
        responses={
            201: EvidenceOutputSerializer,
            200: OpenApiResponse(EvidenceOutputSerializer, description="A retry: the stored body."),
            **errors(400, 401, 403, 404, 422, area=LEARNING_ERRORS),
        },
        examples=[
            OpenApiExample(
                "A person accepted the diff",
                request_only=True,
                value={
                    "evidence_id": "review-981",
                    "kind": "diff_accepted",
                    "target_type": "lesson",
                    "target_id": 12,
                },
            )
        ],
        tags=[TAG_OUTCOMES],
    )
    def post(self, request):
        data = validated(self.EvidenceInputSerializer, request.data)
        body, created = evidence_record(
            workspace=request.auth.workspace, actor=actor(request), **data
        )
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)
