"""Chapter 15 (3rd edition) — the Transformer encoder.

Write ``TransformerEncoder``, the encoder block of *Deep Learning with Python*
(3rd ed., chapter 15), in Keras 3. It turns a batch of embedded sequences of
shape ``(batch, seq, hidden_dim)`` into a batch of the same shape:

1. multi-head **self-attention** over the source
   (``key_dim = hidden_dim // num_heads``), with a residual connection and a
   ``LayerNormalization`` after it;
2. a **feed-forward** projection, ``Dense(intermediate_dim, activation="relu")``
   then ``Dense(hidden_dim)``, again with a residual connection and a
   ``LayerNormalization`` after it ("post-norm", as in the book).

``call(source, source_mask)`` receives the padding mask as its second
argument, of shape ``(batch, seq)`` (True for real tokens, False for padding).
``MultiHeadAttention`` expects an attention mask it can broadcast to
``(batch, queries, keys)``: turn the one into the other so that no position
attends to padding.

Beyond the book: ``__init__`` passes ``**kwargs`` on to the base layer and
``get_config`` returns the constructor's arguments, so that Keras can rebuild
the layer when a model holding it is saved and loaded.

Run ``grade ch15_encoder`` to check your work.
"""

import keras
from keras import layers


class TransformerEncoder(keras.Layer):
    """A post-norm Transformer encoder block.

    Args:
        hidden_dim: size of each input token vector (and of the output).
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
        self.feed_forward_1 = layers.Dense(intermediate_dim, activation="relu")
        self.feed_forward_2 = layers.Dense(hidden_dim)
        self.feed_forward_layernorm = layers.LayerNormalization()
        ### END SOLUTION

    def call(self, source, source_mask):
        """Encode ``source`` of shape (batch, seq, hidden_dim).

        Args:
            source: a float tensor of shape (batch, seq, hidden_dim).
            source_mask: a boolean padding mask of shape (batch, seq).

        Returns:
            A float tensor of shape (batch, seq, hidden_dim).
        """
        ### BEGIN SOLUTION
        residual = x = source
        mask = source_mask[:, None, :]
        x = self.self_attention(query=x, key=x, value=x, attention_mask=mask)
        x = x + residual
        x = self.self_attention_layernorm(x)
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
