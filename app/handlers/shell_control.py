"""What a `shell` command tells Sundial while it runs: lines it appends to the file named by
`$JOB_CONTROL_FILE`, read by the handler as the command runs (progress) and once it
has ended (a snooze).

    echo "progress 40 copied 4 of 10 files" >> "$JOB_CONTROL_FILE"
    echo "snooze 600 the partner's file is not there yet" >> "$JOB_CONTROL_FILE"; exit 0

The variable is not named SUNDIAL_*: no variable of that name ever reaches a command.
A file, not the command's output: its output stays its own (kept in the run's result), and
a line cannot be mistaken for one the command printed. A line that is not understood is
reported in the run's log and otherwise ignored: a typo in a progress line never fails a run.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path

from app.core.limits import LimitError
from app.handlers.jobs import JobContext, Snooze, check_progress

CONTROL_VARIABLE = "JOB_CONTROL_FILE"
READ_LIMIT = 64 * 1024  # bytes read at one poll: a command writing in a loop cannot stall it
LINE_LIMIT = 4096  # a longer line is not a control line

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Progress:
    value: float
    message: str | None


@dataclass(frozen=True, slots=True)
class SnoozeRequest:
    seconds: float
    reason: str


def parse_line(line: str) -> Progress | SnoozeRequest:
    """One control line; ValueError, in words, for one that is not understood."""
    word, _, rest = line.strip().partition(" ")
    figure, _, text = rest.strip().partition(" ")
    text = text.strip()
    if word not in ("progress", "snooze"):
        raise ValueError(
            f"{line.strip()[:80]!r} is not a control line: write 'progress NUMBER [message]' "
            "or 'snooze SECONDS reason'"
        )
    try:
        number = float(figure)
    except ValueError:
        raise ValueError(f"{word} needs a number first, not {figure[:40]!r}") from None
    if not math.isfinite(number):
        raise ValueError(f"{word} needs a finite number, not {figure[:40]!r}")
    try:
        if word == "progress":
            return Progress(*check_progress(number, text or None))
        snooze = Snooze(number, text or "snoozed by its command")  # checks the range
    except LimitError as exc:
        raise ValueError(str(exc)) from None
    return SnoozeRequest(snooze.seconds, snooze.reason)


@dataclass
class ControlReader:
    """Follows one command's control file: `poll` applies the progress lines written since
    the last poll; `snooze` is the last snooze line, once the command has ended."""

    path: Path
    ctx: JobContext
    snooze: SnoozeRequest | None = None
    _offset: int = 0
    _partial: bytes = field(default=b"", repr=False)

    def poll(self, *, ended: bool = False) -> None:
        with self.path.open("rb") as stream:
            stream.seek(self._offset)
            data = stream.read(READ_LIMIT if not ended else -1)
        self._offset += len(data)
        *lines, self._partial = (self._partial + data).split(b"\n")
        if ended and self._partial:  # a last line without its newline
            lines.append(self._partial)
            self._partial = b""
        if len(self._partial) > LINE_LIMIT:
            self._partial = b""
            log.warning("a control line longer than %d bytes was ignored", LINE_LIMIT)
        for raw in lines:
            self._apply(raw.decode(errors="replace"))

    def _apply(self, line: str) -> None:
        if not line.strip():
            return
        try:
            request = parse_line(line)
        except ValueError as exc:
            log.warning("ignored a line of $%s: %s", CONTROL_VARIABLE, exc)
            return
        if isinstance(request, Progress):
            self.ctx.progress(request.value, request.message)
        else:
            self.snooze = request
