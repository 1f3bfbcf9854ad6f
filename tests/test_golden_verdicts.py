"""The catalogue's verdicts, kept in the repository: a change of any check's status, points or
message, for any catalogued submission, shows as a diff to review.

``tests/golden/<exercise>.json`` holds, for every catalogued submission of the exercise (its
solution, stub, mistakes and variants), the status, the score, the error and each check's status,
points and message: a file per exercise, so adding an exercise adds a file. The catalogue is graded with a seed drawn for the run, and a message may quote the
numbers that seed drew, so every number in a text is kept as ``#``, and the folder the catalogue
was written to as ``<catalog>``. ``pytest tests/test_golden_verdicts.py --update-golden`` writes
the file anew from this run's verdicts.
"""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent / "golden"


def golden_file(exercise_id: str) -> Path:
    return GOLDEN / f"{exercise_id}.json"
NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+(?:\.\d+)?|\.\d+)(?:e[-+]?\d+)?(?![\w])", re.IGNORECASE)
CATALOG_FOLDER = re.compile(r"\S*/catalog\d*(?=/)")
# a mask picture's rows (its keys and queries: the padding the seed drew) and a tensor's values as the
# student's exception prints them (NumPy spaces and cuts them by their digits)
PICTURE_ROW = re.compile(r"^ +(?:yours|keys|query)\b.*$", re.MULTILINE)
TENSOR_VALUES = re.compile(r"numpy=.*", re.DOTALL)


def masked(text: str | None) -> str | None:
    """A text with the run's numbers, the mask pictures' rows, printed tensor values and the
    catalogue's folder left out."""
    if text is None:
        return None
    text = TENSOR_VALUES.sub("numpy=<values>", CATALOG_FOLDER.sub("<catalog>", text))
    return re.sub(r"(?:<picture>\n?)+", "<picture>\n", PICTURE_ROW.sub("<picture>", NUMBER.sub("#", text))).rstrip("\n")


def golden_form(verdict) -> dict:
    return {
        "status": verdict.status, "score": verdict.score, "max_score": verdict.max_score,
        "error": masked(verdict.error),
        "checks": [[c.id, c.status, c.points, masked(c.message)] for c in verdict.checks],
    }


def test_masking_keeps_the_words_and_leaves_out_the_numbers_and_the_folder():
    assert masked("Observed: 16 weights, max |difference| 3.2e-05 at position -1 of (2, 8)") == \
        "Observed: # weights, max |difference| # at position # of (#, #)"
    assert masked("norm_2 and layer1 stay; x1.5 too") == "norm_2 and layer1 stay; x1.5 too"
    assert masked("key_dim=8. 16 weights, 2.") == "key_dim=#. # weights, #."  # a sentence's full stop stays
    assert masked("/tmp/pytest-of-root/pytest-9/catalog0/exercise3/stub.py raised") == "<catalog>/exercise3/stub.py raised"
    picture = ("Mask for sequence 1:\n           yours         expected\n  keys     0 1 p   0 1 p\n"
               "  query 0  \u25a0 \u25a0 \u25a0   \u25a0 \u25a0 \u00b7\n  query 2p               \u25a0 \u25a0 \u00b7\nExpected: padded keys hidden.")
    assert masked(picture) == "Mask for sequence #:\n<picture>\nExpected: padded keys hidden."
    assert masked("raised ValueError: Inputs received: [<tf.Tensor: shape=(2, 6), numpy=\n array([[1.5, 2.25]") == \
        "raised ValueError: Inputs received: [<tf.Tensor: shape=(#, #), numpy=<values>"


def test_every_catalogued_verdict_is_the_one_kept_in_the_repository(catalog_verdicts, request):
    """Each exercise graded (all of them, or those of GRADE_CATALOG_ONLY) against its own file."""
    graded: dict[str, dict] = {}
    for (exercise, name), verdict in sorted(catalog_verdicts.items()):
        graded.setdefault(exercise, {})[name] = golden_form(verdict)
    changed = []
    for exercise, now in graded.items():
        path, text = golden_file(exercise), json.dumps(now, indent=1, ensure_ascii=False, sort_keys=True) + "\n"
        if request.config.getoption("--update-golden"):
            GOLDEN.mkdir(exist_ok=True)
            path.write_text(text, encoding="utf-8")
            continue
        kept = path.read_text(encoding="utf-8") if path.is_file() else ""
        if kept != text:
            changed.append("".join(list(difflib.unified_diff(kept.splitlines(True), text.splitlines(True),
                                                             f"kept {path.name}", "now"))[:200]))
    if changed:
        pytest.fail("the catalogue's verdicts changed (or a new exercise has none kept yet); if the change is meant, "
                    "run pytest tests/test_golden_verdicts.py --update-golden and review git diff:\n"
                    + "\n".join(changed), pytrace=False)


def test_every_kept_file_is_an_exercises():
    from grader import exercises

    assert sorted(path.stem for path in GOLDEN.glob("*.json")) == sorted(exercises.EXERCISES)


def test_every_kept_message_and_check_title_names_the_sizes_as_the_exercises_constructor_does():
    """An exercise whose constructor names its sizes otherwise than the roles the shared checks know
    them by (the third edition's hidden_dim for embed_dim, intermediate_dim for dense_dim) is told
    about them in its own names: in every check's title and in every kept message of its catalogue."""
    from grader import exercises
    from grader.judge.advice import argument_names
    from grader.judging.declarations import declared_checks

    renamed = {}
    for exercise_id, exercise in exercises.EXERCISES.items():
        names = argument_names(exercise.public_job())
        if names:
            renamed[exercise_id] = names
    assert {"ch15_encoder", "ch15_decoder"} <= set(renamed)  # the space is not empty
    for exercise_id, names in renamed.items():
        roles = re.compile(r"\b(" + "|".join(names) + r")\b")
        for declared in declared_checks(exercises.get(exercise_id)):
            assert not roles.search(declared["title"]), (exercise_id, declared)
        kept = json.loads(golden_file(exercise_id).read_text(encoding="utf-8"))
        for submission, verdict in kept.items():
            for text in [verdict.get("error") or ""] + [check[3] or "" for check in verdict["checks"]]:
                found = roles.search(text)
                assert found is None, f"{exercise_id} {submission}: {text[max(0, found.start() - 80):found.end() + 40]}"


def test_a_text_of_the_graders_is_put_in_the_exercises_words_and_only_whole_names_change():
    from grader.judge.advice import argument_names, in_words

    job = {"dims": {"embed_dim": 8, "dense_dim": 16, "num_heads": 2},
           "constructor_arguments": {"hidden_dim": 8, "intermediate_dim": 16, "num_heads": 2}}
    assert argument_names(job) == {"embed_dim": "hidden_dim", "dense_dim": "intermediate_dim"}
    assert in_words("Dense(embed_dim)(relu(Dense(dense_dim)(h))), not my_embed_dims", job) == \
        "Dense(hidden_dim)(relu(Dense(intermediate_dim)(h))), not my_embed_dims"
    same = {"dims": {"embed_dim": 8}, "constructor_arguments": {"embed_dim": 8}}
    assert argument_names(same) == {} and in_words("embed_dim", same) == "embed_dim"
    for malformed in (None, {}, {"dims": {"a": 1}}, {"dims": {"a": 1}, "constructor_arguments": {"b": 1, "c": 2}},
                      {"dims": [1], "constructor_arguments": {"b": 1}}):
        assert in_words("embed_dim", malformed) == "embed_dim"
