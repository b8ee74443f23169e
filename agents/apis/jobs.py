"""Admin API: a job's status, progress, counts and receipt (SPEC sections 7, 8 and 11).

Admin-scoped tokens only; another workspace's job is a 404.
"""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.apis.common import ADMIN_ERRORS, TAG_ADMIN, errors
from agents.apis.erasures import ReceiptSerializer
from agents.auth import IsAdminToken
from cairn.errors import NotFoundError
from memory.models import JobRun
from memory.privacy.exports import export_file_get
from memory.privacy.selectors import erasure_receipt_for_run, job_run_in_workspace, receipt_body


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
        responses={200: JobOutputSerializer, **errors(401, 403, 404, area=ADMIN_ERRORS)},
        tags=[TAG_ADMIN],
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
            # An interruption's message is Cairn's own sentence (the reaper's), no trace.
            "error": run.error
            if run.status == JobRun.Status.INTERRUPTED
            else ("The job failed; see the job page." if run.error else ""),
        }
        if export_file_get(run=run) is not None:
            body["download_url"] = reverse("agents:export_download", args=[run.pk])
        receipt = erasure_receipt_for_run(run=run)
        if receipt is not None:
            body["receipt"] = receipt_body(receipt)
        return Response(self.JobOutputSerializer(body).data)
