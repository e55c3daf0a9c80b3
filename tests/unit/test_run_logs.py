"""Log capture without a database: lines split as written, the per-attempt cap and its
marker, records only from inside an attempt, and a child's capture around one call."""

from __future__ import annotations

import logging
import sys

from app.runs.run_logs import (
    CURRENT,
    TRUNCATED,
    CaptureHandler,
    LogCollector,
    add_child_lines,
    capture_in_child,
)
from tests.helpers.waits import wait_until


def test_text_becomes_lines_as_written_and_the_rest_waits_for_its_end() -> None:
    logs = LogCollector()
    logs.write((1, 1), "stdout", "one\ntw")
    logs.write((1, 1), "stdout", "o\nthree")
    assert [x.line for x in logs.drain()] == ["one", "two"]
    logs.close((1, 1))
    (last,) = logs.drain()
    assert (last.line, last.seq, last.stream) == ("three", 2, "stdout")


def test_each_attempt_is_capped_with_one_marker() -> None:
    logs = LogCollector(max_bytes=100)
    for i in range(50):
        logs.add_line((1, 1), "log", f"line {i:03}")  # 9 bytes with its newline
    logs.add_line((1, 2), "log", "next attempt starts afresh")
    lines = logs.drain()
    first = [x.line for x in lines if x.attempt == 1]
    assert first[-1] == TRUNCATED and len(first) == 12
    assert sum(len(x.encode()) + 1 for x in first[:-1]) <= 100
    assert [x.line for x in lines if x.attempt == 2] == ["next attempt starts afresh"]


def test_unstorable_characters_are_replaced() -> None:
    logs = LogCollector()
    logs.add_line((1, 1), "log", "nul\x00 and \ud800")
    assert logs.drain()[0].line == "nul\ufffd and \ufffd"


def test_only_records_inside_an_attempt_are_captured() -> None:
    logs = LogCollector()
    handler = CaptureHandler(logs)
    log = logging.getLogger("tests.capture")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        log.info("outside")
        token = CURRENT.set((7, 2))
        log.info("inside %d", 1)
        CURRENT.reset(token)
    finally:
        log.removeHandler(handler)
    (line,) = logs.drain()
    assert (line.run_id, line.attempt, line.line) == (7, 2, "INFO tests.capture: inside 1")


def test_a_child_sends_its_lines_while_the_call_runs_and_the_rest_with_the_reply() -> None:
    sent: list[list[tuple[float, str, str]]] = []
    with capture_in_child(3, 1, sent.append) as lines:
        logging.getLogger("tests.child").info("early")
        wait_until(lambda: sent, "the first batch sent while the call runs")
        print("late")
        print("unfinished", end="")
    assert [[t for _, _, t in batch] for batch in sent] == [["INFO tests.child: early"]]
    assert [(s, t) for _, s, t in lines] == [("stdout", "late"), ("stdout", "unfinished")]


def test_a_child_captures_around_one_call_and_the_worker_takes_its_lines() -> None:
    with capture_in_child(3, 1) as lines:
        logging.getLogger("tests.child").info("hello")
        print("out")
        print("err", file=sys.stderr)
    print("after the call: not captured")
    assert [(s, t) for _, s, t in lines] == [
        ("log", "INFO tests.child: hello"),
        ("stdout", "out"),
        ("stderr", "err"),
    ]
    worker = LogCollector()
    add_child_lines(worker, (3, 1), [*lines, ["bad"], (1.0, "nope", "x")])
    assert [x.line for x in worker.drain()] == ["INFO tests.child: hello", "out", "err"]
