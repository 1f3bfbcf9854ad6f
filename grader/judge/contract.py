"""The checks every layer exercise shares: a Keras layer's contract, in the spirit of Keras's
own ``run_layer_test``. It builds from its constructor's arguments, and ``get_config`` /
``from_config`` and the ``.keras`` file rebuild it.

An exercise's check module declares them once each, in its own words:

    check_constructor = contract.constructor(CLASS, DIMS)
    check_config_base, check_config_own_keys, check_from_config, check_keras_file = contract.config(CLASS, DIMS)

Each call makes new check functions, so a check module owns what it declares (its marks, its
order among its other checks); the judge runs them, and the registry counts their points, as it
does the module's own.
"""

from __future__ import annotations

from .common import assert_config_base, assert_config_own_keys, assert_constructor, assert_from_config, \
    assert_keras_file
from .framework import check


def _listed(names) -> str:
    names = list(names)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def constructor(class_name: str, dims: dict):
    """``api.constructor``: the layer builds from the exercise's arguments, by position and by name."""

    @check("api.constructor", f"Builds from {_listed(dims)}", "api")
    def check_constructor(evidence, dims):
        assert_constructor(evidence, class_name, dims)

    return check_constructor


def config(class_name: str, dims: dict):
    """The four ``config`` checks: the base config kept, the layer's own arguments, ``from_config``
    and a ``.keras`` file."""

    @check("config.base_keys", "get_config keeps the base config and is JSON-serialisable", "config")
    def check_config_base(evidence, config):
        assert_config_base(evidence, config, class_name)

    @check("config.own_keys", f"get_config holds {_listed(dims)}", "config")
    def check_config_own_keys(config):
        assert_config_own_keys(config, dims, class_name)  # the constructor's arguments, in its own names

    @check("config.from_config", "from_config rebuilds an identical layer", "config")
    def check_from_config(config_phase, evidence):
        assert_from_config(config_phase, evidence)

    @check("config.keras_file", "A model holding the layer survives .keras save and load", "config")
    def check_keras_file(evidence):
        assert_keras_file(evidence)

    return check_config_base, check_config_own_keys, check_from_config, check_keras_file
