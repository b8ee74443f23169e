"""Data for bench/bench_scale.py: real embeddings of a real corpus, and clustered
perturbations of them up to a million items.

Corpus: the 5,882 dialogue turns of LoCoMo (``speaker: text``) are the real items;
LoCoMo's questions (categories 1-4) are the queries. Both are embedded once by the
project's own embedder (``get_embedder()``, all-MiniLM-L6-v2 int8 by default) and
cached in ``var/bench/scale-corpus-<model>.npz`` (gitignored): about three minutes
on two cores, then free.

Beyond the real turns, item ``i`` is a perturbation of real turn ``b = i mod 5,882``
(so every real turn heads a cluster of the same size)::

    direction = unit(real[j] - real[k] + 0.5 * g / sqrt(384))   # j, k random turns, g ~ N(0, I)
    vector    = unit(real[b] + SIGMA * direction)

The direction is half in the span real embeddings occupy (the difference of two
real turns) and half isotropic, so a cluster is not a ball in directions no text
uses. With SIGMA = 0.6 a member's cosine to its real turn is about 0.86 (the
script measures and records it), two members of one cluster about 0.74: close
paraphrases of one thing, as a memory store holding many near-repeats would see.
The text is the real turn's words, each kept with probability 0.75, plus two words
drawn from the corpus by frequency: the full-text side sees English with real word
statistics, near-duplicated the same way.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import common

LOCOMO = Path("/work/shared/bench/locomo10.json")
CACHE = common.ROOT / "var" / "bench"
SIGMA = 0.6
KEEP_WORD = 0.75
EXTRA_WORDS = 2
QUERY_POOL = 400  # questions embedded; the benchmark uses a fixed shuffled subset
_WORD = re.compile(r"\S+")


def locomo_texts() -> tuple[list[str], list[str]]:
    """The real turns and (shuffled with a fixed seed) questions of categories 1-4."""
    import numpy as np

    data = json.loads(LOCOMO.read_text())
    turns, questions = [], []
    for sample in data:
        for key, value in sample["conversation"].items():
            if re.fullmatch(r"session_\d+", key):
                turns += [f"{t['speaker']}: {t['text']}" for t in value]
        questions += [q["question"] for q in sample["qa"] if q["category"] != 5]
    order = np.random.default_rng(37).permutation(len(questions))[:QUERY_POOL]
    return turns, [questions[i] for i in order]


def corpus(limit: int | None = None) -> dict:
    """Real turn and question vectors (cached per embedder model). ``limit``: only the
    first that many turns and a tenth as many questions (the quick run's smaller set)."""
    import numpy as np

    from memory.core.embeddings import get_embedder

    embedder = get_embedder()
    turns, questions = locomo_texts()
    name = re.sub(r"[^A-Za-z0-9.-]", "_", embedder.model_id)
    if limit:
        turns, questions = turns[:limit], questions[: max(1, limit // 10)]
        name += f"-first{limit}"
    path = CACHE / f"scale-corpus-{name}.npz"
    cached = np.load(path, allow_pickle=False) if path.exists() else None
    if cached is not None and (int(cached["turns_n"]), int(cached["questions_n"])) == (
        len(turns),
        len(questions),
    ):
        tv, qv, embed_s = cached["turns"], cached["questions"], float(cached["embed_s"])
    else:
        print(f"embedding {len(turns):,} turns and {len(questions)} questions once ...", flush=True)
        with common.stopwatch() as took:
            tv = np.asarray(embedder.embed(turns), dtype=np.float32)
            qv = np.asarray(embedder.embed(questions), dtype=np.float32)
        embed_s = took["s"]
        CACHE.mkdir(parents=True, exist_ok=True)
        np.savez(path, turns=tv, questions=qv, turns_n=len(turns), questions_n=len(questions),
                 embed_s=embed_s)  # fmt: skip
    return {"turns": turns, "questions": questions, "model": embedder.model_id,
            "turn_vectors": tv, "question_vectors": qv,
            "cache": str(path.relative_to(common.ROOT)), "embed_s": embed_s}  # fmt: skip


class Synthesis:
    """Items ``0..n-1``: the real turns first, then perturbations (module docstring)."""

    def __init__(self, data: dict, seed: int = 20261205):
        import numpy as np

        self.real = data["turn_vectors"]
        self.texts = data["turns"]
        self.seed = seed
        words = [w.lower() for t in self.texts for w in _WORD.findall(t)]
        vocab, counts = np.unique(np.array(words), return_counts=True)
        self.vocab, self.p = vocab, counts / counts.sum()
        self.cos_to_base: list[float] = []

    def chunk(self, start: int, stop: int):
        """Vectors (float32) and texts of items ``start..stop-1``, the same on every call."""
        import numpy as np

        n_real, dims = self.real.shape
        idx = np.arange(start, stop)
        base = idx % n_real
        vectors = self.real[base].copy()
        texts = [self.texts[b] for b in base]
        synthetic = idx >= n_real
        if synthetic.any():
            rng = np.random.default_rng([self.seed, start])
            m = int(synthetic.sum())
            j, k = rng.integers(0, n_real, size=(2, m))
            g = rng.standard_normal((m, dims), dtype=np.float32) / np.sqrt(dims)
            direction = self.real[j] - self.real[k] + 0.5 * g
            direction /= np.linalg.norm(direction, axis=1, keepdims=True)
            moved = self.real[base[synthetic]] + SIGMA * direction
            moved /= np.linalg.norm(moved, axis=1, keepdims=True)
            self.cos_to_base.append(float((moved * self.real[base[synthetic]]).sum(1).mean()))
            vectors[synthetic] = moved
            extra = rng.choice(self.vocab, size=(m, EXTRA_WORDS), p=self.p)
            keep = rng.random((m, 64)) < KEEP_WORD
            for row, i in enumerate(np.flatnonzero(synthetic)):
                words = _WORD.findall(texts[i])
                kept = [w for w, y in zip(words, keep[row], strict=False) if y] + words[64:]
                texts[i] = " ".join(kept + list(extra[row]))
        return vectors.astype(np.float32), texts


def describe(data: dict, synth: Synthesis) -> dict:
    """What the vectors are, for the results file and the docs."""
    import statistics

    return {
        "embedder": data["model"],
        "real_items": len(data["turns"]),
        "real_items_from": "LoCoMo dialogue turns (speaker: text)",
        "queries_from": f"LoCoMo questions, categories 1-4 ({QUERY_POOL} shuffled, seed 37)",
        "cache": data["cache"],
        "embed_s": round(data["embed_s"], 1),
        "synthetic": "item i >= real: unit(real[i mod real] + SIGMA * unit(real[j] - real[k] "
        "+ 0.5 g/sqrt(384))), j, k random real items, g standard normal",
        "sigma": SIGMA,
        "keep_word": KEEP_WORD,
        "extra_words": EXTRA_WORDS,
        "mean_cosine_to_real_item": round(statistics.fmean(synth.cos_to_base), 4)
        if synth.cos_to_base
        else None,
    }
