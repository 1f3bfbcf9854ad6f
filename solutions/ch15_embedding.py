"""Chapter 15 (3rd edition) — positional embedding.

Write ``PositionalEmbedding``, the first layer of the Transformer of
*Deep Learning with Python* (3rd ed., chapter 15), in Keras 3. It turns a
batch of token ids of shape ``(batch, seq)`` into vectors of shape
``(batch, seq, output_dim)``: the embedding of each token plus a learned
embedding of its position (0, 1, 2, ...).

Compute the positions with ``keras.ops``, as the book does, so that the
layer also works inside a functional model built on ``keras.Input``, where
the sequence length is unknown.

Beyond the book: ``__init__`` passes ``**kwargs`` on to the base layer and
``get_config`` returns the constructor's arguments, so that Keras can rebuild
the layer when a model holding it is saved and loaded.

Run ``grade ch15_embedding`` to check your work.
"""

import keras
from keras import layers, ops


class PositionalEmbedding(keras.Layer):
    """Token embedding plus learned position embedding.

    Args:
        sequence_length: the longest sequence the layer accepts (number of positions).
        input_dim: vocabulary size (number of token ids).
        output_dim: size of each embedding vector.
        **kwargs: passed on to ``keras.Layer`` (``name``, ``dtype``, ...).
    """

    def __init__(self, sequence_length, input_dim, output_dim, **kwargs):
        ### BEGIN SOLUTION
        super().__init__(**kwargs)
        self.sequence_length = sequence_length
        self.input_dim = input_dim
        self.output_dim = output_dim
        self.token_embeddings = layers.Embedding(input_dim, output_dim)
        self.position_embeddings = layers.Embedding(sequence_length, output_dim)
        ### END SOLUTION

    def call(self, inputs):
        """Embed ``inputs``, integer token ids of shape (batch, seq).

        Returns:
            A float tensor of shape (batch, seq, output_dim).
        """
        ### BEGIN SOLUTION
        positions = ops.cumsum(ops.ones_like(inputs), axis=-1) - 1
        embedded_tokens = self.token_embeddings(inputs)
        embedded_positions = self.position_embeddings(positions)
        return embedded_tokens + embedded_positions
        ### END SOLUTION

    def get_config(self):
        """Return the constructor arguments, so Keras can rebuild the layer."""
        ### BEGIN SOLUTION
        config = super().get_config()
        config.update(
            {
                "sequence_length": self.sequence_length,
                "input_dim": self.input_dim,
                "output_dim": self.output_dim,
            }
        )
        return config
        ### END SOLUTION
