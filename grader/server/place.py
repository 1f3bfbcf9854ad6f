"""Where a user's grading server lives, and which installation it grades with.

The folder is ``$XDG_RUNTIME_DIR/grade`` (else ``/tmp/grade-<uid>``), created with mode 0700 and
used only while it is a directory, not a symbolic link, owned by the user and closed to everyone
else. In it, for each installation (the grader package's folder and the Python running it):
``<key>.sock`` (the server's socket, 0600), ``<key>.lock`` (held while a server starts, or
removes its socket) and ``<key>.log`` (what the server itself says).

A server grades with the code it imported when it started. Its identity is a digest of what a
verdict depends on besides the request: the grader package's files, the installed distributions'
versions, the Python, and the variables of the environment that reach a grading process. A
client whose own identity differs (the grader was edited, a library upgraded) gets the server
replaced before it grades.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

PROTOCOL = 1  # the form of the requests and answers (``wire``): a server of another form is replaced
PACKAGE = Path(__file__).resolve().parent.parent  # the grader package
FILES = PACKAGE  # the folder whose files the identity covers
# what of the grader's environment reaches a grading: the grading processes' locale and OpenBLAS
# settings (``sandbox.process.fresh_environment``), the scratch folders' place, the control groups' switch
# GRADE_COMPILED and XDG_CACHE_HOME say which folder of JAX's compiled operations gradings read (grader.compiled)
ENVIRONMENT = ("LANG", "LC_ALL", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "TMPDIR", "GRADE_CGROUPS", "GRADE_COMPILED",
               "XDG_CACHE_HOME")
DEFAULT_IDLE_SECONDS = 15 * 60
MAX_SOCKET_PATH = 107  # bytes of sun_path, less its terminating NUL


class Unavailable(Exception):
    """The server cannot be used here (its folder is not private, its path too long ...): the message
    says why, and grading goes on without it."""


@dataclass(frozen=True)
class Place:
    folder: Path
    key: str

    @property
    def socket(self) -> Path:
        return self.folder / f"{self.key}.sock"

    @property
    def lock(self) -> Path:
        return self.folder / f"{self.key}.lock"

    @property
    def log(self) -> Path:
        return self.folder / f"{self.key}.log"


def installation_key() -> str:
    """One server per installation: the grader package's folder and the Python environment (a
    virtual environment's ``python`` and ``python3`` are one installation)."""
    return hashlib.sha256(f"{PACKAGE}\0{sys.prefix}".encode()).hexdigest()[:16]


def base_folder(environ=os.environ) -> Path:
    runtime = environ.get("XDG_RUNTIME_DIR", "")
    if runtime and os.path.isabs(runtime):
        return Path(runtime) / "grade"
    return Path("/tmp") / f"grade-{os.getuid()}"


def find(environ=os.environ, create: bool = True) -> Place:
    """This user's and installation's place, the folder made if ``create``; Unavailable if the folder
    is not private to the user, or the socket's path would be too long."""
    folder = base_folder(environ)
    if create:
        try:
            folder.mkdir(mode=0o700, exist_ok=True)
        except OSError as exc:
            raise Unavailable(f"its folder {folder} cannot be made ({exc.strerror or exc})") from None
    check_private(folder)
    place = Place(folder, installation_key())
    if len(os.fsencode(place.socket)) > MAX_SOCKET_PATH:
        raise Unavailable(f"its socket's path would be longer than a Unix socket's path may be ({place.socket})")
    return place


def check_private(folder: Path) -> None:
    """Unavailable unless ``folder`` is a directory (not a link) owned by this user, closed to others."""
    try:
        info = os.lstat(folder)
    except FileNotFoundError:
        raise Unavailable(f"its folder {folder} does not exist") from None
    except OSError as exc:
        raise Unavailable(f"its folder {folder} cannot be read ({exc.strerror or exc})") from None
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise Unavailable(f"{folder} is not a folder (a symbolic link, or a file): it is not used")
    if info.st_uid != os.getuid():
        raise Unavailable(f"its folder {folder} belongs to another user (uid {info.st_uid})")
    if info.st_mode & 0o077:
        raise Unavailable(f"its folder {folder} is open to other users (mode {stat.S_IMODE(info.st_mode):04o}); "
                          "it must be 0700")


def idle_seconds(environ=os.environ) -> float:
    """The idle time after which a server exits: ``GRADE_SERVER_IDLE`` seconds, else 15 minutes."""
    value = environ.get("GRADE_SERVER_IDLE", "").strip()
    if not value:
        return float(DEFAULT_IDLE_SECONDS)
    try:
        seconds = float(value)
    except ValueError:
        raise ValueError(f"environment variable GRADE_SERVER_IDLE={value!r} is not a number of seconds") from None
    if not seconds > 0 or seconds == float("inf"):
        raise ValueError(f"environment variable GRADE_SERVER_IDLE must be a positive number of seconds, got {value!r}")
    return seconds


def wanted(environ=os.environ) -> bool:
    """Whether ``GRADE_SERVER`` lets ``grade`` use the server (on by default); ValueError if it is not
    a switch."""
    value = environ.get("GRADE_SERVER", "").strip().lower()
    if value in ("", "on", "1", "yes", "true"):
        return True
    if value in ("off", "0", "no", "false"):
        return False
    raise ValueError(f"environment variable GRADE_SERVER={environ.get('GRADE_SERVER')!r} must be on or off")


def server_environment(environ=os.environ) -> dict:
    """The server's whole environment: what of the grader's reaches a grading (``ENVIRONMENT``) and a
    search path (the interpreter's folder, then the system's); nothing else."""
    search = os.pathsep.join([os.path.dirname(sys.executable), "/usr/local/bin", "/usr/bin", "/bin"])
    return dict({name: environ[name] for name in ENVIRONMENT if name in environ}, PATH=search)


def identity(environ=os.environ) -> str:
    """The digest a server is started with and a client compares (see the module's text)."""
    digest = hashlib.sha256()

    def add(*parts) -> None:
        for part in parts:
            data = part if isinstance(part, bytes) else str(part).encode("utf-8", "surrogateescape")
            digest.update(len(data).to_bytes(8, "big") + data)

    add(PROTOCOL, sys.version, os.path.realpath(sys.executable), sys.prefix, PACKAGE)
    root = FILES
    for folder, folders, names in os.walk(root):
        folders[:] = sorted(f for f in folders if f != "__pycache__")
        for name in sorted(names):
            if name.endswith((".pyc", ".pyo")):
                continue
            path = Path(folder) / name
            try:
                add(path.relative_to(root).as_posix(), path.read_bytes())
            except OSError:
                add(path.relative_to(root).as_posix(), b"unreadable")
    for folder in distribution_folders():
        try:
            entries = sorted(os.listdir(folder))
        except OSError:
            continue
        add(folder, *(name for name in entries if name.endswith((".dist-info", ".egg-info"))))
    add(*(f"{name}={environ.get(name)}" for name in ENVIRONMENT))
    return digest.hexdigest()


def distribution_folders() -> list[str]:
    """The folders the installed distributions are in (the user's own site-packages left out: a
    grading process runs with ``-I``, which does not see it)."""
    import site
    import sysconfig

    paths = sysconfig.get_paths()
    found = [*site.getsitepackages(), paths.get("purelib", ""), paths.get("platlib", "")]
    return sorted({os.path.realpath(p) for p in found if p and os.path.isdir(p)})
