"""Mistakes and correct variants of exercise 5, the text classifier."""

from __future__ import annotations

from . import Mistake, Variant, solution
from . import edit as _edit

SOLUTION = solution("exercise5")


def edit(*replacements, prefix=""):
    return _edit(SOLUTION, *replacements, prefix=prefix)


POOL = "x = layers.GlobalAveragePooling1D()(x)"
ENCODE = "x = TransformerEncoder(embed_dim, dense_dim, num_heads)(x)"
OUTPUT = 'outputs = layers.Dense(1, activation="sigmoid")(x)'
RETURN = "return keras.Model(inputs, outputs)"

MISTAKES = [
    Mistake(
        "returns_the_output_tensor",
        edit((RETURN, "return outputs")),
        ("api.model",),
        "build_classifier returned a KerasTensor",
    ),
    Mistake(
        "two_class_softmax",
        edit((OUTPUT, 'outputs = layers.Dense(2, activation="softmax")(x)')),
        ("api.model",),
        "probabilities of shape (8, 1)",
    ),
    Mistake(
        "no_encoder",
        edit((ENCODE, "")),
        ("weights.layers",),
        "0 attention and 0 norm layer(s)",
    ),
    Mistake(
        "max_pooling_like_the_book",
        edit((POOL, "x = layers.GlobalMaxPooling1D()(x)")),
        ("mask.padding_invariance",),
        "changing the embedding of the padding token",
    ),
    Mistake(
        "lambda_layer_drops_the_mask",
        edit(("x = PositionalEmbedding(sequence_length, vocab_size, embed_dim)(inputs)",
              "x = PositionalEmbedding(sequence_length, vocab_size, embed_dim)(inputs)\n"
              "    x = layers.Lambda(lambda t: t * 2.0)(x)")),
        ("mask.end_to_end", "mask.padding_invariance"),
        "no mask reached the encoder's attention",
    ),
    Mistake(
        "frozen_model",
        edit((RETURN, "model = keras.Model(inputs, outputs)\n    model.trainable = False\n    return model")),
        ("gradients.training",),
        "no trainable weights",
    ),
    Mistake(
        "unregistered_custom_layer",
        edit((POOL, POOL + "\n    x = Scale()(x)"), (
            "def build_classifier(",
            "class Scale(layers.Layer):\n    def call(self, x):\n        return x * 1.0\n\n\ndef build_classifier(")),
        ("config.keras_file",),
        "could not find your layer classes",
    ),
]

VARIANTS = [
    Variant(
        "sequential_without_dropout",
        edit((SOLUTION[SOLUTION.index("    inputs = keras.Input"):SOLUTION.index("    ### END SOLUTION\n", SOLUTION.index("    inputs = keras.Input"))],
              """    return keras.Sequential(
        [
            keras.Input(shape=(sequence_length,), dtype="int32"),
            PositionalEmbedding(sequence_length, vocab_size, embed_dim),
            TransformerEncoder(embed_dim, dense_dim, num_heads),
            layers.GlobalAveragePooling1D(),
            layers.Dense(1, activation="sigmoid"),
        ]
    )
""")),
    ),
    Variant(
        "two_stacked_encoders",
        edit((ENCODE, ENCODE + "\n    " + ENCODE)),
    ),
]

VARIANTS += [
    Variant(
        "keras_io_head_compiled_with_metrics",
        edit((OUTPUT, 'x = layers.Dense(20, activation="relu")(x)\n    x = layers.Dropout(0.1)(x)\n    ' + OUTPUT),
             (RETURN, "model = keras.Model(inputs, outputs)\n"
                      '    model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])\n'
                      "    return model")),
    ),
]

MISTAKES += [
    Mistake(
        "dropout_always_on",
        edit(("x = layers.Dropout(0.5)(x)", "x = layers.Dropout(0.5)(x, training=True)")),
        ("api.inference",),
        "returned different outputs",
    ),
]

INPUT = 'inputs = keras.Input(shape=(sequence_length,), dtype="int32")'
MASKED_MEAN = '''@keras.saving.register_keras_serializable(package="student")
class MaskedMean(layers.Layer):
    """The mean over the real positions only: padding carries no weight."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, inputs, mask=None):
        if mask is None:
            return keras.ops.mean(inputs, axis=1)
        weights = keras.ops.cast(keras.ops.expand_dims(mask, -1), inputs.dtype)
        total = keras.ops.sum(inputs * weights, axis=1)
        return keras.ops.divide(total, keras.ops.sum(weights, axis=1))

    def compute_mask(self, inputs, mask=None):
        return None


def build_classifier('''
MASKED_MAX = '''@keras.saving.register_keras_serializable(package="student")
class MaskedMax(layers.Layer):
    """The largest value over the real positions: padding is pushed far below everything."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, inputs, mask=None):
        keep = keras.ops.expand_dims(mask, axis=-1)
        return keras.ops.max(keras.ops.where(keep, inputs, -1e9), axis=1)

    def compute_mask(self, inputs, mask=None):
        return None


def build_classifier('''

VARIANTS += [
    # the tutorials' keras.Input line: float32 ids, which Embedding casts back to integers
    Variant("float32_input", edit((INPUT, "inputs = keras.Input(shape=(sequence_length,))"))),
    Variant("int64_input", edit((INPUT, INPUT.replace("int32", "int64")))),
    Variant("masked_mean_pooling_layer", edit((POOL, "x = MaskedMean()(x)"), ("def build_classifier(", MASKED_MEAN))),
    Variant("masked_max_pooling_layer", edit((POOL, "x = MaskedMax()(x)"), ("def build_classifier(", MASKED_MAX))),
    Variant("activation_layer_head",
            edit((OUTPUT, 'x = layers.Dense(1)(x)\n    outputs = layers.Activation("sigmoid")(x)'))),
]

MISTAKES += [
    Mistake(
        "pooling_layer_averages_padding",
        edit((POOL, "x = MeanOfAll()(x)"),
             ("def build_classifier(", MASKED_MEAN.replace("MaskedMean", "MeanOfAll").replace(
                 "if mask is None:", "if True:  # the mask is ignored"))),
        ("mask.padding_invariance",),
        "changing the embedding of the padding token",
    ),
    Mistake(
        "max_pooling_layer_ignores_the_mask",
        edit((POOL, "x = MaxOfAll()(x)"),
             ("def build_classifier(", MASKED_MAX.replace("MaskedMax", "MaxOfAll").replace(
                 "keep = keras.ops.expand_dims(mask, axis=-1)", "keep = keras.ops.ones_like(inputs) > 0"))),
        ("mask.padding_invariance",),
        "changing the embedding of the padding token",
    ),
]


def _pooling(name: str, doc: str, body: str) -> str:
    """A registered pooling layer of the student's own, put before build_classifier; ``body`` is its
    call's, which begins by naming the mask ``real`` (the twin that ignores the mask changes that line)."""
    return f'''@keras.saving.register_keras_serializable(package="student")
class {name}(layers.Layer):
    """{doc}"""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, inputs, mask=None):
        real = mask
{body}

    def compute_mask(self, inputs, mask=None):
        return None


def build_classifier('''


# one correct layer per family of operations the replay recomputes, and its twin that ignores the mask
POOLINGS = {
    "element_wise_full_like_max": ("FullLikeMax", "The largest value over the real positions, padding under a floor.", '''\
        keep = keras.ops.expand_dims(real, axis=-1)
        floor = keras.ops.full_like(inputs, -1e9)
        return keras.ops.max(keras.ops.where(keep, inputs, floor), axis=1)''', ""),
    "reduction_cumulative_mean": ("CumulativeMean", "The mean over the real positions, from a running sum.", '''\
        weights = keras.ops.cast(keras.ops.expand_dims(real, -1), inputs.dtype)
        total = keras.ops.cumsum(inputs * weights, axis=1)[:, -1, :]
        count = keras.ops.count_nonzero(real, axis=1)
        return total / keras.ops.expand_dims(keras.ops.cast(count, inputs.dtype), -1)''', ""),
    "gathering_argmax_pool": ("ArgmaxPool", "Each feature's value at the real position where it is largest.", '''\
        scores = keras.ops.where(keras.ops.expand_dims(real, -1), inputs, -1e9)
        best = keras.ops.expand_dims(keras.ops.argmax(scores, axis=1), 1)
        return keras.ops.squeeze(keras.ops.take_along_axis(inputs, best, axis=1), axis=1)''', ""),
    "shape_stacked_mean": ("StackedMean", "The mean over the real positions, sum and count stacked and split.", '''\
        weights = keras.ops.cast(keras.ops.expand_dims(real, -1), inputs.dtype)
        weights = keras.ops.tile(weights, [1, 1, inputs.shape[-1]])
        both = keras.ops.stack([inputs * weights, weights], axis=0)
        total, count = keras.ops.unstack(keras.ops.sum(keras.ops.flip(both, axis=2), axis=2), axis=0)
        return total / count''', ""),
    "linear_algebra_matmul_mean": ("MatmulMean", "The mean over the real positions as a product with their weights.", '''\
        weights = keras.ops.cast(real, inputs.dtype)
        weights = weights / keras.ops.sum(weights, axis=1, keepdims=True)
        return keras.ops.squeeze(keras.ops.matmul(keras.ops.expand_dims(weights, 1), inputs), axis=1)''', ""),
    "activation_softmax_pool": ("SoftmaxPool", "Attention pooling: a softmax over the real positions' mean features.",
                                '''\
        scores = keras.ops.numpy.where(real, keras.ops.numpy.mean(inputs, axis=-1), -1e9)
        weights = keras.ops.nn.softmax(scores, axis=-1)
        return keras.ops.einsum("bt,bte->be", weights, inputs)''', ""),
    "tensorflow_masked_mean": ("TensorFlowMean", "A Keras 2 layer: the mean over the real positions in TensorFlow.", '''\
        weights = tf.expand_dims(tf.cast(real, inputs.dtype), axis=-1)
        total = tf.reduce_sum(inputs * weights, axis=1)
        return tf.math.divide_no_nan(total, tf.reduce_sum(weights, axis=1))''', "import tensorflow as tf\n"),
}
for _name, (_class, _doc, _body, _prefix) in POOLINGS.items():
    _layer = _pooling(_class, _doc, _body)
    _ignores = _layer.replace("real = mask", "real = tf.ones_like(mask)" if _prefix else
                              "real = keras.ops.ones_like(mask)").replace(_class, _class + "OfAll")
    VARIANTS.append(Variant(f"pooling_{_name}", edit((POOL, f"x = {_class}()(x)"), ("def build_classifier(", _layer),
                                                     prefix=_prefix)))
    MISTAKES.append(Mistake(f"pooling_{_name}_ignores_the_mask",
                            edit((POOL, f"x = {_class}OfAll()(x)"), ("def build_classifier(", _ignores), prefix=_prefix),
                            ("mask.padding_invariance",), "changing the embedding of the padding token"))
