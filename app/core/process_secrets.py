"""Keeping Sundial's secrets (database URLs, the secret key) out of reach of what jobs run.

A command a job runs executes as the same OS user as the worker. Through /proc it could read
the environment (`/proc/<pid>/environ`) or the memory of any process of that user, unless:

- every long-running Sundial process is non-dumpable (`make_non_dumpable`): the kernel then
  lets only root (CAP_SYS_PTRACE) read its /proc files (environ, mem, fd, maps) or trace it;
- job children (`process` and `subprocess` models) never get the secrets in their
  environment, whose original block /proc would show: they receive them through a pipe
  (`secrets_pipe` / `receive_secrets`) after making themselves non-dumpable, and keep them in
  `os.environ` only (memory, not the environment block the kernel shows);
- commands get a minimal environment of their own (see `app.handlers.shell`), and no Sundial
  process carries a secret on its command line.

Root on the host, or another process of the same user that is not Sundial (honcho in
development holds the whole environment; a `.env` file readable by that user), stays out of
this protection: run workers as their own user where commands come from people you do not
trust.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import json
import os
import sys
from collections.abc import Iterator, Mapping

SECRETS_FD_ENV = "SUNDIAL_SECRETS_FD"
_PR_SET_DUMPABLE = 4  # <linux/prctl.h>


def is_secret(name: str) -> bool:
    """Settings that open the database or forge sessions and tokens."""
    return (
        name == "SECRET_KEY"
        or name.endswith(("DATABASE_URL", "_POOL_URL"))
        or name.startswith("HEROKU_POSTGRESQL_")
    )


def without_secrets(environ: Mapping[str, str]) -> dict[str, str]:
    return {name: value for name, value in environ.items() if not is_secret(name)}


def make_non_dumpable() -> bool:
    """Close this process's /proc files and ptrace to other processes of its user (Linux);
    False where the kernel has no such switch. Lasts until this process execs."""
    if not sys.platform.startswith("linux"):
        return False
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return False
    libc = ctypes.CDLL(libc_name, use_errno=True)
    return int(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0


@contextlib.contextmanager
def secrets_pipe(environ: Mapping[str, str]) -> Iterator[int]:
    """The read end of a pipe holding the secrets of `environ` as JSON, for one child to
    inherit (`pass_fds`); closed here once the child has started."""
    data = json.dumps({k: v for k, v in environ.items() if is_secret(k)}).encode()
    read_end, write_end = os.pipe()
    try:
        with os.fdopen(write_end, "wb") as writer:  # small: fits in the pipe's buffer
            writer.write(data)
        yield read_end
    finally:
        os.close(read_end)


def receive_secrets() -> None:
    """In a job child: read the secrets the worker passed into `os.environ`, once the child
    is non-dumpable, so that they never appear in its /proc environment block."""
    fd_text = os.environ.pop(SECRETS_FD_ENV, "")
    if not fd_text.isdigit():
        return
    fd = int(fd_text)
    try:
        with os.fdopen(fd, "rb") as reader:
            secrets = json.loads(reader.read() or b"{}")
    except (OSError, ValueError):
        return
    os.environ.update({str(k): str(v) for k, v in secrets.items()})
