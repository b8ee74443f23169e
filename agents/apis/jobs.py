"""Admin API: run a job now; a job's status, progress, counts and receipt (SPEC sections 7, 8 and 11).

Admin-scoped tokens only; another workspace's job is a 404.
"""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.apis.common import ADMIN_ERRORS, TAG_ADMIN, actor, errors
from agents.apis.erasures import ReceiptSerializer
from cairn.errors import ApplicationError, NotFoundError
from memory.maintenance.runnow import RUNNABLE_JOBS, job_run_now
from memory.models import JobRun
from memory.privacy.exports import export_file_get
from memory.privacy.selectors import erasure_receipt_for_run, job_run_in_workspace, receipt_body


class JobApi(APIView):
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


class JobStartApi(APIView):
    class JobStartInputSerializer(serializers.Serializer):
        kind = serializers.ChoiceField(choices=sorted(RUNNABLE_JOBS))
        workspace = serializers.CharField(
            required=False, max_length=64, help_text="defaults to (and must be) the token's"
        )

    class JobStartOutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        job_id = serializers.IntegerField()
        kind = serializers.CharField()
        status = serializers.CharField()
        status_url = serializers.CharField()

    @extend_schema(
        operation_id="jobs_start",
        summary="Run a background job now (admin token)",
        description=(
            "Queues `reconcile`, `consolidate`, `decay`, `maintenance`, `prune`, "
            "`embed_backfill`, `skills.budget` or `skills.consolidate`. Workspace jobs run "
            "for the token's workspace; a run of the same kind already queued is returned "
            "instead of a second one. Poll `status_url` for progress and counts."
        ),
        request=JobStartInputSerializer,
        responses={202: JobStartOutputSerializer, **errors(400, 401, 403, area=ADMIN_ERRORS)},
        tags=[TAG_ADMIN],
    )
    def post(self, request):
        data = self.JobStartInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        workspace = request.auth.workspace
        named = data.validated_data.get("workspace")
        if named is not None and named != workspace.name:
            raise ApplicationError(
                "An admin token runs jobs for its own workspace only.",
                code="permission_denied",
                fields={"workspace": ["not this token's workspace"]},
                status_code=403,
            )
        run, _ = job_run_now(
            kind=data.validated_data["kind"], workspace=workspace, actor=actor(request)
        )
        body = {
            "id": run.pk,
            "job_id": run.pk,
            "kind": run.kind,
            "status": run.status,
            "status_url": reverse("agents:job", args=[run.pk]),
        }
        return Response(self.JobStartOutputSerializer(body).data, status=status.HTTP_202_ACCEPTED)
