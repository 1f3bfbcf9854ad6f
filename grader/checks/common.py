"""Fixtures and check logic shared by the layer exercises.

A check module imports the fixtures it uses from here and wraps these
``assert_*`` functions in its own ``@check`` functions, with the numbers and
words of its exercise.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import pytest

from .evidence import format_student_error
from .framework import fail

LAYER_NAME = "layer_under_test"

SHARED_NORM_WHY = (
    "Each LayerNormalization learns its own scale (gamma) and shift (beta). Each norm sees a "
    "different residual sum — the attention residual, the feed-forward residual — whose "
    "statistics differ, so each needs parameters fitted to its own input. The original "
    "Transformer gives every residual sub-block its own norm, and one shared norm couples the "
    "updates: every step moves gamma and beta for all positions at once."
)
PADDING_WHY = "Attention to padding lets the amount of padding in a batch change how real tokens are encoded."

# --------------------------------------------------------------------------- fixtures


@pytest.fixture
def job(evidence):
    return evidence.job


@pytest.fixture
def dims(job):
    return job["dims"]


@pytest.fixture
def forward(evidence):
    return evidence.phase("forward", "api.output_shape")


@dataclass
class Structure:
    """The layers the student's call ran, outside MultiHeadAttention's insides."""

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
        short = {"MultiHeadAttention": "attention", "LayerNormalization": "norm", "Dense": "dense",
                 "Embedding": "embedding"}
        return [short[e["class"]] for e in self.calls if e["class"] in short]

    def describe(self) -> str:
        return " → ".join(self.sequence) or "no attention, norm, dense or embedding layer at all"


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


@pytest.fixture
def gradients(evidence):
    return evidence.phase("gradients", "gradients.all_variables")


@pytest.fixture
def config_phase(evidence):
    return evidence.phase("config", "config.from_config")


@pytest.fixture
def config(evidence):
    data = evidence.partial("config")
    if data is None or "config" not in data:
        return evidence.phase("config", "config.base_keys")["config"]
    return data["config"]


def padding(job) -> np.ndarray:
    """The job's (batch, seq) padding mask: True for real positions."""
    return np.asarray(job["mask"], dtype=bool)


def value(param):
    return None if param is None else param["value"]


def attention_params(layer: dict) -> dict:
    return {
        f"{role}_{part}": value(layer.get(f"{role}_{part}"))
        for role in ("query", "key", "value", "output")
        for part in ("kernel", "bias")
    }


def norm_params(layer: dict) -> dict:
    return {"gamma": value(layer.get("gamma")), "beta": value(layer.get("beta")), "epsilon": layer["epsilon"]}


def dense_params(layer: dict) -> dict:
    return {"kernel": value(layer.get("kernel")), "bias": value(layer.get("bias"))}


# --------------------------------------------------------------------------- api


def assert_constructor(evidence, class_name: str, sizes: dict) -> None:
    construct = evidence.phase("construct", "api.constructor")
    if construct["positional_error"]:
        args = ", ".join(str(v) for v in sizes.values())
        fail(
            format_student_error(f"{class_name}({args}) raised", construct["positional_error"]),
            f"{class_name}({', '.join(sizes)}) in that order, also by keyword.",
            "Code that uses your layer (and the book) passes the sizes positionally.",
        )


def assert_output_shape(forward: dict, expected: tuple, what: str) -> None:
    output = forward["output"]
    if isinstance(output, dict):
        fail(
            f"call returned a {output.get('not_a_tensor')}, not a tensor.",
            f"one tensor of shape {expected} {what}.",
            "A layer maps tensors to a tensor, so layers can be stacked.",
        )
    if tuple(output.shape) != tuple(expected):
        fail(
            f"output of shape {tuple(output.shape)}.",
            f"shape {expected} {what}.",
            "The next layer — and the residual sums — depend on this shape.",
        )
    if not np.all(np.isfinite(output)):
        fail("the output holds NaN or infinite values.", "finite numbers.", "NaNs poison training.")


# --------------------------------------------------------------------------- weights


def assert_distinct_norms(structure: Structure, count: int, positions: str) -> None:
    calls = structure.norm_calls
    instances = list(dict.fromkeys(e["layer"] for e in calls))
    if len(calls) == count and len(instances) == count:
        return
    if not calls:
        fail(
            "no LayerNormalization layer was called in the forward pass.",
            f"{count} LayerNormalization layers: {positions}.",
            "Normalising each residual sum keeps activations at a stable scale as blocks stack.",
        )
    if len(instances) < len(calls):
        reused = Counter(e["layer"] for e in calls).most_common(1)[0][1]
        fail(
            f"{len(calls)} LayerNormalization calls on only {len(instances)} instance(s): one instance is "
            f"called {reused} times, so residual blocks share one gamma and one beta.",
            f"{count} separate LayerNormalization instances, one per residual block.",
            SHARED_NORM_WHY,
        )
    fail(
        f"{len(calls)} LayerNormalization call(s) on {len(instances)} instance(s); the call order was "
        f"{structure.describe()}.",
        f"exactly {count} calls, on {count} different LayerNormalization instances: {positions}.",
        "Each residual block is normalised once, by its own norm.",
    )


def assert_norm_parameters(structure: Structure, embed_dim: int) -> None:
    calls = structure.norm_calls
    if not calls:
        fail("no LayerNormalization layer was called.", "norms, each with gamma and beta.", SHARED_NORM_WHY)
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
            f"each norm with its own trainable gamma and beta of shape ({embed_dim},), sharing no "
            "variable with another.",
            SHARED_NORM_WHY,
        )


def assert_trainable_shapes(forward: dict, expected: list[tuple], summary: str, hints: list[str]) -> None:
    shapes = {v["id"]: tuple(v["shape"]) for v in forward["variables"]}
    observed = Counter(shapes[i] for i in forward["trainable"] if i in shapes)
    wanted = Counter(expected)
    if observed == wanted:
        return
    hint = (" " + "; ".join(hints) + ".") if hints else ""
    fail(
        f"{sum(observed.values())} trainable weights; missing shapes {shape_list(wanted - observed)}, "
        f"unexpected shapes {shape_list(observed - wanted)}.{hint}",
        f"{sum(wanted.values())} trainable weights: {summary}.",
        "The weight list is the layer's architecture: a different width or a missing "
        "trainable part changes what the layer can learn.",
    )


def attention_hints(structure: Structure, dims: dict) -> list[str]:
    hints = []
    for event in structure.of("MultiHeadAttention")[:1]:
        layer = structure.layer(event)
        if layer["key_dim"] != dims["embed_dim"]:
            hints.append(
                f"MultiHeadAttention has key_dim={layer['key_dim']}; this exercise (like the book) "
                f"uses key_dim=embed_dim={dims['embed_dim']}"
            )
        if layer["num_heads"] != dims["num_heads"]:
            hints.append(f"MultiHeadAttention has num_heads={layer['num_heads']}, not {dims['num_heads']}")
    if "dense_dim" in dims:
        units = [structure.layer(e)["units"] for e in structure.of("Dense")]
        if units and units != [dims["dense_dim"], dims["embed_dim"]]:
            hints.append(
                f"the feed-forward Dense widths are {units}; expected [dense_dim, embed_dim] = "
                f"[{dims['dense_dim']}, {dims['embed_dim']}]"
            )
    return hints


def attention_shapes(embed_dim: int, num_heads: int) -> list[tuple]:
    e, h = embed_dim, num_heads
    return [(e, h, e)] * 3 + [(h, e)] * 3 + [(h, e, e), (e,)]


def shape_list(counter: Counter) -> str:
    if not counter:
        return "none"
    return ", ".join(f"{shape}×{n}" if n > 1 else str(shape) for shape, n in sorted(counter.items()))


# --------------------------------------------------------------------------- gradients


def assert_all_gradients(gradients: dict, forward: dict, exempt: set[int], expected: str) -> None:
    paths = {v["id"]: v["path"] for v in forward["variables"]}
    if not gradients["variables"]:
        fail("the layer has no trainable variables.", expected, "Nothing could be learned.")
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
            "a finite, non-zero gradient for every trainable variable (an attention key bias "
            "excepted: softmax ignores a shift shared by all keys).",
            "A variable with no gradient never learns: it is created but not on the path from "
            "inputs to outputs, or the path is cut (for instance by a NumPy round trip).",
        )


def key_biases(structure: Structure) -> set[int]:
    exempt = set()
    for event in structure.of("MultiHeadAttention"):
        bias = structure.layer(event).get("key_bias")
        if bias is not None:
            exempt.add(bias["id"])
    return exempt


def assert_norm_gradients_differ(gradients: dict, structure: Structure, count: int) -> None:
    grads = dict(zip(gradients["variables"], gradients["gradients"]))
    norms = [structure.layer(e) for e in structure.norm_calls]
    if len(norms) < count:
        fail(f"{len(norms)} LayerNormalization call(s).", f"{count} norms.", SHARED_NORM_WHY)
    for name in ("gamma", "beta"):
        params = [n.get(name) for n in norms[:count]]
        if any(p is None for p in params):
            fail(f"a norm without {name}.", "gamma and beta in every norm.", SHARED_NORM_WHY)
        ids = [p["id"] for p in params]
        if len(set(ids)) < len(ids):
            fail(
                f"several norm positions use one {name} variable, so they receive one gradient: "
                "the sum of what each residual block asks for.",
                f"one {name} variable per norm, each with the gradient of its own position.",
                SHARED_NORM_WHY,
            )
        values = [grads.get(i) for i in ids]
        if any(v is None for v in values):
            fail(f"no gradient for a norm's {name}.", "a gradient for each norm.", SHARED_NORM_WHY)
        for a in range(len(values)):
            for b in range(a + 1, len(values)):
                if np.allclose(values[a], values[b], rtol=1e-5, atol=1e-9):
                    fail(
                        f"norms {a + 1} and {b + 1} receive identical {name} gradients.",
                        "different gradients: each norm sees a differently distributed input.",
                        SHARED_NORM_WHY,
                    )


def assert_norms_diverge(gradients: dict, structure: Structure, steps: int, count: int) -> None:
    after = gradients["after_steps"]
    norms = [structure.layer(e) for e in structure.norm_calls][:count]
    if len(norms) < count:
        fail(f"{len(norms)} LayerNormalization call(s).", f"{count} norms.", SHARED_NORM_WHY)
    for position, layer in enumerate(norms, start=1):
        gamma = layer.get("gamma")
        if gamma is None or str(gamma["id"]) not in after:
            fail(f"norm {position} has no gamma.", "a trainable gamma.", SHARED_NORM_WHY)
        if np.allclose(after[str(gamma["id"])], gamma["value"], atol=1e-9, rtol=0):
            fail(
                f"norm {position}'s gamma did not change in {steps} SGD steps.",
                "gamma and beta of every norm move as the layer trains.",
                "A frozen norm (trainable=False) keeps gamma=1, beta=0 for ever and cannot adapt "
                "to its input's distribution.",
            )
    flat = [np.concatenate([after[str(n[p]["id"])] for p in ("gamma", "beta")]) for n in norms]
    for a in range(len(flat)):
        for b in range(a + 1, len(flat)):
            if np.allclose(flat[a], flat[b], atol=1e-7, rtol=0):
                fail(
                    f"after {steps} SGD steps norms {a + 1} and {b + 1} still hold identical gamma and beta.",
                    "each norm's parameters following their own gradients apart.",
                    SHARED_NORM_WHY,
                )


# --------------------------------------------------------------------------- config


def assert_config_base(evidence, config: dict, class_name: str) -> None:
    construct = evidence.phase("construct", "api.constructor")
    if construct.get("kwargs_error"):
        fail(
            f"{class_name}(..., name='{LAYER_NAME}') raised TypeError: "
            f"{construct['kwargs_error'].get('message', '')}",
            "def __init__(self, ..., **kwargs), with super().__init__(**kwargs).",
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
    if config.get("name") != LAYER_NAME:
        fail(
            f"the layer built with name='{LAYER_NAME}' reports name={config.get('name')!r}.",
            "the name given to the constructor.",
            "Passing **kwargs on to super().__init__ is what lets users name a layer, set its "
            "dtype or freeze it.",
        )


def assert_config_own_keys(config: dict, expected: dict, class_name: str) -> None:
    wrong = []
    for key, want in expected.items():
        if key not in config:
            wrong.append(f"{key} is missing")
        elif config[key] != want:
            wrong.append(f"{key}={config[key]!r} (the layer was built with {want})")
    if wrong:
        fail(
            "; ".join(wrong) + ".",
            ", ".join(f"{k}={v}" for k, v in expected.items()) + " in the config.",
            f"from_config calls {class_name}(**config): every constructor argument must be there.",
        )


def assert_from_config(config_phase: dict) -> None:
    if config_phase["rebuilt_name"] != LAYER_NAME:
        fail(
            f"the rebuilt layer is named {config_phase['rebuilt_name']!r}, not '{LAYER_NAME}'.",
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
            "one tensor.",
            "See api.output_shape.",
        )
    if not np.allclose(a, b, atol=1e-6):
        fail(
            "with the weights copied over, the rebuilt layer computes different outputs.",
            "identical outputs.",
            "A layer rebuilt from its config must be the same function of its weights.",
        )


def assert_keras_file(evidence) -> None:
    saving = evidence.phase("saving", "config.keras_file")
    before, after = saving["before"], saving["after"]
    if isinstance(before, dict) or isinstance(after, dict):
        fail("the model did not return a tensor.", "a tensor.", "Saving needs a working model.")
    if before.shape != after.shape or not np.allclose(before, after, atol=1e-6):
        diff = np.abs(before - after).max() if before.shape == after.shape else "shape"
        fail(
            f"predictions differ after loading (by {diff}).",
            "identical predictions.",
            "A saved model that loads with other weights or another architecture silently changes.",
        )


# --------------------------------------------------------------------------- masks

IGNORED_MASK = (
    "MultiHeadAttention received no mask: attention_mask was None, so every position attends to "
    "padding as if it were text."
)


def mask_event(evidence, phase: str, check_id: str, which: int = 0, mask_argument: str = "mask"):
    """The MultiHeadAttention call number ``which`` of a masked phase, even if the phase raised."""
    data = evidence.partial(phase)
    if data is None:
        evidence.phase(phase, check_id)
    error = evidence.error(phase) or {}
    if error.get("type") == "TypeError" and "unexpected keyword argument" in error.get("message", ""):
        fail(
            f"call() does not accept the mask argument (TypeError: {error.get('message', '').splitlines()[0]}).",
            f"a call signature with {mask_argument}=None.",
            "Keras hands padding masks to call as keyword arguments; a layer that cannot take "
            "them cannot keep padding out of attention.",
        )
    events = data.get("events") or []
    return events[which] if len(events) > which else None


def no_mask_reached(event) -> bool:
    return all(event.get(k) is None for k in ("attention_mask", "query_mask", "value_mask", "key_mask"))


def assert_attention_mask_shape(evidence, event, batch: int, queries: int, keys: int, phase: str) -> None:
    if event is None:
        evidence.phase(phase, "mask.attention_mask_shape")
        fail(
            "MultiHeadAttention was not called when a mask was given.",
            "a MultiHeadAttention call that receives the attention mask.",
            "The mask only works where attention is computed.",
        )
    if no_mask_reached(event) and not event.get("use_causal_mask"):
        fail(
            IGNORED_MASK,
            f"the (batch, seq) padding mask passed on as attention_mask of shape ({batch}, 1, {keys}) — "
            f"or ({batch}, {queries}, {keys}).",
            "Keras gives call() the padding mask, but MultiHeadAttention only sees what you pass it.",
        )
    raw = event.get("attention_mask")
    if raw is not None and list(raw.shape) == [batch, keys] and batch != queries:
        fail(
            f"attention_mask of shape ({batch}, {keys}), the padding mask unexpanded"
            + (" — MultiHeadAttention raised on it." if evidence.error(phase) else "."),
            f"shape ({batch}, 1, {keys}): mask[:, None, :], one row of keys for every query.",
            "MultiHeadAttention's scores have shape (batch, heads, queries, keys); a 2-D mask is "
            "read as (queries, keys) and cannot line up with a batch axis.",
        )
    effective = event.get("effective_mask")
    shown = raw if raw is not None else effective
    if shown is None:
        return
    try:
        np.broadcast_shapes(tuple(shown.shape), (batch, queries, keys))
        ok = shown.ndim <= 3
    except ValueError:
        ok = False
    if not ok:
        fail(
            f"attention_mask of shape {tuple(shown.shape)}.",
            f"a shape that broadcasts to (batch, queries, keys) = ({batch}, {queries}, {keys}), such as "
            f"({batch}, 1, {keys}).",
            "MultiHeadAttention combines the mask with scores of shape (batch, heads, queries, keys).",
        )


def assert_masks_keys(evidence, event, expected: np.ndarray, real_queries: np.ndarray, phase: str,
                      what: str = "padded keys") -> None:
    """The effective mask, on real query rows, equals ``expected`` (batch, queries, keys)."""
    batch, queries, keys = expected.shape
    if event is None or (no_mask_reached(event) and not event.get("use_causal_mask")):
        fail(IGNORED_MASK, f"{what} masked out for every real query.", PADDING_WHY)
    effective = event.get("effective_mask")
    if effective is None and event.get("use_causal_mask"):
        effective = np.tril(np.ones((queries, keys), dtype=bool))
    if effective is None:
        evidence.phase(phase, "mask.masks_keys")
        fail("no attention mask reached the attention scores.", f"{what} masked out.", PADDING_WHY)
    try:
        full = np.broadcast_to(effective.astype(bool), (batch, queries, keys))
    except ValueError:
        fail(
            f"an attention mask of shape {tuple(effective.shape)}, which does not broadcast to "
            f"({batch}, {queries}, {keys}).",
            f"({batch}, 1, {keys}) or ({batch}, {queries}, {keys}).",
            "See mask.attention_mask_shape.",
        )
    rows = [(b, t) for b in range(batch) for t in range(queries) if real_queries[b, t]]
    got = np.array([full[b, t] for b, t in rows])
    want = np.array([expected[b, t] for b, t in rows])
    if np.array_equal(got, want):
        return
    if np.array_equal(got, ~want):
        fail(
            "the mask is inverted: real tokens are hidden and padding is attended to.",
            "True for positions to attend to, False for padding, as Embedding(mask_zero=True) gives it.",
            "MultiHeadAttention attends where the mask is True.",
        )
    if effective.ndim == 3 and effective.shape[2] == 1 and keys > 1:
        fail(
            f"the mask was expanded on the wrong axis (shape {tuple(effective.shape)}): it hides "
            "queries, while every query still attends to the padded keys.",
            f"mask[:, None, :] — shape ({batch}, 1, {keys}), broadcast over queries, masking keys.",
            "The mask must say which keys a query may look at; a (batch, seq, 1) mask silently "
            "masks the wrong thing, and MultiHeadAttention does not complain.",
        )
    leaks = int(np.sum(got & ~want))
    hidden = int(np.sum(~got & want))
    fail(
        f"for real query positions, {leaks} key(s) that should be hidden are visible and {hidden} "
        "key(s) that should be visible are hidden.",
        f"for every real query, exactly the keys it may attend to visible ({what} hidden).",
        PADDING_WHY,
    )


def assert_unchanged(a, b, where: np.ndarray, changed: str, why: str) -> None:
    """Outputs ``a`` and ``b`` agree at the positions of boolean array ``where``."""
    if isinstance(a, dict) or isinstance(b, dict):
        fail(
            "a masked call did not return a tensor.",
            "one tensor, with or without a mask.",
            "A layer must return the same kind of output with and without a mask.",
        )
    change = np.abs(a - b)[where]
    if change.size and change.max() > 1e-5:
        fail(
            f"changing only {changed} changed the outputs that must not depend on them, by up to "
            f"{change.max():.3g}.",
            "those outputs unchanged.",
            why,
        )


def assert_mask_propagates(data: dict, padding: np.ndarray) -> None:
    output_mask = data.get("output_mask")
    if isinstance(output_mask, np.ndarray) and output_mask.shape == padding.shape:
        if np.array_equal(output_mask.astype(bool), padding):
            return
    observed = (
        "supports_masking is False, so Keras drops the mask after your layer (and warns that it "
        "destroys the mask)"
        if not data.get("supports_masking")
        else "the output does not carry the input's padding mask"
    )
    fail(
        observed + ".",
        "self.supports_masking = True in __init__ (the output keeps the input's padding mask).",
        "Layers after this one — an encoder, pooling that skips padding — need the mask too. "
        "Keras 3 only passes it on for layers that declare they support masking, and its warning "
        "on stderr is enough for nbgrader to give a correct notebook cell zero points.",
    )


# --------------------------------------------------------------------------- forward


def self_attention_inputs(event: dict, what: str):
    """A check that attention got the call's first argument as query and value."""

    def check():
        if event.get("query_source") != 0 or event.get("value_source") != 0:
            fail(
                f"MultiHeadAttention was not given the {what}'s inputs as both query and value.",
                "self-attention: attention(inputs, inputs).",
                "Self-attention lets every position look at the other positions of the same sequence.",
            )

    return check


ATOL = 2e-4
RTOL = 1e-3


def assert_matches_reference(output, variants: dict, messages: dict, expected: str, why: str,
                             correct: str = "correct", where: np.ndarray | None = None, otherwise=None) -> None:
    """``output`` equals ``variants[correct]``; if it equals a known wrong variant instead, say which;
    else call ``otherwise()`` (which may fail with a more specific message) before failing generally."""
    if isinstance(output, dict):
        fail("call did not return a tensor.", expected, "The forward pass can only be compared on a tensor.")

    def close(a, b) -> bool:
        if a.shape != b.shape:
            return False
        if where is not None:
            a, b = a[where], b[where]
        return np.allclose(a, b, atol=ATOL, rtol=RTOL)

    if close(output, variants[correct]):
        return
    for name, text in messages.items():
        if close(output, variants[name]):
            fail(f"your output matches a layer in which {text}.", expected, why)
    if otherwise is not None:
        otherwise()
    reference = variants[correct]
    diff = np.abs(output - reference).max() if output.shape == reference.shape else float("nan")
    fail(
        f"your output differs from the layer computed independently from your own weights by up to {diff:.3g}.",
        expected,
        why,
    )
