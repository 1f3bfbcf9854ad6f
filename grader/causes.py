"""Groups the checks a verdict failed by the one cause behind them, for every output that teaches.

One mistake often fails several checks: a shared norm fails the weight checks and the gradient
checks with the same explanation; a crash in ``compute_mask`` stops both the saving check and the
functional-model check with the same error; a call that raised keeps later checks from running; a
layer that is random at inference makes every comparison of its outputs fail. ``root_causes`` finds
these groups from the verdict alone — identical messages, the same error at the same line of the
student's file, the same "Why it matters", a check named as the reason, a failed check whose
``cause`` names the failure the evidence showed explains it — and tells each group by its root: the
check whose failure explains the most others in it, so the report, the hints and the platforms'
messages say each cause once, and the one behind the others first. The verdict itself keeps every
check: grouping is how a cause is told, not what was graded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .verdict import TOPICS

CHECK_ID = re.compile(r"\b(?:" + "|".join(TOPICS) + r")\.[a-z_]+\b")
WHY = "Why it matters:"
EXCEPTION_WORDS = ("Error", "Exception", "Exit", "Interrupt")
DOTTED_NAME = re.compile(r"[A-Za-z_.]+")
STUDENT_LINE = re.compile(r"^\s+at (?:line \d+|.+), in ")  # anchored, one way to match: linear
STUDENT_METHOD = re.compile(r"^at (?:line \d+|[^,\n]*), in (\w+)")  # the method of a stripped student line

# When the first check fails, a failure of the others follows from it: they use what it checks (a
# layer whose call returns no tensor fails everything after; a config without a key cannot be
# rebuilt or saved; attention that sees padding lets padding change the output). Their failures are
# told as the same cause, under it. "topic.*" stands for every check of the topic, "*" for all.
FOLLOWS = {
    "api.constructor": ("*",),
    "api.output_shape": ("*",),
    "api.model": ("*",),
    "config.base_keys": ("config.from_config", "config.keras_file"),
    "config.own_keys": ("config.from_config", "config.keras_file"),
    "config.from_config": ("config.keras_file",),
    "weights.one_norm": ("weights.trainable_list", "gradients.*", "forward.*"),
    "weights.two_norms": ("weights.trainable_list", "gradients.norms_differ", "gradients.norms_diverge"),
    "weights.three_norms": ("weights.trainable_list", "gradients.norms_differ"),
    "weights.norm_parameters": ("weights.trainable_list", "gradients.norms_differ", "gradients.norms_diverge"),
    "weights.two_tables": ("weights.trainable_list", "gradients.*", "forward.*"),
    "forward.sum": ("gradients.*",),
    "mask.values": ("mask.functional",),
    "mask.attention_mask_shape": ("mask.masks_keys", "mask.padding_invariance"),
    "mask.masks_keys": ("mask.padding_invariance",),
    "mask.cross_attention_mask": ("mask.encoder_padding_invariance",),
    "mask.end_to_end": ("mask.padding_invariance",),
    "forward.call_order": ("forward.post_norm",),
}


def _error_line(line: str) -> bool:
    """Whether ``line`` is an indented ``package.SomeError: message`` line (linear in the line)."""
    if not line[:1].isspace():
        return False
    name, separator, _ = line.strip().partition(": ")
    last = name.rpartition(".")[2]
    return bool(separator) and DOTTED_NAME.fullmatch(name) is not None and any(w in last for w in EXCEPTION_WORDS)


def explains(upstream, downstream) -> bool:
    """Whether the failure of check ``upstream`` explains that of ``downstream``: the evidence said so
    (``downstream.cause``), or the first is one the other depends on (``FOLLOWS``)."""
    return upstream.id != downstream.id and (downstream.cause == upstream.id or follows(upstream.id, downstream.id))


def _root(group: list, position: dict):
    """The check a group of failures is told by: one no other check of the group explains, of those
    the one that explains the most of the group (through the others it explains), then the first in
    report order."""
    def explained_by(check) -> set:
        found, pending = set(), [check]
        while pending:
            current = pending.pop()
            for other in group:
                if other.id not in found and explains(current, other):
                    found.add(other.id)
                    pending.append(other)
        found.discard(check.id)
        return found

    sources = [c for c in group if not any(explains(other, c) for other in group)] or group
    return min(sources, key=lambda c: (-len(explained_by(c)), not _about_its_crash(c), position[c.id]))


# The topic of the checks about a method of the student's layer: a crash in it is told by one of them
# (a compute_mask that raises fails the save too, and is a mask mistake)
METHOD_TOPICS = {"compute_mask": "mask", "get_config": "config", "from_config": "config"}


def _about_its_crash(check) -> bool:
    """Whether the check is of the topic of the method its message's crash happened in (the last line
    of the student's file it passed through)."""
    lines = [line for line in crash_of(check.message).splitlines()[1:]]
    method = STUDENT_METHOD.search(lines[-1]) if lines else None
    return method is not None and METHOD_TOPICS.get(method.group(1)) == check.topic


def follows(upstream: str, downstream: str) -> bool:
    """Whether a failure of ``upstream`` explains one of ``downstream`` (``FOLLOWS``)."""
    for pattern in FOLLOWS.get(upstream, ()):
        if pattern == "*" or pattern == downstream or (
                pattern.endswith(".*") and downstream.startswith(pattern[:-1])):
            return downstream != upstream
    return False


@dataclass
class Cause:
    """One reason checks did not pass: the check that tells it (``root``), the other checks that
    failed for the same reason (``also``) and those it kept from running (``unchecked``)."""

    root: object
    also: list = field(default_factory=list)
    unchecked: list = field(default_factory=list)

    @property
    def checks(self) -> list:
        return [self.root, *self.also, *self.unchecked]

    @property
    def followers(self) -> list:
        return [*self.also, *self.unchecked]


def report_order(checks) -> list:
    """The checks topic by topic, in the order of the checks within one."""
    checks = list(checks)
    ordered = [c for topic in TOPICS for c in checks if c.topic == topic]
    return ordered + [c for c in checks if c.topic not in TOPICS]


def why_of(message: str) -> str:
    for line in (message or "").splitlines():
        if line.startswith(WHY):
            return line[len(WHY):].strip()
    return ""


def crash_of(message: str) -> str:
    """The error a message reports the student's code raised — its first line and the lines of the
    student's file it passed through — whatever check reported it and in whatever words; "" when
    the message reports no error."""
    lines = (message or "").splitlines()
    error = next((line.strip() for line in lines if _error_line(line)), "")
    if not error:
        return ""
    return "\n".join([error] + [line.strip() for line in lines if STUDENT_LINE.match(line)])


def root_causes(checks) -> list[Cause]:
    """Every check that did not pass, in exactly one cause; the causes in report order."""
    ordered = report_order(checks)
    told = [c for c in ordered if c.status != "passed" and not (c.status == "skipped" and c.cause)]
    by_id = {c.id: c for c in ordered}
    parent = {c.id: c.id for c in told}

    def find(check_id: str) -> str:
        while parent[check_id] != check_id:
            parent[check_id] = parent[parent[check_id]]
            check_id = parent[check_id]
        return check_id

    def join(a: str, b: str) -> None:
        a, b = find(a), find(b)
        if a != b:
            first, second = sorted((a, b), key=lambda i: position[i])
            parent[second] = first

    position = {c.id: index for index, c in enumerate(ordered)}
    seen: dict[tuple, str] = {}
    for check in told:
        keys = [("message", check.message)] if check.message else []
        if check.status == "failed":
            if crash_of(check.message):
                keys.append(("crash", crash_of(check.message)))
            why = why_of(check.message)
            if len(why) > 30 and not why.lower().startswith("see "):  # a reference is no explanation
                keys.append(("why", why))
            for named in CHECK_ID.findall(why):
                if named in parent and named != check.id and by_id[named].status == "failed":
                    join(check.id, named)
        for key in keys:
            if key in seen:
                join(check.id, seen[key])
            else:
                seen[key] = check.id
    failed = [c for c in told if c.status == "failed"]
    for upstream in failed:
        for downstream in failed:
            if follows(upstream.id, downstream.id):
                join(upstream.id, downstream.id)
    for check in failed:  # the evidence showed another failure explains it
        if check.cause in parent and check.cause != check.id:
            join(check.id, check.cause)
    groups: dict[str, list] = {}
    for check in told:
        groups.setdefault(find(check.id), []).append(check)
    causes: dict[str, Cause] = {}
    for group in groups.values():
        root = _root(group, position)
        cause = Cause(root, [c for c in group if c is not root])
        for check in group:
            causes[check.id] = cause
    for check in ordered:
        if check.status == "skipped" and check.cause:
            root, hops = check.cause, 0
            while root in by_id and by_id[root].cause and hops < len(by_id):
                root, hops = by_id[root].cause, hops + 1
            if root in parent:
                causes[root].unchecked.append(check)
            else:  # the check named as the reason passed, or is unknown: told on its own
                causes[check.id] = Cause(check)
    unique = {id(cause): cause for cause in causes.values()}
    return sorted(unique.values(), key=lambda cause: position[cause.root.id])


def told_once(checks) -> dict[str, str]:
    """The message each check that did not pass gets in an output listing every check (nbgrader's
    cells, Gradescope's tests, PrairieLearn's): the first check of a cause keeps its message and
    names the checks it also fails; the other failed checks of that cause point to it instead of
    repeating it; checks kept from running keep their own one-line reason."""
    messages: dict[str, str] = {}
    for cause in root_causes(checks):
        root = cause.root
        message = root.message or ""
        if cause.also:
            message += f"\nAlso fails because of this: {', '.join(c.id for c in cause.also)}."
        messages[root.id] = message
        for check in cause.also:
            messages[check.id] = f"Same cause as {root.id} ({root.title}): its message says what to fix."
        for check in cause.unchecked:
            messages[check.id] = check.message
    return messages


# What a check says of a crash in code the student has not written yet (the judge's advice on a
# NotImplementedError raised by the stub's own line): the one sign of an untouched stub.
STILL_THE_STUB = "This part is still the stub: replace `raise NotImplementedError()` with your code."
NOT_ATTEMPTED = "not attempted: the file is still the stub"


def not_attempted(checks) -> bool:
    """Whether a graded verdict is the untouched stub's: no check passed, and every failure is one
    cause, a crash in the stub's own ``raise NotImplementedError()``. A stub with one part written
    passes a check or fails for another cause: that is an attempt."""
    checks = list(checks)
    if not checks or any(c.status == "passed" for c in checks):
        return False
    causes = root_causes(checks)
    return len(causes) == 1 and STILL_THE_STUB in (causes[0].root.message or "")


def error_headline(error: str | None) -> str:
    """The first line worth reading of a verdict's error: for an error the student's code raised
    ("Importing your file raised an error:" and the error under it), the error and where it
    happened ("NameError: name 'x' is not defined at line 12"); otherwise its first line."""
    lines = [line.strip() for line in (error or "").splitlines() if line.strip()]
    if not lines:
        return ""
    if not (lines[0].endswith(":") and len(lines) > 1):
        return lines[0]
    places = [line.split(", in ", 1)[0] for line in lines[2:] if line.startswith("at ") and ", in " in line]
    return f"{lines[1]} {places[-1]}" if places else lines[1]


def first_problem(verdict) -> str:
    """What a list of a class shows for one verdict: the first line of its error, or the check that
    tells its first cause, as the student's own report names it first ("" when nothing failed)."""
    if verdict.error:
        return error_headline(verdict.error)
    if not_attempted(verdict.checks):
        return NOT_ATTEMPTED
    causes = root_causes(verdict.checks)
    return f"{causes[0].root.id}: {causes[0].root.title}" if causes else ""
