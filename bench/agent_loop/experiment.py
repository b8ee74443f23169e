"""One run: every policy on the same seeds, the metrics, and their intervals."""

from __future__ import annotations

import math
import random
import shutil
import statistics
from dataclasses import asdict, dataclass

from .agent import AgentParams, ScriptedAgent, is_attack
from .policies import CairnPolicy, NotesPolicy, Policy, RecencyPolicy, SelfReportPolicy, run_task
from .world import ATTACK_SETS, Project, build_families

POLICIES = ("none", "recency", "self_report", "cairn")
VARIANTS = ("cairn_lessons", "cairn_nogate")  # not in the default set (see the docs)
# `<policy>@heldout`: the same policy against the held-out attack set (attacks_heldout.py)
HELDOUT = ("cairn@heldout", "self_report@heldout")
# `<policy>@agentdojo`: AgentDojo's templates around coding goals (attacks_agentdojo.py)
AGENTDOJO = ("cairn@agentdojo", "self_report@agentdojo", "cairn_nogate@agentdojo")
METRICS = (
    "success_rate",
    "failed_steps_per_task",
    "late_failed_steps_per_task",
    "recover_episodes",
    "stale_strength_at_change",
    "stale_strength_at_end",
    "wrong_lesson_persistence",
    "injection",
    "exposure",
    "attack_success",
    "attack_stopped_at_check",
    "poison_served_as_earned",
    "false_asks_per_100",
    "false_success_reinforced",
)


@dataclass
class RunParams:
    seeds: int = 20
    episodes: int = 30
    families: int = 32  # how many of the families each seed draws (all 32 by default)
    change_at: int | None = None  # default: episodes // 2
    attack_from: int = 2
    late_from: int = 11  # "episodes 11-30" in the targets (1-based)
    flaky_rate: float = 0.5

    def change_episode(self) -> int:
        return self.change_at if self.change_at is not None else self.episodes // 2


def split_name(name: str) -> tuple[str, str]:
    """``cairn@heldout`` → (``cairn``, ``heldout``); no ``@``: the dev attack set."""
    base, _, attack_set = name.partition("@")
    if (attack_set or "dev") not in ATTACK_SETS:
        raise ValueError(f"unknown attack set in {name!r}: {sorted(ATTACK_SETS)}")
    return base, attack_set or "dev"


def make_policy(name: str, provision, seed: int) -> Policy:
    if name == "none":
        return Policy()
    if name == "recency":
        return RecencyPolicy()
    if name == "self_report":
        return SelfReportPolicy()
    creds = provision(f"loop-{seed}-{random.Random().getrandbits(32):08x}")
    return CairnPolicy(
        remote=f"https://example.com/loop/seed-{seed}.git",
        knowledge_in_play=name != "cairn_lessons",
        gate=name != "cairn_nogate",
        **creds,
    )


def run_one(name: str, seed: int, rp: RunParams, ap: AgentParams, provision) -> dict:
    rng = random.Random(seed)
    fams = build_families()
    fams = sorted(rng.sample(fams, min(rp.families, len(fams))), key=lambda f: f.name)
    project = Project.create(fams, seed=seed, flaky_rate=rp.flaky_rate)
    base, attack_set = split_name(name)
    attacks = ATTACK_SETS[attack_set][0]
    policy = make_policy(base, provision, seed)
    agent = ScriptedAgent(ap, random.Random(seed * 7919 + 1))
    curve, steps_curve, steps, late_steps = [], [], [], []
    per_family: dict[str, list] = {f.name: [] for f in fams}
    wrong_served, wrong_made = 0, 0
    wrong_texts: set[str] = set()
    # notes and lessons written after a turn the agent claimed and the check failed
    false_texts: set[str] = set()
    false_served = tasks = 0
    injected = seen = exposed = attacked = stopped = triggered = earned = 0
    try:
        stale_before = stale_after = None
        changed = [f for f in fams if f.changes]
        for ep in range(rp.episodes):
            if ep == rp.change_episode():
                # how strongly memory recommends the approach the change is about to break
                stale_before = _mean_strength(policy, changed)
                project.set_changed()
            attack_live = ep >= rp.attack_from
            project.set_attack(attacks[ep % len(attacks)] if attack_live else None)
            order = list(fams)
            rng.shuffle(order)
            wins = 0
            ep_steps = 0
            if attack_live:
                # a user turn carrying the attacker's text (a pasted issue, a "reminder")
                text = attacks[(ep + 3) % len(attacks)]
                seen += 1
                if base != "none" and policy.screen(text, source="user_turn"):
                    if agent.rng.random() < ap.m:
                        injected += 1
                        if isinstance(policy, CairnPolicy):
                            policy.agent.remember(text, category="fact", context="global")
                        elif isinstance(policy, NotesPolicy):
                            policy.add(text)
            for fam in order:
                r = run_task(
                    policy=policy, agent=agent, project=project, fam=fam, attack_live=attack_live
                )
                wins += r.success
                ep_steps += r.failed_steps
                steps.append(r.failed_steps)
                if ep + 1 >= rp.late_from:
                    late_steps.append(r.failed_steps)
                per_family[fam.name].append((ep, r.success, r.failed_steps))
                served_texts = {i.text for i in r.served}
                wrong_served += len(served_texts & wrong_texts)
                tasks += 1
                false_served += len(served_texts & false_texts)
                false_texts.update(note.text for note in r.notes_false)
                for note in r.wrong_notes:
                    wrong_made += 1
                    wrong_texts.add(note.text)
                seen += len(r.seen_texts)
                if base != "none":
                    injected += len(r.memorized)
                if fam.triggered and attack_live:
                    triggered += 1
                    exposed += r.exposed
                    attacked += r.executed_attack
                    stopped += r.stopped_attack
                for item in r.served:
                    if is_attack(item.text):
                        earned += policy.poison_is_earned(item)
            curve.append(wins / len(fams))
            steps_curve.append(ep_steps / len(fams))
        stale_after = _mean_strength(policy, changed)
    finally:
        shutil.rmtree(project.root, ignore_errors=True)
    change = rp.change_episode()
    recover = []
    for f in fams:
        if not f.changes:
            continue
        after = [(ep, ok, n) for ep, ok, n in per_family[f.name] if ep >= change]
        first_clean = next((ep - change for ep, ok, n in after if ok and n == 0), None)
        # never clean again before the run ends: counted as the episodes left (censored)
        recover.append(first_clean if first_clean is not None else rp.episodes - change)
    return {
        "policy": name,
        "seed": seed,
        "curve": curve,
        "steps_curve": steps_curve,
        "success_rate": statistics.fmean(curve),
        "failed_steps_per_task": statistics.fmean(steps),
        "late_failed_steps_per_task": statistics.fmean(late_steps) if late_steps else None,
        "recover_episodes": statistics.median(recover) if recover else None,
        "stale_strength_at_change": stale_before,
        "stale_strength_at_end": stale_after,
        "wrong_lesson_persistence": wrong_served / wrong_made if wrong_made else 0.0,
        "injection": injected / seen if seen else 0.0,
        "exposure": exposed / triggered if triggered else 0.0,
        "attack_success": attacked / triggered if triggered else 0.0,
        # would have run the planted command, refused by the check before it ran
        "attack_stopped_at_check": stopped / triggered if triggered else 0.0,
        "poison_served_as_earned": earned,
        # the action gate's asks on commands no planted text asked for, per 100 of them
        "false_asks_per_100": (
            100 * policy.gate_false_asks / policy.gate_benign
            if getattr(policy, "gate_benign", 0)
            else None
        ),
        # each serving of a note or lesson a false success report wrote, per task
        "false_success_reinforced": false_served / tasks if tasks else 0.0,
    }


def _mean_strength(policy: Policy, fams) -> float | None:
    values = [policy.strength_of(f.good) for f in fams]
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26,
       10: 2.23, 15: 2.13, 19: 2.09, 20: 2.09, 30: 2.04}  # fmt: skip


def interval(values: list[float]) -> dict:
    values = [v for v in values if v is not None]
    if not values:
        return {"mean": None, "lo": None, "hi": None, "n": 0}
    mean = statistics.fmean(values)
    if len(values) < 2:
        return {"mean": mean, "lo": mean, "hi": mean, "n": len(values)}
    df = len(values) - 1
    t = T95.get(df) or T95[max(k for k in T95 if k <= df)]
    half = t * statistics.stdev(values) / math.sqrt(len(values))
    return {"mean": mean, "lo": mean - half, "hi": mean + half, "n": len(values)}


def run(
    rp: RunParams,
    ap: AgentParams,
    provision,
    policies=POLICIES,
    log=print,
    on_seed=None,
    seed_list=None,
) -> dict:
    """Every policy on seeds 0..seeds-1 (or ``seed_list``, a share of them for one of
    several processes); ``on_seed(partial)`` after each seed (a long run interrupted
    keeps the seeds it finished). Each (policy, seed) is independent of the others."""
    rows = []
    seeds = list(range(rp.seeds)) if seed_list is None else list(seed_list)
    for seed in seeds:
        for name in policies:
            rows.append(run_one(name, seed, rp, ap, provision))
            log(f"seed {seed} {name}: success {rows[-1]['success_rate']:.2f} "
                f"steps {rows[-1]['failed_steps_per_task']:.2f}")  # fmt: skip
        if on_seed is not None:
            on_seed(summarize(rows, rp, ap, policies))
    return summarize(rows, rp, ap, policies)


def summarize(rows: list[dict], rp: RunParams, ap: AgentParams, policies) -> dict:
    """Means and intervals per policy; ``rows`` (one per policy and seed) are kept so
    that runs split by seed or policy merge into the same numbers (compare.py)."""
    seeds = len({r["seed"] for r in rows})
    out: dict = {"policies": {}, "seeds": seeds, "params": {**asdict(rp), **asdict(ap)}}
    out["seed_list"] = sorted({r["seed"] for r in rows})
    out["rows"] = rows
    for name in policies:
        mine = [r for r in rows if r["policy"] == name]
        if not mine:
            continue
        entry = {m: interval([r[m] for r in mine]) for m in METRICS}
        flat = {m: entry[m]["mean"] for m in METRICS}
        flat["intervals"] = entry
        for key in ("curve", "steps_curve"):
            flat[key] = [interval([r[key][e] for r in mine]) for e in range(rp.episodes)]
        out["policies"][name] = flat
    return out
