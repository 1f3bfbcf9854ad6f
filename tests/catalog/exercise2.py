"""Mistakes and correct variants of exercise 2, the self-attention block."""

from __future__ import annotations

from . import Mistake, Variant, dropout_on_by_default, layer_api_mistakes, solution
from . import edit as _edit

SOLUTION = solution("exercise2")


def edit(*replacements, prefix=""):
    return _edit(SOLUTION, *replacements, prefix=prefix)


EXPAND = "attention_mask = keras.ops.expand_dims(mask, axis=1)"
ATTEND = "self.attention(inputs, inputs, attention_mask=attention_mask)"
RETURN = "return self.layernorm(inputs + attention_output)"

MISTAKES = layer_api_mistakes(
    SOLUTION,
    "def __init__(self, embed_dim, num_heads, **kwargs):",
    "SelfAttentionBlock(8, 2)",
    'config.update({"embed_dim": self.embed_dim, "num_heads": self.num_heads})',
    "num_heads",
) + [
    Mistake(
        "returns_a_tuple",
        edit((RETURN, "return self.layernorm(inputs + attention_output), attention_output")),
        ("api.output_shape",),
        "call returned a tuple",
    ),
    Mistake(
        "no_norm",
        edit((RETURN, "return inputs + attention_output")),
        ("weights.one_norm", "forward.residual_norm"),
        "no LayerNormalization layer was called",
    ),
    Mistake(
        "frozen_norm",
        edit(("        self.supports_masking = True\n",
              "        self.supports_masking = True\n        self.layernorm.trainable = False\n")),
        ("weights.one_norm",),
        "is not trainable",
    ),
    Mistake(
        "key_dim_split_across_heads",
        edit(("key_dim=embed_dim)", "key_dim=embed_dim // num_heads)")),
        ("weights.trainable_list",),
        "key_dim=4",
    ),
    Mistake(
        "gradient_cut_by_numpy",
        edit(("attention_output = " + ATTEND,
              "attention_output = keras.ops.convert_to_tensor(np.asarray(" + ATTEND + "))"),
             prefix="import numpy as np\n"),
        ("gradients.all_variables",),
        "no gradient for",
    ),
    Mistake(
        "ignored_mask",
        edit((ATTEND, "self.attention(inputs, inputs)")),
        ("mask.attention_mask_shape", "mask.masks_keys", "mask.padding_invariance"),
        "no mask reached MultiHeadAttention",
    ),
    Mistake(
        "wrong_mask_axis",
        edit((EXPAND, "attention_mask = keras.ops.expand_dims(mask, axis=2)")),
        ("mask.masks_keys", "mask.padding_invariance"),
        "wrong axis",
    ),
    Mistake(
        "inverted_mask",
        edit((EXPAND, "attention_mask = keras.ops.logical_not(keras.ops.expand_dims(mask, axis=1))")),
        ("mask.masks_keys", "mask.padding_invariance"),
        "inverted",
    ),
    Mistake(
        "unexpanded_mask",
        edit((EXPAND, "attention_mask = mask")),
        ("mask.attention_mask_shape", "mask.padding_invariance"),
        "the padding mask unexpanded",
    ),
    Mistake(
        "mask_not_propagated",
        edit(("        self.supports_masking = True\n", "")),
        ("mask.propagates",),
        "supports_masking is False",
    ),
    Mistake(
        "no_residual",
        edit((RETURN, "return self.layernorm(attention_output)")),
        ("forward.residual_norm",),
        "without adding the inputs",
    ),
    Mistake(
        "pre_norm",
        edit(("attention_output = " + ATTEND + "\n        " + RETURN,
              "normed = self.layernorm(inputs)\n"
              "        return inputs + self.attention(normed, normed, attention_mask=attention_mask)")),
        ("forward.residual_norm",),
        "normalised before attention",
    ),
]

VARIANTS = [
    Variant(
        "add_layer_and_other_names",
        edit(
            ("self.attention = layers", "self.mha = layers"),
            ("self.layernorm = layers.LayerNormalization()",
             "self.norm = layers.LayerNormalization(epsilon=1e-6)\n        self.add = layers.Add()"),
            ("attention_output = self.attention(", "attention_output = self.mha("),
            (RETURN, "return self.norm(self.add([inputs, attention_output]))"),
        ),
    ),
    Variant(
        "sublayers_built_in_build_with_dropout",
        edit(
            ("""        self.attention = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
        self.layernorm = layers.LayerNormalization()
""", ""),
            ("    def call(self, inputs, mask=None):", """    def build(self, input_shape):
        self.attention = layers.MultiHeadAttention(self.num_heads, self.embed_dim, dropout=0.1)
        self.attention.build(input_shape, input_shape)
        self.layernorm = layers.LayerNormalization()
        self.layernorm.build(input_shape)
        self.dropout = layers.Dropout(0.2)

    def call(self, inputs, mask=None, training=None):"""),
            (RETURN, "return self.layernorm(inputs + self.dropout(attention_output, training=training))"),
        ),
    ),
    Variant(
        "full_queries_by_keys_mask",
        edit((EXPAND, "attention_mask = keras.ops.logical_and(mask[:, None, :], mask[:, :, None])")),
    ),
    Variant(
        "value_mask",
        edit(("""        attention_mask = None
        if mask is not None:
            """ + EXPAND + "\n", ""),
             (ATTEND, "self.attention(inputs, inputs, value_mask=mask)")),
    ),
]

VARIANTS += [
    Variant(
        "attention_subclass_and_four_dimensional_mask",
        edit(
            ("self.attention = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)",
             "self.attention = OwnAttention(num_heads=num_heads, key_dim=embed_dim)"),
            (EXPAND, "attention_mask = mask[:, None, None, :]"),
            ("class SelfAttentionBlock(", '''class OwnAttention(layers.MultiHeadAttention):
    """Projections and attention called by hand, as keras-hub's attention layers do."""

    def call(self, query, value, key=None, attention_mask=None, training=None):
        key = value if key is None else key
        output, _ = self._compute_attention(self._query_dense(query), self._key_dense(key),
                                            self._value_dense(value), attention_mask, training)
        return self._output_dense(output)


class SelfAttentionBlock('''),
        ),
    ),
]

MISTAKES.append(dropout_on_by_default(
    SOLUTION, "def call(self, inputs, mask=None):",
    (RETURN, "return self.layernorm(inputs + self.dropout(attention_output, training=training))"),
))
