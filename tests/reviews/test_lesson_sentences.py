"""A lesson's page reads like sentences in every state it can be in: no empty
variable's mark ("It is ."), a provenance line that says who sent it, and a ledger
in words (who confirmed it, from which outcome)."""

import pytest

from memory.lessons.evidence import evidence_apply, lesson_retire_system
from memory.lessons.lifecycle import lesson_edit, lesson_pin, lesson_retire, lesson_seal
from tests.factories.identity import person_actor
from tests.factories.lessons import LessonFactory
from tests.factories.review import LessonEvidenceFactory, OutcomeFactory
from tests.reviews.holes import text_holes, visible_lines

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


def _states(workspace, reviewer):
    """One lesson in each state a page can show, keyed by a name for the failure message."""
    made = {}
    for source in ("loop", "extractor", "model", "user"):
        for channel in ("harness", "agent", "person", "system"):
            made[f"claimed {source}/{channel}"] = LessonFactory(
                workspace=workspace, state="claimed", source=source, channel=channel
            )
    active = LessonFactory(workspace=workspace, source="model", channel="harness")
    outcome = OutcomeFactory(workspace=workspace)
    LessonEvidenceFactory(lesson=active, outcome=outcome)
    evidence_apply(
        target=active, kind="test_passed", evidence_id=f"outcome:{outcome.pk}", channel="harness"
    )
    evidence_apply(
        target=active, kind="contradiction", evidence_id=f"outcome:{outcome.pk}", channel="harness"
    )
    response = reviewer.post(f"/lessons/{active.pk}/confirm/", {"reason": "checked it"}, **HX)
    assert response.status_code == 200
    made["active with evidence and a confirmation"] = active
    made["active, confirmed by a person only"] = LessonFactory(workspace=workspace)
    reviewer.post(
        f"/lessons/{made['active, confirmed by a person only'].pk}/confirm/", {"reason": "ok"}, **HX
    )
    retired = LessonFactory(workspace=workspace)
    lesson_retire(
        lesson=retired, actor=person_actor("test"), reason="wrong since the CI image changed"
    )
    made["retired by a person"] = retired
    by_system = LessonFactory(workspace=workspace, confidence=0.05)
    lesson_retire_system(lesson=by_system, actor="system", reason="")
    made["retired by the system without a reason"] = by_system
    older = LessonFactory(workspace=workspace)
    made["edited (older version)"] = older
    made["edited (current version)"] = lesson_edit(
        lesson=older, text="Use uv.", actor=person_actor("test")
    )
    flagged = LessonFactory(workspace=workspace, scope="global", project_digest="")
    flagged = lesson_pin(
        lesson=flagged, pinned=True, actor=person_actor("test"), reason="essential"
    )
    made["pinned, sealed, global"] = lesson_seal(
        lesson=flagged, sealed=True, actor=person_actor("test"), reason="by hand"
    )
    return made


def test_every_lesson_state_reads_without_holes(member_client, workspace):
    reviewer = member_client(workspace=workspace, role="reviewer")
    problems = []
    for name, lesson in _states(workspace, reviewer).items():
        response = reviewer.get(f"/lessons/{lesson.pk}/")
        assert response.status_code == 200, name
        problems += [f"{name}: {line}" for line in text_holes(response.content.decode())]
    assert not problems, "\n".join(problems)


def test_the_hole_check_finds_the_holes_it_is_for():
    assert text_holes("<p>No outcome is attached. It is <strong></strong>.</p>")
    assert text_holes("<p>Retired by : “”</p>")
    assert text_holes("<td>outcome # </td>")
    assert not text_holes("<p>It is <strong>claimed</strong>.</p>")


def test_the_provenance_says_who_sent_it_and_a_relayed_claim_is_not_verified(
    member_client, workspace
):
    viewer = member_client(workspace=workspace, role="viewer")
    claim = LessonFactory(workspace=workspace, source="model", channel="harness")
    html = viewer.get(f"/lessons/{claim.pk}/").content.decode()
    line = next(x for x in visible_lines(html) if x.startswith("Claimed by the model"))
    assert "sent by the harness" in line and "does not verify it" in line
    assert "harness-verified" not in " ".join(visible_lines(html[html.index("provenance") :])[:2])
    loop = LessonFactory(workspace=workspace, source="loop", channel="harness")
    html = viewer.get(f"/lessons/{loop.pk}/").content.decode()
    assert "Learned from a failed attempt and the passing one after it, sent by the harness." in (
        visible_lines(html)
    )


def test_the_ledger_says_who_confirmed_and_from_which_outcome(member_client, workspace):
    reviewer = member_client(workspace=workspace, role="reviewer")
    lesson = LessonFactory(workspace=workspace)
    outcome = OutcomeFactory(workspace=workspace)
    evidence_apply(
        target=lesson, kind="test_passed", evidence_id=f"outcome:{outcome.pk}", channel="harness"
    )
    reviewer.post(f"/lessons/{lesson.pk}/confirm/", {"reason": "checked"}, **HX)
    html = reviewer.get(f"/lessons/{lesson.pk}/").content.decode()
    lines = visible_lines(html)
    assert "Rose: an outcome passed with this lesson in play, reported by the harness." in lines
    assert f"Rose: confirmed as right, by {reviewer.user.username}." in lines
    assert f"outcome #{outcome.pk}" in lines
    assert "user_confirmed" not in html and f"person:{reviewer.user.pk}:" not in html
