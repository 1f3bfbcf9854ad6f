"""Exercise 2 — a self-attention block.

Write ``SelfAttentionBlock``, the first half of the Transformer encoder of
*Deep Learning with Python* (2nd ed., chapter 11), in Keras 3: multi-head
self-attention over a batch of embedded sequences, a residual connection, and
a ``LayerNormalization`` of the sum. Inputs and outputs have shape
``(batch, seq, embed_dim)``.

``call(inputs, mask=None)`` receives a boolean padding mask of shape
``(batch, seq)`` (True for real tokens). ``MultiHeadAttention`` wants an
attention mask it can broadcast to ``(batch, queries, keys)``: build it so that
no position attends to padding.

Run ``grade exercise2`` to check your work; ``exercises/exercise2.md`` has the
instructions and ``grade hint exercise2`` gives hints one at a time.
"""

import keras
from keras import layers


class SelfAttentionBlock(layers.Layer):
    """Self-attention, residual connection, layer normalisation.

    Args:
        embed_dim: size of each input token vector (and of the output).
        num_heads: number of attention heads; each uses ``key_dim=embed_dim``.
        **kwargs: passed on to ``keras.layers.Layer`` (``name``, ``dtype``, ...).
    """

    def __init__(self, embed_dim, num_heads, **kwargs):
        # YOUR CODE HERE
        raise NotImplementedError()

    def call(self, inputs, mask=None):
        """Return layernorm(inputs + attention(inputs, inputs)), keeping padding out of attention.

        Args:
            inputs: a float tensor of shape (batch, seq, embed_dim).
            mask: None, or a boolean padding mask of shape (batch, seq).
        """
        # YOUR CODE HERE
        raise NotImplementedError()

    def get_config(self):
        """Return the constructor arguments, so Keras can rebuild the layer."""
        # YOUR CODE HERE
        raise NotImplementedError()
