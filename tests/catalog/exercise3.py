"""Mistakes and correct variants of exercise 3, the Transformer encoder."""

from __future__ import annotations

from . import Mistake, Variant, dropout_on_by_default, layer_api_mistakes, solution
from . import edit as _edit

SOLUTION = solution("exercise3")


def edit(*replacements, prefix=""):
    return _edit(SOLUTION, *replacements, prefix=prefix)


INIT_BODY = """        super().__init__(**kwargs)
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
"""

CALL_BODY = """        if mask is not None:
            mask = keras.ops.expand_dims(mask, axis=1)
        attention_output = self.attention(inputs, inputs, attention_mask=mask)
        proj_input = self.layernorm_1(inputs + attention_output)
        proj_output = self.dense_proj(proj_input)
        return self.layernorm_2(proj_input + proj_output)
"""


MISTAKES = layer_api_mistakes(
    SOLUTION,
    "def __init__(self, embed_dim, dense_dim, num_heads, **kwargs):",
    "TransformerEncoder(8, 16, 2)",
    '                "dense_dim": self.dense_dim,\n',
    "dense_dim",
) + [
    Mistake(
        "shared_norm",
        edit(("self.layernorm_2 = layers.LayerNormalization()", "self.layernorm_2 = self.layernorm_1")),
        ("weights.two_norms", "weights.norm_parameters", "gradients.norms_differ", "gradients.norms_diverge"),
        "one instance is called 2 times",
    ),
    Mistake(
        "norm_over_positions",
        edit(("self.layernorm_2 = layers.LayerNormalization()", "self.layernorm_2 = layers.LayerNormalization(axis=1)")),
        ("weights.norm_parameters", "weights.trainable_list", "gradients.norms_differ", "gradients.norms_diverge",
         "forward.post_norm"),
        "norm 2 normalises over axis 1 (the positions)",
    ),
    Mistake(
        "reused_norm",
        edit(("return self.layernorm_2(proj_input", "return self.layernorm_1(proj_input")),
        ("weights.two_norms", "gradients.norms_differ"),
        "one instance is called 2 times",
    ),
    Mistake(
        "tied_norm_variables",
        edit(
            ("self.layernorm_2 = layers.LayerNormalization()", "self.layernorm_2 = TiedNorm(self.layernorm_1)"),
            prefix='''
import keras as _keras


class TiedNorm(_keras.layers.LayerNormalization):
    """A second norm that reuses the first one's gamma and beta."""

    def __init__(self, source, **kwargs):
        super().__init__(**kwargs)
        self.source = source

    def build(self, input_shape):
        if not self.source.built:
            self.source.build(input_shape)
        self.axis = [len(input_shape) - 1]
        self.gamma = self.source.gamma
        self.beta = self.source.beta
        self.built = True


''',
        ),
        ("weights.norm_parameters", "gradients.norms_differ"),
        "is the same variable as norm 1's",
    ),
    Mistake(
        "frozen_norms",
        edit(
            ("        self.supports_masking = True\n",
             "        self.supports_masking = True\n        self.layernorm_1.trainable = False\n"
             "        self.layernorm_2.trainable = False\n"),
        ),
        ("weights.norm_parameters", "gradients.norms_differ", "gradients.norms_diverge"),
        "is not trainable",
    ),
    Mistake(
        "wrong_mask_axis",
        edit(("keras.ops.expand_dims(mask, axis=1)", "keras.ops.expand_dims(mask, axis=2)")),
        ("mask.masks_keys", "mask.padding_invariance"),
        "wrong axis",
    ),
    Mistake(
        "ignored_mask",
        edit(("self.attention(inputs, inputs, attention_mask=mask)", "self.attention(inputs, inputs)")),
        ("mask.attention_mask_shape", "mask.masks_keys", "mask.padding_invariance"),
        "no mask reached MultiHeadAttention",
    ),
    Mistake(
        "inverted_mask",
        edit(("mask = keras.ops.expand_dims(mask, axis=1)",
              "mask = keras.ops.logical_not(keras.ops.expand_dims(mask, axis=1))")),
        ("mask.masks_keys", "mask.padding_invariance"),
        "inverted",
    ),
    Mistake(
        "unexpanded_mask",
        edit(("mask = keras.ops.expand_dims(mask, axis=1)", "mask = mask")),
        ("mask.attention_mask_shape", "mask.masks_keys", "mask.padding_invariance"),
        "the padding mask unexpanded",
    ),
    Mistake(
        "no_attention_residual",
        edit(("self.layernorm_1(inputs + attention_output)", "self.layernorm_1(attention_output)")),
        ("forward.post_norm",),
        "normalised without adding the inputs",
    ),
    Mistake(
        "no_ffn_residual",
        edit(("self.layernorm_2(proj_input + proj_output)", "self.layernorm_2(proj_output)")),
        ("forward.post_norm",),
        "normalised without adding its input",
    ),
    Mistake(
        "no_residuals",
        edit(
            ("self.layernorm_1(inputs + attention_output)", "self.layernorm_1(attention_output)"),
            ("self.layernorm_2(proj_input + proj_output)", "self.layernorm_2(proj_output)"),
        ),
        ("forward.post_norm",),
        "no residual connections",
    ),
    Mistake(
        "pre_norm",
        edit((CALL_BODY, """        if mask is not None:
            mask = keras.ops.expand_dims(mask, axis=1)
        normed = self.layernorm_1(inputs)
        hidden = inputs + self.attention(normed, normed, attention_mask=mask)
        return hidden + self.dense_proj(self.layernorm_2(hidden))
""")),
        ("forward.call_order", "forward.post_norm"),
        "pre-norm",
    ),
    Mistake(
        "no_relu",
        edit(('layers.Dense(dense_dim, activation="relu")', "layers.Dense(dense_dim)")),
        ("forward.post_norm",),
        "no relu",
    ),
    Mistake(
        "wrong_key_dim",
        edit(("num_heads=num_heads, key_dim=embed_dim", "num_heads=num_heads, key_dim=embed_dim // num_heads")),
        ("weights.trainable_list",),
        "key_dim=4",
    ),
    Mistake(
        "wrong_ffn_width",
        edit(('layers.Dense(dense_dim, activation="relu")', 'layers.Dense(embed_dim, activation="relu")')),
        ("weights.trainable_list",),
        "feed-forward Dense widths are [8, 8]",
    ),
    Mistake(
        "wrong_output_width",
        edit(("                layers.Dense(embed_dim),\n", "                layers.Dense(dense_dim),\n")),
        ("api.output_shape",),
        "raised",
    ),
    Mistake(
        "call_without_mask_argument",
        edit(
            ("def call(self, inputs, mask=None):", "def call(self, inputs):"),
            (CALL_BODY, """        attention_output = self.attention(inputs, inputs)
        proj_input = self.layernorm_1(inputs + attention_output)
        proj_output = self.dense_proj(proj_input)
        return self.layernorm_2(proj_input + proj_output)
"""),
        ),
        ("mask.attention_mask_shape", "mask.masks_keys", "mask.padding_invariance"),
        "does not accept the mask argument",
    ),
    Mistake(
        "returns_a_tuple",
        edit(("return self.layernorm_2(proj_input + proj_output)",
              "return self.layernorm_2(proj_input + proj_output), attention_output")),
        ("api.output_shape", "forward.post_norm"),
        "call returned a tuple",
    ),
    Mistake(
        "no_kwargs_in_signature",
        edit(("def __init__(self, embed_dim, dense_dim, num_heads, **kwargs):",
              "def __init__(self, embed_dim, dense_dim, num_heads):"),
             ("super().__init__(**kwargs)", "super().__init__()")),
        ("config.base_keys",),
        "name='layer_under_test') raised TypeError",
    ),
    Mistake(
        "mask_not_propagated",
        edit(("        self.supports_masking = True\n", "")),
        ("mask.propagates",),
        "supports_masking is False",
    ),
    Mistake(
        "gradient_cut_by_numpy",
        edit(("proj_output = self.dense_proj(proj_input)",
              "proj_output = keras.ops.convert_to_tensor(np.asarray(self.dense_proj(proj_input)))"),
             prefix="import numpy as np\n"),
        ("gradients.all_variables",),
        "no gradient for",
    ),
]

VARIANTS = [
    Variant(
        # the output projection's width given, as the query's width it has anyway
        "attention_output_shape_given",
        edit(("num_heads=num_heads, key_dim=embed_dim\n",
              "num_heads=num_heads, key_dim=embed_dim, output_shape=embed_dim\n")),
    ),
    Variant(
        "book_code_with_tf_newaxis",
        edit(
            ("mask = keras.ops.expand_dims(mask, axis=1)", "mask = mask[:, tf.newaxis, :]"),
            prefix="import tensorflow as tf\n",
        ),
    ),
    Variant(
        "other_attribute_names",
        edit(
            (INIT_BODY, INIT_BODY.replace("self.attention", "self.mha").replace("self.dense_proj", "self.ffn")
             .replace("self.layernorm_1", "self.after_attention").replace("self.layernorm_2", "self.after_ffn")),
            (CALL_BODY, CALL_BODY.replace("self.attention", "self.mha").replace("self.dense_proj", "self.ffn")
             .replace("self.layernorm_1", "self.after_attention").replace("self.layernorm_2", "self.after_ffn")),
        ),
    ),
    Variant(
        "full_batch_queries_keys_mask",
        edit(("mask = keras.ops.expand_dims(mask, axis=1)",
              "mask = keras.ops.logical_and(mask[:, None, :], mask[:, :, None])")),
    ),
    Variant(
        "repeated_mask_and_keras_ops_add",
        edit(
            ("mask = keras.ops.expand_dims(mask, axis=1)",
             "mask = keras.ops.repeat(keras.ops.expand_dims(mask, axis=1), keras.ops.shape(inputs)[1], axis=1)"),
            ("self.layernorm_1(inputs + attention_output)", "self.layernorm_1(keras.ops.add(inputs, attention_output))"),
        ),
    ),
    Variant(
        "value_mask_instead_of_attention_mask",
        edit(
            ("""        if mask is not None:
            mask = keras.ops.expand_dims(mask, axis=1)
        attention_output = self.attention(inputs, inputs, attention_mask=mask)""",
             """        attention_output = self.attention(inputs, inputs, value_mask=mask)"""),
        ),
    ),
    Variant(
        "add_layers_and_separate_dense",
        edit(
            (INIT_BODY, INIT_BODY.replace("""        self.dense_proj = keras.Sequential(
            [
                layers.Dense(dense_dim, activation="relu"),
                layers.Dense(embed_dim),
            ]
        )
""", """        self.hidden = layers.Dense(dense_dim)
        self.relu = layers.Activation("relu")
        self.project = layers.Dense(embed_dim)
        self.add_1 = layers.Add()
        self.add_2 = layers.Add()
""")),
            (CALL_BODY, """        if mask is not None:
            mask = keras.ops.expand_dims(mask, axis=1)
        attention_output = self.attention(inputs, inputs, attention_mask=mask)
        proj_input = self.layernorm_1(self.add_1([inputs, attention_output]))
        proj_output = self.project(self.relu(self.hidden(proj_input)))
        return self.layernorm_2(self.add_2([proj_input, proj_output]))
"""),
        ),
    ),
    Variant(
        "sublayers_built_in_build",
        edit(
            (INIT_BODY, """        super().__init__(**kwargs)
        self.embed_dim = embed_dim
        self.dense_dim = dense_dim
        self.num_heads = num_heads
        self.supports_masking = True

    def build(self, input_shape):
        self.attention = layers.MultiHeadAttention(
            num_heads=self.num_heads, key_dim=self.embed_dim
        )
        self.attention.build(input_shape, input_shape)
        self.hidden = layers.Dense(self.dense_dim, activation="relu")
        self.hidden.build(input_shape)
        self.project = layers.Dense(self.embed_dim)
        self.project.build(tuple(input_shape[:-1]) + (self.dense_dim,))
        self.layernorm_1 = layers.LayerNormalization(epsilon=1e-6)
        self.layernorm_1.build(input_shape)
        self.layernorm_2 = layers.LayerNormalization(epsilon=1e-6)
        self.layernorm_2.build(input_shape)
"""),
            ("proj_output = self.dense_proj(proj_input)", "proj_output = self.project(self.hidden(proj_input))"),
        ),
    ),
    Variant(
        "dropout_everywhere",
        edit(
            ("num_heads=num_heads, key_dim=embed_dim", "num_heads=num_heads, key_dim=embed_dim, dropout=0.1"),
            ("        self.supports_masking = True\n",
             "        self.supports_masking = True\n        self.dropout_1 = layers.Dropout(0.1)\n"
             "        self.dropout_2 = layers.Dropout(0.1)\n"),
            ("def call(self, inputs, mask=None):", "def call(self, inputs, mask=None, training=None):"),
            ("self.attention(inputs, inputs, attention_mask=mask)",
             "self.dropout_1(self.attention(inputs, inputs, attention_mask=mask, training=training), training=training)"),
            ("proj_output = self.dense_proj(proj_input)",
             "proj_output = self.dropout_2(self.dense_proj(proj_input), training=training)"),
        ),
    ),
]

# --------------------------------------------------------------------------- styles from outside the project
# Each keeps the exercise's class name and signature and otherwise writes the layer the way a
# well-known source does; every one must pass.

GET_CONFIG = '''
    def get_config(self):
        config = super().get_config()
        config.update({"embed_dim": self.embed_dim, "dense_dim": self.dense_dim, "num_heads": self.num_heads})
        return config
'''


def _layer(body: str, prefix: str = "") -> str:
    """A whole file: imports, any helper classes, then the encoder's class body."""
    return ("import keras\nfrom keras import layers\nfrom keras import ops\n\n" + prefix +
            "\n\nclass TransformerEncoder(layers.Layer):\n" + body + GET_CONFIG)


KERAS_IO_BLOCK = _layer('''
    def __init__(self, embed_dim, dense_dim, num_heads, rate=0.1, **kwargs):
        super().__init__(**kwargs)
        self.embed_dim, self.dense_dim, self.num_heads = embed_dim, dense_dim, num_heads
        self.att = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
        self.ffn = keras.Sequential([layers.Dense(dense_dim, activation="relu"), layers.Dense(embed_dim)])
        self.layernorm1 = layers.LayerNormalization(epsilon=1e-6)
        self.layernorm2 = layers.LayerNormalization(epsilon=1e-6)
        self.dropout1 = layers.Dropout(rate)
        self.dropout2 = layers.Dropout(rate)
        self.supports_masking = True

    def call(self, inputs, mask=None, training=False):
        attention_mask = None if mask is None else ops.expand_dims(mask, 1)
        attn_output = self.att(inputs, inputs, attention_mask=attention_mask)
        attn_output = self.dropout1(attn_output, training=training)
        out1 = self.layernorm1(inputs + attn_output)
        ffn_output = self.ffn(out1)
        ffn_output = self.dropout2(ffn_output, training=training)
        return self.layernorm2(out1 + ffn_output)
''')

TF_TUTORIAL_NESTED = _layer('''
    def __init__(self, embed_dim, dense_dim, num_heads, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        self.embed_dim, self.dense_dim, self.num_heads = embed_dim, dense_dim, num_heads
        self.self_attention = GlobalSelfAttention(num_heads=num_heads, key_dim=embed_dim, dropout=dropout_rate)
        self.ffn = FeedForward(embed_dim, dense_dim)
        self.supports_masking = True

    def call(self, x, mask=None):
        x = self.self_attention(x, mask)
        return self.ffn(x)
''', prefix='''
class BaseAttention(layers.Layer):
    def __init__(self, **kwargs):
        super().__init__()
        self.mha = layers.MultiHeadAttention(**kwargs)
        self.layernorm = layers.LayerNormalization()
        self.add = layers.Add()


class GlobalSelfAttention(BaseAttention):
    def call(self, x, padding_mask=None):
        attention_mask = None if padding_mask is None else padding_mask[:, None, :]
        attn_output = self.mha(query=x, value=x, key=x, attention_mask=attention_mask)
        x = self.add([x, attn_output])
        return self.layernorm(x)


class FeedForward(layers.Layer):
    def __init__(self, d_model, dff, dropout_rate=0.1):
        super().__init__()
        self.seq = keras.Sequential([layers.Dense(dff, activation="relu"), layers.Dense(d_model),
                                     layers.Dropout(dropout_rate)])
        self.add = layers.Add()
        self.layer_norm = layers.LayerNormalization()

    def call(self, x):
        x = self.add([x, self.seq(x)])
        return self.layer_norm(x)
''')

KERAS_HUB_STYLE = _layer('''
    def __init__(self, embed_dim, dense_dim, num_heads, dropout=0.0, **kwargs):
        super().__init__(**kwargs)
        self.embed_dim, self.dense_dim, self.num_heads = embed_dim, dense_dim, num_heads
        self.supports_masking = True

    def build(self, inputs_shape):
        self._self_attention_layer = CachedAttention(num_heads=self.num_heads, key_dim=self.embed_dim)
        self._self_attention_layer.build(inputs_shape, inputs_shape)
        self._self_attention_layer_norm = layers.LayerNormalization(epsilon=1e-05)
        self._self_attention_layer_norm.build(inputs_shape)
        self._self_attention_dropout = layers.Dropout(rate=0.0)
        self._feedforward_layer_norm = layers.LayerNormalization(epsilon=1e-05)
        self._feedforward_layer_norm.build(inputs_shape)
        self._feedforward_intermediate_dense = layers.Dense(self.dense_dim, activation="relu")
        self._feedforward_intermediate_dense.build(inputs_shape)
        self._feedforward_output_dense = layers.Dense(self.embed_dim)
        self._feedforward_output_dense.build(tuple(inputs_shape)[:-1] + (self.dense_dim,))
        self._feedforward_dropout = layers.Dropout(rate=0.0)
        self.built = True

    def call(self, inputs, mask=None, training=None):
        x = inputs
        self_attention_mask = None
        if mask is not None:
            padding_mask = ops.cast(mask, "int32")
            self_attention_mask = ops.cast(ops.expand_dims(padding_mask, axis=1), "int32")
            self_attention_mask = ops.minimum(self_attention_mask, ops.ones_like(self_attention_mask))
            self_attention_mask = ops.broadcast_to(
                self_attention_mask, (ops.shape(x)[0], ops.shape(x)[1], ops.shape(x)[1]))
        residual = x
        x = self._self_attention_layer(query=x, value=x, attention_mask=self_attention_mask, training=training)
        x = self._self_attention_dropout(x, training=training)
        x = x + residual
        x = self._self_attention_layer_norm(x)
        residual = x
        x = self._feedforward_intermediate_dense(x)
        x = self._feedforward_output_dense(x)
        x = self._feedforward_dropout(x, training=training)
        x = x + residual
        return self._feedforward_layer_norm(x)
''', prefix='''
class CachedAttention(layers.MultiHeadAttention):
    """An attention subclass that, like keras-hub's, computes its own projections and never asks
    MultiHeadAttention to combine masks: the mask reaches the scores through _compute_attention."""

    def call(self, query, value, key=None, attention_mask=None, training=None):
        if key is None:
            key = value
        query = self._query_dense(query)
        key = self._key_dense(key)
        value = self._value_dense(value)
        attention_output, _ = self._compute_attention(query=query, key=key, value=value,
                                                      attention_mask=attention_mask, training=training)
        return self._output_dense(attention_output)
''')

COURSERA_STYLE = _layer('''
    def __init__(self, embed_dim, dense_dim, num_heads, dropout_rate=0.1, layernorm_eps=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.embed_dim, self.dense_dim, self.num_heads = embed_dim, dense_dim, num_heads
        self.mha = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim, dropout=dropout_rate)
        self.ffn = keras.Sequential([layers.Dense(dense_dim, activation="relu"), layers.Dense(embed_dim)])
        self.layernorm1 = layers.LayerNormalization(epsilon=layernorm_eps)
        self.layernorm2 = layers.LayerNormalization(epsilon=layernorm_eps)
        self.dropout_ffn = layers.Dropout(dropout_rate)
        self.supports_masking = True

    def call(self, x, mask=None, training=False):
        attention_mask = None if mask is None else mask[:, None, :]
        self_mha_output = self.mha(x, x, x, attention_mask=attention_mask, training=training)
        skip_x_attention = self.layernorm1(x + self_mha_output)
        ffn_output = self.ffn(skip_x_attention)
        ffn_output = self.dropout_ffn(ffn_output, training=training)
        return self.layernorm2(skip_x_attention + ffn_output)
''')

EINSUM_FFN = edit(
    ('''        self.dense_proj = keras.Sequential(
            [
                layers.Dense(dense_dim, activation="relu"),
                layers.Dense(embed_dim),
            ]
        )''', '''        self.dense_proj = keras.Sequential(
            [
                layers.EinsumDense("abc,cd->abd", output_shape=(None, dense_dim), bias_axes="d",
                                   activation="relu"),
                layers.EinsumDense("abd,de->abe", output_shape=(None, embed_dim), bias_axes="e"),
            ]
        )'''),
)

RAW_WEIGHT_FFN = edit(
    ('''        self.dense_proj = keras.Sequential(
            [
                layers.Dense(dense_dim, activation="relu"),
                layers.Dense(embed_dim),
            ]
        )''', ""),
    ("        proj_output = self.dense_proj(proj_input)\n",
     "        hidden = keras.ops.relu(keras.ops.matmul(proj_input, self.w1) + self.b1)\n"
     "        proj_output = keras.ops.matmul(hidden, self.w2) + self.b2\n"),
    ("    def call(self, inputs, mask=None):", '''    def build(self, input_shape):
        self.w1 = self.add_weight(shape=(self.embed_dim, self.dense_dim), initializer="glorot_uniform")
        self.b1 = self.add_weight(shape=(self.dense_dim,), initializer="zeros")
        self.w2 = self.add_weight(shape=(self.dense_dim, self.embed_dim), initializer="glorot_uniform")
        self.b2 = self.add_weight(shape=(self.embed_dim,), initializer="zeros")

    def call(self, inputs, mask=None):'''),
)

VARIANTS += [
    Variant("keras_io_transformer_block", KERAS_IO_BLOCK),
    Variant("tf_tutorial_nested_layers_and_add", TF_TUTORIAL_NESTED),
    Variant("keras_hub_style_attention_subclass", KERAS_HUB_STYLE),
    Variant("coursera_style_keyword_mask", COURSERA_STYLE),
    Variant("einsum_dense_feed_forward", EINSUM_FFN),
    Variant("raw_weight_feed_forward", RAW_WEIGHT_FFN),
    Variant("query_and_value_masks", edit(("self.attention(inputs, inputs, attention_mask=mask)",
                                          "self.attention(inputs, inputs, query_mask=mask_2d, value_mask=mask_2d)"),
                                         ("        if mask is not None:\n            mask = keras.ops.expand_dims(mask, axis=1)\n",
                                          "        mask_2d = mask\n"))),
    Variant("four_dimensional_mask", edit(("keras.ops.expand_dims(mask, axis=1)",
                                          "mask[:, None, None, :]"))),
]

MISTAKES += [
    Mistake(
        "keras2_positional_mask",
        edit(("self.attention(inputs, inputs, attention_mask=mask)", "self.attention(inputs, inputs, inputs, mask2d)"),
             ("        if mask is not None:\n            mask = keras.ops.expand_dims(mask, axis=1)\n",
              "        mask2d = mask\n")),
        ("api.output_shape",),
        "fourth positional argument is query_mask",
    ),
    Mistake(
        "dropout_at_inference",
        edit(("        self.supports_masking = True\n",
              "        self.supports_masking = True\n        self.dropout = layers.Dropout(0.5)\n"),
             ("proj_output = self.dense_proj(proj_input)",
              "proj_output = self.dropout(self.dense_proj(proj_input), training=True)")),
        ("forward.post_norm",),
        "Dropout",
    ),
    Mistake(
        "dense_created_inside_call",
        edit(("proj_output = self.dense_proj(proj_input)",
              "proj_output = layers.Dense(self.embed_dim)(layers.Dense(self.dense_dim, activation='relu')(proj_input))")),
        ("forward.post_norm", "weights.trainable_list"),
        "created inside call()",
    ),
]

MISTAKES.append(dropout_on_by_default(
    SOLUTION, "def call(self, inputs, mask=None):",
    ("proj_output = self.dense_proj(proj_input)",
     "proj_output = self.dropout(self.dense_proj(proj_input), training=training)"),
))


GELU_FEED_FORWARD = 'layers.Dense(dense_dim, activation="relu")'
MISTAKES += [
    # keras-io's video and ASR encoders: a GELU feed-forward, a different layer from the exercise's relu one;
    # the forward check says so, and every weights, gradients, mask and config check passes
    Mistake(
        "gelu_feed_forward",
        edit((GELU_FEED_FORWARD, 'layers.Dense(dense_dim, activation="gelu")')),
        ("forward.post_norm",),
        "differs from the correct layer",
        only=True,
    ),
    Mistake(
        "gelu_function_feed_forward",
        edit((GELU_FEED_FORWARD, "layers.Dense(dense_dim, activation=keras.activations.gelu)")),
        ("forward.post_norm",),
        "differs from the correct layer",
        only=True,
    ),
]

# --------------------------------------------------------------------------- the feed-forward, written other ways
# Each computes Dense(embed_dim)(relu(Dense(dense_dim)(h))) at every position and must pass at full marks.

FFN = '''        self.dense_proj = keras.Sequential(
            [
                layers.Dense(dense_dim, activation="relu"),
                layers.Dense(embed_dim),
            ]
        )'''


def _ffn(replacement: str, prefix: str = "") -> str:
    return edit((FFN, replacement), prefix=prefix)


VARIANTS += [
    # the paper's "two convolutions with kernel size 1", as a feed-forward layer of its own (the style of
    # Siddhesh290307/Transformer_Implementation, model/fnn.py: FNNLayer of two Conv1D(kernel_size=1))
    Variant("conv1d_kernel_one_feed_forward_layer", _ffn(
        "        self.dense_proj = PositionWiseFeedForward(embed_dim, dense_dim)",
        prefix='''from keras import layers as _layers


class PositionWiseFeedForward(_layers.Layer):
    def __init__(self, d_model, dff, **kwargs):
        super().__init__(**kwargs)
        self.conv_1 = _layers.Conv1D(filters=dff, kernel_size=1, activation="relu")
        self.conv_2 = _layers.Conv1D(filters=d_model, kernel_size=1)

    def call(self, x):
        return self.conv_2(self.conv_1(x))


''')),
    # at kernel size 1, padding and dilation change nothing
    Variant("conv1d_kernel_one_same_padding_and_dilation", _ffn('''        self.dense_proj = keras.Sequential(
            [
                layers.Conv1D(dense_dim, 1, padding="same", dilation_rate=2, activation="relu"),
                layers.Conv1D(embed_dim, kernel_size=1, padding="causal"),
            ]
        )''')),
    Variant("time_distributed_dense_feed_forward", _ffn('''        self.dense_proj = keras.Sequential(
            [
                layers.TimeDistributed(layers.Dense(dense_dim, activation="relu")),
                layers.TimeDistributed(layers.Dense(embed_dim)),
            ]
        )''')),
]

MISTAKES.append(Mistake(
    # a convolution three positions wide is no position-wise feed-forward: each output reads its
    # neighbours, padded positions included
    "conv1d_kernel_three_feed_forward",
    _ffn('''        self.dense_proj = keras.Sequential(
            [
                layers.Conv1D(dense_dim, 3, padding="same", activation="relu"),
                layers.Conv1D(embed_dim, kernel_size=1),
            ]
        )'''),
    ("forward.post_norm", "mask.padding_invariance"),
    "kernel wider than one position",
))

VARIANTS += [
    # a feed-forward layer of the student's own, computed with keras.ops on weights it creates itself
    Variant("keras_ops_matmul_feed_forward_layer", _ffn(
        "        self.dense_proj = MatmulFeedForward(embed_dim, dense_dim)",
        prefix='''from keras import layers as _layers
from keras import ops as _ops


class MatmulFeedForward(_layers.Layer):
    def __init__(self, width, hidden, **kwargs):
        super().__init__(**kwargs)
        self.width, self.hidden = width, hidden

    def build(self, input_shape):
        self.w1 = self.add_weight(shape=(self.width, self.hidden), initializer="glorot_uniform")
        self.b1 = self.add_weight(shape=(self.hidden,), initializer="zeros")
        self.w2 = self.add_weight(shape=(self.hidden, self.width), initializer="glorot_uniform")
        self.b2 = self.add_weight(shape=(self.width,), initializer="zeros")

    def call(self, x):
        return _ops.matmul(_ops.relu(_ops.matmul(x, self.w1) + self.b1), self.w2) + self.b2


''')),
]

# --------------------------------------------------------------------------- attention written by hand
# The exercise describes MultiHeadAttention(num_heads, key_dim=embed_dim); an attention of the student's
# own that computes it (heads of embed_dim each, Dense projections of num_heads * embed_dim) is correct.
HAND_WRITTEN_ATTENTION = '''from keras import layers as _layers
from keras import ops as _ops


class HeadsAttention(_layers.Layer):
    def __init__(self, width, heads, head_width, **kwargs):
        super().__init__(**kwargs)
        self.heads, self.head_width = heads, head_width
        self.query = _layers.Dense(heads * head_width)
        self.key = _layers.Dense(heads * head_width)
        self.value = _layers.Dense(heads * head_width)
        self.out = _layers.Dense(width)

    def _split(self, x):
        batch, length = _ops.shape(x)[0], _ops.shape(x)[1]
        return _ops.transpose(_ops.reshape(x, (batch, length, self.heads, self.head_width)), (0, 2, 1, 3))

    def call(self, x, mask=None):
        q, k, v = self._split(self.query(x)), self._split(self.key(x)), self._split(self.value(x))
        scores = _ops.einsum("bhtd,bhsd->bhts", q, k) / _ops.sqrt(float(self.head_width))
        if mask is not None:
            scores = scores - 1e9 * (1.0 - _ops.cast(mask[:, None, None, :], "float32"))
        weights = _ops.softmax(scores, axis=-1)
        joined = _ops.transpose(_ops.einsum("bhts,bhsd->bhtd", weights, v), (0, 2, 1, 3))
        return self.out(_ops.reshape(joined, (_ops.shape(x)[0], _ops.shape(x)[1], self.heads * self.head_width)))


'''
ATTENTION_LINE = """        self.attention = layers.MultiHeadAttention(
            num_heads=num_heads, key_dim=embed_dim
        )"""
HAND_WRITTEN_CALL = """        attention_output = self.attention(inputs, mask=mask)
        proj_input = self.layernorm_1(inputs + attention_output)
        proj_output = self.dense_proj(proj_input)
        return self.layernorm_2(proj_input + proj_output)
"""
VARIANTS.append(Variant("attention_written_by_hand", edit(
    (ATTENTION_LINE, "        self.attention = HeadsAttention(embed_dim, num_heads, embed_dim)"),
    (CALL_BODY, HAND_WRITTEN_CALL), prefix=HAND_WRITTEN_ATTENTION)))
MISTAKES.append(Mistake(
    # the third edition's heads (hidden_dim // num_heads) in the second edition's exercise: the grader reads
    # the heads of an attention written by hand from what it computes, and the weight list says so
    "attention_written_by_hand_with_narrow_heads",
    edit((ATTENTION_LINE, "        self.attention = HeadsAttention(embed_dim, num_heads, embed_dim // num_heads)"),
         (CALL_BODY, HAND_WRITTEN_CALL), prefix=HAND_WRITTEN_ATTENTION),
    ("weights.trainable_list",),
    "key_dim=4",
))


# A Dropout forced on inside call: random at every call, so every comparison of outputs fails; the one
# cause is the randomness, named first, with the Dropout that makes it.
MISTAKES.append(Mistake(
    "dropout_forced_on_in_call",
    edit(("        self.supports_masking = True\n",
          "        self.supports_masking = True\n        self.dropout = layers.Dropout(0.3)\n"),
         ("        proj_output = self.dense_proj(proj_input)\n",
          "        proj_output = self.dropout(self.dense_proj(proj_input), training=True)\n")),
    ("forward.inference", "config.from_config", "config.keras_file", "mask.padding_invariance", "forward.post_norm"),
    "layer Dropout (call",
    causes=1,
))
