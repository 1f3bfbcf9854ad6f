"""Forged evidence earns nothing: no weights, gradients, mask or forward check passes for a
submission that writes the evidence stream itself instead of computing the layer.

Each forger's top-level code takes over the child's evidence channel — through the stream
object found on the call stack, or by writing raw lines to the pipe it finds in /proc/self/fd
— and sends a well-formed stream, then leaves. The streams are well formed on purpose: the
parent accepts them (the verdict is "failed", not "error"), and only the verification of the
numbers stops them.
"""

from __future__ import annotations

import base64
import zlib

import pytest

from grader import exercises
from grader.protocol import wire
from grader.integrations.batch import run_batch
from grader.integrations.discovery import survey
from grader.api import Grading, Settings

from .conftest import grade_sources, warm_runner

COMPUTED = ("weights", "gradients", "mask", "forward")
EXERCISES = list(exercises.EXERCISES)

FIND_STREAM = '''
import os, sys, json, base64, zlib, fcntl


def _stream():
    frame = sys._getframe()
    while frame is not None:
        for value in list(frame.f_locals.values()):
            if type(value).__name__ == "EvidenceStream":
                return value
        frame = frame.f_back
    raise SystemExit("no stream")


def _raw_channels():
    """(evidence fd, control fd): the write-only and read-only pipes besides stdio."""
    write = read = None
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd < 3:
            continue
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
            mode = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE
        except OSError:
            continue
        if target.startswith("pipe:") and mode == os.O_WRONLY and write is None:
            write = fd
        elif target.startswith("pipe:") and mode == os.O_RDONLY and read is None:
            read = fd
    return write, read


class _Channel:
    def __init__(self, raw):
        self.raw = raw
        if raw:
            self.out, self.control = _raw_channels()
        else:
            self.stream = _stream()

    def send(self, record):
        if self.raw:
            os.write(self.out, (json.dumps(record) + "\\n").encode())
        else:
            self.stream.emit(record)

    def secrets(self):
        if not self.raw:
            return self.stream.receive()
        chunks = []
        while True:
            block = os.read(self.control, 1 << 20)
            if not block:
                break
            chunks.append(block)
        return json.loads(b"".join(chunks))
'''


def _forger(records: list[dict], mode: str, raw: bool) -> str:
    """A submission that sends ``records`` (a real run's evidence) as its own, after reading the
    parent's secrets: verbatim ("replay"), with the new inputs put where the old ones were
    ("substitute"), or with every output replaced by the new first input ("identity")."""
    blob = base64.b64encode(zlib.compress(b"".join(wire.dumps(r) for r in records))).decode()
    return FIND_STREAM + f'''
RECORDS = [json.loads(line) for line in zlib.decompress(base64.b64decode("{blob}")).splitlines()]
MODE = {mode!r}
channel = _Channel(raw={raw!r})
old_secrets = None


def _swap(value, old, new):
    if isinstance(value, dict) and "__array__" in value:
        for key, array in old.items():
            if isinstance(array, dict) and array.get("data") == value.get("data") and key in new:
                return new[key]
        return value
    if isinstance(value, dict):
        return {{k: _swap(v, old, new) for k, v in value.items()}}
    if isinstance(value, list):
        return [_swap(v, old, new) for v in value]
    return value


def _identity(value, first):
    if isinstance(value, dict):
        if "output" in value and isinstance(value.get("output"), dict) and "__array__" in value["output"]:
            value = dict(value, output=first)
        return {{k: _identity(v, first) for k, v in value.items()}}
    if isinstance(value, list):
        return [_identity(v, first) for v in value]
    return value


secrets = None
for record in RECORDS:
    if record.get("phase") == "runtime" or (record.get("phase") == "load" and record["event"] == "start"):
        continue
    if record["event"] == "done":
        continue
    if secrets is not None and MODE == "substitute":
        record = _swap(record, OLD, secrets)
    if secrets is not None and MODE == "identity":
        first = next((v for k, v in secrets.items() if k in ("inputs", "tokens")), None)
        record = _identity(record, first)
    channel.send(record)
    if record.get("event") == "end" and record.get("phase") == "variables":
        secrets = channel.secrets()
channel.send({{"event": "done"}})
sys.stdout.flush()
os._exit(0)
'''


def _recorded_run(exercise_id: str, folder) -> tuple[list[dict], dict]:
    """The evidence records and the secrets of a real run of the exercise's solution."""
    path = folder / f"{exercise_id}_solution.py"
    path.write_text(exercises.get(exercise_id).solution.read_text(encoding="utf-8"), encoding="utf-8")
    grading = Grading(exercise_id, path, Settings(seed=12345), runner=warm_runner())
    verdict = grading.finish()
    assert verdict.status == "passed", verdict.error
    run = grading.child.wait()
    ordered = []  # each phase's start record, then its end record, in the order the child sent them
    for name in run.started:
        ordered.append({"event": "start", "phase": name})
        if name in run.phases:
            ordered.append(run.phases[name])
    return ordered + [{"event": "done"}], grading.secrets


@pytest.fixture(scope="module")
def forgers(tmp_path_factory):
    folder = tmp_path_factory.mktemp("recorded")
    sources = {}
    for exercise_id in EXERCISES:
        records, secrets = _recorded_run(exercise_id, folder)
        old = {k: wire.plain(v) for k, v in secrets.items() if k != "values"}
        for mode in ("replay", "substitute", "identity"):
            for raw in (False, True):
                source = _forger(records, mode, raw).replace("_swap(record, OLD, secrets)",
                                                             f"_swap(record, {old!r}, secrets)")
                sources[(exercise_id, f"{mode}_{'raw' if raw else 'stream'}")] = source
    return sources


def _assert_earns_nothing(verdict, name):
    assert verdict.status in ("failed", "error"), (name, verdict.status)
    passed = [c.id for c in verdict.checks if c.status == "passed" and c.topic in COMPUTED]
    assert passed == [], (name, passed)
    computed = [c for c in verdict.checks if c.topic in COMPUTED]
    assert sum(c.points for c in computed) == 0, name


@pytest.mark.parametrize("exercise_id", EXERCISES)
def test_forgers_earn_no_computed_points(forgers, exercise_id, tmp_path):
    """Forked from the batch's warm worker, as `grade batch` grades them."""
    _earn_nothing(forgers, exercise_id, tmp_path, warm=True)


# through `grade`'s own fresh grading process: one exercise in the default tier, every one in the slow tier
@pytest.mark.parametrize("exercise_id", [pytest.param(e, marks=() if e == "exercise3" else pytest.mark.slow)
                                         for e in EXERCISES])
def test_forgers_earn_no_computed_points_through_grade(forgers, exercise_id, tmp_path):
    _earn_nothing(forgers, exercise_id, tmp_path, warm=False)


def _earn_nothing(forgers, exercise_id, tmp_path, warm: bool):
    sources = {name: source for (ex, name), source in forgers.items() if ex == exercise_id}
    verdicts = grade_sources(exercise_id, sources, tmp_path, warm=warm)
    for name, verdict in verdicts.items():
        _assert_earns_nothing(verdict, name)
    # the streams were accepted as well formed: the numbers, not the protocol, stopped them
    assert verdicts["replay_stream"].status == "failed", verdicts["replay_stream"].error
    assert verdicts["substitute_stream"].status == "failed", verdicts["substitute_stream"].error


def test_forgers_earn_no_computed_points_through_batch(forgers, tmp_path):
    folder = tmp_path / "class"
    folder.mkdir()
    for (exercise_id, name), source in forgers.items():
        if exercise_id == "exercise3" and name.endswith("stream"):
            (folder / f"{name}.py").write_text(source, encoding="utf-8")
    (folder / "honest.py").write_text(exercises.get("exercise3").solution.read_text(encoding="utf-8"),
                                      encoding="utf-8")
    results = run_batch("exercise3", survey([folder], "exercise3").submissions, tmp_path / "out", Settings(), jobs=2)
    by_id = {r.submission.id: r.verdict for r in results}
    assert by_id["honest"].status == "passed"
    for name, verdict in by_id.items():
        if name != "honest":
            _assert_earns_nothing(verdict, name)


def test_a_stream_that_claims_a_norm_it_computed_itself_earns_nothing(tmp_path):
    """A forger that reads the secrets and computes a LayerNorm of the inputs by hand gets a
    verified computation — with no attention in it, so no computed check."""
    records, _ = _recorded_run("exercise3", tmp_path)
    keep = [r for r in records if r.get("phase") in ("load", "construct", "variables", "values", "config",
                                                      "saving")]
    blob = base64.b64encode(zlib.compress(b"".join(wire.dumps(r) for r in keep))).decode()
    source = FIND_STREAM + f'''
import numpy as np
RECORDS = [json.loads(line) for line in zlib.decompress(base64.b64decode("{blob}")).splitlines()]
channel = _Channel(raw=False)
secrets = None


def arr(value):
    if isinstance(value, np.ndarray):  # the stream object decodes arrays already
        return value
    return np.frombuffer(base64.b64decode(value["data"]), dtype=value["__array__"]).reshape(value["shape"])


def tag(array):
    array = np.ascontiguousarray(array, dtype=np.float32)
    return {{"__array__": "float32", "shape": list(array.shape), "data": base64.b64encode(array.tobytes()).decode()}}


for record in RECORDS:
    if record["event"] == "start" and record["phase"] == "load":
        continue
    channel.send(record)
    if record.get("event") == "end" and record.get("phase") == "variables":
        secrets = channel.secrets()
        variables = record["data"]["variables"]
        gamma, beta = [str(v["id"]) for v in variables if v["shape"] == [8]][:2]
        x = arr(secrets["inputs"]).astype(np.float64)
        g, b = arr(secrets["values"][gamma]), arr(secrets["values"][beta])
        out = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-3) * g + b
        trace = [{{"index": 0, "parent": None, "layer": 0, "class": "TransformerEncoder", "kind": "container"}},
                 {{"index": 1, "parent": 0, "layer": 1, "class": "LayerNormalization", "kind": "norm",
                   "inputs": {{"inputs": tag(x)}}, "output": tag(out), "params": {{"gamma": int(gamma), "beta": int(beta)}},
                   "constants": {{"epsilon": 0.001, "last_axis": True, "rms_scaling": False}}}}]
        observation = {{"trace": trace, "output": tag(out)}}
        for phase in ("forward", "mask", "mask_perturbed"):
            channel.send({{"event": "start", "phase": phase}})
            data = {{"observation": observation, "layers": {{}}, "variables": variables,
                     "trainable": [v["id"] for v in variables], "supports_masking": True, "pooled": tag(out.mean(1))}}
            channel.send({{"event": "end", "phase": phase, "ok": True, "seconds": 0.1, "data": data, "error": None}})
channel.send({{"event": "done"}})
os._exit(0)
'''
    verdicts = grade_sources("exercise3", {"norm_by_hand": source}, tmp_path)
    verdict = verdicts["norm_by_hand"]
    assert verdict.status == "failed", verdict.error
    _assert_earns_nothing(verdict, "norm_by_hand")
    skipped = [c.message for c in verdict.checks if c.status == "skipped"]
    assert any("no attention" in m for m in skipped), skipped
