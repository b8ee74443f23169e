"""Project labels: a person's name for a digest, audited; blank removes it.
Project digests: every spelling of a remote or path gives one digest."""

import pytest

from cairn.errors import ApplicationError
from memory.identity.projects import (
    path_normalize,
    project_digest,
    project_label_set,
    remote_normalize,
    target_relativize,
)
from memory.identity.selectors import project_labels
from memory.models import AuditEvent, ProjectLabel
from tests.factories.identity import WorkspaceFactory, person_actor
from tests.factories.lessons import digest


@pytest.mark.django_db
def test_it_names_renames_and_unnames_a_project(workspace):
    d = digest()
    assert (
        project_label_set(
            workspace=workspace,
            project_digest=d,
            label="  acme  shop ",
            actor=person_actor("ada"),
        )
        == "acme shop"
    )
    project_label_set(
        workspace=workspace,
        project_digest=d,
        label="shop",
        actor=person_actor("ada"),
    )
    assert project_labels(workspace=workspace, digests=[d, "f" * 64]) == {d: "shop"}
    # Another workspace's names are its own.
    assert project_labels(workspace=WorkspaceFactory(), digests=[d]) == {}
    project_label_set(
        workspace=workspace,
        project_digest=d,
        label="",
        actor=person_actor("ada"),
    )
    assert not ProjectLabel.objects.exists()
    actions = list(
        AuditEvent.objects.filter(target_type="project").values_list("action", flat=True)
    )
    assert sorted(actions) == ["project.label", "project.label", "project.unlabel"]


@pytest.mark.django_db
def test_it_refuses_what_is_not_a_digest_and_long_labels(workspace):
    with pytest.raises(ApplicationError) as bad:
        project_label_set(
            workspace=workspace,
            project_digest="/home/me/src",
            label="x",
            actor=person_actor("ada"),
        )
    assert bad.value.status_code == 400
    with pytest.raises(ApplicationError):
        project_label_set(
            workspace=workspace,
            project_digest=digest(),
            label="x" * 81,
            actor=person_actor("ada"),
        )
    assert not ProjectLabel.objects.exists()


# --- project digests ---------------------------------------------------------------------------------


def test_it_gives_every_spelling_of_a_remote_one_digest():
    spellings = [
        "https://github.com/acme/shop",
        "https://github.com/acme/shop.git",
        "https://github.com/acme/shop/",
        "https://alice:s3cret@github.com/acme/shop.git",
        "git@github.com:acme/shop.git",
        "ssh://git@github.com:22/acme/shop.git",
        "  HTTPS://GitHub.com/acme/shop  ",
    ]
    assert {remote_normalize(s) for s in spellings} == {"github.com/acme/shop"}
    assert len({project_digest(remote=s) for s in spellings}) == 1


def test_it_prefers_the_remote_and_falls_back_to_the_path():
    by_remote = project_digest(remote="git@github.com:acme/shop.git", path="/home/a/shop")
    assert by_remote == project_digest(remote="https://github.com/acme/shop")
    by_path = project_digest(path="/home/a/shop/")
    assert by_path == project_digest(path="/home/a/shop")
    assert by_path != by_remote
    assert project_digest() == ""
    assert path_normalize("/home/a//shop/./x/..") == "/home/a/shop"


def test_it_makes_targets_under_the_project_path_relative():
    assert target_relativize("/home/a/shop/tests", path="/home/a/shop") == "tests"
    assert target_relativize("/home/a/shop", path="/home/a/shop/") == "."
    assert target_relativize("/home/a/shopping", path="/home/a/shop") == "/home/a/shopping"
    assert target_relativize("tests", path=None) == "tests"
