"""The numbers the parent draws for the third edition's encoder: those of exercise 3 (a padded
sequence, and a loss over the outputs), for a layer built from the book's third-edition arguments."""

from __future__ import annotations

from ...protocol.job import layer_job
from ..exercise3.job import BATCH, SEQUENCE, secret  # noqa: F401  (the same inputs)

# The constructor's arguments, in the book's names; the checks speak of the sizes by role.
DIMS = {"hidden_dim": 8, "intermediate_dim": 16, "num_heads": 2}
ROLES = {"embed_dim": DIMS["hidden_dim"], "dense_dim": DIMS["intermediate_dim"], "num_heads": DIMS["num_heads"]}
KEY_DIM = DIMS["hidden_dim"] // DIMS["num_heads"]


def public() -> dict:
    return layer_job(ROLES, [BATCH, SEQUENCE, DIMS["hidden_dim"]], constructor_arguments=DIMS)
