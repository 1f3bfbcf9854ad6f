"""Phases of ``grade explain exercise3``: why the encoder needs two LayerNormalization layers.

Runs in a grading child, on one encoder class: the subject the parent chose
(the student's, when it passed the structure checks, or the reference's), or,
in a child of its own, the student's encoder beside a reference subject. The
classifier around it is built here (``grader.explain.experiments``: Keras's
own token embedding), so a child holds no code but the grader's and the one
encoder it was started on: never a reference beside a student's code, never a
student's code beside the reference. Each phase reports plain measurements;
the parent checks their form and decides every verdict.

A job of ``"mode": "experiments"`` runs:

- ``structure``: the two norms one call of the encoder runs, parameter counts
  with two norms and with one shared norm, and whether the tied model computes
  what a genuinely shared norm computes;
- ``seed_0``, ``seed_1``, ...: for one seed, the classifier trained with two
  norms (the norms' inputs and values before and after training, test loss and
  accuracy) and with one shared norm (each place's gradient of the shared gamma
  and beta at every step, test loss and accuracy).

A job of ``"mode": "norms"`` (the student's encoder, when the reference is the
subject) runs only ``submission_structure``: how many norm calls, on how many
distinct norms, the encoder makes.
"""

from __future__ import annotations

import numpy as np

from .experiments import (
    Trainer, evaluate, feature_statistics, find_norms, gradient_split, new_model, norm_inputs,
    norm_values, parameter_counts, tie, two_norms,
)


def run(encoder_class, job: dict, stream, scratch: str) -> None:
    from ..exercises.tasks import contains_token_task

    plan = job["experiment"]
    dims = plan["dims"]

    def task(seed: int, offset: int, count: int):
        return contains_token_task(seed * 2 + offset, dims["vocab_size"], dims["sequence_length"], count)

    seeds = [int(s) for s in plan["seeds"]]
    if job.get("mode") == "norms":
        with stream.phase("submission_structure") as data:
            tokens, _ = task(seeds[0], 1, 8)
            found = find_norms(new_model(encoder_class, dims, seeds[0], tokens), tokens)
            data["norm_calls"], data["distinct_norms"] = found["calls"], found["distinct"]
        return
    ok = False
    with stream.phase("structure") as data:
        tokens, labels = task(seeds[0], 1, plan["test_count"])
        model = new_model(encoder_class, dims, seeds[0], tokens)
        found = find_norms(model, tokens)
        data["norm_calls"], data["distinct_norms"] = found["calls"], found["distinct"]
        norms = two_norms(found)
        data["parameters"] = parameter_counts(model, norms, tokens, labels)
        tie(norms)
        data["equivalence"] = gradient_split(model, norms, tokens, labels)
        ok = True
    if ok:
        for index, seed in enumerate(seeds):
            with stream.phase(f"seed_{index}") as data:
                data["seed"] = seed
                train = task(seed, 0, plan["train_count"])
                test = task(seed, 1, plan["test_count"])
                data["two_norms"] = _two_norms(encoder_class, dims, seed, plan, train, test)
                data["shared_norm"] = _shared_norm(encoder_class, dims, seed, plan, train, test)


def _two_norms(encoder_class, dims, seed, plan, train, test) -> dict:
    model = new_model(encoder_class, dims, seed, test[0])
    norms = two_norms(find_norms(model, test[0]))
    real = test[0] != 0
    result = {"inputs_before": [feature_statistics(v, real) for v in norm_inputs(model, norms, test[0])],
              "values_before": norm_values(norms)}
    losses, _ = Trainer(model, norms, shared=False, learning_rate=plan["learning_rate"]).fit(
        *train, steps=plan["steps"], batch=plan["batch"], seed=seed)
    result.update(
        losses=losses,
        inputs_after=[feature_statistics(v, real) for v in norm_inputs(model, norms, test[0])],
        values_after=norm_values(norms),
        test=evaluate(model, *test),
    )
    return result


def _shared_norm(encoder_class, dims, seed, plan, train, test) -> dict:
    model = new_model(encoder_class, dims, seed, test[0])
    norms = two_norms(find_norms(model, test[0]))
    losses, splits = Trainer(model, norms, shared=True, learning_rate=plan["learning_rate"]).fit(
        *train, steps=plan["steps"], batch=plan["batch"], seed=seed)
    return {"losses": losses, "splits": np.asarray(splits), "test": evaluate(model, *test),
            "split_after": gradient_split(model, norms, *test)}
