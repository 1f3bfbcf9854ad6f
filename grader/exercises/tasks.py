"""Small synthetic tasks the package generates itself (nothing is downloaded).

``contains_token_task``: sequences of token ids, right-padded with 0; the label
says whether the "signal" token 1 occurs. A Transformer classifier learns it
in a few steps, which is all a grader needs to see training work.
"""

from __future__ import annotations

import numpy as np

SIGNAL_TOKEN = 1


def contains_token_task(seed: int, vocab_size: int, sequence_length: int, count: int):
    """(tokens int32 (count, sequence_length), labels float32 (count, 1)), half of them positive."""
    if vocab_size < 4 or sequence_length < 3:
        raise ValueError("vocab_size must be at least 4 and sequence_length at least 3")
    rng = np.random.default_rng(seed)
    lengths = rng.integers(2, sequence_length + 1, size=count)
    tokens = rng.integers(2, vocab_size, size=(count, sequence_length))
    labels = (np.arange(count) % 2).astype(np.float32)
    rng.shuffle(labels)
    for row, (length, label) in enumerate(zip(lengths, labels)):
        if label:
            tokens[row, rng.integers(0, length)] = SIGNAL_TOKEN
        tokens[row, length:] = 0
    return tokens.astype(np.int32), labels.reshape(-1, 1)
