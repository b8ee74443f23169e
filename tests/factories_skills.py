"""Builders for skills tests: SKILL.md texts and real service calls (no model shortcuts)."""

from __future__ import annotations

import hashlib

from memory.models import Role

TRIAGE_BODY = """
# Triage inbox

Sort new mail by urgency.

## Escalation
Escalate a thread when it has been waiting longer than the follow-up window
without a reply.

## Drafting replies
Keep replies short and polite.
"""

EMAIL_TOOLS = [
    {"name": "triage_inbox", "reads_facts": ["priority_senders"]},
    {"name": "pre_scan_inbox"},
    {"name": "summarize_thread"},
    {"name": "send_now", "mutating": True, "needs_confirmation": True},
    {"name": "archive_message", "mutating": True},
    {"name": "schedule_send", "needs_confirmation": True},
]


def skill_md(
    *,
    name: str = "triage-inbox",
    version: str | None = "1.0.0",
    body: str = TRIAGE_BODY,
    permissions: tuple = ("network:imap",),
    tools: tuple = ("triage_inbox", "summarize_thread"),
    description: str = "Sort the inbox by urgency",
) -> str:
    lines = ["---", f"name: {name}"]
    if version is not None:
        lines.append(f"version: {version}")
    lines.append(f"description: {description}")
    lines.append("permissions: [" + ", ".join(permissions) + "]")
    lines.append("tools: [" + ", ".join(tools) + "]")
    lines.append("---")
    return "\n".join(lines) + "\n" + body


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def register(api, **kwargs):
    return api.post("/api/v1/skills/", {"skill_md": skill_md(**kwargs)}, format="json")


def declare_tools(api, tools=None):
    response = api.put("/api/v1/agents/me/tools/", {"tools": tools or EMAIL_TOOLS}, format="json")
    assert response.status_code == 200, response.json()
    return response


def post_delta(api, name="triage-inbox", **body):
    body.setdefault("provenance", {"source": "user_instruction", "turns": ["s1#1"]})
    return api.post(f"/api/v1/skills/{name}/deltas/", body, format="json")


def preference(
    api, text="Escalate anything from the CFO after 48 hours.", section="escalation", **kw
):
    return post_delta(
        api, kind="preference", anchor={"section": section}, payload={"body": text}, **kw
    )


def reviewer(workspace, role: str = Role.REVIEWER, username: str | None = None):
    from memory.services.identity import user_create

    user, _ = user_create(
        workspace=workspace,
        username=username or f"{role}-{workspace.pk}",
        role=role,
        password="pw-for-tests-only",
    )
    return user
