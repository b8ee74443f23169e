"""POST /api/v1/outcomes/ with ``goal_text``: kept only when the workspace opted in;
and a remote names a project that has no label yet."""

from __future__ import annotations

import hashlib

import pytest

from memory.core.actors import Actor
from memory.identity.projects import project_label_set, remote_label
from memory.identity.services import GOAL_TEXT_SETTING
from memory.models import AuditEvent, Outcome, ProjectLabel
from tests.factories.lessons import BLOG, SHOP, digest, outcome_payload

URL = "/api/v1/outcomes/"
GOAL = "Fix the failing cart test before the release"


def post(harness, **overrides):
    body = outcome_payload(**overrides)
    body.pop("goal", None)
    return harness.post(URL, body, format="json")


def opt_in(harness):
    workspace = harness.agent.workspace
    workspace.settings = {**workspace.settings, GOAL_TEXT_SETTING: True}
    workspace.save(update_fields=["settings"])


def test_it_keeps_only_the_digest_when_the_workspace_has_not_opted_in(harness):
    response = post(harness, goal_text=GOAL)
    assert response.status_code == 201, response.json()
    assert response.json()["goal_text_stored"] is False
    outcome = Outcome.objects.get(pk=response.json()["id"])
    assert outcome.goal_text == ""
    assert outcome.goal_digest == hashlib.sha256(GOAL[:200].encode()).hexdigest()


def test_it_stores_the_goal_text_when_the_workspace_opted_in(harness):
    opt_in(harness)
    response = post(harness, goal_text=GOAL)
    assert response.status_code == 201 and response.json()["goal_text_stored"] is True
    outcome = Outcome.objects.get(pk=response.json()["id"])
    assert outcome.goal_text == GOAL
    assert outcome.goal_digest == hashlib.sha256(GOAL[:200].encode()).hexdigest()


def test_it_answers_goal_text_stored_false_without_a_goal_text(harness):
    opt_in(harness)
    response = post(harness)
    assert response.json()["goal_text_stored"] is False


def test_a_retry_replays_the_first_answer(harness):
    opt_in(harness)
    body = outcome_payload(goal_text=GOAL)
    first = harness.post(URL, body, format="json")
    again = harness.post(URL, body, format="json")
    assert again.status_code == 200 and again.json() == first.json()


def test_it_refuses_a_credential_in_the_goal_text_and_stores_nothing(harness):
    opt_in(harness)
    response = post(harness, goal_text="deploy with AKIAIOSFODNN7EXAMPLE please")
    assert response.status_code == 422, response.json()
    assert "goal_text" in str(response.json())
    assert not Outcome.objects.exists()


def test_it_refuses_a_credential_even_when_the_text_would_not_be_kept(harness):
    response = post(harness, goal_text="token ghp_abcdefghijklmnopqrstuvwxyz0123456789")
    assert response.status_code == 422 and not Outcome.objects.exists()


def test_it_refuses_an_overlong_goal_text_with_a_400_naming_it(harness):
    response = post(harness, goal_text="x" * 1001)
    assert response.status_code == 400
    assert "goal_text" in response.json()["error"]["fields"]
    assert not Outcome.objects.exists()


def test_it_refuses_a_nul_in_the_goal_text(harness):
    response = post(harness, goal_text="a\x00b")
    assert response.status_code == 400 and not Outcome.objects.exists()


# --- project labels from the remote -------------------------------------------------------------


@pytest.mark.parametrize(
    ("remote", "label"),
    [
        ("git@github.com:acme/widgets.git", "widgets"),
        ("https://user:pw@github.com/acme/widgets/", "widgets"),
        ("ssh://git@github.com:22/acme/Widgets", "Widgets"),
        ("/srv/git/tools.git", "tools"),
        ("", ""),
    ],
)
def test_remote_label_is_the_last_path_segment(remote, label):
    assert remote_label(remote) == label


def test_a_remote_names_an_unnamed_project(harness):
    response = post(harness, project_remote="git@github.com:acme/widgets.git")
    assert response.status_code == 201
    workspace = harness.agent.workspace
    row = ProjectLabel.objects.get(workspace=workspace)
    assert row.label == "widgets"
    assert row.project_digest == digest("git@github.com:acme/widgets.git")
    assert Outcome.objects.get().project_digest == row.project_digest  # rows keep the digest
    event = AuditEvent.objects.get(action="project.label_from_remote")
    assert event.actor == f"harness:{harness.agent.name}"


def test_it_never_overwrites_a_persons_label(harness, member_client):
    workspace = harness.agent.workspace
    member_client(workspace=workspace, role="reviewer")
    person = workspace.memberships.get().user
    project_label_set(
        workspace=workspace,
        project_digest=digest(BLOG),
        label="The blog",
        actor=Actor.for_user(person),
    )
    post(harness, project_remote=BLOG)
    post(harness, project_remote=BLOG)
    assert ProjectLabel.objects.get(workspace=workspace).label == "The blog"
    assert not AuditEvent.objects.filter(action="project.label_from_remote").exists()


def test_it_labels_a_project_once(harness):
    post(harness, project_remote=SHOP)
    post(harness, project_remote=SHOP)
    assert ProjectLabel.objects.filter(workspace=harness.agent.workspace).count() == 1
    assert AuditEvent.objects.filter(action="project.label_from_remote").count() == 1


def test_a_path_alone_names_nothing(harness):
    post(harness, project_remote="", project_path="/home/alice/src/secret")
    assert not ProjectLabel.objects.exists()
