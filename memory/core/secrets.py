"""Credential refusal (SPEC section 3): text that looks like a secret is never stored.

One detector for every write path: the agent API runs it over every string leaf
(keys included) of every write body before any view sees it (agents/guard.py),
and services still call it on what they store.
It looks at each string as written and normalised (format characters such as
zero-width spaces stripped, URL-decoded, long base64 runs decoded). It answers *what kind* of secret it saw, never the
secret itself, so the refusal can name the field without echoing the value.

Usage::

    refuse_secrets({"content": content, "metadata": metadata})
    # raises ApplicationError(code="credential_refused", status 422,
    #                         fields={"content": ["looks like an OpenAI-style API key ..."]})

The patterns aim at shapes, not words: "use port 5432" or "the password policy
requires 12 chars" pass; ``password=hunter22`` or ``postgres://u:p4ss@db`` do not.
An assignment needs evidence in its value: never prose (whitespace) or a placeholder,
and under the everyday names ``secret``/``token`` letters mixed with digits or high
entropy (so ``here is a secret: "grant writers ..."`` is stored).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
import re
import unicodedata
import urllib.parse
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from cairn.errors import ApplicationError
from memory.core import linear

CREDENTIAL_REFUSED = "credential_refused"


@dataclass(frozen=True)
class SecretFinding:
    kind: str  # human-readable, e.g. "GitHub token"


# Every pattern that reads the written text is compiled with RE2, whose matching is
# linear in the text: the walker reads every string of every write body, so a
# pattern that backtracks would let one request hold a worker for seconds. RE2 has no
# look-around, so a boundary is a character class or the start/end of the text,
# consumed by the match: "(?:^|[^A-Za-z0-9])sk-..." for Python's "(?<![A-Za-z0-9])sk-".
_B = r"(?:^|[^A-Za-z0-9])"  # not preceded by a letter or digit
_E = r"(?:[^A-Za-z0-9]|$)"  # not followed by one

# (kind, pattern). Boundaries keep the prefixes from matching inside ordinary words.
_TOKEN_PATTERNS: tuple[tuple[str, Any], ...] = (
    (
        "private key block",
        linear.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"),
    ),
    ("OpenAI-style API key", linear.compile(_B + r"sk-(?:[A-Za-z0-9]+-)*[A-Za-z0-9_]{20,}")),
    ("Stripe key", linear.compile(_B + r"(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}")),
    (
        "AWS access key id",
        linear.compile(r"(?:^|[^A-Z0-9])(?:AKIA|ASIA|AGPA|AIDA)[0-9A-Z]{16}(?:[^A-Z0-9]|$)"),
    ),
    (
        "AWS secret access key",
        linear.compile(
            r"(?i)" + _B + r"aws_?secret_?(?:access_?)?key[\"']?\s*[:=]+\s*[\"']?"
            r"[A-Za-z0-9/+]{16,}"
        ),
    ),
    ("npm token", linear.compile(_B + r"npm_[A-Za-z0-9]{36}" + _E)),
    ("GitHub token", linear.compile(_B + r"gh[pousr]_[A-Za-z0-9]{30,}")),
    ("GitHub token", linear.compile(_B + r"github_pat_[A-Za-z0-9_]{22,}")),
    ("GitLab token", linear.compile(_B + r"glpat-[A-Za-z0-9_-]{20,}")),
    ("Slack token", linear.compile(_B + r"xox[abposr]-[A-Za-z0-9-]{10,}")),
    ("Google API key", linear.compile(_B + r"AIza[0-9A-Za-z_-]{35}")),
    ("Cairn token", linear.compile(_B + r"cairn_[0-9a-f]{8}_[A-Za-z0-9_-]{20,}")),
    (
        "JSON Web Token",
        linear.compile(_B + r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    ),
    (
        "bearer token",
        linear.compile(r"(?i)\bauthorization:\s*(?:bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{16,}"),
    ),
)

# An AWS access key id written with separators, as people do when they read one out
# or paste it from a table: "AKIA IOSF ODNN 7EXA MPLE", "AKIA-IOSF-ODNN-7EXA-MPLE".
# The 16 characters after the prefix may be split by up to three spaces, tabs, dots,
# dashes or underscores; see _spaced_aws_key_id for what keeps capitalised prose out.
_SPACED_AWS_KEY_ID = linear.compile(
    r"(?:^|[^A-Za-z0-9])(?P<key>(?:AKIA|ASIA|AGPA|AIDA)(?:[ \t._-]{0,3}[0-9A-Z]){16})"
    r"(?:[^A-Za-z0-9]|$)"
)
_AWS_SEPARATORS = " \t._-"

# scheme://user:password@host — the password part is what we look at.
_URL_CREDENTIALS = linear.compile(
    r"\b[a-zA-Z][a-zA-Z0-9+.-]{1,20}://[^\s/:@]{1,200}:(?P<secret>[^\s/@]{1,200})@[^\s/@]"
)

# password=..., api_key: "...", "client_secret": "..." — a name, an assignment, a value.
_ASSIGNMENT_NAMES = (
    r"password|passwd|passphrase|pwd|secret|secret[_-]?key|client[_-]?secret|api[_-]?key"
    r"|access[_-]?key|access[_-]?token|auth[_-]?token|refresh[_-]?token|private[_-]?key|token"
)
_NAME_IN_KEY = linear.compile(r"(?i)" + _ASSIGNMENT_NAMES)
_QUOTED_VALUE = r"\"[^\"\n]{1,300}\"|'[^'\n]{1,300}'"
# "=" or ":=" takes any value, but a bare value never starts with "=" ("password ==
# x" is a comparison); a plain ":" takes only a quoted value ("note: password" is prose).
_ASSIGNMENT = linear.compile(
    rf"(?i)(?:^|[^A-Za-z0-9_])[\"']?(?P<name>{_ASSIGNMENT_NAMES})[\"']?"
    rf"(?:\s*:?=\s*(?P<secret>{_QUOTED_VALUE}|[^\s\"',;)}}\]=][^\s\"',;)}}\]]{{0,299}})"
    rf"|\s*:\s*(?P<quoted>{_QUOTED_VALUE}))"
)

# password: hunter2hunter2 — the YAML-ish form, unquoted. Only values mixing letters
# and digits count, so prose ("password: see the vault") passes.
_COLON_ASSIGNMENT = linear.compile(
    rf"(?i)(?:^|[^A-Za-z0-9_])(?:{_ASSIGNMENT_NAMES})\s*:\s*(?P<secret>[^\s\"',;)}}\]]{{8,300}})"
)


# Every pattern the walker runs over written text, by name: what the adversarial-input
# test and bench/bench_scan.py run.
SCAN_PATTERNS: dict[str, linear.Pattern] = {
    **{f"{kind} {i}": pattern for i, (kind, pattern) in enumerate(_TOKEN_PATTERNS)},
    "spaced AWS access key id": _SPACED_AWS_KEY_ID,
    "password in a URL": _URL_CREDENTIALS,
    "assignment": _ASSIGNMENT,
    "colon assignment": _COLON_ASSIGNMENT,
    "credential name in a key": _NAME_IN_KEY,
}


def _mixes_letters_and_digits(value: str) -> bool:
    return any("a" <= c.lower() <= "z" for c in value) and any("0" <= c <= "9" for c in value)


# Values that name where a secret lives rather than being one. Python's engine is fine
# here and below: these read one value already cut to at most 300 characters.
_PLACEHOLDER = re.compile(
    r"""(?ix)^(
        \$\{?[A-Za-z_][A-Za-z0-9_]*\}?      # $VAR, ${VAR}
      | %\([A-Za-z_]+\)s                     # %(name)s
      | \{\{?[^}]*\}?\}                      # {name}, {{ name }}
      | <.*                                  # <password>, <your token>
      | [*xX.•]+                             # ****, xxxx, ...
      | (none|null|nil|true|false|empty|redacted|changeme|required|optional|secret|password)
      | (os\.environ|os\.getenv|getenv|env\(|process\.env|settings\.|config\.).*
    )$"""
)
_MIN_SECRET_CHARS = 4

# Names that say "this is a credential" on their own; "secret" and "token" alone are
# ordinary English ("here is a secret: ...", "a token of thanks") and need the value
# itself to look like one.
_STRONG_NAME = re.compile(
    r"(?i)password|passwd|passphrase|pwd|secret[_-]?key|client[_-]?secret|api[_-]?key"
    r"|access[_-]?key|access[_-]?token|auth[_-]?token|refresh[_-]?token|private[_-]?key"
)
_ENTROPY_MIN_BITS = 3.0
_ENTROPY_MIN_CHARS = 12


def shannon_entropy(value: str) -> float:
    """Bits per character of ``value``'s character distribution."""
    if not value:
        return 0.0
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def _looks_like_placeholder(value: str) -> bool:
    value = value.strip().strip("\"'")
    return len(value) < _MIN_SECRET_CHARS or bool(_PLACEHOLDER.match(value))


def _assigned_secret(name: str, value: str) -> bool:
    """Evidence that an assigned value is a real secret, not prose or a placeholder.

    A value with whitespace is prose (``secret: "grant writers hate ..."``). Under a
    strong name (password, api_key, ...) any other value counts; under ``secret`` or
    ``token`` the value must mix letters and digits or carry high entropy.
    """
    value = value.strip().strip("\"'")
    if _looks_like_placeholder(value) or any(c.isspace() for c in value):
        return False
    if _STRONG_NAME.search(name):
        return True
    return _mixes_letters_and_digits(value) or (
        len(value) >= _ENTROPY_MIN_CHARS and shannon_entropy(value) >= _ENTROPY_MIN_BITS
    )


# A run long enough to hide a key once encoded (a 20-character secret is 28 in base64).
_BASE64_RUN = linear.compile(r"[A-Za-z0-9+/_-]{24,}={0,2}")
_URL_ESCAPE = linear.compile(r"%[0-9A-Fa-f]{2}")
_DECODE_ROUNDS = 3
SCAN_PATTERNS.update({"base64 run": _BASE64_RUN, "URL escape": _URL_ESCAPE})


def _without_format_characters(text: str) -> str:
    """``text`` without zero-width and other format (Cf) characters, which split a
    token for the eye and the pattern but not for whoever copies it."""
    if text.isascii():
        return text
    return "".join(c for c in text if unicodedata.category(c) != "Cf")


def _base64_decodings(text: str) -> Iterator[str]:
    for match in _BASE64_RUN.finditer(text):
        run = match.group(0).rstrip("=")
        padded = run + "=" * (-len(run) % 4)
        for decode in (base64.b64decode, base64.urlsafe_b64decode):
            try:
                decoded = decode(padded).decode("utf-8")
            except (binascii.Error, ValueError):
                continue
            if all(c.isprintable() or c in "\n\r\t" for c in decoded):
                yield decoded
                break


def normalised_forms(text: str) -> Iterator[str]:
    """``text`` as written and as a secret could hide in it: without format
    characters, URL-decoded (a few rounds), and with long base64 runs decoded."""
    seen = {text}
    yield text
    plain = _without_format_characters(text)
    for _ in range(_DECODE_ROUNDS):
        if plain not in seen:
            seen.add(plain)
            yield plain
        if not _URL_ESCAPE.search(plain):
            break
        plain = _without_format_characters(urllib.parse.unquote(plain))
    if plain not in seen:
        seen.add(plain)
        yield plain
    for decoded in _base64_decodings(plain):
        decoded = _without_format_characters(decoded)
        if decoded not in seen:
            seen.add(decoded)
            yield decoded


# Digests of texts found clean, so the strings every write repeats (keys such as
# "operation_key", "pytest", a project's file names) are read once per process, not
# once per request. Only a 16-byte BLAKE2b digest is kept, never the text, and only
# of clean texts: a refused secret leaves nothing behind. Emptied when full.
_CLEAN: dict[bytes, None] = {}
_CLEAN_MAX = 32_768


def find_secret(text: str) -> SecretFinding | None:
    """The first credential-shaped thing in ``text`` or one of its normalised forms."""
    if not text:
        return None
    key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    if key in _CLEAN:
        return None
    finding = _find_secret_in_forms(text)
    if finding is None:
        if len(_CLEAN) >= _CLEAN_MAX:
            _CLEAN.clear()
        _CLEAN[key] = None
    return finding


def _find_secret_in_forms(text: str) -> SecretFinding | None:
    for form in normalised_forms(linear.scannable(text)):
        finding = _find_secret_as_written(form)
        if finding is not None:
            return finding
    return None


def _find_secret_as_written(text: str) -> SecretFinding | None:
    for kind, pattern in _TOKEN_PATTERNS:
        if pattern.search(text):
            return SecretFinding(kind=kind)
    for match in _SPACED_AWS_KEY_ID.finditer(text):
        if _spaced_aws_key_id(match.group("key")):
            return SecretFinding(kind="AWS access key id")
    for match in _URL_CREDENTIALS.finditer(text):
        if not _looks_like_placeholder(match.group("secret")):
            return SecretFinding(kind="password in a URL")
    for match in _ASSIGNMENT.finditer(text):
        if _assigned_secret(match.group("name"), match.group("secret") or match.group("quoted")):
            return SecretFinding(kind="password or secret assignment")
    for match in _COLON_ASSIGNMENT.finditer(text):
        secret = match.group("secret")
        if _mixes_letters_and_digits(secret) and not _looks_like_placeholder(secret):
            return SecretFinding(kind="password or secret assignment")
    return None


def _spaced_aws_key_id(written: str) -> bool:
    """Whether a separated prefix-and-16 match is a key id rather than capitals in prose.

    A key id has digits almost always; capitalised words after "ASIA" ("ASIA PACIFIC
    REGION SALE") have none. Without a digit it still counts when it is written as a
    key is read out: four groups of four, one separator that is not a plain space.
    """
    compact = "".join(c for c in written if c not in _AWS_SEPARATORS)
    if compact == written:
        return False  # no separator: the plain pattern has already decided
    if any(c.isdigit() for c in compact[4:]):
        return True
    groups = re.split(r"[ \t._-]+", written)
    separators = set(re.findall(r"[ \t._-]+", written))
    return len(groups) == 5 and all(len(g) == 4 for g in groups) and separators <= {"-", ".", "_"}


def _walk(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """(dotted path, string) for every string in a JSON-like value, keys included."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for key, inner in value.items():
            key_path = f"{path}.{key}" if path else str(key)
            yield key_path, str(key)
            if isinstance(inner, str) and _NAME_IN_KEY.search(str(key)):
                # {"password": "..."}: the pair, as JSON, is an assignment. Only a key
                # naming a credential can make one (both assignment patterns need the
                # name); the value alone is read below like any string.
                yield key_path, json.dumps({str(key): inner}, ensure_ascii=False)
            yield from _walk(inner, key_path)
    elif isinstance(value, list | tuple):
        for index, inner in enumerate(value):
            yield from _walk(inner, f"{path}[{index}]")


def scan_fields(fields: Mapping[str, Any]) -> dict[str, SecretFinding]:
    """{field path: finding} for every field whose text (or nested JSON) holds a secret."""
    found: dict[str, SecretFinding] = {}
    for name, value in fields.items():
        for path, text in _walk(value, name):
            if path in found:
                continue
            finding = find_secret(text)
            if finding is not None:
                found[path] = finding
    return found


def refuse_secrets(fields: Mapping[str, Any]) -> None:
    """Raise a 422 ``credential_refused`` naming each field that holds a secret."""
    found = scan_fields(fields)
    if not found:
        return
    names = ", ".join(found)
    raise ApplicationError(
        f"Refused: {names} looks like it contains a credential. Cairn never stores secrets; "
        "store where the secret lives (for example 'the deploy key is in the vault under ci/deploy') "
        "instead of the secret itself.",
        code=CREDENTIAL_REFUSED,
        fields={
            path: [f"looks like a {finding.kind}; remove it or refer to where it is kept"]
            for path, finding in found.items()
        },
    )
