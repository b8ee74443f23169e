"""Admin API: erasures, previewed then run as a job (SPEC sections 8 and 11).

Admin-scoped tokens only (``create_agent --admin``); agent tokens get 403.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.apis.common import (
    ADMIN_ERRORS,
    TAG_ADMIN,
    JobAcceptedSerializer,
    SelectorSerializer,
    accepted_response,
    errors,
    selection_for_job,
    selection_from_request,
)
from memory.privacy.erasure import erasure_preview, erasure_request
from memory.privacy.selection import ERASURE_SELECTORS


class ErasurePreviewApi(APIView):
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
        responses={200: PreviewOutputSerializer, **errors(400, 401, 403, 422, area=ADMIN_ERRORS)},
        tags=[TAG_ADMIN],
    )
    def post(self, request):
        data, selector = selection_from_request(
            request, self.PreviewInputSerializer, ERASURE_SELECTORS
        )
        preview = erasure_preview(workspace=request.auth.workspace, selector=selector)
        return Response(self.PreviewOutputSerializer(preview.as_dict()).data)


class ErasureStartApi(APIView):
    class ErasureInputSerializer(serializers.Serializer):
        selector = SelectorSerializer()
        # Not required here: a missing or wrong confirmation is the rule's 422.
        confirm = serializers.CharField(
            required=False, allow_blank=True, default="", max_length=200
        )
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
            **errors(
                400,
                401,
                403,
                422,
                area=ADMIN_ERRORS,
                refusals="`confirm` is not the workspace name.",
            ),
        },
        examples=[
            OpenApiExample(
                "forget a person",
                request_only=True,
                value={"selector": {"entity": "person:sarah_chen"}, "confirm": "acme"},
            )
        ],
        tags=[TAG_ADMIN],
    )
    def post(self, request):
        data, job = selection_for_job(request, self.ErasureInputSerializer, ERASURE_SELECTORS)
        receipt = erasure_request(**job, confirm=data["confirm"], reason=data.get("reason", ""))
        return accepted_response(receipt.job_run)


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
