"""Facts about Keras 3 that the exercises' instructions rely on, checked against the installed Keras."""

from __future__ import annotations

import os
import subprocess
import sys

from grader import exercises

DECODER_MASKS = """
import importlib.util, keras
spec = importlib.util.spec_from_file_location("decoder", {path!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
seen = {{}}

class Spy(module.TransformerDecoder):
    def call(self, inputs, encoder_outputs, inputs_mask=None, encoder_outputs_mask=None):
        seen.update(inputs=inputs_mask is not None, encoder=encoder_outputs_mask is not None)
        return super().call(inputs, encoder_outputs, inputs_mask, encoder_outputs_mask)

source = keras.Input((7,), dtype="int32")
target = keras.Input((5,), dtype="int32")
encoded = keras.layers.Embedding(30, 8, mask_zero=True)(source)
decoded = keras.layers.Embedding(30, 8, mask_zero=True)(target)
Spy(8, 16, 2)(decoded, encoded)
print(seen)
"""


def test_keras_fills_each_tensor_arguments_mask_for_the_decoder():
    """Exercise 4's signature: Keras 3 passes <argument>_mask for a call with two tensor arguments."""
    code = DECODER_MASKS.format(path=str(exercises.get("exercise4").solution))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "{'inputs': True, 'encoder': True}" in result.stdout
