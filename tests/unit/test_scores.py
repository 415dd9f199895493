"""engines.vision.scores: the one rule between a model's raw output and what a user reads."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engines.errors import InputContractError, ModelError
from engines.models.manifest import check_normalisation
from engines.vision.scores import to_probabilities


@pytest.mark.parametrize(
    ("raw", "batch", "error", "words"),
    [
        (np.zeros(4), 1, InputContractError, "no batch axis"),
        (np.zeros((1, 4)), 2, InputContractError, "no batch axis"),
        (np.zeros((2, 5)), 2, InputContractError, "5 scores per image but has 4 labels"),
        (np.zeros((2, 2, 2)), 2, InputContractError, "4 scores per image but has 2 labels"),
        (np.array([[0.1, math.nan, 0.2, 0.3]]), 1, ModelError, "1 score that is not a number"),
        (np.array([[math.inf, 0, 0, 0], [0, 0, -math.inf, 0]]), 2, ModelError, "2 scores that are not a number"),
    ],
)
def test_wrong_output_is_refused(raw: np.ndarray, batch: int, error: type[Exception], words: str) -> None:
    classes = 4 if raw.ndim != 3 else 2
    with pytest.raises(error, match=words):
        to_probabilities(raw, batch, classes, "logits")


@pytest.mark.parametrize(
    "rows", [[[1.3084, -0.1238, 0.0, 0.0]], [[0.5, 0.5, 0.5, 0.5]], [[0.1, 0.1, 0.1, 0.1]], [[-0.2, 0.6, 0.3, 0.3]]]
)
def test_false_probabilities_are_refused(rows: list[list[float]]) -> None:
    with pytest.raises(ModelError, match="says it outputs probabilities"):
        to_probabilities(np.array(rows), 1, 4, "probabilities")


def test_true_probabilities_and_logits_pass() -> None:
    probs = to_probabilities(np.array([[0.7, 0.2, 0.1, 0.0], [0.25, 0.25, 0.25, 0.2500001]]), 2, 4, "probabilities")
    assert probs.shape == (2, 4) and np.allclose(probs.sum(axis=1), 1)
    soft = to_probabilities(np.array([[1000.0, 0.0, -1000.0, 3.0]]), 1, 4, "logits")
    assert np.isfinite(soft).all() and abs(float(soft.sum()) - 1) < 1e-6 and soft.argmax() == 0


@pytest.mark.parametrize(
    ("mean", "std", "words"),
    [
        ((0, 0, 0), (0, 1, 1), "above 0"),
        ((0, 0, 0), (1, -1, 1), "above 0"),
        ((math.nan, 0, 0), (1, 1, 1), "finite"),
        ((0, 0, 0), (math.inf, 1, 1), "finite"),
    ],
)
def test_normalisation_that_cannot_be_right(mean: tuple[float, ...], std: tuple[float, ...], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        check_normalisation(mean, std)
    check_normalisation((127, 127, 127), (128, 128, 128))
