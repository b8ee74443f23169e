"""Agent API: the agent's declared tool registry (SPEC sections 6 and 11)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.apis.common import SKILL_ERRORS, TAG_SKILLS, errors
from memory.skills.registry import agent_tools_set
from memory.skills.selectors import agent_tool_list


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
        responses={200: AgentToolsOutputSerializer, **errors(401, area=SKILL_ERRORS)},
        tags=[TAG_SKILLS],
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
        responses={200: AgentToolsOutputSerializer, **errors(400, 401, area=SKILL_ERRORS)},
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
        tags=[TAG_SKILLS],
    )
    def put(self, request):
        data = self.AgentToolsInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        tools = agent_tools_set(agent=request.user, tools=data.validated_data["tools"])
        return Response(self._body(tools))
