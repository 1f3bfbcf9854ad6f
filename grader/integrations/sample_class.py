"""A small class of submissions for an instructor to try the grading tools on (``grade sample-class``).

For one exercise: a correct answer, each common mistake of the exercise, a crash at import, a syntax
error, the untouched stub and a notebook holding a correct answer, in nbgrader's layout
(``submitted/<student>/<exercise>/``) beside the exercise's nbgrader course, with ``sample-class.json``
saying what each student's file is and the score and status grading gives it. The scores are
graded, never kept: they stay what ``grade`` gives as the checks change.

Each mistake is an edit of the exercise's solution, the same edit as the mistake of that name in the
catalogue the tests grade (tests/catalog/, whose verdicts tests/golden/ keeps); a test holds the two
to the same text. The files hold answers: they go only into the folder the instructor names.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from .. import exercises

MANIFEST = "sample-class.json"


@dataclass(frozen=True)
class SampleMistake:
    name: str  # the catalogue's name of the mistake, and the student's id (with - for _)
    what: str  # what the student got wrong, for the manifest and the listing
    check: str  # the check that catches it first
    edits: tuple[tuple[str, str], ...]  # (text of the solution, its replacement), each found exactly once, in order


# The common mistakes of each exercise, as edits of its solution.
MISTAKES: dict[str, tuple[SampleMistake, ...]] = {
    'exercise1': (
        SampleMistake('sums_over_features', 'sums the embeddings over the feature axis, which loses it', 'api.output_shape', (
            ('        return embedded_tokens + embedded_positions\n',
             '        return keras.ops.sum(embedded_tokens + embedded_positions, axis=-1)\n'),
        )),
        SampleMistake('positions_not_added', 'returns the token embeddings without the position embeddings', 'forward.sum', (
            ('        return embedded_tokens + embedded_positions\n',
             '        return embedded_tokens\n'),
        )),
        SampleMistake('no_compute_mask', 'compute_mask returns None: the padding mask is lost', 'mask.values', (
            ('        return keras.ops.not_equal(inputs, 0)\n',
             '        return None\n'),
        )),
        SampleMistake('inverted_mask', 'the padding mask is inverted: padding counts as real tokens', 'mask.values', (
            ('        return keras.ops.not_equal(inputs, 0)\n',
             '        return keras.ops.equal(inputs, 0)\n'),
        )),
        SampleMistake('missing_config_key', "get_config leaves out one of the constructor's arguments", 'config.own_keys', (
            ('                "input_dim": self.input_dim,\n',
             ''),
        )),
    ),
    'exercise2': (
        SampleMistake('no_residual', 'no residual connection around the attention', 'forward.residual_norm', (
            ('        return self.layernorm(inputs + attention_output)\n',
             '        return self.layernorm(attention_output)\n'),
        )),
        SampleMistake('ignored_mask', 'the padding mask never reaches the attention', 'mask.attention_mask_shape', (
            ('        attention_output = self.attention(inputs, inputs, attention_mask=attention_mask)\n',
             '        attention_output = self.attention(inputs, inputs)\n'),
        )),
        SampleMistake('wrong_mask_axis', 'the mask is expanded on the wrong axis: it hides queries, not keys', 'mask.masks_keys', (
            ('            attention_mask = keras.ops.expand_dims(mask, axis=1)\n',
             '            attention_mask = keras.ops.expand_dims(mask, axis=2)\n'),
        )),
        SampleMistake('pre_norm', 'normalises before the attention (pre-norm) instead of after the residual sum', 'forward.residual_norm', (
            ('        attention_output = self.attention(inputs, inputs, attention_mask=attention_mask)\n        return self.layernorm(inputs + attention_output)\n',
             '        normed = self.layernorm(inputs)\n        return inputs + self.attention(normed, normed, attention_mask=attention_mask)\n'),
        )),
        SampleMistake('missing_config_key', "get_config leaves out one of the constructor's arguments", 'config.own_keys', (
            ('        config.update({"embed_dim": self.embed_dim, "num_heads": self.num_heads})\n',
             '        config.update({"embed_dim": self.embed_dim})\n'),
        )),
    ),
    'exercise3': (
        SampleMistake('shared_norm', 'one LayerNormalization shared by the residual blocks', 'weights.two_norms', (
            ('        self.layernorm_2 = layers.LayerNormalization()\n',
             '        self.layernorm_2 = self.layernorm_1\n'),
        )),
        SampleMistake('wrong_mask_axis', 'the mask is expanded on the wrong axis: it hides queries, not keys', 'mask.masks_keys', (
            ('            mask = keras.ops.expand_dims(mask, axis=1)\n',
             '            mask = keras.ops.expand_dims(mask, axis=2)\n'),
        )),
        SampleMistake('ignored_mask', 'the padding mask never reaches the attention', 'mask.attention_mask_shape', (
            ('        attention_output = self.attention(inputs, inputs, attention_mask=mask)\n',
             '        attention_output = self.attention(inputs, inputs)\n'),
        )),
        SampleMistake('no_attention_residual', 'no residual connection around the attention', 'forward.post_norm', (
            ('        proj_input = self.layernorm_1(inputs + attention_output)\n',
             '        proj_input = self.layernorm_1(attention_output)\n'),
        )),
        SampleMistake('pre_norm', 'normalises before the attention (pre-norm) instead of after the residual sum', 'forward.call_order', (
            ('        attention_output = self.attention(inputs, inputs, attention_mask=mask)\n        proj_input = self.layernorm_1(inputs + attention_output)\n        proj_output = self.dense_proj(proj_input)\n        return self.layernorm_2(proj_input + proj_output)\n',
             '        normed = self.layernorm_1(inputs)\n        hidden = inputs + self.attention(normed, normed, attention_mask=mask)\n        return hidden + self.dense_proj(self.layernorm_2(hidden))\n'),
        )),
        SampleMistake('missing_config_key', "get_config leaves out one of the constructor's arguments", 'config.own_keys', (
            ('                "dense_dim": self.dense_dim,\n',
             ''),
        )),
        SampleMistake('kwargs_not_forwarded', "the constructor's **kwargs are not passed on to the base Layer", 'config.base_keys', (
            ('        super().__init__(**kwargs)\n',
             '        super().__init__()\n'),
        )),
    ),
    'exercise4': (
        SampleMistake('not_causal', 'no causal mask: each position sees the ones after it', 'mask.causal', (
            ('        causal = keras.ops.tril(keras.ops.ones((length, length), dtype="bool"))\n',
             '        causal = keras.ops.ones((length, length), dtype="bool")\n'),
        )),
        SampleMistake('shared_norm', 'one LayerNormalization shared by the residual blocks', 'weights.three_norms', (
            ('        self.layernorm_3 = layers.LayerNormalization()\n',
             '        self.layernorm_3 = self.layernorm_1\n'),
        )),
        SampleMistake('cross_mask_ignored', "the cross-attention ignores the source's padding mask", 'mask.cross_attention_mask', (
            ('        crossed = self.attention_2(attended, encoder_outputs, attention_mask=cross_mask)\n',
             '        crossed = self.attention_2(attended, encoder_outputs)\n'),
        )),
        SampleMistake('cross_attention_query_and_value_swapped', "the cross-attention's query and value are swapped", 'api.output_shape', (
            ('        crossed = self.attention_2(attended, encoder_outputs, attention_mask=cross_mask)\n',
             '        crossed = self.attention_2(encoder_outputs, attended, attention_mask=cross_mask)\n'),
        )),
        SampleMistake('missing_config_key', "get_config leaves out one of the constructor's arguments", 'config.own_keys', (
            ('                "num_heads": self.num_heads,\n',
             ''),
        )),
    ),
    'exercise5': (
        SampleMistake('no_encoder', 'the classifier leaves the Transformer encoder out', 'weights.layers', (
            ('    x = TransformerEncoder(embed_dim, dense_dim, num_heads)(x)\n',
             '    \n'),
        )),
        SampleMistake('two_class_softmax', 'two softmax outputs where the task wants one probability', 'api.model', (
            ('    outputs = layers.Dense(1, activation="sigmoid")(x)\n',
             '    outputs = layers.Dense(2, activation="softmax")(x)\n'),
        )),
        SampleMistake('max_pooling_like_the_book', 'global max pooling, which lets padding change the prediction', 'mask.padding_invariance', (
            ('    x = layers.GlobalAveragePooling1D()(x)\n',
             '    x = layers.GlobalMaxPooling1D()(x)\n'),
        )),
        SampleMistake('lambda_layer_drops_the_mask', 'a Lambda layer between the embedding and the encoder drops the mask', 'mask.end_to_end', (
            ('    x = PositionalEmbedding(sequence_length, vocab_size, embed_dim)(inputs)\n',
             '    x = PositionalEmbedding(sequence_length, vocab_size, embed_dim)(inputs)\n    x = layers.Lambda(lambda t: t * 2.0)(x)\n'),
        )),
        SampleMistake('unregistered_custom_layer', 'a custom layer the saved model cannot find again when it is loaded', 'config.keras_file', (
            ('\ndef build_classifier(vocab_size, sequence_length, embed_dim, dense_dim, num_heads):\n',
             '\nclass Scale(layers.Layer):\n    def call(self, x):\n        return x * 1.0\n\n\ndef build_classifier(vocab_size, sequence_length, embed_dim, dense_dim, num_heads):\n'),
            ('    x = layers.GlobalAveragePooling1D()(x)\n',
             '    x = layers.GlobalAveragePooling1D()(x)\n    x = Scale()(x)\n'),
        )),
    ),
    'ch15_embedding': (
        SampleMistake('positions_not_added', 'returns the token embeddings without the position embeddings', 'forward.sum', (
            ('        return embedded_tokens + embedded_positions\n',
             '        return embedded_tokens\n'),
        )),
        SampleMistake('sums_over_features', 'sums the embeddings over the feature axis, which loses it', 'api.output_shape', (
            ('        return embedded_tokens + embedded_positions\n',
             '        return ops.sum(embedded_tokens + embedded_positions, axis=-1)\n'),
        )),
        SampleMistake('one_table_for_tokens_and_positions', 'one Embedding table for both the tokens and the positions', 'weights.two_tables', (
            ('        embedded_positions = self.position_embeddings(positions)\n',
             '        embedded_positions = self.token_embeddings(positions)\n'),
        )),
        SampleMistake('missing_config_key', "get_config leaves out one of the constructor's arguments", 'config.own_keys', (
            ('                "input_dim": self.input_dim,\n',
             ''),
        )),
    ),
    'ch15_encoder': (
        SampleMistake('shared_norm', 'one LayerNormalization shared by the residual blocks', 'weights.two_norms', (
            ('        self.feed_forward_layernorm = layers.LayerNormalization()\n',
             '        self.feed_forward_layernorm = self.self_attention_layernorm\n'),
        )),
        SampleMistake('wrong_mask_axis', 'the mask is expanded on the wrong axis: it hides queries, not keys', 'mask.masks_keys', (
            ('        mask = source_mask[:, None, :]\n',
             '        mask = source_mask[:, :, None]\n'),
        )),
        SampleMistake('ignored_mask', 'the padding mask never reaches the attention', 'mask.attention_mask_shape', (
            ('        x = self.self_attention(query=x, key=x, value=x, attention_mask=mask)\n',
             '        x = self.self_attention(query=x, key=x, value=x)\n'),
        )),
        SampleMistake('pre_norm', 'normalises before the attention (pre-norm) instead of after the residual sum', 'forward.call_order', (
            ('        residual = x = source\n',
             ''),
            ('        x = self.self_attention(query=x, key=x, value=x, attention_mask=mask)\n        x = x + residual\n        x = self.self_attention_layernorm(x)\n        residual = x\n        x = self.feed_forward_1(x)\n        x = self.feed_forward_2(x)\n        x = x + residual\n        x = self.feed_forward_layernorm(x)\n',
             '        normed = self.self_attention_layernorm(source)\n        x = source + self.self_attention(query=normed, key=normed, value=normed, attention_mask=mask)\n        x = x + self.feed_forward_2(self.feed_forward_1(self.feed_forward_layernorm(x)))\n'),
        )),
        SampleMistake('missing_config_key', "get_config leaves out one of the constructor's arguments", 'config.own_keys', (
            ('                "intermediate_dim": self.intermediate_dim,\n',
             ''),
        )),
    ),
    'ch15_decoder': (
        SampleMistake('not_causal', 'no causal mask: each position sees the ones after it', 'mask.causal', (
            ('        x = self.self_attention(query=x, key=x, value=x, use_causal_mask=True)\n',
             '        x = self.self_attention(query=x, key=x, value=x)\n'),
        )),
        SampleMistake('shared_norm', 'one LayerNormalization shared by the residual blocks', 'weights.three_norms', (
            ('        self.cross_attention_layernorm = layers.LayerNormalization()\n',
             '        self.cross_attention_layernorm = self.self_attention_layernorm\n'),
        )),
        SampleMistake('cross_mask_ignored', "the cross-attention ignores the source's padding mask", 'mask.cross_attention_mask', (
            ('        x = self.cross_attention(query=x, key=source, value=source, attention_mask=mask)\n',
             '        x = self.cross_attention(query=x, key=source, value=source)\n'),
        )),
        SampleMistake('missing_config_key', "get_config leaves out one of the constructor's arguments", 'config.own_keys', (
            ('                "num_heads": self.num_heads,\n',
             ''),
        )),
    ),

}


@dataclass(frozen=True)
class SampleStudent:
    id: str  # the student's folder, submitted/<id>/<exercise>/
    kind: str  # correct, mistake, crash, syntax, stub or notebook
    what: str
    file_name: str
    text: str
    mistake: SampleMistake | None = None

    def path(self, exercise_id: str) -> Path:
        return Path("submitted") / self.id / exercise_id / self.file_name


class SampleClassError(Exception):
    """The folder cannot take the sample class (it is not empty and --force was not given)."""


def apply_edits(text: str, edits) -> str:
    """``text`` with each (old, new) of ``edits`` replaced in turn; each old must be there exactly once."""
    for old, new in edits:
        found = text.count(old)
        if found != 1:
            raise ValueError(f"the edit's text is found {found} times in the solution: {old!r}")
        text = text.replace(old, new)
    return text


def mistaken(exercise_id: str, mistake: SampleMistake) -> str:
    return apply_edits(exercises.get(exercise_id).solution.read_text(encoding="utf-8"), mistake.edits)


def crashing_at_import(solution: str) -> str:
    """A correct layer, then a line left over from trying it out: a NameError while the file is imported."""
    return solution.rstrip("\n") + "\n\n\n# trying it out\nprint(sample_batch.shape)\n"


def with_syntax_error(solution: str) -> str:
    """The solution with the colon of its first ``def`` line left out."""
    broken, count = re.subn(r"^(\s*def .*\))(:)(\s*)$", r"\1\3", solution, count=1, flags=re.MULTILINE)
    if count != 1:
        raise ValueError("the solution has no def line to break")
    return broken


def answered_notebook(exercise_id: str) -> str:
    """The exercise's notebook as a student hands it in: the released notebook (hidden tests left out,
    as nbgrader releases it) with a correct answer in its answer cell."""
    import nbformat

    from .course import build_notebook

    notebook = build_notebook(exercises.get(exercise_id))
    for cell in notebook.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("solution"):
            cell.source = "\n".join(line for line in cell.source.split("\n")
                                    if line.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION"))
            if cell.cell_type == "markdown":  # a written answer: the model answer's words, not its mark scheme
                cell.source = cell.source.split("**Mark scheme", 1)[0].replace("**Model answer.** ", "").strip()
        elif meta.get("grade") and cell.cell_type == "code":
            cell.source = re.sub(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS\n?", "", cell.source,
                                 flags=re.DOTALL).rstrip("\n")
    return nbformat.writes(notebook) + "\n"


def sample_students(exercise_id: str) -> list[SampleStudent]:
    from ..exercises.stubs import fresh_stub

    exercise = exercises.get(exercise_id)
    solution = exercise.solution.read_text(encoding="utf-8")
    py = f"{exercise_id}.py"
    students = [SampleStudent("correct", "correct", "a correct answer", py, solution)]
    students += [SampleStudent(m.name.replace("_", "-"), "mistake", f"a common mistake: {m.what}", py,
                               mistaken(exercise_id, m), m) for m in MISTAKES[exercise_id]]
    students += [
        SampleStudent("crash-at-import", "crash", "a correct layer, then a line that raises NameError at import",
                      py, crashing_at_import(solution)),
        SampleStudent("syntax-error", "syntax", "a correct answer with a colon missing: a SyntaxError", py,
                      with_syntax_error(solution)),
        SampleStudent("stub", "stub", "the untouched stub, as handed out", py, fresh_stub(exercise)),
        SampleStudent("notebook", "notebook", "the nbgrader notebook with a correct answer",
                      f"{exercise_id}.ipynb", answered_notebook(exercise_id)),
    ]
    return students


def write_sample_class(folder: Path, exercise_id: str, force: bool = False) -> list[SampleStudent]:
    """Write the students' files and the exercise's nbgrader course into ``folder`` (created if
    missing; refused when it holds anything, unless ``force``). The manifest is written by
    ``write_manifest`` once the class is graded."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise SampleClassError(f"{folder} exists and is not a folder")
    if folder.is_dir() and any(folder.iterdir()) and not force:
        raise SampleClassError(f"{folder} is not empty: give an empty or new folder, or --force to write the "
                               "sample class over what is there")
    students = sample_students(exercise_id)
    from .course import update_course

    update_course(folder, [exercise_id], force=force)
    for student in students:
        target = folder / student.path(exercise_id)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(student.text, encoding="utf-8")
    return students


def write_manifest(folder: Path, exercise_id: str, students: list[SampleStudent], verdicts: dict) -> Path:
    """``sample-class.json``: each student's file, what it is, and the status and score its grading gave
    (``verdicts``: student id -> Verdict)."""
    rows = []
    for student in students:
        verdict = verdicts[student.id]
        rows.append({"student": student.id, "file": student.path(exercise_id).as_posix(), "kind": student.kind,
                     "what": student.what, "mistake": student.mistake.name if student.mistake else None,
                     "caught_by": student.mistake.check if student.mistake else None,
                     "status": verdict.status, "score": verdict.score, "max_score": verdict.max_score})
    manifest = {"exercise": exercise_id, "title": exercises.get(exercise_id).title, "holds_answers": True,
                "note": "These files hold correct answers: keep this folder away from students.",
                "students": rows}
    path = Path(folder) / MANIFEST
    path.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return path


def grade_students(folder: Path, exercise_id: str, students: list[SampleStudent], settings) -> dict:
    """Each student's verdict, graded as ``grade batch`` grades: children forked from one worker."""
    from ..api import grade_pairs
    from ..workers import Workers
    from .batch import default_jobs

    workers = Workers(backend=settings.backend)
    try:
        paths = [(exercise_id, (Path(folder) / student.path(exercise_id)).resolve()) for student in students]
        verdicts = [verdict for _, _, verdict in grade_pairs(paths, settings, jobs=default_jobs(), runner=workers)]
    finally:
        workers.close()
    return {student.id: verdict for student, verdict in zip(students, verdicts)}
