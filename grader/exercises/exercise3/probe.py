"""Phases that exercise a student's ``TransformerEncoder`` (see layer_phases)."""

from ...probe.layer_phases import run_sequence_layer as run  # noqa: F401
