"""The third edition's decoder: its probe (``probe``, run in the grading child) and its checks
(``checks``, run by the judge)."""
