"""Exercise 3 — the Transformer encoder.

Write ``TransformerEncoder``, the encoder block of *Deep Learning with Python*
(2nd ed., chapter 11), in Keras 3. It turns a batch of embedded sequences of
shape ``(batch, seq, embed_dim)`` into a batch of the same shape:

1. multi-head **self-attention** over the inputs (``key_dim=embed_dim``),
   with a residual connection and a ``LayerNormalization`` after it;
2. a **feed-forward** projection, ``Dense(dense_dim, activation="relu")``
   then ``Dense(embed_dim)``, again with a residual connection and a
   ``LayerNormalization`` after it ("post-norm", as in the book).

``call(inputs, mask=None)`` receives a padding mask of shape ``(batch, seq)``
(True for real tokens, False for padding). ``MultiHeadAttention`` expects an
attention mask it can broadcast to ``(batch, queries, keys)``: turn the one
into the other so that no position attends to padding. Set
``self.supports_masking = True`` so that Keras 3 passes the mask on to the
layer after yours.

``get_config`` must let Keras rebuild the layer: ``from_config`` and
``.keras`` files depend on it.

Run ``grade exercise3`` to check your work. The instructions in
``exercises/exercise3.md`` ask one more question worth answering for
yourself before you start.
"""

import keras
from keras import layers


class TransformerEncoder(layers.Layer):
    """A post-norm Transformer encoder block.

    Args:
        embed_dim: size of each input token vector (and of the output).
        dense_dim: width of the hidden layer of the feed-forward projection.
        num_heads: number of attention heads.
        **kwargs: passed on to ``keras.layers.Layer`` (``name``, ``dtype``, ...).
    """

    def __init__(self, embed_dim, dense_dim, num_heads, **kwargs):
        # YOUR CODE HERE
        raise NotImplementedError()

    def call(self, inputs, mask=None):
        """Encode ``inputs`` of shape (batch, seq, embed_dim).

        Args:
            inputs: a float tensor of shape (batch, seq, embed_dim).
            mask: None, or a boolean padding mask of shape (batch, seq).

        Returns:
            A float tensor of shape (batch, seq, embed_dim).
        """
        # YOUR CODE HERE
        raise NotImplementedError()

    def get_config(self):
        """Return the constructor arguments, so Keras can rebuild the layer."""
        # YOUR CODE HERE
        raise NotImplementedError()
