"""Agent API: plan-time context and the decision-time lesson check (SPEC sections 4
and 11). Serving refreshes recency, never confidence; an ``incognito=true`` read
refreshes nothing (it records no use of what it served)."""

from __future__ import annotations

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.apis.common import (
    INCOGNITO_READ_HELP,
    LEARNING_ERRORS,
    TAG_LESSONS,
    TAG_OUTCOMES,
    ProjectFields,
    errors,
    project_args,
)
from memory.identity.projects import project_digest
from memory.lessons.context import context_build, lesson_check
from memory.lessons.services import context_mark_served


class ContextApi(APIView):
    class ContextQuerySerializer(ProjectFields):
        machine = serializers.RegexField(
            r"^[A-Za-z0-9:._-]{1,128}$", max_length=128, required=False, allow_blank=True
        )
        context = serializers.CharField(max_length=200, required=False, allow_blank=True)
        now = serializers.DateTimeField(
            required=False, help_text="render as of this time (ISO 8601); default: now"
        )
        incognito = serializers.BooleanField(
            required=False, default=False, help_text=INCOGNITO_READ_HELP
        )

        def validate_now(self, value):
            if not 1970 <= value.year <= 9000:
                raise serializers.ValidationError("Use a time between 1970 and 9000.")
            return value

    class ContextOutputSerializer(serializers.Serializer):
        text = serializers.CharField(help_text="stable + dynamic, ready for the prompt")
        stable = serializers.CharField(help_text="byte-identical for the same state")
        dynamic = serializers.CharField(help_text="current time and reminders")
        digest = serializers.CharField(help_text="sha256 of `stable`")
        lessons_tokens = serializers.IntegerField()
        lessons = serializers.ListField(child=serializers.DictField())
        errors = serializers.ListField(child=serializers.DictField())
        blockers = serializers.ListField(child=serializers.DictField())
        memory = serializers.DictField()

    @extend_schema(
        operation_id="context_get",
        summary="Plan-time context: lessons, known errors, blockers and the memory block",
        description=(
            "At most 5 active lessons (this project's and global ones), ranked by "
            "confidence x exp(-days since their last evidence / 30), within 300 tokens "
            "(estimated as ceil(chars/4)). Serving refreshes the lessons' `last_used_at` and "
            "`use_count`, never their confidence or rank. `stable` is byte-identical for the "
            "same state; `dynamic` carries the time (pass `now` to fix it). `blockers`: at "
            "most 3 live situation lessons for `machine` (its fingerprint digest), also in "
            '`stable` under "Known blockers on this machine:".'
        ),
        parameters=[
            ContextQuerySerializer,
        ],
        responses={200: ContextOutputSerializer, **errors(400, 401, area=LEARNING_ERRORS)},
        tags=[TAG_OUTCOMES],
    )
    def get(self, request):
        query = self.ContextQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        data = query.validated_data
        project = project_args(request, data)
        built = context_build(
            workspace=request.auth.workspace,
            project_digest=project_digest(remote=project["remote"], path=project["path"]),
            context=data.get("context") or None,
            now=data.get("now") or timezone.now(),
            machine=data.get("machine") or "",
        )
        served = built.pop("served")
        if not data["incognito"]:
            context_mark_served(lesson_ids=served["lessons"], knowledge_ids=served["knowledge"])
        return Response(built)


class LessonCheckApi(APIView):
    class LessonCheckQuerySerializer(ProjectFields):
        operation_key = serializers.CharField(max_length=200)
        context = serializers.CharField(max_length=200, required=False, allow_blank=True)
        machine = serializers.RegexField(
            r"^[A-Za-z0-9:._-]{1,128}$", max_length=128, required=False, allow_blank=True
        )
        incognito = serializers.BooleanField(
            required=False, default=False, help_text=INCOGNITO_READ_HELP
        )

    class LessonCheckOutputSerializer(serializers.Serializer):
        operation_key = serializers.CharField()
        text = serializers.CharField()
        lessons = serializers.ListField(child=serializers.DictField())
        errors = serializers.ListField(child=serializers.DictField())
        blockers = serializers.ListField(child=serializers.DictField())

    @extend_schema(
        operation_id="lesson_check",
        summary="Decision time: lessons, errors and blockers for one operation",
        description=(
            "Before a risky action: the active lessons about this operation (or warning "
            "against it), the known errors on it, and `blockers`: live situation lessons on "
            "`machine` whose subject is this operation (or its head: `gh` for "
            "`gh:pr-list`), each with its `probe`. Probe first; still blocked means "
            "escalate now (post the probe to /turns/{id}/results/ and it answers "
            "`escalate` citing the lesson)."
        ),
        parameters=[LessonCheckQuerySerializer],
        responses={200: LessonCheckOutputSerializer, **errors(400, 401, area=LEARNING_ERRORS)},
        tags=[TAG_LESSONS],
    )
    def get(self, request):
        query = self.LessonCheckQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        data = query.validated_data
        project = project_args(request, data)
        built = lesson_check(
            workspace=request.auth.workspace,
            project_digest=project_digest(remote=project["remote"], path=project["path"]),
            operation_key=data["operation_key"],
            context=data.get("context") or None,
            machine=data.get("machine") or "",
            now=timezone.now(),
        )
        served = built.pop("served")
        if not data["incognito"]:
            context_mark_served(lesson_ids=served["lessons"], knowledge_ids=served["knowledge"])
        return Response(built)
