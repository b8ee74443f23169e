"""Audit events as sentences a person reads: "alice approved delta #3 to skill deploy-
checklist: 'matches what I said'", "reconcile merged knowledge #12 into #9".

One table maps event kinds (``action``) to a sentence; any other kind falls back to
"<who> <verb> <target>" from the action's last word, and its details become readable
``key: value`` pairs (None as "—", lists joined, ids of known tables as links).
Everything is built with ``format_html``: actors, reasons and details are escaped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

# target_type → (noun, URL name taking the id, or "")
NOUNS: dict[str, tuple[str, str]] = {
    "skill_delta": ("delta", "reviews:deltas_detail"),
    "lesson": ("lesson", "reviews:lessons_detail"),
    "knowledge": ("knowledge", "reviews:knowledge_detail"),
    "job_run": ("job run", "reviews:jobs_detail"),
    "erasure_receipt": ("erasure", "reviews:erasures_detail"),
    "outcome": ("outcome", "reviews:outcomes_detail"),
    "review_item": ("contradiction", ""),
    "situation_lesson": ("known blocker", ""),
    "learned_fact": ("fact", ""),
    "feedback_sample": ("feedback sample", ""),
    "skill_version": ("skill version", ""),
    "token": ("token", ""),
    "agent": ("agent", ""),
    "user": ("user", ""),
    "workspace": ("workspace", ""),
    "skill": ("skill", ""),
    "project": ("project", ""),
    "webhook": ("webhook", "reviews:webhooks_detail"),
}
# Detail keys holding the id of a row of a known table (linked when it has a page).
ID_KEYS = {
    "superseded_by": "knowledge",
    "new_id": "lesson",
    "outcome": "outcome",
    "demoted_to": "lesson",
    "kept": "",  # the same table as the event's target
    "job_run": "job_run",
    "review_item": "review_item",
    "turn": "",
}
# The last word of an action as a past-tense verb, for kinds without a sentence of their own.
VERBS = {
    "create": "created",
    "approve": "approved",
    "auto_approve": "auto-approved",
    "reject": "rejected",
    "archive": "archived",
    "revoke": "revoked",
    "issue": "issued",
    "retire": "retired",
    "restore": "restored",
    "edit": "edited",
    "update": "updated",
    "delete": "deleted",
    "register": "registered",
    "set": "set",
    "store": "stored",
    "remove": "removed",
    "learn": "learned",
    "promote": "promoted",
    "demote": "demoted",
    "reverse": "reversed",
    "merge": "merged",
    "request": "requested",
    "complete": "completed",
    "fail": "failed",
    "run": "ran",
    "run_now": "started a run of",
    "seen": "marked as seen",
    "confirm": "confirmed",
    "invalidate": "invalidated",
    "download": "downloaded",
    "import": "imported",
    "put": "stored",
    "record": "recorded",
    "reapprove": "re-approved",
    "revert": "reverted",
    "reset": "reset",
    "orphan": "orphaned",
    "open": "opened",
    "resolve": "resolved",
    "pin": "pinned",
    "unpin": "unpinned",
    "seal": "sealed",
    "unseal": "unsealed",
    "recompute": "recomputed",
    "supersede": "superseded",
}


@dataclass
class Lookups:
    """Names fetched once per page: delta id → skill name, project digest → label."""

    delta_skills: Mapping[int, str] = field(default_factory=dict)
    project_labels: Mapping[str, str] = field(default_factory=dict)


def who(actor: str) -> str:
    """``user:alice`` → alice; ``agent:gaia/chat`` → agent gaia/chat; ``system:decay`` → decay."""
    kind, _, name = (actor or "").partition(":")
    if not name:
        return "Cairn" if kind in ("", "system") else kind
    if kind == "user":
        return name
    if kind in ("agent", "harness"):
        return f"{kind} {name}"
    return name  # system:<job>: the job's name


def link(target_type: str, target_id, label: str | None = None) -> SafeString:
    """``delta #3`` linked to its page when it has one; plain text otherwise."""
    noun, url_name = NOUNS.get(target_type, (target_type.replace("_", " "), ""))
    text = label or f"{noun} #{target_id}"
    url = ""
    if url_name and str(target_id).isdigit():
        try:
            url = reverse(url_name, args=[int(target_id)])
        except NoReverseMatch:
            url = ""
    return format_html('<a href="{}">{}</a>', url, text) if url else format_html("{}", text)


def _target(event, lookups: Lookups) -> SafeString:
    if not event.target_type:
        return mark_safe("")
    if event.target_type == "project":
        name = lookups.project_labels.get(event.target_id)
        short = event.target_id[:10]
        return (
            format_html("project {} ({})", name, short)
            if name
            else format_html("project {}", short)
        )
    if event.target_type == "workspace":
        return mark_safe("the workspace")
    target = link(event.target_type, event.target_id)
    if event.target_type == "skill_delta":
        skill = lookups.delta_skills.get(_int(event.target_id)) or (event.details or {}).get(
            "skill"
        )
        if skill:
            return format_html("{} to skill {}", target, skill)
    return target


def _int(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def value_text(key: str, value, event=None) -> SafeString:
    """One detail value, readable: None → —, lists joined, booleans yes/no, ids linked."""
    if value is None or value == "" or value == []:
        return mark_safe("—")
    if isinstance(value, bool):
        return mark_safe("yes" if value else "no")
    if isinstance(value, list):
        return format_html_join(", ", "{}", ((value_text(key, v, event),) for v in value))
    if isinstance(value, dict):
        return format_html_join(
            "; ",
            "{}: {}",
            ((k.replace("_", " "), value_text(k, v, event)) for k, v in value.items()),
        )
    if key in ID_KEYS and _int(value) is not None:
        table = ID_KEYS[key] or (event.target_type if event is not None else "")
        if table:
            _, url_name = NOUNS.get(table, ("", ""))
            return link(table, value, f"#{value}") if url_name else format_html("#{}", value)
    if isinstance(value, float):
        return format_html("{}", f"{value:.2f}")
    return format_html("{}", str(value).replace("_", " ") if key in ("findings",) else value)


def details_pairs(event, *, skip: tuple[str, ...] = ()) -> list[tuple[str, SafeString]]:
    """The details a sentence did not already say, as (readable key, readable value)."""
    return [
        (key.replace("_", " "), value_text(key, value, event))
        for key, value in (event.details or {}).items()
        if key not in skip
    ]


# --------------------------------------------------------------------------- the sentences

Sentence = Callable[[object, SafeString, SafeString, Lookups], tuple[SafeString, tuple[str, ...]]]


def _says(pattern: str, *, skip: tuple[str, ...] = ()) -> Sentence:
    """A sentence with ``{who}`` and ``{target}`` in it; ``skip`` names details the
    sentence makes redundant."""

    def sentence(event, actor, target, lookups):
        return format_html(pattern, who=actor, target=target), skip

    return sentence


def _verb(verb: str) -> Sentence:
    return _says("{who} " + verb + " {target}")


def _delta_create(event, actor, target, lookups):
    details = event.details or {}
    status = details.get("status") or "staged"
    return format_html("{} proposed {} ({})", actor, target, status), ("skill", "status")


def _reconcile(event, actor, target, lookups):
    details = event.details or {}
    pair, kept, action = details.get("pair") or [], details.get("kept"), details.get("action")
    other = next((p for p in pair if p != kept), None)
    skip = ("pair", "kept", "action", "verdict")
    if action in ("merged", "superseded") and kept and other:
        verb = "merged" if action == "merged" else "replaced"
        return (
            format_html(
                "{} {} {} into {}" if action == "merged" else "{} {} {} with {}",
                actor,
                verb,
                link("knowledge", other),
                link("knowledge", kept, f"#{kept}"),
            ),
            skip,
        )
    if action == "review" and len(pair) == 2:
        return (
            format_html(
                "{} found {} and {} contradict each other and asked a person",
                actor,
                link("knowledge", pair[0]),
                link("knowledge", pair[1], f"#{pair[1]}"),
            ),
            skip,
        )
    return format_html("{} judged {} ({})", actor, target, details.get("verdict") or "—"), skip


def _lesson_merge(event, actor, target, lookups):
    details = event.details or {}
    merged = details.get("merged") or []
    kept = details.get("kept") or event.target_id
    folded = format_html_join(", ", "{}", ((link("lesson", m, f"#{m}"),) for m in merged))
    return (
        format_html("{} merged lessons {} into {}", actor, folded, link("lesson", kept)),
        ("merged", "kept"),
    )


def _knowledge_supersede(event, actor, target, lookups):
    new = (event.details or {}).get("superseded_by")
    if new is None:
        return format_html("{} replaced {}", actor, target), ("superseded_by",)
    return (
        format_html("{} replaced {} with {}", actor, target, link("knowledge", new, f"#{new}")),
        ("superseded_by",),
    )


def _review_open(event, actor, target, lookups):
    details = event.details or {}

    def side(ref):
        kind, _, pk = str(ref or "").partition(":")
        return link(kind, pk) if pk else format_html("{}", ref or "—")

    return (
        format_html(
            "{} opened {} between {} and {}",
            actor,
            target,
            side(details.get("a")),
            side(details.get("b")),
        ),
        ("a", "b"),
    )


def _setting(event, actor, target, lookups):
    details = event.details or {}
    state = "on" if details.get("value") else "off"
    return (
        format_html("{} turned the setting {} {}", actor, details.get("setting", "—"), state),
        ("setting", "value"),
    )


def _label(event, actor, target, lookups):
    verb = {
        "project.label": "named",
        "project.unlabel": "removed the name of",
        "project.label_from_remote": "named (from its git remote)",
    }[event.action]
    return format_html("{} {} {}", actor, verb, target), ()


def _member_set(event, actor, target, lookups):
    role = (event.details or {}).get("role") or "—"
    return format_html("{} made {} a {}", actor, target, role), ("role",)


SENTENCES: dict[str, Sentence] = {
    "delta.create": _delta_create,
    "delta.repeat": _verb("proposed again"),
    "delta.approve": _verb("approved"),
    "delta.auto_approve": _verb("auto-approved"),
    "delta.confirm_quarantined": _verb("confirmed the quarantined"),
    "delta.reject": _verb("rejected"),
    "delta.archive": _verb("archived"),
    "delta.revert": _verb("reverted"),
    "delta.reset": _verb("reset"),
    "delta.reapprove": _verb("re-approved the orphaned"),
    "delta.orphan": _verb("orphaned"),
    "delta.promote_resident": _verb("made resident"),
    "delta.demote_retrieval": _verb("made retrieval-only"),
    "delta.umbrella_propose": _verb("proposed the umbrella"),
    "reconcile.decide": _reconcile,
    "lesson.merge": _lesson_merge,
    "knowledge.supersede": _knowledge_supersede,
    "knowledge.error_resolved": _verb("marked as resolved"),
    "knowledge.error_reopened": _verb("reopened"),
    "review.open": _review_open,
    "review.resolve": _verb("resolved"),
    "workspace.setting": _setting,
    "workspace.create": _verb("created"),
    "member.set": _member_set,
    "project.label": _label,
    "project.unlabel": _label,
    "project.label_from_remote": _label,
    "orphan_notice.seen": _says("{who} marked the orphan notice of {target} as seen"),
    "agent.tools.set": _verb("declared the tools of"),
    "webhook.create": _verb("added"),
    "webhook.enable": _verb("enabled"),
    "webhook.disable": _verb("disabled"),
    "webhook.rotate_secret": _verb("rotated the secret of"),
    "webhook.test": _verb("sent a test event to"),
    "webhook.redeliver": _verb("redelivered an event to"),
}


def _fallback(event, actor, target, lookups):
    last = event.action.rsplit(".", 1)[-1]
    verb = VERBS.get(last)
    if verb and target:
        return format_html("{} {} {}", actor, verb, target), ()
    if verb:
        noun = event.action.rsplit(".", 1)[0].replace("_", " ").replace(".", " ")
        return format_html("{} {} {}", actor, verb, noun), ()
    if target:
        return format_html("{} did {} on {}", actor, event.action, target), ()
    return format_html("{} did {}", actor, event.action), ()


@dataclass(frozen=True)
class Readable:
    sentence: SafeString
    details: list[tuple[str, SafeString]]


def audit_readable(event, lookups: Lookups | None = None) -> Readable:
    """The event as one sentence (with the reason quoted) and the details left to show."""
    lookups = lookups or Lookups()
    actor = format_html("<strong>{}</strong>", who(event.actor))
    target = _target(event, lookups)
    sentence, skip = SENTENCES.get(event.action, _fallback)(event, actor, target, lookups)
    if event.reason:
        sentence = format_html("{}: “{}”", sentence, event.reason)
    return Readable(sentence=sentence, details=details_pairs(event, skip=skip))
