"""Admin API: exports, erasures and their jobs (SPEC sections 7, 8 and 11).

Admin-scoped tokens only (``create_agent --admin``); agent tokens get 403.
Everything is scoped to the token's workspace: another workspace's job is a 404.
"""

from __future__ import annotations

from django.http import FileResponse
from django.urls import path, reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiResponse,
    extend_schema,
    inline_serializer,
)
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.auth import IsAdminToken
from cairn.errors import NotFoundError
from memory.datamap import ERASURE_SELECTORS, EXPORT_SELECTORS
from memory.selectors.privacy import (
    erasure_receipt_for_run,
    export_run_get,
    job_run_in_workspace,
    receipt_body,
)
from memory.services.erasure import erasure_preview, erasure_request, selector_parse
from memory.services.exports import FORMATS, export_file_get, export_request

ErrorSerializer = inline_serializer(
    "AdminError",
    {
        "error": inline_serializer(
            "AdminErrorBody",
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
        403: "An agent-scoped token: this endpoint needs an admin-scoped one.",
        404: "No such job in this token's workspace.",
        422: refusals or "A rule refused the request; `code` says which.",
    }
    return {code: OpenApiResponse(ErrorSerializer, description=described[code]) for code in codes}


def _actor(request) -> str:
    return f"agent:{request.user.name}"


class SelectorSerializer(serializers.Serializer):
    """One selector per request. Values are matched exactly, except ``text``."""

    agent = serializers.CharField(required=False, help_text="agent name, e.g. gaia/chat")
    project_remote = serializers.CharField(required=False, help_text="git remote URL")
    project_path = serializers.CharField(required=False, help_text="checkout path")
    entity = serializers.CharField(required=False, help_text="e.g. person:sarah_chen")
    context = serializers.CharField(required=False)
    session = serializers.CharField(required=False, help_text="session id")
    text = serializers.CharField(
        required=False,
        trim_whitespace=False,
        help_text="case-insensitive substring of any text (erasure only)",
    )
    skill = serializers.CharField(required=False, help_text="skill name (export only)")


class JobAcceptedSerializer(serializers.Serializer):
    job_id = serializers.IntegerField()
    status_url = serializers.CharField()


def _accepted(run) -> Response:
    body = {"job_id": run.pk, "status_url": reverse("agents:job", args=[run.pk])}
    return Response(JobAcceptedSerializer(body).data, status=status.HTTP_202_ACCEPTED)


def _selector(request, raw, allowed):
    return selector_parse(workspace=request.auth.workspace, data=raw, allowed=allowed)


class ExportStartApi(APIView):
    permission_classes = [IsAdminToken]

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
        responses={202: JobAcceptedSerializer, **_errors(400, 401, 403, 422)},
        examples=[
            OpenApiExample("whole workspace", request_only=True, value={"format": "json"}),
            OpenApiExample(
                "one agent", request_only=True, value={"selector": {"agent": "gaia/chat"}}
            ),
        ],
        tags=["admin"],
    )
    def post(self, request):
        data = self.ExportInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        selector = _selector(request, data.validated_data["selector"], EXPORT_SELECTORS)
        run = export_request(
            workspace=request.auth.workspace,
            selector=selector,
            fmt=data.validated_data["format"],
            actor=_actor(request),
        )
        return _accepted(run)


class ErasurePreviewApi(APIView):
    permission_classes = [IsAdminToken]

    class PreviewInputSerializer(serializers.Serializer):
        selector = SelectorSerializer()

    class PreviewOutputSerializer(serializers.Serializer):
        counts = serializers.DictField(
            child=serializers.IntegerField(), help_text="rows that would be deleted, per table"
        )
        recompute = serializers.DictField(
            child=serializers.IntegerField(),
            help_text="rows that stay but are recomputed without the erased evidence",
        )
        kept_matches = serializers.DictField(
            child=serializers.IntegerField(),
            help_text="text matches in tables erasure keeps (audit log, authored skills)",
        )
        total = serializers.IntegerField()

    @extend_schema(
        operation_id="erasures_preview",
        summary="Preview an erasure: rows per table, nothing deleted (admin token)",
        request=PreviewInputSerializer,
        responses={200: PreviewOutputSerializer, **_errors(400, 401, 403, 422)},
        tags=["admin"],
    )
    def post(self, request):
        data = self.PreviewInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        selector = _selector(request, data.validated_data["selector"], ERASURE_SELECTORS)
        preview = erasure_preview(workspace=request.auth.workspace, selector=selector)
        return Response(self.PreviewOutputSerializer(preview.as_dict()).data)


class ErasureStartApi(APIView):
    permission_classes = [IsAdminToken]

    class ErasureInputSerializer(serializers.Serializer):
        selector = SelectorSerializer()
        # Not required here: a missing or wrong confirmation is the rule's 422.
        confirm = serializers.CharField(required=False, allow_blank=True, default="")
        reason = serializers.CharField(required=False, allow_blank=True, max_length=500)

    @extend_schema(
        operation_id="erasures_start",
        summary="Erase for good (admin token)",
        description=(
            "Deletes the rows one selector reaches (`agent`, `project_remote`/`project_path`, "
            "`entity`, `context`, `session` or `text`), the rows derived from them, their "
            "vectors and cached renderings, then reclaims the space. `confirm` must be the "
            "workspace's name, typed: wrong or missing is 422 naming `confirm`. Runs as a job; "
            "its `receipt` (counts per table, the selector's digest, no content) is the proof. "
            "Retiring and archiving keep rows; this does not."
        ),
        request=ErasureInputSerializer,
        responses={
            202: JobAcceptedSerializer,
            **_errors(400, 401, 403, 422, refusals="`confirm` is not the workspace name."),
        },
        examples=[
            OpenApiExample(
                "forget a person",
                request_only=True,
                value={"selector": {"entity": "person:sarah_chen"}, "confirm": "acme"},
            )
        ],
        tags=["admin"],
    )
    def post(self, request):
        data = self.ErasureInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        selector = _selector(request, data.validated_data["selector"], ERASURE_SELECTORS)
        receipt = erasure_request(
            workspace=request.auth.workspace,
            selector=selector,
            confirm=data.validated_data["confirm"],
            actor=_actor(request),
            reason=data.validated_data.get("reason", ""),
        )
        return _accepted(receipt.job_run)


class ReceiptSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    workspace = serializers.CharField()
    status = serializers.CharField()
    requested_by = serializers.CharField()
    reason = serializers.CharField()
    selector = serializers.DictField(help_text="kind, and only a sha256 + length of content values")
    counts = serializers.DictField(child=serializers.IntegerField())
    rows_deleted = serializers.IntegerField()
    remaining = serializers.DictField(child=serializers.IntegerField())
    effects = serializers.DictField()
    requested_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    digest = serializers.CharField(help_text="sha256 of the canonical receipt")


class JobApi(APIView):
    permission_classes = [IsAdminToken]

    class JobOutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        kind = serializers.CharField()
        status = serializers.CharField()
        progress = serializers.FloatField(help_text="0.0 to 1.0")
        counts = serializers.DictField()
        error = serializers.CharField(allow_blank=True)
        download_url = serializers.CharField(required=False)
        receipt = ReceiptSerializer(required=False)

    @extend_schema(
        operation_id="jobs_get",
        summary="A job's status, progress and counts (admin token)",
        responses={200: JobOutputSerializer, **_errors(401, 403, 404)},
        tags=["admin"],
    )
    def get(self, request, job_id: int):
        run = job_run_in_workspace(workspace=request.auth.workspace, pk=job_id)
        if run is None:
            raise NotFoundError("No such job in this workspace.")
        body = {
            "id": run.pk,
            "kind": run.kind,
            "status": run.status,
            "progress": run.progress,
            "counts": run.counts,
            # A failure's traceback stays in the UI; the API says only that it failed.
            "error": "The job failed; see the job page." if run.error else "",
        }
        if export_file_get(run=run) is not None:
            body["download_url"] = reverse("agents:export_download", args=[run.pk])
        receipt = erasure_receipt_for_run(run=run)
        if receipt is not None:
            body["receipt"] = receipt_body(receipt)
        return Response(self.JobOutputSerializer(body).data)


class ExportDownloadApi(APIView):
    permission_classes = [IsAdminToken]

    @extend_schema(
        operation_id="exports_download",
        summary="Download a finished export file (admin token)",
        responses={
            (200, "application/json"): OpenApiResponse(OpenApiTypes.BINARY),
            **_errors(401, 403, 404),
        },
        tags=["admin"],
    )
    def get(self, request, job_id: int):
        run = export_run_get(workspace=request.auth.workspace, pk=job_id)
        path = export_file_get(run=run) if run is not None else None
        if path is None:
            raise NotFoundError("No export file for this job (not finished, or expired).")
        return FileResponse(
            open(path, "rb"),  # FileResponse closes it
            as_attachment=True,
            filename=path.name,
            content_type="application/x-ndjson" if path.suffix == ".jsonl" else "application/json",
        )


urlpatterns = [
    path("exports/", ExportStartApi.as_view(), name="exports"),
    path("exports/<int:job_id>/download/", ExportDownloadApi.as_view(), name="export_download"),
    path("erasures/", ErasureStartApi.as_view(), name="erasures"),
    path("erasures/preview/", ErasurePreviewApi.as_view(), name="erasures_preview"),
    path("jobs/<int:job_id>/", JobApi.as_view(), name="job"),
]
