"""Checks for exercise 3, the Transformer encoder.

Every check judges behaviour seen in the child's evidence: which layers the
student's ``call`` runs and in which order, the variables they own, the
numbers they produce. None of them looks at attribute names.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import pytest

from . import check, fail
from .reference import encoder_variants

ATOL = 2e-4
RTOL = 1e-3

SHARED_NORM_WHY = (
    "Each LayerNormalization learns its own scale (gamma) and shift (beta). The first norm sees "
    "the attention residual (inputs + attention output), the second the feed-forward residual; "
    "their statistics differ, so each needs parameters fitted to its own input. The original "
    "Transformer gives every residual sub-block its own norm, and one shared norm couples the "
    "updates: every step moves gamma and beta for both positions at once."
)


# --------------------------------------------------------------------------- fixtures


@pytest.fixture
def job(evidence):
    return evidence.job


@pytest.fixture
def dims(job):
    return job["dims"]


@dataclass
class Structure:
    """The layers the encoder's call ran, outside MultiHeadAttention's insides."""

    calls: list[dict]
    layers: dict[str, dict]

    def of(self, kind: str) -> list[dict]:
        return [e for e in self.calls if e["class"] == kind]

    def layer(self, event: dict) -> dict:
        return self.layers[str(event["layer"])]

    @property
    def norm_calls(self) -> list[dict]:
        return self.of("LayerNormalization")

    @property
    def sequence(self) -> list[str]:
        short = {"MultiHeadAttention": "attention", "LayerNormalization": "norm", "Dense": "dense"}
        return [short[e["class"]] for e in self.calls if e["class"] in short]


@pytest.fixture
def forward(evidence):
    return evidence.phase("forward", "api.output_shape")


@pytest.fixture
def structure(forward) -> Structure:
    events = forward["events"]
    by_index = {e["index"]: e for e in events}

    def inside_attention(event) -> bool:
        parent = event.get("parent")
        while parent is not None:
            ancestor = by_index[parent]
            if ancestor["class"] == "MultiHeadAttention":
                return True
            parent = ancestor.get("parent")
        return False

    calls = [e for e in events if e.get("parent") is not None and not inside_attention(e)]
    return Structure(calls, forward["layers"])


def _value(param):
    return None if param is None else param["value"]


def _describe_calls(structure: Structure) -> str:
    return " → ".join(structure.sequence) or "no attention, norm or dense layer at all"


# --------------------------------------------------------------------------- api


@check("api.constructor", "Builds from embed_dim, dense_dim and num_heads", "api")
def check_constructor(evidence):
    construct = evidence.phase("construct", "api.constructor")
    if construct["positional_error"]:
        from .evidence import format_student_error

        fail(
            format_student_error("TransformerEncoder(8, 16, 2) raised", construct["positional_error"]),
            "TransformerEncoder(embed_dim, dense_dim, num_heads) in that order, also by keyword.",
            "Code that uses your layer (and the book) passes the three sizes positionally.",
        )


@check("api.output_shape", "Returns a tensor shaped like its input", "api")
def check_output_shape(evidence, dims, job):
    forward = evidence.phase("forward", "api.output_shape")
    output = forward["output"]
    expected = list(np.asarray(job["inputs"]).shape)
    if isinstance(output, dict):
        fail(
            f"call returned a {output.get('not_a_tensor')}, not a tensor.",
            f"one tensor of shape {tuple(expected)} (batch, seq, embed_dim).",
            "An encoder block maps a sequence of vectors to a sequence of vectors of the same "
            "size, so blocks can be stacked.",
        )
    if list(output.shape) != expected:
        fail(
            f"output of shape {tuple(output.shape)} for an input of shape {tuple(expected)}.",
            f"the input's shape, {tuple(expected)}: (batch, seq, embed_dim).",
            "The last Dense of the feed-forward projection must bring the width back to "
            "embed_dim, or the residual sum and stacking of encoder blocks break.",
        )
    if not np.all(np.isfinite(output)):
        fail("the output holds NaN or infinite values.", "finite numbers.", "NaNs poison training.")


# --------------------------------------------------------------------------- weights


@check("weights.two_norms", "Two distinct LayerNormalization layers are applied", "weights", points=2)
def check_two_norms(structure):
    calls = structure.norm_calls
    instances = list(dict.fromkeys(e["layer"] for e in calls))
    if len(calls) == 2 and len(instances) == 2:
        return
    if not calls:
        fail(
            "no LayerNormalization layer was called in the forward pass.",
            "two LayerNormalization layers: one after the attention residual, one after the "
            "feed-forward residual.",
            "Normalising each residual sum keeps activations at a stable scale as blocks stack.",
        )
    if len(instances) == 1 and len(calls) >= 2:
        fail(
            f"one LayerNormalization instance was called {len(calls)} times: both residual blocks "
            "are normalised by the same layer.",
            "two separate LayerNormalization instances, one per residual block.",
            SHARED_NORM_WHY,
        )
    fail(
        f"{len(calls)} LayerNormalization call(s) on {len(instances)} instance(s); the call order was "
        f"{_describe_calls(structure)}.",
        "exactly two calls, on two different LayerNormalization instances.",
        "The book's encoder normalises once after each of its two residual blocks.",
    )


@check("weights.norm_parameters", "Each norm has its own trainable gamma and beta", "weights")
def check_norm_parameters(structure, dims):
    embed_dim = dims["embed_dim"]
    calls = structure.norm_calls
    if not calls:
        fail("no LayerNormalization layer was called.", "two, each with gamma and beta.", SHARED_NORM_WHY)
    problems = []
    owners: dict[int, int] = {}
    for position, event in enumerate(calls, start=1):
        layer = structure.layer(event)
        trainable = set(layer["trainable_weights"])
        for name in ("gamma", "beta"):
            param = layer.get(name)
            if param is None:
                problems.append(f"norm {position} has no {name} (center/scale turned off)")
                continue
            if list(param["value"].shape) != [embed_dim]:
                problems.append(f"norm {position}'s {name} has shape {tuple(param['value'].shape)}")
            if param["id"] not in trainable:
                problems.append(f"norm {position}'s {name} is not trainable")
            if param["id"] in owners:
                problems.append(f"norm {position}'s {name} is the same variable as norm {owners[param['id']]}'s")
            else:
                owners[param["id"]] = position
    if problems:
        fail(
            "; ".join(problems) + ".",
            f"each of the two norms with its own trainable gamma and beta of shape ({embed_dim},), "
            "sharing no variable with the other.",
            SHARED_NORM_WHY,
        )


def _expected_shapes(dims) -> list[tuple]:
    e, d, h = dims["embed_dim"], dims["dense_dim"], dims["num_heads"]
    return (
        [(e, h, e)] * 3 + [(h, e)] * 3 + [(h, e, e), (e,)]  # attention, key_dim = embed_dim
        + [(e, d), (d,), (d, e), (e,)]  # feed-forward
        + [(e,)] * 4  # two norms
    )


@check("weights.trainable_list", "Trainable weights have the expected count and shapes", "weights")
def check_trainable_list(forward, structure, dims):
    shapes = {v["id"]: tuple(v["shape"]) for v in forward["variables"]}
    observed = Counter(shapes[i] for i in forward["trainable"] if i in shapes)
    expected = Counter(_expected_shapes(dims))
    if observed == expected:
        return
    missing = expected - observed
    extra = observed - expected
    hints = []
    for event in structure.of("MultiHeadAttention")[:1]:
        layer = structure.layer(event)
        if layer["key_dim"] != dims["embed_dim"]:
            hints.append(
                f"MultiHeadAttention has key_dim={layer['key_dim']}; this exercise (like the book) "
                f"uses key_dim=embed_dim={dims['embed_dim']}"
            )
        if layer["num_heads"] != dims["num_heads"]:
            hints.append(f"MultiHeadAttention has num_heads={layer['num_heads']}, not num_heads={dims['num_heads']}")
    units = [structure.layer(e)["units"] for e in structure.of("Dense")]
    if units and units != [dims["dense_dim"], dims["embed_dim"]]:
        hints.append(
            f"the feed-forward Dense widths are {units}; expected [dense_dim, embed_dim] = "
            f"[{dims['dense_dim']}, {dims['embed_dim']}]"
        )
    hint = (" " + "; ".join(hints) + ".") if hints else ""
    fail(
        f"{sum(observed.values())} trainable weights; missing shapes {_shape_list(missing)}, "
        f"unexpected shapes {_shape_list(extra)}.{hint}",
        f"{sum(expected.values())} trainable weights: 8 for MultiHeadAttention(num_heads, "
        "key_dim=embed_dim), 4 for Dense(dense_dim) and Dense(embed_dim), 2 for each norm.",
        "The weight list is the layer's architecture: a different width or a missing "
        "trainable part changes what the encoder can learn.",
    )


def _shape_list(counter: Counter) -> str:
    if not counter:
        return "none"
    return ", ".join(f"{shape}×{n}" if n > 1 else str(shape) for shape, n in sorted(counter.items()))


# --------------------------------------------------------------------------- gradients


@pytest.fixture
def gradients(evidence):
    return evidence.phase("gradients", "gradients.all_variables")


def _norm_params(structure) -> list[dict]:
    return [structure.layer(e) for e in structure.norm_calls]


@check("gradients.all_variables", "Every trainable variable gets a gradient", "gradients")
def check_all_gradients(gradients, forward, structure):
    paths = {v["id"]: v["path"] for v in forward["variables"]}
    exempt = set()
    for event in structure.of("MultiHeadAttention"):
        key_bias = structure.layer(event).get("key_bias")
        if key_bias is not None:
            exempt.add(key_bias["id"])  # softmax ignores a shift shared by all keys
    if not gradients["variables"]:
        fail("the layer has no trainable variables.", "16 trainable variables.", "Nothing could be learned.")
    missing, broken, zero = [], [], []
    for var_id, grad in zip(gradients["variables"], gradients["gradients"]):
        name = paths.get(var_id, f"variable {var_id}")
        if grad is None:
            missing.append(name)
        elif not np.all(np.isfinite(grad)):
            broken.append(name)
        elif var_id not in exempt and not np.any(np.abs(grad) > 1e-12):
            zero.append(name)
    if missing or broken or zero:
        parts = []
        if missing:
            parts.append("no gradient for " + ", ".join(missing))
        if broken:
            parts.append("NaN/inf gradient for " + ", ".join(broken))
        if zero:
            parts.append("an all-zero gradient for " + ", ".join(zero))
        fail(
            "; ".join(parts) + ".",
            "a finite, non-zero gradient for every trainable variable (the attention key bias "
            "excepted: softmax ignores a shift shared by all keys).",
            "A variable with no gradient never learns: it is created but not on the path from "
            "inputs to outputs, or the path is cut (for instance by a NumPy round trip).",
        )


@check("gradients.norms_differ", "The two norms receive different gradients", "gradients")
def check_norm_gradients_differ(gradients, structure):
    grads = dict(zip(gradients["variables"], gradients["gradients"]))
    norms = _norm_params(structure)
    if len(norms) < 2:
        fail(f"{len(norms)} LayerNormalization call(s).", "two norms.", SHARED_NORM_WHY)
    first, second = norms[0], norms[1]
    for name in ("gamma", "beta"):
        a, b = first.get(name), second.get(name)
        if a is None or b is None:
            fail(f"a norm without {name}.", "gamma and beta in both norms.", SHARED_NORM_WHY)
        if a["id"] == b["id"]:
            fail(
                f"both norm positions use one {name} variable, so they receive one gradient: "
                "the sum of what the attention block and the feed-forward block each ask for.",
                f"two {name} variables, each with the gradient of its own position.",
                SHARED_NORM_WHY,
            )
        ga, gb = grads.get(a["id"]), grads.get(b["id"])
        if ga is None or gb is None:
            fail(f"no gradient for one of the norms' {name}.", "a gradient for each.", SHARED_NORM_WHY)
        if np.allclose(ga, gb, rtol=1e-5, atol=1e-9):
            fail(
                f"the two norms' {name} gradients are identical.",
                "different gradients: each norm sees a differently distributed input.",
                SHARED_NORM_WHY,
            )


@check("gradients.norms_diverge", "After a few training steps the two norms differ", "gradients")
def check_norms_diverge(gradients, structure, job):
    after = gradients["after_steps"]
    norms = _norm_params(structure)
    if len(norms) < 2:
        fail(f"{len(norms)} LayerNormalization call(s).", "two norms.", SHARED_NORM_WHY)
    steps = job["optimizer_steps"]
    for position, layer in enumerate(norms[:2], start=1):
        gamma = layer.get("gamma")
        if gamma is None or str(gamma["id"]) not in after:
            fail(f"norm {position} has no gamma.", "a trainable gamma.", SHARED_NORM_WHY)
        if np.allclose(after[str(gamma["id"])], gamma["value"], atol=1e-9, rtol=0):
            fail(
                f"norm {position}'s gamma did not change in {steps} SGD steps.",
                "gamma and beta of both norms move as the layer trains.",
                "A frozen norm (trainable=False) keeps gamma=1, beta=0 for ever and cannot adapt "
                "to its input's distribution.",
            )
    a = np.concatenate([after[str(norms[0][n]["id"])] for n in ("gamma", "beta")])
    b = np.concatenate([after[str(norms[1][n]["id"])] for n in ("gamma", "beta")])
    if np.allclose(a, b, atol=1e-7, rtol=0):
        fail(
            f"after {steps} SGD steps both norms still hold identical gamma and beta.",
            "each norm's parameters following their own gradients apart.",
            SHARED_NORM_WHY,
        )


# --------------------------------------------------------------------------- config


@pytest.fixture
def config_phase(evidence):
    return evidence.phase("config", "config.from_config")


@pytest.fixture
def config(evidence):
    data = evidence.partial("config")
    if data is None or "config" not in data:
        return evidence.phase("config", "config.base_keys")["config"]
    return data["config"]


@check("config.base_keys", "get_config keeps the base config and is JSON-serialisable", "config")
def check_config_base(evidence, config):
    construct = evidence.phase("construct", "api.constructor")
    if construct.get("kwargs_error"):
        fail(
            "TransformerEncoder(..., name='encoder_under_test') raised TypeError: "
            f"{construct['kwargs_error'].get('message', '')}",
            "def __init__(self, embed_dim, dense_dim, num_heads, **kwargs), with "
            "super().__init__(**kwargs).",
            "Passing **kwargs on to super().__init__ is what lets users name a layer, set its "
            "dtype or freeze it, and what lets from_config restore them.",
        )
    data = evidence.partial("config") or {}
    if data.get("json_error"):
        fail(
            f"get_config() returned values JSON cannot store ({data['json_error']}).",
            "plain numbers, strings, lists and dicts.",
            "Keras writes the config as JSON into .keras files.",
        )
    missing = [key for key in ("name", "trainable", "dtype") if key not in config]
    if missing:
        fail(
            f"get_config() lacks {', '.join(missing)}; it has {', '.join(sorted(config)) or 'nothing'}.",
            "config = super().get_config() first, then your own keys added to it.",
            "from_config passes the base keys back to Layer.__init__, which restores the "
            "layer's name, dtype policy and trainable flag.",
        )
    if config.get("name") != "encoder_under_test":
        fail(
            f"the layer built with name='encoder_under_test' reports name={config.get('name')!r}.",
            "the name given to the constructor.",
            "Passing **kwargs on to super().__init__ is what lets users name a layer, set its "
            "dtype or freeze it.",
        )


@check("config.own_keys", "get_config holds embed_dim, dense_dim and num_heads", "config")
def check_config_own_keys(config, dims):
    wrong = []
    for key in ("embed_dim", "dense_dim", "num_heads"):
        if key not in config:
            wrong.append(f"{key} is missing")
        elif config[key] != dims[key]:
            wrong.append(f"{key}={config[key]!r} (the layer was built with {dims[key]})")
    if wrong:
        fail(
            "; ".join(wrong) + ".",
            f"embed_dim={dims['embed_dim']}, dense_dim={dims['dense_dim']}, num_heads={dims['num_heads']} "
            "in the config.",
            "from_config calls TransformerEncoder(**config): every constructor argument must be there.",
        )


@check("config.from_config", "from_config rebuilds an identical layer", "config")
def check_from_config(config_phase):
    if config_phase["rebuilt_name"] != "encoder_under_test":
        fail(
            f"the rebuilt layer is named {config_phase['rebuilt_name']!r}, not 'encoder_under_test'.",
            "from_config(get_config()) to keep the name.",
            "Keras matches saved weights to layers partly by name; **kwargs must reach super().__init__.",
        )
    if config_phase["rebuilt_shapes"] != config_phase["original_shapes"]:
        fail(
            f"the rebuilt layer's weight shapes are {config_phase['rebuilt_shapes']}, the original's "
            f"{config_phase['original_shapes']}.",
            "the same shapes.",
            "A config that loses an argument rebuilds a different architecture.",
        )
    a, b = config_phase["rebuilt_output"], config_phase["original_output"]
    if isinstance(a, dict) or isinstance(b, dict):
        fail(
            "call did not return a tensor, so the rebuilt layer's output cannot be compared.",
            "one tensor of shape (batch, seq, embed_dim).",
            "See api.output_shape.",
        )
    if not np.allclose(a, b, atol=1e-6):
        fail(
            "with the weights copied over, the rebuilt layer computes different outputs.",
            "identical outputs.",
            "A layer rebuilt from its config must be the same function of its weights.",
        )


@check("config.keras_file", "A model holding the layer survives .keras save and load", "config")
def check_keras_file(evidence):
    saving = evidence.phase("saving", "config.keras_file")
    before, after = saving["before"], saving["after"]
    if isinstance(before, dict) or isinstance(after, dict):
        fail("the model did not return a tensor.", "a tensor.", "Saving needs a working model.")
    if not np.allclose(before, after, atol=1e-6):
        fail(
            f"predictions differ by up to {np.abs(before - after).max():.3g} after loading.",
            "identical predictions.",
            "A saved model that loads with other weights or another architecture silently changes.",
        )


# --------------------------------------------------------------------------- mask


def _mask_event(evidence):
    data = evidence.partial("mask")
    if data is None:
        evidence.phase("mask", "mask.attention_mask_shape")
    error = evidence.error("mask") or {}
    if error.get("type") == "TypeError" and "keyword argument 'mask'" in error.get("message", ""):
        fail(
            "call() does not accept a mask argument (TypeError: unexpected keyword argument 'mask').",
            "def call(self, inputs, mask=None).",
            "Keras hands the padding mask from Embedding(mask_zero=True) to call as mask=; a layer "
            "that cannot take it cannot keep padding out of attention.",
        )
    events = data.get("events") or []
    return data, (events[0] if events else None)


def _no_mask_reached(event) -> bool:
    return all(event.get(k) is None for k in ("attention_mask", "query_mask", "value_mask", "key_mask"))


IGNORED_MASK = (
    "MultiHeadAttention received no mask: attention_mask was None, so every position attends to "
    "padding as if it were text."
)


@check("mask.attention_mask_shape", "The attention mask broadcasts to (batch, queries, keys)", "mask")
def check_attention_mask_shape(evidence, job):
    data, event = _mask_event(evidence)
    batch, seq = np.asarray(job["mask"]).shape
    if event is None:
        evidence.phase("mask", "mask.attention_mask_shape")
        fail(
            "MultiHeadAttention was not called when a mask was given.",
            "one MultiHeadAttention call that receives the attention mask.",
            "The mask only works where attention is computed.",
        )
    if _no_mask_reached(event):
        fail(
            IGNORED_MASK,
            f"the (batch, seq) = ({batch}, {seq}) padding mask passed on as attention_mask of shape "
            f"({batch}, 1, {seq}) — or ({batch}, {seq}, {seq}).",
            "Keras gives call() the padding mask, but MultiHeadAttention only sees what you pass it.",
        )
    raw = event.get("attention_mask")
    if raw is not None and list(raw.shape) == [batch, seq]:
        fail(
            f"attention_mask of shape ({batch}, {seq}), the padding mask unexpanded"
            + (" — MultiHeadAttention raised on it." if evidence.error("mask") else "."),
            f"shape ({batch}, 1, {seq}): mask[:, None, :], one row of keys for every query.",
            "MultiHeadAttention's scores have shape (batch, heads, queries, keys); a 2-D mask is "
            "read as (queries, keys) and cannot line up with a batch axis.",
        )
    effective = event.get("effective_mask")
    shape = tuple((raw if raw is not None else effective).shape) if (raw is not None or effective is not None) else None
    try:
        np.broadcast_shapes(shape, (batch, seq, seq))
        ok = shape is not None and len(shape) <= 3
    except (ValueError, TypeError):
        ok = False
    if not ok:
        fail(
            f"attention_mask of shape {shape}.",
            f"a shape that broadcasts to (batch, queries, keys) = ({batch}, {seq}, {seq}), such as "
            f"({batch}, 1, {seq}).",
            "MultiHeadAttention combines the mask with scores of shape (batch, heads, queries, keys).",
        )


@check("mask.masks_keys", "The attention mask hides padded keys from real queries", "mask", points=2)
def check_masks_keys(evidence, job):
    data, event = _mask_event(evidence)
    padding = np.asarray(job["mask"], dtype=bool)
    batch, seq = padding.shape
    if event is None or _no_mask_reached(event):
        fail(
            IGNORED_MASK,
            "padded keys masked out for every real query.",
            "Attention to padding lets the amount of padding in a batch change how real tokens are encoded.",
        )
    effective = event.get("effective_mask")
    if effective is None:
        evidence.phase("mask", "mask.masks_keys")
        fail(
            "no attention mask reached the attention scores.",
            "padded keys masked out for every real query.",
            "Attention to padding lets the amount of padding in a batch change how real tokens are encoded.",
        )
    try:
        full = np.broadcast_to(effective.astype(bool), (batch, seq, seq))
    except ValueError:
        fail(
            f"an attention mask of shape {tuple(effective.shape)}, which does not broadcast to "
            f"({batch}, {seq}, {seq}).",
            f"({batch}, 1, {seq}).",
            "See mask.attention_mask_shape.",
        )
    real_rows = [(b, t) for b in range(batch) for t in range(seq) if padding[b, t]]
    want = np.array([padding[b] for b, t in real_rows])
    got = np.array([full[b, t] for b, t in real_rows])
    if np.array_equal(got, want):
        return
    if np.array_equal(got, ~want):
        fail(
            "the mask is inverted: real tokens are hidden and padding is attended to.",
            "True for real tokens (keep), False for padding (hide), as Embedding(mask_zero=True) gives it.",
            "MultiHeadAttention attends where the mask is True.",
        )
    query_axis = np.array([[padding[b, t]] * seq for b, t in real_rows])
    if np.array_equal(got, query_axis) or (effective.ndim == 3 and effective.shape[2] == 1):
        fail(
            f"the mask was expanded on the wrong axis (shape {tuple(effective.shape)}): it hides "
            "queries, while every query still attends to the padded keys.",
            f"mask[:, None, :] — shape ({batch}, 1, {seq}), broadcast over queries, masking keys.",
            "The mask must say which keys a query may look at; a (batch, seq, 1) mask silently "
            "masks the wrong thing, and MultiHeadAttention does not complain.",
        )
    leaks = int(np.sum(got & ~want))
    hidden = int(np.sum(~got & want))
    fail(
        f"for real query positions, {leaks} padded key(s) are visible and {hidden} real key(s) hidden.",
        "for every real query, exactly the real keys of its own sequence visible.",
        "Attention to padding lets the amount of padding change the encoding of real tokens.",
    )


@check("mask.padding_invariance", "Padded positions cannot change real positions' outputs", "mask", points=2)
def check_padding_invariance(evidence, job):
    data = evidence.phase("mask", "mask.padding_invariance")
    padding = np.asarray(job["mask"], dtype=bool)
    a, b = data["output"], data["output_perturbed"]
    if isinstance(a, dict) or isinstance(b, dict):
        fail(
            "call(inputs, mask=...) did not return a tensor.",
            "one tensor of shape (batch, seq, embed_dim).",
            "A layer must return the same kind of output with and without a mask.",
        )
    change = np.abs(a - b)[padding]
    if change.max() > 1e-5:
        fail(
            f"changing only the padded positions' input vectors changed real positions' outputs "
            f"by up to {change.max():.3g}.",
            "outputs at real positions unchanged, whatever the padding holds.",
            "Otherwise the same sentence encodes differently depending on how much padding its "
            "batch needed.",
        )


@check("mask.propagates", "The padding mask passes on to the next layer", "mask")
def check_mask_propagates(evidence, job):
    data = evidence.phase("mask", "mask.padding_invariance")
    padding = np.asarray(job["mask"], dtype=bool)
    output_mask = data.get("output_mask")
    if isinstance(output_mask, np.ndarray) and output_mask.shape == padding.shape:
        if np.array_equal(output_mask.astype(bool), padding):
            return
    observed = (
        "supports_masking is False, so Keras drops the mask after your layer (and warns that it "
        "destroys the mask)"
        if not data.get("supports_masking")
        else "compute_mask does not return the input's padding mask"
    )
    fail(
        observed + ".",
        "self.supports_masking = True in __init__ (the output keeps the input's padding mask).",
        "Layers after the encoder — a second encoder, pooling that skips padding — need the mask "
        "too. Keras 3 only passes it on for layers that declare they support masking, and its "
        "warning on stderr is enough for nbgrader to give a correct notebook cell zero points.",
    )


# --------------------------------------------------------------------------- forward


@check("forward.call_order", "Attention, norm, feed-forward, norm — in that order", "forward")
def check_call_order(structure):
    sequence = structure.sequence
    expected = ["attention", "norm", "dense", "dense", "norm"]
    if sequence == expected:
        return
    if sequence[:2] == ["norm", "attention"]:
        why = (
            "Normalising before each sub-block (pre-norm) is a real variant used by many later "
            "models, but this exercise asks for the book's post-norm block: norm(x + sublayer(x))."
        )
    else:
        why = "The post-norm encoder is norm1(x + attention(x)), then norm2(h + ffn(h))."
    fail(" → ".join(sequence) or "none of these layers were called.", " → ".join(expected), why)


VARIANT_MESSAGES = {
    "no_relu": "the feed-forward projection has no relu between its two Dense layers",
    "no_attention_residual": "the attention output is normalised without adding the inputs (no residual)",
    "no_ffn_residual": "the feed-forward output is normalised without adding its input (no residual)",
    "no_residuals": "neither block adds its input back (no residual connections)",
    "input_residual_in_ffn": "the second residual adds the encoder's original inputs instead of "
    "the first norm's output",
    "pre_norm": "the block is pre-norm: x + attention(norm(x)), then h + ffn(norm(h))",
}


@check("forward.post_norm", "Computes the post-norm encoder", "forward", points=3)
def check_post_norm(structure, forward, job):
    attention_calls = structure.of("MultiHeadAttention")
    norm_calls = structure.norm_calls
    dense_calls = structure.of("Dense")
    if len(attention_calls) != 1 or len(norm_calls) != 2 or len(dense_calls) != 2:
        fail(
            f"{len(attention_calls)} attention, {len(norm_calls)} LayerNormalization and "
            f"{len(dense_calls)} Dense call(s): {_describe_calls(structure)}.",
            "one MultiHeadAttention, two LayerNormalization and two Dense calls.",
            "The post-norm encoder is norm1(x + attention(x, x)), then norm2(h + ffn(h)).",
        )
    mha = structure.layer(attention_calls[0])
    event = attention_calls[0]
    if event.get("query_is_input") is False or event.get("value_is_input") is False:
        fail(
            "MultiHeadAttention was not given the encoder's inputs as both query and value.",
            "self-attention: attention(inputs, inputs).",
            "In an encoder every position attends to the other positions of the same sequence.",
        )
    parts = {
        "attention": {
            f"{role}_{part}": _value(mha.get(f"{role}_{part}"))
            for role in ("query", "key", "value", "output")
            for part in ("kernel", "bias")
        },
        "ffn1": {k: _value(structure.layer(dense_calls[0]).get(k)) for k in ("kernel", "bias")},
        "ffn2": {k: _value(structure.layer(dense_calls[1]).get(k)) for k in ("kernel", "bias")},
    }
    for name, call in zip(("norm1", "norm2"), norm_calls):
        layer = structure.layer(call)
        parts[name] = {"gamma": _value(layer.get("gamma")), "beta": _value(layer.get("beta")), "epsilon": layer["epsilon"]}
    x = np.asarray(job["inputs"], dtype=np.float64)
    output = forward["output"]
    if isinstance(output, dict):
        fail(
            "call did not return a tensor.",
            "one tensor of shape (batch, seq, embed_dim).",
            "The forward pass can only be compared on a tensor.",
        )
    variants = encoder_variants(x, parts)
    if np.allclose(output, variants["post_norm"], atol=ATOL, rtol=RTOL):
        return
    for name, text in VARIANT_MESSAGES.items():
        if output.shape == variants[name].shape and np.allclose(output, variants[name], atol=ATOL, rtol=RTOL):
            fail(
                f"your output matches an encoder in which {text}.",
                "norm2(h + ffn(h)) with h = norm1(x + attention(x, x)) and ffn = Dense(embed_dim)(relu(Dense(dense_dim)(h))).",
                "Residual connections let each block learn a correction to its input and keep "
                "gradients flowing; post-norm normalises each residual sum.",
            )
    diff = np.abs(output - variants["post_norm"]).max() if output.shape == variants["post_norm"].shape else float("nan")
    fail(
        f"your output differs from the post-norm encoder computed from your own weights by up to {diff:.3g}.",
        "norm2(h + ffn(h)) with h = norm1(x + attention(x, x)) and ffn = Dense(embed_dim)(relu(Dense(dense_dim)(h))).",
        "Each step of the block matters: attention over the inputs, residual sum, norm, "
        "feed-forward, residual sum, norm.",
    )
