"""Mistakes and correct variants of the third edition's Transformer encoder (chapter 15)."""

from __future__ import annotations

from . import Mistake, Variant, layer_api_mistakes, solution
from . import edit as _edit

SOLUTION = solution("ch15_encoder")


def edit(*replacements, prefix=""):
    return _edit(SOLUTION, *replacements, prefix=prefix)


SIGNATURE = "def __init__(self, hidden_dim, intermediate_dim, num_heads, **kwargs):"
CALL = "def call(self, source, source_mask):"
GET_CONFIG = SOLUTION[SOLUTION.index("    def get_config(self):"):]

# The book's chapter 15 encoder, exactly as the notebook writes it (and imports it: keras.Layer,
# `from keras import layers`): no **kwargs, no get_config.
BOOK = '''import keras
from keras import layers


class TransformerEncoder(keras.Layer):
    def __init__(self, hidden_dim, intermediate_dim, num_heads):
        super().__init__()
        key_dim = hidden_dim // num_heads
        self.self_attention = layers.MultiHeadAttention(num_heads, key_dim)
        self.self_attention_layernorm = layers.LayerNormalization()
        self.feed_forward_1 = layers.Dense(intermediate_dim, activation="relu")
        self.feed_forward_2 = layers.Dense(hidden_dim)
        self.feed_forward_layernorm = layers.LayerNormalization()

    def call(self, source, source_mask):
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
'''

# The book's code adapted only to what the exercise asks beyond it: **kwargs reach the base
# layer, and get_config returns the constructor's arguments.
BOOK_ADAPTED = _edit(
    BOOK,
    ("def __init__(self, hidden_dim, intermediate_dim, num_heads):",
     "def __init__(self, hidden_dim, intermediate_dim, num_heads, **kwargs):"),
    ("        super().__init__()\n",
     "        super().__init__(**kwargs)\n        self.hidden_dim = hidden_dim\n"
     "        self.intermediate_dim = intermediate_dim\n        self.num_heads = num_heads\n"),
    ("        return x\n", "        return x\n\n" + GET_CONFIG),
)

MISTAKES = layer_api_mistakes(
    SOLUTION, SIGNATURE, "TransformerEncoder(8, 16, 2)",
    '                "intermediate_dim": self.intermediate_dim,\n', "intermediate_dim",
) + [
    Mistake(
        # what the exercise asks beyond the book, missing: the base config (name, dtype) reaches an
        # __init__ that takes none of it, so loading cannot rebuild the layer
        "book_code_as_printed",
        BOOK,
        ("config.base_keys", "config.from_config"),
        "name='layer_under_test') raised TypeError",
    ),
    Mistake(
        "shared_norm",
        edit(("self.feed_forward_layernorm = layers.LayerNormalization()",
              "self.feed_forward_layernorm = self.self_attention_layernorm")),
        ("weights.two_norms", "weights.norm_parameters", "gradients.norms_differ", "gradients.norms_diverge"),
        "one instance is called 2 times",
    ),
    Mistake(
        "reused_norm",
        edit(("x = self.feed_forward_layernorm(x)", "x = self.self_attention_layernorm(x)")),
        ("weights.two_norms", "gradients.norms_differ"),
        "one instance is called 2 times",
    ),
    Mistake(
        "frozen_norms",
        edit(("        self.feed_forward_layernorm = layers.LayerNormalization()\n",
              "        self.feed_forward_layernorm = layers.LayerNormalization()\n"
              "        self.self_attention_layernorm.trainable = False\n"
              "        self.feed_forward_layernorm.trainable = False\n")),
        ("weights.norm_parameters", "gradients.norms_differ", "gradients.norms_diverge"),
        "is not trainable",
    ),
    Mistake(
        "wrong_mask_axis",
        edit(("mask = source_mask[:, None, :]", "mask = source_mask[:, :, None]")),
        ("mask.masks_keys", "mask.padding_invariance"),
        "wrong axis",
    ),
    Mistake(
        "ignored_mask",
        edit(("x = self.self_attention(query=x, key=x, value=x, attention_mask=mask)",
              "x = self.self_attention(query=x, key=x, value=x)")),
        ("mask.attention_mask_shape", "mask.masks_keys", "mask.padding_invariance"),
        "no mask reached MultiHeadAttention",
    ),
    Mistake(
        "inverted_mask",
        edit(("mask = source_mask[:, None, :]", "mask = keras.ops.logical_not(source_mask[:, None, :])")),
        ("mask.masks_keys", "mask.padding_invariance"),
        "inverted",
    ),
    Mistake(
        # every call carries the mask in this edition: MultiHeadAttention raises on the first one
        "unexpanded_mask",
        edit(("mask = source_mask[:, None, :]", "mask = source_mask")),
        ("api.output_shape",),
        "the axes a mask was expanded on",
    ),
    Mistake(
        "no_attention_residual",
        edit(("        x = x + residual\n        x = self.self_attention_layernorm(x)\n",
              "        x = self.self_attention_layernorm(x)\n")),
        ("forward.post_norm",),
        "normalised without adding the inputs",
    ),
    Mistake(
        "no_ffn_residual",
        edit(("        x = x + residual\n        x = self.feed_forward_layernorm(x)\n",
              "        x = self.feed_forward_layernorm(x)\n")),
        ("forward.post_norm",),
        "normalised without adding its input",
    ),
    Mistake(
        "pre_norm",
        edit((SOLUTION[SOLUTION.index("        residual = x = source\n"):SOLUTION.index("        return x\n")],
              """        mask = source_mask[:, None, :]
        normed = self.self_attention_layernorm(source)
        x = source + self.self_attention(query=normed, key=normed, value=normed, attention_mask=mask)
        x = x + self.feed_forward_2(self.feed_forward_1(self.feed_forward_layernorm(x)))
""")),
        ("forward.call_order", "forward.post_norm"),
        "pre-norm",
    ),
    Mistake(
        "no_relu",
        edit(('layers.Dense(intermediate_dim, activation="relu")', "layers.Dense(intermediate_dim)")),
        ("forward.post_norm",),
        "no relu",
    ),
    Mistake(
        # the second edition's key_dim: a real encoder, but not the book's third-edition one
        "second_edition_key_dim",
        edit(("        key_dim = hidden_dim // num_heads\n", "        key_dim = hidden_dim\n")),
        ("weights.trainable_list",),
        "key_dim=hidden_dim // num_heads=4",
    ),
    Mistake(
        "wrong_ffn_width",
        edit(('layers.Dense(intermediate_dim, activation="relu")', 'layers.Dense(hidden_dim, activation="relu")')),
        ("weights.trainable_list",),
        "feed-forward Dense widths are [8, 8]",
    ),
    Mistake(
        "returns_a_tuple",
        edit(("        return x\n", "        return x, residual\n")),
        ("api.output_shape", "forward.post_norm"),
        "call returned a tuple",
    ),
    Mistake(
        "dropout_on_by_default",
        edit(("        self.feed_forward_layernorm = layers.LayerNormalization()\n",
              "        self.feed_forward_layernorm = layers.LayerNormalization()\n"
              "        self.dropout = layers.Dropout(0.3)\n"),
             (CALL, CALL.replace("):", ", training=True):")),
             ("        x = self.feed_forward_2(x)\n",
              "        x = self.feed_forward_2(x)\n        x = self.dropout(x, training=training)\n")),
        ("forward.inference",),
        "returned different outputs",
    ),
    Mistake(
        "gradient_cut_by_numpy",
        edit(("x = self.feed_forward_2(x)", "x = keras.ops.convert_to_tensor(np.asarray(self.feed_forward_2(x)))"),
             prefix="import numpy as np\n"),
        ("gradients.all_variables",),
        "no gradient for",
    ),
]

VARIANTS = [
    Variant("book_code_adapted", BOOK_ADAPTED),
    Variant(
        "keras_ops_expand_dims_and_positional_attention",
        edit(("mask = source_mask[:, None, :]", "mask = keras.ops.expand_dims(source_mask, axis=1)"),
             ("x = self.self_attention(query=x, key=x, value=x, attention_mask=mask)",
              "x = self.self_attention(x, x, attention_mask=mask)")),
    ),
    Variant(
        "other_names_and_sequential_ffn",
        edit(
            (CALL, "def call(self, inputs, mask):"),
            ("        residual = x = source\n        mask = source_mask[:, None, :]\n",
             "        residual = x = inputs\n        mask = mask[:, None, :]\n"),
            ('        self.feed_forward_1 = layers.Dense(intermediate_dim, activation="relu")\n'
             "        self.feed_forward_2 = layers.Dense(hidden_dim)\n",
             "        self.ffn = keras.Sequential(\n"
             '            [layers.Dense(intermediate_dim, activation="relu"), layers.Dense(hidden_dim)]\n'
             "        )\n"),
            ("        x = self.feed_forward_1(x)\n        x = self.feed_forward_2(x)\n",
             "        x = self.ffn(x)\n"),
        ),
    ),
    Variant(
        "full_batch_queries_keys_mask",
        edit(("mask = source_mask[:, None, :]",
              "mask = keras.ops.logical_and(source_mask[:, None, :], source_mask[:, :, None])")),
    ),
    Variant(
        "sublayers_built_in_build",
        edit(
            ("""        key_dim = hidden_dim // num_heads
        self.self_attention = layers.MultiHeadAttention(num_heads, key_dim)
        self.self_attention_layernorm = layers.LayerNormalization()
        self.feed_forward_1 = layers.Dense(intermediate_dim, activation="relu")
        self.feed_forward_2 = layers.Dense(hidden_dim)
        self.feed_forward_layernorm = layers.LayerNormalization()
""", ""),
            (CALL, """def build(self, source_shape, source_mask_shape=None):
        key_dim = self.hidden_dim // self.num_heads
        self.self_attention = layers.MultiHeadAttention(self.num_heads, key_dim)
        self.self_attention_layernorm = layers.LayerNormalization()
        self.feed_forward_1 = layers.Dense(self.intermediate_dim, activation="relu")
        self.feed_forward_2 = layers.Dense(self.hidden_dim)
        self.feed_forward_layernorm = layers.LayerNormalization()

    """ + CALL),
        ),
    ),
    Variant(
        "dropout_with_training_argument",
        edit(("        self.feed_forward_layernorm = layers.LayerNormalization()\n",
              "        self.feed_forward_layernorm = layers.LayerNormalization()\n"
              "        self.dropout = layers.Dropout(0.1)\n"),
             (CALL, CALL.replace("):", ", training=None):")),
             ("        x = self.feed_forward_2(x)\n",
              "        x = self.feed_forward_2(x)\n        x = self.dropout(x, training=training)\n")),
    ),
    Variant(
        "layernorm_epsilon_and_add_layers",
        edit(("self.self_attention_layernorm = layers.LayerNormalization()",
              "self.self_attention_layernorm = layers.LayerNormalization(epsilon=1e-6)"),
             ("        x = x + residual\n        x = self.feed_forward_layernorm(x)\n",
              "        x = layers.Add()([x, residual])\n        x = self.feed_forward_layernorm(x)\n")),
    ),
]
