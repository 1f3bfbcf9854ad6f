"""Checks for the third edition's positional embedding: exercise 1's, without its mask checks.

The third edition computes the padding mask where the token ids are, ``source != 0``, and hands it
to the encoder and decoder as an argument; its ``PositionalEmbedding`` has no ``compute_mask`` and
none is asked for. Everything else is judged by exercise 1's checks, by what the layer does: the
two tables found by the rows a call looks up (positions from ``ops.arange`` or from
``ops.cumsum(ops.ones_like(inputs), axis=-1) - 1`` alike), their sum, gradients and config.
"""

from __future__ import annotations

from ...judge import contract
from ...judge.shared.fixtures import (  # noqa: F401  (fixtures are used by name)
    config, config_phase, dims, forward, job, values,
)
from ..exercise1 import checks as embedding
from ..exercise1.checks import layer, plain  # noqa: F401  (fixtures)
from .job import DIMS

CLASS = "PositionalEmbedding"

check_constructor = contract.constructor(CLASS, DIMS)
check_output_shape = embedding.check_output_shape
check_two_tables = embedding.check_two_tables
check_trainable_list = embedding.check_trainable_list
check_sum = embedding.check_sum
check_all_gradients = embedding.check_all_gradients
check_used_rows = embedding.check_used_rows
(check_config_base, check_config_own_keys, check_from_config,
 check_keras_file) = contract.config(CLASS, DIMS)
