"""Health of the server's parts, for probes (SPEC section 11). No token needed."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_view, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.apis.common import TAG_HEALTH
from cairn.health import health


class HealthApi(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(
        summary="Health of database, pgvector, broker and workers",
        responses={
            (200, "application/json"): inline_serializer(
                "Health",
                {
                    "status": serializers.CharField(),
                    "database": serializers.CharField(),
                    "pgvector": serializers.CharField(),
                    "broker": serializers.CharField(),
                    "workers": serializers.IntegerField(),
                },
            ),
            (503, "application/json"): inline_serializer(
                "Unhealthy",
                {
                    "status": serializers.CharField(),
                    "problems": serializers.ListField(child=serializers.CharField()),
                },
            ),
        },
        tags=[TAG_HEALTH],
    )
    def get(self, request):
        healthy, body = health()
        return Response(body, status=200 if healthy else 503)


@extend_schema_view(get=extend_schema(exclude=True))
class HealthSlashApi(HealthApi):
    """/healthz/ answers like /healthz for probes that add a slash; documented once."""
