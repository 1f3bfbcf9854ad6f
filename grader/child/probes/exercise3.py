"""Phases that exercise a student's ``TransformerEncoder`` (see layer_phases)."""

from .layer_phases import run_sequence_layer as run  # noqa: F401
