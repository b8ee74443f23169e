"""What the maintenance jobs decided (SPEC section 7).

``PairDecision`` is one judged pair from the reconcile job (or the lesson
merge): which judge, its verdict and what the job did about it. A pair is
judged once (the unique constraint), so a second run changes nothing; a pair
the judge could not answer (an unavailable model) has no row and is judged by
the next run. No content is stored here, only ids and labels.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from memory.models.identity import Workspace

__all__ = ["PairAction", "PairDecision", "PairVerdict"]


class PairVerdict(models.TextChoices):
    DUPLICATE = "duplicate"
    CONTRADICTION = "contradiction"
    NEUTRAL = "neutral"


class PairAction(models.TextChoices):
    MERGED = "merged"  # the weaker side superseded by the stronger, no boost
    SUPERSEDED = "superseded"  # the newer side supersedes the older, older lowered
    REVIEW = "review"  # a contradiction review item for a person
    NONE = "none"


class PairDecision(models.Model):
    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="pair_decisions"
    )
    target_type = models.CharField(max_length=10)  # "knowledge" | "lesson"
    # The pair, lower id first, so (a, b) and (b, a) are one pair.
    a_id = models.BigIntegerField()
    b_id = models.BigIntegerField()
    similarity = models.FloatField()
    judge = models.CharField(max_length=100)
    verdict = models.CharField(max_length=16, choices=PairVerdict.choices)
    action = models.CharField(max_length=16, choices=PairAction.choices)
    kept_id = models.BigIntegerField(null=True, blank=True)  # the side left in use, if any
    job_run_id = models.BigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["workspace", "target_type", "a_id"], name="pair_decision_a"),
            models.Index(fields=["workspace", "target_type", "b_id"], name="pair_decision_b"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "target_type", "a_id", "b_id"], name="pair_decision_once"
            ),
            models.CheckConstraint(condition=Q(a_id__lt=models.F("b_id")), name="pair_ordered"),
            models.CheckConstraint(
                condition=Q(verdict__in=PairVerdict.values), name="pair_verdict_valid"
            ),
            models.CheckConstraint(
                condition=Q(action__in=PairAction.values), name="pair_action_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.target_type}:{self.a_id}~{self.b_id} {self.verdict}/{self.action}"
