"""Phases that exercise a student's ``SelfAttentionBlock`` (see layer_phases)."""

from ...probe.layer_phases import run_sequence_layer as run  # noqa: F401
