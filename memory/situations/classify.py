"""Infer a situation from the generic signals of one tool result. Pure: no database.

The classifier is one table, :data:`RULES`, read top to bottom; the first rule
that matches names the situation. To teach it a new shape, add a row (and a
test for it and for its counter-example in tests/memory/situations/). Nothing
here names a specific tool: rules look at exit codes, HTTP statuses, the
``executed`` / ``rate_limited`` flags and the text of the result.

An inferred situation never carries ``unblock`` or ``probe`` (text from a tool's
output must never become a command) and is never persisted.

Order matters:

1. Adversarial first: a result that talks to the agent is flagged whatever else
   it says, so nothing learns from it.
2. Blockers and self-fixable errors only when the call *failed* (non-zero exit,
   HTTP >= 400, ``ok: false`` or not executed). A successful ``cat README.md``
   that quotes "permission denied" is not a blocker.
3. Degenerate outputs (garbled, truncated, empty) last: they can follow a success.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings

from memory.core import linear
from memory.situations.taxonomy import INFERRED, Situation


def scan_window(text: str) -> str:
    """The part of one output the rules read: all of it up to
    ``CAIRN_SCAN_HEAD_CHARS + CAIRN_SCAN_TAIL_CHARS``, else its head and its tail.

    Errors sit at the start (usage, "command not found") or at the end (the last
    traceback line, "rate limited" after a long log); the middle of a huge build log
    rarely names the situation, and reading it would make a request's cost grow with
    whatever a tool printed.
    """
    head, tail = settings.CAIRN_SCAN_HEAD_CHARS, settings.CAIRN_SCAN_TAIL_CHARS
    if len(text) > head + tail:
        text = text[:head] + "\n" + (text[-tail:] if tail else "")
    return linear.scannable(text)


@dataclass(frozen=True)
class Signals:
    tool: str
    exit_code: int | None = None
    http_status: int | None = None
    stdout: str = ""
    stderr: str = ""
    output: str = ""
    executed: bool | None = None
    rate_limited: bool | None = None
    ok: bool | None = None
    search: bool | None = None  # the tool is a search; default: guessed from its name

    @property
    def failed(self) -> bool:
        return (
            self.ok is False
            or self.executed is False
            or (self.exit_code is not None and self.exit_code != 0)
            or (self.http_status is not None and self.http_status >= 400)
        )

    @property
    def text(self) -> str:
        return "\n".join(scan_window(p) for p in (self.stderr, self.stdout, self.output) if p)

    @property
    def body(self) -> str:
        """What the tool returned (not its diagnostics)."""
        return "\n".join(scan_window(p) for p in (self.stdout, self.output) if p)

    @property
    def is_search(self) -> bool:
        if self.search is not None:
            return self.search
        return bool(_SEARCH_TOOL.search(linear.scannable(self.tool)))


@dataclass(frozen=True)
class Rule:
    name: str
    kind: str
    when: Callable[[Signals], bool]
    why: str


# Every pattern here runs on text a tool (or an agent) wrote, so it is compiled with
# RE2: matching is linear in the text whatever the pattern, where Python's
# backtracking engine took seconds on "agent" followed by 20,000 spaces.
def _words(*patterns: str):
    return linear.compile("(?im)" + "|".join(f"(?:{p})" for p in patterns))


def _text_says(pattern) -> Callable[[Signals], bool]:
    return lambda s: s.failed and bool(pattern.search(s.text))


_SEARCH_TOOL = linear.compile(r"(?i)search|find|grep|query|lookup|glob")

_INJECTED = _words(
    r"\b(?:ignore|disregard|forget)\s+(?:all\s+|any\s+)?(?:the\s+)?(?:previous|prior|above|"
    r"earlier|your)\s+(?:instructions|directions|prompts?|rules)",
    r"\b(?:ai|llm)\s+(?:agent|assistant|model)s?\s*[:,]\s*(?:you\s+must|please|run|execute)",
    r"\b(?:you\s+(?:must|should)\s+now|new\s+instructions\s*:|system\s+prompt\s*:)",
    r"\b(?:assistant|agent)s?\s*,?\s+(?:must|should)\s+(?:run|execute|curl|download)",
    r"\b(?:run|execute)\s+(?:this|the\s+following)\s+(?:command|script|curl|snippet)\b"
    r"[^\n]{0,40}(?:curl|wget|bash|sh\b|\|)",
    r"\b(?:curl|wget)\s+[^\n|]{1,200}\|\s*(?:sudo\s+)?(?:ba|z|da)?sh\b",
    # A downloaded script run without a pipe: `bash <(curl …)`, `source <(wget …)`.
    r"\b(?:(?:ba|z|da)?sh|source)\s+<\(\s*(?:curl|wget)\b",
    # Sending secrets away: "send .env to …", "upload the .env file", "post your API keys".
    r"\b(?:send|upload|post|e-?mail|forward|share|paste|exfiltrate)\s+(?:the\s+|your\s+|"
    r"all\s+|our\s+)?(?:contents\s+of\s+(?:the\s+)?)?(?:\.env\b|env(?:ironment)?\s+"
    r"(?:file|variables)|secrets\b|credentials\b|api[\s_-]?keys?\b|ssh\s+keys?\b|"
    r"~/\.ssh|id_rsa\b|\.npmrc\b|\.netrc\b|\.aws/credentials)",
    r"\btell\s+the\s+user\s+(?:to|that)\b",
)
_RATE = _words(
    r"rate[ -]?limit(?:ed)?", r"too many requests", r"quota (?:exceeded|exhausted)",
    r"exceeded (?:your|the) (?:quota|rate)", r"secondary rate",
)  # fmt: skip
_AUTH = _words(
    r"not logged in(?:to)?",
    r"authentication (?:required|failed)",
    r"you are not logged into",
    r"\blogin required\b",
    r"\bunauthori[sz]ed\b",
    r"bad credentials",
    r"invalid (?:credentials|token|api key)",
    r"(?:token|credentials?) (?:has |have )?expired",
    r"please (?:log ?in|sign ?in|authenticate)",
    r"\bauth login\b",
)
_NOT_INSTALLED = _words(
    r"command not found",
    r"is not recognized as (?:an internal or external command|the name of a cmdlet)",
    r"no such (?:command|executable)",
    r"executable file not found",
    r"\bnot installed\b",
    r"ModuleNotFoundError",
    r"No module named",
)
_PERMISSION = _words(
    r"permission denied", r"\bEACCES\b", r"\bEPERM\b", r"operation not permitted",
    r"access (?:is )?denied", r"not permitted", r"read-only file system",
)  # fmt: skip
_LOCKED = _words(
    r"resource (?:temporarily )?(?:busy|unavailable)",
    r"\bEBUSY\b",
    r"\bis locked\b",
    r"\.lock['\"]?:? File exists",
    r"unable to (?:create|acquire) [^\n]{0,200}lock",
    r"could not (?:get|acquire|obtain) (?:a |the )?lock",
    r"database is locked",
    r"being used by another process",
    r"lock file",
)
_OFFLINE = _words(
    r"could not resolve host", r"name or service not known",
    r"temporary failure in name resolution", r"connection (?:refused|reset|timed out)",
    r"network is unreachable", r"no route to host", r"\bECONNREFUSED\b",
    r"\bECONNRESET\b", r"\bENOTFOUND\b", r"\bETIMEDOUT\b", r"getaddrinfo",
    r"failed to (?:establish|open) (?:a )?(?:new )?connection", r"\boffline\b",
)  # fmt: skip
_WRONG_CWD = _words(
    r"not a git repository",
    r"could not (?:find|locate) (?:a )?(?:package\.json|pyproject\.toml|cargo\.toml|go\.mod)",
    r"no (?:package\.json|pyproject\.toml|Makefile|Cargo\.toml) (?:found|in)",
    r"no makefile found",
)
_NOT_FOUND = _words(
    r"no such file or directory",
    r"\bENOENT\b",
    r"cannot find the (?:path|file)",
    r"(?:file|path|directory) (?:does not|doesn't) exist",
    r"\bnot found\b",
)
_SYNTAX = _words(
    r"SyntaxError", r"syntax error", r"parse error", r"unexpected (?:token|EOF|end of)",
    r"IndentationError",
)  # fmt: skip
_BAD_ARGS = _words(
    r"unknown (?:option|flag|argument|command)",
    r"unrecognized (?:option|flag|arguments?)",
    r"invalid (?:option|argument|flag|choice)",
    r"^[ \t]*usage:",
    r"missing (?:required )?(?:argument|operand|option)",
    r"requires an argument",
    r"too (?:many|few) arguments",
)
_TRUNCATED = _words(
    r"\[\s*(?:output\s+|content\s+|\.\.\.\s*)?truncated",
    r"\(\s*(?:output\s+)?truncated",
    r"\.\.\.\s*\[?\d+ more (?:lines|bytes|characters|chars)",
    r"<truncated",
    r"output (?:was |has been )?truncated",
    r"content truncated",
)
_MOJIBAKE = linear.compile(r"Ã[\x80-\xbf©¨§¼½¶]|â€[™œ\x9d\"”“˜]|Ã¢â‚¬")
_CONTROL = linear.compile(r"[\x01-\x08\x0b\x0c\x0e-\x1f\x7f]")
# Every pattern above, by name: what the adversarial-input test and bench/bench_scan.py run.
TEXT_PATTERNS: dict[str, linear.Pattern] = {
    name.strip("_").lower(): value
    for name, value in tuple(globals().items())
    if isinstance(value, linear.Pattern)
}
_EMPTY_BODIES = {"", "[]", "{}", "null", "none", "no results", "no results found", "0 results"}


def _garbled(s: Signals) -> bool:
    text = s.body or s.text
    if not text:
        return False
    odd = text.count("\ufffd") + len(_CONTROL.findall(text)) + 3 * len(_MOJIBAKE.findall(text))
    return odd >= 3 and odd / max(len(text), 1) > 0.01


def _empty(s: Signals) -> bool:
    if not s.is_search or s.failed:
        return False
    return (s.body or "").strip().lower().rstrip(".") in _EMPTY_BODIES


RULES: tuple[Rule, ...] = (
    Rule(
        "instruction_aimed_at_agent",
        "injected_instruction",
        lambda s: bool(_INJECTED.search(s.text)),
        "text that tells the agent what to do (ignore instructions, run this curl, tell "
        "the user to ...) is untrusted content, never a command",
    ),
    Rule("rate_limited_flag", "quota", lambda s: s.rate_limited is True, "rate_limited: true"),
    Rule("http_429", "quota", lambda s: s.http_status == 429, "HTTP 429"),
    Rule("rate_limit_text", "quota", _text_says(_RATE), '"rate limit", "too many requests"'),
    Rule(
        "not_executed",
        "permission",
        lambda s: s.executed is False,
        "executed: false (a permission tier refused it)",
    ),
    Rule("http_401_403", "auth", lambda s: s.http_status in (401, 403), "HTTP 401 or 403"),
    Rule("auth_text", "auth", _text_says(_AUTH), '"not logged in", "authentication required"'),
    Rule("exit_127", "not_installed", lambda s: s.exit_code == 127, "exit 127 (no such command)"),
    Rule(
        "not_installed_text",
        "not_installed",
        _text_says(_NOT_INSTALLED),
        '"command not found", "is not recognized"',
    ),
    Rule(
        "permission_text",
        "permission",
        _text_says(_PERMISSION),
        '"permission denied", EACCES, EPERM',
    ),
    Rule("lock_text", "locked", _text_says(_LOCKED), 'lock files, "resource busy"'),
    Rule(
        "connection_text",
        "offline",
        _text_says(_OFFLINE),
        'connection errors: "could not resolve host", "connection refused"',
    ),
    Rule(
        "wrong_cwd_text",
        "wrong_cwd",
        _text_says(_WRONG_CWD),
        '"not a git repository", no project file here',
    ),
    Rule("syntax_text", "syntax", _text_says(_SYNTAX), "SyntaxError, parse errors"),
    Rule("bad_args_text", "bad_args", _text_says(_BAD_ARGS), "unknown option, usage text"),
    Rule("not_found_text", "not_found", _text_says(_NOT_FOUND), '"No such file or directory"'),
    Rule("http_404", "not_found", lambda s: s.http_status == 404, "HTTP 404"),
    Rule("garbled_text", "garbled", _garbled, "replacement characters, control bytes, mojibake"),
    Rule(
        "truncation_marker",
        "truncated",
        lambda s: bool(_TRUNCATED.search(s.text)),
        'truncation markers ("[truncated]", "... 120 more lines")',
    ),
    Rule("empty_search", "empty", _empty, "a search tool returned nothing"),
)


def classify_result(signals: Signals) -> Situation | None:
    """The first rule in :data:`RULES` that matches, as an inferred situation; or None."""
    for rule in RULES:
        if rule.when(signals):
            return Situation(kind=rule.kind, subject=signals.tool, source=INFERRED, rule=rule.name)
    return None
