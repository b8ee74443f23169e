"""Outcomes: one per agent turn, derived from what the harness saw (SPEC section 4).

``outcome_passed`` is the server's verdict from the raw check records; a
client's own ``passed`` is never used. ``outcome_record`` stores the outcome
once per ``(agent, channel, outcome_id)`` and, in the same transaction,
attributes it to what was in play and learns mechanical lessons; a retry answers
with the body the first request stored.
"""

from __future__ import annotations

import json
import logging
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime

from django.db import DatabaseError, IntegrityError, connection, transaction
from django.utils import timezone

from cairn.errors import ApplicationError
from memory.core.rows import row_insert_keyed
from memory.core.secrets import refuse_secrets
from memory.core.validation import bad_request, check_json_strings
from memory.identity.projects import (
    project_digest_required,
    project_label_from_remote_ctes,
    target_relativize,
)
from memory.identity.services import GOAL_TEXT_SETTING
from memory.lessons.attribution import lesson_confirm_by_outcome, lesson_contradict_by_outcome
from memory.lessons.evidence import evidence_apply, evidence_moves
from memory.lessons.evidence_links import lesson_evidence_links_cte, lesson_evidence_unlink
from memory.lessons.in_play import InPlay, in_play_read
from memory.lessons.mechanical import lesson_learn_mechanical
from memory.lessons.recency import recency_mark, recency_report
from memory.lessons.selectors import lesson_head
from memory.lessons.self_report import (
    InPlayReport,
    in_play_ids,
    knowledge_effect,
    lesson_effect,
)
from memory.lessons.verdict import (
    goal_digest,
    mechanical_pairs,
    operations_last_result,
    outcome_passed,
)
from memory.models import (
    Agent,
    Category,
    Channel,
    EvidenceKind,
    Knowledge,
    Lesson,
    LessonEvidence,
    LessonState,
    Outcome,
    Workspace,
)
from memory.skills.trust import trust_samples_from_outcome

logger = logging.getLogger(__name__)

IN_PLAY_TYPES = ("lesson", "knowledge", "error", "delta")
GOAL_TEXT_MAX_CHARS = 1000


def goal_text_clean(goal_text) -> str:
    """The goal in words a harness may send: optional, ≤ 1000 characters, no credentials.

    Checked whether or not the workspace keeps it, so a harness learns of a refusal
    the same way everywhere (400 naming ``goal_text``; 422 ``credential_refused``).
    """
    if goal_text is None:
        return ""
    if not isinstance(goal_text, str):
        raise bad_request("goal_text", "The goal text is a string.")
    check_json_strings("goal_text", goal_text)
    cleaned = goal_text.strip()
    if len(cleaned) > GOAL_TEXT_MAX_CHARS:
        raise bad_request("goal_text", f"At most {GOAL_TEXT_MAX_CHARS} characters.")
    refuse_secrets({"goal_text": cleaned})
    return cleaned


def _goal_text_kept(*, agent: Agent) -> bool:
    settings = Workspace.objects.filter(pk=agent.workspace_id).values_list("settings", flat=True)
    return (settings.first() or {}).get(GOAL_TEXT_SETTING) is True


@dataclass
class Attribution:
    confirmed: list[dict]
    contradicted: list[dict]
    lessons_created: list[int]
    # Lessons an agent token's outcome (the model's own word) met when it learned from
    # its approach: recency only, marked after the commit (``memory.lessons.recency``).
    self_reported: dict[type, set[int]] = field(default_factory=dict)
    # (lesson id, relation) evidence links this outcome made, and those written with
    # its row because they were foreseen (``lesson_evidence_links_cte``).
    linked: set[tuple[int, str]] = field(default_factory=set)
    prelinked: set[tuple[int, str]] = field(default_factory=set)
    now: datetime = field(default_factory=timezone.now)

    def note(self, bucket: list[dict], ref: dict) -> None:
        if ref not in bucket:
            bucket.append(ref)

    def note_effect(self, ref: dict, *, contradicts: bool) -> None:
        self.note(self.contradicted if contradicts else self.confirmed, ref)


def _stored_body(*, agent: Agent, outcome_id: str, channel: str) -> dict | None:
    """The stored answer for this id from this channel: an agent token's outcome under the
    id the harness will use is another row, never the harness's replay."""
    row = (
        Outcome.objects.filter(agent=agent, channel=channel, outcome_id=outcome_id)
        .only("response")
        .first()
    )
    return None if row is None else row.response


def outcome_record(
    *,
    agent: Agent,
    outcome_id: str,
    session_id: str,
    turn_index: int = 0,
    project_remote: str | None = None,
    project_path: str | None = None,
    machine: str = "",
    context: str = "global",
    goal: str | None = None,
    goal_digest_value: str = "",
    goal_text: str | None = None,
    approach: list[dict] | None = None,
    checks: list[dict] | None = None,
    claim_ok: bool = True,
    steps: int | None = None,
    tokens: int | None = None,
    wall_s: float | None = None,
    in_play: list[dict] | None = None,
    reported_passed: bool | None = None,
    channel: str = Channel.AGENT,
) -> tuple[dict, bool]:
    """Record one outcome; returns (response body, created).

    In one transaction: insert the row, compute ``passed``, attribute it to the
    in-play lessons and knowledge, learn mechanical lessons, store the body. An
    ``outcome_id`` this agent already posted through this channel (a retry, or a
    concurrent twin) loses on the unique constraint on (agent, channel, outcome_id)
    at the insert, before anything is applied, and answers with the stored body.
    (Inserting first rather than looking first saves a query on every new outcome;
    a retry pays it instead.) The same id from the other channel is another outcome:
    an agent token cannot take the id its harness will report under.

    ``goal_text`` is checked (length, credentials) and hashed when no ``goal`` is
    given; it is stored only when the workspace opted in (``store_goal_text``),
    and the body says whether it was (``goal_text_stored``).
    """
    try:
        digest = project_digest_required(remote=project_remote, path=project_path)
        goal_text = goal_text_clean(goal_text)
    except ApplicationError:
        stored = _stored_body(agent=agent, outcome_id=outcome_id, channel=channel)
        if stored is None:
            raise
        return stored, False
    keep_goal_text = bool(goal_text) and _goal_text_kept(agent=agent)
    if not goal and goal_text:
        goal = goal_text
    approach = [
        {**a, "target": target_relativize(a.get("target", ""), path=project_path)}
        for a in (approach or [])
    ]
    checks = [
        {**c, "target": target_relativize(c.get("target", ""), path=project_path)}
        for c in (checks or [])
    ]
    passed = outcome_passed(approach=approach, checks=checks, claim_ok=claim_ok)
    author = f"{channel}:{agent.name}"
    outcome = Outcome(
        workspace_id=agent.workspace_id,
        agent=agent,
        outcome_id=outcome_id,
        session_id=session_id,
        turn_index=turn_index,
        project_digest=digest,
        machine_digest=machine or "",
        context=context or "global",
        goal_digest=goal_digest(goal) if goal else goal_digest_value,
        goal_text=goal_text if keep_goal_text else "",
        approach=approach,
        checks=checks,
        claim_ok=claim_ok,
        steps=steps,
        tokens=tokens,
        wall_s=wall_s,
        in_play=in_play or [],
        passed=passed,
        reported_passed=reported_passed,
        channel=channel,
    )
    # A harness outcome confirming lessons already at their ceiling writes nothing to
    # them (``_quiet``): read without a lock, they need none.
    quiet = None
    if _may_be_quiet(outcome):
        rows = in_play_read(outcome=outcome, locked=False)
        foreseen = _foresee(outcome=outcome, rows=rows)
        if _quiet(rows=rows, foreseen=foreseen):
            quiet = (rows, foreseen)
    label = project_label_from_remote_ctes(
        workspace_id=agent.workspace_id, project_digest=digest, remote=project_remote, author=author
    )
    while True:
        try:
            body, result = _store(outcome, quiet=quiet, label=label, kept=keep_goal_text)
            break
        except IntegrityError:
            stored = _stored_body(agent=agent, outcome_id=outcome_id, channel=channel)
            if stored is not None:
                return stored, False
            if quiet is None:
                raise
            # A lesson a quiet outcome read went before its evidence link was written
            # (erased meanwhile): again by the locked path, which reads it anew.
            quiet = None
    # After the commit: gathered with other outcomes' marks and written together in the
    # background (memory.lessons.recency), so outcomes naming the same lesson never
    # hold its row; an agent token's in-play rows are read there too, with others'.
    # The outcome is stored by now, so a failure here is logged, not answered as a 500
    # the client would retry.
    try:
        recency_mark(targets=result.self_reported, now=result.now)
        if outcome.channel != Channel.HARNESS and outcome.passed is not None and outcome.in_play:
            recency_report(
                InPlayReport(
                    outcome=outcome,
                    at=result.now,
                    last=operations_last_result(outcome.approach),
                    wanted=in_play_ids(outcome.in_play),
                )
            )
    except DatabaseError:
        if connection.in_atomic_block:  # a caller's transaction: it must know
            raise
        logger.exception("outcome %s: recency of what it had in play not recorded", outcome.pk)
    return body, True


def _store(
    outcome: Outcome,
    *,
    quiet: tuple[InPlay, Attribution] | None,
    label: list[tuple[str, str, list]],
    kept: bool,
) -> tuple[dict, Attribution]:
    """Insert ``outcome`` and attribute it; returns its answer and the attribution.

    ``quiet``: its lessons read without a lock and the attribution foreseen from them,
    when that is all there is to it (``_quiet``). ``label``: the project-name CTEs.

    An outcome that writes nothing after its own row is one statement, and needs no
    transaction of its own (no BEGIN and COMMIT round trips): any agent token's outcome
    that learns nothing, any outcome with nothing in play, a quiet one. Inside a
    caller's transaction it still takes a savepoint, so a retry's unique violation is
    survived.
    """
    alone = (quiet or not _writes_after_insert(outcome)) and not connection.in_atomic_block
    with nullcontext() if alone else transaction.atomic():
        # What it had in play is read (and for a harness outcome that writes to it,
        # locked) first, so the answer it will give can be foreseen and stored with the
        # row: then it is written once, and updated only when attribution turns out
        # otherwise (a promotion on the way, a lesson learned from the approach).
        if quiet:
            rows, foreseen = quiet
        else:
            rows = in_play_read(outcome=outcome)
            foreseen = _foresee(outcome=outcome, rows=rows)
        outcome.response = _body(outcome=outcome, result=foreseen, kept=kept)
        result = Attribution(confirmed=[], contradicted=[], lessons_created=[])
        result.prelinked = foreseen.prelinked
        # The row, its project's name if it has none yet and that name's audit row, and
        # the evidence links its in-play lessons will get.
        row_insert_keyed(
            outcome,
            key_into="response",
            also=[
                *label,
                *lesson_evidence_links_cte(links=sorted(result.prelinked), now=result.now),
            ],
        )
        if quiet:  # attribution is what was foreseen, written with the row
            result = foreseen
        else:
            _apply(outcome=outcome, result=result, rows=rows)
        body = _body(outcome=outcome, result=result, kept=kept)
        if body != outcome.response:
            outcome.response = body
            table = connection.ops.quote_name(Outcome._meta.db_table)
            # The ORM's save() costs more; even its update() costs 2.8x this (bench/results/rows.md).
            with connection.cursor() as cursor:
                cursor.execute(
                    f"UPDATE {table} SET response = %s WHERE id = %s",
                    [json.dumps(body), outcome.pk],
                )
    return body, result


def _writes_after_insert(outcome: Outcome) -> bool:
    """Whether recording ``outcome`` writes anything besides its own row (its project's
    name goes in the same statement): weighted evidence and trust samples for what a
    harness outcome with a verdict had in play, lessons learned from a passed
    approach. What ``_apply`` writes, and nothing else; an agent token's outcome only
    marks recency, after its commit."""
    if outcome.passed is None:
        return False
    if outcome.channel == Channel.HARNESS and outcome.in_play:
        return True
    return outcome.passed is True and bool(mechanical_pairs(outcome.approach))


def _apply(*, outcome: Outcome, result: Attribution, rows: InPlay) -> None:
    now = result.now
    if outcome.passed is not None:
        _attribute(outcome=outcome, result=result, now=now, rows=rows)
    stray = result.prelinked - result.linked
    if stray:  # foreseen, then not made: before anything else could link them
        lesson_evidence_unlink(outcome=outcome, lesson_ids=sorted(pk for pk, _ in stray))
    trust_samples_from_outcome(outcome=outcome)  # in-play deltas: harness outcomes only
    if outcome.passed is True:
        for failed_op, ok_op, target in mechanical_pairs(outcome.approach):
            learned = lesson_learn_mechanical(
                outcome=outcome, failed_op=failed_op, ok_op=ok_op, target=target, now=now
            )
            if learned is None:
                continue
            lesson, what = learned
            if what in ("created", "claimed"):
                result.lessons_created.append(lesson.pk)
            elif what == "confirmed":
                result.note(result.confirmed, {"type": "lesson", "id": lesson.pk})
            elif what == "self_report":
                result.self_reported.setdefault(Lesson, set()).add(lesson.pk)


def _body(*, outcome: Outcome, result: Attribution, kept: bool) -> dict:
    """What ``POST /outcomes/`` answers (and a retry answers again)."""
    verified = outcome.channel == Channel.HARNESS
    return {
        "id": outcome.pk,
        "outcome_id": outcome.outcome_id,
        "passed": outcome.passed,
        "confirmed": list(result.confirmed),
        "contradicted": list(result.contradicted),
        "lessons_created": list(result.lessons_created),
        "channel": outcome.channel,
        "evidence": "verified" if verified else "self_report",
        "hint": (
            "Harness-reported: what it confirms or contradicts moves confidence."
            if verified
            else "Reported with an agent token: stored and shown as the model's own word. It "
            "moves no confidence and lessons learned from it stay claimed; post outcomes "
            "with the harness token."
        ),
        "goal_text_stored": kept,
    }


def _may_be_quiet(outcome: Outcome) -> bool:
    """A harness outcome with a verdict whose only in-play rows are lessons and that
    learns nothing from its approach: it may write nothing but its row and its lessons'
    evidence links (``_quiet``)."""
    if outcome.channel != Channel.HARNESS or outcome.passed is None or not outcome.in_play:
        return False
    if any(r["type"] != "lesson" for r in outcome.in_play):
        return False
    return not (outcome.passed is True and mechanical_pairs(outcome.approach))


def _quiet(*, rows: InPlay, foreseen: Attribution) -> bool:
    """Whether attributing the outcome to ``rows`` (read without a lock) writes nothing
    but the evidence links foreseen with its row: every lesson it confirms is active,
    current, already at its ceiling and has no twin to be promoted with, and it
    contradicts none. Then no lesson row is written, so none is locked: outcomes
    confirming a lesson many agents use (the one at its ceiling) do not queue on it.
    The outcome counts as applied when its lessons were read, as if it had committed
    just then: what changes them later applies after it."""
    for lesson in rows.lessons:
        ref = {"type": "lesson", "id": lesson.pk}
        if lesson.superseded_by_id is not None or ref in foreseen.contradicted:
            return False
        if ref in foreseen.confirmed and (
            lesson.state != LessonState.ACTIVE
            or (lesson.pk, LessonEvidence.Relation.SUPPORTS) not in foreseen.prelinked
            or evidence_moves(kind=EvidenceKind.TEST_PASSED, target=lesson)
        ):
            return False
    return True


def _knowledge_ref(item: Knowledge) -> dict:
    return {"type": "error" if item.category == Category.ERROR else "knowledge", "id": item.pk}


def _foreseen(*, outcome: Outcome, rows: InPlay) -> Attribution:
    """What ``_attribute`` will most likely answer, from the rows alone: a harness
    outcome confirms or contradicts what it had in play as ``lesson_effect`` and
    ``knowledge_effect`` say. A lesson superseded since it was put in play is left
    to its head (read by ``_attribute``); the stored answer is corrected if need be."""
    result = Attribution(confirmed=[], contradicted=[], lessons_created=[])
    if outcome.channel != Channel.HARNESS:
        return result
    last = operations_last_result(outcome.approach)
    seen: set[int] = set()
    for lesson in rows.lessons:
        if lesson.superseded_by_id is not None:
            continue
        if lesson.pk in seen or lesson.state == LessonState.RETIRED:
            continue
        seen.add(lesson.pk)
        effect = lesson_effect(lesson=lesson, outcome=outcome, last=last)
        if effect is not None:
            result.note_effect(
                {"type": "lesson", "id": lesson.pk}, contradicts=effect == "contradicts"
            )
    for item in rows.items:
        kind = knowledge_effect(item=item, passed=outcome.passed, last=last)
        if kind is not None:
            result.note_effect(_knowledge_ref(item), contradicts=kind == EvidenceKind.CONTRADICTION)
    return result


def _foresee(*, outcome: Outcome, rows: InPlay) -> Attribution:
    """``_foreseen``, with the evidence links it makes for certain as ``prelinked``."""
    foreseen = _foreseen(outcome=outcome, rows=rows)
    foreseen.prelinked = _foreseen_links(foreseen=foreseen, rows=rows)
    return foreseen


def _foreseen_links(*, foreseen: Attribution, rows: InPlay) -> set[tuple[int, str]]:
    """The evidence link a foreseen attribution makes, when it is certain: one lesson
    in play, and confirming it cannot promote it (no twin in another project). With
    several lessons a confirmation can promote one into another, whose link then
    comes from the promotion; those are attached one by one, as they are made."""
    if len(rows.lessons) != 1:
        return set()
    lesson = rows.lessons[0]
    if {"type": "lesson", "id": lesson.pk} in foreseen.confirmed and not lesson.twins:
        return {(lesson.pk, LessonEvidence.Relation.SUPPORTS)}
    if {"type": "lesson", "id": lesson.pk} in foreseen.contradicted:
        return {(lesson.pk, LessonEvidence.Relation.CONTRADICTS)}
    return set()


def _attribute(*, outcome: Outcome, result: Attribution, now, rows: InPlay) -> None:
    """Scoped attribution of a harness outcome: only what was in play, only on its own
    operation (``lesson_effect``, ``knowledge_effect``).

    ``rows`` were read and locked by ``in_play_read`` in this transaction. A lesson
    read that way is current only until weighted evidence lands on another one (a
    promotion, demotion, activation or retirement can change it): from then on each
    lesson is re-read as before. An agent token's outcome has no rows here: its
    ``InPlayReport`` marks recency after the commit.
    """
    last = operations_last_result(outcome.approach)
    seen: set[int] = set()
    fresh = True  # the rows read are still current
    for lesson in rows.lessons:
        head = lesson_head(lesson=lesson)
        fast = fresh and head is lesson
        if head is not lesson and head.state == LessonState.CLAIMED:
            # Rewritten since it was served (an agent's edit starts claimed): the outcome
            # tried the words it had in play, not these.
            continue
        lesson = head
        if lesson.pk in seen or lesson.state == LessonState.RETIRED:
            continue
        seen.add(lesson.pk)
        effect = lesson_effect(lesson=lesson, outcome=outcome, last=last)
        if effect == "confirms":
            link = (lesson.pk, LessonEvidence.Relation.SUPPORTS)
            holder = lesson_confirm_by_outcome(
                lesson=lesson,
                outcome=outcome,
                now=now,
                locked=fast,
                twins=lesson.twins if fast else None,
                attached=link in result.prelinked,
                in_play=True,
            )
            if holder is not None:
                result.linked.add(link)
                result.note(result.confirmed, {"type": "lesson", "id": lesson.pk})
                fresh = False
        elif effect == "contradicts":
            link = (lesson.pk, LessonEvidence.Relation.CONTRADICTS)
            if lesson_contradict_by_outcome(
                lesson=lesson,
                outcome=outcome,
                now=now,
                locked=fast,
                attached=link in result.prelinked,
            ):
                result.linked.add(link)
                result.note(result.contradicted, {"type": "lesson", "id": lesson.pk})
                fresh = False
    for item in rows.items:
        kind = knowledge_effect(item=item, passed=outcome.passed, last=last)
        if kind is None:
            continue
        evidence_apply(
            target=item,
            kind=kind,
            evidence_id=f"outcome:{outcome.pk}",
            channel=outcome.channel,
            now=now,
            locked=True,  # evidence on one item never changes another
        )
        result.note_effect(_knowledge_ref(item), contradicts=kind == EvidenceKind.CONTRADICTION)
