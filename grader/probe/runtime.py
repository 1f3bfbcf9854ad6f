"""What differs between the Keras backends in a grading process: import, threads, gradients.

Keras 3 runs on TensorFlow, JAX or PyTorch, chosen by ``KERAS_BACKEND`` before
``keras`` is first imported. The grading process (``grader.child``) and the
batch worker (``grader.child.preload``) call ``select`` before anything imports Keras, then
``start_runtime`` once it is imported: it imports the backend's own library,
keeps its thread pools to one thread each, and says which versions ran. The
probes ask this module, never a backend library, for what Keras's own API
does not give on every backend: whether a call is symbolic (Keras tracing a
layer to learn its output's shape) and the gradient of a loss. Nothing here
decides anything: the parent replays what the probes observed.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import sys

from ..backends import NAMES

# Set before the backend's library is imported: one CPU device, no accelerator probing, one thread
# per pool where the library reads it from the environment (the others are set in start_runtime).
ENVIRONMENT = {
    "tensorflow": {},
    "jax": {"JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false",
            "JAX_ENABLE_COMPILATION_CACHE": "false"},
    "torch": {"MKL_NUM_THREADS": "1"},
}


class BackendMismatch(RuntimeError):
    """Keras was already imported with another backend than the job asks for."""


def select(name: str) -> None:
    """Make ``name`` the backend of the Keras this process will import (before any import of it)."""
    if name not in NAMES:
        raise ValueError(f"unknown Keras backend {name!r}")
    os.environ["KERAS_BACKEND"] = name
    for key, value in ENVIRONMENT[name].items():
        os.environ.setdefault(key, value)


def one_cpu(sample_seconds: float = 0.1) -> None:
    """Run on one of the CPUs this process may use, before JAX's CPU client exists. The client sizes
    its thread pools by the CPUs it may run on (18 threads with two here, 13 with one), which on a
    large machine would pass the grading's process cap; one CPU is what a grading gets of the machine
    anyway (its share in the grader's control group). Which one: the idlest over a tenth of a second,
    so gradings started side by side (a batch's, forked from one worker) run on different CPUs."""
    try:
        allowed = sorted(os.sched_getaffinity(0))
        if len(allowed) > 1:
            os.sched_setaffinity(0, {idlest(allowed, sample_seconds)})
    except (AttributeError, OSError):
        pass


def idlest(allowed: list[int], seconds: float, read=None) -> int:
    """The CPU of ``allowed`` idle the longest during ``seconds`` (by /proc/stat), drawn among those
    within a clock tick of it; drawn among all where the counters cannot be read."""
    import random
    import time

    read = read or _idle_ticks
    choose = random.SystemRandom().choice
    before = read()
    time.sleep(seconds)
    after = read()
    idle = {cpu: after[cpu] - before[cpu] for cpu in allowed if cpu in before and cpu in after}
    if not idle:
        return choose(allowed)
    most = max(idle.values())
    return choose(sorted(cpu for cpu, ticks in idle.items() if ticks >= most - 1))


def _idle_ticks() -> dict[int, int]:
    """Each CPU's idle and I/O-wait clock ticks since boot; empty where /proc/stat cannot be read."""
    ticks = {}
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            for line in stat:
                fields = line.split()
                if len(fields) > 5 and fields[0].startswith("cpu") and fields[0][3:].isdigit():
                    ticks[int(fields[0][3:])] = int(fields[4]) + int(fields[5])
    except (OSError, ValueError):
        return {}
    return ticks


def start_runtime(name: str, compiled: dict | None = None) -> dict:
    """Import Keras and the backend's library, with one thread per pool; their versions. ``compiled``
    (``{"folder": ..., "write": bool}``, JAX only) is the folder of operations compiled before: JAX
    loads an operation from it instead of compiling it again, and writes what it compiles only where
    ``write`` (the grader's own run of the exercise's solution, never a submission's)."""
    if name == "jax":
        one_cpu()  # in the grading process, before anything runs on JAX: a worker's children choose each their own
    import_libraries(name)
    import keras
    import numpy

    running = keras.backend.backend()
    if running != name:
        raise BackendMismatch(f"Keras runs on {running}, not on {name}")
    versions = {"backend": name, "keras": keras.__version__, "numpy": numpy.__version__}
    if name == "tensorflow":
        import tensorflow

        tensorflow.get_logger().setLevel("ERROR")
        tensorflow.config.threading.set_intra_op_parallelism_threads(1)
        tensorflow.config.threading.set_inter_op_parallelism_threads(1)
        versions["tensorflow"] = tensorflow.__version__
        trace_unset_variables_as_placeholders()
    elif name == "jax":
        import jax
        import jaxlib

        versions["jax"] = jax.__version__
        versions["jaxlib"] = jaxlib.__version__
        if compiled is not None:
            use_compiled(jax, compiled)
    else:
        import torch

        torch.set_num_threads(1)
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError:  # already set by an earlier start in this process
            pass
        versions["torch"] = torch.__version__
    return versions


def trace_unset_variables_as_placeholders() -> None:
    """On TensorFlow, make a variable that Keras has created but not yet given its value read, in a
    symbolic trace, as a placeholder of its shape and dtype.

    Keras builds a layer without a ``build()`` method (and a functional model's layers) by tracing its
    call on symbolic inputs in a scratch graph that never runs. The variables created there get their
    values only afterwards; read during the trace, each reads as its initializer computed in the graph
    (for a random initializer, some twenty graph operations per read: about a tenth of a grading). A
    placeholder tells the trace the same, a tensor of that shape and dtype whose values are unknown, in
    one operation. Only reads inside Keras's symbolic scope are changed, and only of variables whose
    initializer is one of Keras's own not drawing from a seed generator (a pure function of shape, dtype
    and seed, so leaving it out of the trace changes no value ever drawn); any other initializer (a
    student's own) runs in the trace as Keras runs it. Idempotent."""
    from keras.src.backend.common import variables
    from keras.src.backend.common.stateless_scope import get_stateless_scope, in_stateless_scope
    from keras.src.backend.common.symbolic_scope import in_symbolic_scope
    from keras.src.initializers.initializer import Initializer
    from keras.src.random.seed_generator import SeedGenerator
    import tensorflow

    current = variables.Variable.__dict__.get("value")
    if not isinstance(current, property) or getattr(current.fget, "placeholder_in_traces", False):
        return
    keras_value = current.fget

    @functools.wraps(keras_value)
    def value(self):  # every read of every variable: a set variable is told apart first
        if getattr(self, "_value", True) is None and in_symbolic_scope():
            initializer = getattr(self, "_initializer", None)
            if (isinstance(initializer, Initializer) and type(initializer).__module__.startswith("keras.")
                    and not isinstance(getattr(initializer, "seed", None), SeedGenerator)
                    and not (in_stateless_scope() and get_stateless_scope().get_current_value(self) is not None)):
                return self._maybe_autocast(tensorflow.compat.v1.placeholder(shape=self._shape, dtype=self._dtype))
        return keras_value(self)

    value.placeholder_in_traces = True
    variables.Variable.value = property(value)


NEVER = 1e12  # seconds: a compilation that never takes this long is never written


def use_compiled(jax, compiled: dict) -> None:
    """Read JAX's compiled operations from ``compiled["folder"]``; write there only where
    ``compiled["write"]`` (every compilation, however short: the operations are small)."""
    folder, write = compiled.get("folder"), compiled.get("write")
    if not isinstance(folder, str) or not folder or not isinstance(write, bool):
        raise ValueError("a malformed folder of compiled operations in the job")
    jax.config.update("jax_enable_compilation_cache", True)
    jax.config.update("jax_compilation_cache_dir", folder)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    # XLA's own caches name the folder in the compile options, and so in every key: none (they are GPU's)
    jax.config.update("jax_persistent_cache_enable_xla_caches", "none")
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0 if write else NEVER)
    # An entry keeps the source locations of what it was compiled from: the file, function and line of
    # every operation. The folder is filled by the exercise's solution and read by students' gradings,
    # so no location is kept at all: no Python frame in any operation's location, no file name. The
    # same settings apply when reading, since they are part of every entry's key.
    jax.config.update("jax_traceback_in_locations_limit", -1)
    jax.config.update("jax_include_full_tracebacks_in_locations", False)
    jax.config.update("jax_hlo_source_file_canonicalization_regex", ".*")


def preload(name: str) -> None:
    """Import what ``start_runtime`` imports, without creating any runtime (a fork server's imports)."""
    select(name)
    import_libraries(name)


def import_libraries(name: str) -> None:
    """Import Keras on backend ``name`` (``select``-ed before), the backend's library, and TensorFlow
    wherever it is installed: every grading seeds Keras (keras.utils.set_random_seed), which seeds
    TensorFlow too whatever the backend, importing it first (in a worker, once for all its children).

    TensorFlow's import tries JAX, where it is installed, for TFLite's converter of JAX functions,
    which no grading uses: on a backend other than JAX that is half a second of every TensorFlow
    start (a seventh of it), so JAX is kept out of that import alone. It is importable again
    afterwards: a submission that imports JAX gets it, as TFLite would on first use of its converter.

    The cyclic garbage collector is paused meanwhile: the import makes hundreds of thousands of
    objects and next to no garbage, and the collections it would set off walk them again and again
    (a fifth of TensorFlow's import, to free a few hundred objects)."""
    hidden = name != "jax" and "jax" not in sys.modules
    if hidden:
        sys.modules["jax"] = None  # an import of jax raises ImportError at once
    try:
        with collector_paused():
            import keras  # noqa: F401
            import numpy  # noqa: F401

            if name == "jax":
                import jax  # noqa: F401
            elif name == "torch":
                import torch  # noqa: F401
            try:
                import tensorflow  # noqa: F401
            except ImportError:
                if name == "tensorflow":
                    raise
    finally:
        if hidden and "jax" in sys.modules and sys.modules["jax"] is None:
            del sys.modules["jax"]


@contextlib.contextmanager
def collector_paused():
    """The cyclic garbage collector off inside, and on again after if it was on before."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def tensor_classes() -> tuple[type, ...]:
    """The classes of the running backend's tensors, whose operators a custom layer computes with
    (``grader.probe.op_tape`` records them): TensorFlow's tensors; JAX's arrays and the tracers that
    stand for them while a function is traced; PyTorch's tensors."""
    import keras

    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow

        return (tensorflow.Tensor,)
    if backend == "jax":
        import jax

        return (type(jax.numpy.zeros(())), jax.core.Tracer)
    if backend == "torch":
        import torch

        return (torch.Tensor,)
    return ()


def is_symbolic(values) -> bool:
    """Whether a layer call on ``values`` (its arguments) is Keras tracing the layer, not computing.

    TensorFlow traces in graph mode; JAX with tracers (``jax.eval_shape``, ``jit``, ``grad``); PyTorch
    on the ``meta`` device; every backend with KerasTensors (a functional model being built)."""
    import keras

    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow

        if not tensorflow.executing_eagerly():
            return True
    for value in _leaves(values):
        if isinstance(value, keras.KerasTensor):
            return True
        if backend == "jax":
            import jax

            if isinstance(value, jax.core.Tracer):
                return True
        elif backend == "torch":
            device = getattr(value, "device", None)
            if getattr(device, "type", None) == "meta":
                return True
    return False


def _leaves(values, depth: int = 0):
    if depth > 4:
        return
    if isinstance(values, dict):
        values = list(values.values())
    if isinstance(values, (list, tuple)):
        for value in values:
            yield from _leaves(value, depth + 1)
    elif values is not None:
        yield values


def gradients(loss, variables: list, state=()) -> tuple[object, list]:
    """(the value of ``loss()``, the gradient of it for each Keras variable, None where it has none).

    ``loss()`` computes a scalar from calls of the layer. TensorFlow records it on a tape; PyTorch
    differentiates its autograd graph (None for a variable the graph does not reach, as TensorFlow);
    JAX differentiates ``loss`` as a function of the variables' values (a stateless scope maps each
    variable to its value), and so gives zeros, not None, for a variable the loss does not use.
    ``state``: variables ``loss()`` may update without being differentiated (a dropout layer's seed,
    a norm's moving statistics); on JAX their new values are taken out of the scope and assigned
    after, as the other backends assign them in place."""
    import keras

    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            value = loss()
        grads = tape.gradient(value, variables) if variables else []
        return value, [None if g is None else tf.convert_to_tensor(g) for g in grads]
    if backend == "jax":
        import jax

        state = [s for s in state if all(s is not v for v in variables)]

        def of_values(values):
            mapping = list(zip(variables, values)) + [(s, s.value) for s in state]
            with keras.StatelessScope(state_mapping=mapping) as scope:
                value = loss()
            return value, [scope.get_current_value(s) for s in state]

        (value, updated), grads = jax.value_and_grad(of_values, has_aux=True)([v.value for v in variables])
        for variable, new in zip(state, updated):
            variable.assign(new)
        return value, list(grads)
    import torch

    value = loss()
    tensors = [v.value for v in variables]
    if not tensors:
        return value, []
    if not getattr(value, "requires_grad", False):
        return value, [None] * len(tensors)
    grads = torch.autograd.grad(value, tensors, allow_unused=True)
    return value, list(grads)


def has_gradient(gradient) -> bool:
    """Whether a variable got a gradient: on JAX, which has no unused variables, a gradient that is not
    exactly zero everywhere (what TensorFlow and PyTorch give None for)."""
    import keras
    import numpy as np

    if gradient is None:
        return False
    if keras.backend.backend() == "jax":
        return bool(np.any(np.asarray(keras.ops.convert_to_numpy(gradient)) != 0))
    return True


def scalar_sum(value, weights):
    """sum(value * weights) as a float32 scalar of the running backend (``weights`` a NumPy array)."""
    import keras

    value = keras.ops.cast(keras.ops.convert_to_tensor(value), "float32")
    return keras.ops.sum(keras.ops.multiply(value, keras.ops.convert_to_tensor(weights, "float32")))
