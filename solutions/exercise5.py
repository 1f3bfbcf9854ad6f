"""Exercise 5 — a text classifier.

Assemble a binary text classifier from the layers of exercises 1 and 3:
token ids → ``PositionalEmbedding`` → ``TransformerEncoder`` → pooling →
``Dense(1, activation="sigmoid")``. The reference versions of both layers are
provided below (registered for saving), so you can do this exercise whatever
state your own exercises 1 and 3 are in.

Two things to get right:
- the padding mask made by the embedding must reach the encoder and the
  pooling, so that padding changes no prediction;
- the model must save to a ``.keras`` file and load back, without extra
  arguments, to identical predictions.

Run ``grade exercise5`` to check your work; ``exercises/exercise5.md`` has the
instructions and ``grade hint exercise5`` gives hints one at a time.
"""

import keras
from keras import layers

# BEGIN PROVIDED LAYERS (made by python -m tools.generate from exercises 1 and 3; do not edit)


@keras.saving.register_keras_serializable(package="transformer_exercises")
class PositionalEmbedding(layers.Layer):
    """Token embedding plus learned position embedding.

    Args:
        sequence_length: the longest sequence the layer accepts (number of positions).
        input_dim: vocabulary size (number of token ids).
        output_dim: size of each embedding vector.
        **kwargs: passed on to ``keras.layers.Layer`` (``name``, ``dtype``, ...).
    """

    def __init__(self, sequence_length, input_dim, output_dim, **kwargs):
        super().__init__(**kwargs)
        self.token_embeddings = layers.Embedding(input_dim=input_dim, output_dim=output_dim)
        self.position_embeddings = layers.Embedding(input_dim=sequence_length, output_dim=output_dim)
        self.sequence_length = sequence_length
        self.input_dim = input_dim
        self.output_dim = output_dim

    def call(self, inputs):
        """Embed token ids of shape (batch, seq); return (batch, seq, output_dim)."""
        length = keras.ops.shape(inputs)[-1]
        positions = keras.ops.arange(0, length, 1)
        embedded_tokens = self.token_embeddings(inputs)
        embedded_positions = self.position_embeddings(positions)
        return embedded_tokens + embedded_positions

    def compute_mask(self, inputs, mask=None):
        """Return a boolean mask of shape (batch, seq): True where the token id is not 0."""
        return keras.ops.not_equal(inputs, 0)

    def get_config(self):
        """Return the constructor arguments, so Keras can rebuild the layer."""
        config = super().get_config()
        config.update(
            {
                "sequence_length": self.sequence_length,
                "input_dim": self.input_dim,
                "output_dim": self.output_dim,
            }
        )
        return config


@keras.saving.register_keras_serializable(package="transformer_exercises")
class TransformerEncoder(layers.Layer):
    """A post-norm Transformer encoder block.

    Args:
        embed_dim: size of each input token vector (and of the output).
        dense_dim: width of the hidden layer of the feed-forward projection.
        num_heads: number of attention heads.
        **kwargs: passed on to ``keras.layers.Layer`` (``name``, ``dtype``, ...).
    """

    def __init__(self, embed_dim, dense_dim, num_heads, **kwargs):
        super().__init__(**kwargs)
        self.embed_dim = embed_dim
        self.dense_dim = dense_dim
        self.num_heads = num_heads
        self.attention = layers.MultiHeadAttention(
            num_heads=num_heads, key_dim=embed_dim
        )
        self.dense_proj = keras.Sequential(
            [
                layers.Dense(dense_dim, activation="relu"),
                layers.Dense(embed_dim),
            ]
        )
        self.layernorm_1 = layers.LayerNormalization()
        self.layernorm_2 = layers.LayerNormalization()
        self.supports_masking = True

    def call(self, inputs, mask=None):
        """Encode ``inputs`` of shape (batch, seq, embed_dim).

        Args:
            inputs: a float tensor of shape (batch, seq, embed_dim).
            mask: None, or a boolean padding mask of shape (batch, seq).

        Returns:
            A float tensor of shape (batch, seq, embed_dim).
        """
        if mask is not None:
            mask = keras.ops.expand_dims(mask, axis=1)
        attention_output = self.attention(inputs, inputs, attention_mask=mask)
        proj_input = self.layernorm_1(inputs + attention_output)
        proj_output = self.dense_proj(proj_input)
        return self.layernorm_2(proj_input + proj_output)

    def get_config(self):
        """Return the constructor arguments, so Keras can rebuild the layer."""
        config = super().get_config()
        config.update(
            {
                "embed_dim": self.embed_dim,
                "dense_dim": self.dense_dim,
                "num_heads": self.num_heads,
            }
        )
        return config


# END PROVIDED LAYERS


def build_classifier(vocab_size, sequence_length, embed_dim, dense_dim, num_heads):
    """Return a keras.Model from token ids (batch, sequence_length) to probabilities (batch, 1).

    Args:
        vocab_size: number of token ids; 0 is padding.
        sequence_length: length of every input sequence.
        embed_dim, dense_dim, num_heads: sizes of the embedding and the encoder.
    """
    ### BEGIN SOLUTION
    inputs = keras.Input(shape=(sequence_length,), dtype="int32")
    x = PositionalEmbedding(sequence_length, vocab_size, embed_dim)(inputs)
    x = TransformerEncoder(embed_dim, dense_dim, num_heads)(x)
    x = layers.GlobalAveragePooling1D()(x)
    x = layers.Dropout(0.5)(x)
    outputs = layers.Dense(1, activation="sigmoid")(x)
    return keras.Model(inputs, outputs)
    ### END SOLUTION
