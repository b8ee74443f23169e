"""Agent API: situations, blockers the agent cannot fix (SPEC sections 5 and 11).

``POST /situations/`` records a declared situation, ``POST /situations/classify/``
infers one from a tool result's generic signals (never stored), ``POST
/turns/{turn_id}/results/`` is the per-turn recovery state on the agent's hot
path, and ``GET /situations/known/`` lists the blockers a machine remembers.
``unblock`` and ``probe`` are accepted only from a harness-scoped token.
"""

from __future__ import annotations

from django.utils import timezone
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.apis.common import (
    INT_MAX,
    LEARNING_ERRORS,
    StrictSerializer,
    TextField,
    actor,
    errors,
    validated,
)
from memory.core.validation import bad_request
from memory.situations.classify import RULES, Signals, classify_result
from memory.situations.recovery import TurnResult, situation_declare, turn_result_record
from memory.situations.selectors import KNOWN_MAX, blocker_json, known_blockers
from memory.situations.taxonomy import situation_validate

TAG_SITUATIONS = "situations"
OUTPUT_MAX = 1_000_000
MACHINE = r"^[A-Za-z0-9:._-]{1,128}$"
TURN_ID_MAX = 200

SITUATION_HELP = (
    "A declared situation: `{kind, subject, unblock?, probe?: {tool, args}, interactive?, "
    "detail?, env?}`. `kind` is one of auth, not_installed, permission, quota, offline, "
    "locked (blockers), bad_args, not_found, wrong_cwd, syntax (self-fixable), empty, "
    "truncated, garbled (degenerate), injected_instruction (adversarial). `unblock` and "
    "`probe` need a harness-scoped token (403 otherwise); a bad kind or a missing subject "
    "is a 422 naming the field."
)


class SignalFields(StrictSerializer):
    """The generic signals of one tool result (what the classifier reads)."""

    tool = serializers.CharField(max_length=200)
    exit_code = serializers.IntegerField(
        required=False, allow_null=True, min_value=-INT_MAX, max_value=INT_MAX
    )
    http_status = serializers.IntegerField(
        required=False, allow_null=True, min_value=100, max_value=599
    )
    stdout = TextField(
        required=False, allow_blank=True, max_length=OUTPUT_MAX, trim_whitespace=False
    )
    stderr = TextField(
        required=False, allow_blank=True, max_length=OUTPUT_MAX, trim_whitespace=False
    )
    output = TextField(
        required=False, allow_blank=True, max_length=OUTPUT_MAX, trim_whitespace=False
    )
    executed = serializers.BooleanField(required=False, allow_null=True, default=None)
    rate_limited = serializers.BooleanField(required=False, allow_null=True, default=None)
    search = serializers.BooleanField(
        required=False,
        allow_null=True,
        default=None,
        help_text="the tool is a search (empty output is then `empty`); default: guessed "
        "from the tool name (search, find, grep, query, lookup, glob)",
    )


def _signals(data: dict, *, ok: bool | None = None) -> Signals:
    return Signals(
        tool=data.get("tool") or "",
        exit_code=data.get("exit_code"),
        http_status=data.get("http_status"),
        stdout=data.get("stdout") or "",
        stderr=data.get("stderr") or "",
        output=data.get("output") or "",
        executed=data.get("executed"),
        rate_limited=data.get("rate_limited"),
        ok=ok,
        search=data.get("search"),
    )


class SituationOutput(serializers.Serializer):
    kind = serializers.CharField()
    subject = serializers.CharField()
    source = serializers.ChoiceField(choices=["declared", "inferred"])
    interactive = serializers.BooleanField()
    detail = serializers.CharField(allow_blank=True)
    persistable = serializers.BooleanField()


class RecoveryOutput(serializers.Serializer):
    turn_id = serializers.CharField()
    step = serializers.IntegerField()
    action = serializers.ChoiceField(choices=["continue", "escalate", "refuse"])
    open_blockers = serializers.ListField(child=serializers.DictField())
    budget_left = serializers.IntegerField(allow_null=True)
    escalation = serializers.DictField(allow_null=True)
    situation = serializers.DictField(allow_null=True)
    learnable = serializers.BooleanField(
        help_text="false when the result carried instructions aimed at the agent"
    )
    workaround_calls = serializers.IntegerField()
    refused_calls = serializers.IntegerField()


class DeclareOutput(serializers.Serializer):
    situation = serializers.DictField()
    event_id = serializers.IntegerField(required=False)
    recovery = RecoveryOutput(allow_null=True)


class SituationDeclareApi(APIView):
    class SituationDeclareInputSerializer(StrictSerializer):
        situation = serializers.JSONField(help_text=SITUATION_HELP)
        tool = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
        turn_id = serializers.CharField(max_length=200, required=False, allow_blank=True)
        machine = serializers.RegexField(MACHINE, max_length=128, required=False, allow_blank=True)
        session_id = serializers.CharField(max_length=200, required=False, allow_blank=True)

    @extend_schema(
        operation_id="situation_declare",
        summary="Record a declared situation",
        description=(
            "Validates the declaration and records a `detected` event. With `turn_id` it "
            "is also one failed result of that turn, and `recovery` carries the same answer "
            "as POST /turns/{turn_id}/results/."
        ),
        request=SituationDeclareInputSerializer,
        responses={201: DeclareOutput, **errors(400, 401, 422, area=LEARNING_ERRORS)},
        tags=[TAG_SITUATIONS],
    )
    def post(self, request):
        serializer = self.SituationDeclareInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        who = actor(request)
        situation = situation_validate(data["situation"], harness=who.is_harness)
        body = situation_declare(
            actor=who,
            situation=situation,
            tool=data.get("tool") or "",
            now=timezone.now(),
            turn_id=data.get("turn_id") or "",
            machine=data.get("machine") or "",
            session_id=data.get("session_id") or "",
        )
        return Response(body, status=status.HTTP_201_CREATED)


class SituationClassifyApi(APIView):
    class ClassifyOutputSerializer(serializers.Serializer):
        situation = serializers.DictField(allow_null=True)
        learnable = serializers.BooleanField()
        rule = serializers.CharField(allow_blank=True)

    @extend_schema(
        operation_id="situation_classify",
        summary="Infer a situation from one tool result (nothing is stored)",
        description=(
            "Reads only generic signals: exit code, HTTP status, `executed`, `rate_limited` "
            "and the text of the result. The rules, in order: "
            + "; ".join(f"`{r.name}` → {r.kind}" for r in RULES)
            + ". An inferred situation never carries `unblock` or `probe` and is never "
            "persisted. `learnable: false` flags instructions aimed at the agent."
        ),
        request=SignalFields,
        responses={200: ClassifyOutputSerializer, **errors(400, 401, area=LEARNING_ERRORS)},
        tags=[TAG_SITUATIONS],
    )
    def post(self, request):
        situation = classify_result(_signals(validated(SignalFields, request.data)))
        return Response(
            {
                "situation": situation.as_json() if situation else None,
                "learnable": not (situation and situation.is_adversarial),
                "rule": situation.rule if situation else "",
            }
        )


class TurnResultsApi(APIView):
    class TurnResultInputSerializer(SignalFields):
        tool = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
        ok = serializers.BooleanField(required=False, allow_null=True, default=None)
        situation = serializers.JSONField(required=False, allow_null=True, help_text=SITUATION_HELP)
        subject = serializers.CharField(
            max_length=200,
            required=False,
            allow_blank=True,
            help_text="what the call was on: a success on a blocker's subject closes it, and "
            "a probe names the subject it checks (a clean one supersedes that subject's "
            "lessons on this machine); default: the situation's subject, else the tool",
        )
        probe = serializers.BooleanField(default=False, help_text="this call is a probe")
        interactive = serializers.BooleanField(
            default=False, help_text="the tool needs a person at the keyboard"
        )
        attended = serializers.BooleanField(
            default=True, help_text="false for headless runs (evals, schedulers, API servers)"
        )
        user_answered = serializers.BooleanField(
            default=False, help_text="the person answered the escalation: blockers close"
        )
        machine = serializers.RegexField(MACHINE, max_length=128, required=False, allow_blank=True)
        session_id = serializers.CharField(max_length=200, required=False, allow_blank=True)
        at = serializers.DateTimeField(
            required=False, help_text="when the result came back (ISO 8601); default: now"
        )

        def validate_at(self, value):
            if not 1970 <= value.year <= 9000:
                raise serializers.ValidationError("Use a time between 1970 and 9000.")
            return value

        def validate(self, attrs):
            if not attrs.get("user_answered") and not attrs.get("tool"):
                raise serializers.ValidationError({"tool": ["Required for a tool result."]})
            return attrs

    @extend_schema(
        operation_id="turn_result_record",
        summary="Post one tool result of a turn: continue, escalate or refuse",
        description=(
            "Per-turn recovery state (`turn_id`: your own id for the turn, scoped to this "
            "agent; use the outcome's `outcome_id` to see it on the outcome page). After a "
            "blocker on subject S, each further failed or refused call, or one reporting "
            "the same kind, counts; successes and probes don't. More than 2 (declared) or "
            "4 (inferred) answers `escalate` with the text built from fields. An "
            "`interactive` tool while `attended: false` answers `refuse` (do not run it). "
            "A blocker closes on a clean probe, a success on S, or `user_answered: true`. "
            "Posts for one turn serialize."
        ),
        request=TurnResultInputSerializer,
        responses={200: RecoveryOutput, **errors(400, 401, 403, 422, area=LEARNING_ERRORS)},
        examples=[
            OpenApiExample(
                "gh is logged out (declared by the tool, harness token)",
                request_only=True,
                value={
                    "tool": "check_cli_setup",
                    "ok": False,
                    "situation": {
                        "kind": "auth",
                        "subject": "gh",
                        "unblock": "gh auth login",
                        "interactive": True,
                        "probe": {"tool": "check_cli_setup", "args": {"binary": "gh"}},
                        "detail": "gh is installed but not signed in.",
                        "env": "/usr/bin/gh 2.62.0",
                    },
                    "machine": "m-3f9a1c",
                    "session_id": "run-42",
                    "attended": False,
                },
            )
        ],
        tags=[TAG_SITUATIONS],
    )
    def post(self, request, turn_id: str):
        if len(turn_id) > TURN_ID_MAX:
            raise bad_request("turn_id", f"must be at most {TURN_ID_MAX} characters")
        data = validated(self.TurnResultInputSerializer, request.data)
        who = actor(request)
        declared = (
            situation_validate(data["situation"], harness=who.is_harness)
            if data.get("situation") is not None
            else None
        )
        has_signals = any(
            data.get(key) not in (None, "")
            for key in ("exit_code", "http_status", "stdout", "stderr", "output", "executed")
        ) or bool(data.get("rate_limited"))
        result = TurnResult(
            tool=data.get("tool") or "",
            ok=data.get("ok"),
            situation=declared,
            signals=_signals(data, ok=data.get("ok")) if has_signals else None,
            subject=data.get("subject") or "",
            probe=data["probe"],
            interactive=data["interactive"],
            attended=data["attended"],
            user_answered=data["user_answered"],
            machine=data.get("machine") or "",
            session_id=data.get("session_id") or "",
        )
        body = turn_result_record(
            actor=who, turn_id=turn_id, result=result, now=data.get("at") or timezone.now()
        )
        return Response(body)


class KnownSituationsApi(APIView):
    class QuerySerializer(serializers.Serializer):
        machine = serializers.RegexField(MACHINE, max_length=128)
        subjects = serializers.CharField(
            required=False,
            allow_blank=True,
            max_length=2000,
            help_text="comma-separated subjects of the skills in use (e.g. gh,docker)",
        )

    class KnownOutputSerializer(serializers.Serializer):
        machine = serializers.CharField()
        blockers = serializers.ListField(child=serializers.DictField())

    @extend_schema(
        operation_id="situations_known",
        summary="Known blockers for a machine (at most 3)",
        description=(
            f"Live situation lessons for `machine` (not expired, superseded or removed), "
            f"newest first, at most {KNOWN_MAX}; with `subjects`, only theirs."
        ),
        parameters=[QuerySerializer],
        responses={200: KnownOutputSerializer, **errors(400, 401, area=LEARNING_ERRORS)},
        tags=[TAG_SITUATIONS],
    )
    def get(self, request):
        query = self.QuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        data = query.validated_data
        raw = data.get("subjects")
        subjects = [s.strip() for s in raw.split(",") if s.strip()] if raw else None
        lessons = known_blockers(
            workspace=request.auth.workspace,
            machine=data["machine"],
            now=timezone.now(),
            subjects=subjects,
        )
        return Response(
            {"machine": data["machine"], "blockers": [blocker_json(item) for item in lessons]}
        )
