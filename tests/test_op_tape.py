"""A custom layer's operations: recorded in the child, recomputed by the parent, forged in vain.

Common operations are checked through the tape against Keras itself (values and
gradients; tests/test_op_table.py checks every operation of the table), real
layers — a masked pooling, operations between sublayers, keras.ops reached
through its submodules, an operation that gives two tensors, a Keras 2 layer of
TensorFlow functions — are traced and replayed from the parent's numbers, and
altered tapes — a forged op record, an op claimed but not run, a cast claimed
to hide a constant output, an op the table leaves out — are refused.
"""

from __future__ import annotations

import copy
import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
keras = pytest.importorskip("keras")
tf = pytest.importorskip("tensorflow")

from autograd import grad  # noqa: E402

from grader.protocol import wire  # noqa: E402
from grader.judge import budget, ops, replay, tape  # noqa: E402
from grader.probe.evidence_stream import to_plain  # noqa: E402
from grader.probe.tracing import CallTracer, Registry  # noqa: E402

RNG = np.random.default_rng(7)
X = RNG.normal(size=(2, 3, 4))
Y = RNG.normal(size=(2, 3, 4))
MASK = np.array([[True, True, False], [True, False, False]])


@pytest.fixture(autouse=True)
def fresh_budget():
    budget.reset()
    yield
    budget.reset()


# each allow-listed op: how Keras is called, and the same as a tape record's arguments
ELEMENTWISE = ["add", "subtract", "multiply", "divide", "true_divide", "maximum", "minimum"]
COMPARISONS = ["equal", "not_equal", "greater", "greater_equal", "less", "less_equal"]
UNARY = ["negative", "absolute", "abs", "exp", "square", "tanh", "sigmoid"]
REDUCTIONS = ["sum", "mean", "max", "min", "amax", "amin", "prod"]


def _cases():
    cases = []
    for name in ELEMENTWISE:
        cases.append((name, (X, Y), {}))
    cases.append(("power", (np.abs(X) + 0.5, Y), {}))
    for name in COMPARISONS:
        cases.append((name, (X, Y), {}))
    for name in ("logical_and", "logical_or", "logical_xor"):
        cases.append((name, (X > 0, Y > 0), {}))
    cases.append(("logical_not", (X > 0,), {}))
    for name in UNARY:
        cases.append((name, (X,), {}))
    cases += [("log", (np.abs(X) + 0.1,), {}), ("sqrt", (np.abs(X) + 0.1,), {}),
              ("reciprocal", (np.abs(X) + 0.5,), {}), ("clip", (X, -0.5, 0.5), {})]
    for name in REDUCTIONS:
        cases += [(name, (X,), {"axis": 1}), (name, (X,), {"axis": -1, "keepdims": True}), (name, (X,), {})]
    cases += [("any", (X > 0,), {"axis": 1}), ("all", (X > 0,), {"axis": 1}),
              ("count_nonzero", (X > 0,), {"axis": 1})]
    cases += [("cast", (MASK, "float32"), {}), ("cast", (X * 3, "int32"), {}), ("cast", (X, "bool"), {}),
              ("convert_to_tensor", (X,), {"dtype": "float32"}), ("where", (X > 0, X, Y), {}),
              ("where", (MASK[..., None], X, -1e9), {}), ("ones_like", (X,), {}), ("zeros_like", (X,), {}),
              ("expand_dims", (MASK, -1), {}), ("expand_dims", (X,), {"axis": 1}),
              ("squeeze", (X[:, :1],), {"axis": 1}),
              ("reshape", (X, (2, 12)), {}), ("reshape", (X, (-1, 4)), {}), ("transpose", (X, (0, 2, 1)), {}),
              ("transpose", (X,), {}), ("concatenate", ([X, Y],), {"axis": -1})]
    for name in ops.ACTIVATIONS:
        arguments = {"threshold": {"threshold": 0.1, "default_value": -1.0}}.get(name, {})
        cases.append((f"activations.{name}", (X,), arguments))
        if hasattr(keras.ops, name) and name not in ("linear", "exponential"):
            cases.append((name, (X,), arguments))
    cases += [("gelu", (X,), {"approximate": False}), ("activations.gelu", (X,), {"approximate": True}),
              ("activations.relu", (X,), {"negative_slope": 0.1, "max_value": 1.0}), ("softmax", (X,), {"axis": 1})]
    return cases


CASES = _cases()


def _keras_function(name):
    if name.startswith("activations."):
        return getattr(keras.activations, name.split(".", 1)[1])
    return getattr(keras.ops, name)


def _as_keras(value):
    if isinstance(value, np.ndarray):
        return tf.constant(value.astype(np.float32) if value.dtype.kind == "f" else value)
    if isinstance(value, list):
        return [_as_keras(v) for v in value]
    return value


def _argument(value):
    if isinstance(value, np.ndarray):
        return {"source": f"s{id(value)}"}
    if isinstance(value, list):
        return {"list": [_argument(v) for v in value]}
    if isinstance(value, tuple):
        return {"list": [{"value": v} for v in value]}
    return {"value": value}


def _sources(values) -> dict:
    found = {}
    for value in values:
        if isinstance(value, np.ndarray):
            found[f"s{id(value)}"] = value
        elif isinstance(value, list):
            found.update(_sources(value))
    return found


def _event(name, args, kwargs):
    return {"ops": [{"op": name, "args": [_argument(a) for a in args],
                     "kwargs": {k: _argument(v) for k, v in kwargs.items()}, "line": 3, "code": "x"}],
            "result": {"op": 0}}


@pytest.mark.parametrize("key", [(slice(None), slice(1, None), None), (Ellipsis, 0), (0, slice(None, None, -1)), 1])
def test_indexing_recomputes_what_a_tensor_index_gives(key):
    expected = tf.constant(X)[key].numpy()
    items = key if isinstance(key, tuple) else (key,)
    encoded = [{"slice": [k.start, k.stop, k.step]} if isinstance(k, slice) else {"ellipsis": True}
               if k is Ellipsis else {"value": k} for k in items]
    index = {"list": encoded} if isinstance(key, tuple) else encoded[0]
    event = {"ops": [{"op": "getitem", "args": [{"source": "x"}, index], "kwargs": {}}], "result": {"op": 0}}
    assert np.allclose(tape.run(event, {"x": X}), expected)
    with pytest.raises(replay.ReplayFailed, match="index"):
        tape.run({"ops": [{"op": "getitem", "args": [{"source": "x"}, {"value": 7}], "kwargs": {}}],
                  "result": {"op": 0}}, {"x": X})


@pytest.mark.parametrize("name, args, kwargs", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_an_operation_recomputes_what_keras_computes(name, args, kwargs):
    expected = np.asarray(keras.ops.convert_to_numpy(
        _keras_function(name)(*[_as_keras(a) for a in args], **{k: _as_keras(v) for k, v in kwargs.items()})))
    event = _event(name, args, kwargs)
    got = np.asarray(tape.run(event, _sources(list(args) + list(kwargs.values()))))
    assert got.shape == expected.shape
    if expected.dtype.kind in "biu":
        assert np.array_equal(got, expected)
    else:
        assert np.allclose(got, expected, rtol=1e-4, atol=1e-5), np.abs(got - expected).max()


DIFFERENTIABLE = [c for c in CASES if c[1] and isinstance(c[1][0], np.ndarray) and c[1][0].dtype.kind == "f"
                  and c[0] not in COMPARISONS and not c[0].startswith(("cast", "count", "ones", "zeros"))
                  and c[0] not in ("any", "all")]


@pytest.mark.parametrize("name, args, kwargs", DIFFERENTIABLE,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(DIFFERENTIABLE)])
def test_an_operations_gradient_is_the_gradient_keras_computes(name, args, kwargs):
    first = args[0]
    every = _sources(list(args) + list(kwargs.values()))
    weights = RNG.normal(size=np.shape(tape.run(_event(name, args, kwargs), every)))
    event = _event(name, args, kwargs)
    rest = _sources(list(args[1:]) + list(kwargs.values()))

    def loss(x):
        return (tape.run(event, dict(rest, **{f"s{id(first)}": x})) * weights).sum()

    exact = grad(loss)(first)
    variable = tf.Variable(first.astype(np.float64))
    with tf.GradientTape() as recorder:
        keras_args = [variable] + [tf.constant(a) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else _as_keras(a)
                                   for a in args[1:]]
        out = _keras_function(name)(*keras_args, **{k: _as_keras(v) for k, v in kwargs.items()})
        total = tf.reduce_sum(tf.cast(out, tf.float64) * weights)
    expected = recorder.gradient(total, variable)
    expected = np.zeros_like(first) if expected is None else expected.numpy()
    assert np.allclose(exact, expected, rtol=1e-5, atol=1e-6), np.abs(exact - expected).max()


def test_exact_gelu_needs_scipy_and_scipy_is_declared():
    from importlib.metadata import requires

    # the installed package's own metadata (tests/test_install.py runs this file where it is all there is)
    declared = [d for d in requires("transformer-exercises") or [] if "extra ==" not in d]
    assert any(d.replace(" ", "").startswith("scipy") for d in declared), declared
    value = ops.activation(np.array([-1.0, 0.5]), "gelu")
    assert np.allclose(value, keras.activations.gelu(np.array([-1.0, 0.5], np.float32)).numpy(), atol=1e-6)


# --------------------------------------------------------------------------- a real layer, traced and replayed


class MaskedMean(keras.layers.Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, inputs, mask=None):
        weights = keras.ops.cast(keras.ops.expand_dims(mask, -1), inputs.dtype)
        total = keras.ops.sum(inputs * weights, axis=1)
        return keras.ops.divide(total, keras.ops.sum(weights, axis=1))

    def compute_mask(self, inputs, mask=None):
        return None


class Unlisted(keras.layers.Layer):
    def call(self, inputs):
        return keras.ops.svd(inputs, compute_uv=False)


def _traced(pool):
    """(observation, values, inputs, masks) of Embedding(mask_zero) -> Dense -> pool, as the parent gets it."""
    tokens = np.array([[3, 4, 5, 0], [1, 2, 0, 0]], dtype="int32")
    inputs = keras.Input(shape=(4,), dtype="int32")
    x = keras.layers.Embedding(10, 4, mask_zero=True)(inputs)
    x = keras.layers.Dense(4)(x)
    model = keras.Model(inputs, pool(x))
    observation, values = _set_and_traced(model, tokens)
    return observation, values, {"tokens": tokens}, {"padding": tokens != 0}


def _set_and_traced(layer, inputs):
    """(observation, values): ``layer`` built on ``inputs``, every weight set to a value drawn here,
    then one call traced, as the parent gets it."""
    registry = Registry()
    layer(inputs)
    values = {}
    for variable in layer.weights:
        value = RNG.normal(size=tuple(variable.shape))
        variable.assign(value.astype("float32"))
        values[str(registry.variable(variable))] = value
    tracer = CallTracer(layer, registry)
    with tracer:
        output = layer(inputs)
    observation = {"trace": tracer.events, "output": np.asarray(output)}
    return wire.loads(wire.dumps(to_plain(observation))), values  # as it crosses to the parent


@pytest.fixture(scope="module")
def masked_mean():
    return _traced(MaskedMean())


def _ops_event(observation):
    return next(e for e in observation["trace"] if e.get("ops"))


def test_a_masked_mean_layer_is_followed_op_by_op(masked_mean):
    observation, values, inputs, masks = masked_mean
    event = _ops_event(observation)
    assert [r["op"] for r in event["ops"]] == ["expand_dims", "cast", "multiply", "sum", "sum", "divide"]
    assert event["ops"][0]["line"] and "expand_dims" in event["ops"][0]["code"]
    program = replay.build(observation, values, inputs, masks)
    assert [s.kind for s in program.steps][-1] == "ops"
    assert np.allclose(program.run(values, inputs), observation["output"], atol=1e-5)


def test_the_masked_means_gradients_are_exact(masked_mean):
    from grader.judge import analysis

    observation, values, inputs, masks = masked_mean
    program = replay.build(observation, values, inputs, masks)
    kernel = next(k for k, v in values.items() if v.shape == (4, 4))
    exact = analysis.exact_gradients(lambda vals: program.run(vals, inputs), values, [kernel],
                                     analysis.weighted_sum(np.ones((2, 4))))[kernel]
    table = next(v for v in values.values() if v.shape == (10, 4))
    tokens = inputs["tokens"]
    real = (tokens != 0).astype(float)[..., None]
    embedded = table[tokens]
    # d/dW of sum(mean over real positions of (e W + b)) is the masked mean of e, for every column
    expected = np.repeat(((embedded * real).sum(1) / real.sum(1)).sum(0)[:, None], 4, axis=1)
    assert np.allclose(exact, expected)


def test_a_mask_the_parent_did_not_choose_is_refused(masked_mean):
    observation, values, inputs, _ = masked_mean
    with pytest.raises(replay.ReplayFailed, match="not the padding mask"):
        replay.build(observation, values, inputs, {"padding": np.ones((2, 4), dtype=bool)})


def _forged(masked_mean, change):
    observation = copy.deepcopy(masked_mean[0])
    change(_ops_event(observation))
    return observation


def test_a_forged_op_output_is_refused(masked_mean):
    def change(event):
        event["ops"][-1]["output"] = event["ops"][-1]["output"] * 1.5
    with pytest.raises(replay.ReplayFailed, match="does not give what the layer recorded"):
        replay.build(_forged(masked_mean, change), *masked_mean[1:])


def test_an_op_renamed_with_its_outputs_kept_is_refused(masked_mean):
    def change(event):
        event["ops"][3]["op"] = "mean"  # claims a mean where a sum ran
    with pytest.raises(replay.ReplayFailed):
        replay.build(_forged(masked_mean, change), *masked_mean[1:])


def test_an_op_claimed_but_not_run_is_refused(masked_mean):
    def change(event):  # an extra op that would pool over every position, said to give the real output
        claimed = {"op": "mean", "args": [{"op": 2}], "kwargs": {"axis": {"value": 1}}, "line": 1, "code": "",
                   "output": event["ops"][-1]["output"]}
        event["ops"].append(claimed)
        event["result"] = {"op": len(event["ops"]) - 1}
    with pytest.raises(replay.ReplayFailed, match="does not give what the layer recorded"):
        replay.build(_forged(masked_mean, change), *masked_mean[1:])


def test_a_result_from_an_op_that_never_ran_is_refused(masked_mean):
    def change(event):
        event["result"] = {"op": 99}
    with pytest.raises(replay.ReplayFailed, match="did not run"):
        replay.build(_forged(masked_mean, change), *masked_mean[1:])


def test_a_cast_claimed_to_hide_a_constant_output_is_refused(masked_mean):
    def change(event):  # the right answer, computed by the child, passed off as a constant the layer cast
        event["ops"] = [{"op": "cast", "args": [{"constant": event["output"]}, {"value": "float32"}], "kwargs": {},
                         "line": 1, "code": "", "output": event["output"]}]
        event["result"] = {"op": 0}
    with pytest.raises(replay.ReplayFailed, match="constant tensor larger"):
        replay.build(_forged(masked_mean, change), *masked_mean[1:])


def test_a_cast_whose_source_is_not_a_recorded_tensor_is_refused(masked_mean):
    def change(event):
        event["ops"][1]["args"][0] = {"unknown": [2, 4, 1]}
    with pytest.raises(replay.ReplayFailed, match="did not see being made"):
        replay.build(_forged(masked_mean, change), *masked_mean[1:])


def test_an_operation_the_table_leaves_out_is_named_with_its_line_and_why():
    observation, values, inputs, masks = _traced(Unlisted())
    with pytest.raises(replay.ReplayFailed, match=r"keras\.ops\.svd \(line \d+ of your file: .*svd.*\): its factors "
                                                  r"are unique only up to signs"):
        replay.build(observation, values, inputs, masks)


def test_a_reshape_to_a_huge_array_is_refused_before_it_is_made():
    event = {"ops": [{"op": "ones_like", "args": [{"source": "x"}], "kwargs": {}},
                     {"op": "reshape", "args": [{"op": 0}, {"list": [{"value": -1}]}], "kwargs": {}}],
             "result": {"op": 1}}
    tape.run(event, {"x": np.ones((3, 4))})
    budget.reset()
    budget.BUDGET, saved = 10, budget.BUDGET
    try:
        with pytest.raises(budget.TooLarge):
            tape.run(event, {"x": np.ones((30, 40))})
    finally:
        budget.BUDGET = saved


def test_malformed_op_records_are_refused_not_raised():
    for records in ([1], [{"op": "add"}], [{"op": "add", "args": [{"op": 0}], "kwargs": {}}],
                    [{"op": "add", "args": [{"op": True}], "kwargs": {}}],
                    [{"op": "add", "args": [{"list": [{"list": [{"list": [{"list": [{"list": []}]}]}]}]}],
                      "kwargs": {}}],
                    [{"op": "reshape", "args": [{"source": "x"}, {"value": "big"}], "kwargs": {}, "output": None}]):
        with pytest.raises(replay.ReplayFailed):
            tape.verify({"ops": records, "result": {"op": 0}}, {"x": np.ones((2, 2))}, "layer", replay.close)


# --------------------------------------------------------------------------- Keras's own masked pooling


@pytest.fixture(scope="module")
def average_pool():
    return _traced(keras.layers.GlobalAveragePooling1D())


def _pool_event(observation):
    return next(e for e in observation["trace"] if e.get("kind") == "average_pool")


def test_a_masked_average_pool_is_recomputed_with_the_parents_own_mask(average_pool):
    observation, values, inputs, masks = average_pool
    program = replay.build(observation, values, inputs, masks)
    step = program.of_kind("average_pool")[0]
    assert step.constants["mask"] is masks["padding"]  # not the array the child sent
    assert np.allclose(program.run(values, inputs), observation["output"], atol=1e-5)


def test_a_pooling_mask_the_parent_did_not_choose_is_refused(average_pool):
    """A claimed mask that hides a real position, with the pooling's output and the model's made to
    fit it: every number agrees with the claim, and the claim is not the parent's mask."""
    observation, values, inputs, masks = copy.deepcopy(average_pool)
    event = _pool_event(observation)
    claimed = masks["padding"].copy()
    claimed[0, 0] = False
    x = next(iter(event["inputs"].values())).astype(np.float64)
    forged = ops.average_pool(x, claimed).astype(np.float32)
    event["constants"]["mask"] = claimed
    event["output"] = forged
    observation["output"] = forged
    with pytest.raises(replay.ReplayFailed, match="not the padding mask the grader chose"):
        replay.build(observation, values, inputs, masks)
    # a malformed one is refused before it is compared
    event["constants"]["mask"] = np.zeros((2, 4), dtype=bool)
    with pytest.raises(replay.ReplayFailed, match="malformed or hides every position"):
        replay.build(observation, values, inputs, masks)


# --------------------------------------------------------------------------- operations between sublayers


class GeluFeedForward(keras.layers.Layer):
    """keras-io's feed-forward with the activation as an operation between its Dense layers."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True
        self.dense1 = keras.layers.Dense(6)
        self.dense2 = keras.layers.Dense(4)

    def call(self, inputs):
        return self.dense2(keras.ops.gelu(self.dense1(inputs), approximate=False))


class ScaledGlue(keras.layers.Layer):
    """Glue of several operations, one of them on the layer's own input: a scaled residual."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True
        self.dense = keras.layers.Dense(4)
        self.norm = keras.layers.LayerNormalization()

    def call(self, inputs):
        hidden = keras.ops.tanh(self.dense(inputs)) * 0.5
        return self.norm(keras.ops.add(inputs, keras.ops.square(hidden)))


class UnlistedGlue(keras.layers.Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True
        self.dense1 = keras.layers.Dense(4)
        self.dense2 = keras.layers.Dense(4)

    def call(self, inputs):
        return self.dense2(keras.ops.svd(self.dense1(inputs), compute_uv=False))


@pytest.fixture(scope="module")
def gelu_feed_forward():
    return _traced(GeluFeedForward())


def test_an_operation_between_sublayers_is_followed(gelu_feed_forward):
    observation, values, inputs, masks = gelu_feed_forward
    program = replay.build(observation, values, inputs, masks)
    kinds = [s.kind for s in program.steps]
    assert kinds[-3:] == ["dense", "ops", "dense"], kinds
    assert [r["op"] for r in program.steps[-2].event["ops"]] == ["gelu"]
    assert np.allclose(program.run(values, inputs), observation["output"], atol=1e-5)


def test_the_gradients_through_an_operation_between_sublayers_are_exact(gelu_feed_forward):
    from grader.judge import analysis

    observation, values, inputs, masks = gelu_feed_forward
    program = replay.build(observation, values, inputs, masks)
    kernel = next(k for k, v in values.items() if v.shape == (4, 6))
    loss = analysis.weighted_sum(RNG.normal(size=(2, 4, 4)))
    exact = analysis.exact_gradients(lambda vals: program.run(vals, inputs), values, [kernel], loss)[kernel]
    numeric = np.zeros_like(values[kernel])
    for index in np.ndindex(*values[kernel].shape):
        moved = {k: v.copy() for k, v in values.items()}
        moved[kernel][index] += 1e-6
        back = {k: v.copy() for k, v in values.items()}
        back[kernel][index] -= 1e-6
        numeric[index] = (loss(program.run(moved, inputs)) - loss(program.run(back, inputs))) / 2e-6
    assert np.allclose(exact, numeric, rtol=1e-4, atol=1e-6)


def test_several_operations_of_glue_on_the_layers_own_input_are_followed():
    observation, values, inputs, masks = _traced(ScaledGlue())
    program = replay.build(observation, values, inputs, masks)
    glue = program.of_kind("ops")
    assert glue and [r["op"] for r in glue[-1].event["ops"]] == ["tanh", "multiply", "square", "add"]
    assert np.allclose(program.run(values, inputs), observation["output"], atol=1e-5)


def test_a_forged_operation_between_sublayers_is_refused(gelu_feed_forward):
    observation = copy.deepcopy(gelu_feed_forward[0])
    container = next(e for e in observation["trace"] if e.get("ops") and e["kind"] == "container")
    (gelu,) = [r for r in container["ops"] if r["op"] == "gelu"]
    kwargs = gelu["kwargs"]
    gelu["op"], gelu["kwargs"] = "relu", {}  # claims a relu where a GELU ran, outputs kept
    with pytest.raises(replay.ReplayFailed, match="does not give what the layer recorded"):
        replay.build(observation, *gelu_feed_forward[1:])
    gelu["op"], gelu["kwargs"] = "gelu", kwargs
    gelu["args"][0] = {"event": 99}  # an input said to come from a layer that never ran
    with pytest.raises(replay.ReplayFailed, match="did not recompute before them"):
        replay.build(observation, *gelu_feed_forward[1:])


def test_an_operation_between_sublayers_the_table_leaves_out_is_named_with_its_line():
    observation, values, inputs, masks = _traced(UnlistedGlue())
    with pytest.raises(replay.ReplayFailed, match=r"keras\.ops\.svd \(line \d+ of your file: .*svd"):
        replay.build(observation, values, inputs, masks)


# --------------------------------------------------------------------------- keras.ops' submodules, TensorFlow


class SubmoduleMax(keras.layers.Layer):
    """A masked max pooling written with keras.ops' submodules: the same functions under other names."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, inputs, mask=None):
        keep = keras.ops.numpy.expand_dims(mask, -1)
        floor = keras.ops.numpy.full_like(inputs, -1e9)
        return keras.ops.nn.softmax(keras.ops.numpy.max(keras.ops.numpy.where(keep, inputs, floor), axis=1))

    def compute_mask(self, inputs, mask=None):
        return None


class TopTwo(keras.layers.Layer):
    """The mean of the two largest real values: an operation that gives two tensors, one of them used."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, inputs, mask=None):
        keep = keras.ops.expand_dims(mask, -1)
        moved = keras.ops.transpose(keras.ops.where(keep, inputs, -1e9), (0, 2, 1))
        values, _ = keras.ops.top_k(moved, 2)
        return keras.ops.mean(values, axis=-1)

    def compute_mask(self, inputs, mask=None):
        return None


class TensorFlowMean(keras.layers.Layer):
    """A Keras 2 layer: a masked mean written with TensorFlow's functions."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, inputs, mask=None):
        weights = tf.expand_dims(tf.cast(mask, inputs.dtype), axis=-1)
        total = tf.reduce_sum(inputs * weights, axis=1)
        count = tf.math.reduce_sum(weights, axis=1)
        return tf.nn.relu(tf.math.divide_no_nan(total, count))

    def compute_mask(self, inputs, mask=None):
        return None


class TensorFlowCausal(keras.layers.Layer):
    """TensorFlow's causal mask and a sequence mask, each a few keras.ops calls, and a transposed matmul."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, inputs, mask=None):
        size = tf.shape(inputs)[1]
        causal = tf.linalg.band_part(tf.ones((size, size)), -1, 0)
        lengths = tf.reduce_sum(tf.cast(mask, "int32"), axis=1)
        real = tf.sequence_mask(lengths, maxlen=size, dtype=inputs.dtype)
        scores = tf.matmul(inputs, inputs, transpose_b=True) * causal
        return tf.reduce_sum(scores * real[:, None, :], axis=2)

    def compute_mask(self, inputs, mask=None):
        return None


class TensorFlowExclusive(keras.layers.Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, inputs, mask=None):
        return tf.math.cumsum(inputs, axis=1, exclusive=True)[:, -1]

    def compute_mask(self, inputs, mask=None):
        return None


class DebugLine(keras.layers.Layer):
    """A masked mean with a line whose result nothing uses, of an operation the grader does not follow."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, inputs, mask=None):
        keras.ops.svd(inputs, compute_uv=False)
        weights = keras.ops.cast(keras.ops.expand_dims(mask, -1), inputs.dtype)
        return keras.ops.sum(inputs * weights, axis=1) / keras.ops.sum(weights, axis=1)

    def compute_mask(self, inputs, mask=None):
        return None


def _replayed(layer):
    observation, values, inputs, masks = _traced(layer)
    program = replay.build(observation, values, inputs, masks)
    assert np.allclose(program.run(values, inputs), observation["output"], atol=1e-5)
    return observation, program


def test_functions_reached_through_keras_ops_submodules_are_recorded_under_their_names():
    observation, _ = _replayed(SubmoduleMax())
    assert [r["op"] for r in _ops_event(observation)["ops"]] == ["expand_dims", "full_like", "where", "max", "softmax"]


def test_an_operation_that_gives_two_tensors_is_followed_through_the_one_used():
    observation, program = _replayed(TopTwo())
    event = _ops_event(observation)
    (top,) = [r for r in event["ops"] if r["op"] == "top_k"]
    assert len(top["outputs"]) == 2 and "output" not in top
    assert {"part": [event["ops"].index(top), 0]} in next(r for r in event["ops"] if r["op"] == "mean")["args"]


def test_a_layer_of_tensorflow_functions_is_recorded_as_keras_ops_and_replayed_with_exact_gradients():
    from grader.judge import analysis

    observation, values, inputs, masks = _traced(TensorFlowMean())
    program = replay.build(observation, values, inputs, masks)
    assert np.allclose(program.run(values, inputs), observation["output"], atol=1e-5)
    records = _ops_event(observation)["ops"]
    assert [(r["op"], r.get("via")) for r in records] == [
        ("cast", "tf.cast"), ("expand_dims", "tf.expand_dims"), ("multiply", None), ("sum", "tf.reduce_sum"),
        ("sum", "tf.math.reduce_sum"), ("divide_no_nan", "tf.math.divide_no_nan"), ("relu", "tf.nn.relu")]
    assert records[1]["kwargs"]["axis"] == {"value": -1}
    kernel = next(k for k, v in values.items() if v.shape == (4, 4))
    loss = analysis.weighted_sum(RNG.normal(size=(2, 4)))
    exact = analysis.exact_gradients(lambda vals: program.run(vals, inputs), values, [kernel], loss)[kernel]
    assert np.allclose(exact, _numeric_gradient(program, values, inputs, kernel, loss), rtol=1e-4, atol=1e-6)


def _numeric_gradient(program, values, inputs, key, loss):
    numeric = np.zeros_like(values[key])
    for index in np.ndindex(*values[key].shape):
        moved = {k: v.copy() for k, v in values.items()}
        moved[key][index] += 1e-6
        back = {k: v.copy() for k, v in values.items()}
        back[key][index] -= 1e-6
        numeric[index] = (loss(program.run(moved, inputs)) - loss(program.run(back, inputs))) / 2e-6
    return numeric


def test_tensorflow_functions_of_several_keras_ops_calls_are_written_out_and_followed():
    observation, _ = _replayed(TensorFlowCausal())
    records = _ops_event(observation)["ops"]
    via = [(r["op"], r.get("via")) for r in records if r.get("via")]
    assert ("tril", "tf.linalg.band_part") in via
    assert [name for name, v in via if v == "tf.sequence_mask"] == ["arange", "expand_dims", "less", "cast"]
    assert [name for name, v in via if v == "tf.matmul"] == ["swapaxes", "matmul"]


def test_a_tensorflow_call_with_no_keras_ops_counterpart_is_named_in_the_message():
    observation, values, inputs, masks = _traced(TensorFlowExclusive())
    assert [r["op"] for r in _ops_event(observation)["ops"]][0] == "tf.math.cumsum"
    with pytest.raises(replay.ReplayFailed, match=r"runs tf\.math\.cumsum \(line \d+ of your file: .*exclusive=True.*"
                                                  r"\): the grader follows TensorFlow functions only where"):
        replay.build(observation, values, inputs, masks)


def test_an_operation_whose_result_nothing_uses_is_not_recomputed():
    observation, _ = _replayed(DebugLine())
    assert _ops_event(observation)["ops"][0]["op"] == "svd"


def test_keras_calling_tensorflow_for_an_operation_records_only_the_operation():
    observation, _ = _replayed(MaskedMean())
    assert all("via" not in r for r in _ops_event(observation)["ops"])


# ----------------------------------------------------------------------------- the wrappers, made once
def _wrapped_places():
    from grader.probe.op_tape import OpRecorder

    with OpRecorder(lambda: None) as recorder:
        return {(id(owner), name): getattr(owner, name) for owner, name, _ in recorder._saved}, recorder


def test_every_recorder_puts_back_what_it_wrapped_and_the_next_reuses_the_same_wrappers():
    from grader.probe import op_tape

    before = keras.ops.matmul, keras.ops.nn.softmax, tf.Tensor.__add__, tf.reduce_sum
    first, recorder = _wrapped_places()
    assert (keras.ops.matmul, keras.ops.nn.softmax, tf.Tensor.__add__, tf.reduce_sum) == before
    assert not recorder._saved and not op_tape._RUNNING
    assert len(first) > 500  # keras.ops, its submodules, activations, random, operators, TensorFlow's
    assert all(wrapper is not original for wrapper, original in zip(
        [first[(id(keras.ops), "matmul")], first[(id(tf.Tensor), "__add__")]], [keras.ops.matmul, tf.Tensor.__add__]))
    again, _ = _wrapped_places()
    assert again.keys() == first.keys() and all(again[key] is first[key] for key in first)


def test_a_function_replaced_since_is_wrapped_anew(monkeypatch):
    """Code that put its own function in keras.ops (a student's, say) has that function wrapped."""

    def own_relu(x):
        return keras.activations.relu(x)

    first, _ = _wrapped_places()
    monkeypatch.setattr(keras.ops, "relu", own_relu)
    again, _ = _wrapped_places()
    assert again[(id(keras.ops), "relu")] is not first[(id(keras.ops), "relu")]
    assert again[(id(keras.ops), "relu")].__wrapped__ is own_relu
    assert keras.ops.relu is own_relu


def test_a_recorder_that_fails_to_start_leaves_nothing_wrapped(monkeypatch):
    from grader.probe import op_tape

    before = keras.ops.matmul
    monkeypatch.setattr(op_tape, "tensorflow_functions", lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        op_tape.OpRecorder(lambda: None).__enter__()
    assert keras.ops.matmul is before and not op_tape._RUNNING


# A layer's own weights (add_weight), used in every way a call can take them: as keras.ops arguments, by
# a tensor's operators and a variable's own, through TensorFlow's functions, read with .value, indexed.
WEIGHT_USES = {
    "tensor_times_weight": lambda x, g, w: x * g,
    "weight_times_tensor": lambda x, g, w: g * x,
    "matmul_operator": lambda x, g, w: x @ w,
    "weight_added": lambda x, g, w: x + g,
    "keras_ops_multiply": lambda x, g, w: keras.ops.multiply(x, g),
    "keras_ops_matmul": lambda x, g, w: keras.ops.matmul(x, w),
    "tf_multiply": lambda x, g, w: tf.multiply(x, g),
    "tf_matmul": lambda x, g, w: tf.matmul(x, w),
    "centred_then_scaled": lambda x, g, w: (x - keras.ops.mean(x, axis=-1, keepdims=True)) * g,
    "value_read": lambda x, g, w: g.value * x,
    "weight_indexed": lambda x, g, w: x * g[None, None, :],
    "converted_first": lambda x, g, w: keras.ops.convert_to_tensor(g) * x,
    "scaled_by_a_weights_sum": lambda x, g, w: x * keras.ops.sum(g),  # a number, while gradients are taken
    "a_hand_written_layer_norm": lambda x, g, w: (
        (x - keras.ops.mean(x, axis=-1, keepdims=True))
        * keras.ops.rsqrt(keras.ops.var(x, axis=-1, keepdims=True) + 1e-3) * g + keras.ops.mean(w, axis=-1)[:6]),
}


class OwnWeights(keras.layers.Layer):
    def __init__(self, use, **kwargs):
        super().__init__(**kwargs)
        self.use = use

    def build(self, shape):
        self.g = self.add_weight(shape=(shape[-1],), name="g")
        self.w = self.add_weight(shape=(shape[-1], 3), name="w")

    def call(self, x):
        return WEIGHT_USES[self.use](x, self.g, self.w)


class Holding(keras.layers.Layer):
    def __init__(self, inner, **kwargs):
        super().__init__(**kwargs)
        self.inner = inner

    def call(self, x):
        return self.inner(x)


def _own_weights(use):
    """(observation, values, inputs) of a layer computing with its own weights, as the parent gets it."""
    observation, values = _set_and_traced(Holding(OwnWeights(use)), X.astype("float32"))
    return observation, values, {"x": X}


@pytest.mark.parametrize("use", sorted(WEIGHT_USES))
def test_a_layers_own_weights_are_followed_through_its_operations_with_exact_gradients(use):
    from grader.judge import analysis

    observation, values, inputs = _own_weights(use)
    program = replay.build(observation, values, inputs)
    assert np.allclose(program.run(values, inputs), observation["output"], atol=1e-4)
    loss = analysis.weighted_sum(RNG.normal(size=observation["output"].shape))
    for key in values:
        exact = analysis.exact_gradients(lambda vals: program.run(vals, inputs), values, [key], loss)[key]
        assert np.allclose(exact, _numeric_gradient(program, values, inputs, key, loss), rtol=1e-4, atol=1e-5), key


def _weight_sources(observation):
    event = _ops_event(observation)
    return [argument for record in event["ops"] for argument in record["args"]
            if isinstance(argument, dict) and str(argument.get("source", "")).startswith("weight:")]


def test_a_weight_the_parent_never_set_is_refused():
    observation, values, inputs = _own_weights("tensor_times_weight")
    for argument in _weight_sources(observation):
        argument["source"] = "weight:999"
    with pytest.raises(replay.ReplayFailed, match="did not exist when the layer was built"):
        replay.build(observation, values, inputs)


def test_an_operation_claimed_on_another_weight_is_refused():
    observation, values, inputs = _own_weights("keras_ops_matmul")
    other = next(k for k, v in values.items() if v.ndim == 1)
    for argument in _weight_sources(observation):
        argument["source"] = f"weight:{other}"
    with pytest.raises(replay.ReplayFailed):
        replay.build(observation, values, inputs)
