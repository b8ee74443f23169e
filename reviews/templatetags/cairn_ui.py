"""Small display filters for the review templates."""

from __future__ import annotations

import json
from datetime import timedelta
from urllib.parse import urlencode

from django import template
from django.conf import settings
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.utils.html import format_html

from reviews import highlight
from reviews.toasts import follow_url

register = template.Library()


CHANNEL_LABELS = {
    "harness": "harness-verified",
    "person": "a person",
    "agent": "agent's own word",
    "system": "system",
}


# A settled contradiction in words: "keep_a" read as "keep a" meant nothing to anyone.
# The side let go is retired if it is a lesson and archived if it is knowledge.
RESOLVED_WORDS = {
    "keep_a": "kept A, {b_gone} B",
    "keep_b": "kept B, {a_gone} A",
    "keep_both": "kept both",
    "edit": "edited into one",
}


def _gone(target_type: str) -> str:
    return "retired" if target_type == "lesson" else "archived"


def resolution_words(resolution: str, item=None) -> str:
    words = RESOLVED_WORDS.get(resolution, resolution)
    return words.format(
        a_gone=_gone(getattr(item, "a_type", "lesson")),
        b_gone=_gone(getattr(item, "b_type", "lesson")),
    )


@register.filter
def resolved_words(item) -> str:
    """A resolved review item's resolution in words (the item, or a bare resolution)."""
    if isinstance(item, str):
        return resolution_words(item)
    return resolution_words(item.resolution, item)


@register.inclusion_tag("reviews/_channel.html")
def channel(value):
    """Who reported a record: harness-verified, a person, the agent's own word, the system."""
    return {"channel": value or "agent", "label": CHANNEL_LABELS.get(value or "agent", value)}


@register.filter
def percent(fraction) -> int:
    """0.0-1.0 → 0-100, clamped."""
    try:
        return max(0, min(100, round(float(fraction) * 100)))
    except (TypeError, ValueError):
        return 0


@register.filter
def error_summary(text) -> str:
    """The last non-empty line of a traceback is the one that says what went wrong."""
    lines = [line.strip() for line in str(text or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _human(delta: timedelta) -> str:
    seconds = max(0, int(delta.total_seconds()))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m {seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


@register.filter
def run_duration(run) -> str:
    """How long a job ran (or has been running); empty before it starts."""
    if not getattr(run, "started_at", None):
        return ""
    end = run.finished_at or timezone.now()
    return _human(end - run.started_at)


@register.filter
def ago(moment) -> str:
    """A short relative time ("just now", "5 min ago", "3 h ago", "4 days ago")."""
    if not moment:
        return ""
    seconds = int((timezone.now() - moment).total_seconds())
    return "just now" if seconds < 60 else f"{_span(seconds)} ago"


def _span(seconds: int) -> str:
    """A minute or more, shortly: "5 min", "3 h", "4 days"."""
    if seconds < 3600:
        return f"{seconds // 60} min"
    if seconds < 48 * 3600:
        return f"{seconds // 3600} h"
    return f"{seconds // 86400} days"


def _unit(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


@register.filter
def every_words(interval) -> str:
    """An interval for people: 300 s → "every 5 minutes", 1 h → "every hour"."""
    if interval is None:
        return ""
    seconds = int(interval.total_seconds() if isinstance(interval, timedelta) else interval)
    for size, word in ((86400, "day"), (3600, "hour"), (60, "minute")):
        if seconds >= size and seconds % size == 0:
            n = seconds // size
            return f"every {word}" if n == 1 else f"every {_unit(n, word)}"
    return f"every {_unit(seconds, 'second')}"


@register.filter
def since_words(moment) -> str:
    """How long since ``moment``, as Django's timesince says it ("3\xa0days"), but
    "under a minute" instead of "0\xa0minutes" for something that just arrived."""
    from django.utils.timesince import timesince

    if not moment:
        return ""
    if (timezone.now() - moment).total_seconds() < 60:
        return "under a minute"
    return timesince(moment)


@register.filter
def until(moment) -> str:
    """How far ahead a moment is ("in 3 min", "in 5 h", "in 2 days"); a past one says
    how long ago it was due."""
    if not moment:
        return ""
    seconds = int((moment - timezone.now()).total_seconds())
    if seconds < 0:
        return f"due {ago(moment)}"
    return "in under a minute" if seconds < 60 else f"in {_span(seconds)}"


@register.filter
def lookup(mapping, key):
    """``mapping[key]`` or '' (for dicts built by the view, e.g. project labels)."""
    try:
        return mapping.get(key, "")
    except AttributeError:
        return ""


@register.filter
def seconds_human(seconds) -> str:
    """A duration for people: "45 s", "12 min", "3 h 20 min", "2 d 4 h"."""
    if seconds is None:
        return ""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


@register.filter
def clamp(value, upper) -> int:
    """min(value, upper) for progress bars that must not overflow."""
    try:
        return min(int(value), int(upper))
    except (TypeError, ValueError):
        return 0


@register.filter
def finding_label(rule) -> str:
    return highlight.finding_label(str(rule))


@register.filter
def highlight_findings(text):
    """Escaped text with the injection scan's matches marked (see reviews.highlight)."""
    return highlight.highlight_findings(str(text))


PROVENANCE_LABELS = {
    "user_instruction": "user instruction",
    "outcome_evidence": "outcome evidence",
    "observed_content": "observed content",
    "missing": "missing provenance",
    "unreadable": "unreadable provenance",
    "consolidation": "consolidation of approved deltas",
}


@register.filter
def provenance_label(source) -> str:
    return PROVENANCE_LABELS.get(str(source), str(source))


@register.filter
def section_title(slug, version) -> str:
    """The heading a section slug stands for in ``version`` (the slug if it is gone)."""
    section = version.section(slug) if version is not None else None
    if section is None:
        return slug
    return section["title"] or "Whole skill"


@register.filter
def short_digest(digest) -> str:
    return str(digest or "")[:12]


@register.filter
def code_label(code) -> str:
    """A machine code as words: ``section_gone`` → "section gone"."""
    return str(code or "").replace("_", " ")


@register.filter
def json_short(value, limit: int = 120) -> str:
    """A JSON value as compact text, cut at ``limit`` characters."""
    text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    return text if len(text) <= limit else text[: limit - 1] + "…"


# Audit targets with a page of their own: target_type -> URL name taking the id.
TARGET_PAGES = {
    "skill_delta": "reviews:deltas_detail",
    "lesson": "reviews:lessons_detail",
    "knowledge": "reviews:knowledge_detail",
    "job_run": "reviews:jobs_detail",
    "erasure_receipt": "reviews:erasures_detail",
}


@register.filter
def target_url(event) -> str:
    """The page of an audit event's target, or "" when it has none."""
    name = TARGET_PAGES.get(getattr(event, "target_type", ""))
    target_id = str(getattr(event, "target_id", ""))
    if not name or not target_id.isdigit():
        return ""
    try:
        return reverse(name, args=[int(target_id)])
    except NoReverseMatch:
        return ""


@register.filter
def turn_links(turns) -> list[dict]:
    """Provenance turn refs (``sess_91f3#12``) as links to the conversation viewer.

    Each link opens the session with every turn the same delta cites in it marked.
    A ref that is not ``<session>#<index>`` stays plain text (``url`` empty).
    """
    refs = []
    for raw in turns or []:
        text = str(raw)
        session, sep, index = text.rpartition("#")
        ok = bool(sep and session and index.isdigit() and len(session) <= 200)
        refs.append({"label": text, "session": session if ok else "", "index": index})
    cites: dict[str, list[str]] = {}
    for ref in refs:
        if ref["session"]:
            cites.setdefault(ref["session"], []).append(ref["index"])
    base = reverse("reviews:conversations")
    for ref in refs:
        ref["url"] = ""
        if ref["session"]:
            query = urlencode(
                [("session", ref["session"])] + [("cite", i) for i in cites[ref["session"]]]
            )
            ref["url"] = f"{base}?{query}#turn-{ref['index']}"
    return refs


@register.simple_tag
def toast_follow(message) -> str:
    """The htmx attributes of a toast that follows its job (reviews.toasts), or ""."""
    url = follow_url(getattr(message, "extra_tags", ""))
    if not url:
        return ""
    every = settings.CAIRN_UI_JOB_POLL_S
    return format_html(
        ' hx-get="{}" hx-trigger="load, every {}s" hx-swap="outerHTML" data-follows',
        url,
        every,
    )


@register.filter
def key_words(name) -> str:
    """A machine key or table name for people: ``knowledge_edges`` → "knowledge edges",
    ``memory.Knowledge`` → "Knowledge"."""
    text = str(name or "")
    if "." in text:
        text = text.rsplit(".", 1)[1]
    return text.replace("_", " ").replace("-", " ").strip()


@register.filter
def detail_value(value, key="") -> str:
    """A details value as the audit log says it: 0.954123 → "0.95", lists joined,
    dicts as "key: value", booleans yes/no (``audit_sentences.value_text``)."""
    from reviews.audit_sentences import value_text

    return value_text(str(key), value)


@register.filter
def size_words(size) -> str:
    """Bytes for people: 536870912 → "512 MB" (Django's filesizeformat says "512.0 MB")."""
    from django.template.defaultfilters import filesizeformat

    return str(filesizeformat(size)).replace(".0\xa0", "\xa0").replace(".0 ", " ")
