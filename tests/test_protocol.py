"""The parent trusts the child's evidence stream only when it is well formed."""

from __future__ import annotations

import json

from grader.sandbox import ChildRun, _parse


def _records(*records) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def test_well_formed_stream_is_read():
    run = ChildRun()
    _parse(_records({"event": "start", "phase": "load"}, {"event": "end", "phase": "load", "ok": True, "data": {}},
                    {"event": "done"}), run)
    assert run.protocol_error is None and run.finished and "load" in run.phases


def test_phase_reported_twice_is_untrusted():
    run = ChildRun()
    end = {"event": "end", "phase": "forward", "ok": True, "data": {}}
    _parse(_records(end, end), run)
    assert "twice" in run.protocol_error


def test_garbage_is_untrusted():
    run = ChildRun()
    _parse(b"PASSED\n", run)
    assert run.protocol_error


def test_unfinished_phase_is_the_last_started():
    run = ChildRun()
    _parse(_records({"event": "start", "phase": "forward"}, {"event": "end", "phase": "forward", "ok": True, "data": {}},
                    {"event": "start", "phase": "mask"}), run)
    assert run.unfinished_phase == "mask"
