"""Erasure really deletes: by each selector, derived rows too, and nothing else.

Every test plants a unique marker only where its selector reaches, erases, and
then sweeps every text/JSON/byte/full-text column of every table (enumerated
from information_schema) and every key of the cache and broker database.
"""

import pytest

from memory.core.actors import Actor
from memory.identity.projects import project_digest
from memory.models import (
    AuditEvent,
    ConfidenceChange,
    IdempotencyRecord,
    Lesson,
    LessonEvidence,
    LessonState,
    SkillDelta,
)
from memory.privacy.erasure import erasure_execute, erasure_preview
from memory.privacy.selection import ERASURE_SELECTORS, Selector, selector_parse
from tests.factories.privacy import (
    EVERYTHING,
    bundle,
    confirm_lesson,
    exists,
    new_marker,
    ready_agent,
    redis_sweep,
    rows_of,
    sql_sweep,
    table_counts,
    workspace_ready,
)
from tests.factories.skills import backed

pytestmark = pytest.mark.django_db

# What each selector reaches in a bundle: the marker is planted only there.
REACH = {
    "agent": EVERYTHING - {"project_label"},  # a project's name is nobody's own words
    "project": frozenset({"outcome", "lesson", "project_label"}),
    "context": frozenset({"knowledge", "outcome", "lesson", "turns"}),
    "session": frozenset(
        {"knowledge", "outcome", "lesson", "delta", "fact", "turns", "tool_calls"}
    ),
    "entity": frozenset({"knowledge"}),
    "text": EVERYTHING,
}
# Tables whose rows of the erased bundle must be gone after each selector.
GONE = {
    "agent": {"memory.Knowledge", "memory.Outcome", "memory.Lesson", "memory.SkillDelta"},
    "project": {"memory.Outcome", "memory.Lesson", "memory.ProjectLabel"},
    "context": {"memory.Knowledge", "memory.Outcome", "memory.Lesson"},
    "session": {
        "memory.Knowledge",
        "memory.Outcome",
        "memory.Lesson",
        "memory.SkillDelta",
        "memory.LearnedFact",
    },
    "entity": {"memory.Knowledge"},
    "text": {
        "memory.Knowledge",
        "memory.Outcome",
        "memory.Lesson",
        "memory.SkillDelta",
        "memory.LearnedFact",
        "memory.ProjectLabel",
    },
}
# A review item points at a lesson and an item: it goes with either.
for _gone in GONE.values():
    _gone.add("memory.ReviewItem")


def _selector(kind, erased, workspace, marker):
    data = {
        "agent": {"agent": erased.agent.name},
        "project": {"project_remote": erased.project_remote},
        "context": {"context": erased.context},
        "session": {"session": erased.session},
        "entity": {"entity": erased.entity},
        "text": {"text": marker.upper()},  # case-insensitive
    }[kind]
    return selector_parse(workspace=workspace, data=data, allowed=ERASURE_SELECTORS)


@pytest.fixture(autouse=True)
def _no_truncate(settings):
    # These tests erase inside the test's own open transaction, whose locks the
    # VACUUM truncation step would wait 5 s for; the real-worker tests keep it on.
    settings.CAIRN_ERASURE_VACUUM_TRUNCATE = False


@pytest.fixture
def populated(workspace):
    workspace_ready(workspace)
    return workspace


@pytest.mark.parametrize("kind", ["agent", "project", "context", "session", "entity", "text"])
def test_it_erases_everything_a_selector_reaches_and_nothing_else(populated, kind):
    workspace = populated
    marker = new_marker()
    erased_agent = ready_agent(workspace, "erased-agent")
    kept_agent = ready_agent(workspace, "kept-agent") if kind == "agent" else erased_agent
    erased = bundle(agent=erased_agent, name="e", marker=marker, marked=REACH[kind])
    kept = bundle(agent=kept_agent, name="k")
    assert sql_sweep(marker), "the marker was planted"
    assert redis_sweep(marker) or "delta" not in REACH[kind]
    before = table_counts(workspace)

    selector = _selector(kind, erased, workspace, marker)
    preview = erasure_preview(workspace=workspace, selector=selector)
    body = erasure_execute(workspace=workspace, selector=selector)

    assert sql_sweep(marker) == {}
    assert redis_sweep(marker) == []
    # Error items come from tool calls, which have no context or entity.
    gone = rows_of(erased, error_items="tool_calls" in REACH[kind])
    for label in GONE[kind]:
        for pk in gone[label]:
            assert not exists(label, pk), (label, pk)
    for label, pks in rows_of(kept).items():
        for pk in pks:
            assert exists(label, pk), f"{label} {pk} of the kept bundle was deleted"
    after = table_counts(workspace)
    # Rows deleted are exactly the rows reported; the only rows added are the
    # ledger rows of items recomputed without the erased evidence.
    added = {"memory.ConfidenceChange": ConfidenceChange.objects.filter(kind="erasure").count()}
    for label, count in before.items():
        assert after[label] == count - body["counts"].get(label, 0) + added.get(label, 0), label
    assert body["remaining"] == {}
    # The preview promised what the job did.
    assert preview.counts == body["counts"]
    assert preview.total > 0


def test_it_keeps_only_kept_evidence_of_a_mixed_lesson_and_recomputes_it(populated):
    workspace = populated
    agent = ready_agent(workspace, "mixed")
    erased = bundle(agent=agent, name="e", session="sess-erased")
    lesson = Lesson.objects.get(pk=erased.lessons[0])
    kept_outcome = confirm_lesson(
        agent=agent,
        lesson_id=lesson.pk,
        session="sess-kept",
        outcome_id="kept-1",
        project_remote=erased.project_remote,
    )
    lesson.refresh_from_db()
    assert lesson.confidence == pytest.approx(0.65)  # born 0.5 from e, +0.15 from kept

    selector = Selector(kind="session", value="sess-erased")
    preview = erasure_preview(workspace=workspace, selector=selector)
    assert preview.recompute == {"memory.Lesson": 1}
    erasure_execute(workspace=workspace, selector=selector)

    lesson.refresh_from_db()
    assert list(
        LessonEvidence.objects.filter(lesson=lesson).values_list("outcome_id", flat=True)
    ) == [kept_outcome]
    # Recomputed from what is left: one supporting outcome, as if it alone had taught it.
    assert lesson.confidence == pytest.approx(0.5)
    assert lesson.state == LessonState.ACTIVE
    ledger = ConfidenceChange.objects.filter(target_type="lesson", target_id=lesson.pk)
    assert lesson.birth_confidence + sum(r.after - r.before for r in ledger) == pytest.approx(
        lesson.confidence
    )
    last = ledger.order_by("at", "id").last()
    assert (last.cause, last.kind, last.before, last.after) == ("person", "erasure", 0.65, 0.5)
    assert (
        not ledger.filter(evidence_id__startswith="outcome:")
        .exclude(evidence_id=f"outcome:{kept_outcome}")
        .exists()
    )
    assert AuditEvent.objects.filter(action="erasure.recompute", target_id=str(lesson.pk)).exists()


def test_it_erases_a_lesson_whose_only_evidence_was_erased(populated):
    workspace = populated
    agent = ready_agent(workspace, "only")
    erased = bundle(agent=agent, name="e")
    kept = bundle(agent=agent, name="k")
    erasure_execute(workspace=workspace, selector=Selector(kind="session", value=erased.session))
    assert not Lesson.objects.filter(pk__in=erased.lessons).exists()
    assert Lesson.objects.filter(pk__in=kept.lessons).count() == len(kept.lessons)
    # Its ledger rows went with it (they point at it by id, without a foreign key).
    assert not ConfidenceChange.objects.filter(
        target_type="lesson", target_id__in=erased.lessons
    ).exists()


def test_it_erases_earlier_versions_of_an_erased_lesson(populated):
    from memory.lessons.lifecycle import lesson_edit

    workspace = populated
    agent = ready_agent(workspace, "lineage")
    erased = bundle(agent=agent, name="e")
    first = Lesson.objects.get(pk=erased.lessons[0])
    second = lesson_edit(
        lesson=first, text="Prefer uv over pip for this project.", actor=Actor.system("test")
    )
    third = lesson_edit(
        lesson=second, text="Prefer uv everywhere in this project.", actor=Actor.system("test")
    )
    erasure_execute(
        workspace=workspace,
        selector=Selector(kind="project", value=project_digest(remote=erased.project_remote)),
    )
    assert not Lesson.objects.filter(pk__in=[first.pk, second.pk, third.pk]).exists()


def test_it_loops_until_nothing_matches_not_the_first_batch(populated, settings):
    settings.CAIRN_ERASURE_BATCH = 2
    workspace = populated
    agent = ready_agent(workspace, "many")
    marker = new_marker()
    for n in range(7):
        bundle(agent=agent, name=f"b{n}", marker=marker, marked=EVERYTHING)
    body = erasure_execute(workspace=workspace, selector=Selector(kind="text", value=marker))
    assert body["counts"]["memory.SkillDelta"] == 7
    assert body["counts"]["memory.Knowledge"] == 14  # 7 items and 7 error items
    # Two turns each: the request, and the turn where the person named the fact it set.
    assert body["counts"]["memory.ConversationTurn"] == 14
    assert body["counts"]["memory.ToolCall"] == 7
    assert sql_sweep(marker) == {}


def test_it_erases_idempotency_replays_that_quote_erased_rows(populated):
    workspace = populated
    agent = ready_agent(workspace, "replays")
    erased = bundle(agent=agent, name="e")
    kept = bundle(agent=agent, name="k")
    erasure_execute(workspace=workspace, selector=Selector(kind="session", value=erased.session))
    keys = set(IdempotencyRecord.objects.filter(agent=agent).values_list("key", flat=True))
    assert keys == {"key-k"}
    assert SkillDelta.objects.filter(pk__in=kept.deltas).count() == 1


def test_it_forgets_cached_effective_skills_of_erased_deltas(populated):
    from django.core.cache import cache

    workspace = populated
    agent = ready_agent(workspace, "cached")
    erased = bundle(agent=agent, name="e")
    pattern = cache.make_key(f"skills:effective:v1:{workspace.pk}:{agent.pk}:*")
    client = cache._cache.get_client(write=False)
    assert list(client.scan_iter(match=pattern))
    body = erasure_execute(
        workspace=workspace, selector=Selector(kind="session", value=erased.session)
    )
    assert body["effects"]["cache_keys"] >= 1
    assert list(client.scan_iter(match=pattern)) == []


def test_it_vacuums_the_tables_it_touched(populated):
    workspace = populated
    agent = ready_agent(workspace, "vac")
    erased = bundle(agent=agent, name="e")
    body = erasure_execute(
        workspace=workspace, selector=Selector(kind="agent", value=agent.name, agent=agent)
    )
    assert "memory_knowledge" in body["effects"]["vacuumed"]
    assert "memory_skilldelta" in body["effects"]["vacuumed"]
    del erased


def test_it_never_touches_another_workspace(populated, django_user_model):
    from tests.factories.identity import WorkspaceFactory

    other = WorkspaceFactory()
    workspace_ready(other)
    marker = new_marker()
    theirs = bundle(agent=ready_agent(other, "x"), name="o", marker=marker, marked=EVERYTHING)
    mine = bundle(agent=ready_agent(populated, "y"), name="m", marker=marker, marked=EVERYTHING)
    erasure_execute(workspace=populated, selector=Selector(kind="text", value=marker))
    for label, pks in rows_of(theirs).items():
        assert all(exists(label, pk) for pk in pks), label
    assert not any(exists(label, pk) for label, pks in rows_of(mine).items() for pk in pks)


def test_it_erases_summaries_built_from_erased_turns(populated):
    from memory.core.actors import Actor
    from memory.knowledge.remember import knowledge_remember

    workspace = populated
    agent = ready_agent(workspace, "summaries")
    erased = bundle(agent=agent, name="e")
    kept = bundle(agent=agent, name="k")
    job = Actor.system("consolidate")
    summary = knowledge_remember(
        workspace=workspace,
        actor=job,
        content="Summary: the team discussed dependency installs over two sessions.",
        category="note",
        source="consolidation",
        metadata={"sessions": [erased.session, kept.session]},
    ).item
    other = knowledge_remember(
        workspace=workspace,
        actor=job,
        content="Summary: a quiet week with no incidents reported at all.",
        category="note",
        source="consolidation",
        metadata={"sessions": [kept.session]},
    ).item
    erasure_execute(workspace=workspace, selector=Selector(kind="session", value=erased.session))
    assert not exists("memory.Knowledge", summary.pk)
    assert exists("memory.Knowledge", other.pk)


def test_it_erases_facts_learned_from_the_turns_of_an_erased_delta(populated):
    from memory.models import LearnedFact
    from memory.skills.facts import fact_put

    workspace = populated
    agent = ready_agent(workspace, "facts")
    marker = new_marker()
    erased = bundle(agent=agent, name="e", marker=marker, marked=frozenset({"delta"}))
    kept = bundle(agent=agent, name="k")
    # Learned from the same turn as the delta: goes with it, though it holds no marker.
    sibling, _ = fact_put(
        channel="agent",
        workspace=workspace,
        agent=agent,
        namespace="priority_senders",
        key="sibling",
        value="sibling@example.com",
        provenance=backed(
            agent,
            {"source": "user_instruction", "turns": [f"{erased.session}#1"]},
            said="Sibling is sibling@example.com.",
        ),
    )
    erasure_execute(workspace=workspace, selector=Selector(kind="text", value=marker))
    assert not LearnedFact.objects.filter(pk=sibling.pk).exists()
    assert LearnedFact.objects.filter(pk__in=erased.facts + kept.facts).count() == 2


def test_it_erases_umbrellas_proposed_from_erased_deltas(populated):
    from memory.skills.deltas import delta_create
    from memory.skills.jobs import delta_consolidate
    from tests.memory.skills.test_jobs import SAME

    workspace = populated
    agent = ready_agent(workspace, "umbrella")
    made = [
        delta_create(
            channel="agent",
            agent=agent,
            skill_name="triage-inbox",
            kind="preference",
            anchor={"section": "drafting-replies"},
            payload={"body": text},
            provenance=backed(
                agent, {"source": "user_instruction", "turns": [f"umb-{n}#1"]}, said=text
            ),
        ).delta
        for n, text in enumerate(SAME)
    ]
    assert delta_consolidate(workspace=workspace)["proposed"] == 1
    umbrella = SkillDelta.objects.get(provenance_source="consolidation")
    # Erasing one member's session erases the umbrella written from its payload.
    erasure_execute(workspace=workspace, selector=Selector(kind="session", value="umb-0"))
    assert not SkillDelta.objects.filter(pk__in=[umbrella.pk, made[0].pk]).exists()
    assert SkillDelta.objects.filter(pk__in=[d.pk for d in made[1:]]).count() == len(made) - 1
