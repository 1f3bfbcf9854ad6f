"""The config topic's shared checks: get_config, from_config and the .keras file."""

from __future__ import annotations

import numpy as np

from .. import analysis
from ..framework import fail, output_cause
from .fixtures import LAYER_NAME


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
