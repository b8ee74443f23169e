"""The coding agent's sessions: what it remembers, the lessons its harness-reported
outcomes teach, the situations it gets stuck in, and the contradiction and old
session that maintenance jobs then settle."""

from __future__ import annotations

from datetime import timedelta

from django.core.management import call_command
from django.utils import timezone

from agents.demo.actors import DemoClient, demo_reviewer
from memory.core.actors import Actor
from memory.knowledge.remember import knowledge_remember
from memory.models import ConversationTurn, Workspace


def knowledge_sessions(coder: DemoClient, harness: DemoClient) -> None:
    """What a coding agent remembers, a reminder, and an error it ran into (the
    conversation turn and the tool calls as its harness reports them)."""
    from datetime import timedelta

    from django.utils import timezone

    items = [
        ("The team prefers small pull requests, one concern each.", "preference", "work"),
        (
            "Code review happens in the morning; avoid pinging reviewers after 17:00.",
            "preference",
            "work",
        ),
        ("The staging database listens on port 6543, not 5432.", "fact", "work"),
        ("CI runs on Debian 12 images with Python 3.11.", "fact", "work"),
        ("To run one test file: pytest tests/test_cart.py -x.", "skill", "work"),
        ("Sarah Chen owns the payments service.", "fact", "global"),
    ]
    for content, category, context in items:
        coder.call(
            "post", "knowledge/", {"content": content, "category": category, "context": context}
        )
    coder.call(
        "post",
        "knowledge/",
        {
            "content": "Rotate the staging TLS certificate before it expires.",
            "category": "reminder",
            "context": "work",
            "due_at": (timezone.now() + timedelta(days=3)).isoformat(),
        },
    )
    coder.call(
        "post",
        "knowledge/",
        {
            "content": "Sarah's personal phone number is in the HR system.",
            "category": "fact",
            "context": "work",
            "sensitive": True,
        },
    )
    # A turn of conversation, and a tool call that fails (an error item is kept).
    harness.call(
        "post",
        "sessions/demo-s1/turns/",
        {
            "role": "user",
            "content": "The cart tests fail on CI, can you fix them?",
            "turn_index": 0,
        },
    )
    harness.call(
        "post",
        "tool-calls/",
        {
            "calls": [
                {
                    "session_id": "demo-s1",
                    "tool": "shell",
                    "operation_key": "npm:ci",
                    "ok": False,
                    "error": "npm ERR! lockfile out of date with package.json",
                },
                {
                    "session_id": "demo-s1",
                    "tool": "shell",
                    "operation_key": "pytest",
                    "ok": True,
                },
            ]
        },
    )


def lesson_sessions(coder: DemoClient) -> None:
    """Sessions in which a coding agent learns, uses and unlearns lessons (``coder``
    is its harness: what it reports counts as evidence)."""
    project = "https://github.com/acme/webapp.git"
    goals = {
        "demo-s1": "Install the webapp's dependencies and get the test suite passing",
        "demo-s2": "Set up a fresh checkout of the webapp and run the tests",
        "demo-s3": "Bring up the services with docker compose and run the tests",
        "demo-s4": "Run the integration tests on the new CI image",
    }

    def outcome(oid, session, turn, approach, checks, in_play=()):
        return coder.call(
            "post",
            "outcomes/",
            {
                "outcome_id": oid,
                "session_id": session,
                "turn_index": turn,
                "project_remote": project,
                "goal_text": goals.get(session, f"demo {oid}"),
                "approach": [dict(step=i + 1, mutated=False, **a) for i, a in enumerate(approach)],
                "checks": checks,
                "claim_ok": True,
                "steps": len(approach),
                "in_play": list(in_play),
            },
        )

    def test_ok(step):
        return [
            {
                "kind": "test",
                "label": "pytest",
                "target": "tests",
                "ran": True,
                "exit_code": 0,
                "step": step,
            }
        ]

    # 1. A mistake, then what worked: a failed install followed by a working one
    #    in a passed turn becomes a lesson (learned by the loop, no model).
    first = outcome(
        "demo-s1-t1",
        "demo-s1",
        1,
        [
            {"operation_key": "pip:install", "target": "requirements.txt", "outcome": "failed"},
            {"operation_key": "uv:pip-install", "target": "requirements.txt", "outcome": "ok"},
            {"operation_key": "pytest", "target": "tests", "outcome": "ok"},
        ],
        test_ok(3),
    )
    lesson_id = first["lessons_created"][0]
    # 2. Next session: the lesson is served at plan time, used, and confirmed.
    coder.call("get", f"context/?project_remote={project}")
    outcome(
        "demo-s2-t1",
        "demo-s2",
        1,
        [
            {"operation_key": "uv:pip-install", "target": "requirements.txt", "outcome": "ok"},
            {"operation_key": "pytest", "target": "tests", "outcome": "ok"},
        ],
        test_ok(2),
        in_play=[{"type": "lesson", "id": lesson_id}],
    )

    # 3. The environment flips: compose v2 was right, then the CI image drops it.
    learned = outcome(
        "demo-s3-t1",
        "demo-s3",
        1,
        [
            {"operation_key": "docker:compose-v1", "target": "services", "outcome": "failed"},
            {"operation_key": "docker:compose-v2", "target": "services", "outcome": "ok"},
            {"operation_key": "pytest", "target": "tests", "outcome": "ok"},
        ],
        test_ok(3),
    )
    old = learned["lessons_created"][0]
    for n in (1, 2):
        outcome(
            f"demo-s4-t{n}",
            "demo-s4",
            n,
            [
                {
                    "operation_key": "docker:compose-v2",
                    "target": "services",
                    "outcome": "failed",
                },
            ],
            [
                {
                    "kind": "test",
                    "label": "pytest",
                    "target": "tests",
                    "ran": True,
                    "exit_code": 1,
                    "step": 1,
                }
            ],
            in_play=[{"type": "lesson", "id": old}],
        )
    outcome(
        "demo-s4-t3",
        "demo-s4",
        3,
        [
            {"operation_key": "docker:compose-v2", "target": "services", "outcome": "failed"},
            {"operation_key": "docker:compose-v1", "target": "services", "outcome": "ok"},
            {"operation_key": "pytest", "target": "tests", "outcome": "ok"},
        ],
        test_ok(3),
        in_play=[{"type": "lesson", "id": old}],
    )

    # A lesson the model claims without evidence: stored as claimed, never served.
    coder.call(
        "post",
        "lessons/",
        {
            "text": "Always run the linter before committing.",
            "operation_key": "ruff:check",
            "project_remote": project,
        },
    )


def situation_sessions(harness: DemoClient) -> None:
    """A headless turn in which gh is logged out: the harness posts every result, the
    sign-in is refused, and after two more workarounds the turn escalates."""
    turn = "demo-gh-1"
    machine = "m-demo-laptop"
    start = timezone.now() - timedelta(minutes=3)
    harness.call(
        "post",
        "outcomes/",
        {
            "outcome_id": turn,
            "session_id": "demo-gh",
            "project_remote": "https://github.com/acme/webapp.git",
            "machine": machine,
            "goal": "demo: list the open pull requests",
            "approach": [
                {"operation_key": "gh:pr-list", "outcome": "failed", "step": 1},
            ],
            "steps": 4,
            "wall_s": 94.0,
        },
    )
    results = [
        (0, {"tool": "check_cli_setup", "ok": False, "situation": {
            "kind": "auth", "subject": "gh", "unblock": "gh auth login",
            "interactive": True, "detail": "gh is installed but not signed in.",
            "probe": {"tool": "check_cli_setup", "args": {"binary": "gh"}},
            "env": "/usr/bin/gh 2.62.0"}}),
        (21, {"tool": "sign_in_cli", "interactive": True}),
        (52, {"tool": "fetch_page", "http_status": 401,
              "output": '{"message": "Requires authentication"}'}),
        (94, {"tool": "run_python", "exit_code": 1,
              "stderr": "urllib.error.HTTPError: HTTP Error 401: Unauthorized"}),
    ]  # fmt: skip
    for seconds, body in results:
        at = (start + timedelta(seconds=seconds)).isoformat()
        harness.call(
            "post",
            f"turns/{turn}/results/",
            {**body, "machine": machine, "session_id": "demo-gh", "attended": False, "at": at},
        )


def maintenance_sessions(coder: DemoClient, workspace: Workspace, *, stdout) -> None:
    """A contradiction for a reviewer, and an old session consolidated into a note,
    left by real reconcile and consolidate runs (visible under Job runs)."""
    # A person's sealed item and an agent's item that disagree: reconcile must not
    # decide (the agent's write is stored beside it, not over it).
    knowledge_remember(
        workspace=workspace,
        actor=Actor.for_user(demo_reviewer(workspace)),
        content="Production deploys happen on Tuesdays after the standup.",
        context="work",
        sealed=True,
    )
    coder.call(
        "post",
        "knowledge/",
        {
            "content": "Production deploys happen on Thursdays after the standup.",
            "context": "work",
        },
    )
    # Two agent items where the newer one wins by itself.
    for content in (
        "The staging database runs PostgreSQL 14 since the March upgrade.",
        "The staging database runs PostgreSQL 16 since the October upgrade.",
    ):
        coder.call("post", "knowledge/", {"content": content, "context": "work"})
    # A session from three weeks ago, never distilled.
    script = [
        ("user", "We need to move the billing service to the new cluster this sprint."),
        ("assistant", "I checked the billing manifests; they still target the old cluster."),
        ("user", "I prefer blue-green deploys for the billing service."),
        ("assistant", "Blue-green is set up; the new cluster serves 10% of billing traffic."),
        ("user", "Good, keep the old cluster warm until Friday."),
        ("assistant", "Noted: the old billing cluster stays up until Friday."),
    ]
    for index, (role, content) in enumerate(script):
        coder.call(
            "post",
            "sessions/demo-billing-move/turns/",
            {"role": role, "content": content, "turn_index": index},
        )
    ConversationTurn.objects.filter(workspace=workspace, session_id="demo-billing-move").update(
        created_at=timezone.now() - timedelta(days=21)
    )
    for kind in ("reconcile", "consolidate"):
        call_command("run_job", kind, "--workspace", workspace.name, stdout=stdout)
