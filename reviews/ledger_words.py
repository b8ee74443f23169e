"""A lesson's provenance and its confidence ledger, in words a reviewer reads.

The ledger stores machine keys (``user_confirmed``, ``evidence``,
``person:3:lesson:4:20794``); a page showed them as they were. Here each row becomes
a sentence: what moved the confidence, who did it, and from which outcome.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model

# What a ledger row's kind means, as the end of "Confidence …".
KIND_WORDS = {
    "test_passed": "rose: an outcome passed with this lesson in play",
    "contradiction": "fell: an outcome failed with this lesson in play",
    "self_report": "moved on the agent's own report",
    "diff_accepted": "rose: the person accepted the agent's change",
    "user_confirmed": "rose: confirmed as right",
    "cited": "rose: a turn cited it",
    "idle": "decayed: the lesson was not used for a while",
    "restore": "reset to the floor when it was restored",
    "erasure": "recomputed after an erasure removed some of its evidence",
}
CAUSE_WORDS = {
    "evidence": "moved on new evidence",
    "decay": "decayed: the lesson was not used for a while",
    "reconcile": "corrected by the nightly reconcile",
    "person": "set by a person",
}
CHANNEL_WHO = {
    "harness": "reported by the harness",
    "person": "by a person",
    "agent": "on the agent's own word",
    "system": "by Cairn itself",
}
SOURCE_WORDS = {
    "loop": "learned from a failed attempt and the passing one after it",
    "extractor": "extracted from a conversation",
    "model": "claimed by the model",
    "user": "taken from a person's instruction",
}
CHANNEL_THROUGH = {
    "harness": "sent by the harness",
    "person": "written by a person",
    "agent": "sent by the agent itself",
    "system": "written by Cairn",
}


def provenance(lesson) -> str:
    """Where a lesson came from and who sent it, e.g. "claimed by the model, sent by
    the harness (which relays the claim: it does not verify it)".

    The channel says who sent the record, not that anything checked it: a model's
    claim relayed by the harness is still a claim until an outcome supports it.
    """
    source = SOURCE_WORDS.get(lesson.source, lesson.get_source_display().lower())
    through = CHANNEL_THROUGH.get(lesson.channel, lesson.channel)
    sentence = f"{source[0].upper()}{source[1:]}, {through}"
    if lesson.source == "model" and lesson.channel == "harness":
        sentence += " (which relays the claim: it does not verify it)"
    return sentence + "."


def _person_id(evidence_id: str) -> int | None:
    kind, _, rest = (evidence_id or "").partition(":")
    head = rest.split(":", 1)[0]
    return int(head) if kind == "person" and head.isdigit() else None


def describe_changes(changes: list[dict]) -> None:
    """Add ``words`` (what happened) and ``who`` (by whom) to each ledger row, in place;
    the usernames of the people behind ``person:<id>:…`` evidence in one query."""
    ids = {pk for change in changes if (pk := _person_id(change.get("evidence_id", "")))}
    names = dict(get_user_model().objects.filter(pk__in=ids).values_list("pk", "username"))
    for change in changes:
        kind, cause = change.get("kind") or "", change.get("cause") or ""
        words = KIND_WORDS.get(kind) or CAUSE_WORDS.get(cause) or "changed"
        change["words"] = words[0].upper() + words[1:]
        person = _person_id(change.get("evidence_id", ""))
        if person is not None:
            change["who"] = f"by {names.get(person, 'a person no longer here')}"
        else:
            change["who"] = CHANNEL_WHO.get(change.get("channel") or "", "")
