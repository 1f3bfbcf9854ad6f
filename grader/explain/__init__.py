"""``grade explain exercise3``: experiments that show why the encoder needs two LayerNormalization layers.

``run`` grades the experiments' child (``probe``, ``experiments``), ``claims`` turns their numbers into
claims with verdicts in the parent, ``report`` renders them."""
