"""``grade explain exercise3``: experiments that show why the encoder needs two LayerNormalization layers.

``run`` starts the experiments' children (``phases``, ``experiments``), ``claims`` turns their numbers into
claims with verdicts in the parent, ``report`` renders them."""
