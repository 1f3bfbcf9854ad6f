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
import types

MAX_LINES = 10
# TensorFlow's lazy attribute lookups: ``tf.keras`` runs one to find Keras, which is no TensorFlow call
LOOKUPS = frozenset({"__getattr__", "__getattribute__", "__dir__", "_load"})


class DirectCalls:
    """The submission's lines that called into TensorFlow, first seen first, while ``start``ed."""

    def __init__(self, submission: str):
        self.submission = submission
        self.lines: list[int] = []
        self._root: str | None = None

    def wanted(self, module) -> bool:
        """Whether to watch: Keras runs on another backend, TensorFlow was imported, and the
        submission's own code names it (``module``: the submission, loaded). TensorFlow is imported in
        every grading process where it is installed (Keras's seeding imports it), and the hook costs
        every call the layer makes, Keras's and the backend's, a Python call of its own."""
        import keras

        if keras.backend.backend() == "tensorflow" or "tensorflow" not in sys.modules:
            return False
        return names_tensorflow(self.submission, module)

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


def names_tensorflow(path: str, module=None) -> bool:
    """Whether the submission at ``path`` names TensorFlow: its text does (any import of it, however
    written out, ``tf.keras`` included), or one of ``module``'s names is a TensorFlow module or holds
    TensorFlow's function or class (a name handed on by another module). True where the file cannot be
    read: watching is then the safe side."""
    try:
        with open(path, "rb") as handle:
            if b"tensorflow" in handle.read():
                return True
    except OSError:
        return True
    for value in list(vars(module).values()) if module is not None else ():
        try:
            names = (getattr(value, "__name__", None) if isinstance(value, types.ModuleType)
                     else getattr(value, "__module__", None))
        except Exception:  # an object of the submission's own whose attributes raise
            continue
        if isinstance(names, str) and (names == "tensorflow" or names.startswith("tensorflow.")):
            return True
    return False
