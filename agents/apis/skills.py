"""Agent API: skills, learned deltas, the tool registry, feedback and facts (SPEC 6, 11).

The API validates shapes and calls memory services and selectors; every rule
(refusals, trust, consent, rendering) lives in ``memory``.
"""

from __future__ import annotations

from django.urls import path
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    inline_serializer,
)
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from memory.selectors.skills import (
    agent_tool_list,
    delta_list,
    fact_consumers,
    fact_get,
    fact_list,
    skill_get,
    trust_progress_get,
)
from memory.services.deltas import delta_create
from memory.services.facts import fact_put
from memory.services.skills import agent_tools_set, effective_skill_resolve, skill_register
from memory.services.trust import feedback_record

ErrorSerializer = inline_serializer(
    "SkillsError",
    {
        "error": inline_serializer(
            "SkillsErrorBody",
            {
                "code": serializers.CharField(),
                "message": serializers.CharField(),
                "fields": serializers.DictField(child=serializers.ListField()),
            },
        )
    },
)


def _errors(*codes: int, refusals: str = "") -> dict:
    described = {
        400: "Invalid input: `fields` names each field at fault.",
        401: "Missing, invalid or revoked token.",
        404: "No such skill (or fact) in this token's workspace.",
        409: "Conflict: a registered version is immutable.",
        422: refusals or "A rule refused the request; `code` says which.",
    }
    return {code: OpenApiResponse(ErrorSerializer, description=described[code]) for code in codes}


def _actor(request) -> str:
    return f"agent:{request.user.name}"


# --------------------------------------------------------------------------- skills


class SectionSerializer(serializers.Serializer):
    slug = serializers.CharField()
    title = serializers.CharField()
    digest = serializers.CharField()


class SkillRegisterApi(APIView):
    class SkillRegisterInputSerializer(serializers.Serializer):
        skill_md = serializers.CharField(trim_whitespace=False)

    class SkillRegisterOutputSerializer(serializers.Serializer):
        name = serializers.CharField()
        version = serializers.CharField()
        digest = serializers.CharField(help_text="sha256 of the SKILL.md as registered")
        body_digest = serializers.CharField(help_text="sha256 of the whitespace-normalised body")
        sections = SectionSerializer(many=True)
        warnings = serializers.ListField(child=serializers.CharField())
        orphaned = serializers.IntegerField(
            help_text="deltas this version orphaned (its body differs from the previous one)"
        )

    @extend_schema(
        operation_id="skills_register",
        summary="Register a SKILL.md version",
        description=(
            "YAML front matter (`name`, `description`, `version`, `permissions`, `tools`) and a "
            "Markdown body split into sections by heading. Versions are immutable: the same "
            "version with different content is 409; the identical document again is 200. A "
            "version whose body differs (beyond whitespace) from the current one orphans "
            "every delta attached to the skill until a person re-approves it."
        ),
        request=SkillRegisterInputSerializer,
        responses={
            201: SkillRegisterOutputSerializer,
            200: OpenApiResponse(
                SkillRegisterOutputSerializer, description="Identical version already registered."
            ),
            **_errors(400, 401, 409),
        },
        examples=[
            OpenApiExample(
                "triage-inbox",
                request_only=True,
                value={
                    "skill_md": "---\nname: triage-inbox\nversion: 1.0.0\ndescription: "
                    "Sort the inbox\npermissions: [network:imap]\ntools: [triage_inbox]\n---\n"
                    "## Escalation\nEscalate a thread waiting longer than the follow-up window.\n"
                },
            )
        ],
        tags=["skills"],
    )
    def post(self, request):
        data = self.SkillRegisterInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        result = skill_register(
            workspace=request.auth.workspace,
            skill_md=data.validated_data["skill_md"],
            actor=_actor(request),
        )
        version = result.version
        body = {
            "name": result.skill.name,
            "version": version.version,
            "digest": version.digest,
            "body_digest": version.body_digest,
            "sections": version.sections,
            "warnings": result.warnings,
            "orphaned": result.orphaned,
        }
        return Response(
            self.SkillRegisterOutputSerializer(body).data,
            status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK,
        )


class SkillDetailApi(APIView):
    class SkillDetailOutputSerializer(serializers.Serializer):
        name = serializers.CharField()
        version = serializers.CharField()
        description = serializers.CharField()
        permissions = serializers.ListField(child=serializers.CharField())
        tools = serializers.ListField(child=serializers.CharField())
        digest = serializers.CharField()
        body_digest = serializers.CharField()
        sections = SectionSerializer(many=True)

    @extend_schema(
        operation_id="skills_retrieve",
        summary="The current version of a skill",
        responses={200: SkillDetailOutputSerializer, **_errors(401, 404)},
        tags=["skills"],
    )
    def get(self, request, name: str):
        skill = skill_get(workspace=request.auth.workspace, name=name)
        return Response(self.SkillDetailOutputSerializer(_version_body(skill)).data)


def _version_body(skill) -> dict:
    version = skill.current_version
    return {
        "name": skill.name,
        "version": version.version,
        "description": version.description,
        "permissions": version.permissions,
        "tools": version.tools,
        "digest": version.digest,
        "body_digest": version.body_digest,
        "sections": version.sections,
    }


# --------------------------------------------------------------------------- tool registry


class ToolSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=128)
    mutating = serializers.BooleanField(default=False)
    needs_confirmation = serializers.BooleanField(default=False)
    reads_facts = serializers.ListField(
        child=serializers.CharField(max_length=64), default=list, max_length=50
    )


class AgentToolsApi(APIView):
    class AgentToolsInputSerializer(serializers.Serializer):
        tools = ToolSerializer(many=True, max_length=200, allow_empty=True)

    class AgentToolsOutputSerializer(serializers.Serializer):
        tools = ToolSerializer(many=True)

    def _body(self, tools) -> dict:
        return self.AgentToolsOutputSerializer(
            {
                "tools": [
                    {
                        "name": t.name,
                        "mutating": t.mutating,
                        "needs_confirmation": t.needs_confirmation,
                        "reads_facts": t.reads_facts,
                    }
                    for t in tools
                ]
            }
        ).data

    @extend_schema(
        operation_id="agent_tools_retrieve",
        summary="This agent's declared tool registry",
        responses={200: AgentToolsOutputSerializer, **_errors(401)},
        tags=["skills"],
    )
    def get(self, request):
        return Response(self._body(agent_tool_list(agent=request.user)))

    @extend_schema(
        operation_id="agent_tools_replace",
        summary="Declare (replace) this agent's live tool registry",
        description=(
            "Tool-hint deltas may only name tools in this registry, and may never prefer one "
            "that `mutating` or `needs_confirmation`. `reads_facts` lists the learned-fact "
            "namespaces a tool reads: a fact no tool reads is reported as inert."
        ),
        request=AgentToolsInputSerializer,
        responses={200: AgentToolsOutputSerializer, **_errors(400, 401)},
        examples=[
            OpenApiExample(
                "email agent",
                request_only=True,
                value={
                    "tools": [
                        {"name": "triage_inbox", "reads_facts": ["priority_senders"]},
                        {"name": "send_now", "mutating": True, "needs_confirmation": True},
                    ]
                },
            )
        ],
        tags=["skills"],
    )
    def put(self, request):
        data = self.AgentToolsInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        tools = agent_tools_set(agent=request.user, tools=data.validated_data["tools"])
        return Response(self._body(tools))


# --------------------------------------------------------------------------- deltas


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
    scope = serializers.CharField()
    findings = serializers.ListField(child=serializers.DictField())
    stale = serializers.BooleanField()
    retrieval_only = serializers.BooleanField()
    tokens = serializers.IntegerField()
    success_count = serializers.IntegerField()
    attempt_count = serializers.IntegerField()
    use_count = serializers.IntegerField()
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
        "scope": delta.scope,
        "findings": delta.findings,
        "stale": delta.stale,
        "retrieval_only": delta.retrieval_only,
        "tokens": delta.tokens,
        "success_count": delta.success_count,
        "attempt_count": delta.attempt_count,
        "use_count": delta.use_count,
        "members": sorted(m.pk for m in delta.members.all()),
        "created_at": delta.created_at,
        "approved_at": delta.approved_at,
    }


class FactSerializer(serializers.Serializer):
    namespace = serializers.CharField()
    key = serializers.CharField()
    value = serializers.JSONField()
    scope = serializers.CharField()
    provenance_source = serializers.CharField()
    consumers = serializers.ListField(child=serializers.DictField())
    inert = serializers.BooleanField(help_text="true when no declared tool reads this namespace")
    created_at = serializers.DateTimeField()


def _fact_body(fact, consumers: list[dict]) -> dict:
    return {
        "namespace": fact.namespace,
        "key": fact.key,
        "value": fact.value,
        "scope": fact.scope,
        "provenance_source": fact.provenance_source,
        "consumers": consumers,
        "inert": not consumers,
        "created_at": fact.created_at,
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
            help_text="`{source, turns}`; source user_instruction or outcome_evidence is "
            "trusted (staged), observed_content, missing or unreadable is untrusted "
            "(quarantined)",
        )
        scope = serializers.CharField(
            required=False,
            allow_blank=True,
            max_length=200,
            help_text="trust-ledger scope (default `skill:<name>`)",
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
        responses={200: DeltaListOutputSerializer, **_errors(401, 404)},
        tags=["skills"],
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
            "delta is written. " + DELTA_REFUSALS
        ),
        request=DeltaCreateInputSerializer,
        responses={
            201: DeltaCreateOutputSerializer,
            200: OpenApiResponse(
                DeltaCreateOutputSerializer, description="A routed fact that was unchanged."
            ),
            **_errors(400, 401, 404, 422, refusals=DELTA_REFUSALS),
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
        tags=["skills"],
    )
    def post(self, request, name: str):
        data = self.DeltaCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        result = delta_create(
            agent=request.user,
            skill_name=name,
            kind=values["kind"],
            anchor=values.get("anchor"),
            payload=values["payload"],
            provenance=values.get("provenance"),
            scope=values.get("scope"),
            permissions=values.get("permissions"),
            security_tier=values.get("security_tier"),
        )
        if result.fact is not None:
            consumers = fact_consumers(
                workspace=request.auth.workspace, namespaces=[result.fact.namespace]
            )[result.fact.namespace]
            body = {
                "routed_to": "fact",
                "warnings": result.warnings,
                "fact": _fact_body(result.fact, consumers),
            }
            code = status.HTTP_201_CREATED if result.fact_created else status.HTTP_200_OK
            return Response(self.DeltaCreateOutputSerializer(body).data, status=code)
        body = {**_delta_body(result.delta), "routed_to": "delta", "warnings": result.warnings}
        return Response(self.DeltaCreateOutputSerializer(body).data, status=status.HTTP_201_CREATED)


class EffectiveSkillApi(APIView):
    class EffectiveQuerySerializer(serializers.Serializer):
        session_id = serializers.CharField(required=False, allow_blank=True, max_length=200)
        learned = serializers.BooleanField(required=False, default=True)
        goal = serializers.CharField(required=False, allow_blank=True, max_length=1000)

    class AppliedSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        kind = serializers.CharField()
        tier = serializers.IntegerField()
        section = serializers.CharField()
        stale = serializers.BooleanField()
        via = serializers.CharField(help_text="tool | resident | retrieval")

    class EffectiveOutputSerializer(serializers.Serializer):
        name = serializers.CharField()
        version = serializers.CharField()
        text = serializers.CharField()
        digest = serializers.CharField(help_text="sha256 of `text`")
        base_digest = serializers.CharField(help_text="sha256 of the base body")
        skill_tools = serializers.ListField(child=serializers.CharField())
        applied = serializers.ListField(child=serializers.DictField())
        stale = serializers.ListField(
            child=serializers.IntegerField(), help_text="applied deltas whose section changed"
        )
        omitted = serializers.ListField(
            child=serializers.IntegerField(), help_text="deltas left out to stay in budget"
        )
        cached = serializers.BooleanField(help_text="served from this session's resolution")

    @extend_schema(
        operation_id="skill_effective_retrieve",
        summary="The effective skill: base ⊕ this agent's active deltas",
        description=(
            "The base body unchanged, then a `## Learned adjustments` block with active deltas "
            "in (tier, kind, created_at, id) order under their section names. Tool-hints only "
            "change `skill_tools`. With `session_id` the first resolution is cached for the "
            "session: deltas approved meanwhile apply from the next session. `learned=false` "
            "is byte-identical to a build with no deltas. Retrieval-only deltas render when "
            "`goal` matches their trigger (cosine ≥ 0.82)."
        ),
        parameters=[
            OpenApiParameter("session_id", str, required=False),
            OpenApiParameter("learned", bool, required=False, default=True),
            OpenApiParameter("goal", str, required=False),
        ],
        responses={200: EffectiveOutputSerializer, **_errors(400, 401, 404)},
        tags=["skills"],
    )
    def get(self, request, name: str):
        query = self.EffectiveQuerySerializer(data=dict(request.query_params.items()))
        query.is_valid(raise_exception=True)
        values = query.validated_data
        body = effective_skill_resolve(
            agent=request.user,
            skill_name=name,
            session_id=values.get("session_id", ""),
            learned=values.get("learned", True),
            goal=values.get("goal", ""),
        )
        return Response(self.EffectiveOutputSerializer(body).data)


# --------------------------------------------------------------------------- feedback


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
        responses={201: FeedbackOutputSerializer, **_errors(400, 401, 422)},
        tags=["skills"],
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


# --------------------------------------------------------------------------- facts


class FactApi(APIView):
    class FactPutInputSerializer(serializers.Serializer):
        value = serializers.JSONField()
        scope = serializers.CharField(required=False, max_length=200, default="global")
        provenance = serializers.JSONField(
            required=False,
            help_text="defaults to `{source: user_instruction}`: a direct fact write is a "
            "preference tool acting on what the user said. Untrusted sources are refused.",
        )

    @extend_schema(
        operation_id="facts_retrieve",
        summary="A tier-0 learned fact, with the tools that read it",
        responses={200: FactSerializer, **_errors(401, 404)},
        tags=["facts"],
    )
    def get(self, request, namespace: str, key: str):
        workspace = request.auth.workspace
        fact = fact_get(workspace=workspace, namespace=namespace, key=key)
        consumers = fact_consumers(workspace=workspace, namespaces=[namespace])[namespace]
        return Response(FactSerializer(_fact_body(fact, consumers)).data)

    @extend_schema(
        operation_id="facts_put",
        summary="Set a tier-0 learned fact",
        description=(
            "Tools read facts directly; nothing enters a prompt. A changed value supersedes "
            "the previous row (kept). The same value again changes nothing (200). "
            "Credentials and untrusted provenance are refused (422)."
        ),
        request=FactPutInputSerializer,
        responses={
            201: FactSerializer,
            200: OpenApiResponse(FactSerializer, description="Updated or unchanged."),
            **_errors(400, 401, 422),
        },
        examples=[
            OpenApiExample("priority sender", request_only=True, value={"value": True}),
        ],
        tags=["facts"],
    )
    def put(self, request, namespace: str, key: str):
        data = self.FactPutInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        workspace = request.auth.workspace
        fact, created = fact_put(
            workspace=workspace,
            agent=request.user,
            namespace=namespace,
            key=key,
            value=values["value"],
            scope=values["scope"],
            provenance=values.get("provenance", {"source": "user_instruction"}),
        )
        consumers = fact_consumers(workspace=workspace, namespaces=[namespace])[namespace]
        return Response(
            FactSerializer(_fact_body(fact, consumers)).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )


class FactListApi(APIView):
    class FactListOutputSerializer(serializers.Serializer):
        namespace = serializers.CharField()
        consumers = serializers.ListField(child=serializers.DictField())
        inert = serializers.BooleanField()
        facts = FactSerializer(many=True)

    @extend_schema(
        operation_id="facts_list",
        summary="The learned facts in a namespace and the tools that read them",
        responses={200: FactListOutputSerializer, **_errors(401)},
        tags=["facts"],
    )
    def get(self, request, namespace: str):
        workspace = request.auth.workspace
        consumers = fact_consumers(workspace=workspace, namespaces=[namespace])[namespace]
        facts = [
            _fact_body(f, consumers) for f in fact_list(workspace=workspace, namespace=namespace)
        ]
        body = {
            "namespace": namespace,
            "consumers": consumers,
            "inert": not consumers,
            "facts": facts,
        }
        return Response(self.FactListOutputSerializer(body).data)


urlpatterns: list = [
    path("skills/", SkillRegisterApi.as_view(), name="skill-register"),
    path("skills/<str:name>/", SkillDetailApi.as_view(), name="skill-detail"),
    path("skills/<str:name>/deltas/", SkillDeltasApi.as_view(), name="skill-deltas"),
    path("skills/<str:name>/effective/", EffectiveSkillApi.as_view(), name="skill-effective"),
    path("agents/me/tools/", AgentToolsApi.as_view(), name="agent-tools"),
    path("feedback/", FeedbackApi.as_view(), name="feedback"),
    path("facts/<str:namespace>/", FactListApi.as_view(), name="fact-list"),
    path("facts/<str:namespace>/<str:key>/", FactApi.as_view(), name="fact-detail"),
]
