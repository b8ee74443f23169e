"""Admin API: exports and their download (SPEC sections 7 and 11).

Admin-scoped tokens only (``create_agent --admin``); agent tokens get 403.
Everything is scoped to the token's workspace: another workspace's job is a 404.
"""

from __future__ import annotations

from django.http import FileResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.views import APIView

from agents.apis.common import (
    ADMIN_ERRORS,
    TAG_ADMIN,
    JobAcceptedSerializer,
    SelectorSerializer,
    accepted_response,
    errors,
    selection_for_job,
)
from cairn.errors import NotFoundError
from memory.privacy.exports import (
    FORMATS,
    export_file_get,
    export_file_missing_why,
    export_request,
)
from memory.privacy.selection import EXPORT_SELECTORS
from memory.privacy.selectors import export_run_get


class ExportStartApi(APIView):
    class ExportInputSerializer(serializers.Serializer):
        selector = SelectorSerializer(required=False, default=dict)
        format = serializers.ChoiceField(choices=FORMATS, default="json")

    @extend_schema(
        operation_id="exports_start",
        summary="Start an export (admin token)",
        description=(
            "Everything learned in the token's workspace, or one agent (`agent`), project "
            "(`project_remote` / `project_path`) or skill (`skill`), as JSON or JSON Lines. "
            "Runs as a job: poll `GET /api/v1/jobs/{id}/`, then fetch its `download_url`. "
            "Secrets (token digests), embeddings and idempotency replays are never exported."
        ),
        request=ExportInputSerializer,
        responses={202: JobAcceptedSerializer, **errors(400, 401, 403, 422, area=ADMIN_ERRORS)},
        examples=[
            OpenApiExample("whole workspace", request_only=True, value={"format": "json"}),
            OpenApiExample(
                "one agent", request_only=True, value={"selector": {"agent": "gaia/chat"}}
            ),
        ],
        tags=[TAG_ADMIN],
    )
    def post(self, request):
        data, job = selection_for_job(request, self.ExportInputSerializer, EXPORT_SELECTORS)
        run = export_request(**job, fmt=data["format"])
        return accepted_response(run)


class ExportDownloadApi(APIView):
    @extend_schema(
        operation_id="exports_download",
        summary="Download a finished export file (admin token)",
        responses={
            (200, "application/json"): OpenApiResponse(OpenApiTypes.BINARY),
            **errors(401, 403, 404, area=ADMIN_ERRORS),
        },
        tags=[TAG_ADMIN],
    )
    def get(self, request, job_id: int):
        run = export_run_get(workspace=request.auth.workspace, pk=job_id)
        path = export_file_get(run=run) if run is not None else None
        if path is None:
            raise NotFoundError(export_file_missing_why(run=run))
        return FileResponse(
            open(path, "rb"),  # FileResponse closes it
            as_attachment=True,
            filename=path.name,
            content_type="application/x-ndjson" if path.suffix == ".jsonl" else "application/json",
        )
