"""The trust ledger: user-observable outcomes per scope (SPEC section 6).

Approval of an ``outcome_evidence`` delta reads this ledger; samples attributed
to deltas also move those deltas' success and attempt counts.
"""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.db.models import Count, F, Q

from cairn.errors import ApplicationError
from memory.core.secrets import refuse_secrets
from memory.core.validation import bad_request, check_json_strings
from memory.models import (
    Agent,
    DeltaTrust,
    FeedbackSample,
    ProvenanceSource,
    SkillDelta,
    Workspace,
)

ACTION_TYPE_MAX_CHARS = 100
SCOPE_MAX_CHARS = 200
DELTA_IDS_MAX = 50


@transaction.atomic
def feedback_record(
    *,
    agent: Agent,
    action_type: str,
    scope: str,
    positive: bool,
    delta_ids: list[int] | None = None,
) -> FeedbackSample:
    """Record one sample on ``scope``; attributed deltas count an attempt (and a success).

    Attributed deltas must be this agent's (an id it cannot see is refused the
    same way as one that does not exist).
    """
    check_json_strings("scope", [action_type, scope])
    action_type, scope = (action_type or "").strip(), (scope or "").strip()
    if not action_type or len(action_type) > ACTION_TYPE_MAX_CHARS:
        raise bad_request("action_type", f"1-{ACTION_TYPE_MAX_CHARS} characters.")
    if not scope or len(scope) > SCOPE_MAX_CHARS:
        raise bad_request("scope", f"1-{SCOPE_MAX_CHARS} characters.")
    refuse_secrets({"action_type": action_type, "scope": scope})
    ids = sorted(set(delta_ids or []))
    if len(ids) > DELTA_IDS_MAX:
        raise bad_request("delta_ids", f"At most {DELTA_IDS_MAX} ids.")
    if ids:
        found = set(
            SkillDelta.objects.filter(
                workspace=agent.workspace, agent=agent, pk__in=ids
            ).values_list("pk", flat=True)
        )
        missing = [pk for pk in ids if pk not in found]
        if missing:
            raise ApplicationError(
                f"Unknown delta id {missing[0]}: attribute samples only to this agent's deltas.",
                code="unknown_delta",
                fields={"delta_ids": [f"unknown delta {missing[0]}"]},
            )
        updates = {"attempt_count": F("attempt_count") + 1}
        if positive:
            updates["success_count"] = F("success_count") + 1
        SkillDelta.objects.filter(pk__in=ids).update(**updates)
    return FeedbackSample.objects.create(
        workspace=agent.workspace,
        agent=agent,
        action_type=action_type,
        scope=scope,
        positive=bool(positive),
        delta_ids=ids,
    )


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


def trust_progress_get(*, workspace: Workspace, scope: str) -> dict:
    """The trust ledger on ``scope``: samples, positives and whether the bar is met."""
    tally = FeedbackSample.objects.filter(workspace=workspace, scope=scope).aggregate(
        samples=Count("id"), positive=Count("id", filter=Q(positive=True))
    )
    return _trust_progress(scope=scope, samples=tally["samples"], positive=tally["positive"])


def trust_progress_many(*, workspace: Workspace, scopes) -> dict[str, dict]:
    """``trust_progress_get`` for several scopes in one query: {scope: progress}."""
    scopes = sorted(set(scopes))
    if not scopes:
        return {}
    rows = (
        FeedbackSample.objects.filter(workspace=workspace, scope__in=scopes)
        .values("scope")
        .annotate(samples=Count("id"), positive=Count("id", filter=Q(positive=True)))
        .order_by("scope")
    )
    tallies = {row["scope"]: (row["samples"], row["positive"]) for row in rows}
    return {
        scope: _trust_progress(
            scope=scope,
            samples=tallies.get(scope, (0, 0))[0],
            positive=tallies.get(scope, (0, 0))[1],
        )
        for scope in scopes
    }


def delta_trust_progress(*, delta: SkillDelta) -> dict:
    """Approval progress for the UI: the ledger bar for outcome_evidence, else not needed."""
    progress = trust_progress_get(workspace=delta.workspace, scope=delta.scope)
    progress["needed"] = delta.provenance_source == ProvenanceSource.OUTCOME_EVIDENCE
    return progress


TRUSTED_SOURCES = {ProvenanceSource.USER_INSTRUCTION, ProvenanceSource.OUTCOME_EVIDENCE}


AGENT_SOURCES = TRUSTED_SOURCES | {ProvenanceSource.OBSERVED_CONTENT}


TURNS_MAX = 50


TURN_ID_MAX_CHARS = 200


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


TRUST_SAMPLES_SHOWN = 50


def trust_sample_list(*, workspace: Workspace, scope: str, limit: int = TRUST_SAMPLES_SHOWN):
    """The newest samples on ``scope`` (what a trust-ledger number is made of), with agents."""
    return list(
        FeedbackSample.objects.filter(workspace=workspace, scope=scope)
        .select_related("agent")
        .order_by("-created_at", "-id")[:limit]
    )
