"""A correct layer the grader verifies but cannot take apart scores what its behaviour proves.

The encoder below is correct: its attention projects the query, keys and values with one Dense of
three times the width and splits the result (as minGPT-style code does), and projects the joined
heads back with a kernel and a bias of its own (``add_weight``) multiplied in by operations. The grader recomputes every step of it from its own numbers, but finds no
attention in it (an attention's output projection is a projection layer it can read). The checks of
behaviour — gradients, padding invariance, the norms, inference, config — still award their points;
the checks of structure say plainly that they could not be applied and why, and point to the one
check that says it.
"""

from __future__ import annotations

import pytest

from .catalog import catalog
from .conftest import grade_sources

BEHAVIOUR = ("gradients.all_variables", "gradients.norms_differ", "gradients.norms_diverge", "mask.padding_invariance",
             "weights.two_norms", "weights.norm_parameters", "forward.inference", "config.keras_file")
STRUCTURE = ("weights.trainable_list", "mask.attention_mask_shape", "mask.masks_keys", "forward.call_order")


def _unrecognised_attention() -> str:
    _, variants = catalog("ch15_encoder")
    source = next(v.source for v in variants if v.name == "keras_ops_attention_written_by_hand")
    for old, new in (
        ("        self.query = _layers.Dense(width)\n        self.key = _layers.Dense(width)\n"
         "        self.value = _layers.Dense(width)\n", "        self.qkv = _layers.Dense(3 * width)\n"),
        ("q, k, v = self._split(self.query(x)), self._split(self.key(x)), self._split(self.value(x))",
         "q, k, v = (self._split(part) for part in _ops.split(self.qkv(x), 3, axis=-1))"),
        ("        self.out = _layers.Dense(width)\n",
         "        self.out_kernel = self.add_weight(shape=(width, width), name=\"out_kernel\")\n"
         "        self.out_bias = self.add_weight(shape=(width,), initializer=\"zeros\", name=\"out_bias\")\n"),
        ("return self.out(_ops.reshape(joined, (_ops.shape(x)[0], _ops.shape(x)[1], self.heads * self.head_width)))",
         "joined = _ops.reshape(joined, (_ops.shape(x)[0], _ops.shape(x)[1], self.heads * self.head_width))\n"
         "        return _ops.matmul(joined, self.out_kernel) + self.out_bias"),
    ):
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    return source


@pytest.fixture(scope="module")
def verdict(tmp_path_factory):
    return grade_sources("ch15_encoder", {"unrecognised": _unrecognised_attention()},
                         tmp_path_factory.mktemp("unrecognised"), warm=True)["unrecognised"]


def test_the_checks_of_behaviour_award_their_points(verdict):
    checks = {c.id: c for c in verdict.checks}
    assert {i: checks[i].status for i in BEHAVIOUR} == {i: "passed" for i in BEHAVIOUR}
    assert all(checks[i].points == checks[i].max_points > 0 for i in BEHAVIOUR)


def test_the_checks_of_structure_say_why_they_could_not_be_applied(verdict):
    checks = {c.id: c for c in verdict.checks}
    for check_id in STRUCTURE:
        assert checks[check_id].status == "skipped", (check_id, checks[check_id].message)
        assert "found no attention" in checks[check_id].message and "(see forward.post_norm)" in \
            checks[check_id].message, check_id
    forward = checks["forward.post_norm"]
    assert forward.status == "failed" and "found no attention in it that it can compare" in forward.message
    assert "judged it without this" in forward.message
    assert 0 < verdict.score < verdict.max_score
