"""The control lines a `shell` command writes to $JOB_CONTROL_FILE, parsed alone, and
the reader that follows the file as the command appends to it."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.handlers.jobs import JobContext
from app.handlers.shell_control import ControlReader, Progress, SnoozeRequest, parse_line


@pytest.mark.parametrize(
    ("line", "parsed"),
    [
        ("progress 40", Progress(40.0, None)),
        ("progress 2.5 copied 4 of 10 files\n", Progress(2.5, "copied 4 of 10 files")),
        ("  progress   -3   going   back ", Progress(-3.0, "going   back")),
        ("snooze 600 not there yet", SnoozeRequest(600.0, "not there yet")),
        ("snooze 1.5", SnoozeRequest(1.5, "snoozed by its command")),
    ],
)  # fmt: skip
def test_lines_a_command_writes(line: str, parsed: Progress | SnoozeRequest) -> None:
    assert parse_line(line) == parsed


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("Progress 40", "is not a control line"),
        ("echo hello", "is not a control line"),
        ("progress forty", "progress needs a number first, not 'forty'"),
        ("progress", "progress needs a number first"),
        ("progress nan", "needs a finite number"),
        ("progress 1e300", "within ±2^53"),
        ("snooze 0 now", "snooze seconds"),
        ("snooze 99999999 later", "snooze seconds"),
        ("snooze soon because", "snooze needs a number first"),
    ],
)
def test_lines_it_does_not_understand_say_why(line: str, words: str) -> None:
    with pytest.raises(ValueError, match=words.replace("^", r"\^").replace("(", r"\(")):
        parse_line(line)


def test_the_reader_applies_whole_lines_as_they_are_appended(tmp_path: Path) -> None:
    reports: list[tuple[float, str | None]] = []
    ctx = JobContext(1, 1, None, None, on_progress=lambda v, m: reports.append((v, m)))
    path = tmp_path / "control"
    path.touch()
    reader = ControlReader(path, ctx)
    with path.open("a") as stream:
        stream.write("progress 10 first\nprogress 2")  # the second line is not whole yet
        stream.flush()
        reader.poll()
        assert reports == [(10.0, "first")]
        stream.write("0 second\nnonsense\nsnooze 60 later\nprogress 30")
        stream.flush()
        reader.poll()
        assert reports == [(10.0, "first"), (20.0, "second")]
        assert reader.snooze == SnoozeRequest(60.0, "later")
    reader.poll(ended=True)  # the command ended: its last line counts without a newline
    assert reports[-1] == (30.0, None)
