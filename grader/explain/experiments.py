"""Small, seeded experiments on an encoder's two LayerNormalization layers.

The encoder under study sits in a small classifier (token embedding, encoder,
masked average pooling, a sigmoid unit) trained on the package's synthetic
task. The embedding is Keras's own ``Embedding`` with ``mask_zero``, nothing
of any exercise's answer: the process that runs a student's encoder holds no
reference. The task asks whether token 1 occurs anywhere in a sequence, which
no position changes, so the classifier needs no position embedding. Its two norms are found by watching one call of the encoder
(every ``LayerNormalization`` that ``keras.layers.Layer.__call__`` runs, by
object identity), never by attribute names.

The one-shared-norm variant is the same model with the second norm's values
tied to the first's: both places use one set of values and the update is the
sum of both places' gradients, which is exactly what calling one
``LayerNormalization`` twice computes. That equivalence is measured, not
assumed: ``routed`` runs the model with every call of the second norm sent to
the first (what a student's shared norm does) and its output and gradient are
compared with the tied model's. The tying also gives each place's share of the
shared gradient at every step for free.

Nothing here decides anything: the functions return plain NumPy numbers that
the parent turns into verdicts (``grader.explain.claims``).
"""

from __future__ import annotations

import contextlib

import keras
import numpy as np

from ..probe import runtime

_Layer = keras.layers.Layer


class StructureError(Exception):
    """The encoder does not apply two distinct LayerNormalization layers once each."""


class Classifier(keras.Model):
    """tokens -> token embedding -> encoder(mask) -> masked average -> sigmoid."""

    def __init__(self, embedding, encoder):
        super().__init__()
        self.embedding = embedding
        self.encoder = encoder
        self.pool = keras.layers.GlobalAveragePooling1D()
        self.head = keras.layers.Dense(1, activation="sigmoid")

    def call(self, tokens, training=False):
        mask = keras.ops.not_equal(tokens, 0)
        x = self.embedding(tokens)
        h = self.encoder(x, mask=mask, training=training)
        return self.head(self.pool(h, mask=mask))


@contextlib.contextmanager
def watching_calls(on_call):
    """Call ``on_call(layer, args, kwargs)`` before every Keras layer call (eager or traced)."""
    original = _Layer.__call__

    def watched(layer, *args, **kwargs):
        on_call(layer, args, kwargs)
        return original(layer, *args, **kwargs)

    _Layer.__call__ = watched
    try:
        yield
    finally:
        _Layer.__call__ = original


@contextlib.contextmanager
def routed(source, target):
    """Every call of layer ``source`` runs layer ``target`` instead: one norm shared by both places."""
    original = _Layer.__call__

    def route(layer, *args, **kwargs):
        return original(target if layer is source else layer, *args, **kwargs)

    _Layer.__call__ = route
    try:
        yield
    finally:
        _Layer.__call__ = original


def new_model(encoder_class, dims: dict, seed: int, tokens: np.ndarray) -> Classifier:
    """A freshly initialised classifier (the same weights for the same seed), built on ``tokens``."""
    keras.utils.set_random_seed(seed)
    embedding = keras.layers.Embedding(dims["vocab_size"], dims["embed_dim"], mask_zero=True)
    encoder = encoder_class(dims["embed_dim"], dims["dense_dim"], dims["num_heads"])
    model = Classifier(embedding, encoder)
    model(tokens[:2], training=False)
    return model


def find_norms(model: Classifier, tokens: np.ndarray) -> dict:
    """The LayerNormalization layers one call of the encoder runs, in call order:
    {"calls": number of norm calls, "distinct": number of norm layers, "norms": the layers}."""
    calls: list = []
    inside: list = []

    def on_call(layer, args, kwargs):
        if layer is model.encoder:
            inside.append(True)
        elif inside and isinstance(layer, keras.layers.LayerNormalization):
            calls.append(layer)

    with watching_calls(on_call):
        model.encoder(model.embedding(tokens), mask=tokens != 0, training=False)
    distinct = list({id(layer): layer for layer in calls}.values())
    return {"calls": len(calls), "distinct": len(distinct), "norms": distinct}


def two_norms(found: dict) -> list:
    """The two norms of ``find_norms``; StructureError unless two distinct norms, with gamma and beta,
    are called once each."""
    if found["calls"] != 2 or found["distinct"] != 2:
        raise StructureError(
            f"the encoder called LayerNormalization {found['calls']} time(s) on {found['distinct']} distinct "
            "layer(s); the experiments need two distinct norms, called once each")
    for norm in found["norms"]:
        if getattr(norm, "gamma", None) is None or getattr(norm, "beta", None) is None:
            raise StructureError("a norm has no gamma or no beta (scale=False or center=False)")
    return found["norms"]


def norm_inputs(model: Classifier, norms: list, tokens: np.ndarray) -> list[np.ndarray]:
    """What each norm receives on ``tokens`` (the residual sums x + attention(x) and h + ffn(h))."""
    seen: dict[int, np.ndarray] = {}

    def on_call(layer, args, kwargs):
        for index, norm in enumerate(norms):
            if layer is norm and index not in seen:
                value = args[0] if args else kwargs.get("inputs")
                seen[index] = np.asarray(keras.ops.convert_to_numpy(value), dtype=np.float64)

    with watching_calls(on_call):
        model(tokens, training=False)
    if len(seen) != len(norms):
        raise StructureError("a norm was not called on the evaluation inputs")
    return [seen[i] for i in range(len(norms))]


def feature_statistics(values: np.ndarray, real: np.ndarray) -> dict:
    """Per-feature mean and standard deviation over the real (unpadded) positions of ``values``
    (batch, seq, features), separately for the even and the odd examples (a split-half estimate of
    sampling noise)."""
    halves = {}
    for name, rows in (("even", slice(0, None, 2)), ("odd", slice(1, None, 2))):
        picked = values[rows][real[rows]]  # (positions, features)
        halves[name] = {"mean": picked.mean(axis=0), "std": picked.std(axis=0), "count": int(picked.shape[0])}
    return halves


def norm_values(norms: list) -> list[dict]:
    return [{"gamma": np.array(keras.ops.convert_to_numpy(n.gamma), dtype=np.float64),
             "beta": np.array(keras.ops.convert_to_numpy(n.beta), dtype=np.float64)} for n in norms]


def tie(norms: list) -> None:
    """Give the second norm the first norm's values."""
    norms[1].gamma.assign(norms[0].gamma)
    norms[1].beta.assign(norms[0].beta)


class Trainer:
    """Adam on binary cross-entropy; ``shared=True`` trains one norm for both places (tied values,
    summed gradients) and records each place's gradient of the shared gamma and beta at every step."""

    def __init__(self, model: Classifier, norms: list, shared: bool, learning_rate: float):
        self.model = model
        self.shared = shared
        self.variables = list(model.trainable_variables)
        index = {id(v): i for i, v in enumerate(self.variables)}
        try:
            self.places = [(index[id(n.gamma)], index[id(n.beta)]) for n in norms]
        except KeyError:
            raise StructureError("a norm's gamma or beta is not trainable") from None
        dropped = set(self.places[1]) if shared else set()
        self.updated = [i for i in range(len(self.variables)) if i not in dropped]
        self.norms = norms
        self.optimizer = keras.optimizers.Adam(learning_rate)
        self.optimizer.build([self.variables[i] for i in self.updated])
        self.loss = keras.losses.BinaryCrossentropy()
        if shared:
            tie(norms)
        self._step = self._train_step
        if keras.backend.backend() == "tensorflow":  # one graph for every step; the others run eagerly
            import tensorflow as tf

            self._step = tf.function(self._train_step)

    def gradients(self, tokens, labels):
        return runtime.gradients(lambda: self.loss(labels, self.model(tokens, training=True)), self.variables,
                                  state=self.model.non_trainable_variables)

    def _train_step(self, tokens, labels):
        ops = keras.ops
        loss, gradients = self.gradients(tokens, labels)
        gradients = [ops.zeros_like(v) if g is None else ops.convert_to_tensor(g)
                     for g, v in zip(gradients, self.variables)]
        (g1, b1), (g2, b2) = self.places
        split = ops.stack([ops.norm(gradients[g1]), ops.norm(gradients[g2]), ops.sum(gradients[g1] * gradients[g2]),
                           ops.norm(gradients[b1]), ops.norm(gradients[b2]), ops.sum(gradients[b1] * gradients[b2])])
        if self.shared:
            gradients[g1] = gradients[g1] + gradients[g2]
            gradients[b1] = gradients[b1] + gradients[b2]
        self.optimizer.apply_gradients([(gradients[i], self.variables[i]) for i in self.updated])
        if self.shared:
            self.norms[1].gamma.assign(self.norms[0].gamma)
            self.norms[1].beta.assign(self.norms[0].beta)
        return loss, split

    def fit(self, tokens: np.ndarray, labels: np.ndarray, steps: int, batch: int, seed: int):
        """Train for ``steps`` steps of ``batch`` examples (epochs of a seeded shuffle); return the loss
        and the gradient split (rows: |g1|, |g2|, g1.g2 for gamma, then for beta) at every step."""
        rng = np.random.default_rng([seed, 7])
        order: list[int] = []
        losses, splits = [], []
        for _ in range(steps):
            if len(order) < batch:
                order.extend(rng.permutation(len(tokens)).tolist())
            picked, order = order[:batch], order[batch:]
            loss, split = self._step(keras.ops.convert_to_tensor(tokens[picked]),
                                     keras.ops.convert_to_tensor(labels[picked]))
            losses.append(float(keras.ops.convert_to_numpy(loss)))
            splits.append(keras.ops.convert_to_numpy(split))
        return np.asarray(losses), np.asarray(splits, dtype=np.float64)


def evaluate(model: Classifier, tokens: np.ndarray, labels: np.ndarray) -> dict:
    predictions = np.asarray(model(tokens, training=False), dtype=np.float64)
    loss = float(keras.losses.BinaryCrossentropy()(labels, predictions))
    accuracy = float(np.mean((predictions > 0.5) == (labels > 0.5)))
    return {"loss": loss, "accuracy": accuracy}


def gradient_split(model: Classifier, norms: list, tokens: np.ndarray, labels: np.ndarray) -> dict:
    """With both norms holding the same values: each place's gradient of gamma and beta on
    ``tokens``, and the gradient a genuinely shared norm (second calls routed to the first) gets."""
    loss_function = keras.losses.BinaryCrossentropy()
    params = [norms[0].gamma, norms[0].beta, norms[1].gamma, norms[1].beta]
    tied_output = np.asarray(keras.ops.convert_to_numpy(model(tokens, training=False)))
    _, found = runtime.gradients(lambda: loss_function(labels, model(tokens, training=False)), params)
    g1, b1, g2, b2 = (_float64(g) for g in found)
    with routed(norms[1], norms[0]):
        routed_output = np.asarray(keras.ops.convert_to_numpy(model(tokens, training=False)))
        _, found = runtime.gradients(lambda: loss_function(labels, model(tokens, training=False)), params[:2])
        shared_gamma, shared_beta = (_float64(g) for g in found)
    return {
        "gamma_first": g1, "gamma_second": g2, "beta_first": b1, "beta_second": b2,
        "routed_gamma": shared_gamma, "routed_beta": shared_beta,
        "output_difference": float(np.max(np.abs(np.asarray(tied_output) - np.asarray(routed_output)))),
    }


def parameter_counts(model: Classifier, norms: list, tokens: np.ndarray, labels: np.ndarray) -> dict:
    """Trainable parameters that get a gradient: with two norms, and with the second norm's calls
    routed to the first (its own parameters then get none)."""
    loss_function = keras.losses.BinaryCrossentropy()
    variables = list(model.trainable_variables)

    def used() -> int:
        _, gradients = runtime.gradients(lambda: loss_function(labels, model(tokens, training=False)), variables)
        return int(sum(int(np.prod(v.shape)) for v, g in zip(variables, gradients) if runtime.has_gradient(g)))

    two = used()
    with routed(norms[1], norms[0]):
        shared = used()
    per_norm = [int(np.prod(n.gamma.shape)) + int(np.prod(n.beta.shape)) for n in norms]
    encoder = int(sum(int(np.prod(v.shape)) for v in model.encoder.trainable_variables))
    return {"two_norms": two, "shared_norm": shared, "per_norm": per_norm, "encoder_two_norms": encoder}


def _float64(gradient) -> np.ndarray:
    return np.asarray(keras.ops.convert_to_numpy(gradient), dtype=np.float64)
