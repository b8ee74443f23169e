"""Tier-0 learned facts: data tools read directly, never prompt text (SPEC section 6)."""

from __future__ import annotations

import json
import re

from django.conf import settings
from django.db import transaction

from cairn.errors import ApplicationError
from memory.core.audit import audit_record
from memory.core.consent import Claim
from memory.core.locks import advisory_xact_lock
from memory.core.secrets import refuse_secrets
from memory.core.validation import bad_request, check_json_strings
from memory.models import Agent, LearnedFact, ProvenanceSource, Workspace
from memory.skills.skillmd import NAMESPACE_RE
from memory.skills.trust import provenance_classify

KEY_RE = re.compile(r"^[^/\s\x00-\x1f]{1,200}$")
SCOPE_MAX_CHARS = 200


def _key_forms(key: str) -> list[str]:
    """The key as written and in words (``forward_to`` → "forward to")."""
    words = " ".join(part for part in key.split("_") if part)
    return list(dict.fromkeys([key, words]))


def _value_words(value) -> list[str]:
    if isinstance(value, bool):
        return ["true", "yes", "on"] if value else ["false", "no", "off"]
    if isinstance(value, str):
        return [value]
    if isinstance(value, int | float):
        return [str(value)]
    return [json.dumps(value, ensure_ascii=False, sort_keys=True)]


FACT_SENTENCES = (
    "{key} {value}",
    "{key} is {value}",
    "{key}: {value}",
    "{key} = {value}",
    "set {key} to {value}",
    "{key} should be {value}",
    "use {value} for {key}",
)


def fact_claim(*, key: str, value) -> Claim:
    """What a cited user turn must say for a fact to apply at once: one of its own
    sentences is one of ``FACT_SENTENCES`` with the key's words (``forward_to`` →
    "forward to") and the value ("Forward to ops@example.com.", "Set timezone to
    Europe/Paris."); a true/false value is said as true/yes/on or false/no/off.
    "Never forward anything to ops@example.com" is none of them, so it is not consent.

    The looser match (every text and number of the value in one turn) is kept for
    the refusal's message only: a fact has no staged state, it applies or is refused.
    """
    pieces: list[str] = []

    def walk(node) -> None:
        if isinstance(node, dict):
            for item in node.values():
                walk(item)
        elif isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, str) or (
            isinstance(node, int | float) and not isinstance(node, bool)
        ):
            pieces.append(str(node))

    walk(value)
    sentences = tuple(
        dict.fromkeys(
            form.format(key=named, value=said)
            for said in _value_words(value)
            for named in _key_forms(key)
            for form in FACT_SENTENCES
        )
    )
    return Claim(sentences, tuple(pieces or [key]))


@transaction.atomic
def fact_put(
    *,
    workspace: Workspace,
    agent: Agent | None,
    namespace: str,
    key: str,
    value,
    scope: str = "global",
    provenance=None,
    field_prefix: str = "",
    channel: str,
) -> tuple[LearnedFact, bool]:
    """Set ``namespace/key`` to ``value``; returns (current fact, created).

    1. Validate names and size (400), refuse credentials (422).
    2. Refuse (422) unless the person consented: a fact applies the moment it is
       written, so only a ``user_instruction`` whose cited turn, posted by this
       agent's harness, says it as one of its own sentences (``fact_claim``,
       ``memory.core.consent.consent_by_turn``) sets one. ``outcome_evidence`` never
       does: a passed outcome shows a check ran, not what a person wants.
    3. The same value and scope again changes nothing. A new value inserts a
       new row and points the old one at it (supersede, never delete).
    """

    check_json_strings(f"{field_prefix}value", [namespace, key, value, scope, provenance])

    if not isinstance(namespace, str) or not NAMESPACE_RE.match(namespace):
        raise bad_request(
            f"{field_prefix}namespace",
            "Fact namespaces are 1-64 lowercase letters, digits, '_', '.', '-'.",
        )
    if not isinstance(key, str) or not KEY_RE.match(key):
        raise bad_request(f"{field_prefix}key", "Fact keys are 1-200 characters, no '/' or spaces.")
    if value is None:
        raise bad_request(f"{field_prefix}value", "A fact needs a non-null value.")
    if len(json.dumps(value, ensure_ascii=False)) > settings.CAIRN_FACT_VALUE_MAX_CHARS:
        raise ApplicationError(
            f"A fact value must be at most {settings.CAIRN_FACT_VALUE_MAX_CHARS} characters "
            "as JSON.",
            code="too_large",
            fields={f"{field_prefix}value": ["too large"]},
        )
    scope = (scope or "global").strip() or "global"
    if len(scope) > SCOPE_MAX_CHARS:
        raise bad_request(f"{field_prefix}scope", f"At most {SCOPE_MAX_CHARS} characters.")
    refuse_secrets(
        {f"{field_prefix}key": key, f"{field_prefix}value": value, f"{field_prefix}scope": scope}
    )
    if agent is None:
        raise bad_request(f"{field_prefix}provenance", "A learned fact is an agent's.")
    classified = provenance_classify(
        provenance, agent=agent, claim=fact_claim(key=key, value=value)
    )
    source, _, stored, unbacked = classified[:4]
    if source == ProvenanceSource.OUTCOME_EVIDENCE:
        unbacked = (
            "a passed outcome shows that a check ran, not what the person wants; a fact "
            "needs the person's own sentence (user_instruction)"
        )
    if classified.consent is None:
        field = {
            ProvenanceSource.USER_INSTRUCTION: "provenance.turns",
            ProvenanceSource.OUTCOME_EVIDENCE: "provenance.outcomes",
        }.get(source, "provenance.source")
        raise ApplicationError(
            "A fact applies immediately, so it needs the person's consent: one of their "
            "own sentences in a user turn this agent's harness reported (e.g. 'Set "
            f"{key} to <value>.'); here {unbacked}. Propose it as a delta instead: a "
            "person decides on it.",
            code="untrusted_fact",
            fields={field: [f"{source} is untrusted: {unbacked}"]},
        )

    # The first write of a key has no row to lock: writers of one key take turns on
    # an advisory lock, so the second sees the first's row (one current row per key).
    advisory_xact_lock(f"learned_fact:{workspace.pk}:{namespace}:{key}")
    current = (
        LearnedFact.objects.select_for_update()
        .filter(workspace=workspace, namespace=namespace, key=key, superseded_by__isnull=True)
        .first()
    )
    if current is not None and current.value == value and current.scope == scope:
        return current, False
    if current is not None:
        # Step aside first (one current row per key is a unique constraint), then link.
        current.superseded_by = current
        current.save(update_fields=["superseded_by"])
    fact = LearnedFact.objects.create(
        channel=channel,
        workspace=workspace,
        agent=agent,
        namespace=namespace,
        key=key,
        value=value,
        scope=scope,
        provenance=stored,
        provenance_source=source,
    )
    if current is not None:
        current.superseded_by = fact
        current.save(update_fields=["superseded_by"])
    audit_record(
        workspace=workspace,
        actor=f"agent:{agent.name}" if agent else "system",
        action="fact.put",
        target_type="learned_fact",
        target_id=fact.pk,
        details={
            "namespace": namespace,
            "supersedes": current.pk if current else None,
            "source": source,
        },
    )
    return fact, current is None
