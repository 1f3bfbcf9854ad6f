"""The parent trusts the child's evidence stream only when it is well formed."""

from __future__ import annotations

import json

import numpy as np

from grader import wire
from grader.sandbox import ChildRun, RecordParser, signal_name


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
