"""manage.py run_job KIND [--workspace W]: the same jobs as the API, from the shell."""

import io

import pytest
from django.core.management import CommandError, call_command

from memory.models import JobRun, Knowledge
from tests.factories.maintenance import plant

pytestmark = pytest.mark.django_db


def test_it_runs_a_workspace_job_here_and_records_it(workspace):
    plant(workspace)
    out = io.StringIO()
    call_command("run_job", "reconcile", "--workspace", workspace.name, stdout=out)
    run = JobRun.objects.get(kind="reconcile")
    assert run.status == "succeeded" and run.workspace == workspace
    assert run.requested_by == "cli:run_job" and f"job run {run.pk} succeeded" in out.getvalue()
    assert Knowledge.objects.filter(superseded_by__isnull=False).count() == 2


def test_it_runs_a_global_job(workspace):
    call_command("run_job", "decay", stdout=io.StringIO())
    assert JobRun.objects.get(kind="decay").status == "succeeded"


def test_it_refuses_unknown_kinds_and_workspaces():
    with pytest.raises(CommandError):
        call_command("run_job", "format_disk")
    with pytest.raises(CommandError, match="No workspace"):
        call_command("run_job", "reconcile", "--workspace", "nope")
