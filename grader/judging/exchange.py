"""What the grader sends a judge and what a judge answers.

A request is JSON lines (``grader.protocol.wire``): a header with the exercise, the
public job, the secrets the grader drew, the checks' time limit and how the
grading process ended, then one line per phase record, each exactly as it
passed the grader's checks on arrival. An answer is one JSON object: the
results of the checks, or why there are none. The grader reads an answer only
after checking its form (``read_answer``): a judge runs the grader's own code,
but on data a submission chose. Both readers are total: whatever the bytes,
``read_request`` returns or raises ``BadRequest``, ``read_answer`` returns or
raises ``BadAnswer``. Their bounds are the grader's (``grader.protocol.limits``):
a request is at most ``MAX_REQUEST_BYTES``, derived from the evidence's and the
secrets' own, an answer at most ``MAX_ANSWER_BYTES``, derived from the message's.
"""

from __future__ import annotations

import json
import math

from ..protocol import limits, text, wire
from ..sandbox.evidence import ChildRun
from ..verdict import CHECK_STATUSES, TOPICS, CheckResult

RUN_FIELDS = ("started", "finished", "timed_out", "memory_exceeded", "returncode", "signal_name", "stdout",
              "stderr", "seconds", "protocol_error")


class BadAnswer(ValueError):
    """A judge's answer that does not have the form the grader expects."""


class BadRequest(ValueError):
    """A request a judge cannot read."""


def request(exercise_id: str, job: dict, secrets: dict | None, run: ChildRun, checks_timeout: float) -> bytes:
    header = {"exercise": exercise_id, "job": job, "secrets": secrets or {}, "checks_timeout": float(checks_timeout),
              "run": {name: getattr(run, name) for name in RUN_FIELDS}}
    lines = [wire.dumps(header)]
    lines += [wire.dumps(record) for record in run.phases.values()]
    return b"".join(lines)


def read_request(data: bytes) -> tuple[dict, ChildRun]:
    """(header, run) from a request: the judge's side. The grader checked every record against the
    bounds of one record and of the evidence as it forwards them (``records.arrived``), and the request
    as a whole is bounded by what the judge reads, so the lines are not bounded again one by one.
    Raises BadRequest, and nothing else."""
    try:
        if len(data) > limits.MAX_REQUEST_BYTES:
            raise BadRequest(f"a request of {len(data):,} bytes, more than the {limits.MAX_REQUEST_BYTES:,} a judge "
                             "reads")
        first, _, rest = data.partition(b"\n")
        header = wire.loads(first, max_bytes=None, max_values=None)
        if not isinstance(header, dict) or not isinstance(header.get("run"), dict) or \
                set(header["run"]) != set(RUN_FIELDS) or not isinstance(header.get("exercise"), str) or \
                header["exercise"] not in _exercise_ids() or \
                not isinstance(header.get("job"), dict) or not isinstance(header.get("secrets"), dict) or \
                not isinstance(header.get("checks_timeout"), float) or not header["checks_timeout"] > 0:
            raise BadRequest("the request's header is malformed")
        run = ChildRun(**header.pop("run"))
        for line in rest.split(b"\n"):
            if line.strip():
                record = wire.loads(line, max_bytes=None, max_values=None)
                if not isinstance(record, dict) or not isinstance(record.get("phase"), str):
                    raise BadRequest("a record of the request has no phase")
                run.phases[record["phase"]] = record
        return header, run
    except BadRequest:
        raise
    except wire.WireError as exc:
        raise BadRequest(f"the request is not the evidence the grader forwards ({exc})") from None
    except Exception as exc:  # noqa: BLE001 - whatever else the bytes provoke
        raise BadRequest(f"the request cannot be read ({type(exc).__name__})") from None


def _exercise_ids() -> set[str]:
    from .. import exercises

    return set(exercises.EXERCISES)


def answer(checks: list[CheckResult] | None = None, overran: str | None = None, failed: str | None = None,
           out_of_memory: bool = False) -> dict:
    return {
        "checks": [dict(c.to_json(), message=_cut(c.message), cause=c.cause) for c in checks or []],
        "overran": overran, "failed": failed, "out_of_memory": bool(out_of_memory),
    }


def encode(answer: dict, peak_mb: float | None = None, cpu_seconds: float | None = None) -> bytes:
    """An answer as the judge sends it, with what judging cost it (its peak memory and CPU time)."""
    usage = {"peak_mb": peak_mb, "cpu_seconds": cpu_seconds} if peak_mb is not None else None
    return json.dumps(dict(answer, usage=usage)).encode("utf-8")


def _cut(message: str) -> str:
    return text.cut(message, limits.MAX_MESSAGE, "\n[… message cut]")


def read_answer(data: bytes, declared: list[dict]) -> dict:
    """The answer, with its checks as CheckResults, every field checked against the checks the
    exercise declares (``declared``); raises BadAnswer, and nothing else."""
    with wire.only(BadAnswer, "it cannot be read"):
        return _read_answer(data, declared)


def _read_answer(data: bytes, declared: list[dict]) -> dict:
    if len(data) > limits.MAX_ANSWER_BYTES:
        raise BadAnswer(f"it is longer than the {limits.MAX_ANSWER_BYTES:,} bytes a judge may answer")
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise BadAnswer("not JSON") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("checks"), list):
        raise BadAnswer("no list of checks")
    for name in ("overran", "failed"):
        if raw.get(name) is not None and not isinstance(raw[name], str):
            raise BadAnswer(f"{name} is not text")
    by_id = {d["id"]: d for d in declared}
    checks, seen = [], set()
    for item in raw["checks"]:
        checks.append(_check(item, by_id, seen))
    ended_early = raw.get("overran") is not None or raw.get("failed") is not None
    if not ended_early and raw.get("out_of_memory") is not True and seen != set(by_id):
        # a judge that stopped short of a check says why, or its answer is refused
        missing = [d["id"] for d in declared if d["id"] not in seen]
        raise BadAnswer(f"it holds {len(seen)} of the exercise's {len(by_id)} checks (not {', '.join(missing[:3])}"
                        + (", ..." if len(missing) > 3 else "") + ")")
    if ended_early and checks:
        raise BadAnswer("it gives results and says the judging did not finish")
    usage = raw.get("usage")
    if usage is not None and not (isinstance(usage, dict) and all(
            isinstance(usage.get(k), (int, float)) and not isinstance(usage.get(k), bool)
            and math.isfinite(usage[k]) and usage[k] >= 0 for k in ("peak_mb", "cpu_seconds"))):
        raise BadAnswer("what judging cost is malformed")
    return {"checks": checks, "overran": _text_or_none(raw.get("overran")), "failed": _text_or_none(raw.get("failed")),
            "out_of_memory": raw.get("out_of_memory") is True, "usage": usage}


def _text_or_none(value: str | None) -> str | None:
    return None if value is None else text.cut(value, limits.MAX_MESSAGE)


def _check(item, by_id: dict, seen: set) -> CheckResult:
    if not isinstance(item, dict):
        raise BadAnswer("a check is not an object")
    check_id = item.get("id")
    if not isinstance(check_id, str) or check_id not in by_id or check_id in seen:
        raise BadAnswer(f"check {str(check_id)[:80]!r} is not one of the exercise's, or is repeated")
    seen.add(check_id)
    declared = by_id[check_id]
    status, points, message, cause = item.get("status"), item.get("points"), item.get("message"), item.get("cause")
    topic = item.get("topic")
    if not isinstance(status, str) or status not in CHECK_STATUSES or not isinstance(topic, str) \
            or topic not in TOPICS or topic != declared["topic"]:
        raise BadAnswer(f"check {check_id} has an unknown status or topic")
    if not isinstance(points, (int, float)) or isinstance(points, bool) or not math.isfinite(points):
        raise BadAnswer(f"check {check_id} has no number of points")
    if points != (declared["points"] if status == "passed" else 0.0):
        raise BadAnswer(f"check {check_id} has points it cannot have")
    if not isinstance(message, str) or len(message) > limits.MAX_MESSAGE:
        raise BadAnswer(f"check {check_id} has no message, or one longer than the {limits.MAX_MESSAGE:,} characters "
                        "a message may have")
    if cause is not None and (not isinstance(cause, str) or cause not in by_id):
        raise BadAnswer(f"check {check_id} names an unknown cause")
    return CheckResult(id=check_id, title=declared["title"], topic=declared["topic"], status=status,
                       points=float(points), max_points=float(declared["points"]), message=message, cause=cause)
