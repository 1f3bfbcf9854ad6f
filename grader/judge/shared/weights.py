"""The weights topic's shared checks: which variables exist, the norms' parameters, the attentions' sizes."""

from __future__ import annotations

from collections import Counter

import numpy as np

from ..advice import in_words
from ..framework import fail
from ..ops import role_shape
from .structure import Structure, trainable_keys


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
    why = why or (NORM_AXIS_WHY if structure.norm_axes() else shared_norm_why(len(steps)))
    if not steps:
        fail("no LayerNormalization layer was called.", "norms, each with gamma and beta.", why)
    problems = structure.norm_axes()
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


NORM_AXIS_WHY = ("A LayerNormalization normalises each position's feature vector over its features: over "
                 "another axis, one position's output depends on the others, padding included.")


def assert_norms_over_features(structure: Structure, expected: str = "every norm over the features (the last "
                                                                       "axis), as LayerNormalization() does.") -> None:
    """Fails, naming the axis, where a norm normalises over other axes than the last."""
    said = structure.norm_axes()
    if said:
        fail("; ".join(said) + ".", expected, NORM_AXIS_WHY)


def assert_trainable_shapes(forward: dict, values: dict, expected: list[tuple], summary: str, hints: list[str],
                            why: str | None = None, roles: dict | None = None) -> None:
    """The trainable weights have the ``expected`` shapes, each counted in the shape of the role the
    verified call gives it (``roles``: key -> shape, from ``Structure.role_shapes``)."""
    roles = roles or {}
    observed: Counter = Counter()
    for key in trainable_keys(forward):
        if key in values:
            shape = roles.get(key, tuple(np.shape(values[key])))
            observed.update(shape if isinstance(shape, list) else [shape])
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
                    expected_key_dim: tuple[int, str] | None = None, job: dict | None = None) -> list[str]:
    """Sizes of the attention and the feed-forward that differ from the exercise's, each size named
    as the exercise's constructor names it (``job``: its public job). The attention's ``key_dim`` is
    ``embed_dim`` unless ``expected_key_dim`` says (its value, how the book writes it)."""
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
    return [in_words(hint, job) for hint in hints]


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
