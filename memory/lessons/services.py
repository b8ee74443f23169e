"""Lessons: earned from outcomes, superseded never deleted (SPEC section 4).

Where lessons come from, in order of trust:
1. the loop, mechanically (``memory.lessons.mechanical``);
2. ``POST /lessons/`` (``lesson_create``): words, usually the model's. The row is
   *claimed* at 0.3 and never served until a harness outcome that had it in play
   confirms it. Evidence ids it cites (each a passed harness outcome of the same
   workspace and project that ran the operation) are kept as ``cited`` links and
   weigh only once that first in-play confirmation comes
   (``memory.lessons.attribution.cited_evidence_count``):
   an outcome that never had the lesson in play says nothing about its words.

Confidence moves only through ``memory.lessons.evidence``; outcomes confirm and
contradict lessons through ``memory.lessons.attribution``. Serving marks recency only
(``context_mark_served``).
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from cairn.errors import ApplicationError
from memory.core.audit import audit_record
from memory.core.validation import rationale_clean
from memory.lessons.evidence_links import lesson_evidence_attach
from memory.lessons.lifecycle import (
    agent_actor_label,
    current_equivalent,
    lesson_text_clean,
    lesson_text_normalize,
    operation_key_clean,
    retired_by_person_blocking,
)
from memory.lessons.selectors import lesson_head
from memory.models import (
    Agent,
    Channel,
    Knowledge,
    Lesson,
    LessonEvidence,
    LessonScope,
    LessonSource,
    LessonState,
    Outcome,
    StepOutcome,
    Workspace,
)

EVIDENCE_IDS_MAX = 50
_CITED = LessonEvidence.Relation.CITED


def _evidence_validate(
    *, workspace: Workspace, project_digest: str, operation_key: str, evidence_ids: list[int]
) -> list[Outcome]:
    """Each id must be a harness-reported, passed outcome of this workspace and project
    whose approach has an ok step for ``operation_key``; else 422 naming every bad id
    with its reason: ``unknown``, ``agent_reported``, ``not_passed``, ``operation_not_run``.
    """
    ids = list(dict.fromkeys(int(i) for i in evidence_ids))
    if len(ids) > EVIDENCE_IDS_MAX:
        raise ApplicationError(
            f"At most {EVIDENCE_IDS_MAX} evidence ids.",
            code="invalid",
            fields={"evidence": ["too many"]},
            status_code=400,
        )
    found = {
        o.pk: o
        for o in Outcome.objects.filter(
            workspace=workspace, project_digest=project_digest, pk__in=ids
        )
    }
    problems: list[str] = []
    for outcome_id in ids:
        reason = _evidence_problem(found.get(outcome_id), operation_key=operation_key)
        if reason:
            problems.append(f"{outcome_id}: {reason}")
    if problems:
        raise ApplicationError(
            "Evidence refused: " + "; ".join(problems) + ".",
            code="evidence_refused",
            fields={"evidence": problems},
        )
    return [found[i] for i in ids]


def _evidence_problem(outcome: Outcome | None, *, operation_key: str) -> str:
    """Why an outcome cannot be a lesson's evidence ("" when it can)."""
    if outcome is None:
        # The same words for missing, another workspace's and another project's.
        return "unknown (no such outcome in this workspace and project)"
    if outcome.channel != Channel.HARNESS:
        return (
            "agent_reported (an agent token's outcome is the model's own word; "
            "post outcomes with the harness token)"
        )
    if outcome.passed is not True:
        state = "failed" if outcome.passed is False else "nothing was verified (passed=null)"
        return f"not_passed ({state})"
    if not any(
        step.get("operation_key") == operation_key and step.get("outcome") == StepOutcome.OK
        for step in outcome.approach
    ):
        return f"operation_not_run (its approach has no ok step for {operation_key!r})"
    return ""


@transaction.atomic
def lesson_create(
    *,
    workspace: Workspace,
    agent: Agent | None,
    text: str,
    operation_key: str,
    project_digest: str,
    evidence_ids: list[int] | None = None,
    source: str = LessonSource.MODEL,
    rationale: str | None = None,
    now: datetime | None = None,
    channel: str = Channel.AGENT,
) -> tuple[Lesson, bool]:
    """Create a project lesson; returns (lesson, created).

    1. Validate text, operation and every evidence id (422 naming each bad id).
    2. Refuse to re-learn a lesson a person retired from the same evidence ids.
    3. An equivalent live lesson here (or a global one) is answered instead of a
       duplicate; the new ids are kept on it as cited, and move nothing (posting the
       same words again with each new outcome is not evidence).
    4. Otherwise insert it claimed at 0.3 with its evidence ids as ``cited`` links,
       whatever token posts it: only a harness outcome with the lesson in play
       activates it (``lesson_confirm_by_outcome`` with ``in_play``).
    """
    now = now or timezone.now()
    text = lesson_text_clean(text, max_chars=settings.CAIRN_LESSON_TEXT_MAX_CHARS)
    operation_key = operation_key_clean(operation_key)
    rationale = rationale_clean(rationale)
    if source not in LessonSource.values or source == LessonSource.USER:
        raise ApplicationError(
            "Agents may post lessons from source 'model' or 'extractor'.",
            code="invalid",
            fields={"source": ["model or extractor"]},
            status_code=400,
        )
    normalized = lesson_text_normalize(text)
    outcomes = _evidence_validate(
        workspace=workspace,
        project_digest=project_digest,
        operation_key=operation_key,
        evidence_ids=evidence_ids or [],
    )
    blocked = retired_by_person_blocking(
        workspace=workspace,
        operation_key=operation_key,
        normalized_text=normalized,
        outcome_ids=[o.pk for o in outcomes],
    )
    if blocked is not None:
        raise ApplicationError(
            f"A person retired this lesson (lesson {blocked.pk}); it is not re-learned "
            "from the same evidence ids.",
            code="retired_by_person",
            fields={"evidence": [f"lesson {blocked.pk} was retired by a person"]},
        )
    existing = current_equivalent(
        workspace=workspace,
        operation_key=operation_key,
        normalized_text=normalized,
        project_digest=project_digest,
    )
    if existing is not None:
        return _cite_each(lesson=existing, outcomes=outcomes), False
    birth = settings.CAIRN_LESSON_CLAIMED_CONFIDENCE
    try:
        with transaction.atomic():
            lesson = Lesson.objects.create(
                workspace=workspace,
                agent=agent,
                text=text,
                normalized_text=normalized,
                operation_key=operation_key,
                rationale=rationale,
                scope=LessonScope.PROJECT,
                project_digest=project_digest,
                confidence=birth,
                birth_confidence=birth,
                state=LessonState.CLAIMED,
                source=source,
                channel=channel,
            )
    except IntegrityError:
        # A concurrent twin won the one-live-lesson constraint: confirm it instead.
        existing = current_equivalent(
            workspace=workspace,
            operation_key=operation_key,
            normalized_text=normalized,
            project_digest=project_digest,
        )
        if existing is None:  # pragma: no cover - another constraint failed
            raise
        return _cite_each(lesson=existing, outcomes=outcomes), False
    for outcome in outcomes:
        lesson_evidence_attach(lesson=lesson, outcome=outcome, relation=_CITED)
    audit_record(
        workspace=workspace,
        actor=agent_actor_label(agent),
        action="lesson.create",
        target_type="lesson",
        target_id=lesson.pk,
        details={"state": lesson.state, "cited": [o.pk for o in outcomes]},
    )
    return lesson, True


def _cite_each(*, lesson: Lesson, outcomes: list[Outcome]) -> Lesson:
    """Keep ``outcomes`` as cited on the live lesson: shown, weighed by nothing now."""
    for outcome in outcomes:
        lesson_evidence_attach(lesson=lesson, outcome=outcome, relation=_CITED)
    return lesson_head(lesson=lesson)


def context_mark_served(
    *, lesson_ids: list[int], knowledge_ids: list[int], now: datetime | None = None
) -> None:
    """Serving refreshes recency (last_used_at, use_count), never confidence."""
    now = now or timezone.now()
    if lesson_ids:
        Lesson.objects.filter(pk__in=lesson_ids).update(
            last_used_at=now, use_count=F("use_count") + 1
        )
    if knowledge_ids:
        Knowledge.objects.filter(pk__in=knowledge_ids).update(
            last_used_at=now, use_count=F("use_count") + 1
        )
