"""Outcomes, evidence and lessons (SPEC section 4).

Projects and machines are digests only: no path or remote URL is stored. A goal is
a digest too, unless the workspace opted in to keep the goal text a harness sends.
Every change of a lesson's or knowledge item's confidence writes one
``ConfidenceChange`` row (the evidence ledger); ``memory.lessons.evidence.
confidence_apply`` is the only code that does either.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from memory.models.identity import Agent, Channel, Workspace

__all__ = [
    "CheckKind",
    "ConfidenceCause",
    "ConfidenceChange",
    "Evidence",
    "EvidenceKind",
    "Lesson",
    "LessonEvidence",
    "LessonScope",
    "LessonSource",
    "LessonState",
    "Outcome",
    "RetiredBy",
    "StepOutcome",
    "SupersedeReason",
    "TargetType",
]


class StepOutcome(models.TextChoices):
    OK = "ok"
    FAILED = "failed"
    REFUSED = "refused"


class CheckKind(models.TextChoices):
    TEST = "test"
    LINT = "lint"
    BUILD = "build"


class Outcome(models.Model):
    """One agent turn, as the harness saw it. Evidence, never recalled into a prompt.

    ``passed`` is computed by the server from ``checks`` and ``approach``;
    ``reported_passed`` is what the client claimed, kept for review only.
    ``response`` is the body the first POST answered, replayed on retries.
    """

    # No index of their own: the composite indexes below (and the unique
    # (agent, outcome_id)) lead with each, and every index costs every outcome's insert.
    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="outcomes", db_index=False
    )
    agent = models.ForeignKey(
        Agent, on_delete=models.CASCADE, related_name="outcomes", db_index=False
    )
    outcome_id = models.CharField(max_length=200)
    session_id = models.CharField(max_length=200)
    turn_index = models.PositiveIntegerField(default=0)
    project_digest = models.CharField(max_length=64)
    machine_digest = models.CharField(max_length=128, blank=True, default="")
    context = models.CharField(max_length=200, default="global")
    goal_digest = models.CharField(max_length=64, blank=True, default="")
    # The goal in words, only when the harness sent ``goal_text`` and the workspace opted
    # in (setting ``store_goal_text``); otherwise only the digest above is kept.
    goal_text = models.TextField(blank=True, default="")
    approach = models.JSONField(default=list, blank=True)
    checks = models.JSONField(default=list, blank=True)
    claim_ok = models.BooleanField(default=True)
    steps = models.PositiveIntegerField(null=True, blank=True)
    tokens = models.PositiveIntegerField(null=True, blank=True)
    wall_s = models.FloatField(null=True, blank=True)
    in_play = models.JSONField(default=list, blank=True)
    passed = models.BooleanField(null=True)
    reported_passed = models.BooleanField(null=True)
    response = models.JSONField(default=dict, blank=True)
    # agent: the model's word (evidence from it is self_report); harness: what really ran.
    channel = models.CharField(max_length=8, choices=Channel.choices, default=Channel.AGENT)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["workspace", "project_digest", "-created_at"]),
            models.Index(fields=["workspace", "session_id", "turn_index"]),
        ]
        constraints = [
            # Idempotency: the same outcome posted again is the same row. Per channel, so
            # an agent token posting first under the id its harness will use cannot make
            # the harness's report a replay of the model's.
            models.UniqueConstraint(
                fields=["agent", "channel", "outcome_id"], name="outcome_unique_per_channel"
            ),
            models.CheckConstraint(condition=~Q(project_digest=""), name="outcome_has_project"),
        ]

    def __str__(self) -> str:
        return f"outcome {self.outcome_id} (passed={self.passed})"


class LessonScope(models.TextChoices):
    PROJECT = "project"
    GLOBAL = "global"


class LessonState(models.TextChoices):
    CLAIMED = "claimed"  # no evidence yet: never served
    ACTIVE = "active"
    RETIRED = "retired"


class LessonSource(models.TextChoices):
    LOOP = "loop"  # mechanical, from a failed-then-ok pair in a passed outcome
    EXTRACTOR = "extractor"
    MODEL = "model"
    USER = "user"


class RetiredBy(models.TextChoices):
    """Who retired a lesson (the spec's ``superseded_by = retired:<who>``)."""

    AGENT = "agent"
    PERSON = "person"
    SYSTEM = "system"  # decay, the cap, or contradictions below the floor


class SupersedeReason(models.TextChoices):
    EDITED = "edited"
    PROMOTED = "promoted"  # a project lesson folded into a global one
    DEMOTED = "demoted"  # a global lesson moved back to one project
    REVERSED = "reversed"  # a passed outcome showed the opposite preference
    DUPLICATE = "duplicate"  # an equivalent live lesson already existed
    MERGED = "merged"  # a near-identical lesson on the same operation and scope absorbed it


class Lesson(models.Model):
    """One imperative sentence about one operation, earned from outcomes.

    A row is *current* while ``superseded_by`` is null; edits, promotion and
    demotion insert a new row and point the old one at it (never a delete).
    """

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="lessons")
    agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="lessons"
    )
    text = models.CharField(max_length=500)
    # Whitespace, case and punctuation removed: "equivalent text" for dedup and promotion.
    normalized_text = models.CharField(max_length=500)
    operation_key = models.CharField(max_length=200)
    # Why the agent proposed it, in its own words (optional, shown to reviewers first).
    rationale = models.CharField(max_length=400, blank=True, default="")
    # Mechanical lessons: "Prefer B over A for T" has operation B, avoids A, target T.
    avoid_operation_key = models.CharField(max_length=200, blank=True, default="")
    target = models.CharField(max_length=300, blank=True, default="")
    scope = models.CharField(max_length=8, choices=LessonScope.choices)
    project_digest = models.CharField(max_length=64, blank=True, default="")
    confidence = models.FloatField()
    # Confidence the row was born with (0.5, 0.3 claimed, or inherited on edit/promotion):
    # birth_confidence + the ledger's sum of (after - before) == confidence.
    birth_confidence = models.FloatField()
    state = models.CharField(max_length=8, choices=LessonState.choices)
    source = models.CharField(max_length=10, choices=LessonSource.choices)
    # Which channel reported it: the agent (the model's word), the harness, a person or the system.
    channel = models.CharField(max_length=8, choices=Channel.choices, default=Channel.AGENT)
    pinned = models.BooleanField(default=False)
    sealed = models.BooleanField(default=False)
    use_count = models.PositiveIntegerField(default=0)
    last_used_at = models.DateTimeField(null=True, blank=True)
    superseded_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="supersedes"
    )
    supersede_reason = models.CharField(
        max_length=10, choices=SupersedeReason.choices, blank=True, default=""
    )
    retired_by = models.CharField(max_length=8, choices=RetiredBy.choices, blank=True, default="")
    retired_reason = models.CharField(max_length=300, blank=True, default="")
    retired_at = models.DateTimeField(null=True, blank=True)
    # Set by the lesson merge: {"count": evidence rows, "latest": up to 10 outcome ids,
    # "merged_from": lesson ids}; bounded however many lessons it absorbed.
    merged_evidence = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(
                fields=["workspace", "scope", "project_digest", "state"],
                name="lesson_current_scope_idx",
                condition=Q(superseded_by__isnull=True),
            ),
            models.Index(fields=["workspace", "operation_key"], name="lesson_op_idx"),
            models.Index(
                fields=["workspace", "operation_key", "normalized_text"], name="lesson_equiv_idx"
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(confidence__gte=0.0) & Q(confidence__lte=1.0),
                name="lesson_confidence_range",
            ),
            models.CheckConstraint(
                condition=Q(scope__in=LessonScope.values), name="lesson_scope_valid"
            ),
            models.CheckConstraint(
                condition=Q(state__in=LessonState.values), name="lesson_state_valid"
            ),
            models.CheckConstraint(
                condition=Q(source__in=LessonSource.values), name="lesson_source_valid"
            ),
            # A project lesson names its project; a global one names none.
            models.CheckConstraint(
                condition=(Q(scope=LessonScope.PROJECT) & ~Q(project_digest=""))
                | (Q(scope=LessonScope.GLOBAL) & Q(project_digest="")),
                name="lesson_scope_matches_project",
            ),
            # Retired exactly when someone is named as having retired it.
            models.CheckConstraint(
                condition=(Q(state=LessonState.RETIRED) & ~Q(retired_by=""))
                | (~Q(state=LessonState.RETIRED) & Q(retired_by="")),
                name="lesson_retired_has_who",
            ),
            models.CheckConstraint(
                condition=Q(superseded_by__isnull=True) | ~Q(supersede_reason=""),
                name="lesson_superseded_has_reason",
            ),
            # One live lesson per (scope, project, operation, text): a concurrent
            # duplicate confirms the existing row instead of adding a twin.
            models.UniqueConstraint(
                fields=["workspace", "scope", "project_digest", "operation_key", "normalized_text"],
                condition=Q(superseded_by__isnull=True) & ~Q(state=LessonState.RETIRED),
                name="lesson_live_unique",
            ),
            models.CheckConstraint(condition=Q(text__regex=r"\S"), name="lesson_text_not_blank"),
            models.CheckConstraint(
                condition=Q(operation_key__regex=r"\S"), name="lesson_operation_not_blank"
            ),
        ]

    def __str__(self) -> str:
        return f"lesson {self.pk}: {self.text[:60]}"

    @property
    def is_current(self) -> bool:
        return self.superseded_by_id is None


class LessonEvidence(models.Model):
    """An outcome that supports (or contradicted) one lesson row."""

    class Relation(models.TextChoices):
        SUPPORTS = "supports"
        CONTRADICTS = "contradicts"
        # Cited by an agent when it posted the lesson: kept and shown, weighed only once
        # the lesson has been in play for a harness outcome that confirmed it.
        CITED = "cited"

    lesson = models.ForeignKey(Lesson, on_delete=models.CASCADE, related_name="evidence")
    outcome = models.ForeignKey(Outcome, on_delete=models.CASCADE, related_name="lesson_evidence")
    relation = models.CharField(max_length=12, choices=Relation.choices, default=Relation.SUPPORTS)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["lesson", "outcome"], name="lesson_evidence_unique"),
            models.CheckConstraint(
                condition=Q(relation__in=["supports", "contradicts", "cited"]),
                name="lesson_evidence_relation_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"outcome {self.outcome_id} {self.relation} lesson {self.lesson_id}"


class EvidenceKind(models.TextChoices):
    SELF_REPORT = "self_report"
    TEST_PASSED = "test_passed"  # derived from a passed outcome, never posted
    DIFF_ACCEPTED = "diff_accepted"
    USER_CONFIRMED = "user_confirmed"
    CONTRADICTION = "contradiction"  # derived from a failed outcome, never posted


class TargetType(models.TextChoices):
    LESSON = "lesson"
    KNOWLEDGE = "knowledge"


class Evidence(models.Model):
    """A posted piece of evidence (``POST /evidence/``), idempotent on its id."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="evidence")
    agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="evidence"
    )
    evidence_id = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=EvidenceKind.choices)
    target_type = models.CharField(max_length=10, choices=TargetType.choices)
    target_id = models.BigIntegerField()
    response = models.JSONField(default=dict, blank=True)
    channel = models.CharField(max_length=8, choices=Channel.choices, default=Channel.AGENT)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["workspace", "target_type", "target_id"])]
        constraints = [
            # Per channel: an agent's post under an id cannot stand in for the harness's.
            models.UniqueConstraint(
                fields=["workspace", "channel", "evidence_id"], name="evidence_unique_per_channel"
            ),
            models.CheckConstraint(
                condition=Q(kind__in=EvidenceKind.values), name="evidence_kind_valid"
            ),
            models.CheckConstraint(
                condition=Q(target_type__in=TargetType.values), name="evidence_target_type_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.evidence_id} on {self.target_type}:{self.target_id}"


class ConfidenceCause(models.TextChoices):
    EVIDENCE = "evidence"
    DECAY = "decay"
    RECONCILE = "reconcile"
    PERSON = "person"


class ConfidenceChange(models.Model):
    """The evidence ledger: one row per change of confidence, with its cause."""

    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="confidence_changes"
    )
    target_type = models.CharField(max_length=10, choices=TargetType.choices)
    target_id = models.BigIntegerField()
    before = models.FloatField()
    after = models.FloatField()
    kind = models.CharField(max_length=16, blank=True, default="")
    evidence_id = models.CharField(max_length=200, blank=True, default="")
    cause = models.CharField(max_length=10, choices=ConfidenceCause.choices)
    # Who reported the evidence behind the change (harness, person) or the system (decay).
    channel = models.CharField(max_length=8, choices=Channel.choices, default=Channel.SYSTEM)
    at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["at", "id"]
        indexes = [
            models.Index(fields=["target_type", "target_id", "at"], name="ledger_target_idx"),
            models.Index(fields=["workspace", "-at"], name="ledger_workspace_idx"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(cause__in=ConfidenceCause.values), name="ledger_cause_valid"
            ),
            models.CheckConstraint(
                condition=Q(target_type__in=TargetType.values), name="ledger_target_type_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.target_type}:{self.target_id} {self.before:.3f}->{self.after:.3f} ({self.cause})"
