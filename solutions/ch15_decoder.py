"""Chapter 15 (3rd edition) — the Transformer decoder.

Write ``TransformerDecoder``, the decoder block of *Deep Learning with Python*
(3rd ed., chapter 15), in Keras 3. It reads a target sequence of shape
``(batch, target_len, hidden_dim)`` and the encoder's output for the source,
``(batch, source_len, hidden_dim)``, and returns a tensor shaped like the
target, computed in three residual blocks, each followed by its own
``LayerNormalization``:

1. **causal self-attention** over the target (``use_causal_mask=True``): no
   position sees a later one;
2. **cross-attention** from the result to the source, with the source's
   padding mask, so that no position attends to the source's padding;
3. a **feed-forward** projection, ``Dense(intermediate_dim, activation="relu")``
   then ``Dense(hidden_dim)``.

Every attention uses ``key_dim = hidden_dim // num_heads``.
``call(target, source, source_mask)`` receives the source's padding mask as its
third argument, of shape ``(batch, source_len)`` (True for real tokens).

Beyond the book: ``__init__`` passes ``**kwargs`` on to the base layer and
``get_config`` returns the constructor's arguments, so that Keras can rebuild
the layer when a model holding it is saved and loaded.

Run ``grade ch15_decoder`` to check your work.
"""

import keras
from keras import layers


class TransformerDecoder(keras.Layer):
    """A post-norm Transformer decoder block.

    Args:
        hidden_dim: size of each token vector of the target, the source and the output.
        intermediate_dim: width of the hidden layer of the feed-forward projection.
        num_heads: number of attention heads.
        **kwargs: passed on to ``keras.Layer`` (``name``, ``dtype``, ...).
    """

    def __init__(self, hidden_dim, intermediate_dim, num_heads, **kwargs):
        ### BEGIN SOLUTION
        super().__init__(**kwargs)
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.num_heads = num_heads
        key_dim = hidden_dim // num_heads
        self.self_attention = layers.MultiHeadAttention(num_heads, key_dim)
        self.self_attention_layernorm = layers.LayerNormalization()
        self.cross_attention = layers.MultiHeadAttention(num_heads, key_dim)
        self.cross_attention_layernorm = layers.LayerNormalization()
        self.feed_forward_1 = layers.Dense(intermediate_dim, activation="relu")
        self.feed_forward_2 = layers.Dense(hidden_dim)
        self.feed_forward_layernorm = layers.LayerNormalization()
        ### END SOLUTION

    def call(self, target, source, source_mask):
        """Decode ``target`` (batch, target_len, hidden_dim), reading ``source``.

        Args:
            target: a float tensor of shape (batch, target_len, hidden_dim).
            source: the encoder's output, a float tensor of shape (batch, source_len, hidden_dim).
            source_mask: a boolean padding mask of the source, of shape (batch, source_len).

        Returns:
            A float tensor of shape (batch, target_len, hidden_dim).
        """
        ### BEGIN SOLUTION
        residual = x = target
        x = self.self_attention(query=x, key=x, value=x, use_causal_mask=True)
        x = x + residual
        x = self.self_attention_layernorm(x)
        residual = x
        mask = source_mask[:, None, :]
        x = self.cross_attention(query=x, key=source, value=source, attention_mask=mask)
        x = x + residual
        x = self.cross_attention_layernorm(x)
        residual = x
        x = self.feed_forward_1(x)
        x = self.feed_forward_2(x)
        x = x + residual
        x = self.feed_forward_layernorm(x)
        return x
        ### END SOLUTION

    def get_config(self):
        """Return the constructor arguments, so Keras can rebuild the layer."""
        ### BEGIN SOLUTION
        config = super().get_config()
        config.update(
            {
                "hidden_dim": self.hidden_dim,
                "intermediate_dim": self.intermediate_dim,
                "num_heads": self.num_heads,
            }
        )
        return config
        ### END SOLUTION
