"""Exercise 1 — positional embedding.

Write ``PositionalEmbedding``, the first layer of the Transformer models of
*Deep Learning with Python* (2nd ed., chapter 11), in Keras 3. It turns a
batch of token ids of shape ``(batch, seq)`` into vectors of shape
``(batch, seq, output_dim)``: the embedding of each token plus a learned
embedding of its position (0, 1, 2, ...).

Token id 0 is padding. ``compute_mask`` tells the layers that follow which
positions are real, so they can ignore the padding. It must also work inside
a functional model built on ``keras.Input``, where the inputs are symbolic:
use ``keras.ops``, not TensorFlow-only functions.

Run ``grade exercise1`` to check your work; ``exercises/exercise1.md`` has the
instructions and ``grade hint exercise1`` gives hints one at a time.
"""

import keras
from keras import layers


class PositionalEmbedding(layers.Layer):
    """Token embedding plus learned position embedding.

    Args:
        sequence_length: the longest sequence the layer accepts (number of positions).
        input_dim: vocabulary size (number of token ids).
        output_dim: size of each embedding vector.
        **kwargs: passed on to ``keras.layers.Layer`` (``name``, ``dtype``, ...).
    """

    def __init__(self, sequence_length, input_dim, output_dim, **kwargs):
        # YOUR CODE HERE
        raise NotImplementedError()

    def call(self, inputs):
        """Embed token ids of shape (batch, seq); return (batch, seq, output_dim)."""
        # YOUR CODE HERE
        raise NotImplementedError()

    def compute_mask(self, inputs, mask=None):
        """Return a boolean mask of shape (batch, seq): True where the token id is not 0."""
        # YOUR CODE HERE
        raise NotImplementedError()

    def get_config(self):
        """Return the constructor arguments, so Keras can rebuild the layer."""
        # YOUR CODE HERE
        raise NotImplementedError()
