"""Tests for memory.core.embedders: the check on client-supplied vectors. No database
needed."""

from __future__ import annotations

import numpy as np
import pytest

from memory.core.embedders import (
    EmbeddingDimensionError,
    validate_vector,
)


def test_validate_vector_accepts_and_converts():
    vec = [0.0] * 383 + [1]
    out = validate_vector(vec)
    assert out == [0.0] * 383 + [1.0] and all(type(x) is float for x in out)
    assert validate_vector(np.ones(384, dtype=np.float32)) == [1.0] * 384
    assert validate_vector((0.5, -0.5, 2), dimensions=3) == [0.5, -0.5, 2.0]


@pytest.mark.parametrize(
    "vec, message",
    [
        ([0.1] * 383, "384 dimensions, got 383"),
        ([0.1] * 385, "384 dimensions, got 385"),
        ([], "384 dimensions, got 0"),
        ([0.1] * 383 + [float("nan")], "not finite"),
        ([0.1] * 383 + [float("inf")], "not finite"),
        ([0.1] * 383 + [1e39], "32-bit"),
        ([0.1] * 383 + ["0.5"], "component 383 must be a number, got str"),
        ([0.1] * 383 + [None], "must be a number, got NoneType"),
        ([0.1] * 383 + [True], "must be a number, got bool"),
        ([0.1] * 383 + [[0.1]], "must be a number, got list"),
        ([0.0] * 384, "zero vector"),
        ("0.1,0.2", "got str"),
        (None, "got NoneType"),
        ({"a": 1}, "got dict"),
        (3.0, "got float"),
        (np.ones((2, 192)), "shape"),
    ],
)
def test_validate_vector_rejects(vec, message):
    with pytest.raises(EmbeddingDimensionError, match=message):
        validate_vector(vec)


def test_dimension_error_is_value_error():
    assert issubclass(EmbeddingDimensionError, ValueError)
    with pytest.raises(ValueError, match="expected|dimensions"):
        validate_vector([1.0, 2.0], dimensions=384)
