"""What a reviewer saw when deciding a delta, kept so its permalink can show it again.

A decision records the skill version and which deltas were in the effective
skill without and with the one decided (ids and tool names, never text, so an
erasure of any of them leaves nothing quoted here), plus the digest of the diff
as rendered. ``decision_rebuild`` composes the same two effective skills from
those rows; the caller renders them and compares digests to know whether the
rebuild is exact.
"""

from __future__ import annotations

from memory.models import SkillDelta, SkillVersion
from memory.skills.effective import effective_skill_compose


def decision_seen_of(*, delta: SkillDelta, preview: dict, digest: str) -> dict:
    """The record of one review card (``preview`` from ``delta_previews``)."""
    return {
        "version_id": delta.skill.current_version_id,
        "version": preview["with"]["version"],
        "without": [a["id"] for a in preview["without"]["applied"]],
        "with": [a["id"] for a in preview["with"]["applied"]],
        "tools_without": list(preview["without"]["skill_tools"]),
        "tools_with": list(preview["with"]["skill_tools"]),
        "digest": digest,
    }


def decision_rebuild(*, delta: SkillDelta) -> dict | None:
    """``{"version", "without", "with", "missing"}`` as the decider saw them, or None.

    None when nothing was recorded (decided before this was kept, automatically,
    or over the API). ``missing`` is true when a delta the card showed no longer
    exists (erased): the rebuild then lacks its lines.
    """
    seen = delta.decision_seen or {}
    if not seen.get("version_id"):
        return None
    version = SkillVersion.objects.filter(
        pk=seen["version_id"], skill__workspace_id=delta.workspace_id
    ).first()
    if version is None:
        return None
    ids = set(seen["without"]) | set(seen["with"])
    rows = {
        d.pk: d
        for d in SkillDelta.objects.filter(workspace_id=delta.workspace_id, pk__in=ids).defer(
            "trigger_embedding", "payload_embedding"
        )
    }

    def compose(key: str, tools: list[str]) -> dict:
        chosen = [rows[pk] for pk in seen[key] if pk in rows]
        # Every recorded delta was rendered, retrieval-only ones because they matched.
        effective = effective_skill_compose(
            skill=delta.skill,
            version=version,
            deltas=chosen,
            registry={},
            matches={d.pk: 1.0 for d in chosen if d.retrieval_only},
        )
        return {**effective, "skill_tools": tools}

    return {
        "version": version,
        "without": compose("without", seen["tools_without"]),
        "with": compose("with", seen["tools_with"]),
        "missing": len(rows) < len(ids),
    }
