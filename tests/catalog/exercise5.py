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
