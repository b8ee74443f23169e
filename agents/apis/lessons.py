"""Agent API: lessons: list, create, read, edit, retire and history (SPEC sections 4
and 11). Another workspace's lesson answers 404 like a missing one."""

from __future__ import annotations

from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    inline_serializer,
)
from rest_framework import serializers, status
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.apis.common import (
    BIGINT_MAX,
    INT_MAX,
    LEARNING_ERRORS,
    TAG_LESSONS,
    ProjectFields,
    actor,
    errors,
    project_args,
)
from agents.apis.provenance import ProvenanceField
from cairn.errors import ApplicationError
from memory.identity.projects import project_digest, project_digest_required
from memory.lessons.lifecycle import lesson_edit, lesson_retire
from memory.lessons.selectors import (
    lesson_evidence_summary,
    lesson_get,
    lesson_history,
    lesson_list,
)
from memory.lessons.services import lesson_create
from memory.models import LessonScope, LessonSource, LessonState


class LessonOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    text = serializers.CharField()
    operation_key = serializers.CharField()
    rationale = serializers.CharField(help_text="why the agent proposed it (may be empty)")
    avoid_operation_key = serializers.CharField()
    target = serializers.CharField()
    scope = serializers.ChoiceField(choices=LessonScope.choices)
    project_digest = serializers.CharField()
    confidence = serializers.FloatField()
    provenance = ProvenanceField(kind="lesson")
    state = serializers.ChoiceField(choices=LessonState.choices)
    source = serializers.CharField(help_text="loop, extractor, model or user")
    pinned = serializers.BooleanField()
    sealed = serializers.BooleanField()
    use_count = serializers.IntegerField()
    last_used_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    superseded_by = serializers.IntegerField(source="superseded_by_id", allow_null=True)
    supersede_reason = serializers.CharField()
    retired_by = serializers.CharField(help_text="agent, person or system; empty while live")
    retired_reason = serializers.CharField()
    retired_at = serializers.DateTimeField(allow_null=True)
    evidence = serializers.SerializerMethodField(help_text="ids of outcomes that support this row")
    contradicted_by = serializers.SerializerMethodField(
        help_text="ids of failed outcomes that contradicted this row"
    )
    sources = serializers.SerializerMethodField(
        help_text="project lessons promoted into this (global) one"
    )
    cited = serializers.SerializerMethodField(
        help_text="ids of outcomes cited when the lesson was posted: kept, weighed only once "
        "a harness outcome with the lesson in play has confirmed it"
    )

    @extend_schema_field(serializers.ListField(child=serializers.IntegerField()))
    def get_evidence(self, lesson) -> list[int]:
        return lesson_evidence_summary(lesson)["evidence"]

    @extend_schema_field(serializers.ListField(child=serializers.IntegerField()))
    def get_contradicted_by(self, lesson) -> list[int]:
        return lesson_evidence_summary(lesson)["contradicted_by"]

    @extend_schema_field(serializers.ListField(child=serializers.IntegerField()))
    def get_sources(self, lesson) -> list[int]:
        return lesson_evidence_summary(lesson)["sources"]

    @extend_schema_field(serializers.ListField(child=serializers.IntegerField()))
    def get_cited(self, lesson) -> list[int]:
        return lesson_evidence_summary(lesson)["cited"]


def _lesson_body(lesson) -> dict:
    return dict(LessonOutputSerializer(lesson).data)


class LessonPagination(LimitOffsetPagination):
    default_limit = 50
    max_limit = 200


class LessonsApi(APIView):
    """``GET`` lists lessons; ``POST`` creates one, claimed (evidence it names is cited)."""

    class LessonCreateSerializer(ProjectFields):
        text = serializers.CharField(max_length=2000, help_text="one imperative sentence")
        operation_key = serializers.CharField(max_length=200)
        rationale = serializers.CharField(
            max_length=400,
            required=False,
            allow_blank=True,
            help_text="why the agent proposes it, shown to reviewers (credentials are refused)",
        )
        evidence = serializers.ListField(
            child=serializers.IntegerField(min_value=1, max_value=BIGINT_MAX),
            max_length=50,
            default=list,
            help_text="ids of passed outcomes of this project (as the server returned them)",
        )
        scope = serializers.ChoiceField(choices=LessonScope.choices, default=LessonScope.PROJECT)
        source = serializers.ChoiceField(
            choices=[LessonSource.MODEL, LessonSource.EXTRACTOR], default=LessonSource.MODEL
        )

    class LessonListQuerySerializer(ProjectFields):
        state = serializers.ChoiceField(choices=LessonState.choices, required=False)
        scope = serializers.ChoiceField(choices=LessonScope.choices, required=False)
        operation_key = serializers.CharField(max_length=200, required=False)
        include_superseded = serializers.BooleanField(default=False)
        limit = serializers.IntegerField(min_value=1, max_value=200, required=False)
        offset = serializers.IntegerField(min_value=0, max_value=INT_MAX, required=False)

    class LessonCreatedSerializer(LessonOutputSerializer):
        deduplicated_into = serializers.IntegerField(
            allow_null=True, help_text="set when an equivalent lesson took the evidence instead"
        )

    @extend_schema(
        operation_id="lesson_list",
        summary="List lessons",
        parameters=[LessonListQuerySerializer],
        responses={
            200: inline_serializer(
                "LessonPage",
                {
                    "count": serializers.IntegerField(),
                    "next": serializers.URLField(allow_null=True),
                    "previous": serializers.URLField(allow_null=True),
                    "results": LessonOutputSerializer(many=True),
                },
            ),
            **errors(400, 401, area=LEARNING_ERRORS),
        },
        tags=[TAG_LESSONS],
    )
    def get(self, request):
        query = self.LessonListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        data = query.validated_data
        project = project_args(request, data)
        lessons = lesson_list(
            workspace=request.auth.workspace,
            state=data.get("state"),
            scope=data.get("scope"),
            operation_key=data.get("operation_key"),
            project_digest=project_digest(remote=project["remote"], path=project["path"]) or None,
            include_superseded=data["include_superseded"],
        )
        paginator = LessonPagination()
        page = paginator.paginate_queryset(lessons, request, view=self)
        return paginator.get_paginated_response([_lesson_body(lesson) for lesson in page])

    @extend_schema(
        operation_id="lesson_create",
        summary="Create a lesson",
        description=(
            "The lesson is stored *claimed* at 0.3 and never served until a harness outcome "
            "with it in `in_play` confirms it. Each evidence id must be a harness outcome of "
            "this workspace and project that passed and ran the operation; otherwise 422 names "
            "each id and why, and nothing is written. Valid ids are kept as `cited` and count "
            "once, when that first in-play confirmation comes (the lesson then stands at 0.5 "
            "before the confirmation's +0.15). Global lessons are earned by promotion only. An "
            "equivalent live lesson is answered instead (200, `deduplicated_into`) and keeps "
            "the new ids as cited: posting it again moves nothing."
        ),
        request=LessonCreateSerializer,
        responses={
            201: LessonCreatedSerializer,
            200: OpenApiResponse(
                LessonCreatedSerializer, description="An equivalent lesson existed."
            ),
            **errors(400, 401, 422, area=LEARNING_ERRORS),
        },
        examples=[
            OpenApiExample(
                "A lesson with evidence",
                request_only=True,
                value={
                    "text": "Run pytest from the repository root, not from tests/.",
                    "operation_key": "pytest:.",
                    "evidence": [1042],
                    "project_remote": "https://github.com/acme/shop",
                },
            ),
            OpenApiExample(
                "Fabricated evidence",
                response_only=True,
                status_codes=["422"],
                value={
                    "error": {
                        "code": "evidence_refused",
                        "message": "Evidence refused: 999: unknown outcome (no such outcome "
                        "in this workspace).",
                        "fields": {
                            "evidence": ["999: unknown outcome (no such outcome in this workspace)"]
                        },
                    }
                },
            ),
        ],
        tags=[TAG_LESSONS],
    )
    def post(self, request):
        serializer = self.LessonCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        if data["scope"] == LessonScope.GLOBAL:
            raise ApplicationError(
                "Global lessons are earned by promotion (confirmed in two projects), not posted.",
                code="global_not_postable",
                fields={"scope": ["project only"]},
            )
        project = project_args(request, data)
        lesson, created = lesson_create(
            workspace=request.auth.workspace,
            agent=request.user,
            channel=actor(request).channel,
            text=data["text"],
            operation_key=data["operation_key"],
            project_digest=project_digest_required(remote=project["remote"], path=project["path"]),
            evidence_ids=data["evidence"],
            source=data["source"],
            rationale=data.get("rationale"),
        )
        lesson = lesson_get(workspace=request.auth.workspace, lesson_id=lesson.pk)
        body = {**_lesson_body(lesson), "deduplicated_into": None if created else lesson.pk}
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class LessonDetailApi(APIView):
    class LessonEditSerializer(serializers.Serializer):
        text = serializers.CharField(max_length=2000, required=False)
        operation_key = serializers.CharField(max_length=200, required=False)

        def validate(self, attrs):
            if not attrs:
                raise serializers.ValidationError({"text": ["Give text or operation_key."]})
            return attrs

    class LessonEditedSerializer(LessonOutputSerializer):
        previous_id = serializers.IntegerField()

    @extend_schema(
        operation_id="lesson_get",
        summary="Read a lesson",
        responses={200: LessonOutputSerializer, **errors(401, 404, area=LEARNING_ERRORS)},
        tags=[TAG_LESSONS],
    )
    def get(self, request, lesson_id: int):
        lesson = lesson_get(workspace=request.auth.workspace, lesson_id=lesson_id)
        return Response(_lesson_body(lesson))

    @extend_schema(
        operation_id="lesson_edit",
        summary="Edit a lesson (answers with the new id)",
        description=(
            "An edit inserts a new row; the old row is superseded and stays in the history. "
            "New words from a token start *claimed* at 0.3 (or lower, if the old row had "
            "fallen below) with no evidence and no pin, until a harness outcome with the new "
            "row in play confirms it; a person's edit in the review UI keeps what the old row "
            "had earned."
        ),
        request=LessonEditSerializer,
        responses={200: LessonEditedSerializer, **errors(400, 401, 404, 422, area=LEARNING_ERRORS)},
        tags=[TAG_LESSONS],
    )
    def patch(self, request, lesson_id: int):
        lesson = lesson_get(workspace=request.auth.workspace, lesson_id=lesson_id)
        serializer = self.LessonEditSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        edited = lesson_edit(lesson=lesson, actor=actor(request), **serializer.validated_data)
        edited = lesson_get(workspace=request.auth.workspace, lesson_id=edited.pk)
        return Response({**_lesson_body(edited), "previous_id": lesson.pk})


class LessonRetireApi(APIView):
    class LessonRetireSerializer(serializers.Serializer):
        reason = serializers.CharField(max_length=300, required=False, allow_blank=True)

    @extend_schema(
        operation_id="lesson_retire",
        summary="Retire (forget) a lesson",
        description="The row is kept as history with `retired_by: agent`.",
        request=LessonRetireSerializer,
        responses={200: LessonOutputSerializer, **errors(400, 401, 404, 422, area=LEARNING_ERRORS)},
        tags=[TAG_LESSONS],
    )
    def post(self, request, lesson_id: int):
        lesson = lesson_get(workspace=request.auth.workspace, lesson_id=lesson_id)
        serializer = self.LessonRetireSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        lesson_retire(
            lesson=lesson,
            actor=actor(request),
            reason=serializer.validated_data.get("reason", ""),
        )
        lesson = lesson_get(workspace=request.auth.workspace, lesson_id=lesson_id)
        return Response(_lesson_body(lesson))


class LessonHistoryApi(APIView):
    class LessonOutcomeRefSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        outcome_id = serializers.CharField()
        relation = serializers.CharField()
        passed = serializers.BooleanField(allow_null=True)
        at = serializers.DateTimeField()

    class LessonChangeSerializer(serializers.Serializer):
        before = serializers.FloatField()
        after = serializers.FloatField()
        kind = serializers.CharField()
        cause = serializers.CharField()
        evidence_id = serializers.CharField()
        at = serializers.DateTimeField()

    @extend_schema(
        operation_id="lesson_history",
        summary="A lesson's supersede chain, with evidence per version",
        responses={
            200: inline_serializer(
                "LessonHistory",
                {
                    "id": serializers.IntegerField(),
                    "versions": inline_serializer(
                        "LessonVersion",
                        {
                            "lesson": LessonOutputSerializer(),
                            "outcomes": LessonOutcomeRefSerializer(many=True),
                            "changes": LessonChangeSerializer(many=True),
                        },
                        many=True,
                    ),
                },
            ),
            **errors(401, 404, area=LEARNING_ERRORS),
        },
        tags=[TAG_LESSONS],
    )
    def get(self, request, lesson_id: int):
        lesson = lesson_get(workspace=request.auth.workspace, lesson_id=lesson_id)
        history = lesson_history(lesson=lesson)
        return Response(
            {
                "id": history["id"],
                "versions": [
                    {
                        "lesson": _lesson_body(version["lesson"]),
                        "outcomes": self.LessonOutcomeRefSerializer(
                            version["outcomes"], many=True
                        ).data,
                        "changes": self.LessonChangeSerializer(version["changes"], many=True).data,
                    }
                    for version in history["versions"]
                ],
            }
        )
