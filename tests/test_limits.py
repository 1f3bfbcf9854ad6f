"""One limit per quantity (``grader/protocol/limits.py``), read by every stage that handles it.

``QUANTITIES`` lists each quantity the stages share, its constant, and the stages that read it in the
order a submission's evidence meets them: the probe beside the student's code, the parent reading
the evidence and drawing the secrets, the child decoding those, the judge reading what the parent
forwards and recomputing it. For each: every stage reads the constant, or a bound derived from it
(no stage keeps a number of its own); driven at exactly the limit, every stage accepts; one over,
the first stage refuses, naming the limit, and so does every later one given the same data forged.
The values of a layer's variables and the elements of one array are also driven through real
gradings: at their limits every stage accepts; just over them the probe refuses at once, and a
forged report over them is refused by the parent at once (the grading process, left waiting, would
otherwise have run out the time limit).
"""

from __future__ import annotations

import ast
import inspect
import json
import math
from pathlib import Path

import numpy as np
import pytest

import grader
from grader import exercises
from grader.api import Grading, Settings
from grader.judge import budget
from grader.judging import exchange
from grader.judging.declarations import declared_checks
from grader.probe.evidence_stream import EvidenceStream
from grader.protocol import job as jobs, limits, text, wire
from grader.sandbox.evidence import ChildRun, RecordParser

from .conftest import warm_runner

PACKAGE = Path(grader.__file__).resolve().parent

# quantity -> (its constant, [(stage, module, what of the limits module it reads)]), stages in the order
# the evidence meets them; what a stage reads is the constant, or a bound or check derived from it
QUANTITIES = {
    "variables of a layer": ("MAX_VARIABLES", [
        ("probe", "grader.probe.layer_phases", "variables_problem"),
        ("parent", "grader.protocol.job", "MAX_VARIABLES")]),
    "values of a layer's variables": ("MAX_VARIABLE_VALUES", [
        ("probe", "grader.probe.layer_phases", "variables_problem"),
        ("parent", "grader.protocol.job", "variables_problem"),
        ("child", "grader.probe.evidence_stream", "MAX_SECRET_BYTES"),
        ("parent", "grader.sandbox.evidence", "MAX_RECORD_BYTES"),
        ("judge", "grader.judging.exchange", "MAX_REQUEST_BYTES"),
        ("judge", "grader.judging.server", "MAX_REQUEST_BYTES")]),
    "elements of one array": ("MAX_ARRAY_ELEMENTS", [
        ("probe", "grader.probe.layer_phases", "variables_problem"),
        ("parent", "grader.protocol.job", "MAX_ARRAY_ELEMENTS"),
        ("parent, child and judge", "grader.protocol.wire", "MAX_ARRAY_ELEMENTS"),
        ("judge", "grader.judge.budget", "MAX_ARRAY_ELEMENTS")]),
    "axes of one array": ("MAX_RANK", [
        ("probe", "grader.probe.layer_phases", "variables_problem"),
        ("parent", "grader.protocol.job", "MAX_RANK"),
        ("parent, child and judge", "grader.protocol.wire", "MAX_RANK")]),
    "bytes of one record": ("MAX_RECORD_BYTES", [
        ("probe", "grader.probe.evidence_stream", "MAX_RECORD_BYTES"),
        ("parent", "grader.sandbox.evidence", "MAX_RECORD_BYTES"),
        ("parent, child", "grader.protocol.wire", "MAX_RECORD_BYTES")]),
    "bytes of all the evidence": ("MAX_EVIDENCE_BYTES", [
        ("probe", "grader.probe.evidence_stream", "MAX_EVIDENCE_BYTES"),
        ("parent", "grader.sandbox.evidence", "MAX_EVIDENCE_BYTES"),
        ("judge", "grader.judging.exchange", "MAX_REQUEST_BYTES")]),
    "JSON values of one record": ("MAX_RECORD_VALUES", [
        ("probe", "grader.probe.evidence_stream", "records.arrived"),
        ("parent", "grader.protocol.wire", "MAX_RECORD_VALUES")]),
    "JSON values of all the evidence": ("MAX_EVIDENCE_VALUES", [
        ("probe", "grader.probe.evidence_stream", "MAX_EVIDENCE_VALUES"),
        ("parent", "grader.sandbox.evidence", "MAX_EVIDENCE_VALUES")]),
    "nesting of one record": ("MAX_DEPTH", [
        ("probe", "grader.probe.evidence_stream", "records.arrived"),
        ("parent, child and judge", "grader.protocol.wire", "MAX_DEPTH")]),
    "items of one list or object": ("MAX_ITEMS", [
        ("probe", "grader.probe.evidence_stream", "records.arrived"),
        ("parent, child and judge", "grader.protocol.wire", "MAX_ITEMS")]),
    "characters of one field name": ("MAX_KEY", [
        ("probe", "grader.probe.evidence_stream", "records.arrived"),
        ("parent, child and judge", "grader.protocol.wire", "MAX_KEY")]),
    "characters of one string (cut)": ("MAX_TEXT", [
        ("probe", "grader.probe.evidence_stream", "MAX_TEXT"),
        ("parent", "grader.protocol.text", "MAX_TEXT")]),
    "frames of one error": ("MAX_FRAMES", [
        ("probe", "grader.probe.evidence_stream", "MAX_FRAMES"),
        ("parent", "grader.protocol.records", "MAX_FRAMES")]),
    "names a file defines": ("MAX_NAMES", [
        ("probe", "grader.child.__main__", "MAX_NAMES"),
        ("parent", "grader.protocol.records", "MAX_NAMES")]),
    "characters of one check's message": ("MAX_MESSAGE", [
        ("judge", "grader.judging.exchange", "MAX_MESSAGE"),
        ("parent", "grader.judging.client", "MAX_ANSWER_BYTES"),
        ("parent", "grader.server.wire", "MAX_VERDICT_BYTES")]),
    "operations of one call": ("MAX_OPS", [
        ("probe", "grader.probe.op_tape", "MAX_OPS"),
        ("judge", "grader.judge.tape", "MAX_OPS"),
        ("judge", "grader.judge.replay", "MAX_OPS")]),
    "elements of a constant on the tape": ("MAX_CONSTANT", [
        ("probe", "grader.probe.op_tape", "MAX_CONSTANT"),
        ("judge", "grader.judge.tape", "MAX_CONSTANT")]),
    "items of an operation's argument or result": ("MAX_OP_ITEMS", [
        ("probe", "grader.probe.op_tape", "MAX_OP_ITEMS"),
        ("judge", "grader.judge.tape", "MAX_OP_ITEMS"),
        ("judge", "grader.judge.operations", "MAX_OP_ITEMS")]),
    "bytes of a grading process's output": ("MAX_OUTPUT_BYTES", [
        ("parent", "grader.sandbox.process", "MAX_OUTPUT_BYTES"),
        ("judge", "grader.judging.server", "MAX_REQUEST_BYTES")]),
}
# bounds of the grader's own that share a name with a quantity above but bound something else
NOT_THE_QUANTITY = {
    ("grader.portability", "MAX_DEPTH"): "the nesting of two verdicts compared, not of evidence",
    ("grader.judge.operations", "MAX_RANK"): "axes of an array the replay computes: its operations may add axes",
    ("grader.judge.operations", "MAX_ITEMS"): "an alias of limits.MAX_OP_ITEMS, the name the table's code reads",
}


def _module_tree(module: str) -> ast.Module:
    path = PACKAGE.joinpath(*module.split(".")[1:])
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    return ast.parse(path.read_text(encoding="utf-8"))


def _reads(module: str) -> set[str]:
    """What ``module`` reads of grader.protocol.limits (``limits.X``, ``from ..limits import X``), and
    of records (``records.arrived``)."""
    found = set()
    for node in ast.walk(_module_tree(module)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in (
                "limits", "records"):
            found.add(node.attr if node.value.id == "limits" else f"records.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").endswith("limits"):
            found.update(alias.name for alias in node.names)
    return found


def _derived_from(name: str) -> set[str]:
    """The constants of limits.py that ``name`` (a constant or a function there) is made from, itself
    included, transitively."""
    tree = ast.parse(inspect.getsource(limits))
    definitions = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            definitions[node.targets[0].id] = node.value
        elif isinstance(node, ast.FunctionDef):
            definitions[node.name] = node
    seen, todo = set(), [name]
    while todo:
        current = todo.pop()
        if current in seen or current not in definitions:
            continue
        seen.add(current)
        todo.extend(n.id for n in ast.walk(definitions[current]) if isinstance(n, ast.Name))
    return seen


@pytest.mark.parametrize("quantity", QUANTITIES)
def test_every_stage_reads_the_quantitys_one_limit(quantity):
    constant, stages = QUANTITIES[quantity]
    assert isinstance(getattr(limits, constant), int)
    for stage, module, read in stages:
        assert read in _reads(module), (quantity, stage, module, read)
        if read == "records.arrived":
            continue  # the parent's own reading of a record (wire.loads within the limits)
        assert constant in _derived_from(read), f"{module} reads {read}, which is not made from {constant}"
    # read before it is sent: the probe's reading of a record is the parent's
    assert "records.arrived" in _reads("grader.sandbox.evidence")


def test_no_stage_keeps_a_number_of_its_own_for_a_quantity():
    """A module-level constant named as one of the limits and given a number of its own is a second
    limit for the same quantity."""
    names = {name for name in vars(limits) if name.isupper()}
    copies = []
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
        if module == "grader.protocol.limits" or path.relative_to(PACKAGE).parts[0].startswith("_"):
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                name = node.targets[0].id
                if name in names and (module, name) not in NOT_THE_QUANTITY:
                    copies.append(f"{module}.{name} = {ast.unparse(node.value)}")
    assert copies == []


def test_the_bounds_of_several_quantities_hold_them_at_their_limits():
    """A record holds the gradients phase of a layer at its limits; the evidence that record and the rest
    of a run; a judge's request the evidence, the secrets and the run's output; an answer every check's
    message; the server's answer a verdict on each backend."""
    from grader import backends
    from grader.server import wire as server_wire

    gradients = 2 * limits.encoded_bytes(limits.MAX_VARIABLE_VALUES)
    assert limits.MAX_RECORD_BYTES > gradients and limits.MAX_SECRET_BYTES <= limits.MAX_RECORD_BYTES
    assert limits.MAX_EVIDENCE_BYTES - limits.EVIDENCE_RESERVE > limits.MAX_RECORD_BYTES
    assert limits.MAX_REQUEST_BYTES >= limits.MAX_EVIDENCE_BYTES + limits.MAX_SECRET_BYTES + \
        2 * limits.MAX_OUTPUT_BYTES * limits.JSON_CHARACTER_BYTES
    assert max(len(declared_checks(exercises.get(e))) for e in exercises.EXERCISES) <= limits.MAX_CHECKS
    assert server_wire.MAX_ANSWER >= len(backends.NAMES) * limits.MAX_VERDICT_BYTES
    assert limits.MAX_ARRAY_ELEMENTS <= limits.MAX_VARIABLE_VALUES


# --------------------------------------------------------------------------- the stages, in process

def _probe_sends(data: dict, stream: EvidenceStream | None = None) -> tuple[str | None, bytes]:
    """(None, the line) if the probe sends a phase holding ``data`` as it is, else (the message of the
    LimitExceeded it sends instead, the line)."""
    lines: list[bytes] = []
    stream = stream or EvidenceStream(None, "/nowhere/submission.py", send=lines.append)
    stream._send = lines.append
    with stream.phase("forward") as phase:
        phase.update(data)
    end = json.loads(lines[-1])
    if end["ok"]:
        return None, lines[-1]
    assert end["error"]["type"] == "LimitExceeded" and not end["error"]["internal"], end["error"]
    return end["error"]["message"], lines[-1]


def _parent_reads(*lines: bytes) -> tuple[str | None, ChildRun]:
    parser = RecordParser(ChildRun())
    for line in lines:
        parser.feed(line if line.endswith(b"\n") else line + b"\n")
    parser.finish()
    return parser.run.protocol_error, parser.run


def _judge_reads(run: ChildRun, secrets: dict | None = None) -> str | None:
    request = exchange.request("exercise3", {"dims": {}}, secrets, run, 30.0)
    try:
        exchange.read_request(request)
    except exchange.BadRequest as exc:
        return str(exc)
    return None


def _forged(data: dict) -> bytes:
    return wire.dumps({"event": "end", "phase": "forward", "ok": True, "seconds": 0.0, "data": data, "error": None})


def _named(limit: int) -> str:
    return f"{limit:,}"


def test_elements_of_one_array_at_the_limit_and_one_over():
    at = {"a": np.zeros(limits.MAX_ARRAY_ELEMENTS, np.float32)}
    refused, line = _probe_sends(at)
    assert refused is None
    error, run = _parent_reads(line)
    assert error is None and run.phases["forward"]["data"]["a"].size == limits.MAX_ARRAY_ELEMENTS
    assert _judge_reads(run) is None
    budget.reset()
    budget.charge(limits.MAX_ARRAY_ELEMENTS, limits.MAX_ARRAY_ELEMENTS)
    assert limits.variables_problem([[limits.MAX_ARRAY_ELEMENTS]]) is None

    over = {"a": np.zeros(limits.MAX_ARRAY_ELEMENTS + 1, np.float32)}
    refused, _ = _probe_sends(over)
    assert refused and _named(limits.MAX_ARRAY_ELEMENTS) in refused
    error, _ = _parent_reads(_forged(over))
    assert error and "evidence" in error and _named(limits.MAX_ARRAY_ELEMENTS) in error
    forged_run = ChildRun(phases={"forward": {"event": "end", "phase": "forward", "ok": True, "data": over}})
    assert _named(limits.MAX_ARRAY_ELEMENTS) in _judge_reads(forged_run)
    with pytest.raises(budget.TooLarge, match=_named(limits.MAX_ARRAY_ELEMENTS)):
        budget.charge(limits.MAX_ARRAY_ELEMENTS + 1, limits.MAX_ARRAY_ELEMENTS + 1)
    assert _named(limits.MAX_ARRAY_ELEMENTS) in limits.variables_problem([[limits.MAX_ARRAY_ELEMENTS + 1]])
    with pytest.raises(jobs.BadBuildReport):
        jobs.validated_variables(_build([[limits.MAX_ARRAY_ELEMENTS + 1]]))


def _build(shapes, dtype="float32") -> dict:
    return {"variables": [{"id": i, "shape": list(shape), "dtype": dtype, "trainable": True, "path": f"v{i}"}
                          for i, shape in enumerate(shapes)], "layers": {}}


def _shapes_holding(values: int) -> list[list[int]]:
    """Variables holding ``values`` in all, none larger than one array may be."""
    full, rest = divmod(values, limits.MAX_ARRAY_ELEMENTS)
    return [[limits.MAX_ARRAY_ELEMENTS]] * full + ([[rest]] if rest else [])


def test_values_of_a_layers_variables_at_the_limit_and_one_over():
    """At the limit: the probe reports them, the parent draws a value for each, the child decodes the
    secrets, the gradients phase (a gradient and a value after the steps for each, in float64) travels
    to the parent and on to the judge. One over: the probe refuses first, and the parent would too."""
    exercise = exercises.get("exercise3")
    shapes = _shapes_holding(limits.MAX_VARIABLE_VALUES)
    assert limits.variables_problem(shapes) is None
    secrets = jobs.secret_job(exercise, 1, _build(shapes))
    message = wire.dumps(secrets)
    assert len(message) <= limits.MAX_SECRET_BYTES
    received = EvidenceStream(None, "/nowhere/submission.py", receive=lambda: message).receive()
    assert isinstance(received, dict) and sum(v.size for v in received["values"].values()) == \
        limits.MAX_VARIABLE_VALUES

    gradients = {"variables": list(range(len(shapes))),
                 "gradients": [np.zeros(shape, np.float64) for shape in shapes],
                 "after_steps": {str(i): np.zeros(shape, np.float64) for i, shape in enumerate(shapes)}}
    refused, line = _probe_sends(gradients)
    assert refused is None
    error, run = _parent_reads(line)
    assert error is None
    assert _judge_reads(run, secrets) is None
    assert len(exchange.request("exercise3", exercise.public_job(), secrets, run, 30.0)) <= limits.MAX_REQUEST_BYTES

    over = shapes + [[1]]
    problem = limits.variables_problem(over)
    assert problem and _named(limits.MAX_VARIABLE_VALUES) in problem
    with pytest.raises(jobs.BadBuildReport, match=_named(limits.MAX_VARIABLE_VALUES)):
        jobs.secret_job(exercise, 1, _build(over))


def test_variables_of_a_layer_and_axes_of_an_array_at_the_limit_and_one_over():
    assert limits.variables_problem([[1]] * limits.MAX_VARIABLES) is None
    jobs.validated_variables(_build([[1]] * limits.MAX_VARIABLES))
    assert _named(limits.MAX_VARIABLES) in limits.variables_problem([[1]] * (limits.MAX_VARIABLES + 1))
    with pytest.raises(jobs.BadBuildReport, match=_named(limits.MAX_VARIABLES)):
        jobs.validated_variables(_build([[1]] * (limits.MAX_VARIABLES + 1)))

    at, over = [1] * limits.MAX_RANK, [1] * (limits.MAX_RANK + 1)
    assert limits.variables_problem([at]) is None
    jobs.validated_variables(_build([at]))
    assert _probe_sends({"a": np.zeros(at)})[0] is None
    assert f"{limits.MAX_RANK + 1} axes" in limits.variables_problem([over])
    with pytest.raises(jobs.BadBuildReport):
        jobs.validated_variables(_build([over]))
    refused, _ = _probe_sends({"a": np.zeros(over)})
    assert refused and f"at most {limits.MAX_RANK}" in refused
    error, _ = _parent_reads(_forged({"a": np.zeros(over)}))
    assert f"at most {limits.MAX_RANK}" in error


def _line_of(size: int, phase: str = "x") -> bytes:
    """An end record of exactly ``size`` bytes (its newline aside), a string filling it."""
    empty = wire.dumps({"event": "end", "phase": phase, "ok": True, "error": None, "data": {"s": ""}})[:-1]
    return empty.replace(b'"s":""', b'"s":"' + b"x" * (size - len(empty)) + b'"')


def test_bytes_of_one_record_and_of_all_the_evidence_at_the_limit_and_one_over():
    at = _line_of(limits.MAX_RECORD_BYTES)
    assert len(at) == limits.MAX_RECORD_BYTES
    error, run = _parent_reads(at)
    assert error is None and len(run.phases["x"]["data"]["s"]) == limits.MAX_TEXT  # cut, as it arrives
    assert _judge_reads(run) is None
    error, _ = _parent_reads(_line_of(limits.MAX_RECORD_BYTES + 1))
    assert error and "evidence" in error and _named(limits.MAX_RECORD_BYTES) in error
    refused, _ = _probe_sends({"s": "x" * limits.MAX_RECORD_BYTES})
    assert refused and _named(limits.MAX_RECORD_BYTES) in refused

    # the whole evidence, newlines counted: two records filling it exactly, then one byte more
    first = _line_of(limits.MAX_RECORD_BYTES, "a")
    second = _line_of(limits.MAX_EVIDENCE_BYTES - len(first) - 2, "b")
    error, run = _parent_reads(first, second)
    assert error is None and set(run.phases) == {"a", "b"}
    error, _ = _parent_reads(first, _line_of(len(second) + 1, "b"))
    assert error and "more evidence than the grader accepts" in error and _named(limits.MAX_EVIDENCE_BYTES) in error
    stream = EvidenceStream(None, "/nowhere/submission.py", send=lambda line: None)
    assert _probe_sends({"s": "x" * (limits.MAX_RECORD_BYTES - 1000)}, stream)[0] is None
    refused, _ = _probe_sends({"s": "x" * (limits.MAX_EVIDENCE_BYTES - limits.MAX_RECORD_BYTES)}, stream)
    assert refused and _named(limits.MAX_EVIDENCE_BYTES) in refused


def _values_line(values: int, phase: str = "x") -> bytes:
    """A record of exactly ``values`` JSON values as wire.tokens counts them, its zeros in lists none
    longer than one may be."""
    base = wire.tokens(wire.dumps({"event": "end", "phase": phase, "ok": True, "error": None,
                                   "data": {"n": []}}))  # the record's own values and the list of lists
    zeros = values - base + 1
    while zeros + math.ceil(zeros / limits.MAX_ITEMS) - 1 > values - base:  # each list but the first: one more
        zeros -= 1
    chunks = [b"[" + b",".join([b"0"] * min(limits.MAX_ITEMS, zeros - start)) + b"]"
              for start in range(0, zeros, limits.MAX_ITEMS)]
    line = wire.dumps({"event": "end", "phase": phase, "ok": True, "error": None, "data": {"n": []}})[:-1]
    line = line.replace(b'"n":[]', b'"n":[' + b",".join(chunks) + b"]")
    assert wire.tokens(line) == values
    return line


def test_json_values_of_one_record_and_of_all_the_evidence_at_the_limit_and_one_over():
    at = _values_line(limits.MAX_RECORD_VALUES)
    assert wire.tokens(at) == limits.MAX_RECORD_VALUES
    error, run = _parent_reads(at)
    assert error is None and _judge_reads(run) is None
    error, _ = _parent_reads(_values_line(limits.MAX_RECORD_VALUES + 1))
    assert error and _named(limits.MAX_RECORD_VALUES) in error
    refused, _ = _probe_sends({"n": [0] * limits.MAX_RECORD_VALUES})
    assert refused and _named(limits.MAX_RECORD_VALUES) in refused

    lines = [_values_line(limits.MAX_RECORD_VALUES, str(i)) for i in range(4)]
    assert sum(map(wire.tokens, lines)) == limits.MAX_EVIDENCE_VALUES
    assert _parent_reads(*lines)[0] is None
    error, _ = _parent_reads(*lines, b'{"event":"done"}')
    assert error and _named(limits.MAX_EVIDENCE_VALUES) in error


def _nested(depth: int):
    value = 0
    for _ in range(depth):
        value = [value]
    return value


def test_nesting_items_and_field_names_at_the_limit_and_one_over():
    """The record's own object is level 0, its data level 1: what the data holds may go this deep."""
    cases = [(lambda n: {"d": _nested(n - 2)}, limits.MAX_DEPTH, "nested too deeply"),
             (lambda n: {"i": [0] * n}, limits.MAX_ITEMS, "too many entries"),
             (lambda n: {"k" * n: 0}, limits.MAX_KEY, "field name")]
    for make, limit, words in cases:
        assert _probe_sends(make(limit))[0] is None, words
        error, run = _parent_reads(_forged(make(limit)))
        assert error is None and _judge_reads(run) is None, words
        refused, _ = _probe_sends(make(limit + 1))
        assert refused and words in refused and _named(limit) in refused
        error, _ = _parent_reads(_forged(make(limit + 1)))
        assert error and words in error and _named(limit) in error


def test_characters_of_a_string_are_cut_and_of_a_message_cut_by_the_judge_and_refused_by_the_grader():
    exact, longer = "s" * limits.MAX_TEXT, "s" * (limits.MAX_TEXT + 1)
    _, run = _parent_reads(_forged({"a": exact, "b": longer}))
    assert run.phases["forward"]["data"]["a"] == exact and len(run.phases["forward"]["data"]["b"]) == limits.MAX_TEXT
    assert text.bounded(longer) == run.phases["forward"]["data"]["b"]

    declared = declared_checks(exercises.get("exercise3"))

    def answer(message: str) -> bytes:
        checks = [{"id": d["id"], "title": d["title"], "topic": d["topic"], "status": "failed", "points": 0.0,
                   "max_points": d["points"], "message": message, "cause": None} for d in declared]
        return json.dumps({"checks": checks, "overran": None, "failed": None, "out_of_memory": False,
                           "usage": None}).encode()

    widest = "\U0001f600" * limits.MAX_MESSAGE  # every character as two JSON escapes
    assert len(answer(widest)) <= limits.MAX_ANSWER_BYTES
    assert exchange.read_answer(answer(widest), declared)["checks"][0].message == widest
    with pytest.raises(exchange.BadAnswer, match=_named(limits.MAX_MESSAGE)):
        exchange.read_answer(answer("m" * (limits.MAX_MESSAGE + 1)), declared)


# --------------------------------------------------------------------------- through real gradings

SOLUTION = exercises.get("exercise3").solution.read_text(encoding="utf-8")
# the values of exercise 3's own variables (attention 568, feed-forward 280, two norms 32): the layers
# below add variables of their own so that the layer's values in all are where the test puts them
OWN_VALUES = 880


def _with_variables(sizes: list[int]) -> str:
    """The solution with float64 variables of ``sizes`` more, each on the path to the output (times
    zero), so each has a gradient and a value after the steps that travel like any other's."""
    made = "".join(f"        self.extra_{i} = self.add_weight(shape=({size},), initializer='zeros', "
                   "dtype='float64')\n" for i, size in enumerate(sizes))
    used = " + ".join(f"keras.ops.sum(self.extra_{i})" for i in range(len(sizes)))
    source = SOLUTION.replace("        self.supports_masking = True\n        ### END SOLUTION",
                              f"        self.supports_masking = True\n{made}        ### END SOLUTION")
    source = source.replace("        return self.layernorm_2(proj_input + proj_output)",
                            f"        tiny = keras.ops.cast({used}, 'float32')\n"
                            "        return self.layernorm_2(proj_input + proj_output) + 0.0 * tiny")
    assert source.count("extra_0") == 2
    return source


FORGED_REPORT = '''
import json, os, time
shapes = {shapes!r}
variables = [{{"id": i, "shape": s, "dtype": "float32", "trainable": True, "path": f"v{{i}}"}}
             for i, s in enumerate(shapes)]
os.write(3, (json.dumps({{"event": "end", "phase": "variables", "ok": True, "seconds": 0.0, "error": None,
                          "data": {{"variables": variables, "layers": {{}}}}}}) + "\\n").encode())
time.sleep(1000)  # waits for secrets that never come
'''


@pytest.fixture(scope="module")
def limit_gradings(tmp_path_factory):
    """{name: (verdict, run)} of the gradings at and over the limits, all started at once."""
    folder = tmp_path_factory.mktemp("limits")
    at_array, rest = limits.MAX_ARRAY_ELEMENTS, limits.MAX_VARIABLE_VALUES - OWN_VALUES - limits.MAX_ARRAY_ELEMENTS
    sources = {
        "at_the_limits": (_with_variables([at_array, rest]), Settings(seed=3)),
        "values_over": (_with_variables([at_array, rest + 1]), Settings(seed=3, timeout=30)),
        "array_over": (_with_variables([at_array + 1, rest - 1]), Settings(seed=3, timeout=30)),
        "forged_report_over": (FORGED_REPORT.format(shapes=_shapes_holding(limits.MAX_VARIABLE_VALUES + 1)),
                               Settings(seed=3, timeout=30)),
    }
    gradings = {}
    for name, (source, settings) in sources.items():
        path = folder / f"{name}.py"
        path.write_text(source, encoding="utf-8")
        gradings[name] = Grading("exercise3", path, settings, runner=warm_runner())
    return {name: (grading.finish(), grading.run) for name, grading in gradings.items()}


def test_a_layer_at_the_limits_is_accepted_by_every_stage(limit_gradings):
    verdict, run = limit_gradings["at_the_limits"]
    assert verdict.status != "error", verdict.error
    assert run.protocol_error is None and not run.timed_out
    for phase in ("variables", "values", "forward", "gradients"):
        assert run.phases[phase]["ok"], (phase, run.phases[phase].get("error"))
    sizes = [math.prod(v["shape"]) for v in run.phases["variables"]["data"]["variables"]]
    assert sum(sizes) == limits.MAX_VARIABLE_VALUES and max(sizes) == limits.MAX_ARRAY_ELEMENTS
    sent = run.phases["gradients"]["data"]["gradients"]
    assert max(g.size for g in sent if g is not None) == limits.MAX_ARRAY_ELEMENTS
    assert all(c.status in ("passed", "failed") for c in verdict.checks), \
        [(c.id, c.status, c.message[:200]) for c in verdict.checks if c.status not in ("passed", "failed")]


@pytest.mark.parametrize("name, limit", [("values_over", limits.MAX_VARIABLE_VALUES),
                                         ("array_over", limits.MAX_ARRAY_ELEMENTS)])
def test_a_layer_just_over_a_limit_is_refused_by_the_probe_at_once_naming_it(limit_gradings, name, limit):
    verdict, run = limit_gradings[name]
    assert not run.timed_out and run.protocol_error is None
    error = run.phases["variables"]["error"]
    assert error["type"] == "LimitExceeded" and not error["internal"] and _named(limit) in error["message"]
    reported = [c for c in verdict.checks if "LimitExceeded" in c.message]
    assert reported and _named(limit) in reported[0].message and reported[0].status == "failed"
    assert all(c.status != "timeout" for c in verdict.checks)


def test_a_forged_report_over_a_limit_is_refused_by_the_parent_at_once_naming_it(limit_gradings):
    verdict, run = limit_gradings["forged_report_over"]
    assert verdict.status == "error" and not run.timed_out
    assert verdict.error.startswith("The submission could not be graded: the grading process sent evidence")
    assert _named(limits.MAX_VARIABLE_VALUES) in verdict.error and "time limit" not in verdict.error

