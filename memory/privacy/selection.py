"""What an erasure or export reaches: the selector kinds, parsing one from a
request, and the digest-only form a receipt keeps."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from django.conf import settings

from cairn.errors import ApplicationError
from memory.identity.projects import project_digest
from memory.models import (
    Agent,
    Skill,
    Workspace,
)

SELECTOR_VALUE_MAX = 200


def refusal(field_name: str, message: str, status_code: int = 400) -> ApplicationError:
    return ApplicationError(
        f"Invalid input: {field_name}. {message}",
        code="invalid" if status_code == 400 else "invalid_selector",
        fields={field_name: [message]},
        status_code=status_code,
    )


def selector_parse(
    *, workspace: Workspace, data, allowed: Iterable[str], field_name: str = "selector"
) -> Selector:
    """A selector from ``{"agent": "gaia/chat"}``-shaped input (one kind per request).

    Projects are named by ``project_remote`` and/or ``project_path`` and kept as
    their digest only. ``{}`` selects the whole workspace where that is allowed
    (exports). Unknown agents and skills are 422, shape errors 400.
    """
    allowed = tuple(allowed)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise refusal(field_name, 'A selector is an object such as {"agent": "gaia/chat"}.')
    # Every key is checked, empty or not: a misspelt key ({"agnet": ""}) must be refused,
    # not dropped, or the request would select the whole workspace.
    names = {n for k in allowed for n in (("project_remote", "project_path")
                                         if k == "project" else (k,))}  # fmt: skip
    misspelt = sorted(str(k) for k in data if k not in names)
    if misspelt:
        choices = ", ".join(sorted(names - {"workspace"}))
        message = f"Not a selector here; use one of: {choices}."
        raise ApplicationError(
            f"Invalid input: unknown selector keys {', '.join(misspelt)}. {message}",
            code="invalid",
            fields={f"{field_name}.{k}": [message] for k in misspelt},
            status_code=400,
        )
    given = {k: v for k, v in data.items() if v not in (None, "")}
    kinds = sorted({"project" if k in ("project_remote", "project_path") else k for k in given})
    kinds = [k for k in kinds if k != "workspace" or given.get("workspace") is not True]
    choices = ", ".join(
        "project_remote/project_path" if k == "project" else k for k in allowed if k != "workspace"
    )
    unknown = [k for k in kinds if k not in allowed]
    if unknown:
        raise refusal(f"{field_name}.{unknown[0]}", f"Not a selector here; use one of: {choices}.")
    if not kinds:
        if "workspace" in allowed:
            return Selector(kind="workspace", value=workspace.name)
        raise refusal(field_name, f"Name what to select with one of: {choices}.")
    if len(kinds) > 1:
        raise refusal(field_name, f"Use one selector per request, not {', '.join(kinds)}.")
    kind = kinds[0]
    if kind == "project":
        for key in ("project_remote", "project_path"):
            if key in given and not isinstance(given[key], str):
                raise refusal(f"{field_name}.{key}", "Must be a string.")
        digest = project_digest(remote=given.get("project_remote"), path=given.get("project_path"))
        if not digest:
            raise refusal(f"{field_name}.project_remote", "Give project_remote or project_path.")
        return Selector(kind="project", value=digest)
    value = given[kind]
    if not isinstance(value, str):
        raise refusal(f"{field_name}.{kind}", "Must be a string.")
    if "\x00" in value:
        raise refusal(f"{field_name}.{kind}", "May not contain NUL characters.")
    if kind == "text":
        if len(value) < settings.CAIRN_ERASURE_TEXT_MIN_CHARS:
            raise refusal(
                f"{field_name}.text",
                f"A text match needs at least {settings.CAIRN_ERASURE_TEXT_MIN_CHARS} characters.",
            )
        if len(value) > settings.CAIRN_ERASURE_TEXT_MAX_CHARS:
            raise refusal(
                f"{field_name}.text",
                f"At most {settings.CAIRN_ERASURE_TEXT_MAX_CHARS} characters.",
            )
        return Selector(kind="text", value=value)
    value = value.strip()
    if not value or len(value) > SELECTOR_VALUE_MAX:
        raise refusal(f"{field_name}.{kind}", f"1-{SELECTOR_VALUE_MAX} characters.")
    if kind == "agent":
        agent = Agent.objects.filter(workspace=workspace, name=value).first()
        if agent is None:
            raise refusal(f"{field_name}.agent", f"No agent named {value!r} here.", 422)
        return Selector(kind="agent", value=value, agent=agent)
    if kind == "skill":
        if not Skill.objects.filter(workspace=workspace, name=value).exists():
            raise refusal(f"{field_name}.skill", f"No skill named {value!r} here.", 422)
    return Selector(kind=kind, value=value)


def selector_from_message(*, workspace: Workspace, message: dict) -> Selector:
    """Rebuild a selector from the task message (the only place a content value travels)."""
    kind, value = message["kind"], message["value"]
    if kind == "agent":
        return Selector(
            kind=kind, value=value, agent=Agent.objects.get(workspace=workspace, name=value)
        )
    return Selector(kind=kind, value=value)


# Selector kinds. Erasure: agent, project, entity, context, session, text.
# Export: workspace, agent, project, skill.
ERASURE_SELECTORS = ("agent", "project", "entity", "context", "session", "text")


EXPORT_SELECTORS = ("workspace", "agent", "project", "skill")


# Selector values that are user data themselves: receipts keep only their sha256 + length.
HASHED_SELECTORS = {"entity", "context", "session", "text"}


@dataclass(frozen=True)
class Selector:
    """What to erase or export. ``value`` is the agent or skill name, the project
    digest, or the entity/context/session/text; ``agent`` is resolved for ``agent``."""

    kind: str
    value: str = ""
    agent: Agent | None = None

    def receipt(self) -> dict:
        """The selector as a receipt may keep it: never a content value."""
        if self.kind in HASHED_SELECTORS:
            return {
                "kind": self.kind,
                "sha256": hashlib.sha256(self.value.encode("utf-8")).hexdigest(),
                "length": len(self.value),
            }
        if self.kind == "agent":
            return {"kind": "agent", "agent": self.value, "agent_id": self.agent.pk}
        if self.kind == "project":
            return {"kind": "project", "project_digest": self.value}
        return {"kind": self.kind, "value": self.value}
