"""A layer's parts found by what they compute: attentions, norms and dense layers from the replayed calls,
the verified layer and the roles of its variables."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import analysis, budget, reference
from ..framework import fail, output_cause
from ..ops import View
from .numbers import close


DENSE_KINDS = ("dense", "conv", "einsum_dense")  # what computes a Dense at each position


KIND_WORDS = {"attention": "attention", "norm": "norm", "dense": "dense", "conv": "dense", "einsum_dense": "dense",
              "embedding": "embedding", "add": "add", "activation": "activation", "relu": "relu"}


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

    def norm_axes(self) -> list[str]:
        """What each norm that normalises over other axes than the features (the last) does instead,
        in words: "norm 2 normalises over axis 1 (the positions)"."""
        said = []
        for position, step in enumerate(self.norm_steps, start=1):
            axes = step.constants.get("axes")
            if step.constants.get("last_axis") or not isinstance(axes, list):
                continue
            words = {0: "the batch", 1: "the positions"}
            named = ", ".join(f"{a} ({words[a]})" if a in words else str(a) for a in axes)
            said.append(f"norm {position} normalises over axis {named} instead of the features (the last axis)")
        return said

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
        shapes: dict = {}
        for step in self.observed.steps(*KIND_WORDS):
            for key in step.params.values():
                if isinstance(key, View):
                    shapes.setdefault(str(key), {})[(key.role, key.columns)] = key.shape
        # a variable playing several roles (one Dense projecting the query, key and value together)
        # counts as each of them
        return {key: next(iter(roles.values())) if len(roles) == 1 else list(roles.values())
                for key, roles in shapes.items()}

    def describe(self) -> str:
        return " → ".join(self.sequence) or "no attention, norm, dense or embedding layer at all"


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
    "from (it finds an attention by what it computes: projections of the query, the keys and the values, "
    "by Dense or EinsumDense layers or the parts of one wider projection, that only operations combine, "
    "followed by one projection layer on the joined heads)"
)


def fail_no_attention_found(observed_steps: str, expected: str) -> None:
    """The forward check's failure for a verified call in which the grader found no attention: what it
    could not do, not a verdict on the computation, and which checks judged the behaviour anyway."""
    fail(
        f"the grader recomputed your layer ({observed_steps}) but found no attention in it that it can "
        "compare with the exercise's: it finds an attention by what it computes, from projections of the query, "
        "the keys and the values (Dense or EinsumDense layers, or the parts of one wider projection) whose "
        "outputs only your operations combine, followed by one projection layer (Dense or EinsumDense) on the "
        "joined heads. The checks of what your layer does (gradients, "
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


def identified(plain: analysis.Observed, expected: str, shape: tuple, mistakes: dict, why: str,
               whys: dict | None = None) -> bool:
    """The forward check's first judgement of the plain call, by the layers the grader recognised in
    it: a call it could not verify fails with why (``explain_unverified``); the correct layer is True,
    nothing more to check; a known mistaken one fails naming its mistake (``mistakes[name]``, what is
    wrong in it; ``whys[name]``, else ``why``, why it matters); False where nothing was recognised,
    and the check goes on to find the fault step by step."""
    if not plain.verified:
        explain_unverified(plain, expected, shape=shape)
    if plain.identified_as is None:
        return False
    if plain.identified_as == "correct":
        return True
    fail(f"your output matches a layer in which {mistakes[plain.identified_as]}.", expected,
         (whys or {}).get(plain.identified_as, why))


def trainable_keys(forward: dict) -> set[str]:
    return {str(k) for k in forward.get("trainable") or []}


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
    """When a call could not be replayed, or was replayed only through operations on the layer's own
    weights (a feed-forward of raw weights: no Keras layers for the checks to read), find whether its
    output is a known variant of the exercise's layer computed from ``roles``; if so, mark it
    verified with that variant as its function."""
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
            # the parts found by their roles are what the checks read, whatever the replay followed
            observed.program = None
            observed.function = lambda vals, name=name: variants_of(reference.resolve(roles, vals))[name]
            observed.identified_as = name
            observed.roles = roles
            observed.pseudo_steps = pseudo_steps
            return


def pseudo_steps_of(leaves: list[dict]) -> list:
    """Replay steps standing for claimed layers: confirmed by an identification by roles, or, for
    a call that could not be verified, what failure messages may name."""
    from ..replay import Step

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
