"""Replays a traced call of the student's layer from numbers the parent chose.

The child reports, for one call of the layer, every Keras layer the call ran
(its class, its weights, its input and output tensors) and the call's output.
None of that is trusted. The replay rebuilds the computation as a small
program, step by step, in float64:

- each step is a Keras layer the grader knows (``ops``): its output is
  recomputed from its recorded inputs and the weight values the *parent* drew,
  and must equal the recorded output;
- each recorded input must be traced back to the call's own (secret) inputs
  or to earlier steps' outputs: as one of them, a sum of two (a residual),
  optionally through a relu or multiplied by the call's padding mask;
- the call's output must be traced back the same way, and running the whole
  program from the call's inputs must give it.

A program that passes is the student's computation, made of steps the parent
can run itself: its output, and through autograd its exact gradients, are
the parent's own numbers. A made-up trace cannot pass without computing what
it claims, on inputs and weights chosen after the submission loaded.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from ..protocol import limits, records
from . import budget, ops, tape

# kinds the child reports (grader/probe/tracing.py), and what the replay does with them
LEAF_KINDS = ("attention", "dense", "conv", "einsum_dense", "norm", "embedding", "identity", "activation", "relu",
              "add", "average_pool", "max_pool", "flatten")
OTHER_KINDS = ("container", "opaque")
MAX_EVENTS = 5000
MAX_EPSILON = 0.1
MAX_GLUE_DEPTH = 8  # layers of the student's own, one inside another, through which a tensor is followed
MATCH_OVERHEAD = 5_000  # what trying one candidate costs in Python, in element operations, at the least


ReplayFailed = budget.ReplayFailed  # the traced call cannot be rebuilt from steps the grader can run


@dataclass(frozen=True)
class Expr:
    """How a recorded tensor arises from earlier ones: a sum of one or two terms, then an optional
    relu, then an optional multiplication by a (batch, seq) mask."""

    terms: tuple  # ("input", name), ("step", index) or ("derived", index): an earlier matched sum
    relu: bool = False
    mask: str | None = None
    scale: float = 1.0  # a constant factor, as in x * sqrt(embed_dim)

    def describe(self, names: dict) -> str:
        text = " + ".join(names.get(t, str(t)) for t in self.terms)
        if self.relu:
            text = f"relu({text})"
        if self.mask:
            text = f"({text}) * {self.mask}"
        if self.scale != 1.0:
            text = f"{self.scale:.4g} * ({text})"
        return text


@dataclass
class Step:
    index: int  # position in the program
    event: dict
    kind: str
    params: dict  # role -> variable key (str) or None
    constants: dict
    inputs: dict  # argument name -> Expr, or ("ids", array) for integer inputs


@dataclass
class Program:
    steps: list[Step]
    output: Expr
    float_inputs: tuple[str, ...]
    masks: dict[str, np.ndarray]
    derived: list[Expr] = field(default_factory=list)  # sums matched earlier, reusable as terms
    # steps found by what a group of steps computes (``attention``), each with the indices of the steps
    # it stands for: what the checks read, while the program computes with its own steps
    views: list = field(default_factory=list)

    def run(self, values: dict, inputs: dict, keep: bool = False):
        """The output (and, with ``keep``, every step's output) for these weight values and inputs.
        ``values`` may hold autograd boxes: the result is then differentiable in them."""
        outputs: dict = {"derived": self.derived}
        for step in self.steps:
            outputs[("step", step.index)] = _apply(
                step, values, lambda _name, expr: evaluate(expr, outputs, inputs, self.masks))
        result = evaluate(self.output, outputs, inputs, self.masks)
        return (result, outputs) if keep else result

    def of_kind(self, *kinds: str) -> list[Step]:
        """The steps of these kinds in the order the call ran them, a group of steps found to compute
        one thing (``views``) counted as that one step, where its first step ran."""
        stands_for = {index: view for view, indices in self.views for index in indices}
        chosen, placed = [], set()
        for step in self.steps:
            view = stands_for.get(step.index)
            if view is None:
                chosen.append(step)
            elif id(view) not in placed:
                placed.add(id(view))
                chosen.append(view)
        return [s for s in chosen if s.kind in kinds]

    def sources(self, step: Step) -> set[str]:
        """The inputs of the call (by name) that the step's inputs trace back to."""
        found: set[str] = set()
        for expr in step.inputs.values():
            if isinstance(expr, Expr):
                found |= self.expr_sources(expr)
        return found

    def expr_sources(self, expr: Expr) -> set[str]:
        found: set[str] = set()
        for kind, ref in expr.terms:
            if kind == "input":
                found.add(ref)
            elif kind == "derived":
                found |= self.expr_sources(self.derived[ref])
            else:
                found |= self.sources(self.steps[ref])
        return found

    def output_depends_on(self, step: Step) -> bool:
        """Whether the program's output traces back to ``step``."""

        def reaches(expr: Expr) -> bool:
            for kind, ref in expr.terms:
                if kind == "step" and (ref == step.index or any(
                        isinstance(e, Expr) and reaches(e) for e in self.steps[ref].inputs.values())):
                    return True
                if kind == "derived" and reaches(self.derived[ref]):
                    return True
            return False

        return reaches(self.output)


# --------------------------------------------------------------------------- building


def build(observation: dict, values: dict[str, np.ndarray], inputs: dict[str, np.ndarray],
          masks: dict[str, np.ndarray] | None = None) -> Program:
    """Rebuild and verify the traced call ``observation`` ({"trace", "output"}) made on ``inputs``
    (the parent's own arrays, by argument name) with the parent's weight ``values``. Raises
    ReplayFailed, saying why, when it cannot."""
    masks = {k: np.asarray(v, dtype=bool) for k, v in (masks or {}).items()}
    output = observation.get("output")
    if not isinstance(output, np.ndarray):
        raise ReplayFailed("the call did not return a tensor")
    if output.dtype.kind != "f" or not np.all(np.isfinite(output)):
        raise ReplayFailed("the call's output is not finite floating-point numbers")
    events = validate_trace(observation.get("trace"))
    float_inputs = {k: np.asarray(v, dtype=np.float64) for k, v in inputs.items()
                    if np.asarray(v).dtype.kind == "f"}
    terms: dict = {("input", name): value for name, value in float_inputs.items()}
    names = {("input", name): name for name in float_inputs}
    steps: list[Step] = []
    derived: list[Expr] = []
    step_of_event: dict[int, int] = {}  # trace event index -> its step's index
    leaves = _leaves(events)
    for event in leaves:
        kind = event["kind"]
        label = _label(event)
        if kind == "opaque":
            if "ops" not in event:
                continue  # a computation the grader cannot replay: fine, unless something uses its output
            kind = "ops"  # a layer of the student's own, recomputed from the operations it ran
        if event.get("raised"):
            raise ReplayFailed(f"{label} raised {event['raised']}")
        params = _params(event, values, label) if kind != "ops" else {}
        constants = _constants(event, label) if kind != "ops" else {"tape": event}
        if kind == "average_pool" and constants.get("mask") is not None:
            # the claimed mask only names which of the parent's own masks the pooling used
            constants = dict(constants, mask=_parent_mask(constants["mask"], masks, label))
        recorded = event.get("inputs")
        if not isinstance(recorded, dict) or not recorded:
            raise ReplayFailed(f"{label} has no recorded inputs")
        step_inputs: dict = {}
        known: dict = {}  # the values of the inputs of a custom layer's operations, as the parent has them
        if kind == "ops":
            received = event.get("masks") if isinstance(event.get("masks"), dict) else {}
            for name in received:
                step_inputs[str(name)], known[str(name)] = _argument(events, event, str(name), label, steps, terms,
                                                                     masks, names, step_of_event, 0, values)
        for name, tensor in recorded.items():
            if not isinstance(tensor, np.ndarray):
                raise ReplayFailed(f"{label}'s argument {name} is not a tensor")
            if kind == "embedding" and (tensor.dtype.kind in "iub" or _integral(tensor)):
                # ids as ints, or as floats Embedding casts back (a float keras.Input)
                step_inputs[name] = ("ids", _ids(tensor, params, values, label))
            else:
                try:
                    expr = _match(tensor.astype(np.float64), terms, masks, names, f"the input {name!r} of {label}")
                except ReplayFailed:
                    made = (event.get("input_ops") or {}).get(name) if isinstance(event.get("input_ops"), dict) \
                        else None
                    if made is None:
                        raise
                    glue = _glue_step(events, event, name, made, steps, terms, masks, names, step_of_event,
                                      values=values)
                    steps.append(glue)
                    terms[("step", glue.index)] = glue.event["output"].astype(np.float64)
                    names[("step", glue.index)] = _label(glue.event)
                    expr = Expr((("step", glue.index),))
                    if not close(terms[("step", glue.index)], tensor.astype(np.float64)):
                        raise ReplayFailed(f"the input {name!r} of {label} is not what the operations that made it "
                                           "gave") from None
                step_inputs[name] = expr
                if len(expr.terms) > 1 or expr.relu or expr.mask or expr.scale != 1.0:
                    # a residual sum (say) that later steps may build on: x + a, then (x + a) + f
                    derived.append(expr)
                    terms[("derived", len(derived) - 1)] = tensor.astype(np.float64)
                    names[("derived", len(derived) - 1)] = expr.describe(names)
        if kind == "ops":
            params = _tape_weights(event, values, label)
        step = Step(len(steps), event, kind, params, constants, step_inputs)
        recorded_output = event.get("output")
        if not isinstance(recorded_output, np.ndarray) or recorded_output.dtype.kind != "f":
            raise ReplayFailed(f"{label} did not return a floating-point tensor")
        if kind == "ops":
            tape.verify(event, {**{name: known[name] if name in known else (
                expr[1] if isinstance(expr, tuple) else recorded[name].astype(np.float64))
                for name, expr in step_inputs.items()}, **_weight_values(params, values)}, label, close)
        try:
            local = _apply(step, {k: np.asarray(v, dtype=np.float64) for k, v in values.items()},
                           lambda name, _expr: recorded[name].astype(np.float64))
        except budget.TooLarge:
            raise
        except ReplayFailed as exc:
            raise ReplayFailed(f"{label}: {exc}") from None
        if not close(local, recorded_output):
            raise ReplayFailed(f"{label}'s output is not what a {event['class']} computes from its inputs and "
                               f"weights ({_difference(local, recorded_output)})")
        if kind == "conv":  # verified as a Dense at each position: its kernel plays a Dense kernel's role
            kernel = params["kernel"]
            params["kernel"] = ops.View(kernel, np.shape(values[kernel])[1:])
        steps.append(step)
        step_of_event[event["index"]] = step.index
        terms[("step", step.index)] = recorded_output.astype(np.float64)
        names[("step", step.index)] = label
    try:
        result = _match(output.astype(np.float64), terms, masks, names, "the layer's output")
    except ReplayFailed:
        glue = _output_step(events, events[0], steps, terms, masks, names, step_of_event, values)
        if glue is None:
            raise
        result = Expr((("step", glue.index),))
        if not close(terms[("step", glue.index)], output.astype(np.float64)):
            raise ReplayFailed("the layer's output is not what the operations that made it gave") from None
    program = Program(steps, result, tuple(float_inputs), masks, derived)
    replayed = program.run({k: np.asarray(v, dtype=np.float64) for k, v in values.items()}, float_inputs
                           | {k: v for k, v in inputs.items() if k not in float_inputs})
    if not close(replayed, output):
        raise ReplayFailed(f"running the rebuilt computation from the call's inputs does not give its output "
                           f"({_difference(replayed, output)})")
    return program


def _glue_step(events: list[dict], event: dict, name: str, made, steps: list, terms: dict, masks: dict,
               names: dict, step_of_event: dict, depth: int = 0, floating: bool = True,
               values: dict | None = None) -> Step:
    """The operations of the layer enclosing ``event`` that made its input ``name`` (``made``: the
    child's reference to the op), as a step of kind "ops" numbered after ``steps``: the ops it needs,
    renumbered, with their arguments traced to the enclosing layer's inputs and masks and to the
    outputs of earlier steps. An argument of the enclosing layer that its own enclosing layer's
    operations made (a mask built by the encoder, handed to an attention layer of its own) becomes a
    step of its own first, appended to ``steps``. ``floating``: the result must be a float tensor
    (the input of a Keras layer), not a mask."""
    parent = event.get("parent")
    container = events[parent] if isinstance(parent, int) and 0 <= parent < len(events) else None
    label = f"the operations of {_label(container)}" if container is not None else "an operation"
    made_op, part = _made_by(made)
    if container is None or not isinstance(container.get("ops"), list) or made_op is None or \
            not 0 <= made_op < len(container["ops"]):
        raise ReplayFailed(f"the input {name!r} of {_label(event)} cannot be traced back to the operations that made it")
    if depth > MAX_GLUE_DEPTH:
        raise ReplayFailed(f"the input {name!r} of {_label(event)} was made through more layers than the grader "
                           "follows")
    if len(container["ops"]) > limits.MAX_OPS or container.get("ops_truncated"):
        raise ReplayFailed(f"{label} are more than the grader follows ({limits.MAX_OPS})")
    needed, pending = set(), [made_op]
    while pending:
        position = pending.pop()
        if position in needed:
            continue
        record = container["ops"][position]
        if not isinstance(record, dict) or not isinstance(record.get("args"), list) or \
                not isinstance(record.get("kwargs"), dict):
            raise ReplayFailed(f"{label}: operation {position} is malformed")
        needed.add(position)
        for earlier in _op_references(record, label):
            if not (isinstance(earlier, int) and not isinstance(earlier, bool) and 0 <= earlier < position):
                raise ReplayFailed(f"{label}: operation {position} uses a result of an operation that did not run "
                                   "before it")
            pending.append(earlier)
    order = sorted(needed)
    renumbered = {old: new for new, old in enumerate(order)}
    chosen = [_renumbered(container["ops"][old], renumbered) for old in order]
    result = {"op": len(chosen) - 1} if part is None else {"part": [len(chosen) - 1, part]}
    chosen = tape.check_form({"ops": chosen, "result": result}, label)
    sources: set[str] = set()
    for record in chosen:
        sources |= _source_names(record)
    weights = _tape_weights({"ops": chosen}, values, label)
    inputs: dict = {}
    recorded: dict = dict(_weight_values(weights, values))
    for source in sorted(sources - set(weights)):
        if source.startswith("event "):
            inputs[source], recorded[source] = _layer_output(events, source, label, terms, masks, names, step_of_event,
                                                              steps, values)
        else:
            inputs[source], recorded[source] = _argument(events, container, source, label, steps, terms, masks,
                                                         names, step_of_event, depth, values)
    output = chosen[-1].get("output")
    if part is not None:
        parts = chosen[-1].get("outputs")
        output = parts[part] if isinstance(parts, list) and part < len(parts) else None
    if not isinstance(output, np.ndarray) or output.dtype.kind not in ("f" if floating else "fiub"):
        raise ReplayFailed(f"{label} did not make a floating-point tensor" if floating else
                           f"{label} did not make a tensor")
    glue = {"index": container["index"], "class": container.get("class"), "kind": "ops", "ops": chosen,
            "result": result, "output": output}
    tape.verify(glue, recorded, label, close)
    return Step(len(steps), glue, "ops", weights, {"tape": glue}, inputs)


def _layer_output(events: list[dict], source: str, label: str, terms: dict, masks: dict, names: dict,
                  step_of_event: dict, steps: list, values: dict | None) -> tuple:
    """(how it arises, its value) for the output of the layer call ``source`` ("event N") that a
    layer's operations use: a step the grader recomputed, or for a layer that holds others (an
    attention layer of the student's own), its output traced to the steps it ran."""
    number = source.split()[1] if len(source.split()) == 2 else ""
    index = int(number) if number.isdigit() else None
    if index is not None and index in step_of_event:
        step = step_of_event[index]
        return Expr((("step", step),)), terms[("step", step)]
    event = events[index] if index is not None and index < len(events) else None
    output = event.get("output") if event is not None else None
    if event is None or event.get("kind") != "container" or not isinstance(output, np.ndarray) or \
            output.dtype.kind != "f":
        raise ReplayFailed(f"{label} use the output of a layer the grader did not recompute before them")
    value = output.astype(np.float64)
    try:
        return _match(value, terms, masks, names, f"the output of {_label(event)}"), value
    except ReplayFailed:
        glue = _output_step(events, event, steps, terms, masks, names, step_of_event, values)
        if glue is None:
            raise
    if not close(terms[("step", glue.index)], value):
        raise ReplayFailed(f"the output of {_label(event)} is not what the operations that made it gave")
    return Expr((("step", glue.index),)), value


def _output_step(events: list[dict], container: dict, steps: list, terms: dict, masks: dict, names: dict,
                 step_of_event: dict, values: dict | None) -> Step | None:
    """The operations a layer holding others ran after them to make its own output (``output_op``), as
    a step of kind "ops" appended to ``steps``; None where its output is no operation's."""
    made = container.get("output_op")
    if container.get("kind") != "container" or _made_by(made)[0] is None:
        return None
    inside = {"index": container.get("index"), "parent": container.get("index"), "class": container.get("class"),
              "kind": "output"}
    glue = _glue_step(events, inside, "output", made, steps, terms, masks, names, step_of_event, values=values)
    steps.append(glue)
    terms[("step", glue.index)] = glue.event["output"].astype(np.float64)
    names[("step", glue.index)] = _label(glue.event)
    return glue


def _argument(events: list[dict], owner: dict, source: str, label: str, steps: list, terms: dict, masks: dict,
              names: dict, step_of_event: dict, depth: int, values: dict | None = None) -> tuple:
    """(how it arises, its value) for the argument ``source`` of the layer call ``owner``, which the
    operations of ``owner`` use: one of the parent's own padding masks (in any shape that holds the
    same values, as booleans, integers or floats), a tensor traced to the call's inputs and earlier
    steps, or what the operations of the layer enclosing ``owner`` made (a step of its own)."""
    claimed = (owner.get("masks") or {}).get(source) if isinstance(owner.get("masks"), dict) else None
    if claimed is None and isinstance(owner.get("inputs"), dict):
        claimed = owner["inputs"].get(source)
    if not isinstance(claimed, np.ndarray):
        raise ReplayFailed(f"{label} use the argument {source[:40]!r}, which the layer did not receive")
    if claimed.dtype.kind == "f":
        try:
            return _match(claimed.astype(np.float64), terms, masks, names,
                          f"the argument {source[:40]!r} of {_label(owner)}"), claimed.astype(np.float64)
        except ReplayFailed:
            pass
    mask = _same_mask(claimed, masks)
    if mask is not None:
        return ("mask", mask), mask
    made = owner.get("input_ops").get(source) if isinstance(owner.get("input_ops"), dict) else None
    if made is None and source in (owner.get("masks") or {}):
        raise ReplayFailed(f"the mask {_label(owner)} received is not the padding mask the grader chose")
    if made is None:
        raise ReplayFailed(f"{label} use the argument {source[:40]!r}, which the grader cannot trace to the call's "
                           "inputs, its padding masks or the operations that made it")
    glue = _glue_step(events, owner, source, made, steps, terms, masks, names, step_of_event, depth + 1,
                      floating=False, values=values)
    steps.append(glue)
    value = glue.event["output"]
    if value.dtype.kind == "f":
        terms[("step", glue.index)] = value.astype(np.float64)
        names[("step", glue.index)] = _label(glue.event)
    if not tape.agrees(value, claimed, close):
        raise ReplayFailed(f"the argument {source[:40]!r} of {_label(owner)} is not what the operations that made "
                           "it gave")
    return Expr((("step", glue.index),)), (value.astype(np.float64) if value.dtype.kind == "f" else value)


def _event_as_source(argument, depth: int = 0):
    if depth > 4 or not isinstance(argument, dict) or len(argument) != 1:
        return argument
    (tag, value), = argument.items()
    if tag == "event":
        if not isinstance(value, int) or isinstance(value, bool):
            return {"malformed": True}
        return {"source": f"event {value}"}
    if tag == "list" and isinstance(value, list):
        return {"list": [_event_as_source(v, depth + 1) for v in value]}
    return argument


def _made_by(reference) -> tuple:
    """(operation, part) of a reference to an operation's result ({"op": n}) or to one of the tensors
    it gave ({"part": [n, k]}); (None, None) for anything else."""
    if not isinstance(reference, dict) or len(reference) != 1:
        return None, None
    (tag, value), = reference.items()
    if tag == "op" and isinstance(value, int) and not isinstance(value, bool):
        return value, None
    if tag == "part" and isinstance(value, list) and len(value) == 2 and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value) and 0 <= value[1] < limits.MAX_OP_ITEMS:
        return value[0], value[1]
    return None, None


def _op_references(record: dict, label: str) -> set:
    found: set = set()

    def visit(argument, depth=0):
        if depth > 4 or not isinstance(argument, dict) or len(argument) != 1:
            raise ReplayFailed(f"{label}: an operation has a malformed argument")
        (tag, value), = argument.items()
        if tag in ("op", "part"):
            made, _ = _made_by(argument)
            found.add(-1 if made is None else made)
        elif tag == "list" and isinstance(value, list):
            for item in value[:64]:
                visit(item, depth + 1)

    for argument in list(record["args"]) + list(record["kwargs"].values()):
        visit(argument)
    return found


def _renumbered(record: dict, renumbered: dict) -> dict:
    def rewrite(argument):
        argument = _event_as_source(argument)
        (tag, value), = argument.items()
        if tag == "op":
            return {"op": renumbered[value]}
        if tag == "part":
            return {"part": [renumbered[value[0]], value[1]]}
        if tag == "list":
            return {"list": [rewrite(item) for item in value]}
        return argument

    return dict(record, args=[rewrite(a) for a in record["args"]],
                kwargs={k: rewrite(v) for k, v in record["kwargs"].items()})


def _tape_weights(event: dict, values: dict | None, label: str) -> dict[str, str]:
    """{source name: the variable's key} of the weights a tape's operations take (``weight:<key>``
    sources, ``grader.probe.op_tape``), each one the parent set; ReplayFailed for any other."""
    named: set[str] = set()
    for record in event.get("ops") or ():
        if isinstance(record, dict) and isinstance(record.get("args"), list) and isinstance(record.get("kwargs"), dict):
            named |= {source for source in _source_names(record) if source.startswith(records.WEIGHT_SOURCE)}
    weights = {}
    for source in sorted(named):
        key = source[len(records.WEIGHT_SOURCE):]
        if values is None or key not in values:
            raise ReplayFailed(f"{label} use a weight that did not exist when the layer was built, so the grader did "
                               "not set it (is a weight created inside call()?)")
        weights[source] = key
    return weights


def _weight_values(weights: dict[str, str], values: dict) -> dict:
    return {source: np.asarray(values[key], dtype=np.float64) for source, key in weights.items()}


def _source_names(record: dict) -> set[str]:
    found: set[str] = set()

    def visit(argument):
        (tag, value), = argument.items()
        if tag == "source":
            found.add(value)
        elif tag == "list":
            for item in value:
                visit(item)

    for argument in list(record["args"]) + list(record["kwargs"].values()):
        visit(argument)
    return found


def validate_trace(trace) -> list[dict]:
    """The trace's events, checked for form: a list of records whose parent links point to
    earlier events (so the call tree has no cycle)."""
    if not isinstance(trace, list) or len(trace) > MAX_EVENTS:
        raise ReplayFailed("the call's trace is missing or too long")
    problem = records.trace_problem({"trace": trace})  # numbered in order, each linked to an earlier call
    if problem:
        raise ReplayFailed(f"the call's trace is malformed ({problem})")
    for event in trace:
        if event.get("kind") not in LEAF_KINDS + OTHER_KINDS or not isinstance(event.get("class"), str):
            raise ReplayFailed("the call's trace names an unknown kind of layer")
        if not isinstance(event.get("layer"), int):
            raise ReplayFailed("the call's trace is malformed")
    return trace


def _leaves(events: list[dict]) -> list[dict]:
    """Events that are steps of the computation: leaves (and opaque calls) not inside another leaf."""
    inside_leaf: set[int] = set()
    chosen = []
    for event in events:
        parent = event.get("parent")
        if parent is None:
            continue  # the call itself
        if parent in inside_leaf or events[parent]["kind"] in LEAF_KINDS + ("opaque",):
            inside_leaf.add(event["index"])
            continue
        if event["kind"] in LEAF_KINDS or event["kind"] == "opaque":
            chosen.append(event)
    return chosen


def _label(event: dict) -> str:
    return f"layer {event['class']} (call {event['index']})"


def _params(event: dict, values: dict, label: str) -> dict:
    params = event.get("params") or {}
    if not isinstance(params, dict):
        raise ReplayFailed(f"{label}'s weights are malformed")
    chosen = {}
    for role, key in params.items():
        if key is None:
            chosen[role] = None
            continue
        key = str(key)
        if key not in values:
            raise ReplayFailed(f"{label} uses a weight that did not exist when the layer was built, so the grader "
                               "did not set it (is a layer or weight created inside call()?)")
        chosen[role] = key
    return chosen


REQUIRED = {
    "attention": ("query_kernel", "key_kernel", "value_kernel", "output_kernel"),
    "dense": ("kernel",),
    "conv": ("kernel",),
    "einsum_dense": ("kernel",),
    "embedding": ("embeddings",),
}


def _constants(event: dict, label: str) -> dict:
    kind = event["kind"]
    constants = event.get("constants") or {}
    if not isinstance(constants, dict):
        raise ReplayFailed(f"{label}'s settings are malformed")
    for role in REQUIRED.get(kind, ()):
        if (event.get("params") or {}).get(role) is None:
            raise ReplayFailed(f"{label} has no {role}")
    if kind == "conv":
        _pointwise(constants, label)
    if kind in ("dense", "conv", "einsum_dense", "activation"):
        if constants.get("activation", "linear") not in ops.ACTIVATIONS:
            raise ReplayFailed(f"{label} uses an activation the grader cannot replay")
    if kind == "einsum_dense":
        equation = constants.get("equation")
        if not isinstance(equation, str) or "->" not in equation or len(equation) > 40:
            raise ReplayFailed(f"{label}'s equation is malformed")
    if kind == "norm":
        epsilon = constants.get("epsilon")
        if not isinstance(epsilon, (int, float)) or not 0 <= epsilon <= MAX_EPSILON:
            raise ReplayFailed(f"{label}'s epsilon is not a small positive number")
        if constants.get("rms_scaling"):
            raise ReplayFailed(f"{label} scales by the root mean square (rms_scaling), which the grader cannot replay")
        axes = constants.get("axes")
        if not constants.get("last_axis") and not (
                isinstance(axes, list) and 0 < len(axes) <= 4 and
                all(isinstance(a, int) and not isinstance(a, bool) and 0 <= a < 8 for a in axes)):
            raise ReplayFailed(f"{label} normalises over axes the grader cannot read")
    if kind == "attention":
        mask = constants.get("mask")
        if mask is not None and (not isinstance(mask, np.ndarray) or mask.ndim > 4):
            raise ReplayFailed(f"{label}'s attention mask is malformed")
        if constants.get("unsupported"):
            raise ReplayFailed(f"{label} uses {constants['unsupported']}, which the grader cannot replay")
    if kind in ("average_pool",):
        mask = constants.get("mask")
        if mask is not None and (not isinstance(mask, np.ndarray) or mask.ndim != 2 or not np.all(mask.any(axis=1))):
            raise ReplayFailed(f"{label}'s mask is malformed or hides every position of a row")
    if kind == "relu":
        for name in ("max_value", "negative_slope", "threshold"):
            v = constants.get(name)
            if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v)):
                raise ReplayFailed(f"{label}'s {name} is malformed")
    return constants


def _pointwise(constants: dict, label: str) -> None:
    """ReplayFailed unless the convolution looks at one position at a time: kernel size 1, stride 1,
    one group, channels last. Its padding and dilation then change nothing."""
    def one(name):
        value = constants.get(name)
        return isinstance(value, list) and len(value) == 1 and value[0] == 1

    if not one("kernel_size"):
        raise ReplayFailed(f"{label} has a kernel wider than one position, which mixes neighbouring positions: the "
                           "grader replays a convolution only of kernel size 1 (a Dense applied at each position)")
    if not one("strides") or constants.get("groups") != 1 or constants.get("data_format") != "channels_last":
        raise ReplayFailed(f"{label} uses strides, groups or channels first, which the grader does not replay")


def _integral(tensor: np.ndarray) -> bool:
    return tensor.dtype.kind == "f" and bool(np.all(np.isfinite(tensor))) and bool(np.all(tensor == np.trunc(tensor)))


def _parent_mask(claimed: np.ndarray, masks: dict, label: str) -> np.ndarray:
    """The padding mask the grader chose that ``claimed`` (a mask the child says a layer received)
    is; ReplayFailed if it is none of them."""
    known = _same_mask(claimed, masks) if isinstance(claimed, np.ndarray) else None
    if known is None:
        raise ReplayFailed(f"the mask {label} received is not the padding mask the grader chose")
    return known


def _same_mask(claimed: np.ndarray, masks: dict) -> np.ndarray | None:
    """The parent's own padding mask that ``claimed`` holds — the same values, in a shape with axes
    of 1 added ((batch, 1, seq) for (batch, seq)), as booleans or as the numbers 0 and 1 — in
    claimed's shape and kind; None if it holds none of them."""
    kinds = {"b": bool, "i": np.int64, "u": np.int64, "f": np.float64}
    if claimed.dtype.kind not in kinds or claimed.size == 0:
        return None
    squeezed = tuple(d for d in claimed.shape if d != 1)
    for known in masks.values():
        if known.size != claimed.size or tuple(d for d in known.shape if d != 1) != squeezed:
            continue
        held = claimed.reshape(known.shape)
        if np.array_equal(held, known if claimed.dtype.kind == "b" else known.astype(held.dtype)):
            if claimed.shape == known.shape and claimed.dtype.kind == known.dtype.kind:
                return known  # the parent's own array, not a copy of it
            return known.reshape(claimed.shape).astype(kinds[claimed.dtype.kind])
    return None


def _ids(tensor: np.ndarray, params: dict, values: dict, label: str) -> np.ndarray:
    table = np.asarray(values[params["embeddings"]])
    if table.ndim != 2:
        raise ReplayFailed(f"{label}'s embeddings have the shape {table.shape}, not a (rows, width) table")
    rows = table.shape[0]
    ids = np.trunc(tensor).astype(np.int64) if tensor.dtype.kind == "f" else tensor.astype(np.int64)
    if ids.size and (ids.min() < 0 or ids.max() >= rows):
        raise ReplayFailed(f"{label} looks up rows outside its table")
    return ids


# --------------------------------------------------------------------------- matching


def close(a, b) -> bool:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return False
    scale = max(1.0, float(np.max(np.abs(b)))) if b.size else 1.0
    return bool(np.allclose(a, b, rtol=1e-3, atol=2e-4 * scale))


def _difference(a, b) -> str:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return f"shape {a.shape} instead of {b.shape}"
    return f"by up to {float(np.max(np.abs(a - b))):.3g}"


def _fits(value: np.ndarray, shape: tuple) -> np.ndarray | None:
    try:
        if np.broadcast_shapes(value.shape, shape) != shape:
            return None
    except ValueError:
        return None
    return np.broadcast_to(value, shape)


def _match(target: np.ndarray, terms: dict, masks: dict, names: dict, what: str) -> Expr:
    """The simplest expression over ``terms`` that equals ``target``: a term or a sum of two, then
    optionally a relu, a masking, and a constant factor (between 1e-3 and 1e3 in size)."""
    if not np.all(np.isfinite(target)):
        raise ReplayFailed(f"{what} holds NaN or infinite values")
    shape = target.shape
    keys = list(terms)
    masks_as_factors = {name: _fits(mask.astype(np.float64)[..., None], shape) if mask.ndim < len(shape) else None
                        for name, mask in masks.items()}

    def candidates():  # (combination, relu, mask name, value): simplest first, made one at a time
        singles = ((k,) for k in keys)
        pairs = ((a, b) for i, a in enumerate(keys) for b in keys[i + 1:])
        for combination in itertools.chain(singles, pairs):
            budget.charge(max(target.size, MATCH_OVERHEAD) * (2 + len(masks)) * 2, target.size)
            parts = [_fits(terms[k], shape) for k in combination]
            if any(p is None for p in parts):
                continue
            total = parts[0] if len(parts) == 1 else parts[0] + parts[1]
            for relu in (False, True):
                candidate = np.maximum(total, 0.0) if relu else total
                yield combination, relu, None, candidate
                for mask_name, factor in masks_as_factors.items():
                    if factor is not None:
                        yield combination, relu, mask_name, candidate * factor

    for combination, relu, mask_name, value in candidates():
        if close(value, target):
            return Expr(tuple(combination), relu, mask_name)
    for combination, relu, mask_name, value in candidates():  # a constant factor only if nothing simpler fits
        scale = _scale(value, target)
        if scale is not None:
            return Expr(tuple(combination), relu, mask_name, scale)
    raise ReplayFailed(f"{what} cannot be traced back to the call's inputs or to the layers it ran "
                       "(it is neither one of them, nor a sum of two, nor a relu or a masking of these)")


def _scale(value: np.ndarray, target: np.ndarray) -> float | None:
    """The constant c with c * value == target, if there is one of a sensible size."""
    norm = float(np.sum(value * value))
    if norm <= 1e-12:
        return None
    c = float(np.sum(value * target)) / norm
    if not 1e-3 <= abs(c) <= 1e3 or abs(c - 1.0) < 1e-6:
        return None
    return c if close(c * value, target) else None


def evaluate(expr: Expr, outputs: dict, inputs: dict, masks: dict):
    """The value of a recorded expression: its terms (inputs, derived expressions, masks) put together."""
    parts = []
    for kind, ref in expr.terms:
        if kind == "input":
            parts.append(inputs[ref])
        elif kind == "derived":
            parts.append(evaluate(outputs["derived"][ref], outputs, inputs, masks))
        else:
            parts.append(outputs[(kind, ref)])
    total = parts[0] if len(parts) == 1 else budget.elementwise(ops.anp.add, parts[0], parts[1])
    if expr.relu:
        total = ops.anp.maximum(total, 0.0)
    if expr.mask:
        mask = np.asarray(masks[expr.mask], dtype=np.float64)
        total = budget.elementwise(ops.anp.multiply, total, mask.reshape(mask.shape + (1,) * (np.ndim(total) - mask.ndim)))
    if expr.scale != 1.0:
        total = total * expr.scale
    return total


# --------------------------------------------------------------------------- applying


def _apply(step: Step, values: dict, argument):
    """The step's output; ``argument(name, expr)`` gives the value of its input ``name``."""
    kind, c = step.kind, step.constants

    def weight(role):
        key = step.params.get(role)
        return None if key is None else values[key]

    def arg(name):
        expr = step.inputs[name]
        if isinstance(expr, tuple) and expr and expr[0] in ("ids", "mask"):
            return expr[1]
        return argument(name, expr)

    names = list(step.inputs)
    if kind == "dense":
        return ops.dense(arg(names[0]), weight("kernel"), weight("bias"), c.get("activation", "linear"))
    if kind == "conv":
        return ops.pointwise_conv(arg(names[0]), weight("kernel"), weight("bias"), c.get("activation", "linear"))
    if kind == "einsum_dense":
        return ops.einsum_dense(arg(names[0]), weight("kernel"), weight("bias"), c["equation"], c.get("bias_axes"),
                                c.get("activation", "linear"))
    if kind == "norm":
        return ops.layer_norm(arg(names[0]), weight("gamma"), weight("beta"), float(c["epsilon"]),
                              None if c.get("last_axis") else tuple(c["axes"]))
    if kind == "embedding":
        return ops.embedding(weight("embeddings"), arg(names[0]))
    if kind == "identity":
        return arg(names[0])
    if kind == "activation":
        return ops.activation(arg(names[0]), c.get("activation", "linear"))
    if kind == "relu":
        return ops.relu_layer(arg(names[0]), c.get("max_value"), c.get("negative_slope") or 0.0,
                              c.get("threshold") or 0.0)
    if kind == "add":
        total = arg(names[0])
        for name in names[1:]:
            total = ops.add(total, arg(name))
        return total
    if kind == "average_pool":
        return ops.average_pool(arg(names[0]), c.get("mask"))
    if kind == "max_pool":
        return ops.max_pool(arg(names[0]))
    if kind == "flatten":
        x = arg(names[0])
        return ops.anp.reshape(x, (np.shape(x)[0], -1))
    if kind == "ops":
        return tape.run(c["tape"], {**{name: arg(name) for name in step.inputs},
                                    **{source: weight(source) for source in step.params}})
    if kind == "attention":
        query = arg("query")
        value = arg("value")
        key = arg("key") if "key" in step.inputs else None
        params = {role: weight(role) for role in ("query_kernel", "query_bias", "key_kernel", "key_bias",
                                                  "value_kernel", "value_bias", "output_kernel", "output_bias")}
        return ops.attention(query, value, key, params, c.get("mask"), bool(c.get("causal")),
                             bool(c.get("zero_masked")))
    raise ReplayFailed(f"the grader cannot replay a step of kind {kind}")
