"""Whatever bytes a grading process sends, every decoder and reader of the grader's ends in one of its
own errors, told as the evidence's fault: never a dead reader thread, never the student's import,
never a traceback on the student's terminal.

The parent's reader is driven as a grading runs it: a thread reading a real pipe into the record
parser (``read_records``), which answers a build report with the grader's own ``Grading._respond``
over a real control channel. Each case is evidence made invalid in one way (random bytes, every field
of a record and every part of an array at its extremes, nesting one past the limit, truncated
records, lines past their bounds), after a valid start; each must end with exactly one outcome, the
run untrusted with a reason naming the evidence, the control channel closed, the thread ended, nothing
on stderr. The judge's reading of a request and the grader's reading of an answer are driven the same
way. A few forged streams go through real gradings, cold (the command, whose stderr is the student's
terminal) and through the grading server. Seeded: the same cases every run.
"""

from __future__ import annotations

import base64
import json
import os
import random
import subprocess
import sys
import threading
import types

import numpy as np
import pytest

from grader import exercises
from grader.api import Grading, Settings
from grader.judging import exchange, judgment
from grader.protocol import limits, wire
from grader.sandbox.evidence import ChildRun, RecordParser, read_records
from grader.sandbox.pipes import write_all
from grader.sandbox.process import ControlChannel

EXERCISE = exercises.get("exercise3")
SEED = 20240611
CASES = 400  # random cases through the real reader; each is a thread and a pipe, a millisecond or so

ONE = base64.b64encode(np.zeros(1, np.float32).tobytes()).decode()  # one float32, as the wire writes it
ARRAY = {"__array__": "float32", "shape": [1], "data": ONE}
START = [{"event": "start", "phase": "runtime"},
         {"event": "end", "phase": "runtime", "ok": True, "seconds": 1.0, "error": None,
          "data": {"python": "3.11", "backend": "tensorflow", "sandbox": {}}},
         {"event": "start", "phase": "load"},
         {"event": "end", "phase": "load", "ok": True, "seconds": 0.1, "error": None,
          "data": {"class_name": "TransformerEncoder", "class_found": True, "is_class": True, "is_callable": True,
                   "is_layer_subclass": True, "bases": ["keras.layers.Layer"], "defined_names": ["TransformerEncoder"],
                   "signature_error": None, "signature": "TransformerEncoder(embed_dim, dense_dim, num_heads)"}},
         {"event": "start", "phase": "variables"}]
VARIABLES = {"event": "end", "phase": "variables", "ok": True, "seconds": 0.1, "error": None,
             "data": {"variables": [{"id": 0, "shape": [8, 8], "dtype": "float32", "trainable": True, "path": "k"}],
                      "layers": {}}}

EXTREME = [0, -1, 2 ** 63, -2 ** 63, 2 ** 64, 10 ** 30, 1.5, -0.0, 1e308, "", "x", " " * 3, None, True, False,
           [], {}, [[]], [None], {"": None}, [2 ** 63], "\u0000", "\ud800", "\U0001f600" * 3]
# (json text of a value no reader may accept, its name): numbers JSON has not, or JSON cannot hold
NOT_NUMBERS = [("NaN", "nan"), ("Infinity", "inf"), ("-Infinity", "-inf"), ("1e400", "1e400"),
               ("9" * 5000, "5000 digits")]
BAD_DTYPES = ["float16", "bfloat16", "object", "<f4", "float32 ", "FLOAT32", "", 5, None, ["float32"],
              {"float32": 1}, True, "complex64", "str"]
BAD_SHAPES = [[-1], [2 ** 63], [0, 2 ** 63], [0, 2 ** 64], [0, 2 ** 62, 2 ** 62], [2 ** 31, 0, 2 ** 40],
              [limits.MAX_ARRAY_ELEMENTS + 1], [0, limits.MAX_ARRAY_ELEMENTS + 1], [1.5], [1.0], ["1"], [True],
              [None], [[1]], "1", 1, None, {}, [1] * (limits.MAX_RANK + 1), [2, 3], [0], [1, 0]]
BAD_DATA = ["", "!!!!!!!!", "AAAA", ONE + "\n", ONE[:-1], ONE + "AAAA", " " + ONE[1:], ONE[:-1] + "A", 5, None,
            [ONE], {"data": ONE}, "A" * 100_000]


def _line(record) -> bytes:
    return (json.dumps(record, separators=(",", ":")) + "\n").encode()


class Reader:
    """The parent's evidence reader as a grading runs it, on a real pipe and thread, answering a build
    report over a real control channel."""

    def __init__(self):
        self.control_read, control_write = os.pipe()
        self.control = ControlChannel(lambda data: write_all(control_write, data), lambda: os.close(control_write))
        grading = types.SimpleNamespace(exercise=EXERCISE, seed=7, secrets=None, internal_error=None)
        self.parser = RecordParser(ChildRun(), lambda record: Grading._respond(grading, record), self.control)

    def read(self, data: bytes) -> ChildRun:
        evidence_read, evidence_write = os.pipe()
        thread = threading.Thread(target=read_records, args=(evidence_read, self.parser), daemon=True)
        thread.start()
        try:
            write_all(evidence_write, data)
        except BrokenPipeError:  # the reader ended early: what it made of the data is asserted below
            pass
        finally:
            os.close(evidence_write)
        thread.join()  # the reader ends with its pipe
        self.parser.finish()
        return self.parser.run

    def control_closed(self) -> bool:
        """Whether the control channel reaches its end (the secrets, if any, then nothing); a channel
        left open would leave the grading process waiting for secrets."""
        try:
            os.set_blocking(self.control_read, False)
            while True:
                try:
                    if not os.read(self.control_read, 1 << 20):
                        return True
                except BlockingIOError:
                    return False
        finally:
            os.close(self.control_read)


@pytest.fixture
def no_thread_dies(monkeypatch):
    died = []
    monkeypatch.setattr(threading, "excepthook", lambda args: died.append(repr(args.exc_value)))
    yield died
    assert died == []


def _untrusted(data: bytes, capfd) -> str:
    """The reason the reader gives for ``data``, asserting it is the one outcome: untrusted evidence."""
    reader = Reader()
    run = reader.read(data)
    assert reader.control_closed()
    assert run.protocol_error is not None, data[:300]
    assert "evidence" in run.protocol_error, run.protocol_error
    out = capfd.readouterr()
    assert out.err == "" and out.out == ""
    return run.protocol_error


# --------------------------------------------------------------------------- the cases

def _array_case(rng: random.Random) -> bytes:
    array = dict(ARRAY)
    part = rng.choice(["__array__", "shape", "data", "extra", "missing"])
    if part == "__array__":
        array["__array__"] = rng.choice(BAD_DTYPES)
    elif part == "shape":
        array["shape"] = rng.choice(BAD_SHAPES)
    elif part == "data":
        array["data"] = rng.choice(BAD_DATA)
    elif part == "extra":
        array[rng.choice(["offset", "strides", "dtype", ""])] = rng.choice(EXTREME)
    else:
        del array[rng.choice(["shape", "data"])]
    where = rng.choice([lambda a: {"output": a}, lambda a: {"trace": [{"index": 0, "parent": None, "output": a}]},
                        lambda a: {"outputs": [[a]]}, lambda a: {"after_steps": {"0": a}}])
    record = {"event": "end", "phase": "forward", "ok": True, "seconds": 0.1, "error": None, "data": where(array)}
    return b"".join(map(_line, START[:4])) + _line(record)


def _field_case(rng: random.Random) -> bytes:
    """A record whose checked field has a value it may not have."""
    end = dict(START[3], data=dict(START[3]["data"]))
    field = rng.choice(["event", "phase", "ok", "data", "error", "frames", "frame", "error_field", "load",
                        "runtime", "trace", "twice", "not_a_record"])
    if field == "event":
        end["event"] = rng.choice([v for v in EXTREME if v not in ("end",)] + ["END", "stop"])
    elif field == "phase":
        end["phase"] = rng.choice([v for v in EXTREME if not isinstance(v, str)])
    elif field == "ok":
        end["ok"] = rng.choice([v for v in EXTREME if not isinstance(v, bool)])
    elif field == "data":
        end["data"] = rng.choice([v for v in EXTREME if not isinstance(v, dict)])
    elif field == "error":
        end.update(ok=False, error=rng.choice([v for v in EXTREME if not isinstance(v, dict)]
                                              + [{"type": 5, "message": "m"}, {"type": "E", "message": []}]))
    elif field == "frames":
        frame = {"line": 1, "function": "f", "code": "c"}
        end.update(ok=False, error={"type": "E", "message": "m",
                                    "student_frames": rng.choice([[frame] * (limits.MAX_FRAMES + 1), "f", 5,
                                                                  {"0": frame}, [None], [[frame]]])})
    elif field == "frame":
        frame = {"line": 1, "function": "f", "code": "c"}
        frame[rng.choice(["line", "function", "code"])] = rng.choice([[1], {"x": 1}, 1.5, True])
        end.update(ok=False, error={"type": "E", "message": "m", "student_frames": [frame]})
    elif field == "error_field":
        end.update(ok=False, error={"type": "E", "message": "m", rng.choice(["traceback", "x", "locals"]): "t",
                                    "lineno": 1})
    elif field == "load":
        name = rng.choice(["defined_names", "bases", "class_found", "signature_error", "class_name"])
        end["data"][name] = rng.choice([5, {"a": 1}, [1, 2], ["n"] * (limits.MAX_NAMES + 1)] if name in (
            "defined_names", "bases") else [5, [], {}, 1.5])
    elif field == "runtime":
        record = dict(START[1], data={rng.choice(["python", "keras", "sandbox", "import_seconds"]): [1, 2]})
        return _line(START[0]) + _line(record)
    elif field == "trace":
        trace = rng.choice([[{"index": 1, "parent": None}], [{"index": 0, "parent": 0}],
                            [{"index": 0, "parent": None}, {"index": 1, "parent": 5}], [{"index": 0, "parent": True}],
                            [{"index": 0, "parent": None}, {"index": 1, "parent": 2 ** 63}], ["event"]])
        end["data"] = {"observation": {"trace": trace}}
    elif field == "twice":
        return b"".join(map(_line, START[:4])) + _line(START[3])
    else:
        return b"".join(map(_line, START[:3])) + _line(rng.choice([v for v in EXTREME if not isinstance(v, dict)]))
    return b"".join(map(_line, START[:3])) + _line(end)


def _variables_case(rng: random.Random) -> bytes:
    """A build report the grader cannot draw values for: the parent's answer refuses it."""
    report = json.loads(json.dumps(VARIABLES))
    variable = report["data"]["variables"][0]
    part = rng.choice(["shape", "dim", "id", "dtype", "trainable", "count", "values", "variables"])
    if part == "shape":
        variable["shape"] = rng.choice(["8", 8, None, {"0": 8}, [1] * (limits.MAX_RANK + 1)])
    elif part == "dim":
        variable["shape"] = [rng.choice([-1, 2 ** 63, 2 ** 64, 1.5, "8", None, True, [8],
                                         limits.MAX_ARRAY_ELEMENTS + 1])]
    elif part == "id":
        variable["id"] = rng.choice([-1, "0", None, 1.5, True, [0]])
    elif part == "dtype":
        variable["dtype"] = rng.choice([5, None, ["float32"], {}])
    elif part == "trainable":
        variable["trainable"] = rng.choice([1, "yes", None, []])
    elif part == "count":
        report["data"]["variables"] = [dict(variable, id=i, shape=[1]) for i in range(limits.MAX_VARIABLES + 1)]
    elif part == "values":
        report["data"]["variables"] = [dict(variable, id=i, shape=[limits.MAX_ARRAY_ELEMENTS]) for i in
                                       range(limits.MAX_VARIABLE_VALUES // limits.MAX_ARRAY_ELEMENTS + 1)]
    else:
        report["data"]["variables"] = rng.choice([None, 5, "v", {"0": variable}, [variable, variable], [None]])
    return b"".join(map(_line, START)) + _line(report)


def _number_case(rng: random.Random) -> bytes:
    token, _ = rng.choice(NOT_NUMBERS)
    place = rng.choice(['"seconds":{}', '"data":{{"x":{}}}', '"data":{{"x":[1,{}]}}'])
    body = '{"event":"end","phase":"forward","ok":true,"error":null,' + place.format(token)
    if not place.startswith('"data"'):
        body += ',"data":{}'
    return b"".join(map(_line, START[:4])) + (body + "}\n").encode()


def _nesting_case(rng: random.Random) -> bytes:
    depth = limits.MAX_DEPTH + rng.choice([1, 50, 100_000])  # past the limit
    inner = "[" * (depth - 2) + "0" + "]" * (depth - 2)  # the data's value at depth 2, one more per list
    return b"".join(map(_line, START[:4])) + \
        ('{"event":"end","phase":"forward","ok":true,"error":null,"data":{"d":' + inner + "}}\n").encode()


def _truncated_case(rng: random.Random) -> bytes:
    line = _line(dict(START[3], data=dict(START[3]["data"], output=ARRAY)))[:-1]
    return b"".join(map(_line, START[:3])) + line[:rng.randrange(1, len(line))]


def _random_bytes_case(rng: random.Random) -> bytes:
    size = rng.choice([1, 2, 7, 64, 1000, 70_000])
    data = bytes(rng.randrange(256) for _ in range(size))
    if not data.strip():
        data = b"\xff" + data
    return b"".join(map(_line, START[:rng.randrange(len(START) + 1)])) + data


GENERATORS = [_array_case, _field_case, _variables_case, _number_case, _nesting_case, _truncated_case,
              _random_bytes_case]


def _cases():
    rng = random.Random(SEED)
    return [(f"{i}-{generator.__name__[1:-5]}", generator(rng)) for i in range(CASES)
            for generator in [GENERATORS[i % len(GENERATORS)]]]


def test_every_invalid_stream_ends_the_real_reader_as_untrusted_evidence(no_thread_dies, capfd):
    reasons = {}
    for name, data in _cases():
        reasons[name] = _untrusted(data, capfd)
    # each refused by a decoder's own check, none by the reader's last catch
    assert [name for name, reason in reasons.items() if "while the grader read it" in reason] == []
    kinds = {name.split("-", 1)[1] for name in reasons}
    assert kinds == {generator.__name__[1:-5] for generator in GENERATORS}
    # the reasons say what was wrong, in the words for malformed evidence: not one form for every case
    assert len(set(reasons.values())) > 30


def test_nesting_at_the_limit_is_read_and_one_over_is_refused(no_thread_dies, capfd):
    def stream(depth: int) -> bytes:
        inner = "[" * (depth - 2) + "0" + "]" * (depth - 2)  # the data's value at depth 2, one more per list
        return b"".join(map(_line, START[:4])) + \
            ('{"event":"end","phase":"forward","ok":true,"error":null,"data":{"d":' + inner + "}}\n").encode()

    reader = Reader()
    run = reader.read(stream(limits.MAX_DEPTH))
    assert run.protocol_error is None and "forward" in run.phases
    assert "nested too deeply" in _untrusted(stream(limits.MAX_DEPTH + 1), capfd)


def test_lines_past_their_bounds_are_refused_before_they_are_kept(no_thread_dies, capfd):
    prefix = b"".join(map(_line, START[:4]))
    endless = prefix + b'{"event":"end","phase":"forward","data":"' + b"x" * limits.MAX_RECORD_BYTES  # no newline
    assert "a record is too long" in _untrusted(endless, capfd)
    many = prefix + b"[" + b"0," * limits.MAX_RECORD_VALUES + b"0]\n"
    assert "too many values in one record" in _untrusted(many, capfd)
    flood = prefix + (b'{"event":"start","phase":"' + b"p" * 1_000_000 + b'"}\n') * (
        limits.MAX_EVIDENCE_BYTES // 1_000_000 + 1)
    assert "more evidence than the grader accepts" in _untrusted(flood, capfd)


def test_a_reader_that_fails_makes_the_run_untrusted_and_does_not_die(no_thread_dies, capfd, monkeypatch):
    """Whatever fails inside the reading (here the parser itself, made to raise) ends the run untrusted."""
    reader = Reader()
    monkeypatch.setattr(reader.parser, "_line", lambda line: (_ for _ in ()).throw(RuntimeError("boom")))
    run = reader.read(_line(START[0]))
    assert run.protocol_error and "evidence" in run.protocol_error and "RuntimeError" in run.protocol_error
    assert reader.control_closed()
    assert capfd.readouterr().err == ""


def _request_cases(rng: random.Random):
    good = exchange.request("exercise3", EXERCISE.public_job(), {}, ChildRun(phases={"load": START[3]}), 30.0)
    yield good.replace(b'"run":{', b'"run":{"extra":1,')
    yield b"\n".join([good.split(b"\n")[0], b"[1]"])
    for _, data in _cases()[:150]:
        yield data
        cut = rng.randrange(1, len(good))
        yield good[:cut]
        yield good[:cut] + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 50))) + good[cut:]


def test_the_judges_reading_of_a_request_and_the_graders_of_an_answer_end_in_their_own_errors():
    rng = random.Random(SEED)
    declared = exercises.get("exercise3")
    from grader.judging.declarations import declared_checks

    checks = declared_checks(declared)
    read = 0
    for data in _request_cases(rng):
        try:
            exchange.read_request(data)
            read += 1
        except exchange.BadRequest:
            pass
        answered = judgment.judge_request(data) if rng.random() < 0.02 else None
        assert answered is None or answered["failed"] or answered["checks"] or answered["overran"]
        try:
            exchange.read_answer(data, checks)
        except exchange.BadAnswer:
            pass
        try:
            wire.loads(data, max_bytes=None, max_values=None)
        except wire.WireError:
            pass
    assert read < 10  # nearly every one of them is refused, by the readers' own errors and nothing else
    for value in EXTREME + [{"checks": [value]} for value in EXTREME] + [{"checks": [{"id": value}]} for value in
                                                                         EXTREME]:
        with pytest.raises(exchange.BadAnswer):
            exchange.read_answer(json.dumps(value).encode(), checks)


# --------------------------------------------------------------------------- through real gradings

FORGERIES = {
    "dimensions_numpy_cannot_make": b'{"event":"end","phase":"load","ok":true,"error":null,"data":{"a":'
                                    b'{"__array__":"float32","shape":[0,9223372036854775808],"data":""}}}\n',
    "nested_one_past_the_limit": b'{"event":"end","phase":"load","ok":true,"error":null,"data":{"d":'
                                 + b"[" * (limits.MAX_DEPTH - 1) + b"0" + b"]" * (limits.MAX_DEPTH - 1) + b"}}\n",
}


def _forger(data: bytes) -> str:
    """A submission that writes ``data`` on its evidence descriptor at import, then waits far longer than
    its time limit: only the parent's refusal ends it in time."""
    return f"import os, time\nos.write(3, {data!r})\ntime.sleep(1000)\n"


def _assert_told_as_evidence(verdict: dict, name: str) -> None:
    assert verdict["status"] == "error", (name, verdict)
    error = verdict["error"]
    assert error.startswith("The submission could not be graded: the grading process sent data that is not valid "
                            "evidence"), (name, error)
    assert "imported" not in error and "time limit" not in error and "exit code" not in error, (name, error)


@pytest.fixture(scope="module")
def forged_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("forged")
    paths = {}
    for name, data in FORGERIES.items():
        paths[name] = folder / name / "exercise3.py"
        paths[name].parent.mkdir()
        paths[name].write_text(_forger(data), encoding="utf-8")
    return paths


def test_forged_evidence_through_a_cold_grade_is_told_as_the_evidence_with_nothing_on_the_terminal(forged_files):
    environment = dict(os.environ, GRADE_SERVER="off", TF_CPP_MIN_LOG_LEVEL="3")
    commands = {name: subprocess.Popen([sys.executable, "-m", "grader", "exercise3", "--submission", str(path),
                                        "--json", "--timeout", "30"], stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, env=environment)
                for name, path in forged_files.items()}
    verdicts = {}
    for name, command in commands.items():
        out, err = command.communicate()
        assert err == b"", (name, err.decode(errors="replace")[-3000:])
        assert command.returncode == 2
        verdicts[name] = json.loads(out)
        _assert_told_as_evidence(verdicts[name], name)
    assert "nested too deeply" in verdicts["nested_one_past_the_limit"]["error"]


def test_forged_evidence_through_the_grading_server_is_told_as_the_evidence(forged_files):
    from grader.verdict import to_record

    from .test_server import Runtime

    runtime = Runtime()
    try:
        for name, path in forged_files.items():
            verdict = runtime.client().grade("exercise3", path, Settings(timeout=30.0))
            _assert_told_as_evidence(to_record(verdict), name)
        assert runtime.status()["graded"] >= len(forged_files)
        log = runtime.client().place.log
        assert "Traceback" not in (log.read_text(encoding="utf-8", errors="replace") if log.exists() else "")
    finally:
        runtime.close()
