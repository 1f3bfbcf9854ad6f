"""Exercise 4 — the Transformer decoder.

Write ``TransformerDecoder``, the decoder block of *Deep Learning with Python*
(2nd ed., chapter 11), in Keras 3. It reads the target sequence so far
(``inputs``, shape ``(batch, target_len, embed_dim)``) and the encoder's output
for the source sequence (``encoder_outputs``, ``(batch, source_len, embed_dim)``)
and returns ``(batch, target_len, embed_dim)``, in three residual blocks, each
followed by its own ``LayerNormalization``:

1. causal self-attention over ``inputs`` (a position sees itself and earlier
   positions only);
2. cross-attention: the result of 1 as query, ``encoder_outputs`` as key and value;
3. the feed-forward projection ``Dense(dense_dim, relu)`` then ``Dense(embed_dim)``.

Masks are explicit arguments. Keras 3 fills a ``mask`` argument automatically
only for calls with a single tensor argument; for a call with several tensor
arguments it fills ``<argument>_mask`` for each one. So ``inputs_mask`` and
``encoder_outputs_mask`` receive the padding masks of ``inputs`` and
``encoder_outputs`` automatically in a functional model, and can be passed by
hand on plain tensors.

Run ``grade exercise4`` to check your work; ``exercises/exercise4.md`` has the
instructions and ``grade hint exercise4`` gives hints one at a time.
"""

import keras
from keras import layers


class TransformerDecoder(layers.Layer):
    """A post-norm Transformer decoder block.

    Args:
        embed_dim: size of each token vector (inputs, encoder outputs and output).
        dense_dim: width of the hidden layer of the feed-forward projection.
        num_heads: number of attention heads; each uses ``key_dim=embed_dim``.
        **kwargs: passed on to ``keras.layers.Layer`` (``name``, ``dtype``, ...).
    """

    def __init__(self, embed_dim, dense_dim, num_heads, **kwargs):
        # YOUR CODE HERE
        raise NotImplementedError()

    def call(self, inputs, encoder_outputs, inputs_mask=None, encoder_outputs_mask=None):
        """Decode ``inputs`` while attending to ``encoder_outputs``.

        Args:
            inputs: float tensor (batch, target_len, embed_dim), the target so far.
            encoder_outputs: float tensor (batch, source_len, embed_dim).
            inputs_mask: None, or boolean (batch, target_len): True for real target tokens.
            encoder_outputs_mask: None, or boolean (batch, source_len): True for real source tokens.

        Returns:
            A float tensor of shape (batch, target_len, embed_dim).
        """
        # YOUR CODE HERE
        raise NotImplementedError()

    def get_config(self):
        """Return the constructor arguments, so Keras can rebuild the layer."""
        # YOUR CODE HERE
        raise NotImplementedError()
