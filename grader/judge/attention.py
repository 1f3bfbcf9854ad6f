"""Finds the attention a verified call computes with operations of its own, by what they do.

A student may write multi-head attention by hand: projections of the query, the keys and the
values, then operations (reshapes into heads, a scaled dot product, a mask added to the scores, a
softmax, the weighted sum, the heads joined again, or ``keras.ops.dot_product_attention``), then a
projection of the joined heads. The replay follows such a call step by step (``replay``), but its
steps are projection layers and operations, not the ``MultiHeadAttention`` the checks look for.
This module finds, in the verified program, every step of operations that takes projections — three
Dense or EinsumDense projections, or one wider projection (``Dense(3 * width)``) whose parts the
operations split out — and whose result a projection layer takes, and says what it does, from the
parent's own numbers:

- which part of which projection each role is: the operations that only move numbers (reshapes,
  transposes, splits, indexing) are run on the projections' element numbers, and the tensors the
  other operations take say which columns went where (``_parts``);
- which projection is the query, the key and the value, and how many heads: the combination
  under which the operations give exactly the scaled dot-product attention of the projections;
- which keys each query sees: the operations run again with one key position's value changed
  at a time, and a query whose result changes sees that key — what the attention does to padded
  keys, however the mask was written (a boolean ``where``, ``scores += (1 - mask) * -1e9``, a
  ``mask`` or ``bias`` of ``dot_product_attention``);
- if no combination gives the scaled dot-product attention, why not, as far as the grader can
  tell (a scale other than 1/sqrt(key_dim), a softmax over the queries).

Each group found becomes an attention step (``replay.Step`` of kind "attention") standing for
its projection and operation steps: its projection kernels and biases as ``ops.View`` of the
projections' variables (or of their columns) in the shapes MultiHeadAttention gives them, the mask
it applies, its heads. The program keeps computing with its own steps; the attention steps are what
the checks read.
"""

from __future__ import annotations

import itertools

import numpy as np

from . import budget, operations, ops, replay, tape

PROJECTIONS = ("dense", "einsum_dense")  # a projection to (…, width), or to (…, heads, key_dim)
MAX_CANDIDATES = 8  # steps of operations examined per call: a layer holds one or two attentions
MAX_KEYS = 64
MAX_WIDTH = 4096  # of the joined heads: no exercise's attention is a hundredth as wide


def find(program: replay.Program, values: dict, inputs: dict) -> list:
    """The attention steps the program computes with operations of its own (possibly none); the
    program's ``views`` are set to them with the steps each stands for."""
    _, outputs = program.run(values, inputs, keep=True)
    consumers = _consumers(program)
    views = []
    for glue in [s for s in program.steps if s.kind == "ops"][:MAX_CANDIDATES]:
        try:
            found = _attention_at(program, glue, consumers, outputs, inputs, values)
        except budget.TooLarge:
            raise
        except (replay.ReplayFailed, ValueError, IndexError, KeyError):
            found = None  # operations of another shape than an attention's
        if found is not None:
            views.append(found)
    program.views = views
    return [step for step, _ in views]


def _consumers(program: replay.Program) -> dict:
    """{step index: the steps whose inputs are exactly that step's output}."""
    found: dict = {}
    for step in program.steps:
        for expr in step.inputs.values():
            index = _single_step(expr)
            if index is not None:
                found.setdefault(index, []).append(step)
    return found


def _single_step(expr) -> int | None:
    """The index of the step whose output ``expr`` is, unchanged; None for anything else."""
    if isinstance(expr, replay.Expr) and len(expr.terms) == 1 and expr.terms[0][0] == "step" and \
            not expr.relu and not expr.mask and expr.scale == 1.0:
        return expr.terms[0][1]
    return None


def _attention_at(program, glue, consumers, outputs, inputs, values):
    projections = {}
    for name, expr in glue.inputs.items():
        index = _single_step(expr)
        if index is not None and program.steps[index].kind in PROJECTIONS:
            projections[name] = program.steps[index]
    if not projections:
        return None
    joined = [s for s in consumers.get(glue.index, []) if s.kind in PROJECTIONS]
    if len(joined) != 1:
        return None
    output_step = joined[0]
    arguments = {name: _value(expr, outputs, inputs, program.masks) for name, expr in glue.inputs.items()}
    made = np.asarray(outputs[("step", glue.index)], dtype=np.float64)
    if made.ndim not in (3, 4) or any(np.ndim(arguments[name]) not in (3, 4) for name in projections):
        return None
    result = _joined(made)
    width = result.shape[-1]
    joined_width = _input_width(np.shape(values[output_step.params["kernel"]]), made.ndim)
    if width > MAX_WIDTH or joined_width != width:
        return None
    if len(projections) == 3 and len({s.index for s in projections.values()}) == 3 and \
            all(_joined(arguments[name]).shape[-1] == width for name in projections):
        parts = {name: Part(name, None) for name in projections}  # three projections, one for each role
    else:
        parts = _parts(glue, projections, arguments, width)  # one projection holding several roles
    if len(parts) != 3:
        return None
    virtual = {name: part.of(arguments) for name, part in parts.items()}
    shapes = {name: tensor.shape for name, tensor in virtual.items()}
    if any(shape[-1] != width for shape in shapes.values()):
        return None
    preferred = next((part.heads for part in parts.values() if part.heads), None) or \
        _heads_by_shapes(glue, projections, width, arguments)
    combinations = []  # (query, key, value, the keys each query sees) under each choice of the value
    for value_name in parts:
        seen = _visible_keys(glue, arguments, parts[value_name], made)
        if seen is None:
            continue
        for query_name, key_name in itertools.permutations([n for n in parts if n != value_name]):
            if shapes[query_name][:2] == result.shape[:2] and shapes[key_name] == shapes[value_name]:
                combinations.append((query_name, key_name, value_name, seen))
    found = _first_match(combinations, virtual, result, width, preferred)
    if found is None:
        return None
    computes, diagnosis, heads, query_name, key_name, value_name, seen = found
    roles = {"query": parts[query_name], "key": parts[key_name], "value": parts[value_name]}
    steps = {role: projections[part.source] for role, part in roles.items()}
    step = _step(roles, steps, output_step, glue, heads, width, seen, values, computes, diagnosis)
    return step, {glue.index, output_step.index} | {s.index for s in steps.values()}


class Part:
    """What one role's projection is: the output of the projection the operations receive as
    ``source``, or the columns ``columns`` of it (in the order the operations arrange them into
    heads), ``heads`` the heads they arrange it into where that is known."""

    def __init__(self, source: str, columns, heads: int | None = None):
        self.source, self.columns, self.heads = source, columns, heads

    def of(self, arguments: dict) -> np.ndarray:
        """The role's (batch, positions, width) projection."""
        joined = _joined(arguments[self.source])
        return joined if self.columns is None else joined[..., list(self.columns)]

    def changed(self, arguments: dict, position: int, amount) -> np.ndarray:
        """The source with the role's part changed at one position by ``amount`` (its shape)."""
        source = np.asarray(arguments[self.source], dtype=np.float64).copy()
        if self.columns is None:
            source[:, position] += np.reshape(amount, source.shape[2:])
        else:
            source[:, position, list(self.columns)] += amount
        return source


# operations that only move numbers around: the projections' columns can be followed through them
LAYOUT = frozenset({"reshape", "transpose", "swapaxes", "moveaxis", "split", "array_split", "getitem", "get_item",
                    "squeeze", "expand_dims", "unstack", "cast", "convert_to_tensor", "copy", "slice"})


def _parts(glue, projections: dict, arguments: dict, width: int) -> dict:
    """The parts of wider projections (one Dense of three times the width, split into the query, the
    key and the value) the operations use as a (batch, positions, width) tensor each: found by running
    the operations that only move numbers (``LAYOUT``) on the projections' element numbers, and
    reading where each number went in the tensors the other operations take."""
    event = glue.constants["tape"]
    records = event.get("ops") or []
    codes, offset, origin = {}, 0, {}
    for name in projections:
        shape = np.shape(arguments[name])
        if len(shape) != 3 or shape[0] * shape[1] * shape[2] > 4 * MAX_WIDTH * MAX_KEYS:
            continue
        size = int(np.prod(shape))
        codes[name] = np.arange(offset, offset + size, dtype=np.float64).reshape(shape)
        origin[name] = (offset, shape)
        offset += size
    if not codes:
        return {}
    results: list = []  # at each position, the coded tensor a layout operation gave, else None
    for record in records:
        results.append(_layout(record, codes, results))
    taken = []  # the coded tensors the other operations take
    for position, record in enumerate(records):
        if results[position] is not None:
            continue
        for argument in list(record["args"]) + list(record["kwargs"].values()):
            value = _coded(argument, codes, results)
            if isinstance(value, np.ndarray):
                taken.append(value)
    found: dict = {}
    for tensor in taken:
        part = _decode(tensor, origin, width)
        if part is not None and (part.source, part.columns) not in {(p.source, p.columns) for p in found.values()}:
            found[f"part {len(found)}"] = part
    return found


def _coded(argument, codes: dict, results: list):
    """The coded tensor an argument is, if it is one (a projection's, or a layout operation's result)."""
    if not isinstance(argument, dict) or len(argument) != 1:
        return None
    (tag, value), = argument.items()
    if tag == "source":
        return codes.get(value)
    if tag == "op" and isinstance(value, int) and 0 <= value < len(results):
        made = results[value]
        return made if isinstance(made, np.ndarray) else None
    if tag == "part" and isinstance(value, list) and len(value) == 2 and 0 <= value[0] < len(results):
        made = results[value[0]]
        return made[value[1]] if isinstance(made, tuple) and value[1] < len(made) else None
    return None


def _layout(record: dict, codes: dict, results: list):
    """A layout operation's result on coded tensors (a tuple for one that gives several); None for
    any other operation, or one that takes no coded tensor."""
    if record.get("op") not in LAYOUT:
        return None
    arguments = list(record["args"]) + list(record["kwargs"].values())
    if not arguments or _coded(arguments[0], codes, results) is None:
        return None
    def resolved(argument):
        coded = _coded(argument, codes, results)
        return coded if coded is not None else tape.resolve(argument, {}, results)

    try:
        args = [resolved(a) for a in record["args"]]
        kwargs = {k: resolved(v) for k, v in record["kwargs"].items()}
        if record["op"] in ("getitem", "get_item") and len(args) == 2 and isinstance(args[1], list):
            args[1] = tuple(args[1])
        if record["op"] == "cast":
            return np.asarray(args[0], dtype=np.float64)
        made = operations.apply(record["op"], args, kwargs)
    except budget.TooLarge:
        raise
    except (replay.ReplayFailed, ValueError, TypeError, IndexError, KeyError):
        return None
    if isinstance(made, (tuple, list)):
        return tuple(np.asarray(m, dtype=np.float64) for m in made)
    return np.asarray(made, dtype=np.float64)


def _decode(tensor: np.ndarray, origin: dict, width: int) -> Part | None:
    """The part of one projection a coded tensor holds, as (batch, positions, width) in the order its
    other axes give (heads first, then each head's columns); None unless it holds, for every batch
    entry and position, the same ``width`` columns of one projection."""
    codes = np.asarray(tensor)
    if codes.ndim < 3 or codes.size == 0 or np.any(codes != np.trunc(codes)):
        return None
    for name, (offset, shape) in origin.items():
        local = codes - offset
        if np.all((local >= 0) & (local < np.prod(shape))):
            break
    else:
        return None
    local = local.astype(np.int64)
    batch, position, column = local // (shape[1] * shape[2]), (local // shape[2]) % shape[1], local % shape[2]
    axes = []
    for wanted in (batch, position):
        axis = next((a for a in range(codes.ndim) if a not in axes and codes.shape[a] == (shape[0] if not axes else
                     shape[1]) and np.all(wanted == np.reshape(np.arange(codes.shape[a]),
                                                              [-1 if d == a else 1 for d in range(codes.ndim)]))),
                    None)
        if axis is None:
            return None
        axes.append(axis)
    rest = [a for a in range(codes.ndim) if a not in axes]
    ordered = np.transpose(column, axes + rest).reshape(shape[0], shape[1], -1)
    if ordered.shape[-1] != width or np.any(ordered != ordered[:1, :1]):
        return None
    heads = codes.shape[rest[0]] if len(rest) == 2 else None
    return Part(name, tuple(int(c) for c in ordered[0, 0]), heads)


def _first_match(combinations: list, arguments: dict, result: np.ndarray, width: int, preferred):
    """(computes, diagnosis, heads, query, key, value, the keys each query sees): the first choice of
    roles and heads under which the operations' result is scaled dot-product attention; else the first
    under which it is one of the known slips (``SLIPS``), with its words; else the nearest attention,
    the heads the operations reshape into counted first. None without any choice to make."""
    heads_order = sorted(_divisors(width), key=lambda h: h != preferred)
    nearest = None
    for options, diagnosis in [({}, None)] + SLIPS:
        for query_name, key_name, value_name, seen in combinations:
            query, key, value = (np.asarray(arguments[n], dtype=np.float64) for n in (query_name, key_name, value_name))
            for heads in heads_order:
                made = dot_product_attention(query, key, value, heads, seen, **options)
                if replay.close(made, result):
                    return not options, diagnosis, heads, query_name, key_name, value_name, seen
                if not options:
                    rank = (heads == preferred, -float(np.max(np.abs(made - result))))
                    if nearest is None or rank > nearest[0]:
                        nearest = (rank, (False, None, heads, query_name, key_name, value_name, seen))
    return None if nearest is None else nearest[1]


def _joined(tensor) -> np.ndarray:
    """A (batch, positions, width) tensor, or a (batch, positions, heads, key_dim) one with its heads
    joined, as float64 (batch, positions, heads * key_dim)."""
    tensor = np.asarray(tensor, dtype=np.float64)
    return tensor if tensor.ndim == 3 else np.reshape(tensor, tensor.shape[:2] + (-1,))


def _input_width(kernel_shape: tuple, made_rank: int) -> int:
    """How wide a joined input the output projection takes: a Dense kernel's rows, an EinsumDense
    kernel's (heads, key_dim, out) first two axes taken together where the heads arrive apart."""
    if made_rank == 4 and len(kernel_shape) == 3:
        return int(kernel_shape[0] * kernel_shape[1])
    return int(kernel_shape[0]) if kernel_shape else -1


def _value(expr, outputs, inputs, masks):
    if isinstance(expr, tuple):
        return expr[1]
    return replay.evaluate(expr, outputs, inputs, masks)


def _visible_keys(glue, arguments: dict, part: Part, result: np.ndarray) -> np.ndarray | None:
    """(batch, queries, keys) booleans: whether changing the value vector at a key changes a query's
    result, found by running the operations again with one key's value changed at a time."""
    value = part.of(arguments)
    batch, keys = value.shape[:2]
    if keys > MAX_KEYS or value.shape[0] != result.shape[0]:
        return None
    scale = max(1.0, float(np.max(np.abs(value)))) if value.size else 1.0
    rng = np.random.default_rng(0)
    seen = np.zeros((batch, result.shape[1], keys), dtype=bool)
    source_size = int(np.size(arguments[part.source]))
    for position in range(keys):
        budget.charge(2 * source_size + result.size, source_size + result.size)
        changed = part.changed(arguments, position, scale * (1.0 + rng.random(value.shape[2:])))
        try:
            again = tape.run(glue.constants["tape"], dict(arguments, **{part.source: changed}))
        except budget.TooLarge:
            raise
        except replay.ReplayFailed:
            return None
        again = np.asarray(again, dtype=np.float64)
        if again.shape != result.shape:
            return None
        seen[:, :, position] = np.max(np.abs(_joined(again) - _joined(result)), axis=-1) > 1e-6 * scale
    return seen


# what an attention written by hand most often computes instead: (options of dot_product_attention, the words)
SLIPS = [
    ({"scale": 1.0}, "the scores are not divided by sqrt(key_dim)"),
    ({"scale": "key_dim"}, "the scores are divided by key_dim, not by sqrt(key_dim)"),
    ({"scale": "width"}, "the scores are divided by the square root of the whole width, not of one head's key_dim"),
    ({"axis": -2}, "the softmax runs over the queries, not over the keys"),
]


def _heads_by_shapes(glue, projections: dict, width: int, arguments: dict) -> int | None:
    """The number of heads the projections give or the operations split a projection into: a
    projection's output of shape (batch, positions, heads, key_dim), or the reshape of one to
    (batch, positions, heads, width // heads), if there is one."""
    for name in projections:
        if np.ndim(arguments[name]) == 4:
            return int(np.shape(arguments[name])[2])
    sources = [{"source": name} for name in projections]
    for record in glue.constants["tape"].get("ops") or []:
        reshaped = (record.get("args") or [None])[0] if record.get("args") else (record.get("kwargs") or {}).get("x")
        output = record.get("output")
        if record.get("op") == "reshape" and reshaped in sources and isinstance(output, np.ndarray) and \
                output.ndim == 4 and output.shape[2] * output.shape[3] == width:
            return int(output.shape[2])
    return None


def _divisors(width: int) -> list[int]:
    return [h for h in range(1, width + 1) if width % h == 0]


def dot_product_attention(query, key, value, heads: int, visible, scale=None, axis: int = -1):
    """Scaled dot-product attention over ``heads`` heads of (B, T, W) query and (B, S, W) key and value,
    each query seeing the keys ``visible`` (B, T, S) says; the heads joined again to (B, T, W). ``scale``
    (1/sqrt(key_dim) unless given: a number, "key_dim" for 1/key_dim, "width" for 1/sqrt(W)) and
    ``axis`` (of the scores (B, heads, T, S)) give the slips of ``SLIPS``."""
    batch, queries, width = np.shape(query)
    keys = np.shape(key)[1]
    depth = width // heads
    budget.charge(6 * batch * heads * queries * keys * depth, batch * heads * queries * keys)
    q = np.reshape(query, (batch, queries, heads, depth))
    k = np.reshape(key, (batch, keys, heads, depth))
    v = np.reshape(value, (batch, keys, heads, depth))
    factor = {None: 1.0 / np.sqrt(depth), "key_dim": 1.0 / depth, "width": 1.0 / np.sqrt(width)}.get(scale, scale)
    scores = np.einsum("btnk,bsnk->bnts", q, k) * factor
    scores = np.where(np.asarray(visible, dtype=bool)[:, None], scores, ops.MASKED)
    weights = ops.softmax(scores, axis=axis)
    return np.reshape(np.einsum("bnts,bsnv->btnv", weights, v), (batch, queries, width))


def _step(roles: dict, steps: dict, output_step, glue, heads: int, width: int, seen, values: dict, computes: bool,
          diagnosis):
    depth = width // heads
    params = {}
    for role, part in roles.items():
        step = steps[role]
        kernel, bias = step.params["kernel"], step.params.get("bias")
        rows = np.shape(values[kernel])[0]
        params[f"{role}_kernel"] = ops.View(kernel, (rows, heads, depth), part.columns, role)
        params[f"{role}_bias"] = None if bias is None else ops.View(bias, (heads, depth), part.columns, role)
    kernel = output_step.params["kernel"]
    params["output_kernel"] = ops.View(kernel, (heads, depth, np.shape(values[kernel])[-1]))
    params["output_bias"] = output_step.params.get("bias")
    recorded = {role: next(iter((step.event.get("inputs") or {}).values()), None) for role, step in steps.items()}
    event = {"index": steps["query"].event["index"], "layer": glue.event.get("index"),
             "class": str(glue.event.get("class") or "Layer"), "kind": "attention", "inputs": recorded}
    constants = {"mask": seen, "causal": False, "num_heads": heads, "key_dim": depth, "zero_masked": False,
                 "written_out": True, "computes": computes, "diagnosis": diagnosis}
    inputs = {role: next(iter(step.inputs.values())) for role, step in steps.items()}
    return replay.Step(output_step.index, event, "attention", params, constants, inputs)
