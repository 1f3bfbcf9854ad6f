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
        ### BEGIN SOLUTION
        super().__init__(**kwargs)
        self.embed_dim = embed_dim
        self.dense_dim = dense_dim
        self.num_heads = num_heads
        self.attention_1 = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
        self.attention_2 = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
        self.dense_proj = keras.Sequential(
            [
                layers.Dense(dense_dim, activation="relu"),
                layers.Dense(embed_dim),
            ]
        )
        self.layernorm_1 = layers.LayerNormalization()
        self.layernorm_2 = layers.LayerNormalization()
        self.layernorm_3 = layers.LayerNormalization()
        self.supports_masking = True
        ### END SOLUTION

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
        ### BEGIN SOLUTION
        length = keras.ops.shape(inputs)[1]
        causal = keras.ops.tril(keras.ops.ones((length, length), dtype="bool"))
        self_mask = keras.ops.expand_dims(causal, axis=0)
        if inputs_mask is not None:
            padding = keras.ops.expand_dims(keras.ops.cast(inputs_mask, "bool"), axis=1)
            self_mask = keras.ops.logical_and(self_mask, padding)
        cross_mask = None
        if encoder_outputs_mask is not None:
            cross_mask = keras.ops.expand_dims(keras.ops.cast(encoder_outputs_mask, "bool"), axis=1)

        attended = self.attention_1(inputs, inputs, attention_mask=self_mask)
        attended = self.layernorm_1(inputs + attended)
        crossed = self.attention_2(attended, encoder_outputs, attention_mask=cross_mask)
        crossed = self.layernorm_2(attended + crossed)
        return self.layernorm_3(crossed + self.dense_proj(crossed))
        ### END SOLUTION

    def get_config(self):
        """Return the constructor arguments, so Keras can rebuild the layer."""
        ### BEGIN SOLUTION
        config = super().get_config()
        config.update(
            {
                "embed_dim": self.embed_dim,
                "dense_dim": self.dense_dim,
                "num_heads": self.num_heads,
            }
        )
        return config
        ### END SOLUTION
