"""What the grader's own process imports to judge a grading and draw its report, imported ahead.

Once a grading process has ended, the grader's process asks why it could not be
graded, if it could not (``grader.ungradable``: the judge's evidence helpers,
with pytest), reads the exercise's declared checks (its check module, with the
judge's replay and references), summarises the verdict and draws the report
(``grader.report``, Rich). Imported then, that is some two hundred modules and a
few tenths of a second between the end of the grading process and the verdict,
every time the process is new: a cold ``grade``, a batch's first verdicts, a
grading server's first grading.

``start(exercise)`` imports them in a thread of their own while the grading
process starts (importing TensorFlow takes seconds, in which the grader's
process only waits); ``wait()``, called before the first of those steps, lets
the thread finish first, so the process never imports the same modules from two
threads at once. Once per exercise per process. A failure here is left for the
step that needs the module to meet and report as it always does.
"""

from __future__ import annotations

import threading

_lock = threading.Lock()
_started: set[str] = set()
_threads: list[threading.Thread] = []


def start(exercise) -> None:
    """Import, in a thread, what judging a grading of ``exercise`` and reporting it import."""
    with _lock:
        if exercise.id in _started:
            return
        _started.add(exercise.id)
        thread = threading.Thread(target=_import_for, args=(exercise,), name=f"ahead-{exercise.id}")
        _threads.append(thread)
    thread.start()


def wait() -> None:
    """Return once every import ``start`` began has ended."""
    with _lock:
        threads = list(_threads)
    for thread in threads:
        if thread is not threading.current_thread():
            thread.join()
    with _lock:
        _threads[:] = [thread for thread in _threads if thread.is_alive()]


def _import_for(exercise) -> None:
    try:
        from . import backends, report  # noqa: F401  (the report's names of backends)
        from .judge import evidence  # noqa: F401  (why a grading could not be graded)
        from .judging import exchange  # noqa: F401  (the judge's request and the reading of its answer)
        from .judging.declarations import declared_checks

        declared_checks(exercise)
        from rich.cells import cell_len

        cell_len("—")  # Rich loads its table of character widths at the first character past ASCII
    except Exception:  # noqa: BLE001 - the step that needs it imports it again and says what failed
        pass
