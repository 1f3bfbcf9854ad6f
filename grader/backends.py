"""The Keras backends a submission can be graded on, as the parent sees them (nothing is imported).

``--backend`` (or ``GRADE_BACKEND``) picks TensorFlow, JAX or PyTorch for the
grading process, which selects it before Keras is imported
(``grader.probe.runtime``); the parent's replay, the judge and the checks are
NumPy only, whatever ran. This module says which backends are installed
(without importing them), resolves the setting, and turns the grading
process's report of lines that called TensorFlow directly into the one message
a student needs: which call, where, and what runs on every backend instead.
"""

from __future__ import annotations

import ast
import importlib.util

from .keras_ops import NAMES as KERAS_OPS
from .keras_ops import TF_COMPOSITES, TF_FUNCTIONS

NAMES = ("tensorflow", "jax", "torch")
DEFAULT = "tensorflow"
TITLES = {"tensorflow": "TensorFlow", "jax": "JAX", "torch": "PyTorch"}
# the modules each backend needs, and the extra that installs them
MODULES = {"tensorflow": ("tensorflow",), "jax": ("jax", "jaxlib"), "torch": ("torch",)}
EXTRAS = {"tensorflow": None, "jax": "jax", "torch": "torch"}

# the keras.ops function of each TensorFlow function the grading process records as one (by its path
# under tf and by its own name), and a few that only a message can point to: nothing computes the same
_COUNTERPARTS = {**{path: spec.partition("(")[0] for path, spec in {**TF_FUNCTIONS, **TF_COMPOSITES}.items()},
                 **{path.rsplit(".", 1)[-1]: spec.partition("(")[0]
                    for path, spec in {**TF_FUNCTIONS, **TF_COMPOSITES}.items()}}
HINTS = {"boolean_mask": "where", "rank": "ndim", "gather_nd": "take"}


class BackendError(ValueError):
    """A backend setting that names no backend, or one that is not installed."""


def title(name: str) -> str:
    return TITLES.get(name, str(name))


def installed(name: str) -> bool:
    """Whether the backend's libraries can be imported here (found, not imported)."""
    try:
        return all(importlib.util.find_spec(module) is not None for module in MODULES[name])
    except (ValueError, ImportError):
        return False


def available() -> list[str]:
    """The installed backends, TensorFlow first."""
    return [name for name in NAMES if installed(name)]


def check(name: str, source: str = "--backend") -> str:
    """``name`` if it is a backend installed here; else BackendError saying what to do."""
    if name not in NAMES:
        raise BackendError(f"{source} must be one of {', '.join(NAMES)}, got {name!r}")
    if not installed(name):
        from .extras import install_line

        extra = EXTRAS[name]
        how = install_line(extra) if extra else "pip install transformer-exercises"
        raise BackendError(f"{source} asks for the {title(name)} backend, which is not installed here ({how})")
    return name


def resolve(flag: str | None, environment: dict) -> str:
    """The backend from ``--backend``, else ``GRADE_BACKEND``, else TensorFlow."""
    if flag:
        return check(flag)
    value = environment.get("GRADE_BACKEND", "").strip()
    if value:
        return check(value, f"environment variable GRADE_BACKEND={value!r}:")
    return DEFAULT


# ----------------------------------------------------------------------------- direct TensorFlow calls
def tensorflow_aliases(tree: ast.AST) -> dict[str, str]:
    """Names the module binds to TensorFlow or a part of it: {"tf": "tf", "not_equal": "tf.not_equal", ...},
    each mapped to how the message writes it."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "tensorflow" or alias.name.startswith("tensorflow."):
                    if alias.asname:
                        aliases[alias.asname] = "tf" + alias.name[len("tensorflow"):]
                    else:
                        aliases["tensorflow"] = "tf"
        elif isinstance(node, ast.ImportFrom) and node.module and (
                node.module == "tensorflow" or node.module.startswith("tensorflow.")) and node.level == 0:
            for alias in node.names:
                if alias.name != "*":
                    aliases[alias.asname or alias.name] = "tf" + node.module[len("tensorflow"):] + "." + alias.name
    return aliases


def _dotted(node) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *reversed(parts)]
    return None


def called_name(source: str, line: int) -> str | None:
    """The TensorFlow function called at ``line`` of ``source``, written as tf.a.b, or None."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return None
    aliases = tensorflow_aliases(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node, "lineno", None) is not None \
                and node.lineno <= line <= (node.end_lineno or node.lineno):
            parts = _dotted(node.func)
            if parts and parts[0] in aliases and "keras" not in parts[1:]:
                found.append((node.lineno == line, node.col_offset, ".".join([aliases[parts[0]], *parts[1:]])))
    if not found:
        return None
    found.sort(key=lambda item: (not item[0], item[1]))
    return found[0][2]


def keras_ops_for(name: str | None) -> str | None:
    """The keras.ops function that does what TensorFlow's ``name`` does, where one has an evident name."""
    if not name:
        return None
    path = name[3:] if name.startswith("tf.") else name
    last = path.rsplit(".", 1)[-1]
    counterpart = _COUNTERPARTS.get(path) or _COUNTERPARTS.get(last) or HINTS.get(last) or last
    return f"keras.ops.{counterpart}" if counterpart in KERAS_OPS else None


def direct_call_message(source: str, lines: list[int], backend: str, where=None) -> str:
    """The one message for a layer that calls TensorFlow itself on another backend. ``where(line)``
    says where a line is (a notebook's cell); by default "line N"."""
    where = where or (lambda line: f"line {line}")
    total = len(source.splitlines())
    lines = [line for line in lines if isinstance(line, int) and not isinstance(line, bool) and 0 < line <= total]
    calls = [(called_name(source, line), line) for line in lines[:3]]
    named = [(name, line) for name, line in calls if name]
    if named:
        first, line = named[0]
        said = f"{first} at {where(line)}"
    elif lines:
        first, said = None, f"at {where(lines[0])}"
    else:
        first, said = None, "somewhere"
    others = len(lines) - 1
    if others > 0:
        said += f", and {others} other line{'s' if others > 1 else ''}"
    replacement = keras_ops_for(first)
    instead = (f"{replacement} runs on all three" if replacement else
               "keras.ops has the functions that run on all three")
    return (f"your layer calls TensorFlow directly ({said}): it runs only on the TensorFlow backend, not on "
            f"{title(backend)}; {instead}")
