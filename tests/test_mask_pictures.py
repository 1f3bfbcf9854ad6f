"""A failed mask check draws the mask that reached attention beside the expected one, as text:
the same picture in the terminal report and in nbgrader's feedback."""

from __future__ import annotations

import io

import numpy as np
import pytest
from rich.console import Console

from grader.judge.shared.mask import assert_masks_keys, mask_picture
from grader.judge.framework import CheckFailed
from grader.judge.replay import Step
from grader.report import render
from grader.verdict import CheckResult, summarise

REAL = np.array([[True] * 6, [True] * 4 + [False] * 2, [True] * 2 + [False] * 4])
EXPECTED = np.broadcast_to(REAL[:, None, :], (3, 6, 6))


def _step(mask):
    x = np.zeros((3, 6, 8), dtype=np.float32)
    return Step(0, {"inputs": {"query": x, "value": x}}, "attention", {}, {"mask": mask}, {})


def _message(mask) -> str:
    with pytest.raises(CheckFailed) as failure:
        assert_masks_keys(_step(mask), EXPECTED, REAL, None)
    return str(failure.value)


def _report(message: str) -> str:
    verdict = summarise("exercise3", "x.py", [CheckResult("mask.masks_keys", "The attention mask hides padded keys",
                                                          "mask", "failed", 0, 2, message)], {"seed": 1, "timeout": 1,
                                                                                            "memory_mb": 1})
    console = Console(file=io.StringIO(), width=80, color_system=None)
    console.print(render(verdict))
    return console.file.getvalue()


def test_wrong_axis_is_drawn_at_80_columns():
    out = _report(_message(REAL[:, :, None]))
    assert "the mask was expanded on the wrong axis" in out
    assert "Mask that reached attention for sequence 2" in out
    lines = [line.rstrip() for line in out.splitlines()]
    assert "      keys     0 1 2 3 p p   0 1 2 3 p p" in lines
    assert "      query 0  ■ ■ ■ ■ ■ ■   ■ ■ ■ ■ · ·" in lines
    assert "      query 4p · · · · · ·   ■ ■ ■ ■ · ·" in lines
    assert all(len(line) <= 80 for line in out.splitlines())


def test_inverted_mask_is_drawn():
    message = _message(~REAL[:, None, :])
    assert "inverted" in message
    assert "  query 0  · · · · ■ ■   ■ ■ ■ ■ · ·" in message


def test_missing_mask_is_drawn_as_attending_everywhere():
    message = _message(None)
    assert "no mask reached" in message
    assert "  query 0  ■ ■ ■ ■ ■ ■   ■ ■ ■ ■ · ·" in message


def test_unexpanded_mask_shows_only_the_expected_picture():
    picture = mask_picture(None, EXPECTED, REAL, note=" — yours raised before attention")
    assert "yours raised before attention" in picture
    assert "  query 0  (no mask)     ■ ■ ■ ■ · ·" in picture


def test_a_missing_causal_mask_is_told_as_looking_ahead_and_a_missing_padding_mask_as_padding():
    """Where later positions must be hidden, no mask at all lets every position see the ones after it
    (a real query's padded keys lie after it too): the message says that, with the causal reason."""
    causal = np.tril(np.ones((6, 6), dtype=bool))[None] & REAL[:, None, :]
    with pytest.raises(CheckFailed) as failure:
        assert_masks_keys(_step(None), causal, REAL, None, what="later positions and padded keys",
                          future_why="At generation time the decoder predicts each token from the earlier ones only.")
    told = str(failure.value)
    assert "attends to the positions after it" in told and "padding as if it were text" not in told
    assert "Why it matters: At generation time" in told
    padding = _message(None)
    assert "attends to padding as if it were text" in padding and "after it" not in padding
