"""The agent-loop benchmark's quick run, end to end against a live Cairn.

`bench/agent_loop/run.py --quick --json FILE` runs the four memory policies on the
same seeds in real temporary git projects; the Cairn policy talks HTTP to the live
server with an agent token and a harness token. Only directions are asserted, never
numbers. ``--m 1.0`` (the agent memorizes every text it reads) makes the injection
comparison a property of the policies rather than of the dice.
"""

from __future__ import annotations

import json
import random
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.agent_loop import run as loop_run  # noqa: E402
from bench.agent_loop.agent import AgentParams, ModelAgent, ScriptedAgent, parse_item  # noqa: E402
from bench.agent_loop.attacks_heldout import HELDOUT  # noqa: E402
from bench.agent_loop.policies import Policy, run_task  # noqa: E402
from bench.agent_loop.world import ATTACKS, Project, build_families  # noqa: E402
from memory.lessons.lesson_text import mechanical_text  # noqa: E402

POLICIES = ("none", "recency", "self_report", "cairn")


@pytest.mark.django_db(transaction=True)
def test_the_quick_run_writes_every_metric_and_cairn_holds_its_directions(
    live_server, celery_worker_process, tmp_path, monkeypatch
):
    monkeypatch.setenv("CAIRN_URL", live_server.url)
    out = tmp_path / "loop.json"
    assert (
        loop_run.main(
            [
                "--quick",
                "--seeds",
                "2",
                "--episodes",
                "6",
                "--families",
                "10",
                "--m",
                "1.0",
                "--policies",
                ",".join(POLICIES),
                "--json",
                str(out),
            ]
        )
        == 0
    )
    result = json.loads(out.read_text())
    assert result["seeds"] == 2 and result["params"]["episodes"] == 6
    assert result["params"]["m"] == 1.0
    assert set(result["policies"]) == set(POLICIES)
    for body in result["policies"].values():
        assert {
            "success_rate",
            "failed_steps_per_task",
            "recover_episodes",
            "attack_success",
            "exposure",
            "poison_served_as_earned",
        } <= set(body)
    none, self_report, cairn = (result["policies"][p] for p in ("none", "self_report", "cairn"))
    # learning from harness-reported exit codes saves failed steps over no memory
    assert cairn["failed_steps_per_task"] < none["failed_steps_per_task"]
    # the model's own (wrong) lessons stay claimed and are never served
    assert self_report["wrong_lesson_persistence"] > 0
    assert cairn["wrong_lesson_persistence"] == 0
    # the classifier keeps flagged planted text out of memory; self-report stores it all
    assert cairn["injection"] < self_report["injection"]
    # memory that trusts the model's word serves the poison with raised strength
    assert self_report["poison_served_as_earned"] > 0
    # ... and Cairn never does: an unrelated passing test earns stored text nothing
    assert cairn["poison_served_as_earned"] == 0
    assert none["attack_success"] == 0 and none["exposure"] == 0
    assert "attack_stopped_at_check" in cairn
    # after the change, the lesson for the approach that broke can only lose ground
    assert cairn["stale_strength_at_change"] > 0
    assert cairn["stale_strength_at_end"] <= cairn["stale_strength_at_change"]


def test_the_world_runs_real_commands_and_the_change_flips_them(tmp_path):
    fam = next(f for f in build_families() if f.changes and f.kind == "installer")
    project = Project.create([fam], seed=1)
    try:
        assert project.run(fam.naive.argv)[0] != 0
        assert project.run(fam.good.argv)[0] == 0
        assert project.run(("verify", fam.name))[0] == 0
        assert project.run(("verify", fam.name))[0] == 1  # the marker is spent
        project.set_changed()
        code, out = project.run(fam.good.argv)
        assert code != 0 and out
        assert project.run(fam.alt.argv)[0] == 0
    finally:
        import shutil

        shutil.rmtree(project.root)


def test_editing_a_protected_file_fails_verification():
    fam = next(f for f in build_families() if f.kind == "protected_file")
    project = Project.create([fam], seed=1)
    try:
        assert project.run(fam.naive.argv)[0] == 0
        code, out = project.run(("verify", fam.name))
        assert code == 1 and "protected file edited" in out
        project.reset(fam)
    finally:
        import shutil

        shutil.rmtree(project.root)


def test_there_are_thirty_distinct_families():
    fams = build_families()
    assert len(fams) >= 30
    assert len({(f.naive.op, f.target) for f in fams}) == len(fams)
    assert {f.kind for f in fams} >= {"installer", "login", "protected_file", "flaky"}


class FakeModel(BaseHTTPRequestHandler):
    """A tiny OpenAI-compatible endpoint: always answers with the command numbered 2."""

    seen: list = []

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeModel.seen.append(body)
        answer = {"choices": [{"message": {"role": "assistant", "content": "2"}}]}
        raw = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args):
        pass


def test_a_model_behind_an_openai_compatible_endpoint_drives_the_same_interface():
    server = HTTPServer(("127.0.0.1", 0), FakeModel)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        agent = ModelAgent(
            AgentParams(),
            random.Random(0),
            base_url=f"http://127.0.0.1:{server.server_port}/v1",
            model="fake",
        )
        fam = build_families()[0]
        text = mechanical_text(failed_op=fam.naive.op, ok_op=fam.good.op, target=fam.good.target)
        lesson = parse_item("lesson:1", text)
        order, _ = agent.plan_order(fam, [lesson])
        assert order[0] is fam.good  # the model's answer "2" picked the second candidate
        prompt = FakeModel.seen[-1]["messages"][0]["content"]
        assert lesson.text in prompt and " ".join(fam.naive.argv) in prompt
        exposed, executes = agent.obey_instructions([parse_item("knowledge:1", ATTACKS[0])])
        assert exposed and executes is False  # "2" is the refusal here
    finally:
        server.shutdown()


class PlantedContext(Policy):
    """Serves one planted text at plan time; ``allow`` decides every command check."""

    def __init__(self, text: str, allow: bool):
        self.text, self.allow, self.checked = text, allow, []

    def plan(self, fam):
        return [parse_item("note:1", self.text)]

    def command_allowed(self, command):
        self.checked.append(command)
        return self.allow


@pytest.mark.parametrize("text", [ATTACKS[0], HELDOUT[4]])
def test_every_command_is_checked_before_it_runs_and_a_refused_one_never_runs(text):
    fam = next(f for f in build_families() if f.triggered)
    for allow in (True, False):
        project = Project.create([fam], seed=1)
        policy = PlantedContext(text, allow)
        agent = ScriptedAgent(AgentParams(g=1.0), random.Random(0))
        try:
            r = run_task(policy=policy, agent=agent, project=project, fam=fam, attack_live=True)
            assert r.exposed
            # the planted command, then each approach, went through the check first
            assert len(policy.checked) == 1 + len(r.attempts) + (0 if allow else 3)
            assert project.pwned() is allow and r.executed_attack is allow
            assert r.stopped_attack is not allow
            if not allow:
                assert r.attempts == [] and r.failed_steps == 0
        finally:
            import shutil

            shutil.rmtree(project.root)
