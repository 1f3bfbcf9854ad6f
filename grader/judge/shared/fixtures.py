"""The judge's fixtures every layer exercise shares: the job, the evidence's phases, the padding."""

from __future__ import annotations

import numpy as np
import pytest

from .. import analysis


LAYER_NAME = "layer_under_test"


@pytest.fixture
def job(evidence, request):
    return whole_job(evidence, request)


def whole_job(evidence, request) -> dict:
    """The whole job. When the child never got its secret inputs (the layer failed to build), the
    check is not run on a job without them: it gets the error that stopped it instead."""
    whole = evidence.job
    if "values" not in whole:
        marker = request.node.get_closest_marker("check")
        evidence.phase("values", marker.kwargs["id"] if marker else "")
        analysis.not_checked("the grader could not give your layer its inputs", "api.output_shape")
    return whole


@pytest.fixture
def dims(evidence):
    return evidence.public_job["dims"]


@pytest.fixture
def forward(evidence):
    return evidence.phase("forward", "api.output_shape")


@pytest.fixture
def values(evidence):
    return analysis.values(evidence)


@pytest.fixture
def gradients(evidence):
    return evidence.phase("gradients", "gradients.all_variables")


@pytest.fixture
def config_phase(evidence):
    return evidence.phase("config", "config.from_config")


@pytest.fixture
def config(evidence):
    data = evidence.partial("config")
    if data is None or "config" not in data:
        return evidence.phase("config", "config.base_keys")["config"]
    return data["config"]


def padding(job, key: str = "mask") -> np.ndarray:
    """The job's (batch, seq) padding mask: True for real positions."""
    return np.asarray(job[key], dtype=bool)
