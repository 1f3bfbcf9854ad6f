"""The parent trusts the child's evidence stream only when it is well formed."""

from __future__ import annotations

import json
import os

import numpy as np

from grader.protocol import limits, wire
from grader.sandbox.evidence import ChildRun, RecordParser
from grader.sandbox.process import WAKE_SECONDS, GradingProcess, signal_name


def _records(*records) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def _parse(data: bytes) -> ChildRun:
    parser = RecordParser(ChildRun())
    parser.feed(data)
    parser.finish()
    return parser.run


END = {"event": "end", "phase": "load", "ok": True, "data": {}, "error": None}


def test_well_formed_stream_is_read():
    run = _parse(_records({"event": "start", "phase": "load"}, END, {"event": "done"}))
    assert run.protocol_error is None and run.finished and "load" in run.phases


def test_records_split_across_reads_are_read():
    data = _records({"event": "start", "phase": "load"}, END)
    parser = RecordParser(ChildRun())
    for i in range(0, len(data), 7):
        parser.feed(data[i:i + 7])
    parser.finish()
    assert parser.run.protocol_error is None and "load" in parser.run.phases


def test_phase_reported_twice_is_untrusted():
    run = _parse(_records(END, END))
    assert "twice" in run.protocol_error


def test_garbage_is_untrusted():
    assert _parse(b"PASSED\n").protocol_error


def test_unfinished_phase_is_the_last_started():
    run = _parse(_records({"event": "start", "phase": "forward"}, dict(END, phase="forward"),
                          {"event": "start", "phase": "mask"}))
    assert run.unfinished_phase == "mask"


def test_malformed_end_records_are_untrusted():
    for bad in ({"ok": "yes"}, {"data": []}, {"ok": False, "error": "boom"},
                {"ok": False, "error": {"type": 3, "message": "x"}},
                {"ok": False, "error": {"type": "E", "message": "x", "student_frames": [{"code": 5}]}}):
        assert _parse(_records(dict(END, **bad))).protocol_error, bad


def test_deeply_nested_data_is_untrusted_not_a_crash():
    deep = b'{"event": "end", "phase": "load", "ok": true, "error": null, "data": ' + b"[" * 100000 + b"]" * 100000 + b"}\n"
    assert "nested" in _parse(deep).protocol_error


def test_a_record_of_countless_small_values_is_refused_before_it_is_parsed():
    import tracemalloc

    bomb = b'{"event": "end", "phase": "x", "ok": true, "error": null, "data": [' + b"[]," * 20_000_000 + b"[]]}\n"
    tracemalloc.start()
    try:
        run = _parse(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "more evidence than the grader accepts" in run.protocol_error
    assert peak < 4 * len(bomb)  # the line's bytes, never the gigabytes its lists would take
    line = b'{"event": "end", "phase": "x", "ok": true, "error": null, "data": [' + b"[]," * 300_000 + b"[]]}\n"
    assert "too many values in one record" in _parse(line).protocol_error


def test_many_records_of_many_values_are_refused_together():
    line = _records({"event": "start", "phase": "load", "filler": [0] * 200_000})
    run = _parse(line * 6)
    assert "more evidence than the grader accepts" in run.protocol_error


def test_non_finite_numbers_are_untrusted():
    assert _parse(b'{"event": "done", "x": NaN}\n').protocol_error


def test_arrays_round_trip_and_bad_arrays_are_refused():
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert np.array_equal(wire.loads(wire.dumps({"a": array}))["a"], array)
    record = wire.plain({"a": array})["a"]
    for broken in (dict(record, shape=[4, 3]), dict(record, data="!!"), dict(record, __array__="object"),
                   dict(record, shape=[-1])):
        try:
            wire.decode(broken)
        except wire.WireError:
            continue
        raise AssertionError(broken)


def test_every_signal_has_a_name():
    import signal

    assert signal_name(9) == "SIGKILL"
    assert signal_name(signal.SIGRTMIN + 3) == "SIGRTMIN+3"
    assert signal_name(200) == "signal 200"


def test_records_the_parent_reads_itself_must_have_their_form():
    load = {"event": "end", "phase": "load", "ok": True, "error": None, "data": {}}
    failed = dict(END, phase="forward", ok=False, error={"type": "E", "message": "m", "student_frames": []})
    for bad in (dict(load, data={"defined_names": [1, 2]}), dict(load, data={"bases": "keras"}),
                dict(load, data={"class_found": "yes"}), dict(END, phase="runtime", data={"sandbox": []}),
                dict(failed, error=dict(failed["error"], lineno="one")),
                dict(failed, error=dict(failed["error"], student_frames=[{"line": {"x": 1}}])),
                dict(failed, error=["not", "an", "object"])):
        run = _parse(_records(bad))
        assert run.protocol_error and "malformed" in run.protocol_error, bad
    assert _parse(_records(dict(load, data={"defined_names": ["A"], "class_found": True}), failed)).protocol_error is None


def test_a_wait_status_becomes_a_returncode_and_a_name():
    import signal

    from grader.judge.evidence import describe_end
    from grader.sandbox.process import end_run, status_returncode

    assert status_returncode(3 << 8) == 3
    assert status_returncode(signal.SIGKILL) == -signal.SIGKILL
    assert status_returncode(None) is None
    for number in range(1, signal.SIGRTMAX + 1):
        run = end_run(ChildRun(started=["load"]), 0.0, status_returncode(number), "", "")
        assert run.signal_name and describe_end(run).startswith("the grading process was ended by")
    run = end_run(ChildRun(started=["load"]), 0.0, -(signal.SIGRTMIN + 5), "", "")
    assert "SIGRTMIN+5 (a real-time signal)" in describe_end(run)
    assert "without a status" in describe_end(end_run(ChildRun(), 0.0, None, "", ""))


def test_the_status_pipe_is_read_strictly():
    import os

    from grader.sandbox.process import _read_status

    for data, expected in ((b'{"status": 9, "ended": "stopped"}\n', {"status": 9, "ended": "stopped"}),
                           (b"garbage", {}), (b'{"status": "9"}', {}), (b'{"status": true}', {}), (b"", {}),
                           (b"[1]", {})):
        read, write = os.pipe()
        os.write(write, data)
        os.close(write)
        assert _read_status(read) == expected, data
        os.close(read)


def test_the_sandbox_line_claims_only_what_the_report_says():
    from grader.sandbox import confinement

    assert confinement.describe(None).startswith("time and memory limits only; not applied: every measure")
    assert confinement.describe({"landlock": "yes"}).startswith("time and memory limits only")
    report = {"landlock": {"applied": False, "reason": "Landlock is not available"}, "seccomp": True,
              "namespaces": {"user": False, "pid": False, "mount": False, "network": False, "ipc": False},
              "reaper": "subreaper", "own_proc": False, "write_limit": None, "file_limit": 1 << 28,
              "process_limit": None, "uid": 1000, "from_root": False, "capabilities": 0,
              "environment": ["PATH", "HOME", "SECRET_TOKEN"],
              "refused": {"pid": "Operation not permitted", "landlock": "Landlock is not available"}}
    line = confinement.describe(report)
    assert "Landlock ABI" not in line and "own PID" not in line and "minimal environment" not in line
    assert "killed at the end (subreaper)" in line and "seccomp: no sockets" in line
    assert "not applied: Landlock (Landlock is not available); PID namespace (Operation not permitted)" in line


def test_a_call_trace_whose_links_the_tracer_could_not_have_made_is_untrusted():
    def forward(trace):
        return _records(dict(END, phase="forward", data={"calls": [{"observation": {"trace": trace}}]}))

    made = [{"index": 0, "parent": None}, {"index": 1, "parent": 0}, {"index": 2, "parent": 1}]
    assert _parse(forward(made)).protocol_error is None
    for bad in ([{"index": 0, "parent": 1}, {"index": 1, "parent": 0}],  # a cycle
                [{"index": 0, "parent": None}, {"index": 1, "parent": 1}],  # its own parent
                [{"index": 0, "parent": None}, {"index": 1, "parent": 7}],  # out of range
                [{"index": 1, "parent": None}],  # out of order
                [{"index": 0, "parent": True}]):
        assert "call trace" in _parse(forward(bad)).protocol_error, bad


def test_long_field_names_and_overlong_records_are_untrusted():
    key = "k" * 2000 + "\U0001f600"  # a name of 4-byte characters would be kept for the whole grading
    assert "field name" in _parse(_records(dict(END, data={key: 1}))).protocol_error
    long = b'{"event": "end", "phase": "x", "ok": true, "error": null, "data": {"a": "' + \
        b"x" * limits.MAX_RECORD_BYTES + b'"}}\n'
    assert "too long" in _parse(long).protocol_error


class _Idle(GradingProcess):
    """A grading process whose keeper is a process that never answers: the clocks alone decide."""

    def _launch(self, descriptors: list[int], environment: dict) -> int:
        import subprocess

        stdin, stdout, stderr, *kept = descriptors
        self._proc = subprocess.Popen(["sleep", "600"], stdin=stdin, stdout=stdout, stderr=stderr, pass_fds=kept)
        return os.pidfd_open(self._proc.pid)

    def _reap(self) -> None:
        self._proc.wait()

    def _abandon(self) -> None:
        super()._abandon()
        if getattr(self, "_proc", None) is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()


RUNTIME_READY = {"event": "end", "phase": "runtime", "ok": True, "data": {}, "error": None}


def test_the_submissions_clock_starts_when_the_runtime_is_ready_not_when_the_process_starts():
    """Before the grading process reports its runtime ready (the grader's own import and confinement),
    only the start-up allowance runs; from then on the submission's limit, in full."""
    child = _Idle({"submission": ""}, "", timeout=1.0, memory_mb=512)
    try:
        assert child.seconds_left() > 1.0  # the start-up allowance, far above the submission's second
        assert child.next_look() <= WAKE_SECONDS  # a waiter looks again soon: the clock may change
        child._parser.feed(_records({"event": "start", "phase": "runtime"}, RUNTIME_READY))
        assert 0.0 <= child.seconds_left() <= 1.0
        run = child.wait()  # the sleeping keeper is ended at the submission's limit
        assert run.timed_out and not run.startup_timed_out
        assert run.time_limit == 1.0 and run.student_seconds is not None and run.student_seconds >= 1.0
    finally:
        child.kill()


def test_a_start_up_that_never_ends_is_the_machines_failure(monkeypatch):
    from grader.sandbox import process

    monkeypatch.setattr(process, "STARTUP_SECONDS", 0.5)
    child = _Idle({"submission": ""}, "", timeout=300.0, memory_mb=512)
    run = child.wait()
    assert run.timed_out and run.startup_timed_out and run.student_seconds is None


def test_an_array_keeps_its_shape_across_the_wire_a_scalar_included():
    sent = {"scalar": np.array(4, dtype=np.int32), "strided": np.ones((3, 4))[:, ::2], "empty": np.zeros((0, 3))}
    received = wire.loads(wire.dumps(sent))
    assert {k: v.shape for k, v in received.items()} == {"scalar": (), "strided": (3, 2), "empty": (0, 3)}
