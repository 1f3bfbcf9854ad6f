"""Phases of ``grade explain exercise3``: why the encoder needs two LayerNormalization layers.

Runs in the grading child, on the encoder class the parent chose as the
subject (the student's, when it passed the structure checks, or the
reference). Each phase reports plain measurements
(``grader.explain.experiments``); the parent checks their form and decides
every verdict:

- ``embedding``: the positional embedding of the classifier, made from the
  source the parent sent;
- ``structure``: the two norms one call of the encoder runs, parameter counts
  with two norms and with one shared norm, and whether the tied model computes
  what a genuinely shared norm computes;
- ``seed_0``, ``seed_1``, ...: for one seed, the classifier trained with two
  norms (the norms' inputs and values before and after training, test loss and
  accuracy) and with one shared norm (each place's gradient of the shared gamma
  and beta at every step, test loss and accuracy);
- ``submission_structure`` (only when the subject is the reference and the
  parent sent the student's source): how many norm calls, on how many distinct
  norms, the student's encoder makes. It runs last, so that whatever the
  student's code does, the experiments have already been reported.
"""

from __future__ import annotations

import numpy as np

from .experiments import (
    Trainer, evaluate, feature_statistics, find_norms, gradient_split, module_from_source, new_model, norm_inputs,
    norm_values, parameter_counts, tie, two_norms,
)


def run(encoder_class, job: dict, stream, scratch: str) -> None:
    from ..exercises.tasks import contains_token_task

    plan = job["experiment"]
    dims = plan["dims"]
    embedding_class = None
    with stream.phase("embedding") as data:
        embedding_class = module_from_source("positional_embedding", job["embedding_source"]).PositionalEmbedding
        data["class"] = embedding_class.__name__
    if embedding_class is None:
        return

    def task(seed: int, offset: int, count: int):
        return contains_token_task(seed * 2 + offset, dims["vocab_size"], dims["sequence_length"], count)

    seeds = [int(s) for s in plan["seeds"]]
    ok = False
    with stream.phase("structure") as data:
        tokens, labels = task(seeds[0], 1, plan["test_count"])
        model = new_model(embedding_class, encoder_class, dims, seeds[0], tokens)
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
                data["two_norms"] = _two_norms(embedding_class, encoder_class, dims, seed, plan, train, test)
                data["shared_norm"] = _shared_norm(embedding_class, encoder_class, dims, seed, plan, train, test)
    if job.get("student_source") is not None:
        with stream.phase("submission_structure") as data:
            student = getattr(module_from_source("student", job["student_source"]), job["class_name"])
            tokens, _ = task(seeds[0], 1, 8)
            found = find_norms(new_model(embedding_class, student, dims, seeds[0], tokens), tokens)
            data["norm_calls"], data["distinct_norms"] = found["calls"], found["distinct"]


def _two_norms(embedding_class, encoder_class, dims, seed, plan, train, test) -> dict:
    model = new_model(embedding_class, encoder_class, dims, seed, test[0])
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


def _shared_norm(embedding_class, encoder_class, dims, seed, plan, train, test) -> dict:
    model = new_model(embedding_class, encoder_class, dims, seed, test[0])
    norms = two_norms(find_norms(model, test[0]))
    losses, splits = Trainer(model, norms, shared=True, learning_rate=plan["learning_rate"]).fit(
        *train, steps=plan["steps"], batch=plan["batch"], seed=seed)
    return {"losses": losses, "splits": np.asarray(splits), "test": evaluate(model, *test),
            "split_after": gradient_split(model, norms, *test)}
