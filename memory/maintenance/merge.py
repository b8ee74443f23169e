"""Merge lessons: near-identical live lessons on one operation and scope become one.

Groups are one workspace, operation, scope, project and *channel*: a lesson with
harness-verified evidence (an outcome that supports it) never merges with one
that only an agent claimed, so a claimed lesson never absorbs a verified one's
weight; never across projects. In a group, lessons the built-in judge finds
near-identical merge into the strongest (confidence, then evidence, then the
oldest). The others are superseded (reason ``merged``); their outcome links are
copied like an edit's; the keeper records a bounded evidence list
(``merged_evidence``: the count plus the latest ids). No confidence changes.
Lessons a person wrote, sealed or pinned are never merged automatically.

The same pass finds lessons that contradict each other (in one project, one
prefers A over B and the other B over A, for the same target) where neither has
verified evidence to decide it, and opens a contradiction review item. (When one
side is verified, the outcome engine already reversed the other.)
"""

from __future__ import annotations

from collections import defaultdict

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef

from memory.core.audit import audit_record
from memory.maintenance.judge import HeuristicJudge
from memory.models import (
    Lesson,
    LessonEvidence,
    LessonSource,
    LessonState,
    PairAction,
    PairDecision,
    PairVerdict,
    ReviewTargetType,
    SupersedeReason,
    Workspace,
)
from memory.review.services import review_item_open

ACTOR = "system:merge"


def _live(workspace: Workspace):
    verified = LessonEvidence.objects.filter(
        lesson=OuterRef("pk"), relation=LessonEvidence.Relation.SUPPORTS
    )
    return (
        Lesson.objects.filter(workspace=workspace, superseded_by__isnull=True)
        .exclude(state=LessonState.RETIRED)
        .annotate(verified=Exists(verified))
    )


def _protected(lesson: Lesson) -> bool:
    return lesson.sealed or lesson.pinned or lesson.source == LessonSource.USER


def _strength(lesson: Lesson, evidence: dict[int, int]):
    return (lesson.confidence, evidence.get(lesson.pk, 0), -lesson.created_at.timestamp())


def _clusters(lessons: list[Lesson], evidence: dict[int, int]) -> list[list[Lesson]]:
    judge = HeuristicJudge()
    clusters: list[list[Lesson]] = []
    for lesson in sorted(lessons, key=lambda x: _strength(x, evidence), reverse=True):
        for cluster in clusters:
            if judge.judge(cluster[0].text, lesson.text).verdict == PairVerdict.DUPLICATE:
                cluster.append(lesson)
                break
        else:
            clusters.append([lesson])
    return [c for c in clusters if len(c) > 1]


@transaction.atomic
def _merge(*, keeper: Lesson, others: list[Lesson]) -> int:
    ids = [keeper.pk, *(o.pk for o in others)]
    locked = {
        row.pk: row for row in Lesson.objects.select_for_update().filter(pk__in=ids).order_by("pk")
    }
    keeper = locked[keeper.pk]
    if keeper.superseded_by_id is not None or keeper.state == LessonState.RETIRED:
        return 0
    merged = []
    for other in others:
        row = locked[other.pk]
        if row.superseded_by_id is not None or row.state == LessonState.RETIRED:
            continue
        for link in LessonEvidence.objects.filter(lesson=row):  # as an edit copies them
            LessonEvidence.objects.get_or_create(
                lesson=keeper, outcome_id=link.outcome_id, defaults={"relation": link.relation}
            )
        keeper.use_count += row.use_count
        if row.last_used_at and (not keeper.last_used_at or row.last_used_at > keeper.last_used_at):
            keeper.last_used_at = row.last_used_at
        row.superseded_by = keeper
        row.supersede_reason = SupersedeReason.MERGED
        row.save(update_fields=["superseded_by", "supersede_reason", "updated_at"])
        merged.append(row.pk)
    if not merged:
        return 0
    links = LessonEvidence.objects.filter(lesson=keeper)
    before = keeper.merged_evidence or {}
    keeper.merged_evidence = {
        "count": links.count(),
        "latest": list(
            links.order_by("-created_at", "-id").values_list("outcome_id", flat=True)[
                : settings.CAIRN_LESSON_MERGE_EVIDENCE_IDS
            ]
        ),
        "merged_from": sorted({*before.get("merged_from", []), *merged}),
    }
    keeper.save(update_fields=["use_count", "last_used_at", "merged_evidence", "updated_at"])
    for pk in [keeper.pk, *merged]:
        audit_record(
            workspace=keeper.workspace,
            actor=ACTOR,
            action="lesson.merge",
            target_type="lesson",
            target_id=pk,
            details={"kept": keeper.pk, "merged": merged, "judge": "heuristic"},
        )
    return len(merged)


def _conflicts(lessons: list[Lesson]) -> list[tuple[Lesson, Lesson]]:
    """Project lessons preferring A over B against B over A, same target, neither verified."""
    by_pref = defaultdict(list)
    for lesson in lessons:
        if lesson.avoid_operation_key and not lesson.verified:
            by_pref[
                (
                    lesson.project_digest,
                    lesson.target,
                    lesson.operation_key,
                    lesson.avoid_operation_key,
                )
            ].append(lesson)
    pairs = []
    for (project, target, op, avoid), group in sorted(by_pref.items()):
        if op < avoid:
            for a in group:
                for b in by_pref.get((project, target, avoid, op), []):
                    pairs.append((a, b) if a.pk < b.pk else (b, a))
    return pairs


def lesson_maintain(*, workspace: Workspace) -> dict:
    """Merge near-identical lessons and queue unverified opposite preferences."""
    counts = {"lessons_merged": 0, "lesson_conflicts_queued": 0}
    lessons = list(_live(workspace))
    evidence: dict[int, int] = defaultdict(int)
    for lesson_id in LessonEvidence.objects.filter(lesson__in=[x.pk for x in lessons]).values_list(
        "lesson_id", flat=True
    ):
        evidence[lesson_id] += 1
    groups = defaultdict(list)
    for lesson in lessons:
        if _protected(lesson):
            continue
        key = (lesson.operation_key, lesson.scope, lesson.project_digest, lesson.verified)
        groups[key].append(lesson)
    for _, group in sorted(groups.items(), key=lambda kv: str(kv[0])):
        for cluster in _clusters(group, evidence):
            counts["lessons_merged"] += _merge(keeper=cluster[0], others=cluster[1:])
    decided = set(
        PairDecision.objects.filter(workspace=workspace, target_type="lesson").values_list(
            "a_id", "b_id"
        )
    )
    for a, b in _conflicts([x for x in _live(workspace) if x.scope == "project"]):
        if (a.pk, b.pk) in decided:
            continue
        with transaction.atomic():
            item, _ = review_item_open(
                workspace=workspace,
                a_type=ReviewTargetType.LESSON,
                a_id=a.pk,
                b_type=ReviewTargetType.LESSON,
                b_id=b.pk,
                reason=(
                    "Opposite preferences on the same operation in one project, and no "
                    "harness-verified outcome decides between them."
                ),
                actor=ACTOR,
                details={"verdict": "contradiction", "judge": "preference"},
            )
            PairDecision.objects.create(
                workspace=workspace,
                target_type="lesson",
                a_id=a.pk,
                b_id=b.pk,
                similarity=0.0,
                judge="preference",
                verdict=PairVerdict.CONTRADICTION,
                action=PairAction.REVIEW,
            )
            counts["lesson_conflicts_queued"] += 1
    return counts
