"""Ending every process a run started, the detached ones included.

A process that calls `setsid`, `nohup` or forks twice leaves its process group, so killing
the group misses it. Linux gives a better handle: a *child subreaper* (PR_SET_CHILD_SUBREAPER)
adopts the orphans of all its descendants, so everything a run started stays below it and
is listed by the kernel in /proc/<pid>/task/<tid>/children. `end_descendants` freezes
(SIGSTOP: nothing can fork meanwhile) and kills (SIGKILL) everything below this process,
round after round as orphans are adopted, until nothing is left.

Job children (process and subprocess models) become subreapers at start and end their
descendants when their run ends, is stopped, or the worker dies. A command run by the
`shell` handler runs under this file as a launcher:

    python -I -S launcher.py LIFELINE_FD COMMAND [ARG...]

It becomes a subreaper, runs COMMAND, and ends everything below it when COMMAND exits, when
it gets SIGTERM (the run timed out or was cancelled), or when LIFELINE_FD (a pipe whose write
end only the process that started it holds) reaches end of file: that process died, even
by SIGKILL. It exits with COMMAND's exit code (128 + the signal, if a signal ended it).

Standard library only, and runnable as a file: the launcher starts in milliseconds,
without the package or the command's environment knowing Python.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import sys

PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
CANNOT_RUN = 127  # the exit code when COMMAND cannot be started, as a shell's
CANNOT_RUN_PREFIX = "sundial launcher: cannot run "
ROUNDS = 100


# (pid, read end) of this process's lifeline pipe; see `lifeline()`.
_lifeline: tuple[int, int] | None = None


def lifeline() -> int:
    """The read end of a pipe whose write end this process holds open until it ends.

    Every job child and launcher gets the read end (`pass_fds`) and ends what it runs at
    end of file, so nothing outlives the process that started it, even one killed with
    SIGKILL. One pipe per process: a forked copy makes its own.
    """
    global _lifeline
    if _lifeline is None or _lifeline[0] != os.getpid():
        read_end, _write_end = os.pipe()  # both close on exec; the write end is never closed
        _lifeline = (os.getpid(), read_end)
    return _lifeline[1]


def become_subreaper() -> bool:
    """Adopt the orphans of every descendant; False where the kernel offers no such thing."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def children_of(pid: int) -> list[int]:
    """The live children of `pid`, as the kernel lists them."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as listing:
                found.extend(int(child) for child in listing.read().split())
        except OSError:
            continue
    return found


def descendants_of(pid: int) -> list[int]:
    """Every process below `pid`, parents before their children."""
    found: list[int] = []
    todo = children_of(pid)
    while todo:
        child = todo.pop()
        found.append(child)
        todo.extend(children_of(child))
    return found


def end_descendants() -> int:
    """Freeze and kill everything below this process until nothing is left, and reap what
    were its own children. How many processes it killed."""
    me, killed = os.getpid(), 0
    for _ in range(ROUNDS):
        found = descendants_of(me)
        if not found:
            break
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for pid in found:
                try:
                    os.kill(pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
        killed += len(found)
        for pid in children_of(me):  # killed, so these waits end at once
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
    return killed


class _Stop(Exception):
    """SIGTERM: the run ended before its command did."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise _Stop


def _start(command: list[str], lifeline: int) -> int:
    pid = os.fork()
    if pid:
        return pid
    try:
        os.close(lifeline)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.execvp(command[0], command)
    except OSError as exc:
        os.write(2, f"{CANNOT_RUN_PREFIX}{command[0]!r}: {exc.strerror}\n".encode())
    os._exit(CANNOT_RUN)


def _wait(pid: int, lifeline: int) -> int | None:
    """COMMAND's wait status, or None when the lifeline ended first."""
    try:
        watched = [lifeline, os.pidfd_open(pid)]
        timeout = None
    except (AttributeError, OSError):  # no pidfd: look at the command ten times a second
        watched, timeout = [lifeline], 0.1
    while True:
        ready, _, _ = select.select(watched, [], [], timeout)
        if lifeline in ready and not os.read(lifeline, 1):
            return None
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status


def main(argv: list[str]) -> int:
    lifeline, command = int(argv[1]), argv[2:]
    become_subreaper()
    signal.signal(signal.SIGTERM, _on_sigterm)
    status: int | None = None
    try:
        status = _wait(_start(command, lifeline), lifeline)
    except _Stop:
        pass
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the ending below is not cut short
    end_descendants()
    if status is None:
        return 128 + signal.SIGTERM
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
