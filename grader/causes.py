"""Groups the checks a verdict failed by the one cause behind them, for every output that teaches.

One mistake often fails several checks: a shared norm fails the weight checks and the gradient
checks with the same explanation; a crash in ``compute_mask`` stops both the saving check and the
functional-model check with the same error; a call that raised keeps later checks from running.
``root_causes`` finds these groups from the verdict alone — identical messages, the same error at
the same line of the student's file, the same "Why it matters", a check named as the reason — so
the report, the hints and the platforms' messages can say each cause once. The verdict itself keeps
every check: grouping is how a cause is told, not what was graded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .verdict import TOPICS

CHECK_ID = re.compile(r"\b(?:" + "|".join(TOPICS) + r")\.[a-z_]+\b")
WHY = "Why it matters:"


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
    def points_lost(self) -> float:
        return sum(c.max_points - c.points for c in self.checks)

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
    """The body of a "Your code raised ..." message (the error and the lines of the student's file
    it passed through), whatever check reported it; "" for other messages."""
    lines = (message or "").splitlines()
    if not lines or not lines[0].startswith("Your code raised"):
        return ""
    return "\n".join(lines[1:]).strip()


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
    causes: dict[str, Cause] = {}
    for check in told:
        root = find(check.id)
        if root == check.id:
            causes[root] = Cause(check)
        else:
            causes[root].also.append(check)
    for check in ordered:
        if check.status == "skipped" and check.cause:
            root, hops = check.cause, 0
            while root in by_id and by_id[root].cause and hops < len(by_id):
                root, hops = by_id[root].cause, hops + 1
            if root in parent:
                causes[find(root)].unchecked.append(check)
            else:  # the check named as the reason passed, or is unknown: told on its own
                causes[check.id] = Cause(check)
    return sorted(causes.values(), key=lambda cause: position[cause.root.id])


def first_cause(checks) -> Cause | None:
    causes = root_causes(checks)
    return causes[0] if causes else None


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
