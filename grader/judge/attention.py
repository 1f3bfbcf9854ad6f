"""Finds the attention a verified call computes with operations of its own, by what they do.

A student may write multi-head attention by hand: Dense projections of the query, the keys and
the values, then operations (reshapes into heads, a scaled dot product, a mask added to the
scores, a softmax, the weighted sum, the heads joined again), then a Dense on the joined heads.
The replay follows such a call step by step (``replay``), but its steps are Dense layers and
operations, not the ``MultiHeadAttention`` the checks look for. This module finds, in the
verified program, every group of steps that has that shape — three Dense projections whose
outputs only a step of operations combines, and a Dense that takes that step's result — and
says what it does, from the parent's own numbers:

- which projection is the query, the key and the value, and how many heads: the combination
  under which the operations give exactly the scaled dot-product attention of the projections;
- which keys each query sees: the operations run again with one key position's value changed
  at a time, and a query whose result changes sees that key — what the attention does to padded
  keys, however the mask was written (a boolean ``where``, ``scores += (1 - mask) * -1e9``);
- if no combination gives the scaled dot-product attention, why not, as far as the grader can
  tell (a scale other than 1/sqrt(key_dim), a softmax over the queries).

Each group found becomes an attention step (``replay.Step`` of kind "attention") standing for
its Dense and operation steps: its projection kernels and biases as ``ops.View`` of the Dense
variables in the shapes MultiHeadAttention gives them, the mask it applies, its heads. The
program keeps computing with its own steps; the attention steps are what the checks read.
"""

from __future__ import annotations

import itertools

import numpy as np

from . import budget, ops, replay, tape

PROJECTIONS = ("dense",)
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
    if len(projections) != 3 or len({s.index for s in projections.values()}) != 3:
        return None
    joined = [s for s in consumers.get(glue.index, []) if s.kind in PROJECTIONS]
    if len(joined) != 1:
        return None
    output_step = joined[0]
    arguments = {name: _value(expr, outputs, inputs, program.masks) for name, expr in glue.inputs.items()}
    result = np.asarray(outputs[("step", glue.index)], dtype=np.float64)
    shapes = {name: np.shape(arguments[name]) for name in projections}
    if result.ndim != 3 or any(len(shape) != 3 for shape in shapes.values()):
        return None
    width = result.shape[-1]
    joined_width = np.shape(values[output_step.params["kernel"]])[0]
    if width > MAX_WIDTH or joined_width != width or any(shape[-1] != width for shape in shapes.values()):
        return None
    preferred = _heads_by_shapes(glue, projections, width)
    combinations = []  # (query, key, value, the keys each query sees) under each choice of the value
    for value_name in projections:
        seen = _visible_keys(glue, arguments, value_name, result)
        if seen is None:
            continue
        for query_name, key_name in itertools.permutations([n for n in projections if n != value_name]):
            if np.shape(arguments[query_name])[:2] == result.shape[:2] and \
                    np.shape(arguments[key_name]) == np.shape(arguments[value_name]):
                combinations.append((query_name, key_name, value_name, seen))
    found = _first_match(combinations, arguments, result, width, preferred)
    if found is None:
        return None
    computes, diagnosis, heads, query_name, key_name, value_name, seen = found
    roles = {"query": projections[query_name], "key": projections[key_name], "value": projections[value_name]}
    step = _step(roles, output_step, glue, heads, width, seen, values, computes, diagnosis)
    return step, {glue.index, output_step.index} | {s.index for s in roles.values()}


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


def _value(expr, outputs, inputs, masks):
    if isinstance(expr, tuple):
        return expr[1]
    return replay.evaluate(expr, outputs, inputs, masks)


def _visible_keys(glue, arguments: dict, value_name: str, result: np.ndarray) -> np.ndarray | None:
    """(batch, queries, keys) booleans: whether changing the value vector at a key changes a query's
    result, found by running the operations again with one key's value changed at a time."""
    value = np.asarray(arguments[value_name], dtype=np.float64)
    batch, keys = value.shape[:2]
    if keys > MAX_KEYS or value.shape[0] != result.shape[0]:
        return None
    scale = max(1.0, float(np.max(np.abs(value)))) if value.size else 1.0
    rng = np.random.default_rng(0)
    seen = np.zeros((batch, result.shape[1], keys), dtype=bool)
    for position in range(keys):
        budget.charge(2 * value.size + result.size, value.size + result.size)
        changed = value.copy()
        changed[:, position] += scale * (1.0 + rng.random(value.shape[2:]))
        try:
            again = tape.run(glue.constants["tape"], dict(arguments, **{value_name: changed}))
        except budget.TooLarge:
            raise
        except replay.ReplayFailed:
            return None
        again = np.asarray(again, dtype=np.float64)
        if again.shape != result.shape:
            return None
        seen[:, :, position] = np.max(np.abs(again - result), axis=-1) > 1e-6 * scale
    return seen


# what an attention written by hand most often computes instead: (options of dot_product_attention, the words)
SLIPS = [
    ({"scale": 1.0}, "the scores are not divided by sqrt(key_dim)"),
    ({"scale": "key_dim"}, "the scores are divided by key_dim, not by sqrt(key_dim)"),
    ({"scale": "width"}, "the scores are divided by the square root of the whole width, not of one head's key_dim"),
    ({"axis": -2}, "the softmax runs over the queries, not over the keys"),
]


def _heads_by_shapes(glue, projections: dict, width: int) -> int | None:
    """The number of heads the operations split a projection into: the reshape of a projection's
    output to (batch, positions, heads, width // heads), if there is one."""
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


def _step(roles: dict, output_step, glue, heads: int, width: int, seen, values: dict, computes: bool, diagnosis):
    depth = width // heads
    params = {}
    for role, step in roles.items():
        kernel, bias = step.params["kernel"], step.params.get("bias")
        params[f"{role}_kernel"] = ops.View(kernel, (np.shape(values[kernel])[0], heads, depth))
        params[f"{role}_bias"] = None if bias is None else ops.View(bias, (heads, depth))
    kernel = output_step.params["kernel"]
    params["output_kernel"] = ops.View(kernel, (heads, depth, np.shape(values[kernel])[-1]))
    params["output_bias"] = output_step.params.get("bias")
    recorded = {role: next(iter((step.event.get("inputs") or {}).values()), None) for role, step in roles.items()}
    event = {"index": roles["query"].event["index"], "layer": glue.event.get("index"),
             "class": str(glue.event.get("class") or "Layer"), "kind": "attention", "inputs": recorded}
    constants = {"mask": seen, "causal": False, "num_heads": heads, "key_dim": depth, "zero_masked": False,
                 "written_out": True, "computes": computes, "diagnosis": diagnosis}
    inputs = {role: next(iter(step.inputs.values())) for role, step in roles.items()}
    return replay.Step(output_step.index, event, "attention", params, constants, inputs)
