"""Situations (SPEC section 5): per-turn recovery state, its events, and the
situation lessons a machine remembers.

No row stores tool output: a turn keeps kinds, subjects, counts and the
declared fields (``unblock``, ``probe``) that came from tool code through a
harness token. Machines are digests only.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from memory.models.identity import Agent, Channel, Workspace

__all__ = [
    "LessonEndReason",
    "SituationEvent",
    "SituationEventKind",
    "SituationLesson",
    "SituationLessonState",
    "TurnAction",
    "TurnRecovery",
]


class TurnAction(models.TextChoices):
    CONTINUE = "continue"
    ESCALATE = "escalate"
    REFUSE = "refuse"


class TurnRecovery(models.Model):
    """One harness turn's recovery state: open blockers and their workaround counts.

    ``blockers`` maps a subject to its state (kind, source, count, budget, step and
    time of detection, declared unblock/probe). Posts for one turn serialize on
    this row (``select_for_update``).
    """

    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="turn_recoveries"
    )
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="turn_recoveries")
    turn_id = models.CharField(max_length=200)
    session_id = models.CharField(max_length=200, blank=True, default="")
    machine_digest = models.CharField(max_length=128, blank=True, default="")
    channel = models.CharField(max_length=8, choices=Channel.choices, default=Channel.AGENT)
    steps = models.PositiveIntegerField(default=0)
    blockers = models.JSONField(default=dict, blank=True)
    # Totals for the UI and the evaluation: calls after a blocker that were not
    # probes or successes, and calls refused before dispatch.
    workaround_calls = models.PositiveIntegerField(default=0)
    refused_calls = models.PositiveIntegerField(default=0)
    escalated = models.BooleanField(default=False)
    escalation = models.JSONField(null=True, blank=True)
    steps_to_escalate = models.PositiveIntegerField(null=True, blank=True)
    seconds_to_escalate = models.FloatField(null=True, blank=True)
    adversarial_results = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["workspace", "escalated", "-created_at"]),
            models.Index(fields=["workspace", "session_id"]),
        ]
        constraints = [
            models.UniqueConstraint(fields=["agent", "turn_id"], name="turn_recovery_unique"),
        ]

    def __str__(self) -> str:
        return f"turn {self.turn_id} ({'escalated' if self.escalated else 'open'})"


class SituationLessonState(models.TextChoices):
    ACTIVE = "active"
    SUPERSEDED = "superseded"  # a probe came back clean, a call succeeded, or re-detected
    REMOVED = "removed"  # a reviewer removed it


class LessonEndReason(models.TextChoices):
    PROBE_CLEAR = "probe_clear"
    SUCCESS = "success"
    REDETECTED = "redetected"
    REMOVED = "removed"


class SituationLesson(models.Model):
    """A remembered blocker: "the last time we called S here, it needed the user".

    Written only by the server, from a declared blocker reported through a harness
    token, after an escalation or a user answer. Kept when it ends (superseded or
    removed), never deleted except by erasure.
    """

    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="situation_lessons"
    )
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="situation_lessons")
    turn = models.ForeignKey(
        TurnRecovery,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="lessons",
    )
    machine_digest = models.CharField(max_length=128)
    context = models.CharField(max_length=200)  # "machine:<fingerprint>"
    tool = models.CharField(max_length=200)
    subject = models.CharField(max_length=200)
    kind = models.CharField(max_length=32)
    env = models.CharField(max_length=200, blank=True, default="")
    signature = models.CharField(max_length=64)  # sha256 of tool, subject, kind, env
    content = models.CharField(max_length=1000)
    detail = models.CharField(max_length=500, blank=True, default="")
    unblock = models.CharField(max_length=500, blank=True, default="")
    probe = models.JSONField(null=True, blank=True)
    interactive = models.BooleanField(default=False)
    confidence = models.FloatField(default=0.9)
    detected_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    state = models.CharField(
        max_length=16,
        choices=SituationLessonState.choices,
        default=SituationLessonState.ACTIVE,
    )
    ended_at = models.DateTimeField(null=True, blank=True)
    end_reason = models.CharField(
        max_length=16, choices=LessonEndReason.choices, blank=True, default=""
    )
    superseded_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="supersedes"
    )
    applied_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-detected_at", "-id"]
        indexes = [
            models.Index(fields=["workspace", "machine_digest", "state"]),
        ]
        constraints = [
            # One live lesson per machine, subject and kind: a re-detection supersedes.
            models.UniqueConstraint(
                fields=["workspace", "machine_digest", "subject", "kind"],
                condition=Q(state="active"),
                name="situation_lesson_one_active",
            ),
            models.CheckConstraint(
                condition=Q(state__in=SituationLessonState.values),
                name="situation_lesson_state_valid",
            ),
            models.CheckConstraint(
                condition=~Q(kind__in=["offline", "quota", "locked"]),
                name="situation_lesson_never_transient",
            ),
            models.CheckConstraint(
                condition=~Q(machine_digest=""), name="situation_lesson_has_machine"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.subject} {self.kind} on {self.machine_digest[:12]} ({self.state})"


class SituationEventKind(models.TextChoices):
    DETECTED = "detected"
    WORKAROUND = "workaround"
    INTERACTIVE_REFUSED = "interactive_refused"
    ESCALATED = "escalated"
    CLOSED = "closed"
    LESSON_STORED = "lesson_stored"
    LESSON_APPLIED = "lesson_applied"
    LESSON_INVALIDATED = "lesson_invalidated"


class SituationEvent(models.Model):
    """One decision, with the steps and seconds since its blocker was detected."""

    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="situation_events"
    )
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="situation_events")
    turn = models.ForeignKey(
        TurnRecovery, null=True, blank=True, on_delete=models.CASCADE, related_name="events"
    )
    lesson = models.ForeignKey(
        SituationLesson, null=True, blank=True, on_delete=models.SET_NULL, related_name="events"
    )
    session_id = models.CharField(max_length=200, blank=True, default="")
    event = models.CharField(max_length=24, choices=SituationEventKind.choices)
    kind = models.CharField(max_length=32, blank=True, default="")
    subject = models.CharField(max_length=200, blank=True, default="")
    source = models.CharField(max_length=16, blank=True, default="")
    tool = models.CharField(max_length=200, blank=True, default="")
    step = models.PositiveIntegerField(default=0)
    steps_since_detect = models.PositiveIntegerField(null=True, blank=True)
    seconds_since_detect = models.FloatField(null=True, blank=True)
    details = models.JSONField(default=dict, blank=True)
    channel = models.CharField(max_length=8, choices=Channel.choices, default=Channel.AGENT)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["workspace", "event", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.event} {self.subject} ({self.kind})"
