"""Short items the way agents store them: one sentence of about 15 tokens, a
preference or a fact about a person, a project or a tool.

Deterministic (templates filled in a fixed order), distinct from each other, and
not restatements of each other (each pair differs in a content word or a name),
so every item is stored and none merges: the bench times the dedup checks, not
fewer inserts. Used by ``bench_ingest.py --short`` and ``ingest_profile.py``.
"""

from __future__ import annotations

import random

PEOPLE = (
    "Alice", "Bruno", "Chen", "Dana", "Emeka", "Farah", "Goran", "Hana",
    "Ivo", "Jun", "Kofi", "Lena", "Mateo", "Nadia", "Omar", "Priya",
)  # fmt: skip
TOOLS = (
    "Vim", "Emacs", "VS Code", "PyCharm", "Zed", "Helix", "Sublime", "Neovim",
)  # fmt: skip
LANGS = ("Python", "Go", "Rust", "TypeScript", "Kotlin", "Elixir", "Ruby", "Java")
THINGS = (
    "tabs", "spaces", "dark mode", "light mode", "short commit messages",
    "squash merges", "rebase workflows", "type hints", "small pull requests",
    "pair programming", "morning standups", "written design notes",
)  # fmt: skip
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")
CITIES = ("Lisbon", "Nairobi", "Osaka", "Toronto", "Krakow", "Lima", "Oslo", "Pune")
PROJECTS = ("billing", "search", "checkout", "onboarding", "reporting", "ingest")

TEMPLATES = (
    "{person} prefers {thing} when working in {lang}.",
    "{person} uses {tool} as the main editor for {project} work.",
    "{person} lives in {city} and works remotely on {project}.",
    "The {project} service is written in {lang} and deployed every {day}.",
    "{person} asked for {thing} on the {project} team.",
    "{person} is on call for {project} every {day} this quarter.",
    "{person} dislikes {thing} and would rather use {tool}.",
    "Code reviews for {project} go to {person} before each {day} release.",
)


def short_items(n: int = 600) -> list[str]:
    """``n`` distinct one-sentence items, the same ones on every call."""
    rng = random.Random(37)  # seeded: the same texts in every run
    out: list[str] = []
    seen: set[str] = set()
    for _ in range(50 * n):
        text = TEMPLATES[len(out) % len(TEMPLATES)].format(
            person=rng.choice(PEOPLE),
            thing=rng.choice(THINGS),
            lang=rng.choice(LANGS),
            tool=rng.choice(TOOLS),
            project=rng.choice(PROJECTS),
            day=rng.choice(DAYS),
            city=rng.choice(CITIES),
        )
        if text not in seen:
            seen.add(text)
            out.append(text)
            if len(out) == n:
                return out
    raise ValueError(f"only {len(out)} distinct short items")
