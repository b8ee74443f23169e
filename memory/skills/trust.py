"""The trust ledger: user-observable outcomes per scope (SPEC section 6).

Approval of an ``outcome_evidence`` delta reads this ledger; samples attributed
to deltas also move those deltas' success and attempt counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, F, Q, Window
from django.db.models.functions import RowNumber

from cairn.errors import ApplicationError
from memory.core.actors import Actor
from memory.core.audit import audit_record
from memory.core.consent import Claim, Consent, consent_by_turn, turns_beside_many
from memory.core.secrets import refuse_secrets
from memory.core.trust import WEIGHING_CHANNELS
from memory.core.validation import bad_request, check_json_strings
from memory.models import (
    Agent,
    Channel,
    DeltaKind,
    DeltaTrust,
    FeedbackSample,
    Outcome,
    ProvenanceSource,
    SkillDelta,
    Workspace,
)

ACTION_TYPE_MAX_CHARS = 100
SCOPE_MAX_CHARS = 200
DELTA_IDS_MAX = 50


SAMPLE_ID_MAX_CHARS = 200
HARNESS_FEEDBACK = "harness feedback"
FROM_OUTCOME = "outcome"


@dataclass(frozen=True)
class FeedbackWrite:
    sample: FeedbackSample
    created: bool


def _stored_sample(*, agent: Agent, sample_id: str) -> FeedbackSample | None:
    return FeedbackSample.objects.filter(agent=agent, sample_id=sample_id).first()


def feedback_record(
    *,
    actor: Actor,
    action_type: str,
    scope: str,
    positive: bool,
    sample_id: str,
    delta_ids: list[int] | None = None,
) -> FeedbackWrite:
    """Record one harness-observed sample on ``scope``; attributed deltas count an
    attempt (and a success).

    1. Only the harness reports samples (403 naming the ``harness`` scope): the
       model grading its own deltas is no track record.
    2. ``sample_id`` is the harness's id for what it observed, unique per agent:
       a retry with the same id changes nothing and answers the stored sample.
    3. Attributed deltas must be this agent's (an id it cannot see is refused the
       same way as one that does not exist).
    """
    if not actor.is_harness or actor.agent is None:
        raise ApplicationError(
            "Trust-ledger samples count only from the harness: send them with a "
            "harness-scoped token (the model's own word never builds a track record).",
            code="forbidden_scope",
            fields={"scope": ["needs a harness-scoped token"]},
            status_code=403,
        )
    agent = actor.agent
    check_json_strings("scope", [action_type, scope, sample_id])
    sample_id = (sample_id or "").strip()
    if not sample_id or len(sample_id) > SAMPLE_ID_MAX_CHARS:
        raise bad_request("sample_id", f"1-{SAMPLE_ID_MAX_CHARS} characters.")
    if sample_id.startswith("outcome:"):
        raise bad_request("sample_id", "ids starting 'outcome:' are kept for outcome samples.")
    stored = _stored_sample(agent=agent, sample_id=sample_id)
    if stored is not None:
        return FeedbackWrite(sample=stored, created=False)
    action_type, scope = (action_type or "").strip(), (scope or "").strip()
    if not action_type or len(action_type) > ACTION_TYPE_MAX_CHARS:
        raise bad_request("action_type", f"1-{ACTION_TYPE_MAX_CHARS} characters.")
    if not scope or len(scope) > SCOPE_MAX_CHARS:
        raise bad_request("scope", f"1-{SCOPE_MAX_CHARS} characters.")
    refuse_secrets({"action_type": action_type, "scope": scope, "sample_id": sample_id})
    ids = sorted(set(delta_ids or []))
    if len(ids) > DELTA_IDS_MAX:
        raise bad_request("delta_ids", f"At most {DELTA_IDS_MAX} ids.")
    try:
        with transaction.atomic():
            sample = _sample_write(
                agent=agent,
                action_type=action_type,
                scope=scope,
                positive=bool(positive),
                delta_ids=ids,
                sample_id=sample_id,
            )
            audit_record(
                workspace=agent.workspace,
                actor=actor.label,
                action="feedback.record",
                target_type="feedback_sample",
                target_id=sample.pk,
                # Never the scope or the sample id: audit details carry no content.
                details={"positive": sample.positive, "delta_ids": ids},
            )
            return FeedbackWrite(sample=sample, created=True)
    except IntegrityError:
        # A concurrent retry with the same sample_id won: answer its sample.
        stored = _stored_sample(agent=agent, sample_id=sample_id)
        if stored is None:
            raise
        return FeedbackWrite(sample=stored, created=False)


def _sample_write(
    *,
    agent: Agent,
    action_type: str,
    scope: str,
    positive: bool,
    delta_ids: list[int],
    sample_id: str,
    outcome: Outcome | None = None,
) -> FeedbackSample:
    if delta_ids:
        found = set(
            SkillDelta.objects.filter(
                workspace=agent.workspace, agent=agent, pk__in=delta_ids
            ).values_list("pk", flat=True)
        )
        missing = [pk for pk in delta_ids if pk not in found]
        if missing:
            raise ApplicationError(
                f"Unknown delta id {missing[0]}: attribute samples only to this agent's deltas.",
                code="unknown_delta",
                fields={"delta_ids": [f"unknown delta {missing[0]}"]},
            )
    sample = FeedbackSample.objects.create(
        workspace=agent.workspace,
        agent=agent,
        action_type=action_type,
        scope=scope,
        positive=positive,
        delta_ids=delta_ids,
        sample_id=sample_id,
        outcome=outcome,
        channel=Channel.HARNESS,
    )
    if delta_ids:
        updates = {"attempt_count": F("attempt_count") + 1}
        if positive:
            updates["success_count"] = F("success_count") + 1
        SkillDelta.objects.filter(pk__in=delta_ids).update(**updates)
    return sample


def trust_samples_from_outcome(*, outcome: Outcome) -> list[FeedbackSample]:
    """Score the deltas in play in a harness-reported outcome (SPEC section 6).

    One sample per (outcome, scope) covering this agent's in-play deltas of that
    scope, so each delta gains exactly one attempt per outcome and one outcome
    is one observation on a scope's ledger: positive when the outcome passed,
    negative when it failed, nothing when ``passed`` is null or the outcome is
    the agent's own word. The sample id ``outcome:<pk>:delta:<smallest delta id>``
    is unique per agent, so a retried outcome adds nothing.
    """
    if outcome.channel != Channel.HARNESS or outcome.passed is None:
        return []
    ids = sorted({r["id"] for r in outcome.in_play if r.get("type") == "delta"})
    if not ids:
        return []
    by_scope: dict[str, list[int]] = {}
    for pk, scope in (
        SkillDelta.objects.filter(
            workspace_id=outcome.workspace_id, agent_id=outcome.agent_id, pk__in=ids
        )
        .order_by("pk")
        .values_list("pk", "scope")
    ):
        by_scope.setdefault(scope, []).append(pk)
    samples = []
    for scope, delta_ids in sorted(by_scope.items()):
        sample_id = f"outcome:{outcome.pk}:delta:{delta_ids[0]}"
        if FeedbackSample.objects.filter(agent_id=outcome.agent_id, sample_id=sample_id).exists():
            continue
        samples.append(
            _sample_write(
                agent=outcome.agent,
                action_type=FROM_OUTCOME,
                scope=scope,
                positive=bool(outcome.passed),
                delta_ids=delta_ids,
                sample_id=sample_id,
                outcome=outcome,
            )
        )
    return samples


def sample_origin(sample: FeedbackSample) -> str:
    """Where a ledger sample came from, for people: an outcome or harness feedback."""
    return FROM_OUTCOME if sample.outcome_id else HARNESS_FEEDBACK


def _trust_progress(*, scope: str, samples: int, positive: int) -> dict:
    """The one reading of the ledger bar: at least N samples at ≥ the threshold positive."""
    required, threshold = settings.CAIRN_TRUST_MIN_SAMPLES, settings.CAIRN_TRUST_THRESHOLD
    ratio = positive / samples if samples else 0.0
    met = samples >= required and ratio >= threshold
    if samples < required:
        message = f"{samples} of {required} samples on scope {scope!r}"
    else:
        message = (
            f"{samples} samples on scope {scope!r}, {ratio:.0%} positive (needs {threshold:.0%})"
        )
    return {
        "scope": scope,
        "samples": samples,
        "positive": positive,
        "ratio": round(ratio, 4),
        "required_samples": required,
        "required_ratio": threshold,
        "met": met,
        "message": message,
    }


RECENT_SAMPLES = 5


def _ledger(workspace: Workspace):
    return FeedbackSample.objects.filter(workspace=workspace, channel__in=sorted(WEIGHING_CHANNELS))


def _recent(*, workspace: Workspace, scopes: list[str]) -> dict[str, list[dict]]:
    """The latest samples per scope, each saying where it came from."""
    recent: dict[str, list[dict]] = {scope: [] for scope in scopes}
    rows = (
        _ledger(workspace)
        .filter(scope__in=scopes)
        .annotate(
            rank=Window(
                RowNumber(),
                partition_by=[F("scope")],
                order_by=[F("created_at").desc(), F("id").desc()],
            )
        )
        .filter(rank__lte=RECENT_SAMPLES)
        .order_by("scope", "-created_at", "-id")
        .only("id", "scope", "positive", "outcome_id", "sample_id", "created_at", "action_type")
    )
    for sample in rows:
        recent[sample.scope].append(
            {
                "id": sample.pk,
                "origin": sample_origin(sample),
                "positive": sample.positive,
                "outcome": sample.outcome_id,
                "sample_id": sample.sample_id,
                "action_type": sample.action_type,
                "created_at": sample.created_at,
            }
        )
    return recent


def trust_progress_get(*, workspace: Workspace, scope: str) -> dict:
    """The trust ledger on ``scope``: samples, positives and whether the bar is met.

    Only harness- and person-reported samples count.
    """
    tally = (
        _ledger(workspace)
        .filter(scope=scope)
        .aggregate(samples=Count("id"), positive=Count("id", filter=Q(positive=True)))
    )
    return _trust_progress(scope=scope, samples=tally["samples"], positive=tally["positive"])


def trust_progress_many(*, workspace: Workspace, scopes) -> dict[str, dict]:
    """``trust_progress_get`` for several scopes in one query: {scope: progress}."""
    scopes = sorted(set(scopes))
    if not scopes:
        return {}
    rows = (
        _ledger(workspace)
        .filter(scope__in=scopes)
        .values("scope")
        .annotate(samples=Count("id"), positive=Count("id", filter=Q(positive=True)))
        .order_by("scope")
    )
    tallies = {row["scope"]: (row["samples"], row["positive"]) for row in rows}
    recent = _recent(workspace=workspace, scopes=scopes)
    return {
        scope: {
            **_trust_progress(
                scope=scope,
                samples=tallies.get(scope, (0, 0))[0],
                positive=tallies.get(scope, (0, 0))[1],
            ),
            "recent": recent[scope],
        }
        for scope in scopes
    }


def delta_trust_progress(*, delta: SkillDelta) -> dict:
    """Approval progress for the UI: the ledger bar for outcome_evidence, else not needed."""
    progress = trust_progress_many(workspace=delta.workspace, scopes=[delta.scope])[delta.scope]
    progress["needed"] = delta.provenance_source == ProvenanceSource.OUTCOME_EVIDENCE
    return progress


TRUSTED_SOURCES = {ProvenanceSource.USER_INSTRUCTION, ProvenanceSource.OUTCOME_EVIDENCE}


AGENT_SOURCES = TRUSTED_SOURCES | {ProvenanceSource.OBSERVED_CONTENT}


TURNS_MAX = 50


TURN_ID_MAX_CHARS = 200


OUTCOMES_MAX = 50


class Provenance(NamedTuple):
    """What a delta's provenance says and whether stored records back it.

    ``unbacked`` is empty when the provenance is trusted, else the reason it is not
    (shown to the writer as a warning and to reviewers in the audit log).
    ``consent`` is set only when a cited turn says the claim verbatim
    (``memory.core.consent.consent_by_turn``): what auto-approval and a tier-0 fact
    need. ``loose``: the cited turn holds the claim's words but not as one of its
    sentences, so the delta is staged as untrusted with the turn shown beside it.
    """

    source: str
    trust: str
    stored: dict
    unbacked: str = ""
    consent: Consent | None = None
    loose: bool = False


def _backed_outcomes(*, workspace: Workspace, outcomes: list[int]) -> list[int]:
    """The cited outcome ids that are harness-reported, passed outcomes of ``workspace``."""
    return sorted(
        Outcome.objects.filter(
            workspace=workspace, pk__in=outcomes, channel=Channel.HARNESS, passed=True
        ).values_list("pk", flat=True)
    )


def provenance_classify(provenance, *, agent: Agent, claim: Claim) -> Provenance:
    """Classify a delta's or fact's provenance; only provenance backed by records is trusted.

    - ``user_instruction`` must cite, in ``turns``, a stored user turn that this
      agent's harness posted (``"session_id#turn_index"``), and one such turn must
      say the claim as one of its own sentences: a statement, not a question, not
      quoted, equal after folding (``consent_by_turn``). Then it is trusted and
      carries a ``Consent``. A turn that holds the claim's words but not as a
      sentence ("Never use X" for "Use X") is ``loose``: untrusted, staged for a
      person with the turn shown. A turn that says something else backs nothing.
    - ``outcome_evidence`` must cite, in ``outcomes``, at least one harness-reported
      outcome of this workspace that passed; it is trusted (staged, approved by a
      reviewer once the trust ledger's bar is met) but never carries consent.
    - Anything else (observed content, missing, unreadable, unbacked) is untrusted.

    Only ids are kept, never content: the payload carries the lesson, the
    provenance only says where it came from.
    """
    workspace = agent.workspace
    if provenance is None or provenance == {}:
        return Provenance(ProvenanceSource.MISSING, DeltaTrust.UNTRUSTED, {}, "no provenance")
    if not isinstance(provenance, dict):
        return Provenance(ProvenanceSource.UNREADABLE, DeltaTrust.UNTRUSTED, {}, "unreadable")
    source = provenance.get("source")
    turns = provenance.get("turns", [])
    outcomes = provenance.get("outcomes", [])
    if source is None:
        return Provenance(ProvenanceSource.MISSING, DeltaTrust.UNTRUSTED, {}, "no source")
    readable = (
        isinstance(source, str)
        and source in AGENT_SOURCES
        and not set(provenance) - {"source", "turns", "outcomes"}
        and isinstance(turns, list)
        and len(turns) <= TURNS_MAX
        and all(isinstance(t, str) and 0 < len(t) <= TURN_ID_MAX_CHARS for t in turns)
        and isinstance(outcomes, list)
        and len(outcomes) <= OUTCOMES_MAX
        and all(isinstance(o, int) and not isinstance(o, bool) and 0 < o < 2**63 for o in outcomes)
    )
    if not readable:
        return Provenance(ProvenanceSource.UNREADABLE, DeltaTrust.UNTRUSTED, {}, "unreadable")
    stored = {"source": source, "turns": list(turns)}
    if outcomes:
        stored["outcomes"] = sorted(set(outcomes))
    if source == ProvenanceSource.USER_INSTRUCTION:
        said = consent_by_turn(agent=agent, turns=turns, claim=claim)
        if said.consent is not None:
            return Provenance(source, DeltaTrust.TRUSTED, stored, "", said.consent)
        if not said.found:
            unbacked = (
                "user_instruction cites no stored user turn this agent's harness reported "
                "(provenance.turns: ['session_id#turn_index'])"
            )
        elif said.loose:
            unbacked = (
                "the cited user turn does not say this as one of its own sentences (a "
                "statement, not a question, not quoted, not negated, word for word)"
            )
        else:
            unbacked = (
                "the cited user turn does not say this (one of its sentences must be the "
                "delta's or fact's content, compared without case, spacing or end "
                "punctuation)"
            )
        return Provenance(source, DeltaTrust.UNTRUSTED, stored, unbacked, None, said.loose)
    if source == ProvenanceSource.OUTCOME_EVIDENCE:
        if not _backed_outcomes(workspace=workspace, outcomes=outcomes):
            return Provenance(
                source,
                DeltaTrust.UNTRUSTED,
                stored,
                "outcome_evidence cites no passed outcome reported by the harness "
                "(provenance.outcomes: [outcome ids])",
            )
        return Provenance(source, DeltaTrust.TRUSTED, stored)
    return Provenance(source, DeltaTrust.UNTRUSTED, stored, f"{source} is the agent's own reading")


def delta_claim(*, kind: str, payload: dict) -> Claim:
    """What a cited user turn must say for a ``user_instruction`` delta to be trusted.

    A preference is consented to when its body is one of the person's own sentences.
    An example (input and output) or a tool-hint (tool names) is never one sentence,
    so a turn can only back it loosely (staged for a reviewer, never auto-approved).
    The trigger is left out: it says when, not what the person asked for."""
    if kind == DeltaKind.TOOL_HINT:
        return Claim((), (*payload.get("prefer", []), *payload.get("drop", [])))
    if kind == DeltaKind.EXAMPLE:
        return Claim((), (payload["input"], payload["output"]))
    return Claim((payload["body"],), (payload["body"],))


TRUST_SAMPLES_SHOWN = 50


def trust_sample_list(*, workspace: Workspace, scope: str, limit: int = TRUST_SAMPLES_SHOWN):
    """The newest samples on ``scope`` (what a trust-ledger number is made of), with agents."""
    return list(
        FeedbackSample.objects.filter(workspace=workspace, scope=scope)
        .select_related("agent")
        .order_by("-created_at", "-id")[:limit]
    )


def delta_said_beside(*, deltas) -> dict[int, list[dict]]:
    """For the review cards: each untrusted ``user_instruction`` delta's cited turns
    (its own agent's harness only), the claim's words marked (one query)."""
    items = []
    for delta in deltas:
        if delta.provenance_source != ProvenanceSource.USER_INSTRUCTION:
            continue
        if delta.trust != DeltaTrust.UNTRUSTED:
            continue
        turns = [t for t in (delta.provenance or {}).get("turns", []) if isinstance(t, str)]
        try:
            claim = delta_claim(kind=delta.kind, payload=delta.payload)
        except (KeyError, TypeError):
            continue
        items.append((delta.pk, delta.agent_id, turns, claim))
    return turns_beside_many(items)
