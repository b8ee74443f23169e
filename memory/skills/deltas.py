"""Learned deltas: the write path, the consent gate, rebase, budget and consolidation.

Every state change writes an AuditEvent (actor, reason). Nothing is deleted:
rejection, revert, reset and budget archiving all set ``status = archived``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction

from cairn.errors import ApplicationError
from memory.core.audit import audit_record
from memory.core.embedders import EmbeddingError
from memory.core.embeddings import get_embedder
from memory.core.secrets import refuse_secrets
from memory.core.text import estimate_tokens
from memory.core.validation import bad_request, check_json_strings, rationale_clean
from memory.identity.services import AUTO_APPROVE_SETTING
from memory.models import (
    Agent,
    AgentTool,
    DeltaKind,
    DeltaStatus,
    DeltaTrust,
    LearnedFact,
    ProvenanceSource,
    SkillDelta,
)
from memory.skills.consent import delta_auto_approve
from memory.skills.facts import fact_put
from memory.skills.injection import injection_scan
from memory.skills.selectors import skill_get
from memory.skills.skillmd import delta_line, local_capabilities
from memory.skills.trust import delta_claim, provenance_classify
from memory.webhooks.events import delta_event

logger = logging.getLogger(__name__)

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
SCOPE_MAX_CHARS = 200
TRIGGER_MAX_CHARS = 200
TOOL_HINT_MAX_NAMES = 50


@dataclass
class DeltaWrite:
    """The outcome of a delta write: a stored delta, or a tier-0 fact it was routed to."""

    delta: SkillDelta | None = None
    fact: LearnedFact | None = None
    fact_created: bool = False
    warnings: list[str] = field(default_factory=list)
    merged: bool = False  # counted on an identical pending delta, nothing new staged

    @property
    def routed_to(self) -> str:
        return "fact" if self.fact is not None else "delta"


# --------------------------------------------------------------------------- provenance


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
        raise bad_request(f"payload.{key}", f"'{key}' must be a non-empty string.")
    if max_chars is not None and len(value) > max_chars:
        raise _refuse(
            f"payload.{key} is {len(value)} characters; the limit is {max_chars}.",
            "too_large",
            {f"payload.{key}": [f"at most {max_chars} characters"]},
        )
    return value


def _clean_payload(*, kind: str, payload) -> dict:
    if not isinstance(payload, dict):
        raise bad_request("payload", "The payload must be an object.")
    limit = settings.CAIRN_SKILL_DELTA_BODY_MAX_CHARS
    allowed = {
        DeltaKind.TOOL_HINT: {"prefer", "drop"},
        DeltaKind.PREFERENCE: {"body", "trigger"},
        DeltaKind.EXAMPLE: {"input", "output", "trigger"},
    }[kind]
    unknown = sorted(set(payload) - allowed)
    if unknown:
        raise bad_request(
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
                raise bad_request(f"payload.{key}", f"'{key}' must be a list of tool names.")
            cleaned[key] = list(dict.fromkeys(n.strip() for n in names))
        if not cleaned["prefer"] and not cleaned["drop"]:
            raise bad_request("payload", "A tool-hint needs at least one name in prefer or drop.")
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

PENDING = (DeltaStatus.STAGED, DeltaStatus.QUARANTINED)


def _pending_twin(
    *, agent: Agent, skill, kind: str, section: str, payload: dict, scope: str, provenance
):
    """The same agent's pending delta with this very kind, section, payload, scope and
    provenance (locked), or None. A model that proposes the same change twice (a
    retry, a second session) is one proposal for the reviewer, counted, not two cards;
    the same words citing other records are a new proposal (their trust may differ)."""
    return (
        SkillDelta.objects.select_for_update()
        .filter(
            agent=agent,
            skill=skill,
            kind=kind,
            anchor_section=section,
            scope=scope,
            payload=payload,
            provenance=provenance,
            status__in=PENDING,
        )
        .order_by("id")
        .first()
    )


def _count_repeat(delta: SkillDelta, *, actor: str) -> DeltaWrite:
    delta.proposals += 1
    delta.save(update_fields=["proposals"])
    audit_record(
        workspace=delta.workspace,
        actor=actor,
        action="delta.repeat",
        target_type="skill_delta",
        target_id=delta.pk,
        details={"proposals": delta.proposals},
    )
    return DeltaWrite(
        delta=delta,
        merged=True,
        warnings=[
            f"An identical proposal is already pending as delta #{delta.pk}; counted there "
            f"({delta.proposals} proposals), not staged again."
        ],
    )


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
    channel: str,
    rationale: str | None = None,
) -> DeltaWrite:
    """Write one learned delta, or route a fact to tier 0.

    1. Refuse (422) what learning may never do: change grants, use an
       unsupported kind, touch a skill with a local-capability permission.
    2. ``fact`` is routed to a tier-0 LearnedFact; no delta is written.
    3. Validate the anchor against the current base version, the payload shape
       (400) and size (422), tool names against the registry (422), and
       refuse credentials (422).
    4. Classify provenance: trusted only when backed by stored records
       (``provenance_classify``: harness-reported user turns or passed
       outcomes). Trusted without injection findings → staged; untrusted or
       any finding → quarantined, with the findings attached. Trusted
       ``user_instruction`` with no findings is auto-approved when the
       workspace opted in.
    5. Tier-3 deltas get a trigger and a payload embedding.
    """
    workspace = agent.workspace
    actor = f"agent:{agent.name}"
    check_json_strings("payload", payload)
    check_json_strings("provenance", [anchor, provenance, scope])
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
        if not isinstance(payload, dict):
            raise bad_request("payload", "A fact payload is {namespace, key, value, scope?}.")
        extra = sorted(set(payload) - {"namespace", "key", "value", "scope"})
        if extra:
            raise bad_request(
                f"payload.{extra[0]}", "A fact payload is {namespace, key, value, scope?}."
            )
        for key in ("namespace", "key"):
            if not isinstance(payload.get(key), str):
                raise bad_request(f"payload.{key}", f"'{key}' must be a string.")
        if "value" not in payload:
            raise bad_request("payload.value", "A fact needs a value.")
        fact, created = fact_put(
            workspace=workspace,
            agent=agent,
            namespace=payload["namespace"],
            key=payload["key"],
            value=payload["value"],
            scope=payload.get("scope") or scope or "global",
            provenance=provenance,
            field_prefix="payload.",
            channel=channel,
        )
        return DeltaWrite(fact=fact, fact_created=created)
    if kind not in DeltaKind.values:
        raise bad_request("kind", f"Unknown kind {kind!r}.")

    section = (anchor or {}).get("section") if isinstance(anchor, dict) else None
    if not isinstance(section, str) or not section:
        raise bad_request("anchor.section", "The anchor needs the slug of a section.")
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
        raise bad_request("scope", f"At most {SCOPE_MAX_CHARS} characters.")
    rationale = rationale_clean(rationale)
    refuse_secrets({"payload": cleaned, "scope": scope})

    classified = provenance_classify(
        provenance, agent=agent, claim=delta_claim(kind=kind, payload=cleaned)
    )
    source, trust, stored_provenance, unbacked = classified[:4]
    repeated = _pending_twin(
        agent=agent,
        skill=skill,
        kind=kind,
        section=section,
        payload=cleaned,
        scope=scope,
        provenance=stored_provenance,
    )
    if repeated is not None:
        return _count_repeat(repeated, actor=actor)
    tier = 1 if kind == DeltaKind.TOOL_HINT else 3
    findings = []
    if tier == 3:
        findings = injection_scan("\n".join(str(v) for v in cleaned.values()))
    # Any finding quarantines, whatever the provenance: a cited turn proves the
    # person said something, not that this text is what they said.
    # A turn that holds the words but not as the person's own sentence is staged for a
    # person (untrusted, the turn shown beside it), never auto-approved.
    trusted = (trust == DeltaTrust.TRUSTED or classified.loose) and not findings
    status = DeltaStatus.STAGED if trusted else DeltaStatus.QUARANTINED
    line = delta_line(kind=kind, payload=cleaned)
    delta = SkillDelta(
        channel=channel,
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
        rationale=rationale,
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
            **({"unbacked": unbacked} if unbacked else {}),
        },
    )
    delta_event(delta=delta, event=f"delta.{status}")
    warnings = []
    if unbacked and source in (
        ProvenanceSource.USER_INSTRUCTION,
        ProvenanceSource.OUTCOME_EVIDENCE,
    ):
        warnings.append(
            f"{str(status).capitalize()} as untrusted: {unbacked}. Provenance is trusted "
            "only when stored records back it; a person has to decide on this delta."
        )
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
        classified.consent is not None
        and not findings
        and workspace.settings.get(AUTO_APPROVE_SETTING) is True
    ):
        delta_auto_approve(delta, consent=classified.consent, setting=AUTO_APPROVE_SETTING)
    return DeltaWrite(delta=delta, warnings=warnings)


# --------------------------------------------------------------------------- consent gate


# --------------------------------------------------------------------------- budget


# --------------------------------------------------------------------------- consolidation
