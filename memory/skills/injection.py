"""Injection findings in learned skill content: instruction overrides, remote
scripts, hidden or encoded text. Any finding quarantines a delta."""

from __future__ import annotations

from memory.core import linear


def _rule(pattern: str, *, ignore_case: bool = True):
    # RE2 (memory/core/linear.py): skill text is written by agents, so matching must
    # stay linear in it whatever the pattern.
    return linear.compile(("(?i)" if ignore_case else "") + pattern)


_INJECTION_RULES: tuple[tuple[str, linear.Pattern], ...] = (
    (
        "ignore_instructions",
        _rule(
            r"\b(?:ignore|disregard|forget|override|bypass)\b[^.\n]{0,40}?"
            r"\b(?:previous|prior|above|earlier|all|any|system|your|the)\b[^.\n]{0,20}?"
            r"\b(?:instructions?|rules?|prompts?|guidelines?|polic(?:y|ies)|guardrails?)\b",
        ),
    ),
    (
        "run_commands",
        _rule(
            r"\b(?:run|execute|exec|eval|invoke)\b[^.\n]{0,30}?"
            r"\b(?:commands?|shell|scripts?|bash|powershell|terminal|cmd)\b"
            r"|\bsudo\s|\brm\s+-[a-z]*r|\b(?:curl|wget)\s+\S+\s*\|\s*(?:ba|z)?sh\b|\$\([^)]*\)",
        ),
    ),
    (
        "exfiltrate",
        _rule(
            r"\b(?:send|post|upload|forward|exfiltrate|transmit|leak|copy)\b[^.\n]{0,40}?"
            r"\b(?:data|contents?|files?|credentials?|secrets?|tokens?|passwords?|keys?"
            r"|history|conversations?|memory|memories|everything|inbox)\b[^.\n]{0,40}?"
            r"\b(?:to|into|at)\b"
            r"|https?://[^\s?#]+\?[^\s#]*=",
        ),
    ),
    (
        # Forward / copy / BCC / send something to an address or a URL.
        "exfiltrate_to_address",
        _rule(
            r"\b(?:forward|send|copy|cc|bcc|e-?mail|mail|post|upload|sync|mirror|share|relay)"
            r"(?:s|ed|ing)?\b[^\n]{0,80}?"
            r"(?:[\w.+-]+@[\w-]+(?:\.[\w-]+)+|\bhttps?://|\bwebhook\b)",
        ),
    ),
    (
        # Permission language: capability strings and tool grants.
        "permission_language",
        _rule(
            r"\b(?:shell|network|fs|filesystem|process|exec|secrets?|sudo|admin|tools?)"
            r":(?:exec|execute|run|write|admin|all|any|root|\*)\b"
            r"|\ballowed[-_ ]tools\b"
            r"|\b(?:grant|give|add|enable|allow|unlock)\b[^.\n]{0,30}?"
            r"\b(?:tools?|access|scopes?|capabilit(?:y|ies))\b[^.\n]{0,20}?\b(?:to|for)\b"
            r"|\b(?:widen|broaden|expand|extend|loosen|relax)\b[^.\n]{0,30}?"
            r"\b(?:permissions?|privileges?|access|scopes?|grants?|capabilit(?:y|ies))\b",
        ),
    ),
    (
        "change_permissions",
        _rule(
            r"\b(?:grant|give|enable|elevate|escalate|raise|widen|add|allow|disable|turn\s+off)\b"
            r"[^.\n]{0,30}?\b(?:permissions?|privileges?|admin|root|sudo|security\s+tier"
            r"|confirmations?|approval)\b",
        ),
    ),
    ("hidden_zero_width", _rule("[\u200b\u200c\u200d\u2060\ufeff\u00ad]")),
    ("hidden_bidi_override", _rule("[\u202a-\u202e\u2066-\u2069]")),
    ("hidden_html_comment", _rule(r"<!--")),
)


_BASE64_BLOB = _rule(r"[A-Za-z0-9+/_-]{40,}={0,2}", ignore_case=False)
# Every pattern the scanner runs, by rule: what the adversarial-input test and
# bench/bench_scan.py run.
SCAN_PATTERNS: dict[str, linear.Pattern] = {
    **dict(_INJECTION_RULES),
    "hidden_base64_blob": _BASE64_BLOB,
}


def injection_scan(text: str) -> list[dict]:
    """Findings ``[{"rule", "excerpt"}]`` for prompt-injection shapes in ``text``.

    A heuristic, not a proof, so it errs towards flagging: any finding
    quarantines a delta whatever its provenance (a person has to look), and the
    findings are shown to reviewers marked in place.
    """
    text = linear.scannable(text)
    findings: list[dict] = []
    for rule, pattern in _INJECTION_RULES:
        match = pattern.search(text)
        if match:
            findings.append({"rule": rule, "excerpt": _excerpt(text, match.start(), match.end())})
    for match in _BASE64_BLOB.finditer(text):
        if _looks_encoded(match.group(0)):
            findings.append(
                {
                    "rule": "hidden_base64_blob",
                    "excerpt": _excerpt(text, match.start(), match.end()),
                }
            )
            break
    return findings


def _looks_encoded(blob: str) -> bool:
    # Encoded data mixes cases and digits; long paths and identifiers rarely do.
    return (
        any(c.isupper() for c in blob)
        and any(c.islower() for c in blob)
        and any(c.isdigit() for c in blob)
    )


def injection_spans(text: str) -> list[tuple[int, int, str]]:
    """Every span of ``text`` the injection scan's rules match: [(start, end, rule)].

    ``injection_scan`` records one excerpt per rule; reviewers need each match
    marked in place, so this walks the same rules with ``finditer``.
    """
    text = linear.scannable(text)
    spans = [
        (match.start(), match.end(), rule)
        for rule, pattern in _INJECTION_RULES
        for match in pattern.finditer(text)
        if match.end() > match.start()
    ]
    spans += [
        (match.start(), match.end(), "hidden_base64_blob")
        for match in _BASE64_BLOB.finditer(text)
        if _looks_encoded(match.group(0))
    ]
    return sorted(spans)


EXCERPT_CONTEXT = 20  # characters of context either side of a match, at most
EXCERPT_MAX = 160


def _excerpt(text: str, start: int, end: int) -> str:
    """The match with up to ``EXCERPT_CONTEXT`` characters either side, cut between
    words (a reviewer reading "nore all previous" has to guess), "…" where it is cut."""
    # The windows are EXCERPT_CONTEXT characters long: a plain walk, no pattern.
    left = max(0, start - EXCERPT_CONTEXT)
    if left > 0 and not text[left - 1].isspace():
        spaces = [i for i in range(left, start) if text[i].isspace()]
        left = spaces[0] + 1 if spaces else start
    right = min(len(text), end + EXCERPT_CONTEXT)
    if right < len(text) and not text[right].isspace():
        spaces = [i for i in range(end, right) if text[i].isspace()]
        right = spaces[-1] if spaces else end
    # Show hidden characters as escapes so the reviewer can see them.
    snippet = text[left:right].encode("unicode_escape").decode("ascii")
    cut_right = right < len(text)
    if len(snippet) > EXCERPT_MAX:
        space = snippet.rfind(" ", 0, EXCERPT_MAX)
        snippet = snippet[: space if space > 0 else EXCERPT_MAX]
        cut_right = True
    return ("…" if left > 0 else "") + snippet + ("…" if cut_right else "")
