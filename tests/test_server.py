"""The warm grading server (``grader.server``): the verdict of a cold ``grade``, for this user only,
gone when idle, replaced when stale or out of date, and never started when it is turned off.

The suite grades cold (tests/conftest.py sets GRADE_SERVER=off); each test here turns the server on
for itself, with a runtime folder of its own, and every server a test starts is stopped in a
finaliser, with every process it had.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from grader import cli, exercises
from grader.api import Settings, grade
from grader.report import render
from grader.server import place, wire
from grader.server.client import Client
from grader.verdict import to_record

EXERCISE = exercises.get("exercise3")
SOLUTION = EXERCISE.solution.read_text(encoding="utf-8")
SOURCES = {
    "solution": SOLUTION,
    "shared_norm": SOLUTION.replace("self.layernorm_2 = layers.LayerNormalization()",
                                    "self.layernorm_2 = self.layernorm_1"),
    "syntax_error": SOLUTION.replace("class TransformerEncoder(", "class TransformerEncoder((", 1),
    "crash_at_import": "import keras\n\nraise RuntimeError('this file cannot be imported')\n" + SOLUTION,
}
# What differs between any two gradings of one file, cold or warm: how long it took, what its judge
# used, and the uid the grading process ran as (new for every grading, when the grader is root)
TIMING = ("seconds", "judge")
SEED = 7


def test_the_sources_are_what_they_say():
    assert all(text != SOLUTION for name, text in SOURCES.items() if name != "solution")


class Runtime:
    """A private runtime folder (XDG_RUNTIME_DIR) for the servers of one test, and their stop."""

    def __init__(self, idle: float | None = None):
        # under /tmp itself, not pytest's folder: its path stays short, and a second user can reach it
        self.base = Path(tempfile.mkdtemp(prefix="grade-run-", dir="/tmp"))
        self.environ = dict(os.environ, GRADE_SERVER="on", XDG_RUNTIME_DIR=str(self.base))
        if idle is not None:
            self.environ["GRADE_SERVER_IDLE"] = str(idle)
        self.seen: set[int] = set()  # every process of every server this runtime had

    def use(self, monkeypatch) -> None:
        for name in ("GRADE_SERVER", "XDG_RUNTIME_DIR", "GRADE_SERVER_IDLE"):
            if name in self.environ:
                monkeypatch.setenv(name, self.environ[name])
            else:
                monkeypatch.delenv(name, raising=False)

    def client(self) -> Client:
        return Client(self.environ)

    def status(self) -> dict | None:
        found = self.client().status()
        if found is not None:
            self.seen.update(entry["pid"] for entry in found["memory"])
        return found

    @property
    def socket(self) -> Path:
        return place.find(self.environ).socket

    def close(self) -> None:
        try:
            if self.status() is not None:
                self.client().stop()
        finally:
            for pid in self.seen:  # a server killed by a test leaves its gradings to end by themselves
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            shutil.rmtree(self.base, ignore_errors=True)


@pytest.fixture
def runtime(request):
    made = []

    def make(idle: float | None = None) -> Runtime:
        made.append(Runtime(idle))
        request.addfinalizer(made[-1].close)
        return made[-1]

    return make


@pytest.fixture(scope="module")
def shared():
    """One server for the tests that only grade through it."""
    made = Runtime()
    yield made
    made.close()


@pytest.fixture(scope="module")
def cold():
    """{name: the verdict a cold grading gives the source}, each graded once, on demand."""
    verdicts = {}
    folder = Path(tempfile.mkdtemp(prefix="grade-cold-"))

    def verdict_of(name: str):
        if name not in verdicts:
            verdicts[name] = grade(EXERCISE.id, write(folder, name), Settings(seed=SEED))
        return verdicts[name]

    yield verdict_of
    shutil.rmtree(folder, ignore_errors=True)


def write(folder: Path, name: str) -> Path:
    path = folder / name / "exercise3.py"  # the same path for the cold and the warm grading
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(SOURCES[name], encoding="utf-8")
    return path


def untimed(verdict) -> dict:
    record = to_record(verdict)
    record["context"] = {k: v for k, v in record["context"].items() if k not in TIMING}
    if isinstance(record["context"].get("confinement"), dict):
        record["context"]["confinement"] = dict(record["context"]["confinement"], uid="fresh")
    if isinstance(record["context"].get("sandbox"), str):
        record["context"]["sandbox"] = _fresh_uid(record["context"]["sandbox"])
    return record


def _fresh_uid(text: str) -> str:
    import re

    return re.sub(r"runs as user \d+", "runs as user N", text)


def report(verdict) -> str:
    from rich.console import Console

    with open(os.devnull, "w") as sink:
        console = Console(width=100, record=True, file=sink)
        console.print(render(verdict, details=True, all_checks=True))
    return _fresh_uid(console.export_text())


def graded_json(argv: list[str], capsys) -> tuple[int, dict | None, str]:
    code = cli.main(argv)
    out = capsys.readouterr()
    return code, (json.loads(out.out) if out.out.strip() else None), out.err


def ended(pid: int, seconds: float) -> bool:
    """Whether process ``pid`` ends within ``seconds`` (a process its parent has not collected counts)."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        return bool(poller.poll(int(seconds * 1000)))
    finally:
        os.close(pidfd)


# ----------------------------------------------------------------------------- the same verdict
# the solution and a file graded without a grading process in the default tier; a mistake and a crash,
# each a cold grading more, in the slow one
@pytest.mark.parametrize("name", [name if name in ("solution", "syntax_error") else pytest.param(name, marks=pytest.mark.slow)
                                  for name in SOURCES])
def test_a_warm_grading_gives_the_cold_verdict_and_report(name, shared, cold, tmp_path, monkeypatch, capsys):
    """Through the server, `grade --json` prints the JSON a cold grade prints, and the verdict behind
    it is the cold one in everything but its timings: the report (with every detail) reads the same."""
    shared.use(monkeypatch)
    monkeypatch.setenv("GRADE_STATE_DIR", str(tmp_path / "state"))
    verdict = cold(name)
    path = Path(verdict.submission)
    code, printed, err = graded_json(["exercise3", "--submission", str(path), "--json", "--seed", str(SEED)], capsys)
    assert printed == verdict.to_json(), err
    assert code == verdict.exit_code
    assert shared.status()["graded"] >= 1  # it went through the server, not a cold grading here

    warm = shared.client().grade(EXERCISE.id, path, Settings(seed=SEED))
    assert untimed(warm) == untimed(verdict)
    assert report(warm) == report(verdict)
    expected = {"solution": "passed", "shared_norm": "failed", "syntax_error": "error", "crash_at_import": "error"}
    assert verdict.status == expected[name]


def test_the_settings_and_the_report_options_reach_the_grading_as_given(shared, tmp_path, monkeypatch, capsys):
    """--timeout, --memory and --seed become the server's grading settings; --details and --all-checks
    stay the command's: the report is the one a cold grade prints (a file graded without a grading
    process, so the cold grading is cheap)."""
    shared.use(monkeypatch)
    monkeypatch.setenv("GRADE_STATE_DIR", str(tmp_path / "state"))
    path = write(tmp_path, "syntax_error")
    settings = Settings(seed=3, timeout=45.0, memory_mb=3000)
    warm = shared.client().grade(EXERCISE.id, path, settings)
    assert untimed(warm) == untimed(grade(EXERCISE.id, path, settings))
    assert (warm.context["timeout"], warm.context["memory_mb"], warm.context["seed"]) == (45.0, 3000, 3)
    argv = ["exercise3", "--submission", str(path), "--seed", "3", "--timeout", "45", "--memory", "3000",
            "--details", "--all-checks"]
    assert cli.main(argv) == 2
    through = capsys.readouterr()
    assert cli.main([*argv, "--no-server"]) == 2
    assert capsys.readouterr().out == through.out and "3000 MiB" in through.out


def test_a_malformed_request_is_answered_and_the_server_serves_on(shared, tmp_path, monkeypatch, capsys):
    shared.use(monkeypatch)
    path = write(tmp_path, "syntax_error")
    cli.main(["exercise3", "--submission", str(path), "--json"])
    capsys.readouterr()
    before = shared.status()
    identity = place.identity(shared.environ)

    def ask(data: bytes):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(str(shared.socket))
        try:
            sock.sendall(data)
            return wire.receive(sock, wire.MAX_ANSWER, 60)
        except wire.WireError as exc:
            return exc
        finally:
            sock.close()

    def framed(message) -> bytes:
        data = json.dumps(message).encode()
        return len(data).to_bytes(4, "big") + data

    request = {"op": "grade", "protocol": place.PROTOCOL, "identity": identity, "exercise": "exercise3",
               "submission": str(path), "all_backends": False,
               "settings": {"seed": None, "timeout": 120.0, "memory_mb": 4096, "backend": "tensorflow"}}
    for change, why in ((dict(exercise="exercise9"), "no such exercise"),
                        (dict(submission="relative.py"), "not an absolute path"),
                        (dict(settings=dict(request["settings"], memory_mb=10)), "memory limit"),
                        (dict(settings=dict(request["settings"], seed=True)), "seed"),
                        (dict(all_backends="yes"), "all_backends")):
        answer = ask(framed(dict(request, **change)))
        assert answer["ok"] is False and "malformed request" in answer["error"] and why in answer["error"]
    assert "no such request" in ask(framed({"op": "dance"}))["error"]
    assert isinstance(ask((wire.MAX_REQUEST + 1).to_bytes(4, "big")), wire.Closed)  # too long: not read
    assert isinstance(ask(b"\x00\x00\x00\x02[]"), wire.Closed)  # not an object
    after = shared.status()
    assert after["pid"] == before["pid"] and after["graded"] == before["graded"]


def test_a_message_is_bounded_and_must_be_an_object():
    left, right = socket.socketpair()
    with left, right:
        wire.send(left, {"op": "status"})
        assert wire.receive(right, 100, 5) == {"op": "status"}
        wire.send(left, {"padding": "x" * 200})
        with pytest.raises(wire.WireError, match="more than the 100 accepted"):
            wire.receive(right, 100, 5)
    left, right = socket.socketpair()
    with left, right:
        left.sendall(b"\x00\x00\x00\x05[1,2]")
        with pytest.raises(wire.WireError, match="not a JSON object"):
            wire.receive(right, 100, 5)
        left.sendall(b"\x00\x00\x00\x09{")
        with pytest.raises(wire.WireError, match="in time"):
            wire.receive(right, 100, 0.2)
    left, right = socket.socketpair()
    with right:
        left.close()
        with pytest.raises(wire.Closed):
            wire.receive(right, 100, 5)


def test_what_reaches_a_grading_is_part_of_the_servers_identity():
    from grader import compiled
    from grader.sandbox import process

    assert set(process.PASSED_THROUGH) <= set(place.ENVIRONMENT)
    assert {compiled.VARIABLE, "XDG_CACHE_HOME"} <= set(place.ENVIRONMENT)  # where the compiled operations are read
    base = {name: value for name, value in os.environ.items() if name not in place.ENVIRONMENT}
    for name in place.ENVIRONMENT:  # a server started with another value of any of them is not this one
        assert place.identity(base) != place.identity(dict(base, **{name: "another"})), name
    assert place.identity(base) == place.identity(dict(base, UNRELATED="1"))
    assert set(place.server_environment(dict(base, LANG="C.UTF-8", SECRET="x"))) == {"LANG", "PATH"}


@pytest.mark.slow
def test_a_warm_grading_on_jax_gives_the_cold_verdict(shared, tmp_path, monkeypatch, capsys):
    """On JAX, and with --all-backends: the server keeps a worker per backend it was asked for."""
    from grader import backends

    if not backends.installed("jax"):
        pytest.skip("JAX is not installed (pip install -e '.[jax]')")
    path = write(tmp_path, "shared_norm")
    settings = Settings(seed=SEED, backend="jax")
    cold_verdict = grade(EXERCISE.id, path, settings)
    warm = shared.client().grade(EXERCISE.id, path, settings)
    assert untimed(warm) == untimed(cold_verdict)
    assert warm.to_json()["backend"] == "jax" and warm.status == "failed"
    assert "jax" in shared.status()["backends"]

    shared.use(monkeypatch)
    monkeypatch.setenv("GRADE_STATE_DIR", str(tmp_path / "state"))
    argv = ["exercise3", "--submission", str(path), "--json", "--seed", str(SEED), "--all-backends"]
    code, compared, _ = graded_json(argv, capsys)
    cold_code, cold_compared, _ = graded_json([*argv, "--no-server"], capsys)
    assert compared == cold_compared and code == cold_code
    assert {b["backend"] for b in compared["backends"]} >= {"tensorflow", "jax"}


def test_watch_grades_each_save_through_the_server(shared, tmp_path, monkeypatch):
    """`grade --watch` with the server on forks no worker of its own: each save is a request."""
    import io

    import watchfiles
    from rich.console import Console

    from grader.cli import grading as command
    from grader.integrations import batch

    shared.use(monkeypatch)
    monkeypatch.setenv("GRADE_STATE_DIR", str(tmp_path / "state"))
    submission = write(tmp_path, "shared_norm")

    def saves(*args, **kwargs):
        submission.write_text(SOURCES["solution"], encoding="utf-8")
        yield {(watchfiles.Change.modified, str(submission))}

    def no_worker(*args, **kwargs):
        raise AssertionError("watch started a worker of its own")

    monkeypatch.setattr(watchfiles, "watch", saves)
    monkeypatch.setattr(batch, "Workers", no_worker)
    before = shared.status()["graded"] if shared.socket.exists() and shared.status() else 0
    console = Console(file=io.StringIO(), width=100)
    code = command.watch(EXERCISE, submission, Settings(seed=SEED), console, {}, command.WarmGrader())
    shown = console.file.getvalue()
    assert code == 0 and "Score 17/23" in shown and "Score 23/23" in shown and shown.count("Watching") == 2
    assert shared.status()["graded"] == before + 2


def test_a_client_that_goes_away_ends_its_grading(shared, tmp_path, monkeypatch, capsys):
    """Ctrl-C in `grade` closes its connection: the server ends that grading and serves on."""
    shared.use(monkeypatch)
    warm_up = write(tmp_path, "syntax_error")
    cli.main(["exercise3", "--submission", str(warm_up), "--json"])
    capsys.readouterr()
    server = shared.status()
    sleeping = tmp_path / "sleeping" / "exercise3.py"
    sleeping.parent.mkdir()
    sleeping.write_text("import time\n\ntime.sleep(60)\n" + SOLUTION, encoding="utf-8")
    env = dict(shared.environ, GRADE_STATE_DIR=str(tmp_path / "state"))
    # Ctrl-C as a terminal delivers it, whatever this run inherited: a shell starts a background job
    # with SIGINT ignored, and Python keeps an ignored SIGINT ignored
    client = subprocess.Popen([sys.executable, "-m", "grader", "exercise3", "--submission", str(sleeping), "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 300
        while shared.status()["grading"] != 1 and time.monotonic() < deadline:
            time.sleep(0.2)
        gradings = {entry["pid"] for entry in shared.status()["memory"]} - {e["pid"] for e in server["memory"]}
        assert gradings  # the grading's processes, forked by the worker
        client.send_signal(signal.SIGINT)
        client.communicate(timeout=60)
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
    assert client.returncode == 2
    deadline = time.monotonic() + 120
    while shared.status()["grading"] and time.monotonic() < deadline:
        time.sleep(0.2)
    after = shared.status()
    assert after["grading"] == 0 and after["pid"] == server["pid"]
    assert all(ended(pid, 60) for pid in gradings)


# ----------------------------------------------------------------------------- who may connect
def test_another_users_connection_is_refused_unread_and_unanswered(shared, tmp_path, monkeypatch, capsys):
    """A process of another uid that reaches the socket (its folder and its mode opened for the test)
    gets the connection closed: not a byte answered, nothing graded, nothing written to the log."""
    if os.getuid() != 0:
        pytest.skip("only root can run a process as another user here")
    shared.use(monkeypatch)
    path = write(tmp_path, "syntax_error")
    assert cli.main(["exercise3", "--submission", str(path), "--json"]) == 2  # the server is running
    capsys.readouterr()
    before = shared.status()
    where = shared.socket
    log = where.with_suffix(".log")
    log_size = log.stat().st_size
    modes = {p: stat.S_IMODE(os.stat(p).st_mode) for p in (shared.base, where.parent, where)}
    read_end, write_end = os.pipe()
    try:
        for folder in (shared.base, where.parent):
            os.chmod(folder, 0o711)
        os.chmod(where, 0o666)
        pid = os.fork()
        if pid == 0:  # the other user
            try:
                os.close(read_end)
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
                outcome = "unreached"
                intruder = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                intruder.settimeout(30)
                intruder.connect(str(where))
                outcome = "connected"
                try:
                    wire.send(intruder, {"op": "status"})
                    received = intruder.recv(1 << 16)
                    outcome = "closed" if received == b"" else f"answered {received[:80]!r}"
                except OSError as exc:
                    outcome = f"closed ({type(exc).__name__})"
                os.write(write_end, outcome.encode())
            finally:
                os._exit(0)
        os.close(write_end)
        write_end = None
        os.waitpid(pid, 0)
        outcome = os.read(read_end, 4096).decode()
    finally:
        for path_, mode in modes.items():
            os.chmod(path_, mode)
        os.close(read_end)
        if write_end is not None:
            os.close(write_end)
    assert outcome.startswith("closed"), outcome
    after = shared.status()
    assert after["refused"] == before["refused"] + 1
    assert after["graded"] == before["graded"] and after["pid"] == before["pid"]
    assert log.stat().st_size == log_size


def test_the_socket_and_its_folder_are_private(shared, tmp_path, monkeypatch, capsys):
    shared.use(monkeypatch)
    path = write(tmp_path, "syntax_error")
    cli.main(["exercise3", "--submission", str(path), "--json"])
    capsys.readouterr()
    where = shared.socket
    assert stat.S_ISSOCK(os.lstat(where).st_mode) and stat.S_IMODE(os.lstat(where).st_mode) == 0o600
    assert stat.S_IMODE(os.lstat(where.parent).st_mode) == 0o700 and os.lstat(where.parent).st_uid == os.getuid()


def test_a_folder_open_to_others_or_a_link_is_not_used(tmp_path, monkeypatch, capsys):
    """The command then grades cold and says why on stderr; nothing listens anywhere."""
    base = tmp_path / "run"
    base.mkdir()
    (base / "grade").mkdir(mode=0o755)
    os.chmod(base / "grade", 0o755)
    with pytest.raises(place.Unavailable, match="open to other users"):
        place.find({"XDG_RUNTIME_DIR": str(base)})
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "grade").symlink_to(base / "grade")
    with pytest.raises(place.Unavailable, match="symbolic link"):
        place.find({"XDG_RUNTIME_DIR": str(linked)})
    monkeypatch.setenv("GRADE_SERVER", "on")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(base))
    path = tmp_path / "exercise3.py"
    path.write_text(SOURCES["syntax_error"], encoding="utf-8")
    code, printed, err = graded_json(["exercise3", "--submission", str(path), "--json"], capsys)
    assert code == 2 and printed["status"] == "error" and "SyntaxError" in printed["error"]
    assert "grading without the warm grading server" in err and "open to other users" in err
    assert list((base / "grade").iterdir()) == []


# ----------------------------------------------------------------------------- its life
def test_status_and_stop_say_and_end_it(runtime, tmp_path, monkeypatch, capsys):
    run = runtime()
    run.use(monkeypatch)
    assert cli.main(["server", "status"]) == 1
    assert "No grading server is running" in capsys.readouterr().out
    path = write(tmp_path, "syntax_error")
    assert cli.main(["exercise3", "--submission", str(path), "--json"]) == 2
    capsys.readouterr()

    assert cli.main(["server", "status"]) == 0
    text = capsys.readouterr().out
    status = run.status()
    assert f"pid {status['pid']}" in text and f"socket:   {run.socket}" in text
    assert "tensorflow (worker pid" in text and "it stops after 15 min idle" in text and "MB resident" in text
    assert cli.main(["server", "status", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["running"] and data["current"] and data["pid"] == status["pid"]
    assert {"uptime", "backends", "idle_timeout", "socket", "rss_kb", "memory"} <= set(data)
    assert data["idle_timeout"] == 900 and data["socket"] == str(run.socket)
    assert {entry["role"] for entry in data["memory"]} >= {"server", "tensorflow worker"}
    workers = [entry["pid"] for entry in data["memory"] if entry["role"] != "server"]

    assert cli.main(["server", "stop"]) == 0
    assert f"Stopped the grading server (pid {status['pid']}) and its workers." in capsys.readouterr().out
    assert ended(status["pid"], 60) and all(ended(pid, 60) for pid in workers)
    assert not run.socket.exists()
    assert cli.main(["server", "stop"]) == 0
    assert "No grading server was running." in capsys.readouterr().out


def test_commands_started_together_share_one_new_server(runtime, tmp_path):
    run = runtime()
    path = write(tmp_path, "syntax_error")
    env = dict(run.environ, GRADE_STATE_DIR=str(tmp_path / "state"))
    command = [sys.executable, "-m", "grader", "exercise3", "--submission", str(path), "--json"]
    commands = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
                for _ in range(3)]
    results = [c.communicate(timeout=300) for c in commands]
    assert [c.returncode for c in commands] == [2, 2, 2]
    assert all("SyntaxError" in json.loads(out)["error"] and err == "" for out, err in results)
    status = run.status()
    assert status["graded"] == 3  # all three through the one server
    log = run.socket.with_suffix(".log").read_text(encoding="utf-8")
    assert log.count("serving on") == 1


def test_no_server_and_grade_server_off_never_start_one(runtime, tmp_path, monkeypatch, capsys):
    run = runtime()
    run.use(monkeypatch)
    path = write(tmp_path, "syntax_error")
    code, printed, _ = graded_json(["exercise3", "--submission", str(path), "--json", "--no-server"], capsys)
    assert code == 2 and printed["status"] == "error"
    monkeypatch.setenv("GRADE_SERVER", "off")
    code, printed, _ = graded_json(["exercise3", "--submission", str(path), "--json"], capsys)
    assert code == 2 and printed["status"] == "error"
    assert run.client().status() is None and not run.socket.exists()
    monkeypatch.setenv("GRADE_SERVER", "maybe")
    with pytest.raises(SystemExit) as exited:
        cli.main(["exercise3", "--submission", str(path), "--json"])
    assert exited.value.code == 2 and "GRADE_SERVER='maybe' must be on or off" in capsys.readouterr().err


def test_a_stale_socket_is_replaced(runtime, tmp_path, monkeypatch, capsys):
    """A socket whose server was killed (the name left, nobody listening) is removed and a new
    server started on it."""
    run = runtime()
    run.use(monkeypatch)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(run.socket))
    stale.close()
    with pytest.raises(ConnectionRefusedError):
        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).connect(str(run.socket))
    old = os.lstat(run.socket).st_ino
    path = write(tmp_path, "syntax_error")
    code, printed, err = graded_json(["exercise3", "--submission", str(path), "--json"], capsys)
    assert code == 2 and "SyntaxError" in printed["error"], err
    assert run.status() is not None and os.lstat(run.socket).st_ino != old


def test_the_server_is_replaced_when_the_grader_changes(runtime, tmp_path, monkeypatch, capsys):
    """Its identity covers the grader's files: once one changes, the next grade is served by a new
    server, and the old one leaves."""
    run = runtime()
    run.use(monkeypatch)
    copy = tmp_path / "grader"
    shutil.copytree(place.PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(place, "FILES", copy)
    path = write(tmp_path, "syntax_error")
    graded_json(["exercise3", "--submission", str(path), "--json"], capsys)
    first = run.status()["pid"]
    graded_json(["exercise3", "--submission", str(path), "--json"], capsys)
    assert run.status()["pid"] == first  # nothing changed: the same server

    report_file = copy / "report.py"
    report_file.write_text(report_file.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    code, printed, err = graded_json(["exercise3", "--submission", str(path), "--json"], capsys)
    assert code == 2 and "SyntaxError" in printed["error"], err
    second = run.status()
    assert second["pid"] != first and second["identity"] == place.identity(run.environ)
    assert ended(first, 60)


def test_an_idle_server_exits(runtime, tmp_path, monkeypatch, capsys):
    run = runtime(idle=1)
    run.use(monkeypatch)
    path = write(tmp_path, "syntax_error")
    graded_json(["exercise3", "--submission", str(path), "--json"], capsys)
    status = run.status()
    assert status["idle_timeout"] == 1
    workers = [entry["pid"] for entry in status["memory"] if entry["role"] != "server"]
    assert ended(status["pid"], 120)
    assert all(ended(pid, 60) for pid in workers)
    assert not run.socket.exists()


def test_a_server_killed_while_grading_costs_that_grading_one_clear_error(runtime, tmp_path):
    """The grading in flight ends with exit code 2 and the message, no verdict; the next grade is
    served by a new server."""
    run = runtime()
    sleeping = tmp_path / "sleeping" / "exercise3.py"
    sleeping.parent.mkdir()
    sleeping.write_text("import time\n\ntime.sleep(30)\n" + SOLUTION, encoding="utf-8")
    env = dict(run.environ, GRADE_STATE_DIR=str(tmp_path / "state"))
    command = [sys.executable, "-m", "grader", "exercise3", "--submission", str(sleeping), "--json"]
    client = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 600
        status = None
        while time.monotonic() < deadline:  # the server answers once the grading has started
            status = run.status() if run.socket.exists() else None
            if status is not None and status["grading"] == 1:
                break
            time.sleep(0.5)
        assert status is not None and status["grading"] == 1
        os.kill(status["pid"], signal.SIGKILL)
        out, err = client.communicate(timeout=120)
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
    assert client.returncode == 2 and out == ""
    assert err.strip().splitlines() == [
        f"grade: the grading server stopped while grading {sleeping}; grade again"]

    path = write(tmp_path, "syntax_error")
    graded = subprocess.run([*command[:5], str(path), "--json"], capture_output=True, text=True, env=env, timeout=300)
    assert graded.returncode == 2 and "SyntaxError" in json.loads(graded.stdout)["error"], graded.stderr
    assert run.status()["pid"] != status["pid"]
