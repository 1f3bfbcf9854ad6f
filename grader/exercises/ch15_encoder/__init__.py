"""The third edition's encoder: its probe (``probe``, run in the grading child) and its checks
(``checks``, run by the judge)."""
