"""Fixtures and check logic shared by the layer exercises.

A check module imports the fixtures it uses from here and wraps these
``assert_*`` functions in its own ``@check`` functions, with the numbers and
words of its exercise. Everything a check accepts as true comes from a call
the parent replayed with its own numbers (``analysis``); what the child merely
claims (class names, trainable flags, configs) only shapes messages, or is a
config or API fact.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import pytest

from . import analysis, budget, reference
from .evidence import format_student_error
from .framework import fail, output_cause
from .ops import View, role_shape

LAYER_NAME = "layer_under_test"
DENSE_KINDS = ("dense", "conv", "einsum_dense")  # what computes a Dense at each position

def shared_norm_why(count: int) -> str:
    """Why each of ``count`` residual blocks needs a norm of its own, naming the exercise's residuals."""
    residuals = ("the attention residual, the feed-forward residual" if count < 3 else
                 "the self-attention residual, the cross-attention residual, the feed-forward residual")
    return (
        "Each LayerNormalization learns its own scale (gamma) and shift (beta). Each norm sees a "
        f"different residual sum — {residuals} — whose "
        "statistics differ, so each needs parameters fitted to its own input. The original "
        "Transformer gives every residual sub-block its own norm, and one shared norm couples the "
        "updates: every step moves gamma and beta for all positions at once."
    )


ONE_NORM_WHY = (
    "A LayerNormalization learns its own scale (gamma) and shift (beta), fitted to the residual sum it "
    "normalises; without them trainable it can only standardise, and the block cannot learn the scale "
    "its output should have."
)
SHARED_NORM_SEE = "See weights.norm_parameters and gradients.norms_differ: one shared norm, one explanation."
PADDING_WHY = "Attention to padding lets the amount of padding in a batch change how real tokens are encoded."
KIND_WORDS = {"attention": "attention", "norm": "norm", "dense": "dense", "conv": "dense", "einsum_dense": "dense",
              "embedding": "embedding", "add": "add", "activation": "activation", "relu": "relu"}

# --------------------------------------------------------------------------- fixtures


@pytest.fixture
def job(evidence, request):
    return whole_job(evidence, request)


def whole_job(evidence, request) -> dict:
    """The whole job. When the child never got its secret inputs (the layer failed to build), the
    check is not run on a job without them: it gets the error that stopped it instead."""
    whole = evidence.job
    if "values" not in whole:
        marker = request.node.get_closest_marker("check")
        evidence.phase("values", marker.kwargs["id"] if marker else "")
        analysis.not_checked("the grader could not give your layer its inputs", "api.output_shape")
    return whole


@pytest.fixture
def dims(evidence):
    return evidence.public_job["dims"]


@pytest.fixture
def forward(evidence):
    return evidence.phase("forward", "api.output_shape")


@pytest.fixture
def values(evidence):
    return analysis.values(evidence)


@pytest.fixture
def gradients(evidence):
    return evidence.phase("gradients", "gradients.all_variables")


@pytest.fixture
def config_phase(evidence):
    return evidence.phase("config", "config.from_config")


@pytest.fixture
def config(evidence):
    data = evidence.partial("config")
    if data is None or "config" not in data:
        return evidence.phase("config", "config.base_keys")["config"]
    return data["config"]


def padding(job, key: str = "mask") -> np.ndarray:
    """The job's (batch, seq) padding mask: True for real positions."""
    return np.asarray(job[key], dtype=bool)


@dataclass
class Structure:
    """The steps of a call, as the messages name them: the verified ones, or else the layers the
    child claims the call ran. A check may fail on claims — a failure needs no proof — but may
    pass only on a verified call (``confirm``)."""

    observed: analysis.Observed | None
    claimed: list = None  # pseudo steps from the trace, when the call is not verified
    see: str = ""

    @property
    def verified(self) -> bool:
        return self.observed is not None and self.observed.verified

    @property
    def steps(self):
        return [s for s in self.of(*KIND_WORDS) if s.kind in KIND_WORDS]

    def of(self, *kinds: str):
        if self.verified:
            return self.observed.steps(*kinds)
        return [s for s in self.claimed or [] if s.kind in kinds]

    def confirm(self) -> None:
        """Called when a check found nothing wrong: passing needs the verified call."""
        if not self.verified:
            analysis.not_checked("the grader could not verify your layer's computation from the numbers it chose",
                                 self.see)

    @property
    def norm_steps(self):
        return self.of("norm")

    @property
    def dense_steps(self):
        return self.of(*DENSE_KINDS)

    @property
    def sequence(self) -> list[str]:
        return [KIND_WORDS[s.kind] for s in self.of("attention", "norm", *DENSE_KINDS, "embedding")]

    def role_shapes(self) -> dict:
        """{variable key: its shape in the role it plays} for the variables of the verified call whose
        role has another shape than the variable (a Conv1D kernel that is a Dense kernel); none for a
        call that is only claimed."""
        if not self.verified:
            return {}
        return {str(key): key.shape for step in self.observed.steps(*KIND_WORDS)
                for key in step.params.values() if isinstance(key, View)}

    def describe(self) -> str:
        return " → ".join(self.sequence) or "no attention, norm, dense or embedding layer at all"


# --------------------------------------------------------------------------- api


def assert_constructor(evidence, class_name: str, sizes: dict) -> None:
    construct = evidence.phase("construct", "api.constructor")
    if construct["positional_error"]:
        args = ", ".join(str(v) for v in sizes.values())
        fail(
            format_student_error(f"{class_name}({args}) raised", construct["positional_error"]),
            f"{class_name}({', '.join(sizes)}) in that order, also by keyword.",
            "Code that uses your layer (and the book) passes the sizes positionally.",
        )


def assert_output_shape(forward: dict, expected: tuple, what: str) -> None:
    output = (forward.get("observation") or {}).get("output")
    if not isinstance(output, np.ndarray):
        kind = output.get("not_a_tensor") if isinstance(output, dict) else type(output).__name__
        fail(
            f"call returned a {kind}, not a tensor"
            + (": does call() end with `return <the output>`?" if kind == "NoneType" else "."),
            f"one tensor of shape {expected} {what}.",
            "A layer maps tensors to a tensor, so layers can be stacked.",
        )
    if tuple(output.shape) != tuple(expected):
        fail(
            f"output of shape {tuple(output.shape)}.",
            f"shape {expected} {what}.",
            "The layers after this one depend on this shape.",
        )
    if not np.all(np.isfinite(output)):
        fail("the output holds NaN or infinite values.", "finite numbers.", "NaNs poison training.")


# --------------------------------------------------------------------------- the verified calls


def attends_over(observed: analysis.Observed, *sources: str) -> bool:
    """Whether the verified call runs an attention whose query and value come from its inputs
    ``sources`` and on which its output depends: the part of the layer no shortcut can fake."""
    program = observed.program
    if program is None:
        return observed.function is not None  # identified by its parts' roles: attention included
    for step in program.of_kind("attention"):
        if not program.output_depends_on(step):
            continue
        query, value = step.inputs.get("query"), step.inputs.get("value")
        if query is None or value is None:
            continue
        if all(name in program.sources(step) for name in sources):
            return True
    return False


NO_ATTENTION_FOUND = (
    "the grader verified your layer's computation but found no attention over its inputs in it to read this "
    "from (it recognises MultiHeadAttention, and an attention written as three Dense projections whose outputs "
    "operations combine, followed by a Dense)"
)


def fail_no_attention_found(observed_steps: str, expected: str) -> None:
    """The forward check's failure for a verified call in which the grader found no attention: what it
    could not do, not a verdict on the computation, and which checks judged the behaviour anyway."""
    fail(
        f"the grader recomputed your layer ({observed_steps}) but found no attention in it that it can "
        "compare with the exercise's: it recognises MultiHeadAttention (or a subclass), and an attention written "
        "as three Dense projections of the query, the keys and the values whose outputs only your operations "
        "combine, followed by one Dense on the joined heads. The checks of what your layer does (gradients, "
        "padding, inference, config) judged it without this.",
        expected,
        "The forward, weight and mask-structure checks compare your layer's parts with the exercise's; without "
        "the attention among them they cannot be applied.",
    )


def verified_layer(observed: analysis.Observed, see: str, *sources: str) -> analysis.Observed:
    """``observed`` if it is verified and attends over its inputs; otherwise not checked."""
    analysis.require_verified(observed, see)
    if not attends_over(observed, *sources):
        analysis.not_checked(NO_ATTENTION_FOUND, see)
    return observed


def computed_layer(observed: analysis.Observed, see: str, values: dict, name: str = "inputs") -> analysis.Observed:
    """``observed`` if it is verified and mixes the positions of its input ``name``, whatever the
    grader recognised in it: what a check of behaviour (gradients, inference) needs; otherwise not
    checked. Mixing positions is what no verified shortcut of a sequence layer does (a norm of the
    inputs, the inputs copied through): it is the least the parent's own numbers must show."""
    analysis.require_verified(observed, see)
    x = observed.inputs.get(name)
    assert_mixes_positions(observed, values, name, np.ones(np.shape(x)[:2], dtype=bool) if np.ndim(x) == 3
                           else np.zeros((0, 0), dtype=bool), see)
    return observed


def mixes_positions(observed: analysis.Observed, values: dict, name: str, real: np.ndarray,
                    outputs: np.ndarray | None = None) -> bool:
    """Whether the verified call's output at a real position depends on another real position of its
    input ``name``: the parent changes one real position of its own input and runs the computation
    again. ``real`` marks the input's real positions; ``outputs`` the output's, when the input is not
    the sequence the output is made of (the encoder outputs a decoder reads): then any real output
    position counts, else only the others. A layer that mixes no positions is trivially blind to
    padding, and a check of that says nothing."""
    if observed.program is None:
        return observed.function is not None  # identified as a known layer by its parts: it attends
    x = np.asarray(observed.inputs.get(name), dtype=np.float64)
    if x.ndim != 3 or x.shape[:2] != real.shape:
        return False
    base = np.asarray(observed.program.run(values, observed.inputs), dtype=np.float64)
    scale = 1e-6 * max(1.0, float(np.max(np.abs(base)))) if base.size else 1e-6
    for b in range(x.shape[0]):
        positions = np.flatnonzero(real[b])
        # the first real position, whose change a causal layer passes on to the later ones, then the
        # last, whose change reaches the earlier ones in a layer that attends forward only
        for moved in dict.fromkeys([*positions[:1], *positions[-1:]]):
            watched = [p for p in positions if p != moved] if outputs is None else np.flatnonzero(outputs[b])
            if not len(watched):
                continue
            budget.charge(2 * x.size + base.size, x.size + base.size)
            changed = x.copy()
            changed[b, moved] += 1.0 + np.abs(changed[b, moved])
            again = np.asarray(observed.program.run(values, dict(observed.inputs, **{name: changed})),
                               dtype=np.float64)
            if again.shape != base.shape or base.ndim < 2:
                return False
            if np.max(np.abs(again[b, watched] - base[b, watched])) > scale:
                return True
    return False


def assert_mixes_positions(observed: analysis.Observed, values: dict, name: str, real: np.ndarray, see: str,
                           outputs: np.ndarray | None = None) -> None:
    """Not checked unless the verified call mixes positions (``mixes_positions``)."""
    if not mixes_positions(observed, values, name, real, outputs):
        analysis.not_checked("the grader recomputed your layer, but its output at a position depends on no other "
                             "position's input (no attention mixes them), so what this check observes would say "
                             "nothing about a sequence layer", see)


def explain_unverified(observed: analysis.Observed, expected: str, evidence=None, phase: str = "forward",
                       shape: tuple | None = None) -> None:
    """Fail with why the call could not be verified (the forward check's job). With ``shape`` (the
    plain call's, which api.output_shape checks), an output of another shape is that check's failure."""
    if not isinstance(observed.output, np.ndarray):
        analysis.not_checked("the call did not return a tensor", "api.output_shape")
    if shape is not None and tuple(observed.output.shape) != tuple(shape):
        analysis.not_checked("your layer's output does not have the shape the exercise expects", "api.output_shape")
    if observed.output.dtype.kind not in "biuf" or not np.all(np.isfinite(observed.output)):
        analysis.not_checked("your layer's output holds NaN or infinite values", "api.output_shape")
    fail(
        f"the grader could not recompute your layer's output from the layers it ran: {observed.failure}.",
        expected,
        "The grader sets every weight and input itself and recomputes the layer step by step; a step it "
        "cannot recompute (a Dropout applied at inference, a weight created inside call(), an operation "
        "other than a Keras layer, a sum or a relu) leaves the computation unverified, and the checks "
        "that depend on it are not checked.",
        cause=output_cause(),
    )


# --------------------------------------------------------------------------- weights


def assert_distinct_norms(structure: Structure, count: int, positions: str) -> None:
    why = shared_norm_why(count) if count > 1 else ONE_NORM_WHY
    steps = structure.norm_steps
    instances = list(dict.fromkeys(s.event["layer"] for s in steps))
    gammas = [s.params.get("gamma") for s in steps]
    if len(steps) == count and len(instances) == count and len(set(gammas)) == count:
        return
    if not steps:
        fail(
            "no LayerNormalization layer was called in the forward pass.",
            f"{count} LayerNormalization layers: {positions}.",
            "Normalising each residual sum keeps activations at a stable scale as blocks stack.",
        )
    if len(instances) < len(steps):
        reused = Counter(s.event["layer"] for s in steps).most_common(1)[0][1]
        fail(
            f"{len(steps)} LayerNormalization calls on only {len(instances)} instance(s): one instance is "
            f"called {reused} times, so residual blocks share one gamma and one beta.",
            f"{count} separate LayerNormalization instances, one per residual block.",
            why,
        )
    if len(steps) == count and len(set(gammas)) < count:
        fail(
            f"{count} LayerNormalization instances, but they share their gamma variable.",
            f"{count} norms, each with its own gamma and beta.",
            why,
        )
    fail(
        f"{len(steps)} LayerNormalization call(s) on {len(instances)} instance(s); the call order was "
        f"{structure.describe()}.",
        f"exactly {count} calls, on {count} different LayerNormalization instances: {positions}.",
        "Each residual block is normalised once, by its own norm.",
    )


def assert_norm_parameters(structure: Structure, embed_dim: int, trainable: set[str], values: dict,
                           shared_seen: bool = False, why: str | None = None) -> None:
    steps = structure.norm_steps
    why = why or shared_norm_why(len(steps))
    if not steps:
        fail("no LayerNormalization layer was called.", "norms, each with gamma and beta.", why)
    problems = []
    owners: dict[str, int] = {}
    for position, step in enumerate(steps, start=1):
        for name in ("gamma", "beta"):
            key = step.params.get(name)
            if key is None:
                problems.append(f"norm {position} has no {name} (center/scale turned off)")
                continue
            shape = tuple(np.shape(values[key]))
            if shape != (embed_dim,):
                problems.append(f"norm {position}'s {name} has shape {shape}")
            if key not in trainable:
                problems.append(f"norm {position}'s {name} is not trainable")
            if key in owners:
                problems.append(f"norm {position}'s {name} is the same variable as norm {owners[key]}'s")
            else:
                owners[key] = position
    if problems:
        fail(
            "; ".join(problems) + ".",
            f"each norm with its own trainable gamma and beta of shape ({embed_dim},), sharing no "
            "variable with another.",
            SHARED_NORM_SEE if shared_seen and all("same variable" in p for p in problems) else why,
        )


def trainable_keys(forward: dict) -> set[str]:
    return {str(k) for k in forward.get("trainable") or []}


def assert_trainable_shapes(forward: dict, values: dict, expected: list[tuple], summary: str, hints: list[str],
                            why: str | None = None, roles: dict | None = None) -> None:
    """The trainable weights have the ``expected`` shapes, each counted in the shape of the role the
    verified call gives it (``roles``: key -> shape, from ``Structure.role_shapes``)."""
    roles = roles or {}
    observed = Counter(roles.get(k, tuple(np.shape(values[k]))) for k in trainable_keys(forward) if k in values)
    wanted = Counter(expected)
    if observed == wanted:
        return
    said = ("; ".join(hints) + ". ") if hints else ""  # what differs first, in the exercise's words
    fail(
        f"{said[:1].upper()}{said[1:]}{sum(observed.values())} trainable weights; missing shapes "
        f"{shape_list(wanted - observed)}, unexpected shapes {shape_list(observed - wanted)}.",
        f"{sum(wanted.values())} trainable weights: {summary}.",
        why or "The weight list is the layer's architecture: a different width or a missing "
        "trainable part changes what the layer can learn.",
    )


def reused_norms(structure: Structure) -> int:
    """How many norm positions of the call reuse an instance called before (0: none)."""
    steps = structure.norm_steps
    return len(steps) - len({s.event["layer"] for s in steps})


def shared_norm_reason(structure: Structure) -> tuple[list[str], str | None]:
    """(hints, why) for a weight list short of a norm because one instance serves two positions:
    the explanation of the shared norm, so the report tells it as one cause."""
    reused = reused_norms(structure)
    if not reused:
        return [], None
    return [f"one LayerNormalization instance is called at {reused + 1} norm positions, so the gamma and beta "
            "of the other norm are missing"], shared_norm_why(len(structure.norm_steps))


_ORDINALS = {0: "first", 1: "second", 2: "third"}


def attention_hints(structure: Structure, dims: dict, values: dict,
                    expected_key_dim: tuple[int, str] | None = None) -> list[str]:
    """Sizes of the attention and the feed-forward that differ from the exercise's. The attention's
    ``key_dim`` is ``embed_dim`` unless ``expected_key_dim`` says (its value, how the book writes it)."""
    want, rule = expected_key_dim or (dims["embed_dim"], "embed_dim")
    hints = []
    steps = structure.of("attention")
    sizes = []
    for step in steps:
        kernel = step.params.get("query_kernel")
        key_dim = int(role_shape(kernel, values)[-1]) if kernel in values else step.constants.get("key_dim")
        sizes.append((step, key_dim, step.constants.get("num_heads")))
    # one attention, or every one alike: said once; else each that differs, by its place
    alike = len(sizes) > 1 and len({(k, h) for _, k, h in sizes}) == 1
    for index, (step, key_dim, heads) in enumerate(sizes[:1] if alike else sizes):
        name = (f"every {attention_name(step)}" if alike else attention_name(step) if len(sizes) == 1
                else f"the {_ORDINALS.get(index, f'#{index + 1}')} {attention_name(step)}")
        if key_dim != want:
            hints.append(f"{name} has key_dim={key_dim}; this exercise (like the book) uses "
                         f"key_dim={rule}={want}")
        if heads and heads != dims["num_heads"]:
            hints.append(f"{name} has num_heads={heads}, not {dims['num_heads']}")
    if "dense_dim" in dims:
        units = [int(np.shape(values[s.params["kernel"]])[-1]) for s in structure.dense_steps
                 if s.params.get("kernel") in values]
        if units and units != [dims["dense_dim"], dims["embed_dim"]]:
            hints.append(f"the feed-forward Dense widths are {units}; expected [dense_dim, embed_dim] = "
                         f"[{dims['dense_dim']}, {dims['embed_dim']}]")
    return hints


def attention_name(step) -> str:
    """How a message names an attention step: Keras's layer, or the student's own operations."""
    if step is not None and step.constants.get("written_out"):
        return "your attention (its Dense projections and operations)"
    return "MultiHeadAttention"


def written_attention_slip(steps) -> None:
    """Fail when an attention written with operations of the student's own does not compute scaled
    dot-product attention over the keys (found by ``attention``), saying what it does instead."""
    for step in steps:
        if step.constants.get("written_out") and not step.constants.get("computes"):
            diagnosis = step.constants.get("diagnosis")
            fail(
                "your attention, written with Dense projections and operations, "
                + (f"is not scaled dot-product attention: {diagnosis}." if diagnosis else
                   "does not compute softmax(q·kᵀ / sqrt(key_dim))·v over the keys, head by head, for any number "
                   "of heads."),
                "for each head, softmax over the keys of q·kᵀ / sqrt(key_dim), applied to the values, the heads "
                "joined again before the output projection.",
                "Dividing by sqrt(key_dim) keeps the scores' spread independent of the head width, so the softmax "
                "does not saturate; the softmax over the keys makes each query's weights a distribution over the "
                "positions it reads.",
            )


def attention_shapes(embed_dim: int, num_heads: int, key_dim: int | None = None) -> list[tuple]:
    """The variables of MultiHeadAttention(num_heads, key_dim) on embed_dim-wide inputs (key_dim
    embed_dim unless given)."""
    e, h, k = embed_dim, num_heads, embed_dim if key_dim is None else key_dim
    return [(e, h, k)] * 3 + [(h, k)] * 3 + [(h, k, e), (e,)]


def shape_list(counter: Counter) -> str:
    if not counter:
        return "none"
    return ", ".join(f"{shape}×{n}" if n > 1 else str(shape) for shape, n in sorted(counter.items()))


# --------------------------------------------------------------------------- gradients


@dataclass
class GradientReport:
    """The child's gradients next to the exact gradients of the verified computation."""

    keys: list[str]
    reported: dict  # key -> array or None
    exact: dict  # key -> array
    names: dict  # key -> variable path

    @property
    def scale(self) -> float:
        return max([float(np.max(np.abs(g))) for g in self.exact.values() if np.size(g)] or [0.0])

    def agrees(self, key: str) -> bool:
        grad, exact = self.reported.get(key), self.exact.get(key)
        return isinstance(grad, np.ndarray) and exact is not None and analysis.gradients_agree(grad, exact,
                                                                                               self.scale)


def gradient_report(evidence, observed: analysis.Observed, forward: dict, loss_weights) -> GradientReport:
    cache = analysis._cache(evidence)
    if "gradient_report" not in cache:
        data = evidence.phase("gradients", "gradients.all_variables")
        keys = [str(k) for k in data.get("variables") or []]
        reported = dict(zip(keys, data.get("gradients") or []))
        parameters = analysis.values(evidence)
        usable = [k for k in keys if k in parameters]
        exact = analysis.exact_gradients(observed.run, parameters, usable, analysis.weighted_sum(loss_weights))
        names = {str(v["id"]): v.get("path", "") for v in forward.get("variables") or []}
        cache["gradient_report"] = GradientReport(keys, reported, exact, names)
    return cache["gradient_report"]


def assert_all_gradients(report: GradientReport, exempt: set[str], expected: str) -> None:
    if not report.keys:
        fail("the layer has no trainable variables.", expected, "Nothing could be learned.")
    missing, unused, broken, wrong, zero = [], [], [], [], []
    for key in report.keys:
        name = report.names.get(key) or f"variable {key}"
        grad, exact = report.reported.get(key), report.exact.get(key)
        exact_zero = exact is None or not np.any(np.abs(exact) > 1e-6 * max(report.scale, 1e-9))
        if grad is None or not isinstance(grad, np.ndarray):
            (unused if exact_zero and key not in exempt else missing if not exact_zero else []).append(name)
        elif not np.all(np.isfinite(grad)):
            broken.append(name)
        elif not report.agrees(key):
            wrong.append(name)
        elif exact_zero and key not in exempt:
            zero.append(name)
    if missing or unused or broken or wrong or zero:
        parts = []
        if missing:
            parts.append("no gradient for " + _listed(missing) + " although the output depends on it "
                         "(the path is cut, for instance by a NumPy round trip)")
        if unused:
            parts.append("no gradient for " + _listed(unused) + ": the output does not use it")
        if broken:
            parts.append("NaN/inf gradient for " + _listed(broken))
        if wrong:
            parts.append("a gradient for " + _listed(wrong) + " that is not the gradient of what the layer "
                         "computes (part of the computation is hidden from differentiation, e.g. stop_gradient)")
        if zero:
            parts.append("an all-zero gradient for " + _listed(zero))
        fail(
            "; ".join(parts) + ".",
            "for every trainable variable, the gradient of the output (an attention key bias excepted: "
            "softmax ignores a shift shared by all keys).",
            "A variable with no gradient never learns: it is created but not on the path from "
            "inputs to outputs, or the path is cut.",
        )


def _listed(names: list[str], limit: int = 4) -> str:
    """Variable names for a message: the first few, and how many more."""
    if len(names) <= limit:
        return ", ".join(names)
    return ", ".join(names[:limit - 1]) + f" and {len(names) - limit + 1} more"


def key_biases(structure: Structure) -> set[str]:
    return {s.params["key_bias"] for s in structure.of("attention") if s.params.get("key_bias")}


def assert_norm_gradients_differ(report: GradientReport, structure: Structure, count: int) -> None:
    norms = structure.norm_steps
    if len(norms) < count:
        fail(f"{len(norms)} LayerNormalization call(s).", f"{count} norms.", shared_norm_why(count))
    for name in ("gamma", "beta"):
        keys = [n.params.get(name) for n in norms[:count]]
        if any(k is None for k in keys):
            fail(f"a norm without {name}.", "gamma and beta in every norm.", shared_norm_why(count))
        if len(set(keys)) < len(keys):
            fail(
                f"several norm positions use one {name} variable, so they receive one gradient: "
                "the sum of what each residual block asks for.",
                f"one {name} variable per norm, each with the gradient of its own position.",
                shared_norm_why(count),
            )
        for key in keys:
            if key not in report.reported or report.reported[key] is None:
                fail(f"no gradient for a norm's {name} (is the norm trainable?).", "a gradient for each norm.",
                     shared_norm_why(count))
            if not report.agrees(key):
                fail(f"a norm's {name} gradient is not the gradient of the layer's output.",
                     "each norm's exact gradient.", "See gradients.all_variables.")
        grads = [report.exact[k] for k in keys]
        for a in range(len(grads)):
            for b in range(a + 1, len(grads)):
                if np.allclose(grads[a], grads[b], rtol=1e-5, atol=1e-9):
                    fail(
                        f"norms {a + 1} and {b + 1} receive identical {name} gradients.",
                        "different gradients: each norm sees a differently distributed input.",
                        shared_norm_why(count),
                    )


def assert_norms_diverge(evidence, observed: analysis.Observed, structure: Structure, job: dict, count: int) -> None:
    data = evidence.phase("gradients", "gradients.all_variables")
    after = {str(k): v for k, v in (data.get("after_steps") or {}).items()}
    norms = structure.norm_steps[:count]
    if len(norms) < count:
        fail(f"{len(norms)} LayerNormalization call(s).", f"{count} norms.", shared_norm_why(count))
    keys = [str(k) for k in data.get("variables") or []]
    parameters = analysis.values(evidence)
    expected = analysis.sgd(observed.run, parameters, [k for k in keys if k in parameters],
                            analysis.weighted_sum(job["loss_weights"]), float(job["learning_rate"]),
                            int(job["optimizer_steps"]))
    steps = job["optimizer_steps"]
    for position, step in enumerate(norms, start=1):
        gamma = step.params.get("gamma")
        if gamma is None:
            fail(f"norm {position} has no gamma.", "a trainable gamma.", shared_norm_why(count))
        if gamma not in after or gamma not in expected:
            fail(
                f"norm {position}'s gamma did not change in {steps} SGD steps.",
                "gamma and beta of every norm move as the layer trains.",
                "A frozen norm (trainable=False) keeps its gamma and beta for ever and cannot adapt "
                "to its input's distribution.",
            )
        if not analysis.gradients_agree(after[gamma], expected[gamma]):
            fail(f"after {steps} SGD steps norm {position}'s gamma is not where the layer's gradients take it.",
                 "each step to follow the gradient of the layer's output.", "See gradients.all_variables.")
    flat = [np.concatenate([np.ravel(expected.get(n.params.get(p), parameters.get(n.params.get(p), np.zeros(1))))
                            for p in ("gamma", "beta")]) for n in norms]
    for a in range(len(flat)):
        for b in range(a + 1, len(flat)):
            if np.allclose(flat[a], flat[b], atol=1e-7, rtol=0):
                fail(
                    f"after {steps} SGD steps norms {a + 1} and {b + 1} still hold identical gamma and beta.",
                    "each norm's parameters following their own gradients apart.",
                    shared_norm_why(count),
                )


# --------------------------------------------------------------------------- config


def assert_config_base(evidence, config: dict, class_name: str) -> None:
    construct = evidence.phase("construct", "api.constructor")
    if construct.get("kwargs_error"):
        fail(
            f"{class_name}(..., name='{LAYER_NAME}') raised TypeError: "
            f"{construct['kwargs_error'].get('message', '')}",
            "def __init__(self, ..., **kwargs), with super().__init__(**kwargs).",
            "Passing **kwargs on to super().__init__ is what lets users name a layer, set its "
            "dtype or freeze it, and what lets from_config restore them.",
        )
    data = evidence.partial("config") or {}
    if data.get("json_error"):
        fail(
            f"get_config() returned values JSON cannot store ({data['json_error']}).",
            "plain numbers, strings, lists and dicts.",
            "Keras writes the config as JSON into .keras files.",
        )
    missing = [key for key in ("name", "trainable", "dtype") if key not in config]
    if missing:
        fail(
            f"get_config() lacks {', '.join(missing)}; it has {', '.join(sorted(config)) or 'nothing'}.",
            "config = super().get_config() first, then your own keys added to it.",
            "from_config passes the base keys back to Layer.__init__, which restores the "
            "layer's name, dtype policy and trainable flag; without them a rebuilt layer loses "
            "its name and dtype.",
        )
    if config.get("name") != LAYER_NAME:
        fail(
            f"the layer built with name='{LAYER_NAME}' reports name={config.get('name')!r}.",
            "the name given to the constructor.",
            "Passing **kwargs on to super().__init__ is what lets users name a layer, set its "
            "dtype or freeze it.",
        )


def assert_config_own_keys(config: dict, expected: dict, class_name: str) -> None:
    wrong = []
    for key, want in expected.items():
        if key not in config:
            wrong.append(f"{key} is missing")
        elif config[key] != want:
            wrong.append(f"{key}={config[key]!r} (the layer was built with {want})")
    if wrong:
        fail(
            "; ".join(wrong) + ".",
            ", ".join(f"{k}={v}" for k, v in expected.items()) + " in the config.",
            f"from_config calls {class_name}(**config): every constructor argument must be there.",
        )


def _forward_fault(evidence) -> str | None:
    """Why api.output_shape fails on the plain call's output (no tensor, NaN or inf), if it does:
    a comparison of outputs made of the same layer then has nothing to compare."""
    if evidence is None:
        return None
    data = evidence.partial("forward") or {}
    observation = data.get("observation") if isinstance(data, dict) else None
    output = observation.get("output") if isinstance(observation, dict) else None
    if not isinstance(output, np.ndarray):
        return "the call did not return a tensor"
    if output.dtype.kind not in "biuf" or not np.all(np.isfinite(output)):
        return "your layer's output holds NaN or infinite values"
    return None


def _assert_same_outputs(a, b, evidence, observed: str, expected: str, why: str) -> None:
    """``a`` and ``b`` (the layer's outputs before and after a rebuild) are equal; when they are not
    finite numbers because the layer's own output is not, the check is not checked and points to
    api.output_shape, which reports that once."""
    arrays = isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
    finite = arrays and a.dtype.kind in "biuf" and b.dtype.kind in "biuf" and bool(
        np.all(np.isfinite(a)) and np.all(np.isfinite(b)))
    if not finite:
        fault = _forward_fault(evidence)
        if fault is not None:
            analysis.not_checked(fault, "api.output_shape")
    if not arrays:
        fail("call did not return a tensor, so the outputs cannot be compared.", "one tensor.",
             "A layer maps tensors to a tensor, so layers can be stacked.")
    if not finite:
        fail(f"{observed}: the outputs hold NaN or infinite values.", "finite, identical outputs.", why)
    if a.shape != b.shape or not np.allclose(a, b, atol=1e-5):
        diff = f"by {float(np.abs(a - b).max()):.3g}" if a.shape == b.shape else f"shape {a.shape} vs {b.shape}"
        fail(f"{observed} ({diff}).", expected, why, cause=output_cause())


def assert_from_config(config_phase: dict, evidence=None) -> None:
    if config_phase["rebuilt_name"] != LAYER_NAME:
        config = config_phase.get("config") if isinstance(config_phase.get("config"), dict) else {}
        fail(
            f"the rebuilt layer is named {config_phase['rebuilt_name']!r}, not '{LAYER_NAME}'.",
            "from_config(get_config()) to keep the name.",
            "Keras matches saved weights to layers partly by name; **kwargs must reach super().__init__."
            + ("" if config.get("name") == LAYER_NAME else
               " The config does not hold the layer's name: see config.base_keys."),
        )
    if config_phase["rebuilt_shapes"] != config_phase["original_shapes"]:
        fail(
            f"the rebuilt layer's weight shapes are {config_phase['rebuilt_shapes']}, the original's "
            f"{config_phase['original_shapes']}.",
            "the same shapes.",
            "A config that loses an argument rebuilds a different architecture.",
        )
    _assert_same_outputs(
        config_phase["rebuilt_output"], config_phase["original_output"], evidence,
        "with the weights copied over, the rebuilt layer computes different outputs", "identical outputs.",
        "A layer rebuilt from its config must be the same function of its weights.",
    )


def assert_keras_file(evidence) -> None:
    saving = evidence.phase("saving", "config.keras_file")
    _assert_same_outputs(
        saving["before"], saving["after"], evidence, "predictions differ after loading", "identical predictions.",
        "A saved model that loads with other weights or another architecture silently changes.",
    )


# --------------------------------------------------------------------------- masks

IGNORED_MASK = (
    "no mask reached MultiHeadAttention's scores: every position attends to padding as if it were text"
)


@dataclass
class Call:
    """One observed call as the mask checks see it: its output and attention steps, verified or
    claimed. Assertions may fail on claims; ``confirm`` is what lets a check pass."""

    observed: analysis.Observed
    attention: list
    see: str
    what: str
    # an unverified call whose trace names no attention layer: an attention written with operations of the
    # student's own is found only in a verified call, so whether the call attends is unknown, not "no"
    unknown: bool = False

    @property
    def verified(self) -> bool:
        return self.observed.verified

    @property
    def output(self):
        return self.observed.output

    def confirm(self) -> None:
        if not self.verified:
            analysis.not_checked(f"the grader could not verify {self.what} from the numbers it chose", self.see)


def observed_call(evidence, observed: analysis.Observed, see: str, what: str, *sources: str,
                  needs_attention: bool = True, structure_see: str | None = None) -> Call:
    """The call as the mask checks see it. A check of the attention's mask ``needs_attention``; a
    check of behaviour alone (padding invariance, causality, the mask passed on) needs only the
    verified call, whatever the grader recognised in it. A verified call in which the grader found no
    attention is not checked, pointing to the check that says so (``structure_see``)."""
    if observed.verified:
        if needs_attention and not attends_over(observed, *sources):
            analysis.not_checked(NO_ATTENTION_FOUND, structure_see or see)
        return Call(observed, observed.steps("attention"), see, what)
    claimed = [s for s in pseudo_steps_of(trace_leaves(evidence, observed.phase)) if s.kind == "attention"]
    return Call(observed, claimed, see, what, unknown=not claimed)


def effective_mask(step) -> np.ndarray | None:
    """The verified mask a replayed attention step applied to its scores (causal included), as
    (batch or 1, queries or 1, keys) booleans — or None when it applied none."""
    mask = step.constants.get("mask")
    causal = bool(step.constants.get("causal"))
    if mask is None and not causal:
        return None
    recorded = step.event.get("inputs") or {}
    query = recorded.get("query")
    value = recorded.get("key", recorded.get("value"))
    if not isinstance(query, np.ndarray) or not isinstance(value, np.ndarray) or query.ndim != 3 or value.ndim != 3:
        return None
    batch, queries, keys = query.shape[0], query.shape[1], value.shape[1]
    if isinstance(mask, np.ndarray) and mask.ndim > 4:
        return None
    from .ops import full_attention_mask

    try:
        full = full_attention_mask(mask, batch, queries, keys, causal)  # (B or 1, H or 1, T, S)
    except ValueError:
        return None
    return np.asarray(full).all(axis=1) if full.shape[1] > 1 else np.asarray(full)[:, 0]


def raw_attention_arguments(evidence, phase: str) -> list[dict]:
    """The mask arguments attention calls received in a phase (claims, for the messages), even if
    the call raised."""
    events = [e for e in analysis.partial_trace(evidence, phase) if e.get("kind") == "attention"
              and isinstance(e.get("arguments"), dict)]
    return [dict(e["arguments"], _constants=e.get("constants") or {}, _inputs=e.get("inputs") or {}) for e in events]


def raised_call_diagnosis(evidence, phase: str, key_lengths: list[int], batch: int,
                          padding: np.ndarray | None = None) -> tuple[str, int, tuple] | None:
    """Why a call with masks raised, from what it recorded before raising (claims are enough to
    explain a failure): (kind, attention index, (observed, expected, why)), or None if it did not raise.

    ``key_lengths[i]`` is the number of keys attention call ``i`` should see."""
    error = evidence.error(phase)
    if error is None:
        return None
    message = error.get("message", "")
    if error.get("type") == "TypeError" and "unexpected keyword argument" in message:
        return "signature", 0, (
            f"call() does not accept the mask argument (TypeError: {message.splitlines()[0] if message else ''}).",
            "a call signature that takes the padding mask(s) as keyword arguments, with None as default.",
            "Keras hands padding masks to call as keyword arguments; a layer that cannot take "
            "them cannot keep padding out of attention.",
        )
    for index, arguments in enumerate(raw_attention_arguments(evidence, phase)):
        raw = arguments.get("attention_mask")
        keys = key_lengths[index] if index < len(key_lengths) else None
        queries = arguments.get("_inputs", {}).get("query")
        queries = queries.shape[1] if isinstance(queries, np.ndarray) and queries.ndim == 3 else None
        if not isinstance(raw, np.ndarray) or keys is None:
            continue
        if list(raw.shape) == [batch, raw.shape[-1]] and batch != queries:
            picture = ""
            if padding is not None and padding.shape[1] == keys:
                expected = np.broadcast_to(padding[:, None, :], (batch, padding.shape[1], keys))
                picture = "\n" + mask_picture(None, expected, padding, note=" — yours raised before attention")
            return "unexpanded", index, (
                f"attention_mask of shape {tuple(raw.shape)}, the padding mask unexpanded — MultiHeadAttention "
                "raised on it." + picture,
                f"shape ({batch}, 1, {keys}): mask[:, None, :], one row of keys for every query.",
                "MultiHeadAttention's scores have shape (batch, heads, queries, keys); a 2-D mask is "
                "read as (queries, keys) and cannot line up with a batch axis.",
            )
        if raw.shape[-1] != keys:
            return "keys", index, (
                f"an attention mask with {raw.shape[-1]} keys (shape {tuple(raw.shape)}) for an attention over "
                f"{keys} positions — MultiHeadAttention raised on it.",
                f"a mask with one entry per key: ({batch}, 1, {keys}).",
                "The mask's last axis lists the keys a query may look at, so it must have as many entries as "
                "the sequence attended to.",
            )
    return "error", 0, None


def explain_raised(evidence, phase: str, check_id: str, owner: str, diagnosis) -> None:
    """When the call of ``phase`` raised: the owner check fails with why; the others are not checked."""
    if diagnosis is None:
        return
    kind, _, parts = diagnosis
    if check_id != owner:
        error = evidence.error(phase) or {}
        analysis.not_checked(f"your layer raised {error.get('type', 'an error')} on this call", owner)
    if parts is None:
        evidence.phase(phase, check_id)  # the student's own error, in full
    fail(*parts)


def explain_raised_mask(evidence, phase: str, check_id: str, batch: int, keys: int,
                        owner: str = "mask.attention_mask_shape", padding: np.ndarray | None = None) -> None:
    """For the one-attention layers: a masked call that raised is explained once, by ``owner``."""
    explain_raised(evidence, phase, check_id, owner,
                   raised_call_diagnosis(evidence, phase, [keys], batch, padding))


def assert_attention_mask_shape(step, batch: int, queries: int, keys: int, arguments: dict | None) -> None:
    if step is None:
        fail(
            "MultiHeadAttention was not called when a mask was given.",
            "a MultiHeadAttention call that receives the attention mask.",
            "The mask only works where attention is computed.",
        )
    mask = step.constants.get("mask")
    if mask is None and not step.constants.get("causal"):
        fail(
            IGNORED_MASK + ".",
            f"the (batch, seq) padding mask passed on as attention_mask of shape ({batch}, 1, {keys}) — "
            f"or ({batch}, {queries}, {keys}).",
            "Keras gives call() the padding mask, but MultiHeadAttention only sees what you pass it "
            "(or the mask carried by its query and value tensors).",
        )
    if mask is None:
        return
    try:
        shape = np.broadcast_shapes(mask.shape[-3:] if mask.ndim >= 3 else mask.shape, (batch, queries, keys))
        ok = tuple(shape) == (batch, queries, keys) and (mask.ndim <= 3 or mask.shape[0] in (1, batch))
    except ValueError:
        ok = False
    if not ok:
        fail(
            f"an attention mask of shape {tuple(mask.shape)} reached the scores.",
            f"a shape that broadcasts to (batch, queries, keys) = ({batch}, {queries}, {keys}), such as "
            f"({batch}, 1, {keys}).",
            "MultiHeadAttention combines the mask with scores of shape (batch, heads, queries, keys).",
        )


def mask_picture(got: np.ndarray | None, expected: np.ndarray, real_queries: np.ndarray,
                 real_keys: np.ndarray | None = None, note: str = "") -> str:
    """One sequence's attention mask drawn as text, the student's beside the expected one: rows are
    queries, columns keys; ■ attends, · hidden; padded positions marked p. For the report and for
    nbgrader feedback alike."""
    batch, queries, keys = expected.shape
    padded_rows = [b for b in range(batch) if not real_queries[b].all()] or list(range(batch))
    b = padded_rows[0]
    key_real = real_keys[b] if real_keys is not None else np.ones(keys, dtype=bool)
    if real_keys is None and queries == keys:
        key_real = real_queries[b]

    def header(real):
        return " ".join("p" if not r else str(i % 10) for i, r in enumerate(real))

    def row(values):
        return " ".join("■" if v else "·" for v in values)

    width = 2 * keys - 1
    lines = [f"Mask that reached attention for sequence {b + 1} (rows: queries, columns: keys; ■ attends, "
             f"· hidden, p padding){note}:",
             f"  {'':9}{'yours':<{width}}   expected",
             f"  {'keys':9}{header(key_real):<{width}}   {header(key_real)}"]
    for t in range(queries):
        label = f"query {t}" if real_queries[b, t] else f"query {t}p"
        mine = row(got[b, t]) if got is not None else ("(no mask)" if t == 0 else "")
        lines.append(f"  {label:9}{mine:<{width}}   {row(expected[b, t])}")
    return "\n".join(lines)


def assert_masks_keys(step, expected: np.ndarray, real_queries: np.ndarray, arguments: dict | None,
                      what: str = "padded keys", real_keys: np.ndarray | None = None,
                      future_why: str | None = None) -> None:
    """The verified mask at the scores, on real query rows, equals ``expected`` (batch, queries, keys)."""
    batch, queries, keys = expected.shape
    if step is None:
        fail("MultiHeadAttention was not called when a mask was given.", f"{what} masked out.", PADDING_WHY)
    effective = effective_mask(step)
    if effective is None:
        fail(IGNORED_MASK + ".\n" + mask_picture(np.ones(expected.shape, dtype=bool), expected, real_queries,
                                                 real_keys), f"{what} masked out for every real query.",
             PADDING_WHY)
    full = np.broadcast_to(effective, (batch, queries, keys))
    picture = mask_picture(full, expected, real_queries, real_keys)
    rows = [(b, t) for b in range(batch) for t in range(queries) if real_queries[b, t]]
    got = np.array([full[b, t] for b, t in rows])
    want = np.array([expected[b, t] for b, t in rows])
    if np.array_equal(got, want):
        return
    if np.array_equal(got, ~want):
        fail(
            "the mask is inverted: real tokens are hidden and padding is attended to.\n" + picture,
            "True for positions to attend to, False for padding, as Embedding(mask_zero=True) gives it.",
            "MultiHeadAttention attends where the mask is True.",
        )
    raw = (arguments or {}).get("attention_mask")
    query_masked = (arguments or {}).get("query_mask") is not None and (arguments or {}).get("positional", 0) >= 4
    if query_masked:
        fail(
            "the padding mask reached MultiHeadAttention as its query_mask, the fourth positional argument, so it "
            "hides padded queries while every query still attends to the padded keys.\n" + picture,
            "attention(query, value, attention_mask=mask[:, None, :]): pass the mask by keyword.",
            "In Keras 2, MultiHeadAttention's fourth argument was attention_mask; in Keras 3 it is query_mask. "
            "Code written for Keras 2 as mha(x, x, x, mask) now masks the wrong thing, silently.",
        )
    # a mask on the query axis: every query row all visible or all hidden, the padded queries hidden
    column = keys > 1 and bool(np.all(full == full[..., :1])) and not bool(np.all(full)) and \
        bool(np.all(~full[~real_queries])) if (~real_queries).any() else False
    if column or (isinstance(raw, np.ndarray) and raw.ndim == 3 and raw.shape[-1] == 1 and keys > 1):
        fail(
            f"the mask was expanded on the wrong axis (shape {tuple((raw if raw is not None else effective).shape)}): "
            "it hides queries, while every query still attends to the padded keys.\n" + picture,
            f"mask[:, None, :] — shape ({batch}, 1, {keys}), broadcast over queries, masking keys.",
            "The mask must say which keys a query may look at; a (batch, seq, 1) mask silently "
            "masks the wrong thing, and MultiHeadAttention does not complain.",
        )
    leaks = int(np.sum(got & ~want))
    hidden = int(np.sum(~got & want))
    future = 0
    if future_why:  # leaks to later positions: causality, not padding, is what is broken
        later = ~np.tril(np.ones((queries, keys), dtype=bool))
        future = int(sum(np.sum(full[b, t] & later[t]) for b, t in rows))
    fail(
        f"for real query positions, {leaks} key(s) that should be hidden are visible"
        + (f" ({future} of them later positions)" if future else "")
        + f" and {hidden} key(s) that should be visible are hidden.\n" + picture,
        f"for every real query, exactly the keys it may attend to visible ({what} hidden).",
        future_why if future else PADDING_WHY,
    )


def assert_unchanged(a, b, where: np.ndarray, changed: str, why: str) -> None:
    """Outputs ``a`` and ``b`` agree at the positions of boolean array ``where``."""
    if not isinstance(a, np.ndarray) or not isinstance(b, np.ndarray):
        fail(
            "a masked call did not return a tensor.",
            "one tensor, with or without a mask.",
            "A layer must return the same kind of output with and without a mask.",
        )
    if a.shape != b.shape or a.shape[:np.ndim(where)] != np.shape(where):
        analysis.not_checked("your layer's output does not have the shape the exercise expects", "api.output_shape")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        analysis.not_checked("your layer's output holds NaN or infinite values", "api.output_shape")
    change = np.abs(a.astype(np.float64) - b.astype(np.float64))[where]
    if change.size and change.max() > 1e-4:
        fail(
            f"changing only {changed} changed the outputs that must not depend on them, by up to "
            f"{change.max():.3g}.",
            "those outputs unchanged.",
            why,
            cause=output_cause(),
        )


def assert_mask_propagates(data: dict, output: np.ndarray, padding_mask: np.ndarray) -> None:
    """The pooled output (a GlobalAveragePooling1D after the layer) equals the masked average of the
    verified output: the padding mask reached the next layer."""
    if output.ndim != 3 or output.shape[:2] != padding_mask.shape:
        analysis.not_checked("your layer's output does not have the shape the exercise expects", "api.output_shape")
    if not np.all(np.isfinite(output)):
        analysis.not_checked("your layer's output holds NaN or infinite values", "api.output_shape")
    pooled = data.get("pooled")
    real = padding_mask.astype(np.float64)[..., None]
    masked_mean = (output * real).sum(axis=1) / real.sum(axis=1)
    if isinstance(pooled, np.ndarray) and pooled.shape == masked_mean.shape and np.allclose(
            pooled, masked_mean, rtol=1e-3, atol=1e-4):
        return
    observed = (
        "supports_masking is False, so Keras drops the mask after your layer (and warns on stderr that "
        "your layer destroys the mask)"
        if not data.get("supports_masking")
        else "the output does not carry the input's padding mask to the next layer"
    )
    fail(
        observed + ".",
        "self.supports_masking = True in __init__: the output keeps the input's padding mask.",
        "In Keras 3 a layer passes the mask on only if it says it supports masking (Keras 2 code often "
        "relied on it being passed anyway). Without it, the layers after yours — another encoder, a "
        "pooling that averages only over real tokens — treat padding as text.",
    )


# --------------------------------------------------------------------------- forward


INFERENCE_WHY = (
    "Code that uses a trained layer calls it without `training` — model(x), a layer inside a model called "
    "that way — and Keras then gives your call() the default of its `training` argument. Dropout (and any "
    "other noise) must be off unless training is True: write call(..., training=None) and pass "
    "training=training on to Dropout, never training=True. Otherwise every prediction is random."
)


def assert_inference(evidence, verified, values: dict, layer_too: bool = True) -> None:
    """The inference check of a layer exercise: its two calls on one input agree, which needs no
    replay (a layer random at inference is told so whatever else the grader could follow, and is the
    cause its other comparisons fail for), then they equal the parent's own output of the verified
    call (``verified()``: the Observed call, or not checked)."""
    assert_not_random(evidence, layer_too)
    assert_deterministic_inference(evidence, verified().run(values), layer_too)


def assert_not_random(evidence, layer_too: bool = True) -> None:
    """The layer (``layer_too``) and a model holding it, called twice on one input without
    ``training``, return the same numbers; which layer of the trace made them differ is named."""
    if not evidence.random_at_inference or evidence.error("inference") is not None:
        return
    data = evidence.phase("inference")
    who = "your layer" if layer_too and _differ(data.get("layer")) else "a model holding it" if layer_too \
        else "your model"
    random = _random_layers(evidence)
    named = f" ({', '.join(random)} changes what passes through it)" if random else ""
    fail(
        f"called twice on the same input without `training`, {who} returned different outputs: something "
        f"random is active at inference{named}.",
        "the same output at every call: with no `training` given, Dropout is off — pass the call's own "
        "`training` on to it (dropout(x, training=training)), never training=True.",
        INFERENCE_WHY,
    )


def _differ(outputs) -> bool:
    if not (isinstance(outputs, list) and len(outputs) == 2 and all(isinstance(o, np.ndarray) for o in outputs)):
        return False
    first, second = (np.asarray(o, dtype=np.float64) for o in outputs)
    return first.shape != second.shape or not np.array_equal(first, second, equal_nan=True)


def _random_layers(evidence) -> list[str]:
    """The layers of the plain call's trace (claims, for the message only) whose output is not their
    input though they compute nothing of their own: a Dropout applied at inference."""
    named = []
    for event in analysis.partial_trace(evidence, "forward"):
        if str(event.get("class")) not in ("Dropout", "GaussianDropout", "GaussianNoise", "AlphaDropout",
                                           "SpatialDropout1D"):
            continue
        inputs = event.get("inputs") if isinstance(event.get("inputs"), dict) else {}
        output, first = event.get("output"), next(iter(inputs.values()), None)
        if isinstance(output, np.ndarray) and isinstance(first, np.ndarray) and (
                output.shape != first.shape or not np.allclose(output, first)):
            named.append(f"layer {str(event['class'])[:40]} (call {int(event.get('index', 0))})")
    return named[:3]


def assert_deterministic_inference(evidence, expected: np.ndarray, layer_too: bool = True) -> None:
    """Called twice on the same input without ``training``, the layer (``layer_too``) and a model
    holding it return the same numbers, and they are the parent's own output of the verified call
    with training=False (``expected``): the child's outputs are compared with the parent's numbers,
    never only with each other."""
    from .advice import parts_of
    from .evidence import format_student_error

    error = evidence.error("inference")
    if error is not None and not (error.get("internal") and not error.get("student_frames")):
        from .framework import CheckFailed

        raise CheckFailed(format_student_error(
            f"Your code raised {error.get('type', 'an error')} when called without `training`", error,
            parts_of(evidence.public_job)))
    data = evidence.phase("inference")
    calls = ([("your layer", data.get("layer"))] if layer_too else []) + [("a model holding it" if layer_too
                                                                          else "your model", data.get("model"))]
    for who, outputs in calls:
        if not isinstance(outputs, list) or len(outputs) != 2 or \
                not all(isinstance(o, np.ndarray) for o in outputs):
            fail(f"{who}, called without `training`, did not return a tensor.",
                 "one tensor, the same as with training=False.", INFERENCE_WHY)
        first, second = (np.asarray(o, dtype=np.float64) for o in outputs)
        if first.shape != second.shape or not np.array_equal(first, second):
            spread = (f" (they differ by up to {np.abs(first - second).max():.3g})"
                      if first.shape == second.shape and np.all(np.isfinite(first - second)) else "")
            fail(
                f"called twice on the same input without `training`, {who} returned different outputs{spread}: "
                "something random (a Dropout) is active at inference.",
                "the same output at every call: with no `training` given, Dropout is off.",
                INFERENCE_WHY,
            )
    for who, outputs in calls:
        if not close(outputs[0], expected):
            fail(
                f"called without `training`, {who} computes something other than with training=False.",
                "the same output with or without training=False: at inference the layer computes one function.",
                INFERENCE_WHY,
            )


def self_attention_inputs(step, program, what: str):
    """A check that attention got the call's first argument as query and value."""

    def check():
        if program is None or step is None:
            return
        sources = program.sources(step)
        if "inputs" not in sources:
            fail(
                f"MultiHeadAttention was not given the {what}'s inputs as both query and value.",
                "self-attention: attention(inputs, inputs).",
                "Self-attention lets every position look at the other positions of the same sequence.",
            )

    return check


ATOL = 2e-4
RTOL = 1e-3


def close(a, b, where: np.ndarray | None = None) -> bool:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return False
    if where is not None:
        a, b = a[where], b[where]
    scale = max(1.0, float(np.max(np.abs(b)))) if b.size else 1.0
    return bool(np.allclose(a, b, atol=ATOL * scale, rtol=RTOL))


def assert_matches_reference(output, variants: dict, messages: dict, expected: str, why: str,
                             correct: str = "correct", where: np.ndarray | None = None, otherwise=None,
                             whys: dict | None = None, causes: dict | None = None) -> None:
    """``output`` equals ``variants[correct]``; if it equals a known wrong variant instead, say which
    (and why that matters, from ``whys`` when the general ``why`` does not fit it; and which other
    check tells the mistake the variant makes, from ``causes``); else call ``otherwise()`` (which may
    fail with a more specific message) before failing generally."""
    if not isinstance(output, np.ndarray):
        fail("call did not return a tensor.", expected, "The forward pass can only be compared on a tensor.")
    if output.shape != np.shape(variants[correct]):
        analysis.not_checked("your layer's output does not have the shape the exercise expects", "api.output_shape")
    if not np.all(np.isfinite(output)):
        analysis.not_checked("your layer's output holds NaN or infinite values", "api.output_shape")
    if close(output, variants[correct], where):
        return
    for name, text in messages.items():
        if name in variants and close(output, variants[name], where):
            fail(f"your output matches a layer in which {text}.", expected, (whys or {}).get(name, why),
                 cause=(causes or {}).get(name))
    if otherwise is not None:
        otherwise()
    reference_output = np.asarray(variants[correct])
    diff = np.abs(output - reference_output).max() if output.shape == reference_output.shape else float("nan")
    fail(
        f"your output differs from the correct layer computed from the same weights by up to {diff:.3g}.",
        expected,
        why,
        cause=output_cause(),
    )


# --------------------------------------------------------------------------- roles found by behaviour


def trace_leaves(evidence, phase: str) -> list[dict]:
    """The leaf calls a phase recorded (claims), outermost first, without their insides."""
    events = analysis.partial_trace(evidence, phase)
    inside: set[int] = set()
    leaves = []
    for event in events:
        parent = event.get("parent")
        if parent is None:
            continue
        if parent in inside or events[parent]["kind"] not in ("container",):
            inside.add(event["index"])
            continue
        if event["kind"] not in ("container",):
            leaves.append(event)
    return leaves


def ffn_roles_by_shape(forward: dict, values: dict, claimed: set[str], embed_dim: int, dense_dim: int):
    """The feed-forward's kernels and biases among the trainable weights no traced layer uses,
    found by shape: (embed_dim, dense_dim), (dense_dim,), (dense_dim, embed_dim), (embed_dim,)."""
    free = [k for k in trainable_keys(forward) if k in values and k not in claimed]
    by_shape: dict[tuple, list[str]] = {}
    for key in free:
        by_shape.setdefault(tuple(np.shape(values[key])), []).append(key)
    e, d = embed_dim, dense_dim
    wanted = [(e, d), (d,), (d, e), (e,)]
    if e == d or any(len(by_shape.get(shape, [])) != 1 for shape in wanted):
        return None
    k1, b1, k2, b2 = (by_shape[shape][0] for shape in wanted)
    return {"ffn1": {"kernel": k1, "bias": b1}, "ffn2": {"kernel": k2, "bias": b2}}


def claimed_roles(leaves: list[dict]) -> tuple[list[dict], list[dict], set[str]]:
    """Attention and norm roles from the trace's claims, and every variable key they use."""
    attentions, norms, used = [], [], set()
    for event in leaves:
        params = {r: (None if k is None else str(k)) for r, k in (event.get("params") or {}).items()}
        used |= {k for k in params.values() if k is not None}
        constants = event.get("constants") or {}
        if event["kind"] == "attention":
            attentions.append(dict(params, zero_masked=bool(constants.get("zero_masked")),
                                   mask=constants.get("mask"), causal=bool(constants.get("causal"))))
        elif event["kind"] == "norm":
            epsilon = constants.get("epsilon")
            if isinstance(epsilon, (int, float)) and 0 <= epsilon <= 0.1:
                norms.append({"gamma": params.get("gamma"), "beta": params.get("beta"), "epsilon": float(epsilon)})
    return attentions, norms, used


def identify_by_roles(observed: analysis.Observed, roles: dict, variants_of, values: dict,
                      pseudo_steps: list) -> None:
    """When a call could not be replayed (weights used by raw operations), find whether its output is
    a known variant of the exercise's layer computed from ``roles``; if so, mark it verified with
    that variant as its function."""
    output = observed.output
    if not isinstance(output, np.ndarray) or not roles:
        return
    needed = {key for entries in roles.values() for name, key in entries.items()
              if isinstance(key, str) and name not in reference.NOT_KEYS}
    if not needed <= set(values):
        return
    try:
        variants = variants_of(reference.resolve(roles, values))
    except (KeyError, ValueError, TypeError, IndexError):
        return
    for name, candidate in variants.items():
        if close(output, candidate):
            observed.function = lambda vals, name=name: variants_of(reference.resolve(roles, vals))[name]
            observed.identified_as = name
            observed.roles = roles
            observed.pseudo_steps = pseudo_steps
            return


def pseudo_steps_of(leaves: list[dict]) -> list:
    """Replay steps standing for claimed layers: confirmed by an identification by roles, or, for
    a call that could not be verified, what failure messages may name."""
    from .replay import Step

    steps = []
    for event in leaves:
        if event["kind"] in ("attention", "norm", *DENSE_KINDS, "embedding"):
            params = {r: (None if k is None else str(k)) for r, k in (event.get("params") or {}).items()
                      if isinstance(r, str) and (k is None or isinstance(k, int))}
            constants = event.get("constants") if isinstance(event.get("constants"), dict) else {}
            steps.append(Step(len(steps), event, event["kind"], params, constants, {}))
    return steps


def norm_structure(evidence, observed: analysis.Observed, phase: str, see: str, values: dict) -> Structure:
    """The structure of a call as the checks of its norms read it: verified if the call is (and mixes
    positions: ``computed_layer``), whatever else the grader recognised in it; else claimed."""
    if observed.verified:
        computed_layer(observed, see, values)
    claimed = None if observed.verified else pseudo_steps_of(trace_leaves(evidence, phase))
    return Structure(observed, claimed, see)


def layer_structure(evidence, observed: analysis.Observed, phase: str, see: str, *sources: str) -> Structure:
    """The structure of a call: verified if the call is (and attends over ``sources``), else claimed."""
    if observed.verified and not attends_over(observed, *sources):
        analysis.not_checked(NO_ATTENTION_FOUND, see)
    claimed = None if observed.verified else pseudo_steps_of(trace_leaves(evidence, phase))
    return Structure(observed, claimed, see)
