"""Agent API: who this token is (SPEC section 11)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.apis.common import TAG_IDENTITY


class WhoAmIApi(APIView):
    class OutputSerializer(serializers.Serializer):
        agent = serializers.CharField()
        workspace = serializers.CharField()
        scope = serializers.CharField()

    @extend_schema(
        summary="The agent and workspace this token belongs to",
        responses=OutputSerializer,
        tags=[TAG_IDENTITY],
    )
    def get(self, request):
        token = request.auth
        return Response(
            self.OutputSerializer(
                {"agent": token.agent.name, "workspace": token.workspace.name, "scope": token.scope}
            ).data
        )
