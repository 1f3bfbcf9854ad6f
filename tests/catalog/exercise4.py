"""Mistakes and correct variants of exercise 4, the Transformer decoder."""

from __future__ import annotations

from . import Mistake, Variant, layer_api_mistakes, solution
from . import edit as _edit

SOLUTION = solution("exercise4")


def edit(*replacements, prefix=""):
    return _edit(SOLUTION, *replacements, prefix=prefix)


CAUSAL = 'causal = keras.ops.tril(keras.ops.ones((length, length), dtype="bool"))'
CROSS = 'cross_mask = keras.ops.expand_dims(keras.ops.cast(encoder_outputs_mask, "bool"), axis=1)'
SELF_ATTEND = "attended = self.attention_1(inputs, inputs, attention_mask=self_mask)"
CROSS_ATTEND = "crossed = self.attention_2(attended, encoder_outputs, attention_mask=cross_mask)"

MISTAKES = layer_api_mistakes(
    SOLUTION,
    "def __init__(self, embed_dim, dense_dim, num_heads, **kwargs):",
    "TransformerDecoder(8, 16, 2)",
    '                "num_heads": self.num_heads,\n',
    "num_heads",
) + [
    Mistake(
        "returns_a_tuple",
        edit(("return self.layernorm_3(crossed + self.dense_proj(crossed))",
              "return self.layernorm_3(crossed + self.dense_proj(crossed)), crossed")),
        ("api.output_shape",),
        "call returned a tuple",
    ),
    Mistake(
        "shared_norm",
        edit(("self.layernorm_3 = layers.LayerNormalization()", "self.layernorm_3 = self.layernorm_1")),
        ("weights.three_norms", "weights.norm_parameters", "gradients.norms_differ"),
        "3 LayerNormalization calls on only 2 instance(s)",
    ),
    Mistake(
        "key_dim_split_across_heads",
        edit(("self.attention_2 = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)",
              "self.attention_2 = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim // num_heads)")),
        ("weights.trainable_list",),
        "missing shapes",
    ),
    Mistake(
        "gradient_cut_by_numpy",
        edit(("return self.layernorm_3(crossed + self.dense_proj(crossed))",
              "return self.layernorm_3(crossed + keras.ops.convert_to_tensor(np.asarray(self.dense_proj(crossed))))"),
             prefix="import numpy as np\n"),
        ("gradients.all_variables",),
        "no gradient for",
    ),
    Mistake(
        "not_causal",
        edit((CAUSAL, 'causal = keras.ops.ones((length, length), dtype="bool")')),
        ("mask.causal", "mask.self_attention_mask", "forward.decoder"),
        "changing only target positions 2 and later",
    ),
    Mistake(
        "cross_mask_from_the_target_like_the_book",
        edit((CROSS, 'cross_mask = keras.ops.expand_dims(keras.ops.cast(inputs_mask, "bool"), axis=1)')),
        ("mask.cross_attention_mask", "mask.encoder_padding_invariance"),
        "it was built from the target's padding mask",
    ),
    Mistake(
        "cross_mask_ignored",
        edit((CROSS_ATTEND, "crossed = self.attention_2(attended, encoder_outputs)")),
        ("mask.cross_attention_mask", "mask.encoder_padding_invariance"),
        "received no mask",
    ),
    Mistake(
        "cross_attention_over_the_decoder",
        edit((CROSS_ATTEND, "crossed = self.attention_2(attended, attended)")),
        ("mask.cross_attention_mask", "forward.decoder"),
        "no MultiHeadAttention call with encoder_outputs as its value",
    ),
    Mistake(
        "cross_query_from_the_inputs",
        edit((CROSS_ATTEND, "crossed = self.attention_2(inputs, encoder_outputs, attention_mask=cross_mask)")),
        ("forward.decoder",),
        "query is the decoder's inputs",
    ),
    Mistake(
        "no_ffn_residual",
        edit(("return self.layernorm_3(crossed + self.dense_proj(crossed))",
              "return self.layernorm_3(self.dense_proj(crossed))")),
        ("forward.decoder",),
        "feed-forward output is normalised without adding its input",
    ),
]

VARIANTS = [
    Variant(
        "use_causal_mask_argument",
        edit(
            ("""        length = keras.ops.shape(inputs)[1]
        """ + CAUSAL + """
        self_mask = keras.ops.expand_dims(causal, axis=0)
        if inputs_mask is not None:
            padding = keras.ops.expand_dims(keras.ops.cast(inputs_mask, "bool"), axis=1)
            self_mask = keras.ops.logical_and(self_mask, padding)
""", """        self_mask = None
        if inputs_mask is not None:
            self_mask = keras.ops.expand_dims(keras.ops.cast(inputs_mask, "bool"), axis=1)
"""),
            (SELF_ATTEND, "attended = self.attention_1(inputs, inputs, attention_mask=self_mask, use_causal_mask=True)"),
        ),
    ),
    Variant(
        "causal_mask_from_arange_and_add_layers",
        edit(
            (CAUSAL, "positions = keras.ops.arange(length)\n"
                     "        causal = keras.ops.greater_equal(positions[:, None], positions[None, :])"),
            ("        self.supports_masking = True\n", "        self.supports_masking = True\n"
             "        self.add_1 = layers.Add()\n        self.add_2 = layers.Add()\n"),
            ("attended = self.layernorm_1(inputs + attended)", "attended = self.layernorm_1(self.add_1([inputs, attended]))"),
            ("crossed = self.layernorm_2(attended + crossed)", "crossed = self.layernorm_2(self.add_2([attended, crossed]))"),
        ),
    ),
    Variant(
        "dropout_and_other_names",
        edit(
            ("self.attention_1 = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)",
             "self.self_attention = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim, dropout=0.1)"),
            ("def call(self, inputs, encoder_outputs, inputs_mask=None, encoder_outputs_mask=None):",
             "def call(self, inputs, encoder_outputs, inputs_mask=None, encoder_outputs_mask=None, training=None):"),
            (SELF_ATTEND, "attended = self.self_attention(inputs, inputs, attention_mask=self_mask, training=training)"),
            ("        self.supports_masking = True\n",
             "        self.supports_masking = True\n        self.dropout = layers.Dropout(0.3)\n"),
            ("return self.layernorm_3(crossed + self.dense_proj(crossed))",
             "return self.layernorm_3(crossed + self.dropout(self.dense_proj(crossed), training=training))"),
        ),
    ),
]
