"""Finds the lines of the submission that call TensorFlow itself while Keras runs on another backend.

A layer written with ``tf.*`` functions runs only on the TensorFlow backend: on
JAX or PyTorch the call fails in one of many ways (a tracer TensorFlow cannot
convert, a ``tf.Tensor`` where Keras wants its backend's array), or silently
mixes two libraries. Rather than guess from the error, the grading process
watches: once the submission has imported TensorFlow under another backend, a
profile hook notes every call whose caller is a line of the submission and
whose callee is a function of TensorFlow's package (``tf.keras`` is Keras
itself, in Keras's package, and does not count). Only line numbers travel; the
parent names the call from its own copy of the source.
"""

from __future__ import annotations

import os
import sys
import threading

MAX_LINES = 10
# TensorFlow's lazy attribute lookups: ``tf.keras`` runs one to find Keras, which is no TensorFlow call
LOOKUPS = frozenset({"__getattr__", "__getattribute__", "__dir__", "_load"})


class DirectCalls:
    """The submission's lines that called into TensorFlow, first seen first, while ``start``ed."""

    def __init__(self, submission: str):
        self.submission = submission
        self.lines: list[int] = []
        self._root: str | None = None

    def wanted(self) -> bool:
        """Whether to watch: TensorFlow was imported, and Keras runs on another backend."""
        import keras

        return keras.backend.backend() != "tensorflow" and "tensorflow" in sys.modules

    def start(self) -> None:
        module = sys.modules.get("tensorflow")
        location = getattr(module, "__file__", None)
        if not location:
            return
        self._root = os.path.dirname(os.path.realpath(location)) + os.sep
        sys.setprofile(self._hook)
        threading.setprofile(self._hook)

    def stop(self) -> None:
        sys.setprofile(None)
        threading.setprofile(None)

    def _hook(self, frame, event, _arg):
        if event != "call" or len(self.lines) >= MAX_LINES:
            return
        caller = frame.f_back
        if caller is None or caller.f_code.co_filename != self.submission:
            return
        if frame.f_code.co_name in LOOKUPS or not os.path.realpath(frame.f_code.co_filename).startswith(self._root):
            return
        if caller.f_lineno not in self.lines:
            self.lines.append(caller.f_lineno)
