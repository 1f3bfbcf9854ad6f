"""Generic advice in the words of the exercise at hand: only the parts it has.

A known error (two tensors of different shapes combined, say) has causes that depend on what
the student writes: in the positional embedding, a position table looked up over its whole
length; in the encoder, a feed-forward whose last Dense is not ``embed_dim`` wide, or a mask
expanded on the wrong axis. ``parts_of`` reads the parts an exercise has from its public sizes
(``dims``: ``num_heads`` means attention with a residual sum, ``dense_dim`` a feed-forward,
``output_dim`` or ``vocab_size`` embedding tables; an ``encoder_shape`` cross-attention, with the
target's and the encoder outputs' lengths), and the advice names those parts only. Where the shapes
themselves name the culprit (a tensor of the encoder's length where the target's belongs: the
cross-attention's query and value swapped), the advice says that, and nothing generic.
"""

from __future__ import annotations

import re


class Parts(frozenset):
    """The parts of an exercise (their names), and the sequence lengths of its public job: the
    layer's own input (``target``) and, with cross-attention, the encoder's outputs (``source``)."""

    lengths: dict
    job: dict | None = None


def argument_names(public_job: dict | None) -> dict[str, str]:
    """The exercise's own name of each size the checks know by its role: the public job's ``dims``
    name the roles (``embed_dim``, ``dense_dim``: the second edition's words), its
    ``constructor_arguments`` the same sizes, in the same order, as the exercise's constructor names
    them (the third edition's ``hidden_dim``, ``intermediate_dim``). Only the roles named otherwise."""
    roles = (public_job or {}).get("dims")
    arguments = (public_job or {}).get("constructor_arguments")
    if not isinstance(roles, dict) or not isinstance(arguments, dict) or len(roles) != len(arguments):
        return {}
    return {str(role): str(name) for role, name in zip(roles, arguments) if role != name}


def in_words(text: str, public_job: dict | None) -> str:
    """A text of the grader's own (never one quoting the student) with every size named by its role
    named as the exercise's constructor names it."""
    names = argument_names(public_job)
    if not names:
        return text
    return re.sub(r"\b(" + "|".join(map(re.escape, names)) + r")\b", lambda found: names[found.group(1)], text)


def parts_of(public_job: dict | None) -> Parts | None:
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
    lengths = {}
    for name, key in (("target", "input_shape"), ("source", "encoder_shape")):
        shape = public_job.get(key)
        if isinstance(shape, list) and len(shape) == 3 and isinstance(shape[1], int):
            lengths[name] = shape[1]
    if "source" in lengths:
        parts.add("cross_attention")
    found = Parts(parts)
    found.lengths = lengths
    found.job = public_job
    return found


def _query_is_the_source(left: str, right: str, lengths: dict) -> bool:
    """Whether the two shapes show an attention whose query was the encoder outputs where the target
    sequence belongs: a residual sum of the target's length and the source's, (batch, length, width)
    each; or the scores, (batch, heads, queries, keys), with the source's length as the queries and
    the target's as the keys, against a mask over the source's."""
    try:
        a, b = [int(d) for d in left.split(",")], [int(d) for d in right.split(",")]
    except ValueError:
        return False
    target, source = lengths.get("target"), lengths.get("source")
    if target is None or source is None or target == source or len(a) != len(b):
        return False
    if len(a) == 3:
        return a[0] == b[0] and a[2] == b[2] and {a[1], b[1]} == {target, source}
    if len(a) == 4:
        scores = a if min(a[2:]) > 1 else b
        return scores[2] == source and scores[3] == target
    return False


def shape_mismatch(left: str, right: str, code: str, parts: set[str] | None) -> str:
    """What two tensors of shapes ``left`` and ``right`` combined on ``code`` may mean here."""
    where = f" on `{code.strip()}`" if code else ""
    text = f"Two tensors of shapes ({left}) and ({right}) were combined{where}; their shapes must match."
    parts = parts or set()
    if "cross_attention" in parts and _query_is_the_source(left, right, getattr(parts, "lengths", {})):
        target, source = parts.lengths["target"], parts.lengths["source"]
        seen = (f" These are attention scores of {source} queries by {target} keys: the encoder outputs "
                f"({source} long) were the query, the target sequence ({target}) the keys."
                if left.count(",") == 3 else
                f" One is as long as the target sequence ({target}), the other as the encoder outputs ({source}): "
                "an attention's output is as long as its query, and this one's query was the encoder outputs.")
        return (text + seen + " The cross-attention's query must be the decoder's own sequence, and the encoder "
                "outputs its key and value: attention(query=<the decoder's sequence>, value=encoder_outputs, "
                "key=encoder_outputs, attention_mask=...).")
    checks = []
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
        text += in_words(" Check " + "; ".join(checks) + ".", getattr(parts, "job", None))
    return text
