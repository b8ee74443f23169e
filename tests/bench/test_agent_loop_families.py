"""The agent-loop families under the shipped extraction (issue 51): the key lesson
("use the good command instead of the naive one") can form in at least 28 of the 32
families, and the recovery lesson in every family the change touches. The list of
families comes from the world itself, so a new family is measured too."""

from __future__ import annotations

import random
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.agent_loop.agent import AgentParams, Item, ScriptedAgent  # noqa: E402
from bench.agent_loop.key_lessons import key_lessons  # noqa: E402
from bench.agent_loop.policies import Policy, run_task  # noqa: E402
from bench.agent_loop.world import Project, build_families  # noqa: E402
from memory.lessons.lesson_text import mechanical_text  # noqa: E402


def test_the_key_lesson_can_form_in_at_least_28_of_32_families():
    rows = key_lessons()
    assert len(rows) == 32
    missing = [r["family"] for r in rows if not r["key_lesson"]]
    assert len(rows) - len(missing) >= 28, missing


def test_the_recovery_lesson_can_form_in_every_family_the_change_touches():
    rows = [r for r in key_lessons() if r["recovery_lesson"] is not None]
    assert rows
    assert [r["family"] for r in rows if not r["recovery_lesson"]] == []


def test_the_runner_reports_the_shipped_extraction_not_labels():
    from cairn_client.hooks import bash_operation

    for fam in build_families():
        for approach in fam.approaches:
            assert approach.key == bash_operation(" ".join(approach.argv))


class Served(Policy):
    """Serves fixed items at decision time; records every command it was asked about."""

    def __init__(self, items):
        self.items, self.checked, self.gated = items, [], []

    def check(self, fam, approach):
        self.checked.append(approach.op)
        return self.items

    def command_allowed(self, command):
        self.gated.append(command)
        return True


@pytest.mark.parametrize("seed", range(5))
def test_the_command_it_is_diverted_to_is_checked_too(seed):
    """A stale lesson diverts naive → good; a newer one warns against good → alt: the
    agent runs alt, because the diverted-to command is checked like any other."""
    fam = next(f for f in build_families() if f.changes and f.kind == "installer")

    def item(ref, failed, ok):
        text = mechanical_text(failed_op=failed.op, ok_op=ok.op, target=ok.target)
        from bench.agent_loop.agent import parse_item

        return parse_item(ref, text, confidence=0.95)

    items = [item("lesson:1", fam.naive, fam.good), item("lesson:2", fam.good, fam.alt)]
    policy = Served(items)
    agent = ScriptedAgent(AgentParams(follow_base=1.0), random.Random(seed))
    project = Project.create([fam], seed=seed)
    project.set_changed()
    try:
        r = run_task(policy=policy, agent=agent, project=project, fam=fam, attack_live=False)
    finally:
        shutil.rmtree(project.root)
    assert [a.approach for a in r.attempts] == [fam.alt]
    assert r.success and r.failed_steps == 0
    assert {fam.naive.op, fam.good.op, fam.alt.op} <= set(policy.checked)
    assert policy.gated == [" ".join(fam.alt.argv)]  # the gate saw only what ran
    assert isinstance(items[0], Item)
