"""Agent API: outcomes, evidence, lessons, plan-time context (SPEC sections 4 and 11).

Every view is scoped to the token's workspace; another workspace's ids answer
404 exactly like missing ones. Projects are named by ``project_remote`` and/or
``project_path`` (body or query) and only their digest is stored.
"""

from __future__ import annotations

from django.urls import path
from django.utils import timezone
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

from cairn.errors import ApplicationError
from memory.models import (
    CheckKind,
    EvidenceKind,
    LessonScope,
    LessonSource,
    LessonState,
    StepOutcome,
    TargetType,
)
from memory.selectors.lessons import (
    context_build,
    lesson_check,
    lesson_evidence_summary,
    lesson_get,
    lesson_history,
    lesson_list,
)
from memory.services.evidence import evidence_record
from memory.services.lessons import (
    context_mark_served,
    lesson_create,
    lesson_edit,
    lesson_retire,
)
from memory.services.outcomes import IN_PLAY_TYPES, outcome_record
from memory.services.projects import project_digest, project_digest_required

INT_MAX = 2_147_483_647
BIGINT_MAX = 9_223_372_036_854_775_807

# --- shared shapes -----------------------------------------------------------------------------

ErrorSerializer = inline_serializer(
    "ErrorResponse",
    {
        "error": inline_serializer(
            "ErrorBody",
            {
                "code": serializers.CharField(),
                "message": serializers.CharField(),
                "fields": serializers.DictField(child=serializers.ListField()),
            },
        )
    },
)


def _errors(*codes: int) -> dict:
    text = {
        400: "Bad input; `fields` names each field at fault.",
        401: "Missing or invalid token.",
        404: "No such item in this workspace.",
        422: "Refused by a rule; the message says which and why.",
    }
    return {code: OpenApiResponse(ErrorSerializer, description=text[code]) for code in codes}


class ProjectFields(serializers.Serializer):
    project_remote = serializers.CharField(
        required=False, allow_blank=True, max_length=2000, trim_whitespace=True
    )
    project_path = serializers.CharField(required=False, allow_blank=True, max_length=4096)


def _project_args(request, data: dict) -> dict:
    """``project_remote`` / ``project_path`` from the body, else from the query string."""
    remote = data.get("project_remote") or request.query_params.get("project_remote") or ""
    path_ = data.get("project_path") or request.query_params.get("project_path") or ""
    return {"remote": remote[:2000], "path": path_[:4096]}


class RefSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=IN_PLAY_TYPES)
    id = serializers.IntegerField(min_value=1, max_value=BIGINT_MAX)


@extend_schema_field(
    {
        "oneOf": [
            {
                "type": "object",
                "properties": {
                    "type": {"type": "string", "enum": list(IN_PLAY_TYPES)},
                    "id": {"type": "integer", "minimum": 1},
                },
                "required": ["type", "id"],
            },
            {"type": "string", "pattern": "^(lesson|knowledge|error|delta):[0-9]+$"},
        ]
    }
)
class InPlayRefField(serializers.Field):
    """``{"type": "lesson", "id": 12}`` or the shorthand ``"lesson:12"``."""

    default_error_messages = {
        "invalid": "Use an object with type (lesson, knowledge, error or delta) and id, "
        'or the shorthand "lesson:12".'
    }

    def to_internal_value(self, data):
        if isinstance(data, str):
            kind, _, raw_id = data.partition(":")
            data = {"type": kind.strip(), "id": raw_id.strip()}
        if not isinstance(data, dict):
            self.fail("invalid")
        ref = RefSerializer(data=data)
        if not ref.is_valid():
            raise serializers.ValidationError(ref.errors)
        return {"type": ref.validated_data["type"], "id": ref.validated_data["id"]}

    def to_representation(self, value):
        return value


class LessonOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    text = serializers.CharField()
    operation_key = serializers.CharField()
    avoid_operation_key = serializers.CharField()
    target = serializers.CharField()
    scope = serializers.ChoiceField(choices=LessonScope.choices)
    project_digest = serializers.CharField()
    confidence = serializers.FloatField()
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

    @extend_schema_field(serializers.ListField(child=serializers.IntegerField()))
    def get_evidence(self, lesson) -> list[int]:
        return lesson_evidence_summary(lesson)["evidence"]

    @extend_schema_field(serializers.ListField(child=serializers.IntegerField()))
    def get_contradicted_by(self, lesson) -> list[int]:
        return lesson_evidence_summary(lesson)["contradicted_by"]

    @extend_schema_field(serializers.ListField(child=serializers.IntegerField()))
    def get_sources(self, lesson) -> list[int]:
        return lesson_evidence_summary(lesson)["sources"]


def _lesson_body(lesson) -> dict:
    return dict(LessonOutputSerializer(lesson).data)


# --- outcomes ------------------------------------------------------------------------------------


class ApproachStepSerializer(serializers.Serializer):
    operation_key = serializers.CharField(max_length=200)
    target = serializers.CharField(max_length=300, allow_blank=True, default="")
    outcome = serializers.ChoiceField(choices=StepOutcome.choices)
    step = serializers.IntegerField(min_value=0, max_value=INT_MAX)
    mutated = serializers.BooleanField(default=False)


class CheckSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=CheckKind.choices)
    label = serializers.CharField(max_length=200, allow_blank=True, default="")
    target = serializers.CharField(max_length=300, allow_blank=True, default="")
    ran = serializers.BooleanField()
    exit_code = serializers.IntegerField(
        allow_null=True, default=None, min_value=-INT_MAX, max_value=INT_MAX
    )
    step = serializers.IntegerField(min_value=0, max_value=INT_MAX)


class OutcomeCreateApi(APIView):
    class OutcomeInputSerializer(ProjectFields):
        outcome_id = serializers.CharField(max_length=200)
        session_id = serializers.CharField(max_length=200)
        turn_index = serializers.IntegerField(min_value=0, max_value=INT_MAX, default=0)
        machine = serializers.RegexField(
            r"^[A-Za-z0-9:._-]{1,128}$", required=False, allow_blank=True
        )
        context = serializers.CharField(max_length=200, default="global")
        goal = serializers.CharField(
            required=False,
            allow_blank=True,
            max_length=100_000,
            help_text="Hashed (first 200 characters); never stored.",
        )
        goal_digest = serializers.RegexField(r"^[0-9a-f]{64}$", required=False, allow_blank=True)
        approach = ApproachStepSerializer(many=True, max_length=500, default=list)
        checks = CheckSerializer(many=True, max_length=200, default=list)
        claim_ok = serializers.BooleanField(default=True)
        steps = serializers.IntegerField(
            min_value=0, max_value=INT_MAX, required=False, allow_null=True
        )
        tokens = serializers.IntegerField(
            min_value=0, max_value=INT_MAX, required=False, allow_null=True
        )
        wall_s = serializers.FloatField(min_value=0, max_value=1e9, required=False, allow_null=True)
        in_play = serializers.ListField(child=InPlayRefField(), max_length=500, default=list)
        passed = serializers.BooleanField(
            required=False,
            allow_null=True,
            help_text="Ignored: the server computes `passed` from the checks.",
        )
        incognito = serializers.BooleanField(default=False)

    class OutcomeOutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        outcome_id = serializers.CharField()
        passed = serializers.BooleanField(allow_null=True)
        confirmed = RefSerializer(many=True)
        contradicted = RefSerializer(many=True)
        lessons_created = serializers.ListField(child=serializers.IntegerField())

    @extend_schema(
        operation_id="outcome_create",
        summary="Post one outcome (one agent turn)",
        description=(
            "The server computes `passed` from the raw checks (a client `passed` is ignored), "
            "confirms or contradicts what was in play on its own operation, and learns "
            "mechanical lessons. Idempotent on `(agent, outcome_id)`: the same id again "
            "answers 200 with the same body and applies nothing. `incognito: true` records "
            "nothing and answers 202 `{recorded: false}`."
        ),
        request=OutcomeInputSerializer,
        responses={
            201: OutcomeOutputSerializer,
            200: OpenApiResponse(OutcomeOutputSerializer, description="A retry: the stored body."),
            202: OpenApiResponse(
                inline_serializer("OutcomeNotRecorded", {"recorded": serializers.BooleanField()}),
                description="Incognito: nothing recorded.",
            ),
            **_errors(400, 401),
        },
        examples=[
            OpenApiExample(
                "A failed-then-fixed turn",
                request_only=True,
                value={
                    "outcome_id": "run-42-turn-3",
                    "session_id": "run-42",
                    "turn_index": 3,
                    "project_remote": "git@github.com:acme/shop.git",
                    "goal": "Fix the failing cart test",
                    "approach": [
                        {
                            "operation_key": "pytest:tests/",
                            "target": "tests",
                            "outcome": "failed",
                            "step": 1,
                        },
                        {
                            "operation_key": "edit:cart.py",
                            "target": "cart.py",
                            "outcome": "ok",
                            "step": 2,
                            "mutated": True,
                        },
                        {
                            "operation_key": "pytest:.",
                            "target": "tests",
                            "outcome": "ok",
                            "step": 3,
                        },
                    ],
                    "checks": [
                        {
                            "kind": "test",
                            "label": "pytest",
                            "target": "tests",
                            "ran": True,
                            "exit_code": 0,
                            "step": 3,
                        }
                    ],
                    "claim_ok": True,
                    "steps": 3,
                    "tokens": 5200,
                    "wall_s": 41.5,
                    "in_play": [{"type": "lesson", "id": 12}, "knowledge:7"],
                },
            )
        ],
        tags=["outcomes"],
    )
    def post(self, request):
        if isinstance(request.data, dict) and request.data.get("incognito") is True:
            return Response({"recorded": False}, status=status.HTTP_202_ACCEPTED)
        serializer = self.OutcomeInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        project = _project_args(request, data)
        body, created = outcome_record(
            agent=request.user,
            outcome_id=data["outcome_id"],
            session_id=data["session_id"],
            turn_index=data["turn_index"],
            project_remote=project["remote"],
            project_path=project["path"],
            machine=data.get("machine") or "",
            context=data["context"],
            goal=data.get("goal") or None,
            goal_digest_value=data.get("goal_digest") or "",
            approach=[dict(step) for step in data["approach"]],
            checks=[dict(check) for check in data["checks"]],
            claim_ok=data["claim_ok"],
            steps=data.get("steps"),
            tokens=data.get("tokens"),
            wall_s=data.get("wall_s"),
            in_play=data["in_play"],
            reported_passed=data.get("passed"),
        )
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


# --- evidence ------------------------------------------------------------------------------------


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
        confidence_before = serializers.FloatField()
        confidence_after = serializers.FloatField()
        state = serializers.CharField(allow_null=True, help_text="the lesson's state after")

    @extend_schema(
        operation_id="evidence_create",
        summary="Post evidence about a lesson or knowledge item",
        description=(
            "`diff_accepted` and `user_confirmed` add +0.15; `self_report` is recorded and "
            "worth zero (it refreshes recency only). Idempotent on `evidence_id` per "
            "workspace: the same id again answers 200 with the same body."
        ),
        request=EvidenceInputSerializer,
        responses={
            201: EvidenceOutputSerializer,
            200: OpenApiResponse(EvidenceOutputSerializer, description="A retry: the stored body."),
            **_errors(400, 401, 404, 422),
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
        tags=["outcomes"],
    )
    def post(self, request):
        serializer = self.EvidenceInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        body, created = evidence_record(
            workspace=request.auth.workspace, agent=request.user, **serializer.validated_data
        )
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


# --- plan time and decision time ------------------------------------------------------------------


class ContextApi(APIView):
    class ContextQuerySerializer(ProjectFields):
        machine = serializers.RegexField(
            r"^[A-Za-z0-9:._-]{1,128}$", required=False, allow_blank=True
        )
        context = serializers.CharField(max_length=200, required=False, allow_blank=True)
        now = serializers.DateTimeField(
            required=False, help_text="render as of this time (ISO 8601); default: now"
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
            "same state; `dynamic` carries the time (pass `now` to fix it). Blockers "
            "(situations) are not built yet: always `[]`."
        ),
        parameters=[
            ContextQuerySerializer,
        ],
        responses={200: ContextOutputSerializer, **_errors(400, 401)},
        tags=["outcomes"],
    )
    def get(self, request):
        query = self.ContextQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        data = query.validated_data
        project = _project_args(request, data)
        built = context_build(
            workspace=request.auth.workspace,
            project_digest=project_digest(remote=project["remote"], path=project["path"]),
            context=data.get("context") or None,
            now=data.get("now") or timezone.now(),
        )
        served = built.pop("served")
        context_mark_served(lesson_ids=served["lessons"], knowledge_ids=served["knowledge"])
        return Response(built)


class LessonCheckApi(APIView):
    class LessonCheckQuerySerializer(ProjectFields):
        operation_key = serializers.CharField(max_length=200)
        context = serializers.CharField(max_length=200, required=False, allow_blank=True)

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
            "against it), the known errors on it, and blockers (`[]` until situations exist)."
        ),
        parameters=[LessonCheckQuerySerializer],
        responses={200: LessonCheckOutputSerializer, **_errors(400, 401)},
        tags=["lessons"],
    )
    def get(self, request):
        query = self.LessonCheckQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        data = query.validated_data
        project = _project_args(request, data)
        built = lesson_check(
            workspace=request.auth.workspace,
            project_digest=project_digest(remote=project["remote"], path=project["path"]),
            operation_key=data["operation_key"],
            context=data.get("context") or None,
        )
        served = built.pop("served")
        context_mark_served(lesson_ids=served["lessons"], knowledge_ids=served["knowledge"])
        return Response(built)


# --- lessons ---------------------------------------------------------------------------------------


class LessonPagination(LimitOffsetPagination):
    default_limit = 50
    max_limit = 200


class LessonsApi(APIView):
    """``GET`` lists lessons; ``POST`` creates one (claimed unless it names evidence)."""

    class LessonCreateSerializer(ProjectFields):
        text = serializers.CharField(max_length=2000, help_text="one imperative sentence")
        operation_key = serializers.CharField(max_length=200)
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
            **_errors(400, 401),
        },
        tags=["lessons"],
    )
    def get(self, request):
        query = self.LessonListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        data = query.validated_data
        project = _project_args(request, data)
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
            "Without evidence the lesson is stored *claimed* at 0.3 and never served until an "
            "attributed confirmation. Each evidence id must be an outcome of this workspace "
            "and project that passed; otherwise 422 names each id and why, and nothing is "
            "written. Global lessons are earned by promotion only. An equivalent live lesson "
            "takes the evidence instead (200, `deduplicated_into`)."
        ),
        request=LessonCreateSerializer,
        responses={
            201: LessonCreatedSerializer,
            200: OpenApiResponse(
                LessonCreatedSerializer, description="An equivalent lesson existed."
            ),
            **_errors(400, 401, 422),
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
        tags=["lessons"],
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
        project = _project_args(request, data)
        lesson, created = lesson_create(
            workspace=request.auth.workspace,
            agent=request.user,
            text=data["text"],
            operation_key=data["operation_key"],
            project_digest=project_digest_required(remote=project["remote"], path=project["path"]),
            evidence_ids=data["evidence"],
            source=data["source"],
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
        responses={200: LessonOutputSerializer, **_errors(401, 404)},
        tags=["lessons"],
    )
    def get(self, request, lesson_id: int):
        lesson = lesson_get(workspace=request.auth.workspace, lesson_id=lesson_id)
        return Response(_lesson_body(lesson))

    @extend_schema(
        operation_id="lesson_edit",
        summary="Edit a lesson (answers with the new id)",
        description=(
            "An edit inserts a new row inheriting the evidence and confidence; the old row "
            "is superseded and stays in the history."
        ),
        request=LessonEditSerializer,
        responses={200: LessonEditedSerializer, **_errors(400, 401, 404, 422)},
        tags=["lessons"],
    )
    def patch(self, request, lesson_id: int):
        lesson = lesson_get(workspace=request.auth.workspace, lesson_id=lesson_id)
        serializer = self.LessonEditSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        edited = lesson_edit(lesson=lesson, agent=request.user, **serializer.validated_data)
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
        responses={200: LessonOutputSerializer, **_errors(400, 401, 404, 422)},
        tags=["lessons"],
    )
    def post(self, request, lesson_id: int):
        lesson = lesson_get(workspace=request.auth.workspace, lesson_id=lesson_id)
        serializer = self.LessonRetireSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        lesson_retire(
            lesson=lesson,
            by_person=False,
            actor=f"agent:{request.user.name}",
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
            **_errors(401, 404),
        },
        tags=["lessons"],
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


urlpatterns = [
    path("outcomes/", OutcomeCreateApi.as_view(), name="outcome-create"),
    path("evidence/", EvidenceCreateApi.as_view(), name="evidence-create"),
    path("context/", ContextApi.as_view(), name="context"),
    path("lessons/", LessonsApi.as_view(), name="lessons"),
    path("lessons/check/", LessonCheckApi.as_view(), name="lesson-check"),
    path("lessons/<int:lesson_id>/", LessonDetailApi.as_view(), name="lesson-detail"),
    path("lessons/<int:lesson_id>/retire/", LessonRetireApi.as_view(), name="lesson-retire"),
    path("lessons/<int:lesson_id>/history/", LessonHistoryApi.as_view(), name="lesson-history"),
]
