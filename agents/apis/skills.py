"""Agent API: skills: register a SKILL.md version, read it, and resolve the effective
skill (SPEC sections 6 and 11).

The API validates shapes and calls memory services and selectors; every rule
(refusals, trust, consent, rendering) lives in ``memory``.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.apis.common import INCOGNITO_READ_HELP, SKILL_ERRORS, TAG_SKILLS, actor, errors
from memory.skills.effective import effective_skill_resolve
from memory.skills.registry import skill_register
from memory.skills.selectors import skill_get


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
            **errors(400, 401, 409, area=SKILL_ERRORS),
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
        tags=[TAG_SKILLS],
    )
    def post(self, request):
        data = self.SkillRegisterInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        result = skill_register(
            workspace=request.auth.workspace,
            skill_md=data.validated_data["skill_md"],
            actor=actor(request),
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
        responses={200: SkillDetailOutputSerializer, **errors(401, 404, area=SKILL_ERRORS)},
        tags=[TAG_SKILLS],
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


class EffectiveSkillApi(APIView):
    class EffectiveQuerySerializer(serializers.Serializer):
        session_id = serializers.CharField(required=False, allow_blank=True, max_length=200)
        learned = serializers.BooleanField(required=False, default=True)
        goal = serializers.CharField(required=False, allow_blank=True, max_length=1000)
        incognito = serializers.BooleanField(
            required=False, default=False, help_text=INCOGNITO_READ_HELP
        )

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
            OpenApiParameter(
                "incognito", bool, required=False, default=False, description=INCOGNITO_READ_HELP
            ),
        ],
        responses={200: EffectiveOutputSerializer, **errors(400, 401, 404, area=SKILL_ERRORS)},
        tags=[TAG_SKILLS],
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
            record=not values.get("incognito", False),
        )
        return Response(self.EffectiveOutputSerializer(body).data)
