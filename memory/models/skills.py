"""Skills and learned deltas (SPEC section 6).

An authored skill is an immutable ``SKILL.md`` per version. Agents propose
typed, section-anchored deltas on it; a delta is inert until a person approves
it. Tier-0 learnings are rows in ``LearnedFact`` that tools read directly.
Nothing here is ever deleted by learning operations: rows are archived or
superseded (erasure, a separate admin operation, is the one exception).
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from pgvector.django import HnswIndex, VectorField

from memory.models.identity import Agent, Channel, Workspace
from memory.models.knowledge import EMBEDDING_DIMENSIONS

__all__ = [
    "AgentTool",
    "DeltaKind",
    "DeltaStatus",
    "DeltaTrust",
    "FeedbackSample",
    "LearnedFact",
    "OrphanNotice",
    "ProvenanceSource",
    "Skill",
    "SkillDelta",
    "SkillVersion",
]


class Skill(models.Model):
    """A named authored skill in a workspace; its text lives in ``SkillVersion`` rows."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="skills")
    name = models.CharField(max_length=64)
    # The most recently registered version: what effective skills are built from.
    current_version = models.ForeignKey(
        "SkillVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["workspace_id", "name"]
        constraints = [
            models.UniqueConstraint(fields=["workspace", "name"], name="skill_unique_name"),
        ]

    def __str__(self) -> str:
        return self.name


class SkillVersion(models.Model):
    """One immutable registered version of a ``SKILL.md``."""

    skill = models.ForeignKey(Skill, on_delete=models.CASCADE, related_name="versions")
    version = models.CharField(max_length=64)
    description = models.TextField(blank=True)
    permissions = models.JSONField(default=list, blank=True)
    tools = models.JSONField(default=list, blank=True)
    skill_md = models.TextField()
    body = models.TextField(blank=True)
    # sha256 of the document as posted (line endings normalised): version identity.
    digest = models.CharField(max_length=64)
    # sha256 of the whitespace-normalised body: what decides whether deltas orphan.
    body_digest = models.CharField(max_length=64)
    # [{"slug", "title", "digest"}] in document order.
    sections = models.JSONField(default=list, blank=True)
    registered_by = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["skill_id", "created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["skill", "version"], name="skillversion_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.skill.name}@{self.version}"

    def section(self, slug: str) -> dict | None:
        return next((s for s in self.sections if s["slug"] == slug), None)


class AgentTool(models.Model):
    """One entry of an agent's declared live tool registry (SPEC section 2)."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="tools")
    name = models.CharField(max_length=128)
    mutating = models.BooleanField(default=False)
    needs_confirmation = models.BooleanField(default=False)
    reads_facts = models.JSONField(default=list, blank=True)  # fact namespaces
    declared_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["agent_id", "name"]
        constraints = [
            models.UniqueConstraint(fields=["agent", "name"], name="agenttool_unique_name"),
        ]

    def __str__(self) -> str:
        return f"{self.agent.name}:{self.name}"

    @property
    def is_write_path(self) -> bool:
        return self.mutating or self.needs_confirmation


class DeltaKind(models.TextChoices):
    TOOL_HINT = "tool-hint"
    PREFERENCE = "preference"
    EXAMPLE = "example"


class DeltaStatus(models.TextChoices):
    STAGED = "staged"
    ACTIVE = "active"
    QUARANTINED = "quarantined"
    ORPHANED = "orphaned"
    ARCHIVED = "archived"


class DeltaTrust(models.TextChoices):
    TRUSTED = "trusted"
    UNTRUSTED = "untrusted"


class ProvenanceSource(models.TextChoices):
    USER_INSTRUCTION = "user_instruction"
    OUTCOME_EVIDENCE = "outcome_evidence"
    OBSERVED_CONTENT = "observed_content"
    MISSING = "missing"
    UNREADABLE = "unreadable"
    # An umbrella proposed by the consolidation job from already-approved deltas.
    CONSOLIDATION = "consolidation"


class SkillDelta(models.Model):
    """A learned, typed, section-anchored adjustment to an authored skill."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="skill_deltas")
    skill = models.ForeignKey(Skill, on_delete=models.CASCADE, related_name="deltas")
    kind = models.CharField(max_length=16, choices=DeltaKind.choices)
    tier = models.PositiveSmallIntegerField()
    # Anchor: section slug + that section's digest + the base version, at write time
    # (or at the last re-approval onto a newer base).
    anchor_section = models.CharField(max_length=200)
    anchor_digest = models.CharField(max_length=64)
    anchor_version = models.ForeignKey(SkillVersion, on_delete=models.CASCADE, related_name="+")
    payload = models.JSONField(default=dict)
    provenance = models.JSONField(default=dict, blank=True)
    provenance_source = models.CharField(max_length=32, choices=ProvenanceSource.choices)
    # Which channel reported it: the agent (the model's word), the harness, a person or the system.
    channel = models.CharField(max_length=8, choices=Channel.choices, default=Channel.AGENT)
    # Why the agent proposed it, in its own words (optional, shown to reviewers first).
    rationale = models.CharField(max_length=400, blank=True, default="")
    trust = models.CharField(max_length=16, choices=DeltaTrust.choices)
    scope = models.CharField(max_length=200)
    status = models.CharField(max_length=16, choices=DeltaStatus.choices)
    # Injection-scan findings: [{"rule", "excerpt"}]. Shown to reviewers.
    findings = models.JSONField(default=list, blank=True)
    stale = models.BooleanField(default=False)
    # Beyond the resident budget: rendered only when the session goal matches.
    retrieval_only = models.BooleanField(default=False)
    demoted_at = models.DateTimeField(null=True, blank=True)
    tokens = models.PositiveIntegerField(default=0)
    trigger_text = models.CharField(max_length=400, blank=True)
    trigger_embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS, null=True, blank=True)
    payload_embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS, null=True, blank=True)
    embedding_model = models.CharField(max_length=100, blank=True)
    success_count = models.PositiveIntegerField(default=0)
    attempt_count = models.PositiveIntegerField(default=0)
    use_count = models.PositiveIntegerField(default=0)
    last_used_at = models.DateTimeField(null=True, blank=True)
    # How many times the agent proposed this very delta while it waited for review: an
    # identical pending proposal is counted here instead of staged again.
    proposals = models.PositiveIntegerField(default=1)
    # Umbrella proposals link to the near-identical deltas they would replace.
    members = models.ManyToManyField(
        "self", symmetrical=False, blank=True, related_name="umbrellas"
    )
    superseded_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="supersedes"
    )
    # Trust-ledger snapshot when an outcome_evidence delta was approved.
    approval_samples = models.PositiveIntegerField(null=True, blank=True)
    approval_positive = models.PositiveIntegerField(null=True, blank=True)
    approved_at = models.DateTimeField(null=True, blank=True)
    approved_by = models.CharField(max_length=200, blank=True)
    # What the person who decided it was shown, to rebuild that diff later (ids,
    # version and tool names only, never text: see memory.skills.decisions).
    decision_seen = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [
            models.Index(
                fields=["workspace", "skill", "agent", "status"], name="skilldelta_lookup_idx"
            ),
            models.Index(fields=["workspace", "status"], name="skilldelta_status_idx"),
            HnswIndex(
                name="skilldelta_trigger_hnsw",
                fields=["trigger_embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
            HnswIndex(
                name="skilldelta_payload_hnsw",
                fields=["payload_embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(kind__in=DeltaKind.values), name="skilldelta_kind_valid"
            ),
            models.CheckConstraint(
                condition=Q(status__in=DeltaStatus.values), name="skilldelta_status_valid"
            ),
            models.CheckConstraint(
                condition=Q(trust__in=DeltaTrust.values), name="skilldelta_trust_valid"
            ),
            models.CheckConstraint(
                condition=(
                    Q(kind="tool-hint", tier=1) | Q(kind__in=["preference", "example"], tier=3)
                ),
                name="skilldelta_tier_matches_kind",
            ),
            # Untrusted provenance never reaches active except by a person's confirmation,
            # which stamps approved_by; a system auto-approval cannot produce this row.
            models.CheckConstraint(
                condition=~Q(status="active", trust="untrusted")
                | ~Q(approved_by__startswith="system:"),
                name="skilldelta_untrusted_not_auto",
            ),
            # An active outcome_evidence delta carries the evidence it was approved on.
            models.CheckConstraint(
                condition=~Q(status="active", provenance_source="outcome_evidence")
                | Q(approval_samples__isnull=False, approval_positive__isnull=False),
                name="skilldelta_evidence_recorded",
            ),
        ]

    def __str__(self) -> str:
        return f"delta {self.pk} {self.kind} on {self.skill.name}#{self.anchor_section}"


class OrphanNotice(models.Model):
    """A base update orphaned deltas: counted once per (skill, version) for the UI."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    skill = models.ForeignKey(Skill, on_delete=models.CASCADE, related_name="orphan_notices")
    version = models.ForeignKey(SkillVersion, on_delete=models.CASCADE, related_name="+")
    count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    seen_at = models.DateTimeField(null=True, blank=True)
    seen_by = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["skill", "version"], name="orphannotice_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.count} orphaned by {self.skill.name} {self.version.version}"


class FeedbackSample(models.Model):
    """One trust-ledger sample: a user-observable outcome on a scope."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    action_type = models.CharField(max_length=100)
    scope = models.CharField(max_length=200)
    positive = models.BooleanField()
    delta_ids = models.JSONField(default=list, blank=True)
    # The harness's own id for the sample (unique per agent, so a retry adds nothing),
    # or "outcome:<id>" for a sample scored from an outcome's in-play deltas.
    sample_id = models.CharField(max_length=200, blank=True, default="")
    outcome = models.ForeignKey(
        "memory.Outcome", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    channel = models.CharField(max_length=8, choices=Channel.choices, default=Channel.HARNESS)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["workspace", "scope"], name="feedback_scope_idx")]
        constraints = [
            models.UniqueConstraint(
                fields=["agent", "sample_id"],
                condition=~Q(sample_id=""),
                name="feedback_sample_unique_per_agent",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.scope} {'+' if self.positive else '-'}"


class LearnedFact(models.Model):
    """A tier-0 learning: data a tool reads directly; never enters a prompt.

    An edit inserts a new row and points the old one at it (supersede, never delete).
    """

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    namespace = models.CharField(max_length=64)
    key = models.CharField(max_length=200)
    value = models.JSONField()
    scope = models.CharField(max_length=200, default="global")
    provenance = models.JSONField(default=dict, blank=True)
    provenance_source = models.CharField(max_length=32, choices=ProvenanceSource.choices)
    # Which channel reported it: the agent (the model's word), the harness, a person or the system.
    channel = models.CharField(max_length=8, choices=Channel.choices, default=Channel.AGENT)
    superseded_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="supersedes"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["namespace", "key", "-created_at"]
        indexes = [models.Index(fields=["workspace", "namespace"], name="learnedfact_ns_idx")]
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "namespace", "key"],
                condition=Q(superseded_by__isnull=True),
                name="learnedfact_one_current",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.key}"
