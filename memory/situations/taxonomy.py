"""The situation vocabulary and the declared-situation contract (SPEC section 5).

Every tool result is at most one situation. A *declared* situation comes from
the tool's own code (``unblock`` and ``probe`` are exact commands a person or
the harness will run, so they are accepted only from the harness channel); an
*inferred* one comes from :mod:`memory.situations.classify` and never carries
either. A malformed declaration is a bug in the tool: 422 naming the field.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings

from cairn.errors import ApplicationError
from memory.core.secrets import refuse_secrets
from memory.core.validation import check_json_strings

BLOCKER = "blocker"
SELF_FIXABLE = "self_fixable"
DEGENERATE = "degenerate"
ADVERSARIAL = "adversarial"

KINDS: dict[str, str] = {
    "auth": BLOCKER,
    "not_installed": BLOCKER,
    "permission": BLOCKER,
    "quota": BLOCKER,
    "offline": BLOCKER,
    "locked": BLOCKER,
    "bad_args": SELF_FIXABLE,
    "not_found": SELF_FIXABLE,
    "wrong_cwd": SELF_FIXABLE,
    "syntax": SELF_FIXABLE,
    "empty": DEGENERATE,
    "truncated": DEGENERATE,
    "garbled": DEGENERATE,
    "injected_instruction": ADVERSARIAL,
}
BLOCKER_KINDS = tuple(k for k, c in KINDS.items() if c == BLOCKER)

DECLARED = "declared"
INFERRED = "inferred"

# Workarounds allowed after a blocker before the turn escalates: a tool that
# declares its own failure is surer than a regex.
BUDGET = {
    DECLARED: settings.CAIRN_SITUATION_BUDGET_DECLARED,
    INFERRED: settings.CAIRN_SITUATION_BUDGET_INFERRED,
}

# Transient kinds live only in a turn's recovery state, never in a lesson.
NEVER_PERSISTED = frozenset({"offline", "quota", "locked"})
# How long a situation lesson is believed. ``permission`` is not named by the
# spec; a week, like auth (both are changed by a person, at any time).
LESSON_TTL = {kind: timedelta(days=d) for kind, d in settings.CAIRN_SITUATION_LESSON_DAYS.items()}
LESSON_CONFIDENCE = settings.CAIRN_SITUATION_LESSON_CONFIDENCE

SUBJECT_MAX = 200
TEXT_MAX = 500
ENV_MAX = 200
PROBE_MAX_BYTES = 2000


@dataclass(frozen=True)
class Situation:
    kind: str
    subject: str
    source: str = DECLARED
    unblock: str = ""
    probe: dict | None = None
    interactive: bool = False
    detail: str = ""
    env: str = ""
    rule: str = ""  # the classifier rule that inferred it
    extra: dict = field(default_factory=dict)

    @property
    def klass(self) -> str:
        return KINDS[self.kind]

    @property
    def is_blocker(self) -> bool:
        return self.klass == BLOCKER

    @property
    def is_adversarial(self) -> bool:
        return self.klass == ADVERSARIAL

    @property
    def persistable(self) -> bool:
        """May this situation become a lesson (if a harness declared it)?"""
        return self.source == DECLARED and self.is_blocker and self.kind not in NEVER_PERSISTED

    def as_json(self) -> dict:
        body = asdict(self)
        body.pop("extra")
        body["class"] = self.klass
        body["persistable"] = self.persistable
        if self.source == INFERRED:
            for key in ("unblock", "probe", "env"):
                body.pop(key)
        else:
            body.pop("rule")
        return body


def _refuse(field_name: str, message: str, *, code: str = "invalid_situation") -> ApplicationError:
    return ApplicationError(
        f"Invalid situation: {field_name}: {message}", code=code, fields={field_name: [message]}
    )


def _text(raw: dict, key: str, prefix: str, max_chars: int, *, required: bool = False) -> str:
    value = raw.get(key, "")
    name = f"{prefix}.{key}"
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise _refuse(name, "must be a string")
    check_json_strings(name, value)
    value = value.strip()
    if required and not value:
        raise _refuse(name, "is required: name what is blocked (e.g. the binary, host or path)")
    if len(value) > max_chars:
        raise _refuse(name, f"must be at most {max_chars} characters")
    return value


def _probe(raw: Any, prefix: str) -> dict | None:
    name = f"{prefix}.probe"
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise _refuse(name, 'must be an object {"tool": ..., "args": {...}}')
    unknown = sorted(set(raw) - {"tool", "args"})
    if unknown:
        raise _refuse(f"{name}.{unknown[0]}", "unknown field")
    tool = raw.get("tool")
    if not isinstance(tool, str) or not tool.strip() or len(tool) > SUBJECT_MAX:
        raise _refuse(f"{name}.tool", f"must be a tool name of 1-{SUBJECT_MAX} characters")
    args = raw.get("args", {})
    if not isinstance(args, dict):
        raise _refuse(f"{name}.args", "must be an object")
    check_json_strings(name, args)
    probe = {"tool": tool.strip(), "args": args}
    if len(repr(probe).encode()) > PROBE_MAX_BYTES:
        raise _refuse(name, f"must be at most {PROBE_MAX_BYTES} bytes")
    return probe


_DECLARED_KEYS = {"kind", "subject", "unblock", "probe", "interactive", "detail", "env"}


def situation_validate(raw: Any, *, harness: bool, prefix: str = "situation") -> Situation:
    """A declared situation, checked: a known ``kind`` and a ``subject`` (422 naming the
    field otherwise); ``unblock`` and ``probe`` only through a harness token (403)."""
    if not isinstance(raw, dict):
        raise _refuse(prefix, "must be an object with at least kind and subject")
    unknown = sorted(set(raw) - _DECLARED_KEYS)
    if unknown:
        raise _refuse(f"{prefix}.{unknown[0]}", "unknown field")
    kind = raw.get("kind")
    if kind not in KINDS:
        raise _refuse(f"{prefix}.kind", "must be one of " + ", ".join(KINDS))
    subject = _text(raw, "subject", prefix, SUBJECT_MAX, required=True)
    unblock = _text(raw, "unblock", prefix, TEXT_MAX)
    detail = _text(raw, "detail", prefix, TEXT_MAX)
    env = _text(raw, "env", prefix, ENV_MAX)
    probe = _probe(raw.get("probe"), prefix)
    interactive = raw.get("interactive", False)
    if not isinstance(interactive, bool):
        raise _refuse(f"{prefix}.interactive", "must be true or false")
    if (unblock or probe) and not harness:
        which = f"{prefix}.unblock" if unblock else f"{prefix}.probe"
        raise ApplicationError(
            "unblock and probe are commands a person or the harness will run: they are "
            "accepted only from a harness-scoped token (the tool code), never the agent scope.",
            code="harness_scope_required",
            fields={which: ["needs a harness-scoped token"]},
            status_code=403,
        )
    if (unblock or probe) and KINDS[kind] != BLOCKER:
        which = f"{prefix}.unblock" if unblock else f"{prefix}.probe"
        raise _refuse(which, "only a blocker has an unblock action or a probe")
    refuse_secrets({f"{prefix}.unblock": unblock, f"{prefix}.detail": detail})
    return Situation(
        kind=kind,
        subject=subject,
        source=DECLARED,
        unblock=unblock,
        probe=probe,
        interactive=interactive,
        detail=detail,
        env=env,
    )
