"""The trust ledger: user-observable outcomes per scope (SPEC section 6).

Approval of an ``outcome_evidence`` delta reads this ledger; samples attributed
to deltas also move those deltas' success and attempt counts.
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import F

from cairn.errors import ApplicationError
from memory.models import Agent, FeedbackSample, SkillDelta
from memory.services.skills import bad_input, credential_refuse, storable_refuse

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
    storable_refuse(value=[action_type, scope], field_name="scope")
    action_type, scope = (action_type or "").strip(), (scope or "").strip()
    if not action_type or len(action_type) > ACTION_TYPE_MAX_CHARS:
        raise bad_input("action_type", f"1-{ACTION_TYPE_MAX_CHARS} characters.")
    if not scope or len(scope) > SCOPE_MAX_CHARS:
        raise bad_input("scope", f"1-{SCOPE_MAX_CHARS} characters.")
    credential_refuse(value=[action_type, scope], field_name="scope")
    ids = sorted(set(delta_ids or []))
    if len(ids) > DELTA_IDS_MAX:
        raise bad_input("delta_ids", f"At most {DELTA_IDS_MAX} ids.")
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
