"""Learned deltas: the write path, the consent gate, rebase, budget and consolidation.

Every state change writes an AuditEvent (actor, reason). Nothing is deleted:
rejection, revert, reset and budget archiving all set ``status = archived``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone
from pgvector.django import CosineDistance

from cairn.errors import ApplicationError
from memory.embeddings import EmbeddingError, get_embedder
from memory.models import (
    Agent,
    AgentTool,
    DeltaKind,
    DeltaStatus,
    DeltaTrust,
    LearnedFact,
    Membership,
    OrphanNotice,
    ProvenanceSource,
    Role,
    Skill,
    SkillDelta,
    Workspace,
)
from memory.selectors.skills import delta_reanchor_check, skill_get, trust_progress_get
from memory.services.audit import audit_record
from memory.services.skills import (
    bad_input,
    credential_refuse,
    delta_line,
    estimate_tokens,
    injection_scan,
    local_capabilities,
    storable_refuse,
)

logger = logging.getLogger(__name__)

TRUSTED_SOURCES = {ProvenanceSource.USER_INSTRUCTION, ProvenanceSource.OUTCOME_EVIDENCE}
AGENT_SOURCES = TRUSTED_SOURCES | {ProvenanceSource.OBSERVED_CONTENT}
UNSUPPORTED_KINDS = {"parameter", "exception"}
# Payload keys that would be a request to change the skill's grants, never a hint.
WIDENING_KEYS = {
    "permissions",
    "permission",
    "security_tier",
    "tier",
    "tools",
    "allowed_tools",
    "allowed-tools",
    "add_tools",
    "capabilities",
    "metadata",
}
TURNS_MAX = 50
TURN_ID_MAX_CHARS = 200
SCOPE_MAX_CHARS = 200
TRIGGER_MAX_CHARS = 200
TOOL_HINT_MAX_NAMES = 50
AUTO_APPROVE_SETTING = "auto_approve_user_instruction"


@dataclass
class DeltaWrite:
    """The outcome of a delta write: a stored delta, or a tier-0 fact it was routed to."""

    delta: SkillDelta | None = None
    fact: LearnedFact | None = None
    fact_created: bool = False
    warnings: list[str] = field(default_factory=list)

    @property
    def routed_to(self) -> str:
        return "fact" if self.fact is not None else "delta"


# --------------------------------------------------------------------------- provenance


def provenance_classify(provenance) -> tuple[str, str, dict]:
    """(source, trust, stored provenance). Missing or unreadable is untrusted.

    Only session/turn ids are kept, never content: the payload carries the
    lesson, the provenance only says where it came from.
    """
    if provenance is None or provenance == {}:
        return ProvenanceSource.MISSING, DeltaTrust.UNTRUSTED, {}
    if not isinstance(provenance, dict):
        return ProvenanceSource.UNREADABLE, DeltaTrust.UNTRUSTED, {}
    source = provenance.get("source")
    turns = provenance.get("turns", [])
    if source is None:
        return ProvenanceSource.MISSING, DeltaTrust.UNTRUSTED, {}
    readable = (
        isinstance(source, str)
        and source in AGENT_SOURCES
        and isinstance(turns, list)
        and len(turns) <= TURNS_MAX
        and all(isinstance(t, str) and 0 < len(t) <= TURN_ID_MAX_CHARS for t in turns)
    )
    if not readable:
        return ProvenanceSource.UNREADABLE, DeltaTrust.UNTRUSTED, {}
    trust = DeltaTrust.TRUSTED if source in TRUSTED_SOURCES else DeltaTrust.UNTRUSTED
    return source, trust, {"source": source, "turns": list(turns)}


# --------------------------------------------------------------------------- payload checks


def _refuse(message: str, code: str, fields: dict) -> ApplicationError:
    return ApplicationError(message, code=code, fields=fields)


def _widening_refuse(*, payload, permissions, security_tier) -> None:
    if permissions is not None or security_tier is not None:
        which = "permissions" if permissions is not None else "security_tier"
        raise _refuse(
            f"A delta may not change a skill's {which}. Learning only narrows: to grant "
            "more, a person edits the SKILL.md and registers a new version.",
            "widens_permission",
            {which: ["deltas may not change this"]},
        )
    if isinstance(payload, dict):
        keys = sorted(WIDENING_KEYS & set(payload))
        if keys:
            raise _refuse(
                f"A delta may not change a skill's grants (payload.{keys[0]}). Learning only "
                "narrows: to grant more, a person edits the SKILL.md and registers a new version.",
                "widens_permission",
                {f"payload.{keys[0]}": ["deltas may not change permissions, tools or tiers"]},
            )


def _text(payload: dict, key: str, *, required: bool = True, max_chars: int | None = None) -> str:
    value = payload.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise bad_input(f"payload.{key}", f"'{key}' must be a non-empty string.")
    if max_chars is not None and len(value) > max_chars:
        raise _refuse(
            f"payload.{key} is {len(value)} characters; the limit is {max_chars}.",
            "too_large",
            {f"payload.{key}": [f"at most {max_chars} characters"]},
        )
    return value


def _clean_payload(*, kind: str, payload) -> dict:
    if not isinstance(payload, dict):
        raise bad_input("payload", "The payload must be an object.")
    limit = settings.CAIRN_SKILL_DELTA_BODY_MAX_CHARS
    allowed = {
        DeltaKind.TOOL_HINT: {"prefer", "drop"},
        DeltaKind.PREFERENCE: {"body", "trigger"},
        DeltaKind.EXAMPLE: {"input", "output", "trigger"},
    }[kind]
    unknown = sorted(set(payload) - allowed)
    if unknown:
        raise bad_input(
            f"payload.{unknown[0]}",
            f"A {kind} payload has only {', '.join(sorted(allowed))}.",
        )
    if kind == DeltaKind.TOOL_HINT:
        cleaned = {}
        for key in ("prefer", "drop"):
            names = payload.get(key, [])
            if not isinstance(names, list) or not all(
                isinstance(n, str) and n.strip() for n in names
            ):
                raise bad_input(f"payload.{key}", f"'{key}' must be a list of tool names.")
            cleaned[key] = list(dict.fromkeys(n.strip() for n in names))
        if not cleaned["prefer"] and not cleaned["drop"]:
            raise bad_input("payload", "A tool-hint needs at least one name in prefer or drop.")
        if len(cleaned["prefer"]) + len(cleaned["drop"]) > TOOL_HINT_MAX_NAMES:
            raise _refuse(
                f"A tool-hint names at most {TOOL_HINT_MAX_NAMES} tools.",
                "too_large",
                {"payload": [f"at most {TOOL_HINT_MAX_NAMES} names"]},
            )
        return cleaned
    trigger = _text(payload, "trigger", required=False, max_chars=TRIGGER_MAX_CHARS)
    if kind == DeltaKind.PREFERENCE:
        cleaned = {"body": _text(payload, "body", max_chars=limit)}
    else:
        cleaned = {"input": _text(payload, "input"), "output": _text(payload, "output")}
        total = len(cleaned["input"]) + len(cleaned["output"])
        if total > limit:
            raise _refuse(
                f"An example's input + output is {total} characters; the limit is {limit}.",
                "too_large",
                {"payload": [f"input + output at most {limit} characters"]},
            )
    if trigger:
        cleaned["trigger"] = trigger
    return cleaned


def _tool_hint_refuse(*, agent: Agent, payload: dict) -> None:
    registry = {t.name: t for t in AgentTool.objects.filter(agent=agent)}
    for key in ("prefer", "drop"):
        for name in payload[key]:
            if name not in registry:
                raise _refuse(
                    f"Tool {name!r} is not in this agent's tool registry. A delta can only "
                    "reorder tools the agent already has; declare the live registry with "
                    "PUT /api/v1/agents/me/tools/ first.",
                    "tool_not_in_registry",
                    {f"payload.{key}": [f"{name!r} is not in the agent's registry"]},
                )
    for name in payload["prefer"]:
        if registry[name].is_write_path:
            raise _refuse(
                f"Tool {name!r} mutates or needs confirmation, so a delta may not prefer it: "
                "learning may change what the agent proposes, never what it executes. "
                "Dropping it is allowed.",
                "write_path_tool",
                {"payload.prefer": [f"{name!r} is a write-path tool"]},
            )


def _embed(texts: list[str]) -> tuple[list[list[float]] | None, str]:
    try:
        embedder = get_embedder()
        return embedder.embed(texts), embedder.model_id
    except EmbeddingError as exc:
        # Tier-3 retrieval and consolidation go dark for this delta; it still renders
        # when resident. Nothing else depends on vectors.
        logger.warning("delta embedding failed, stored without vectors: %s", exc)
        return None, ""


# --------------------------------------------------------------------------- write path


@transaction.atomic
def delta_create(
    *,
    agent: Agent,
    skill_name: str,
    kind: str,
    anchor: dict | None,
    payload,
    provenance=None,
    scope: str | None = None,
    permissions=None,
    security_tier=None,
) -> DeltaWrite:
    """Write one learned delta, or route a fact to tier 0.

    1. Refuse (422) what learning may never do: change grants, use an
       unsupported kind, touch a skill with a local-capability permission.
    2. ``fact`` is routed to a tier-0 LearnedFact; no delta is written.
    3. Validate the anchor against the current base version, the payload shape
       (400) and size (422), tool names against the registry (422), and
       refuse credentials (422).
    4. Classify provenance: trusted → staged, untrusted → quarantined, with
       the injection-scan findings attached. Trusted ``user_instruction`` with
       no findings is auto-approved when the workspace opted in.
    5. Tier-3 deltas get a trigger and a payload embedding.
    """
    workspace = agent.workspace
    actor = f"agent:{agent.name}"
    storable_refuse(value=payload, field_name="payload")
    storable_refuse(value=[anchor, provenance, scope], field_name="provenance")
    skill = skill_get(workspace=workspace, name=skill_name)
    version = skill.current_version
    _widening_refuse(payload=payload, permissions=permissions, security_tier=security_tier)
    if kind in UNSUPPORTED_KINDS:
        raise _refuse(
            f"Delta kind {kind!r} is not supported yet. Express it as a short 'preference', "
            "or as a 'fact' if a tool can read it.",
            "unsupported_kind",
            {"kind": ["not supported yet"]},
        )
    local = local_capabilities(version.permissions)
    if local:
        raise _refuse(
            f"Skill {skill.name!r} has a local-capability permission ({local[0]}); learned "
            "deltas are not allowed on capability-bearing skills. Edit the SKILL.md instead.",
            "local_capability_skill",
            {"skill": ["capability-bearing skill"]},
        )
    if kind == "fact":
        from memory.services.facts import fact_put

        if not isinstance(payload, dict):
            raise bad_input("payload", "A fact payload is {namespace, key, value, scope?}.")
        extra = sorted(set(payload) - {"namespace", "key", "value", "scope"})
        if extra:
            raise bad_input(
                f"payload.{extra[0]}", "A fact payload is {namespace, key, value, scope?}."
            )
        for key in ("namespace", "key"):
            if not isinstance(payload.get(key), str):
                raise bad_input(f"payload.{key}", f"'{key}' must be a string.")
        if "value" not in payload:
            raise bad_input("payload.value", "A fact needs a value.")
        fact, created = fact_put(
            workspace=workspace,
            agent=agent,
            namespace=payload["namespace"],
            key=payload["key"],
            value=payload["value"],
            scope=payload.get("scope") or scope or "global",
            provenance=provenance,
            field_prefix="payload.",
        )
        return DeltaWrite(fact=fact, fact_created=created)
    if kind not in DeltaKind.values:
        raise bad_input("kind", f"Unknown kind {kind!r}.")

    section = (anchor or {}).get("section") if isinstance(anchor, dict) else None
    if not isinstance(section, str) or not section:
        raise bad_input("anchor.section", "The anchor needs the slug of a section.")
    anchored = version.section(section)
    if anchored is None:
        slugs = ", ".join(s["slug"] for s in version.sections[:20])
        raise _refuse(
            f"Skill {skill.name!r} {version.version} has no section {section!r}. "
            f"Anchor to one of: {slugs}.",
            "unknown_section",
            {"anchor.section": ["no such section in the current version"]},
        )
    cleaned = _clean_payload(kind=kind, payload=payload)
    if kind == DeltaKind.TOOL_HINT:
        _tool_hint_refuse(agent=agent, payload=cleaned)
    scope = (scope or "").strip() or f"skill:{skill.name}"
    if len(scope) > SCOPE_MAX_CHARS:
        raise bad_input("scope", f"At most {SCOPE_MAX_CHARS} characters.")
    credential_refuse(value=cleaned, field_name="payload")
    credential_refuse(value=scope, field_name="scope")

    source, trust, stored_provenance = provenance_classify(provenance)
    tier = 1 if kind == DeltaKind.TOOL_HINT else 3
    findings = []
    if tier == 3:
        findings = injection_scan("\n".join(str(v) for v in cleaned.values()))
    status = DeltaStatus.STAGED if trust == DeltaTrust.TRUSTED else DeltaStatus.QUARANTINED
    line = delta_line(kind=kind, payload=cleaned)
    delta = SkillDelta(
        workspace=workspace,
        agent=agent,
        skill=skill,
        kind=kind,
        tier=tier,
        anchor_section=section,
        anchor_digest=anchored["digest"],
        anchor_version=version,
        payload=cleaned,
        provenance=stored_provenance,
        provenance_source=source,
        trust=trust,
        scope=scope,
        status=status,
        findings=findings,
        tokens=estimate_tokens(line) if tier == 3 else 0,
    )
    if tier == 3:
        delta.trigger_text = cleaned.get("trigger") or cleaned.get("body") or cleaned["input"]
        vectors, model_id = _embed([delta.trigger_text, line])
        if vectors:
            delta.trigger_embedding, delta.payload_embedding = vectors
            delta.embedding_model = model_id
    delta.save()
    audit_record(
        workspace=workspace,
        actor=actor,
        action="delta.create",
        target_type="skill_delta",
        target_id=delta.pk,
        details={
            "skill": skill.name,
            "kind": kind,
            "status": status,
            "source": source,
            "findings": [f["rule"] for f in findings],
        },
    )
    warnings = []
    if section == "body" and anchored["title"] == "":
        warnings.append(
            "This skill has no headings, so this delta anchors to the whole body: any edit "
            "of the skill will orphan it."
        )
    if findings:
        warnings.append(
            "The injection scan flagged this delta ("
            + ", ".join(f["rule"] for f in findings)
            + "); a person has to review it."
        )
    if (
        source == ProvenanceSource.USER_INSTRUCTION
        and trust == DeltaTrust.TRUSTED
        and not findings
        and workspace.settings.get(AUTO_APPROVE_SETTING) is True
    ):
        _activate(
            delta,
            actor="system:auto-approve",
            reason=f"workspace setting {AUTO_APPROVE_SETTING}",
            action="delta.auto_approve",
        )
    return DeltaWrite(delta=delta, warnings=warnings)


# --------------------------------------------------------------------------- consent gate


def _reviewer(*, user, workspace: Workspace) -> str:
    """The audit actor for ``user`` if they review in ``workspace``; else 403."""
    allowed = (
        user is not None
        and getattr(user, "is_authenticated", False)
        and Membership.objects.filter(
            user=user, workspace=workspace, role__in=[Role.REVIEWER, Role.ADMIN]
        ).exists()
    )
    if not allowed:
        raise ApplicationError(
            "Only a reviewer or admin of this workspace may change a delta's status.",
            code="forbidden",
            status_code=403,
        )
    return f"user:{user.username}"


def _locked(delta: SkillDelta) -> SkillDelta:
    return (
        SkillDelta.objects.select_for_update(of=("self",))
        .select_related("skill", "skill__current_version", "workspace", "anchor_version")
        .get(pk=delta.pk)
    )


def _transition_refuse(delta: SkillDelta, wanted: str, hint: str = "") -> ApplicationError:
    return ApplicationError(
        f"Delta {delta.pk} is {delta.status}; {wanted}.{(' ' + hint) if hint else ''}",
        code="invalid_transition",
        fields={"status": [delta.status]},
    )


def _evidence(delta: SkillDelta) -> dict:
    """The trust-ledger bar for outcome_evidence deltas; refuses (422) with progress."""
    progress = trust_progress_get(workspace=delta.workspace, scope=delta.scope)
    if not progress["met"]:
        raise ApplicationError(
            f"Not enough evidence to approve delta {delta.pk}: {progress['message']} "
            f"(needs {progress['required_samples']} at ≥ {progress['required_ratio']:.0%} "
            "positive). Post outcomes to /api/v1/feedback/ on this scope.",
            code="insufficient_evidence",
            fields={"scope": [progress["message"]]},
        )
    return progress


def _base_refuse(delta: SkillDelta) -> None:
    version = delta.skill.current_version
    if delta.anchor_version_id != version.pk:
        raise _transition_refuse(delta, "its base has changed", "Re-approve it as an orphan.")
    if local_capabilities(version.permissions):
        raise ApplicationError(
            f"Skill {delta.skill.name!r} now has a local-capability permission; deltas on it "
            "cannot be approved.",
            code="local_capability_skill",
            fields={"skill": ["capability-bearing skill"]},
        )


def _activate(delta: SkillDelta, *, actor: str, reason: str, action: str, **extra) -> None:
    """Make ``delta`` active; an approved umbrella supersedes its members."""
    if delta.provenance_source == ProvenanceSource.OUTCOME_EVIDENCE:
        progress = _evidence(delta)
        delta.approval_samples = progress["samples"]
        delta.approval_positive = progress["positive"]
    previous = delta.status
    delta.status = DeltaStatus.ACTIVE
    delta.approved_at = timezone.now()
    delta.approved_by = actor
    for name, value in extra.items():
        setattr(delta, name, value)
    delta.save()
    audit_record(
        workspace=delta.workspace,
        actor=actor,
        action=action,
        target_type="skill_delta",
        target_id=delta.pk,
        reason=reason,
        details={"from": previous, "to": DeltaStatus.ACTIVE},
    )
    for member in delta.members.select_for_update().exclude(status=DeltaStatus.ARCHIVED):
        _archive(member, actor=actor, reason=f"superseded by umbrella delta {delta.pk}")
        SkillDelta.objects.filter(pk=member.pk).update(superseded_by=delta)


def _archive(delta: SkillDelta, *, actor: str, reason: str, action: str = "delta.archive") -> None:
    previous = delta.status
    delta.status = DeltaStatus.ARCHIVED
    delta.save(update_fields=["status", "updated_at"])
    audit_record(
        workspace=delta.workspace,
        actor=actor,
        action=action,
        target_type="skill_delta",
        target_id=delta.pk,
        reason=reason,
        details={"from": previous, "to": DeltaStatus.ARCHIVED},
    )


@transaction.atomic
def delta_approve(*, delta: SkillDelta, user, reason: str = "") -> SkillDelta:
    """staged → active, by a reviewer. ``outcome_evidence`` also needs the ledger bar.

    Applies from the next session: sessions already running keep their resolution.
    """
    actor = _reviewer(user=user, workspace=delta.workspace)
    delta = _locked(delta)
    if delta.status == DeltaStatus.QUARANTINED:
        raise _transition_refuse(
            delta, "untrusted deltas need explicit confirmation", "Use delta_confirm_quarantined."
        )
    if delta.status == DeltaStatus.ORPHANED:
        raise _transition_refuse(delta, "orphans are re-approved", "Use delta_reapprove.")
    if delta.status != DeltaStatus.STAGED:
        raise _transition_refuse(delta, "only staged deltas can be approved")
    _base_refuse(delta)
    _activate(delta, actor=actor, reason=reason, action="delta.approve")
    return delta


@transaction.atomic
def delta_confirm_quarantined(*, delta: SkillDelta, user, reason: str = "") -> SkillDelta:
    """quarantined → active: a person's explicit, per-delta decision (audited)."""
    actor = _reviewer(user=user, workspace=delta.workspace)
    delta = _locked(delta)
    if delta.status != DeltaStatus.QUARANTINED:
        raise _transition_refuse(delta, "only quarantined deltas are confirmed this way")
    if not reason.strip():
        raise bad_input("reason", "Confirming an untrusted delta needs a reason.")
    _base_refuse(delta)
    _activate(delta, actor=actor, reason=reason, action="delta.confirm_quarantined")
    return delta


@transaction.atomic
def delta_reject(*, delta: SkillDelta, user, reason: str = "") -> SkillDelta:
    """staged, quarantined or orphaned → archived."""
    actor = _reviewer(user=user, workspace=delta.workspace)
    delta = _locked(delta)
    if delta.status not in {DeltaStatus.STAGED, DeltaStatus.QUARANTINED, DeltaStatus.ORPHANED}:
        raise _transition_refuse(delta, "only pending deltas can be rejected", "Revert it instead.")
    _archive(delta, actor=actor, reason=reason, action="delta.reject")
    return delta


@transaction.atomic
def delta_revert(*, delta: SkillDelta, user, reason: str = "") -> SkillDelta:
    """active → archived (the base behaviour returns from the next session)."""
    actor = _reviewer(user=user, workspace=delta.workspace)
    delta = _locked(delta)
    if delta.status != DeltaStatus.ACTIVE:
        raise _transition_refuse(delta, "only active deltas can be reverted")
    _archive(delta, actor=actor, reason=reason, action="delta.revert")
    return delta


@transaction.atomic
def delta_reset(*, skill: Skill, agent: Agent, user, reason: str = "") -> int:
    """Archive every learned delta ``agent`` has on ``skill``: back to the pure base."""
    if skill.workspace_id != agent.workspace_id:
        raise ApplicationError("The agent and the skill are in different workspaces.")
    actor = _reviewer(user=user, workspace=skill.workspace)
    deltas = list(
        SkillDelta.objects.select_for_update()
        .select_related("workspace")
        .filter(skill=skill, agent=agent)
        .exclude(status=DeltaStatus.ARCHIVED)
        .order_by("id")
    )
    for delta in deltas:
        _archive(delta, actor=actor, reason=reason, action="delta.reset")
    return len(deltas)


@transaction.atomic
def delta_reapprove(*, deltas: list[SkillDelta], user, reason: str = "") -> dict:
    """Re-approve orphans (one or many) onto their skill's current version.

    1. Each orphan is re-anchored by slug to the current version; if the slug
       is gone it is refused (``section_gone``) and stays orphaned.
    2. If the section's digest changed it is flagged ``stale``.
    3. Trusted deltas become active (outcome_evidence still needs its ledger
       bar); untrusted ones go back to quarantine for a per-delta confirmation.
    Returns ``{"reapproved": [ids], "quarantined": [ids], "refused": [{id, code, message}]}``.
    """
    result: dict = {"reapproved": [], "quarantined": [], "refused": []}
    workspaces = {d.workspace_id for d in deltas}
    if len(workspaces) > 1:
        raise ApplicationError("Re-approve deltas of one workspace at a time.")
    if not deltas:
        return result
    actor = _reviewer(user=user, workspace=deltas[0].workspace)
    for pk in sorted({d.pk for d in deltas}):
        delta = _locked(SkillDelta(pk=pk))
        version = delta.skill.current_version
        check = delta_reanchor_check(delta=delta, version=version)
        refusal = check["refusal"]
        if refusal is None:
            stale = check["stale"]
            if delta.trust == DeltaTrust.UNTRUSTED:
                previous = delta.status
                delta.status = DeltaStatus.QUARANTINED
                delta.anchor_version = version
                delta.stale = stale
                delta.save()
                audit_record(
                    workspace=delta.workspace,
                    actor=actor,
                    action="delta.reapprove",
                    target_type="skill_delta",
                    target_id=delta.pk,
                    reason=reason,
                    details={"from": previous, "to": delta.status, "stale": stale},
                )
                result["quarantined"].append(delta.pk)
                continue
            try:
                with transaction.atomic():
                    _activate(
                        delta,
                        actor=actor,
                        reason=reason,
                        action="delta.reapprove",
                        anchor_version=version,
                        stale=stale,
                    )
            except ApplicationError as exc:
                refusal = (exc.code, exc.message)
            else:
                result["reapproved"].append(delta.pk)
                continue
        result["refused"].append({"id": delta.pk, "code": refusal[0], "message": refusal[1]})
    return result


@transaction.atomic
def orphan_notice_mark_seen(*, notice: OrphanNotice, user) -> OrphanNotice:
    """The UI shows each orphan notice once; this records that it was seen."""
    actor = _reviewer(user=user, workspace=notice.workspace)
    if notice.seen_at is None:
        notice.seen_at = timezone.now()
        notice.seen_by = actor
        notice.save(update_fields=["seen_at", "seen_by"])
        audit_record(
            workspace=notice.workspace,
            actor=actor,
            action="orphan_notice.seen",
            target_type="skill",
            target_id=notice.skill_id,
            details={"version": notice.version.version, "count": notice.count},
        )
    return notice


# --------------------------------------------------------------------------- budget


@transaction.atomic
def delta_budget_enforce(
    *, workspace: Workspace | None = None, now: datetime | None = None
) -> dict:
    """Hold each agent's resident tier-3 tokens under CAIRN_SKILL_RESIDENT_TOKEN_BUDGET.

    1. Rank an agent's active tier-3 deltas by use (use_count, then last use,
       then newest first) and keep them resident while they fit the budget;
       the rest become retrieval-only (and a retrieval-only delta that fits
       again becomes resident).
    2. Archive retrieval-only deltas not used for CAIRN_SKILL_RETRIEVAL_ARCHIVE_DAYS
       since their last use or demotion, whichever is later.
    Every change is audited. Running it twice changes nothing the second time.
    """
    now = now or timezone.now()
    budget = settings.CAIRN_SKILL_RESIDENT_TOKEN_BUDGET
    counts = {"agents": 0, "demoted": 0, "promoted": 0, "archived": 0}
    qs = SkillDelta.objects.select_for_update().filter(status=DeltaStatus.ACTIVE, tier=3)
    if workspace is not None:
        qs = qs.filter(workspace=workspace)
    by_agent: dict[int, list[SkillDelta]] = {}
    for delta in qs.select_related("workspace").defer("trigger_embedding", "payload_embedding"):
        by_agent.setdefault(delta.agent_id, []).append(delta)
    for deltas in by_agent.values():
        counts["agents"] += 1
        # Most valuable first: most used, then most recently used, then newest.
        deltas.sort(
            key=lambda d: (
                -d.use_count,
                d.last_used_at is None,
                -(d.last_used_at.timestamp() if d.last_used_at else 0.0),
                -d.pk,
            )
        )
        used = 0
        for delta in deltas:
            fits = used + delta.tokens <= budget
            if fits:
                used += delta.tokens
            if fits and delta.retrieval_only:
                delta.retrieval_only = False
                delta.demoted_at = None
                delta.save(update_fields=["retrieval_only", "demoted_at", "updated_at"])
                _budget_audit(delta, "delta.promote_resident", "fits the resident budget again")
                counts["promoted"] += 1
            elif not fits and not delta.retrieval_only:
                delta.retrieval_only = True
                delta.demoted_at = now
                delta.save(update_fields=["retrieval_only", "demoted_at", "updated_at"])
                _budget_audit(
                    delta, "delta.demote_retrieval", f"over the {budget}-token resident budget"
                )
                counts["demoted"] += 1
    cutoff = now - timedelta(days=settings.CAIRN_SKILL_RETRIEVAL_ARCHIVE_DAYS)
    idle = qs.filter(retrieval_only=True, demoted_at__lt=cutoff).filter(
        Q(last_used_at__isnull=True) | Q(last_used_at__lt=cutoff)
    )
    for delta in idle.select_related("workspace").defer("trigger_embedding", "payload_embedding"):
        _archive(
            delta,
            actor="system:budget",
            reason=f"retrieval-only and unused for {settings.CAIRN_SKILL_RETRIEVAL_ARCHIVE_DAYS} days",
        )
        counts["archived"] += 1
    return counts


def _budget_audit(delta: SkillDelta, action: str, reason: str) -> None:
    audit_record(
        workspace=delta.workspace,
        actor="system:budget",
        action=action,
        target_type="skill_delta",
        target_id=delta.pk,
        reason=reason,
        details={"tokens": delta.tokens},
    )


# --------------------------------------------------------------------------- consolidation


@transaction.atomic
def delta_consolidate(*, workspace: Workspace | None = None) -> dict:
    """Propose a staged umbrella where ≥ N active near-identical deltas share an anchor.

    1. Group active tier-3 deltas with payload vectors by (agent, skill, section, kind).
    2. In each group of ≥ N, ask pgvector for each delta's neighbours within
       the consolidation cosine; a delta with ≥ N-1 neighbours seeds a cluster
       (itself + neighbours), largest and oldest seed first, members used once.
    3. Skip clusters already covered by an open (staged) umbrella. Otherwise
       stage an umbrella with the medoid's payload and links to its members.
       It supersedes them only if a person approves it; nothing is rewritten.
    """
    min_size = settings.CAIRN_SKILL_CONSOLIDATION_MIN_DELTAS
    max_distance = 1.0 - settings.CAIRN_SKILL_CONSOLIDATION_SIMILARITY + 1e-9
    counts = {"groups": 0, "proposed": 0, "already_proposed": 0}
    live = SkillDelta.objects.filter(
        status=DeltaStatus.ACTIVE, tier=3, payload_embedding__isnull=False
    )
    if workspace is not None:
        live = live.filter(workspace=workspace)
    groups = (
        live.values("agent_id", "skill_id", "anchor_section", "kind")
        .annotate(n=Count("id"))
        .filter(n__gte=min_size)
        .order_by("agent_id", "skill_id", "anchor_section", "kind")
    )
    for group in groups:
        counts["groups"] += 1
        members = live.filter(
            agent_id=group["agent_id"],
            skill_id=group["skill_id"],
            anchor_section=group["anchor_section"],
            kind=group["kind"],
        )
        neighbours: dict[int, list[tuple[int, float]]] = {}
        for delta in members.order_by("id").only("id", "payload_embedding"):
            # No ORDER BY distance: that would let the planner use the HNSW index,
            # whose scan stops after ef_search candidates from the whole table
            # (other workspaces', deleted rows), silently dropping this group's
            # neighbours. A group is small: filter exactly, sort here.
            near = (
                members.exclude(pk=delta.pk)
                .annotate(distance=CosineDistance("payload_embedding", delta.payload_embedding))
                .filter(distance__lte=max_distance)
                .order_by("id")
                .values_list("id", "distance")
            )
            neighbours[delta.pk] = sorted(near, key=lambda pair: (pair[1], pair[0]))
        taken: set[int] = set()
        seeds = sorted(neighbours, key=lambda pk: (-len(neighbours[pk]), pk))
        for seed in seeds:
            cluster = sorted({seed} | {pk for pk, _ in neighbours[seed]} - taken)
            if seed in taken or len(cluster) < min_size:
                continue
            taken.update(cluster)
            open_umbrella = SkillDelta.objects.filter(
                status=DeltaStatus.STAGED,
                provenance_source=ProvenanceSource.CONSOLIDATION,
                members__in=cluster,
            ).exists()
            if open_umbrella:
                counts["already_proposed"] += 1
                continue
            _umbrella_propose(cluster=cluster, neighbours=neighbours)
            counts["proposed"] += 1
    return counts


def _umbrella_propose(*, cluster: list[int], neighbours: dict) -> SkillDelta:
    rows = {d.pk: d for d in SkillDelta.objects.select_related("workspace").filter(pk__in=cluster)}

    # Medoid: the member closest on average to the others (missing pairs count as 1.0).
    def spread(pk: int) -> float:
        near = dict(neighbours.get(pk, []))
        return sum(near.get(other, 1.0) for other in cluster if other != pk)

    medoid = rows[min(cluster, key=lambda pk: (spread(pk), pk))]
    newest = max(rows.values(), key=lambda d: (d.created_at, d.pk))
    umbrella = SkillDelta.objects.create(
        workspace=medoid.workspace,
        agent=medoid.agent,
        skill=medoid.skill,
        kind=medoid.kind,
        tier=medoid.tier,
        anchor_section=newest.anchor_section,
        anchor_digest=newest.anchor_digest,
        anchor_version=newest.anchor_version,
        payload=medoid.payload,
        provenance={"source": ProvenanceSource.CONSOLIDATION, "members": cluster},
        provenance_source=ProvenanceSource.CONSOLIDATION,
        trust=DeltaTrust.TRUSTED,
        scope=medoid.scope,
        status=DeltaStatus.STAGED,
        tokens=medoid.tokens,
        trigger_text=medoid.trigger_text,
        trigger_embedding=medoid.trigger_embedding,
        payload_embedding=medoid.payload_embedding,
        embedding_model=medoid.embedding_model,
    )
    umbrella.members.set(cluster)
    audit_record(
        workspace=medoid.workspace,
        actor="system:consolidate",
        action="delta.umbrella_propose",
        target_type="skill_delta",
        target_id=umbrella.pk,
        reason=f"{len(cluster)} near-identical deltas on section {newest.anchor_section!r}",
        details={"members": cluster},
    )
    return umbrella
