"""GET /api/v1/jobs/{id}/ (admin token): a job of another workspace is a 404."""

import pytest

from memory.models import JobRun
from tests.factories.identity import WorkspaceFactory


@pytest.mark.django_db
def test_it_hides_other_workspaces_jobs(admin, make_api):
    other = make_api(workspace=WorkspaceFactory(), scope="admin")
    run = JobRun.objects.create(kind="export", workspace=other.agent.workspace)
    assert admin.get(f"/api/v1/jobs/{run.pk}/").status_code == 404
    assert admin.get(f"/api/v1/exports/{run.pk}/download/").status_code == 404
    assert other.get(f"/api/v1/jobs/{run.pk}/").status_code == 200
