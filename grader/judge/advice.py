"""Generic advice in the words of the exercise at hand: only the parts it has.

A known error (two tensors of different shapes combined, say) has causes that depend on what
the student writes: in the positional embedding, a position table looked up over its whole
length; in the encoder, a feed-forward whose last Dense is not ``embed_dim`` wide, or a mask
expanded on the wrong axis. ``parts_of`` reads the parts an exercise has from its public sizes
(``dims``: ``num_heads`` means attention with a residual sum, ``dense_dim`` a feed-forward,
``output_dim`` or ``vocab_size`` embedding tables), and the advice names those parts only.
"""

from __future__ import annotations


def parts_of(public_job: dict | None) -> set[str] | None:
    """The parts of the exercise whose public job this is; None when it cannot be told."""
    dims = (public_job or {}).get("dims")
    if not isinstance(dims, dict):
        return None
    parts = set()
    if "num_heads" in dims:
        parts |= {"attention", "residual", "mask"}
    if "dense_dim" in dims:
        parts.add("feed_forward")
    if "output_dim" in dims or "vocab_size" in dims:
        parts.add("embedding")
    if "sequence_length" in dims:
        parts.add("positions")
    return parts


def shape_mismatch(left: str, right: str, code: str, parts: set[str] | None) -> str:
    """What two tensors of shapes ``left`` and ``right`` combined on ``code`` may mean here."""
    where = f" on `{code.strip()}`" if code else ""
    text = f"Two tensors of shapes ({left}) and ({right}) were combined{where}; their shapes must match."
    checks = []
    parts = parts or set()
    if "positions" in parts and "embedding" in parts and "attention" not in parts:
        checks.append("that the positions cover only the input's length (range(length of inputs), not the whole "
                      "position table) and that both tables are output_dim wide")
    if "feed_forward" in parts:
        checks.append("the width of the last Dense of the feed-forward (it must be embed_dim)")
    if "residual" in parts:
        checks.append("that each residual sum adds tensors of the same shape (the attention output is "
                      "embed_dim wide)")
    if "mask" in parts:
        checks.append("the axes a mask was expanded on")
    if checks:
        text += " Check " + "; ".join(checks) + "."
    return text
