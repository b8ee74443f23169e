"""Authored skills: registration of SKILL.md versions (with orphaning of learned
deltas whose anchor moved) and each agent's declared tool registry."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from cairn.errors import ApplicationError
from memory.core.actors import Actor
from memory.core.audit import audit_record
from memory.core.validation import bad_request, check_json_strings
from memory.models import (
    Agent,
    AgentTool,
    DeltaStatus,
    OrphanNotice,
    Skill,
    SkillDelta,
    SkillVersion,
    Workspace,
)
from memory.skills.skillmd import (
    NAMESPACE_RE,
    TOOL_NAME_MAX_CHARS,
    local_capabilities,
    skill_md_parse,
)

REGISTRY_MAX_TOOLS = 200


# --------------------------------------------------------------------------- SKILL.md parsing


# --------------------------------------------------------------------------- registration


@dataclass(frozen=True)
class SkillRegistration:
    skill: Skill
    version: SkillVersion
    created: bool
    warnings: list[str]
    orphaned: int = 0


LIVE_STATUSES = (DeltaStatus.STAGED, DeltaStatus.ACTIVE, DeltaStatus.QUARANTINED)


@transaction.atomic
def skill_register(*, workspace: Workspace, skill_md: str, actor: Actor) -> SkillRegistration:
    """Register a SKILL.md version.

    1. Parse and validate (400 naming the field).
    2. An existing (name, version): identical content is an idempotent no-op,
       different content is refused (409): versions are immutable.
    3. The new version becomes current. If its whitespace-normalised body
       differs from the previous current one (or it now declares a local
       capability), every live delta on the skill is orphaned, audited and
       counted in an OrphanNotice. Otherwise live deltas follow the new
       version silently (same text), unless their section slug vanished.
    """
    parsed = skill_md_parse(skill_md=skill_md)
    skill, _ = Skill.objects.select_for_update().get_or_create(
        workspace=workspace, name=parsed.name
    )
    existing = SkillVersion.objects.filter(skill=skill, version=parsed.version).first()
    if existing is not None:
        if existing.digest != parsed.digest:
            raise ApplicationError(
                f"Skill {parsed.name!r} version {parsed.version!r} is already registered with "
                "different content. Versions are immutable: bump 'version' to register a change.",
                code="version_immutable",
                fields={"version": ["already registered with different content"]},
                status_code=409,
            )
        return SkillRegistration(
            skill=skill, version=existing, created=False, warnings=parsed.warnings
        )

    previous = skill.current_version
    version = SkillVersion.objects.create(
        skill=skill,
        version=parsed.version,
        description=parsed.description,
        permissions=parsed.permissions,
        tools=parsed.tools,
        skill_md=parsed.skill_md,
        body=parsed.body,
        digest=parsed.digest,
        body_digest=parsed.body_digest,
        sections=parsed.sections,
        registered_by=actor.label,
    )
    skill.current_version = version
    skill.save(update_fields=["current_version"])

    orphaned = 0
    if previous is not None:
        live = list(
            SkillDelta.objects.select_for_update()
            .filter(skill=skill, status__in=LIVE_STATUSES)
            .order_by("id")
        )
        changed = previous.body_digest != version.body_digest
        newly_local = bool(local_capabilities(version.permissions))
        reason = (
            f"base skill {skill.name} changed from {previous.version} to {version.version}"
            if changed
            else f"base skill {skill.name} {version.version} declares a local capability"
        )
        to_orphan: list[SkillDelta] = []
        for delta in live:
            if changed or newly_local or version.section(delta.anchor_section) is None:
                to_orphan.append(delta)
            else:
                delta.anchor_version = version
                delta.save(update_fields=["anchor_version", "updated_at"])
        for delta in to_orphan:
            previous_status = delta.status
            delta.status = DeltaStatus.ORPHANED
            delta.save(update_fields=["status", "updated_at"])
            audit_record(
                workspace=workspace,
                actor="system:orphan",
                action="delta.orphan",
                target_type="skill_delta",
                target_id=delta.pk,
                reason=reason if changed or newly_local else "anchored section vanished",
                details={"from": previous_status, "version": version.version},
            )
        orphaned = len(to_orphan)
        if orphaned:
            OrphanNotice.objects.create(
                workspace=workspace, skill=skill, version=version, count=orphaned
            )

    audit_record(
        workspace=workspace,
        actor=actor.label,
        action="skill.register",
        target_type="skill_version",
        target_id=version.pk,
        details={
            "skill": skill.name,
            "version": version.version,
            "previous": previous.version if previous else None,
            "orphaned": orphaned,
        },
    )
    return SkillRegistration(
        skill=skill, version=version, created=True, warnings=parsed.warnings, orphaned=orphaned
    )


# --------------------------------------------------------------------------- tool registry


@transaction.atomic
def agent_tools_set(*, agent: Agent, tools: list[dict]) -> list[AgentTool]:
    """Replace ``agent``'s declared tool registry with ``tools``.

    Concurrent replacements for one agent take turns on the agent's row: otherwise
    both delete the (same, still committed) rows and both insert, and the second
    fails on the (agent, name) unique index. The last to commit wins, whole."""
    if len(tools) > REGISTRY_MAX_TOOLS:
        raise bad_request("tools", f"At most {REGISTRY_MAX_TOOLS} tools.")
    check_json_strings("tools", tools)
    seen: set[str] = set()
    rows = []
    for index, tool in enumerate(tools):
        name = tool["name"].strip()
        if not name or len(name) > TOOL_NAME_MAX_CHARS:
            raise bad_request(f"tools[{index}].name", "Tool names are 1-128 characters.")
        if name in seen:
            raise bad_request(f"tools[{index}].name", f"Tool {name!r} is declared twice.")
        seen.add(name)
        namespaces = sorted({ns.strip() for ns in tool.get("reads_facts") or []})
        for ns in namespaces:
            if not NAMESPACE_RE.match(ns):
                raise bad_request(
                    f"tools[{index}].reads_facts",
                    "Fact namespaces are 1-64 lowercase letters, digits, '_', '.', '-'.",
                )
        rows.append(
            AgentTool(
                workspace=agent.workspace,
                agent=agent,
                name=name,
                mutating=bool(tool.get("mutating", False)),
                needs_confirmation=bool(tool.get("needs_confirmation", False)),
                reads_facts=namespaces,
            )
        )
    Agent.objects.select_for_update().filter(pk=agent.pk).first()
    AgentTool.objects.filter(workspace_id=agent.workspace_id, agent=agent).delete()
    AgentTool.objects.bulk_create(rows)
    audit_record(
        workspace=agent.workspace,
        actor=f"agent:{agent.name}",
        action="agent.tools.set",
        target_type="agent",
        target_id=agent.pk,
        details={"count": len(rows)},
    )
    return sorted(rows, key=lambda t: t.name)


# --------------------------------------------------------------------------- effective skill


def delta_usage_record(*, delta_ids: list[int]) -> None:
    """Rendering a delta counts as use (never as evidence): budget ranking reads this."""
    if delta_ids:
        SkillDelta.objects.filter(pk__in=delta_ids).update(
            use_count=F("use_count") + 1, last_used_at=timezone.now()
        )


# --------------------------------------------------------------------------- rendering helpers
