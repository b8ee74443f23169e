"""Agent API: trust-ledger feedback samples (SPEC sections 6 and 11)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.apis.common import SKILL_ERRORS, TAG_SKILLS, errors
from memory.skills.trust import feedback_record, trust_progress_get


class FeedbackApi(APIView):
    class FeedbackInputSerializer(serializers.Serializer):
        action_type = serializers.CharField(max_length=100)
        scope = serializers.CharField(max_length=200)
        positive = serializers.BooleanField()
        delta_ids = serializers.ListField(
            child=serializers.IntegerField(min_value=1, max_value=2**63 - 1),
            required=False,
            max_length=50,
        )

    class TrustProgressSerializer(serializers.Serializer):
        scope = serializers.CharField()
        samples = serializers.IntegerField()
        positive = serializers.IntegerField()
        ratio = serializers.FloatField()
        required_samples = serializers.IntegerField()
        required_ratio = serializers.FloatField()
        met = serializers.BooleanField()
        message = serializers.CharField()

    class FeedbackOutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        scope = serializers.CharField()
        positive = serializers.BooleanField()
        delta_ids = serializers.ListField(child=serializers.IntegerField())
        progress = serializers.DictField()

    @extend_schema(
        operation_id="feedback_create",
        summary="Record a trust-ledger sample",
        description=(
            "A user-observable outcome (accepted, undone, corrected) on a scope. An "
            "outcome_evidence delta can be approved only once its scope has ≥ 5 samples at "
            "≥ 0.85 positive. `delta_ids` attributes the sample to this agent's deltas that "
            "were in context (their success and attempt counts move)."
        ),
        request=FeedbackInputSerializer,
        responses={201: FeedbackOutputSerializer, **errors(400, 401, 422, area=SKILL_ERRORS)},
        tags=[TAG_SKILLS],
    )
    def post(self, request):
        data = self.FeedbackInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        sample = feedback_record(
            agent=request.user,
            action_type=values["action_type"],
            scope=values["scope"],
            positive=values["positive"],
            delta_ids=values.get("delta_ids"),
        )
        progress = trust_progress_get(workspace=request.auth.workspace, scope=sample.scope)
        body = {
            "id": sample.pk,
            "scope": sample.scope,
            "positive": sample.positive,
            "delta_ids": sample.delta_ids,
            "progress": progress,
        }
        return Response(self.FeedbackOutputSerializer(body).data, status=status.HTTP_201_CREATED)
