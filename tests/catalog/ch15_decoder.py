"""Mistakes and correct variants of the third edition's Transformer decoder (chapter 15)."""

from __future__ import annotations

from . import Mistake, Variant, layer_api_mistakes, solution
from . import edit as _edit

SOLUTION = solution("ch15_decoder")
CALL = "def call(self, target, source, source_mask):"
SELF_ATTEND = "x = self.self_attention(query=x, key=x, value=x, use_causal_mask=True)"
CROSS_ATTEND = "x = self.cross_attention(query=x, key=source, value=source, attention_mask=mask)"


def edit(*replacements, prefix=""):
    return _edit(SOLUTION, *replacements, prefix=prefix)


# The book's chapter 15 decoder, exactly as the notebook writes it: no **kwargs, no get_config.
BOOK = '''import keras
from keras import layers


class TransformerDecoder(keras.Layer):
    def __init__(self, hidden_dim, intermediate_dim, num_heads):
        super().__init__()
        key_dim = hidden_dim // num_heads
        self.self_attention = layers.MultiHeadAttention(num_heads, key_dim)
        self.self_attention_layernorm = layers.LayerNormalization()
        self.cross_attention = layers.MultiHeadAttention(num_heads, key_dim)
        self.cross_attention_layernorm = layers.LayerNormalization()
        self.feed_forward_1 = layers.Dense(intermediate_dim, activation="relu")
        self.feed_forward_2 = layers.Dense(hidden_dim)
        self.feed_forward_layernorm = layers.LayerNormalization()

    def call(self, target, source, source_mask):
        residual = x = target
        x = self.self_attention(query=x, key=x, value=x, use_causal_mask=True)
        x = x + residual
        x = self.self_attention_layernorm(x)
        residual = x
        mask = source_mask[:, None, :]
        x = self.cross_attention(
            query=x, key=source, value=source, attention_mask=mask
        )
        x = x + residual
        x = self.cross_attention_layernorm(x)
        residual = x
        x = self.feed_forward_1(x)
        x = self.feed_forward_2(x)
        x = x + residual
        x = self.feed_forward_layernorm(x)
        return x
'''

BOOK_ADAPTED = _edit(
    BOOK,
    ("def __init__(self, hidden_dim, intermediate_dim, num_heads):",
     "def __init__(self, hidden_dim, intermediate_dim, num_heads, **kwargs):"),
    ("        super().__init__()\n",
     "        super().__init__(**kwargs)\n        self.hidden_dim = hidden_dim\n"
     "        self.intermediate_dim = intermediate_dim\n        self.num_heads = num_heads\n"),
    ("        return x\n", "        return x\n\n" + SOLUTION[SOLUTION.index("    def get_config(self):"):]),
)

MISTAKES = layer_api_mistakes(
    SOLUTION, "def __init__(self, hidden_dim, intermediate_dim, num_heads, **kwargs):",
    "TransformerDecoder(8, 16, 2)", '                "num_heads": self.num_heads,\n', "num_heads",
) + [
    Mistake(
        "book_code_as_printed",
        BOOK,
        ("config.base_keys", "config.from_config"),
        "name='layer_under_test') raised TypeError",
    ),
    Mistake(
        "returns_a_tuple",
        edit(("        return x\n", "        return x, residual\n")),
        ("api.output_shape",),
        "call returned a tuple",
    ),
    Mistake(
        "cross_attention_query_and_value_swapped",
        edit((CROSS_ATTEND, "x = self.cross_attention(query=source, key=x, value=x, attention_mask=mask)")),
        ("api.output_shape",),
        "were the query, the target sequence (5) the keys",
        causes=1,
    ),
    Mistake(
        "shared_norm",
        edit(("self.cross_attention_layernorm = layers.LayerNormalization()",
              "self.cross_attention_layernorm = self.self_attention_layernorm")),
        ("weights.three_norms", "weights.norm_parameters", "gradients.norms_differ"),
        "3 LayerNormalization calls on only 2 instance(s)",
    ),
    Mistake(
        "second_edition_key_dim",
        edit(("        key_dim = hidden_dim // num_heads\n", "        key_dim = hidden_dim\n")),
        ("weights.trainable_list",),
        "key_dim=hidden_dim // num_heads=4",
    ),
    Mistake(
        "gradient_cut_by_numpy",
        edit(("x = self.feed_forward_2(x)", "x = keras.ops.convert_to_tensor(np.asarray(self.feed_forward_2(x)))"),
             prefix="import numpy as np\n"),
        ("gradients.all_variables",),
        "no gradient for",
    ),
    Mistake(
        "not_causal",
        edit((SELF_ATTEND, "x = self.self_attention(query=x, key=x, value=x)")),
        ("mask.causal", "mask.self_attention_mask", "forward.decoder"),
        "changing only target positions",
    ),
    Mistake(
        "cross_mask_ignored",
        edit((CROSS_ATTEND, "x = self.cross_attention(query=x, key=source, value=source)")),
        ("mask.cross_attention_mask", "mask.encoder_padding_invariance"),
        "no mask reached MultiHeadAttention",
    ),
    Mistake(
        "cross_attention_over_the_decoder",
        edit((CROSS_ATTEND, "x = self.cross_attention(query=x, key=x, value=x)")),
        ("mask.cross_attention_mask", "forward.decoder"),
        "no MultiHeadAttention call with encoder_outputs as its value",
    ),
    Mistake(
        "cross_query_from_the_target",
        edit((CROSS_ATTEND, "x = self.cross_attention(query=target, key=source, value=source, attention_mask=mask)")),
        ("forward.decoder",),
        "query is the decoder's inputs",
    ),
    Mistake(
        "no_ffn_residual",
        edit(("        x = x + residual\n        x = self.feed_forward_layernorm(x)\n",
              "        x = self.feed_forward_layernorm(x)\n")),
        ("forward.decoder",),
        "feed-forward output is normalised without adding its input",
    ),
    Mistake(
        "causal_mask_from_the_static_shape",
        edit((SELF_ATTEND, """length = x.shape[1]
        causal = keras.ops.tril(keras.ops.ones((length, length), dtype="bool"))
        x = self.self_attention(query=x, key=x, value=x, attention_mask=causal[None])""")),
        ("mask.lengths",),
        "keras.Input(shape=(None, hidden_dim)) for both inputs",
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
]

VARIANTS = [
    Variant("book_code_adapted", BOOK_ADAPTED),
    Variant(
        "causal_mask_built_at_run_time_and_positional_attention",
        edit((SELF_ATTEND, """length = keras.ops.shape(x)[1]
        causal = keras.ops.tril(keras.ops.ones((length, length), dtype="bool"))
        x = self.self_attention(x, x, attention_mask=causal[None])"""),
             ("mask = source_mask[:, None, :]", "mask = keras.ops.expand_dims(source_mask, axis=1)")),
    ),
    Variant(
        "other_names_and_dropout",
        edit((CALL, "def call(self, inputs, encoder_outputs, mask, training=None):"),
             ("        residual = x = target\n", "        residual = x = inputs\n"),
             ("        mask = source_mask[:, None, :]\n", "        mask = mask[:, None, :]\n"),
             (CROSS_ATTEND,
              "x = self.cross_attention(query=x, key=encoder_outputs, value=encoder_outputs, attention_mask=mask)"),
             ("        self.feed_forward_layernorm = layers.LayerNormalization()\n",
              "        self.feed_forward_layernorm = layers.LayerNormalization()\n"
              "        self.dropout = layers.Dropout(0.1)\n"),
             ("        x = self.feed_forward_2(x)\n",
              "        x = self.feed_forward_2(x)\n        x = self.dropout(x, training=training)\n")),
    ),
]

# The book's causal self-attention, use_causal_mask=True, on a MultiHeadAttention subclass whose
# _compute_attention is an override of (*args, **kwargs): Keras builds the causal mask itself and
# hands it to the override by MultiHeadAttention's own argument names.
VARIANTS.append(Variant(
    "attention_subclass_with_use_causal_mask",
    edit(("self.self_attention = layers.MultiHeadAttention(", "self.self_attention = ForwardingAttention("),
         ("\n\nclass TransformerDecoder(", """

class ForwardingAttention(layers.MultiHeadAttention):
    def _compute_attention(self, *args, **kwargs):
        return super()._compute_attention(*args, **kwargs)


class TransformerDecoder("""))),
)
