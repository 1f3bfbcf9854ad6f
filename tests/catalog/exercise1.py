"""Mistakes and correct variants of exercise 1, the positional embedding."""

from __future__ import annotations

from . import Mistake, Variant, layer_api_mistakes, solution
from . import edit as _edit

SOLUTION = solution("exercise1")


def edit(*replacements, prefix=""):
    return _edit(SOLUTION, *replacements, prefix=prefix)


MASK_LINE = "        return keras.ops.not_equal(inputs, 0)\n"
CONFIG_INPUT_DIM = '                "input_dim": self.input_dim,\n'

MISTAKES = layer_api_mistakes(
    SOLUTION,
    "def __init__(self, sequence_length, input_dim, output_dim, **kwargs):",
    "PositionalEmbedding(10, 50, 8)",
    CONFIG_INPUT_DIM,
    "input_dim",
) + [
    Mistake(
        "sums_over_features",
        edit(("return embedded_tokens + embedded_positions",
              "return keras.ops.sum(embedded_tokens + embedded_positions, axis=-1)")),
        ("api.output_shape",),
        "output of shape (3, 7)",
    ),
    Mistake(
        "one_table_for_tokens_and_positions",
        edit(("embedded_positions = self.position_embeddings(positions)",
              "embedded_positions = self.token_embeddings(positions)")),
        ("weights.two_tables", "weights.trainable_list"),
        "2 Embedding call(s) on 1 layer(s)",
    ),
    Mistake(
        "position_table_sized_by_vocabulary",
        edit(("layers.Embedding(input_dim=sequence_length, output_dim=output_dim)",
              "layers.Embedding(input_dim=input_dim, output_dim=output_dim)")),
        ("weights.two_tables", "weights.trainable_list"),
        "tables of shapes [(50, 8), (50, 8)]",
    ),
    Mistake(
        "positions_not_added",
        edit(("return embedded_tokens + embedded_positions", "return embedded_tokens")),
        ("forward.sum", "gradients.all_variables"),
        "position embeddings are not added",
    ),
    Mistake(
        "positions_from_one",
        edit(("keras.ops.arange(0, length, 1)", "keras.ops.arange(1, length + 1, 1)")),
        ("forward.sum", "gradients.used_rows"),
        "numbered from 1",
    ),
    Mistake(
        "no_compute_mask",
        edit((MASK_LINE, "        return None\n")),
        ("mask.values", "mask.functional"),
        "compute_mask returned NoneType",
    ),
    Mistake(
        "inverted_mask",
        edit((MASK_LINE, "        return keras.ops.equal(inputs, 0)\n")),
        ("mask.values",),
        "inverted",
    ),
    Mistake(
        "mask_with_a_feature_axis",
        edit((MASK_LINE, "        return keras.ops.expand_dims(keras.ops.not_equal(inputs, 0), -1)\n")),
        ("mask.values",),
        "a mask of shape (3, 7, 1)",
    ),
    Mistake(
        "tensorflow_op_in_compute_mask",
        edit((MASK_LINE, "        return tf.math.not_equal(inputs, 0)\n"), prefix="import tensorflow as tf\n"),
        ("mask.functional",),
        "KerasTensor cannot be used as input to a TensorFlow function",
        causes=1,  # the save raises on the same line: one mistake, a mask mistake
        first="mask.functional",
    ),
]

VARIANTS = [
    Variant(
        "book_code_with_tf_range",
        edit(
            ("length = keras.ops.shape(inputs)[-1]", "length = tf.shape(inputs)[-1]"),
            ("keras.ops.arange(0, length, 1)", "tf.range(start=0, limit=length, delta=1)"),
            (MASK_LINE, "        return inputs != 0\n"),
            prefix="import tensorflow as tf\n",
        ),
    ),
    Variant(
        "mask_from_the_token_embedding",
        edit(
            ("layers.Embedding(input_dim=input_dim, output_dim=output_dim)",
             "layers.Embedding(input_dim=input_dim, output_dim=output_dim, mask_zero=True)"),
            (MASK_LINE, "        return self.token_embeddings.compute_mask(inputs)\n"),
        ),
    ),
    Variant(
        "tables_built_in_build_with_other_names",
        edit(
            ("""        self.token_embeddings = layers.Embedding(input_dim=input_dim, output_dim=output_dim)
        self.position_embeddings = layers.Embedding(input_dim=sequence_length, output_dim=output_dim)
""", ""),
            ("""    def call(self, inputs):""", """    def build(self, input_shape):
        self.words = layers.Embedding(self.input_dim, self.output_dim)
        self.words.build(input_shape)
        self.places = layers.Embedding(self.sequence_length, self.output_dim)
        self.places.build((self.sequence_length,))

    def call(self, inputs):"""),
            ("embedded_tokens = self.token_embeddings(inputs)", "embedded_tokens = self.words(inputs)"),
            ("embedded_positions = self.position_embeddings(positions)",
             "embedded_positions = keras.ops.expand_dims(self.places(positions), 0)"),
        ),
    ),
    Variant(
        "positions_sliced_from_a_full_range",
        edit(("positions = keras.ops.arange(0, length, 1)",
              "positions = keras.ops.arange(0, self.sequence_length, 1)[:length]")),
    ),
]

# --------------------------------------------------------------------------- tables found by what they do

VARIANTS += [
    Variant(
        "reversible_embedding_for_tokens",
        edit(("self.token_embeddings = layers.Embedding(input_dim=input_dim, output_dim=output_dim)",
              "self.token_embeddings = keras.layers.ReversibleEmbedding(input_dim, output_dim)")),
    ),
    Variant(
        "position_table_made_with_add_weight",
        edit(
            ("        self.position_embeddings = layers.Embedding(input_dim=sequence_length, output_dim=output_dim)\n",
             "        self.position_table = self.add_weight(shape=(sequence_length, output_dim), name='positions')\n"),
            ("embedded_positions = self.position_embeddings(positions)",
             "embedded_positions = keras.ops.take(self.position_table, positions, axis=0)"),
        ),
    ),
    Variant(
        "keras_io_token_and_position_embedding",
        edit(
            ("""        length = keras.ops.shape(inputs)[-1]
        positions = keras.ops.arange(0, length, 1)
        embedded_tokens = self.token_embeddings(inputs)
        embedded_positions = self.position_embeddings(positions)
        return embedded_tokens + embedded_positions""",
             """        maxlen = keras.ops.shape(inputs)[-1]
        positions = keras.ops.arange(start=0, stop=maxlen, step=1)
        positions = self.position_embeddings(positions)
        x = self.token_embeddings(inputs)
        return x + positions"""),
        ),
    ),
]

MISTAKES += [
    Mistake(
        "compute_mask_not_written",
        edit(("""    def compute_mask(self, inputs, mask=None):
        \"\"\"Return a boolean mask of shape (batch, seq): True where the token id is not 0.\"\"\"
        ### BEGIN SOLUTION
        return keras.ops.not_equal(inputs, 0)
        ### END SOLUTION

""", "")),
        ("mask.values", "mask.functional"),
        "compute_mask returned NoneType",
    ),
]

MISTAKES += [
    Mistake(
        "positions_over_the_whole_table",
        edit(("positions = keras.ops.arange(0, length, 1)",
              "positions = keras.ops.arange(0, self.sequence_length, 1)")),
        ("api.output_shape",),
        "positions cover only the input's length",
    ),
]
