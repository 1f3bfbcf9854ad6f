"""Mistakes and correct variants of exercise 4, the Transformer decoder."""

from __future__ import annotations

from . import Mistake, Variant, dropout_on_by_default, layer_api_mistakes, solution
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
        "The second MultiHeadAttention has key_dim=4; this exercise (like the book) uses key_dim=embed_dim=8",
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
        "changing only target positions",
    ),
    Mistake(
        "cross_mask_from_the_target_like_the_book",
        edit((CROSS, 'cross_mask = keras.ops.expand_dims(keras.ops.cast(inputs_mask, "bool"), axis=1)')),
        ("mask.cross_attention_mask", "mask.encoder_padding_invariance"),
        "it was built from the target's padding mask",
        causes=1,
    ),
    Mistake(
        # query and value swapped: the output is as long as the encoder's, and the residual sum says so; the
        # report names the swap, not a checklist of widths
        "cross_attention_query_and_value_swapped",
        edit((CROSS_ATTEND, "crossed = self.attention_2(encoder_outputs, attended, attention_mask=cross_mask)")),
        ("api.output_shape",),
        "The cross-attention's query must be the decoder's own sequence",
        causes=1,
    ),
    Mistake(
        "cross_mask_ignored",
        edit((CROSS_ATTEND, "crossed = self.attention_2(attended, encoder_outputs)")),
        ("mask.cross_attention_mask", "mask.encoder_padding_invariance"),
        "no mask reached MultiHeadAttention",
    ),
    Mistake(
        "cross_attention_over_the_decoder",
        edit((CROSS_ATTEND, "crossed = self.attention_2(attended, attended)")),
        ("mask.cross_attention_mask", "forward.decoder"),
        "no MultiHeadAttention call with encoder_outputs as its value",
        causes=1,
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

# The causal mask left to MultiHeadAttention (use_causal_mask=True), the padding mask passed as given.
USE_CAUSAL_MASK = (
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
)

VARIANTS = [
    Variant(
        # both attentions' output width given (as a shape), the width they have anyway
        "attention_output_shapes_given",
        edit(
            ("self.attention_1 = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)",
             "self.attention_1 = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim, "
             "output_shape=(embed_dim,))"),
            ("self.attention_2 = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)",
             "self.attention_2 = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim, "
             "output_shape=embed_dim)"),
        ),
    ),
    Variant(
        "use_causal_mask_argument",
        edit(
            *USE_CAUSAL_MASK,
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

# --------------------------------------------------------------------------- lengths and outside styles

INIT_NORMS = "        self.layernorm_3 = layers.LayerNormalization()\n"

MISTAKES += [
    Mistake(
        "causal_mask_built_once_in_build",
        edit(
            ("""        length = keras.ops.shape(inputs)[1]
        """ + CAUSAL + """
        self_mask = keras.ops.expand_dims(causal, axis=0)""",
             """        self_mask = keras.ops.expand_dims(self.causal, axis=0)"""),
            ("    def call(self, inputs, encoder_outputs, inputs_mask=None, encoder_outputs_mask=None):",
             """    def build(self, inputs_shape, encoder_outputs_shape=None):
        length = inputs_shape[1]
        self.causal = keras.ops.tril(keras.ops.ones((length, length), dtype="bool"))

    def call(self, inputs, encoder_outputs, inputs_mask=None, encoder_outputs_mask=None):"""),
        ),
        ("mask.lengths",),
        "a target of 7 and a source of 4 positions",
    ),
    Mistake(
        "causal_mask_from_the_static_shape",
        edit(("length = keras.ops.shape(inputs)[1]", "length = inputs.shape[1]")),
        ("mask.lengths",),
        "keras.Input(shape=(None, embed_dim)) for both inputs",
    ),
]

VARIANTS += [
    Variant(
        "tf_tutorial_nested_attention_layers",
        """import keras
from keras import layers
from keras import ops


class CausalSelfAttention(layers.Layer):
    def __init__(self, **kwargs):
        super().__init__()
        self.mha = layers.MultiHeadAttention(**kwargs)
        self.layernorm = layers.LayerNormalization()
        self.add = layers.Add()

    def call(self, x, padding=None):
        mask = None if padding is None else padding[:, None, :]
        attn_output = self.mha(query=x, value=x, key=x, attention_mask=mask, use_causal_mask=True)
        return self.layernorm(self.add([x, attn_output]))


class CrossAttention(layers.Layer):
    def __init__(self, **kwargs):
        super().__init__()
        self.mha = layers.MultiHeadAttention(**kwargs)
        self.layernorm = layers.LayerNormalization()
        self.add = layers.Add()

    def call(self, x, context, context_padding=None):
        mask = None if context_padding is None else context_padding[:, None, :]
        attn_output = self.mha(query=x, key=context, value=context, attention_mask=mask)
        return self.layernorm(self.add([x, attn_output]))


class FeedForward(layers.Layer):
    def __init__(self, d_model, dff):
        super().__init__()
        self.seq = keras.Sequential([layers.Dense(dff, activation="relu"), layers.Dense(d_model),
                                     layers.Dropout(0.1)])
        self.add = layers.Add()
        self.layer_norm = layers.LayerNormalization()

    def call(self, x):
        return self.layer_norm(self.add([x, self.seq(x)]))


class TransformerDecoder(layers.Layer):
    def __init__(self, embed_dim, dense_dim, num_heads, **kwargs):
        super().__init__(**kwargs)
        self.embed_dim, self.dense_dim, self.num_heads = embed_dim, dense_dim, num_heads
        self.causal_self_attention = CausalSelfAttention(num_heads=num_heads, key_dim=embed_dim, dropout=0.1)
        self.cross_attention = CrossAttention(num_heads=num_heads, key_dim=embed_dim, dropout=0.1)
        self.ffn = FeedForward(embed_dim, dense_dim)
        self.supports_masking = True

    def call(self, inputs, encoder_outputs, inputs_mask=None, encoder_outputs_mask=None):
        x = self.causal_self_attention(inputs, inputs_mask)
        x = self.cross_attention(x, encoder_outputs, encoder_outputs_mask)
        return self.ffn(x)

    def get_config(self):
        config = super().get_config()
        config.update({"embed_dim": self.embed_dim, "dense_dim": self.dense_dim, "num_heads": self.num_heads})
        return config
""",
    ),
    Variant(
        "keras_hub_style_merged_masks",
        edit(
            ("""        length = keras.ops.shape(inputs)[1]
        """ + CAUSAL + """
        self_mask = keras.ops.expand_dims(causal, axis=0)
        if inputs_mask is not None:
            padding = keras.ops.expand_dims(keras.ops.cast(inputs_mask, "bool"), axis=1)
            self_mask = keras.ops.logical_and(self_mask, padding)
        cross_mask = None
        if encoder_outputs_mask is not None:
            cross_mask = keras.ops.expand_dims(keras.ops.cast(encoder_outputs_mask, "bool"), axis=1)
""", """        batch, length = keras.ops.shape(inputs)[0], keras.ops.shape(inputs)[1]
        source = keras.ops.shape(encoder_outputs)[1]
        i = keras.ops.expand_dims(keras.ops.arange(length), 1)
        j = keras.ops.arange(length)
        causal = keras.ops.cast(keras.ops.greater_equal(i, j), "int32")
        self_mask = keras.ops.broadcast_to(causal[None], (batch, length, length))
        if inputs_mask is not None:
            padding = keras.ops.cast(keras.ops.expand_dims(inputs_mask, 1), "int32")
            self_mask = keras.ops.minimum(self_mask, padding)
        cross_mask = None
        if encoder_outputs_mask is not None:
            cross_mask = keras.ops.broadcast_to(
                keras.ops.cast(keras.ops.expand_dims(encoder_outputs_mask, 1), "int32"), (batch, length, source))
"""),
        ),
    ),
]

MISTAKES.append(dropout_on_by_default(
    SOLUTION, "def call(self, inputs, encoder_outputs, inputs_mask=None, encoder_outputs_mask=None):",
    ("return self.layernorm_3(crossed + self.dense_proj(crossed))",
     "return self.layernorm_3(crossed + self.dropout(self.dense_proj(crossed), training=training))"),
))


GELU_FEED_FORWARD = 'layers.Dense(dense_dim, activation="relu")'
MISTAKES += [
    # keras-io's video and ASR encoders: a GELU feed-forward, a different layer from the exercise's relu one;
    # the forward check says so, and every weights, gradients, mask and config check passes
    Mistake(
        "gelu_feed_forward",
        edit((GELU_FEED_FORWARD, 'layers.Dense(dense_dim, activation="gelu")')),
        ("forward.decoder",),
        "differs from the correct layer",
        only=True,
    ),
    Mistake(
        "gelu_function_feed_forward",
        edit((GELU_FEED_FORWARD, "layers.Dense(dense_dim, activation=keras.activations.gelu)")),
        ("forward.decoder",),
        "differs from the correct layer",
        only=True,
    ),
]

# A MultiHeadAttention subclass whose _compute_attention is an override of (*args, **kwargs) (a
# student's logging or experimenting subclass): Keras still calls it with its own argument names,
# and use_causal_mask=True makes Keras build the causal mask and hand it on as attention_mask.
FORWARDING_ATTENTION = """

class ForwardingAttention(layers.MultiHeadAttention):
    def _compute_attention(self, *args, **kwargs):
        return super()._compute_attention(*args, **kwargs)

"""
VARIANTS.append(Variant(
    "attention_subclass_with_use_causal_mask",
    edit(
        *USE_CAUSAL_MASK,
        ("self.attention_1 = layers.MultiHeadAttention(", "self.attention_1 = ForwardingAttention("),
        ("\n\nclass TransformerDecoder(", FORWARDING_ATTENTION + "\nclass TransformerDecoder("),
    ),
))


# The causal mask transposed (upper-triangular): each position sees itself and the LATER ones. One
# mistake, told once: the look-ahead, with the output's difference under it.
MISTAKES.append(Mistake(
    "causal_mask_transposed",
    edit(("        causal = keras.ops.tril(keras.ops.ones((length, length), dtype=\"bool\"))",
          "        causal = keras.ops.triu(keras.ops.ones((length, length), dtype=\"bool\"))")),
    ("mask.self_attention_mask", "mask.causal", "forward.decoder"),
    "later positions",
    causes=1,
))
