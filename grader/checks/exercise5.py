"""Checks for exercise 5, the text classifier built from the positional embedding and the encoder."""

from __future__ import annotations

import numpy as np

from . import check, fail
from .common import assert_masks_keys, dims, job  # noqa: F401  (fixtures are used by name)

POOLING_WHY = (
    "Padding must be masked all the way: in the encoder's attention and in the pooling. "
    "GlobalMaxPooling1D and Flatten ignore the mask, so the padded positions' outputs enter the "
    "prediction; GlobalAveragePooling1D averages over the real positions only. A layer that does "
    "not support masking (such as Lambda) drops the mask for every layer after it."
)


def _tokens(job) -> np.ndarray:
    return np.asarray(job["tokens"])


@check("api.model", "build_classifier returns a model from token ids to probabilities", "api", points=2)
def check_model(evidence, job):
    build = evidence.phase("build", "api.model")
    if not build["is_model"]:
        fail(
            f"build_classifier returned a {build['type']}.",
            "a keras.Model, e.g. keras.Model(inputs, outputs) on keras.Input(shape=(sequence_length,), dtype='int32').",
            "A model can be compiled, trained, saved and loaded as one object.",
        )
    output = evidence.phase("predict", "api.model")["output"]
    batch = _tokens(job).shape[0]
    if isinstance(output, dict) or output.shape != (batch, 1):
        shape = output.get("not_a_tensor") if isinstance(output, dict) else tuple(output.shape)
        fail(
            f"for {batch} sequences the model returned {shape}.",
            f"probabilities of shape ({batch}, 1).",
            "A binary classifier gives one probability per sequence: Dense(1, activation='sigmoid').",
        )
    if not np.all((output >= 0) & (output <= 1)):
        fail(
            f"outputs range from {output.min():.3g} to {output.max():.3g}.",
            "probabilities between 0 and 1 (a sigmoid on the last Dense layer).",
            "binary_crossentropy expects probabilities.",
        )


@check("weights.layers", "The model embeds positions and runs the encoder", "weights")
def check_layers(evidence, dims):
    data = evidence.phase("mask", "mask.end_to_end")
    layers = list(data["layers"].values())
    tables = sorted(layer["input_dim"] for layer in layers if layer["class"] == "Embedding")
    attention = [layer for layer in layers if layer["class"] == "MultiHeadAttention"]
    norms = [layer for layer in layers if layer["class"] == "LayerNormalization"]
    wanted = sorted([dims["vocab_size"], dims["sequence_length"]])
    if tables != wanted or not attention or len(norms) != 2 * len(attention):
        fail(
            f"embedding tables with {tables} rows, {len(attention)} attention and {len(norms)} norm layer(s) "
            "were used.",
            f"PositionalEmbedding(sequence_length, vocab_size, embed_dim) (tables of {wanted} rows) and a "
            "TransformerEncoder (one attention and two norms each).",
            "The classifier is the chapter's layers put together.",
        )


@check("mask.end_to_end", "The padding mask reaches the encoder's attention", "mask", points=2)
def check_end_to_end(evidence, job):
    data = evidence.phase("mask", "mask.end_to_end")
    events = [e for e in data["events"] if e["class"] == "MultiHeadAttention"]
    padding = _tokens(job) != 0
    batch, seq = padding.shape
    if events and all(events[0].get(k) is None for k in ("attention_mask", "query_mask", "value_mask", "key_mask")):
        fail(
            "the encoder's attention received no mask.",
            "the embedding's mask (tokens != 0) passed by Keras to the encoder's call, and on to attention.",
            "In a functional model Keras hands each layer the mask of its input. That only works if "
            "the embedding computes one, every layer in between supports masking (a Lambda layer "
            "does not: Keras warns that it destroys the mask) and the encoder passes it to attention.",
        )
    assert_masks_keys(evidence, events[0] if events else None,
                      np.broadcast_to(padding[:, None, :], (batch, seq, seq)), padding, "mask")


@check("mask.padding_invariance", "Padding changes no prediction", "mask", points=2)
def check_padding_invariance(evidence):
    data = evidence.phase("mask", "mask.padding_invariance")
    if not data["token_table_found"]:
        fail("no Embedding layer with vocab_size rows was found.", "a token embedding.", "See weights.layers.")
    before, after = data["before"], data["after"]
    if isinstance(before, dict) or isinstance(after, dict):
        fail("the model did not return a tensor.", "a tensor.", "See api.model.")
    change = np.abs(before - after).max()
    if change > 1e-5:
        fail(
            f"changing the embedding of the padding token (id 0) changed predictions by up to {change:.3g}.",
            "identical predictions: padding positions masked everywhere, pooling included.",
            POOLING_WHY,
        )


@check("gradients.training", "A few training steps lower the loss", "gradients", points=2)
def check_training(evidence, job):
    data = evidence.phase("training", "gradients.training")
    before, after = data["loss_before"], data["loss_after"]
    if not (np.isfinite(before) and np.isfinite(after)) or after >= before - 1e-4:
        fail(
            f"binary cross-entropy went from {before:.4f} to {after:.4f} in {job['training_steps']} "
            "Adam steps on the synthetic task.",
            "a lower loss after training.",
            "If training cannot lower the loss on a batch it sees again and again, gradients do not "
            "reach the weights (a frozen layer, a NumPy round trip) or the output is not a probability.",
        )


@check("config.keras_file", "The model saves to .keras and loads back without help", "config", points=2)
def check_keras_file(evidence):
    error = evidence.error("saving") or {}
    if error and ("Could not locate" in error.get("message", "") or "custom_objects" in error.get("message", "")):
        fail(
            "keras.models.load_model could not find your layer classes.",
            "custom layers decorated with @keras.saving.register_keras_serializable(), as the provided ones are.",
            "A registered layer loads anywhere the class is imported, with no custom_objects argument.",
        )
    saving = evidence.phase("saving", "config.keras_file")
    before, after = saving["before"], saving["after"]
    if isinstance(before, dict) or isinstance(after, dict) or before.shape != after.shape \
            or not np.allclose(before, after, atol=1e-6):
        fail(
            "the loaded model predicts differently.",
            "identical predictions after saving and loading.",
            "Every custom layer must rebuild itself from get_config and get its weights back.",
        )
