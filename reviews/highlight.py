"""Injection-scan findings marked in place in an untrusted payload, and the words a
search matched marked in its hits.

Everything is escaped; only the ``<mark>`` wrappers this module writes are
HTML. Hidden characters (zero-width, bidi overrides) are shown as their code
points (U+200B), so a reviewer sees what the model would see.
"""

from __future__ import annotations

from collections.abc import Callable

from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

from memory.core.text import WORD
from memory.skills.injection import injection_spans

FINDING_LABELS = {
    "ignore_instructions": "tells the agent to ignore its instructions",
    "run_commands": "asks to run commands",
    "exfiltrate": "sends data somewhere",
    "exfiltrate_to_address": "sends or copies something to an address or URL",
    "permission_language": "asks for permissions or tool grants",
    "change_permissions": "asks for more permissions",
    "hidden_zero_width": "hidden zero-width character",
    "hidden_bidi_override": "hidden text-direction override",
    "hidden_html_comment": "hidden HTML comment",
    "hidden_base64_blob": "encoded blob",
}

_INVISIBLE = set("\u200b\u200c\u200d\u2060\ufeff\u00ad") | {
    chr(c) for c in [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]
}


def finding_label(rule: str) -> str:
    return FINDING_LABELS.get(rule, rule.replace("_", " "))


def _visible(text: str) -> str:
    """Escaped ``text`` with invisible characters written out (U+200B)."""
    return "".join(
        f'<span class="invisible">U+{ord(c):04X}</span>' if c in _INVISIBLE else escape(c)
        for c in text
    )


def _merge(spans: list[tuple[int, int, str]]) -> list[tuple[int, int, list[str]]]:
    """Overlapping spans become one mark that names every rule that matched in it."""
    merged: list[tuple[int, int, list[str]]] = []
    for start, end, rule in sorted(spans):
        if merged and start < merged[-1][1]:
            last_start, last_end, rules = merged[-1]
            merged[-1] = (last_start, max(last_end, end), rules + [rule])
        else:
            merged.append((start, end, [rule]))
    return merged


def highlight_findings(text: str) -> SafeString:
    """``text`` escaped, with each injection-scan match wrapped in a labelled ``<mark>``."""
    text = str(text)
    out: list[str] = []
    cursor = 0
    for start, end, rules in _merge(injection_spans(text)):
        labels = ", ".join(dict.fromkeys(finding_label(r) for r in rules))
        out.append(_visible(text[cursor:start]))
        out.append(
            format_html(
                '<mark class="finding" data-rules="{}" title="{}">{}'
                '<span class="finding-label">{}</span></mark>',
                " ".join(dict.fromkeys(rules)),
                labels,
                mark_safe(_visible(text[start:end])),  # escaped by _visible
                labels,
            )
        )
        cursor = end
    out.append(_visible(text[cursor:]))
    return mark_safe("".join(out))  # every piece above is escaped


# --------------------------------------------------------------------------- search matches


def mark_words(text: str, matched: Callable[[str], bool], *, limit: int = 220) -> SafeString:
    """``text`` escaped, cut to about ``limit`` characters around its first matching word,
    with every word for which ``matched(word)`` holds wrapped in ``<mark>``."""
    text = str(text)
    spans = [(m.start(), m.end()) for m in WORD.finditer(text) if matched(m.group())]
    start = 0
    if spans and spans[0][1] > limit:
        start = max(0, spans[0][0] - limit // 4)
        space = text.rfind(" ", 0, start + 1)
        start = space + 1 if space > start - 20 else start
    end = min(len(text), start + limit)
    out = ["…" if start else ""]
    cursor = start
    for s, e in spans:
        if s < start or e > end:
            continue
        out.append(escape(text[cursor:s]))
        out.append(format_html("<mark>{}</mark>", text[s:e]))
        cursor = e
    out.append(escape(text[cursor:end]))
    out.append("…" if end < len(text) else "")
    return mark_safe("".join(out))  # every piece above is escaped
