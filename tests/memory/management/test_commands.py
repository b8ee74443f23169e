"""Operator commands: a mistyped workspace is refused, and every command explains itself."""

import io
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command, get_commands, load_command_class

import memory
from memory.models import Agent, ApiToken, AuditEvent, Workspace
from tests.factories.identity import WorkspaceFactory

pytestmark = pytest.mark.django_db

OURS = sorted(
    p.stem
    for p in (Path(memory.__file__).parent / "management" / "commands").glob("*.py")
    if not p.stem.startswith("_")
)


@pytest.mark.parametrize("command", ["create_user", "create_agent"])
def test_a_mistyped_workspace_is_refused_and_nothing_is_created(command):
    WorkspaceFactory(name="default")
    args = ["nowhere", "bob", "viewer"] if command == "create_user" else ["nowhere", "bot"]
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(CommandError) as caught:
        call_command(command, *args, stdout=out, stderr=err)
    assert "No workspace named 'nowhere'" in str(caught.value)
    assert "--create-workspace" in str(caught.value) and "default" in str(caught.value)
    assert out.getvalue() == ""  # no password or token printed
    assert not Workspace.objects.filter(name="nowhere").exists()
    assert not Agent.objects.filter(name="bot").exists()


def test_create_user_creates_the_workspace_only_when_asked_and_says_so():
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "create_user", "team", "bob", "viewer", "--create-workspace", stdout=out, stderr=err
    )
    assert "Created workspace 'team'" in err.getvalue()
    assert "Created user 'bob', viewer in 'team'" in err.getvalue()
    assert out.getvalue().strip()  # the password, last
    assert AuditEvent.objects.filter(action="workspace.create", workspace__name="team").exists()
    err = io.StringIO()
    call_command("create_user", "team", "ann", "admin", stdout=io.StringIO(), stderr=err)
    assert "Created workspace" not in err.getvalue()


def test_create_user_on_an_existing_user_leaves_the_password_alone_and_says_so():
    from django.contrib.auth import get_user_model

    from memory.models import Membership

    call_command(
        "create_user",
        "team",
        "ada",
        "admin",
        "--create-workspace",
        stdout=io.StringIO(),
        stderr=io.StringIO(),
    )
    ada = get_user_model().objects.get(username="ada")
    ada.set_password("ada-own-password")
    ada.save()
    call_command(
        "create_user",
        "other",
        "x",
        "viewer",
        "--create-workspace",
        stdout=io.StringIO(),
        stderr=io.StringIO(),
    )
    # The import hint's command, run as written with an existing username.
    out, err = io.StringIO(), io.StringIO()
    call_command("create_user", "other", "ada", "admin", stdout=out, stderr=err)
    ada.refresh_from_db()
    assert ada.check_password("ada-own-password")
    assert out.getvalue() == ""  # no password printed: none was set
    assert "User 'ada' exists; added as admin in 'other'" in err.getvalue()
    assert "password is unchanged" in err.getvalue() and "--reset-password" in err.getvalue()
    assert Membership.objects.get(user=ada, workspace__name="other").role == "admin"
    # A role change says what it was.
    err = io.StringIO()
    call_command("create_user", "other", "ada", "viewer", stdout=out, stderr=err)
    assert "now viewer in 'other' (was admin)" in err.getvalue()
    assert ada.check_password("ada-own-password")


def test_create_user_resets_a_password_only_when_told_to():
    from django.contrib.auth import get_user_model

    call_command(
        "create_user",
        "team",
        "ada",
        "admin",
        "--create-workspace",
        stdout=io.StringIO(),
        stderr=io.StringIO(),
    )
    out, err = io.StringIO(), io.StringIO()
    call_command("create_user", "team", "ada", "admin", "--reset-password", stdout=out, stderr=err)
    new = out.getvalue().strip()
    assert new and "password was reset" in err.getvalue()
    assert get_user_model().objects.get(username="ada").check_password(new)


def test_create_agent_says_whether_the_agent_is_new():
    WorkspaceFactory(name="team")
    err = io.StringIO()
    call_command("create_agent", "team", "gaia/chat", stdout=io.StringIO(), stderr=err)
    assert "New agent 'gaia/chat' in workspace 'team'" in err.getvalue()
    err = io.StringIO()
    call_command("create_agent", "team", "gaia/chat", stdout=io.StringIO(), stderr=err)
    assert "Existing agent 'gaia/chat'" in err.getvalue()
    assert ApiToken.objects.filter(agent__name="gaia/chat").count() == 2


def test_a_bad_agent_name_creates_no_workspace():
    with pytest.raises(CommandError):
        call_command(
            "create_agent", "fresh", "has space", "--create-workspace", stderr=io.StringIO()
        )
    assert not Workspace.objects.filter(name="fresh").exists()


def test_our_commands_are_all_found():
    assert set(OURS) <= set(get_commands())
    assert {"create_user", "create_agent", "export", "import_export"} <= set(OURS)


@pytest.mark.parametrize("name", OURS)
def test_every_command_has_help_a_newcomer_understands(name):
    command = load_command_class("memory", name)
    assert len(command.help) >= 60, f"{name}: say what it does, in a sentence or two"
    parser = command.create_parser("manage.py", name)
    text = parser.format_help()
    for action in parser._actions:
        if action.dest in {"help", "version", "verbosity", "settings", "pythonpath"}:
            continue
        if action.dest in {"traceback", "no_color", "force_color", "skip_checks"}:
            continue
        assert action.help, f"{name}: argument {action.dest!r} has no help text"
    assert "usage:" in text
