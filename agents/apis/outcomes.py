"""Agent API: outcomes, one per agent turn (SPEC sections 4 and 11).

Every view is scoped to the token's workspace; another workspace's ids answer
404 exactly like missing ones. Projects are named by ``project_remote`` and/or
``project_path`` (body or query) and only their digest is stored (a remote also names
a project that has no label yet, after its last path segment).
"""

from __future__ import annotations

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

from agents.apis.common import (
    INT_MAX,
    LEARNING_ERRORS,
    TAG_OUTCOMES,
    ProjectFields,
    RefSerializer,
    actor,
    errors,
    project_args,
    validated,
)
from memory.lessons.outcomes import GOAL_TEXT_MAX_CHARS, IN_PLAY_TYPES, outcome_record
from memory.models import CheckKind, StepOutcome

# "knowledge:" and a 64-bit id, with room: the schema's bound, so the body cap of every
# operation taking refs (agents/body_caps.py) is derived from it.
IN_PLAY_SHORTHAND_MAX_CHARS = 40


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
            {
                "type": "string",
                "pattern": "^(lesson|knowledge|error|delta):[0-9]+$",
                "maxLength": IN_PLAY_SHORTHAND_MAX_CHARS,
            },
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
            if len(data) > IN_PLAY_SHORTHAND_MAX_CHARS:
                self.fail("invalid")
            kind, _, raw_id = data.partition(":")
            data = {"type": kind.strip(), "id": raw_id.strip()}
        if not isinstance(data, dict):
            self.fail("invalid")
        ref = validated(RefSerializer, data)  # this thread's instance: no copy per ref
        return {"type": ref["type"], "id": ref["id"]}

    def to_representation(self, value):
        return value


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
    duration_s = serializers.FloatField(
        required=False, allow_null=True, min_value=0, max_value=1e9, help_text="how long it ran"
    )


class OutcomeCreateApi(APIView):
    class OutcomeInputSerializer(ProjectFields):
        outcome_id = serializers.CharField(max_length=200)
        session_id = serializers.CharField(max_length=200)
        turn_index = serializers.IntegerField(min_value=0, max_value=INT_MAX, default=0)
        machine = serializers.RegexField(
            r"^[A-Za-z0-9:._-]{1,128}$", max_length=128, required=False, allow_blank=True
        )
        context = serializers.CharField(max_length=200, default="global")
        goal = serializers.CharField(
            required=False,
            allow_blank=True,
            max_length=100_000,
            help_text="Hashed (first 200 characters); never stored.",
        )
        goal_digest = serializers.RegexField(
            r"^[0-9a-f]{64}$", max_length=64, required=False, allow_blank=True
        )
        goal_text = serializers.CharField(
            required=False,
            allow_blank=True,
            trim_whitespace=False,
            max_length=GOAL_TEXT_MAX_CHARS,
            help_text="The goal in words, for reviewers (credentials are refused). Stored only "
            "when the workspace opted in (setting store_goal_text, off by default); hashed "
            "like `goal` when `goal` is not given. The answer's `goal_text_stored` says "
            "whether it was kept.",
        )
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
        channel = serializers.ChoiceField(
            choices=["agent", "harness"], help_text="the token's channel of trust"
        )
        evidence = serializers.ChoiceField(
            choices=["verified", "self_report"],
            help_text="verified: harness-reported, it moves confidence; self_report: the "
            "model's own word (agent token), recency only and lessons stay claimed",
        )
        hint = serializers.CharField(help_text="one line on what this outcome counted for")
        goal_text_stored = serializers.BooleanField(
            required=False,
            help_text="true when `goal_text` was kept (the workspace opted in); false when "
            "none was sent or only its digest was kept",
        )

    @extend_schema(
        operation_id="outcome_create",
        summary="Post one outcome (one agent turn)",
        description=(
            "The server computes `passed` from the raw checks (a client `passed` is ignored), "
            "confirms or contradicts what was in play on its own operation, and learns "
            "mechanical lessons. Idempotent on `(agent, token scope, outcome_id)`: the same id again "
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
            **errors(400, 401, area=LEARNING_ERRORS),
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
                    "goal_text": "Fix the failing cart test",
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
        tags=[TAG_OUTCOMES],
    )
    def post(self, request):
        if isinstance(request.data, dict) and request.data.get("incognito") is True:
            return Response({"recorded": False}, status=status.HTTP_202_ACCEPTED)
        data = validated(self.OutcomeInputSerializer, request.data)
        project = project_args(request, data)
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
            goal_text=data.get("goal_text") or None,
            approach=[dict(step) for step in data["approach"]],
            checks=[dict(check) for check in data["checks"]],
            claim_ok=data["claim_ok"],
            steps=data.get("steps"),
            tokens=data.get("tokens"),
            wall_s=data.get("wall_s"),
            in_play=data["in_play"],
            reported_passed=data.get("passed"),
            channel=actor(request).channel,
        )
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)
