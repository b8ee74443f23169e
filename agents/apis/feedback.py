"""Agent API: trust-ledger feedback samples (SPEC sections 6 and 11)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.apis.common import SKILL_ERRORS, TAG_SKILLS, actor, errors
from memory.skills.trust import SAMPLE_ID_MAX_CHARS, feedback_record, trust_progress_get


class FeedbackApi(APIView):
    class FeedbackInputSerializer(serializers.Serializer):
        action_type = serializers.CharField(max_length=100)
        scope = serializers.CharField(max_length=200)
        positive = serializers.BooleanField()
        sample_id = serializers.CharField(
            max_length=SAMPLE_ID_MAX_CHARS,
            help_text="The harness's own id for what it observed, unique per agent: a retry "
            "with the same id changes nothing and answers the stored sample (200).",
        )
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
        sample_id = serializers.CharField(
            max_length=SAMPLE_ID_MAX_CHARS,
            help_text="The harness's own id for what it observed, unique per agent: a retry "
            "with the same id changes nothing and answers the stored sample (200).",
        )
        delta_ids = serializers.ListField(child=serializers.IntegerField())
        progress = serializers.DictField()

    @extend_schema(
        operation_id="feedback_create",
        summary="Record a trust-ledger sample",
        description=(
            "A user-observable outcome (accepted, undone, corrected) on a scope, reported by "
            "the harness: a harness-scoped token is required (403 otherwise), and "
            "`sample_id` is unique per agent, so a retry adds nothing (200 with the stored "
            "sample). An outcome_evidence delta can be approved only once its scope has ≥ 5 "
            "samples at ≥ 0.85 positive. `delta_ids` attributes the sample to this agent's "
            "deltas that were in context (their success and attempt counts move). Deltas "
            "listed in a harness outcome's `in_play` are scored from the outcome itself."
        ),
        request=FeedbackInputSerializer,
        responses={
            201: FeedbackOutputSerializer,
            200: OpenApiResponse(
                FeedbackOutputSerializer, description="A retry: the stored sample, unchanged."
            ),
            **errors(400, 401, 403, 422, area=SKILL_ERRORS),
        },
        tags=[TAG_SKILLS],
    )
    def post(self, request):
        data = self.FeedbackInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        written = feedback_record(
            actor=actor(request),
            action_type=values["action_type"],
            scope=values["scope"],
            positive=values["positive"],
            sample_id=values["sample_id"],
            delta_ids=values.get("delta_ids"),
        )
        sample = written.sample
        progress = trust_progress_get(workspace=request.auth.workspace, scope=sample.scope)
        body = {
            "id": sample.pk,
            "sample_id": sample.sample_id,
            "scope": sample.scope,
            "positive": sample.positive,
            "delta_ids": sample.delta_ids,
            "progress": progress,
        }
        code = status.HTTP_201_CREATED if written.created else status.HTTP_200_OK
        return Response(self.FeedbackOutputSerializer(body).data, status=code)
