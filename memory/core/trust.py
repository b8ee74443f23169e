"""The trust kernel: which channels weigh, and who may move a confidence which way.

SPEC section 2: only the harness (what really ran) and people produce weighted
evidence. That set is written here once; every module that asks "does this
channel count?" calls :func:`channel_weighs` instead of spelling the set out.

The system channel (a job: decay, reconcile) is not a witness: it may lower a
confidence, never raise one (:func:`confidence_channel_check`, called by the one
writer of confidence, ``memory.lessons.evidence.confidence_apply``). Lesson and
knowledge births go through :func:`birth_of` (one policy for every create).

The other half of the kernel, consent to a learned change, is
``memory.core.consent`` (a ``Consent`` value only a role check or a verified
cited turn can produce).
"""

from __future__ import annotations

from typing import NamedTuple

from django.conf import settings
from django.db.models import Exists, F, OuterRef, Q

from cairn.errors import ApplicationError
from memory.models import (
    Channel,
    ConfidenceChange,
    Knowledge,
    LessonState,
    Source,
    TargetType,
)

WEIGHING_CHANNELS: frozenset[str] = frozenset({str(Channel.HARNESS), str(Channel.PERSON)})


def channel_weighs(channel: str) -> bool:
    """Whether what came through ``channel`` may move a confidence or activate anything."""
    return str(channel) in WEIGHING_CHANNELS


def confidence_channel_check(*, channel: str, before: float, after: float) -> None:
    """403 unless ``channel`` may move a confidence from ``before`` to ``after``.

    The harness and people may move it either way; the system channel only lowers
    (decay, a reconcile contradiction); the agent channel never moves it.
    """
    if channel_weighs(channel):
        return
    if str(channel) == Channel.SYSTEM:
        if after <= before:
            return
        raise ApplicationError(
            "A job may lower a confidence, never raise one: only evidence the harness "
            "reported or a person's action does.",
            code="channel_not_allowed",
            status_code=403,
        )
    raise ApplicationError(
        "The model's own word never moves a confidence: only evidence the harness "
        "reported or a person's action does.",
        code="channel_not_allowed",
        status_code=403,
    )


class Birth(NamedTuple):
    """What a new lesson starts as: its state and its confidence."""

    state: str
    confidence: float


def birth_of(*, channel: str, verified: bool) -> Birth:
    """The one birth policy for lessons (SPEC section 4).

    A lesson is born active at the birth confidence only when ``verified`` (an
    attributed, harness-reported passed outcome backs it) and it came through a
    channel that weighs; everything else is *claimed* at the claimed confidence and
    is never served until a confirmation.
    """
    if verified and channel_weighs(channel):
        return Birth(str(LessonState.ACTIVE), settings.CAIRN_LESSON_BIRTH_CONFIDENCE)
    return Birth(str(LessonState.CLAIMED), settings.CAIRN_LESSON_CLAIMED_CONFIDENCE)


def knowledge_earned_ids(ids, *, workspace_id: int) -> set[int]:
    """Which of these knowledge items of the workspace are *earned*: written through a
    channel that weighs or by a person's hand (source user, sealed, pinned), or raised
    at least once by harness or person evidence. One query, in the workspace."""
    ids = sorted({int(pk) for pk in ids})
    if not ids:
        return set()
    weighing = sorted(WEIGHING_CHANNELS)
    raised = ConfidenceChange.objects.filter(
        workspace_id=workspace_id,
        target_type=TargetType.KNOWLEDGE,
        target_id=OuterRef("pk"),
        channel__in=weighing,
        after__gt=F("before"),
    )
    earned = Knowledge.objects.filter(workspace_id=workspace_id, pk__in=ids).filter(
        Q(channel__in=weighing)
        | Q(source=Source.USER)
        | Q(sealed=True)
        | Q(pinned=True)
        | Q(Exists(raised))
    )
    return set(earned.values_list("pk", flat=True))


def words_may_change(*, actor, earned: bool) -> bool:
    """The one rule: only the harness or a person changes the words of an earned item.

    Everyone else (the agent, a job relaying the agent's or anyone's words) adds a new
    claimed item beside it, or a contradiction for a person to review."""
    return actor.weighs or not earned


def words_change_require(*, actor, item) -> None:
    """403 when ``actor`` would change the words of an earned item (see above)."""
    if words_may_change(
        actor=actor, earned=bool(knowledge_earned_ids([item.pk], workspace_id=item.workspace_id))
    ):
        return
    raise ApplicationError(
        f"Knowledge item {item.pk} was earned (confirmed by the harness or a person), so "
        "only the harness or a person changes its words. Store your wording as a new "
        "item: it is kept beside this one as a claim, and a contradiction goes to review.",
        code="earned",
        fields={"content": ["earned item: add a new item instead"]},
        status_code=403,
    )
