"""Agent API: learned deltas on a skill: propose and list (SPEC sections 6 and 11).

A ``fact`` delta is routed to a tier-0 learned fact (agents.apis.facts) instead.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.apis.common import SKILL_ERRORS, TAG_SKILLS, actor, errors
from agents.apis.facts import FactSerializer, fact_body
from memory.skills.deltas import delta_create
from memory.skills.selectors import delta_list, fact_consumers, skill_get


class AnchorSerializer(serializers.Serializer):
    section = serializers.CharField(max_length=200, help_text="section slug, e.g. `escalation`")


class DeltaAnchorOutputSerializer(serializers.Serializer):
    section = serializers.CharField()
    digest = serializers.CharField()
    version = serializers.CharField()


class DeltaSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    tier = serializers.IntegerField()
    status = serializers.CharField(help_text="staged | active | quarantined | orphaned | archived")
    trust = serializers.CharField()
    anchor = DeltaAnchorOutputSerializer()
    payload = serializers.JSONField()
    provenance = serializers.JSONField()
    rationale = serializers.CharField(allow_blank=True)
    scope = serializers.CharField()
    findings = serializers.ListField(child=serializers.DictField())
    stale = serializers.BooleanField()
    retrieval_only = serializers.BooleanField()
    tokens = serializers.IntegerField()
    success_count = serializers.IntegerField()
    attempt_count = serializers.IntegerField()
    use_count = serializers.IntegerField()
    proposals = serializers.IntegerField(
        help_text="times the agent proposed this delta while it was pending (identical "
        "proposals are counted here, not staged again)"
    )
    members = serializers.ListField(child=serializers.IntegerField())
    created_at = serializers.DateTimeField()
    approved_at = serializers.DateTimeField(allow_null=True)


def _delta_body(delta) -> dict:
    return {
        "id": delta.pk,
        "kind": delta.kind,
        "tier": delta.tier,
        "status": delta.status,
        "trust": delta.trust,
        "anchor": {
            "section": delta.anchor_section,
            "digest": delta.anchor_digest,
            "version": delta.anchor_version.version,
        },
        "payload": delta.payload,
        "provenance": delta.provenance,
        "rationale": delta.rationale,
        "scope": delta.scope,
        "findings": delta.findings,
        "stale": delta.stale,
        "retrieval_only": delta.retrieval_only,
        "tokens": delta.tokens,
        "success_count": delta.success_count,
        "attempt_count": delta.attempt_count,
        "use_count": delta.use_count,
        "proposals": delta.proposals,
        "members": sorted(m.pk for m in delta.members.all()),
        "created_at": delta.created_at,
        "approved_at": delta.approved_at,
    }


DELTA_REFUSALS = (
    "Refused at write time, with `error.code`: `widens_permission`, `tool_not_in_registry`, "
    "`local_capability_skill`, `write_path_tool`, `credential`, `too_large`, "
    "`unknown_section`, `unsupported_kind` (parameter, exception), `untrusted_fact`."
)


class SkillDeltasApi(APIView):
    class DeltaCreateInputSerializer(serializers.Serializer):
        kind = serializers.ChoiceField(
            choices=["tool-hint", "preference", "example", "fact", "parameter", "exception"]
        )
        anchor = AnchorSerializer(required=False)
        payload = serializers.JSONField(
            help_text="tool-hint `{prefer, drop}`; preference `{body, trigger?}`; example "
            "`{input, output, trigger?}`; fact `{namespace, key, value, scope?}`"
        )
        provenance = serializers.JSONField(
            required=False,
            allow_null=True,
            help_text="`{source, turns?, outcomes?}`. Trusted (staged) only when records "
            "back it: user_instruction citing in `turns` a stored user turn the harness "
            "posted (`session_id#turn_index`) that says the payload's words (case, spacing "
            "and punctuation ignored), or outcome_evidence citing in `outcomes` the "
            "id of a passed outcome the harness posted. Anything else, or any injection "
            "finding, is quarantined",
        )
        scope = serializers.CharField(
            required=False,
            allow_blank=True,
            max_length=200,
            help_text="trust-ledger scope (default `skill:<name>`)",
        )
        rationale = serializers.CharField(
            required=False,
            allow_blank=True,
            max_length=400,
            help_text="why the agent proposes this, in a sentence or two (shown to reviewers "
            "first; credentials are refused)",
        )
        permissions = serializers.JSONField(
            required=False, help_text="always refused: deltas never change permissions"
        )
        security_tier = serializers.JSONField(
            required=False, help_text="always refused: deltas never change the security tier"
        )

    class DeltaCreateOutputSerializer(DeltaSerializer):
        routed_to = serializers.CharField(help_text="`delta`, or `fact` (no delta written)")
        warnings = serializers.ListField(child=serializers.CharField())
        fact = FactSerializer(required=False)

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            for name, field in self.fields.items():
                if name not in {"routed_to", "warnings"}:
                    field.required = False

        def to_representation(self, instance):
            # A routed fact has no delta fields at all (not even nulls).
            data = super().to_representation(instance)
            return {key: value for key, value in data.items() if key in instance}

    class DeltaListOutputSerializer(serializers.Serializer):
        deltas = DeltaSerializer(many=True)

    @extend_schema(
        operation_id="skill_deltas_list",
        summary="This agent's deltas on a skill, with their status",
        responses={200: DeltaListOutputSerializer, **errors(401, 404, area=SKILL_ERRORS)},
        tags=[TAG_SKILLS],
    )
    def get(self, request, name: str):
        skill = skill_get(workspace=request.auth.workspace, name=name)
        deltas = [_delta_body(d) for d in delta_list(agent=request.user, skill=skill)]
        return Response(self.DeltaListOutputSerializer({"deltas": deltas}).data)

    @extend_schema(
        operation_id="skill_deltas_create",
        summary="Propose a learned delta on a skill",
        description=(
            "Trusted provenance is staged; untrusted is quarantined with injection-scan "
            "findings. Nothing applies until a reviewer approves it (a quarantined delta needs "
            "an explicit per-delta confirmation); approval applies from the next session. "
            "`fact` is routed to a tier-0 learned fact: 201 `{routed_to: fact, fact}` and no "
            "delta is written. An identical proposal (same kind, section, payload and scope) "
            "from the same agent while one is pending is counted on it (`proposals`) and "
            "answered 200 with that delta instead of staged again. " + DELTA_REFUSALS
        ),
        request=DeltaCreateInputSerializer,
        responses={
            201: DeltaCreateOutputSerializer,
            200: OpenApiResponse(
                DeltaCreateOutputSerializer,
                description="A routed fact that was unchanged, or an identical pending "
                "proposal counted on the delta already staged.",
            ),
            **errors(400, 401, 404, 422, area=SKILL_ERRORS, refusals=DELTA_REFUSALS),
        },
        examples=[
            OpenApiExample(
                "preference",
                request_only=True,
                value={
                    "kind": "preference",
                    "anchor": {"section": "escalation"},
                    "payload": {"body": "Escalate anything from the CFO after 48 hours."},
                    "provenance": {"source": "user_instruction", "turns": ["sess_91f3#12"]},
                },
            ),
            OpenApiExample(
                "routed fact",
                request_only=True,
                value={
                    "kind": "fact",
                    "payload": {
                        "namespace": "priority_senders",
                        "key": "alice@example.com",
                        "value": True,
                    },
                    "provenance": {"source": "user_instruction", "turns": ["sess_91f3#14"]},
                },
            ),
        ],
        tags=[TAG_SKILLS],
    )
    def post(self, request, name: str):
        data = self.DeltaCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        result = delta_create(
            agent=request.user,
            channel=actor(request).channel,
            skill_name=name,
            kind=values["kind"],
            anchor=values.get("anchor"),
            payload=values["payload"],
            provenance=values.get("provenance"),
            scope=values.get("scope"),
            permissions=values.get("permissions"),
            security_tier=values.get("security_tier"),
            rationale=values.get("rationale"),
        )
        if result.fact is not None:
            consumers = fact_consumers(
                workspace=request.auth.workspace, namespaces=[result.fact.namespace]
            )[result.fact.namespace]
            body = {
                "routed_to": "fact",
                "warnings": result.warnings,
                "fact": fact_body(result.fact, consumers),
            }
            code = status.HTTP_201_CREATED if result.fact_created else status.HTTP_200_OK
            return Response(self.DeltaCreateOutputSerializer(body).data, status=code)
        body = {**_delta_body(result.delta), "routed_to": "delta", "warnings": result.warnings}
        code = status.HTTP_200_OK if result.merged else status.HTTP_201_CREATED
        return Response(self.DeltaCreateOutputSerializer(body).data, status=code)
