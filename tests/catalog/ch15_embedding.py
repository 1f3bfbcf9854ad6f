"""Mistakes and correct variants of the third edition's positional embedding (chapter 15)."""

from __future__ import annotations

from . import Mistake, Variant, layer_api_mistakes, solution
from . import edit as _edit

SOLUTION = solution("ch15_embedding")
POSITIONS = "positions = ops.cumsum(ops.ones_like(inputs), axis=-1) - 1"


def edit(*replacements, prefix=""):
    return _edit(SOLUTION, *replacements, prefix=prefix)


# The book's chapter 15 layer, exactly as the notebook writes it: no **kwargs, no get_config.
BOOK = '''import keras
from keras import layers
from keras import ops


class PositionalEmbedding(keras.Layer):
    def __init__(self, sequence_length, input_dim, output_dim):
        super().__init__()
        self.token_embeddings = layers.Embedding(input_dim, output_dim)
        self.position_embeddings = layers.Embedding(sequence_length, output_dim)

    def call(self, inputs):
        positions = ops.cumsum(ops.ones_like(inputs), axis=-1) - 1
        embedded_tokens = self.token_embeddings(inputs)
        embedded_positions = self.position_embeddings(positions)
        return embedded_tokens + embedded_positions
'''

# Adapted only to what the exercise asks beyond the book: **kwargs, and get_config.
BOOK_ADAPTED = _edit(
    BOOK,
    ("def __init__(self, sequence_length, input_dim, output_dim):",
     "def __init__(self, sequence_length, input_dim, output_dim, **kwargs):"),
    ("        super().__init__()\n",
     "        super().__init__(**kwargs)\n        self.sequence_length = sequence_length\n"
     "        self.input_dim = input_dim\n        self.output_dim = output_dim\n"),
    ("        return embedded_tokens + embedded_positions\n",
     "        return embedded_tokens + embedded_positions\n\n"
     + SOLUTION[SOLUTION.index("    def get_config(self):"):]),
)

MISTAKES = layer_api_mistakes(
    SOLUTION, "def __init__(self, sequence_length, input_dim, output_dim, **kwargs):",
    "PositionalEmbedding(10, 50, 8)", '                "input_dim": self.input_dim,\n', "input_dim",
) + [
    Mistake(
        "book_code_as_printed",
        BOOK,
        ("config.base_keys", "config.from_config"),
        "name='layer_under_test') raised TypeError",
    ),
    Mistake(
        "sums_over_features",
        edit(("return embedded_tokens + embedded_positions",
              "return ops.sum(embedded_tokens + embedded_positions, axis=-1)")),
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
        edit(("layers.Embedding(sequence_length, output_dim)", "layers.Embedding(input_dim, output_dim)")),
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
        # the cumulative sum counts from 1: the book subtracts 1
        "positions_from_one",
        edit((POSITIONS, "positions = ops.cumsum(ops.ones_like(inputs), axis=-1)")),
        ("forward.sum", "gradients.used_rows"),
        "numbered from 1",
    ),
]

VARIANTS = [
    Variant("book_code_adapted", BOOK_ADAPTED),
    Variant(
        "positions_from_arange",
        edit((POSITIONS, "positions = ops.arange(0, ops.shape(inputs)[-1], 1)")),
    ),
    Variant(
        "position_table_made_with_add_weight",
        edit(
            ("        self.position_embeddings = layers.Embedding(sequence_length, output_dim)\n",
             "        self.position_table = self.add_weight(shape=(sequence_length, output_dim), name='positions')\n"),
            ("embedded_positions = self.position_embeddings(positions)",
             "embedded_positions = ops.take(self.position_table, positions, axis=0)"),
        ),
    ),
    Variant(
        "tables_built_in_build_with_other_names",
        edit(
            ("""        self.token_embeddings = layers.Embedding(input_dim, output_dim)
        self.position_embeddings = layers.Embedding(sequence_length, output_dim)
""", ""),
            ("""    def call(self, inputs):""", """    def build(self, input_shape):
        self.words = layers.Embedding(self.input_dim, self.output_dim)
        self.words.build(input_shape)
        self.places = layers.Embedding(self.sequence_length, self.output_dim)
        self.places.build((self.sequence_length,))

    def call(self, inputs):"""),
            ("embedded_tokens = self.token_embeddings(inputs)", "embedded_tokens = self.words(inputs)"),
            ("embedded_positions = self.position_embeddings(positions)",
             "embedded_positions = self.places(positions)"),
        ),
    ),
]
