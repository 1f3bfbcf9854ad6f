"""``grade server status|stop``: say what the warm grading server is doing, or end it."""

from __future__ import annotations

import argparse
import json

from ..verdict import EXIT_ERROR


def server_command(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="grade server",
        description="The warm grading server: the first `grade` starts it, and it keeps TensorFlow imported "
                    "so that every later grading skips the import. It grades each submission exactly as a "
                    "cold `grade` does, answers only your own user, and exits after an idle time "
                    "(GRADE_SERVER_IDLE seconds, default 900). `grade --no-server` or GRADE_SERVER=off "
                    "grades without it.",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="{status,stop}")
    status = actions.add_parser("status", help="whether it runs: its pid, uptime, backends, idle time, socket "
                                               "and memory (exit code 1 when none runs)",
                                description="Say whether the grading server runs and what it holds.")
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    actions.add_parser("stop", help="end it and its workers (the next grade starts a new one)",
                       description="End the grading server and its workers.")
    args = parser.parse_args(argv)

    from ..server.client import Client, Failed, Unavailable

    try:
        client = Client()
    except Unavailable as exc:
        print(f"grade server: the grading server cannot be used here: {exc}")
        return EXIT_ERROR
    except ValueError as exc:
        parser.error(str(exc))
    if args.action == "stop":
        pid, stale = client.stop()
        if pid is not None:
            print(f"Stopped the grading server (pid {pid}) and its workers.")
        elif stale:
            print(f"No grading server was running; removed its stale socket {client.place.socket}.")
        else:
            print("No grading server was running.")
        return 0
    try:
        found = client.status()
    except Failed as exc:
        print(f"grade server: {exc}")
        return EXIT_ERROR
    if args.json:
        data = {"running": found is not None, "socket": str(client.place.socket)}
        if found is not None:
            data.update(found, current=found.get("identity") == client.identity)
        print(json.dumps(data, indent=2))
        return 0 if found is not None else 1
    if found is None:
        print(f"No grading server is running (its socket would be {client.place.socket}); the next grade "
              "starts one.")
        return 1
    print("\n".join(describe(found, client.identity)))
    return 0


def describe(status: dict, identity: str) -> list[str]:
    idle_for = status.get("idle_for")
    now = f"idle for {duration(idle_for)}" if idle_for is not None else f"grading {status.get('grading')} now"
    backends = status.get("backends") or {}
    roles = ", ".join(f"{entry.get('role')} {megabytes(entry.get('rss_kb'))}" for entry in status.get("memory") or [])
    lines = [
        f"The grading server is running: pid {status.get('pid')}, up {duration(status.get('uptime'))}, {now}; "
        f"it stops after {duration(status.get('idle_timeout'))} idle.",
        f"  socket:   {status.get('socket')}",
        "  backend:  " + (", ".join(f"{name} (worker pid {pid})" for name, pid in backends.items()) or "none yet"),
        f"  memory:   {megabytes(status.get('rss_kb'))} resident in all ({roles})",
        f"  graded:   {status.get('graded')} since it started; connections of other users refused: "
        f"{status.get('refused')}",
    ]
    if status.get("identity") != identity:
        lines.append("  It was started from another state of this installation (the grader's files or its "
                     "libraries have changed): the next grade replaces it.")
    return lines


def duration(seconds) -> str:
    if not isinstance(seconds, (int, float)):
        return "?"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s" if seconds else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def megabytes(kib) -> str:
    return f"{kib / 1024:.0f} MB" if isinstance(kib, (int, float)) else "?"
