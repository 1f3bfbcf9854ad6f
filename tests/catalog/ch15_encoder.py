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

# --------------------------------------------------------------------------- attention written by hand
# The TensorFlow tutorials' multi-head attention, as students copy it into Keras 3 layers (the style of
# shinnew99/modulabs_pyscript, 14_TransformerTranslation/multi_head_attention.py: Dense W_q, W_k, W_v and an
# output Dense, heads split with tf.reshape and tf.transpose, tf.matmul(..., transpose_b=True) scaled by
# sqrt(depth), `logits += mask * -1e9` with 1 for padding, tf.nn.softmax over the keys). Adapted only to
# the exercise's signature: the encoder turns the book's True-for-real mask into that 1-for-padding one.
TUTORIAL_ATTENTION = '''import keras
import tensorflow as tf
from keras import layers


class MultiHeadAttention(layers.Layer):
    def __init__(self, d_model, num_heads, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.d_model = d_model
        self.depth = d_model // num_heads
        self.wq = layers.Dense(d_model)
        self.wk = layers.Dense(d_model)
        self.wv = layers.Dense(d_model)
        self.dense = layers.Dense(d_model)

    def split_heads(self, x, batch_size):
        x = tf.reshape(x, (batch_size, -1, self.num_heads, self.depth))
        return tf.transpose(x, perm=[0, 2, 1, 3])

    def scaled_dot_product_attention(self, q, k, v, mask):
        matmul_qk = tf.matmul(q, k, transpose_b=True)
        dk = tf.cast(tf.shape(k)[-1], tf.float32)
        scaled_attention_logits = matmul_qk / tf.math.sqrt(dk)
        if mask is not None:
            scaled_attention_logits += mask * -1e9
        attention_weights = tf.nn.softmax(scaled_attention_logits, axis=-1)
        return tf.matmul(attention_weights, v), attention_weights

    def call(self, v, k, q, mask):
        batch_size = tf.shape(q)[0]
        q = self.split_heads(self.wq(q), batch_size)
        k = self.split_heads(self.wk(k), batch_size)
        v = self.split_heads(self.wv(v), batch_size)
        scaled_attention, attention_weights = self.scaled_dot_product_attention(q, k, v, mask)
        scaled_attention = tf.transpose(scaled_attention, perm=[0, 2, 1, 3])
        concat_attention = tf.reshape(scaled_attention, (batch_size, -1, self.d_model))
        return self.dense(concat_attention), attention_weights


class TransformerEncoder(keras.Layer):
    def __init__(self, hidden_dim, intermediate_dim, num_heads, **kwargs):
        super().__init__(**kwargs)
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.num_heads = num_heads
        self.self_attention = MultiHeadAttention(hidden_dim, num_heads)
        self.self_attention_layernorm = layers.LayerNormalization()
        self.feed_forward_1 = layers.Dense(intermediate_dim, activation="relu")
        self.feed_forward_2 = layers.Dense(hidden_dim)
        self.feed_forward_layernorm = layers.LayerNormalization()

    def call(self, source, source_mask):
        padding_mask = 1.0 - tf.cast(source_mask[:, tf.newaxis, tf.newaxis, :], tf.float32)
        attended, _ = self.self_attention(source, source, source, padding_mask)
        x = self.self_attention_layernorm(source + attended)
        x = self.feed_forward_layernorm(x + self.feed_forward_2(self.feed_forward_1(x)))
        return x

''' + GET_CONFIG

# The same attention in Keras 3's own operations, the way a student writes it from the paper: one
# layer of its own, a boolean mask kept where it is True, heads from keras.ops.reshape.
KERAS_OPS_ATTENTION = edit(
    ("self.self_attention = layers.MultiHeadAttention(num_heads, key_dim)",
     "self.self_attention = SelfAttention(hidden_dim, num_heads)"),
    ("x = self.self_attention(query=x, key=x, value=x, attention_mask=mask)", "x = self.self_attention(x, mask)"),
    prefix='''from keras import layers as _layers
from keras import ops as _ops


class SelfAttention(_layers.Layer):
    def __init__(self, width, heads, **kwargs):
        super().__init__(**kwargs)
        self.heads, self.head_width = heads, width // heads
        self.query = _layers.Dense(width)
        self.key = _layers.Dense(width)
        self.value = _layers.Dense(width)
        self.out = _layers.Dense(width)

    def _split(self, x):
        batch, length = _ops.shape(x)[0], _ops.shape(x)[1]
        return _ops.transpose(_ops.reshape(x, (batch, length, self.heads, self.head_width)), (0, 2, 1, 3))

    def call(self, x, mask):
        q, k, v = self._split(self.query(x)), self._split(self.key(x)), self._split(self.value(x))
        scores = _ops.matmul(q, _ops.transpose(k, (0, 1, 3, 2))) / _ops.sqrt(float(self.head_width))
        scores = _ops.where(mask[:, None, :, :], scores, -1e9)
        weights = _ops.softmax(scores, axis=-1)
        joined = _ops.transpose(_ops.matmul(weights, v), (0, 2, 1, 3))
        return self.out(_ops.reshape(joined, (_ops.shape(x)[0], _ops.shape(x)[1], self.heads * self.head_width)))


''',
)

VARIANTS += [
    Variant("tensorflow_tutorial_attention_written_by_hand", TUTORIAL_ATTENTION),
    Variant("keras_ops_attention_written_by_hand", KERAS_OPS_ATTENTION),
    # the paper's position-wise feed-forward as two convolutions of kernel size 1
    Variant("conv1d_kernel_one_feed_forward", edit(
        ('self.feed_forward_1 = layers.Dense(intermediate_dim, activation="relu")',
         'self.feed_forward_1 = layers.Conv1D(intermediate_dim, kernel_size=1, activation="relu")'),
        ("self.feed_forward_2 = layers.Dense(hidden_dim)", "self.feed_forward_2 = layers.Conv1D(hidden_dim, 1)"))),
]


def _tutorial(old: str, new: str) -> str:
    return _edit(TUTORIAL_ATTENTION, (old, new))


MISTAKES += [
    Mistake(
        "attention_written_by_hand_ignores_the_mask",
        _tutorial("attended, _ = self.self_attention(source, source, source, padding_mask)",
                  "attended, _ = self.self_attention(source, source, source, None)"),
        ("mask.masks_keys", "mask.padding_invariance"),
        "that should be hidden are visible",
    ),
    Mistake(
        "attention_written_by_hand_unscaled",
        _tutorial("scaled_attention_logits = matmul_qk / tf.math.sqrt(dk)", "scaled_attention_logits = matmul_qk"),
        ("forward.post_norm",),
        "the scores are not divided by sqrt(key_dim)",
        only=True,
    ),
    Mistake(
        "attention_written_by_hand_softmax_over_queries",
        _tutorial("tf.nn.softmax(scaled_attention_logits, axis=-1)", "tf.nn.softmax(scaled_attention_logits, axis=-2)"),
        ("forward.post_norm", "mask.padding_invariance"),
        "the softmax runs over the queries",
    ),
]
