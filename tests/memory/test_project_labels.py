"""Project labels: a person's name for a digest, audited; blank removes it."""

import pytest

from cairn.errors import ApplicationError
from memory.models import AuditEvent, ProjectLabel
from memory.selectors.projects import project_labels
from memory.services.projects import project_label_set
from tests.factories import WorkspaceFactory
from tests.factories_lessons import digest

pytestmark = pytest.mark.django_db


def test_it_names_renames_and_unnames_a_project(workspace):
    d = digest()
    assert (
        project_label_set(
            workspace=workspace, project_digest=d, label="  acme  shop ", actor="user:ada"
        )
        == "acme shop"
    )
    project_label_set(workspace=workspace, project_digest=d, label="shop", actor="user:ada")
    assert project_labels(workspace=workspace, digests=[d, "f" * 64]) == {d: "shop"}
    # Another workspace's names are its own.
    assert project_labels(workspace=WorkspaceFactory(), digests=[d]) == {}
    project_label_set(workspace=workspace, project_digest=d, label="", actor="user:ada")
    assert not ProjectLabel.objects.exists()
    actions = list(
        AuditEvent.objects.filter(target_type="project").values_list("action", flat=True)
    )
    assert sorted(actions) == ["project.label", "project.label", "project.unlabel"]


def test_it_refuses_what_is_not_a_digest_and_long_labels(workspace):
    with pytest.raises(ApplicationError) as bad:
        project_label_set(
            workspace=workspace, project_digest="/home/me/src", label="x", actor="user:ada"
        )
    assert bad.value.status_code == 400
    with pytest.raises(ApplicationError):
        project_label_set(
            workspace=workspace, project_digest=digest(), label="x" * 81, actor="user:ada"
        )
    assert not ProjectLabel.objects.exists()
