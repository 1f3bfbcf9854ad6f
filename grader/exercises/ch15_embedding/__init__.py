"""The third edition's positional embedding: its probe (``probe``, run in the grading child) and
its checks (``checks``, run by the judge)."""
