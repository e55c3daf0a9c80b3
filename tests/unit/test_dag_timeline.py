"""A DAG run's timeline (app.dags.dag_timeline): bar segments and their places on the axis
from the steps' times, pure."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.dags.dag_timeline import AttemptTimes, StepTimes, axis_ticks, timeline

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_segments_sit_at_their_share_of_the_axis() -> None:
    steps = [
        StepTimes("extract", 1, "completed", T0, [AttemptTimes(1, "completed", at(10), at(30))],
                  at(30)),
        StepTimes("load", 2, "completed", T0, [
            AttemptTimes(1, "failed", at(40), at(50)),
            AttemptTimes(2, "completed", at(60), at(100)),
        ], at(100)),
    ]  # fmt: skip
    chart = timeline(steps, [("extract", "load")], now=at(500))
    assert (chart.start, chart.end, chart.seconds, chart.live) == (T0, at(100), 100.0, False)
    extract, load = chart.bars
    assert [(s.kind, s.left, s.width) for s in extract.segments] == [
        ("queued", 0.0, 10.0), ("ran", 10.0, 20.0),
    ]  # fmt: skip
    assert [(s.kind, s.left, s.width, s.attempt) for s in load.segments] == [
        ("waiting", 0.0, 30.0, None),  # until extract ended
        ("queued", 30.0, 10.0, None),
        ("failed", 40.0, 10.0, 1),
        ("retrying", 50.0, 10.0, None),
        ("ran", 60.0, 40.0, 2),
    ]
    assert (load.retries, load.failed_attempts, load.total("waiting")) == (1, 1, 30.0)
    assert chart.critical_path == ("extract", "load") and extract.critical and load.critical
    # round steps: 30 s apart over 100 s
    assert [(t.position, t.seconds) for t in chart.ticks] == [
        (0.0, 0), (30.0, 30), (60.0, 60), (90.0, 90),
    ]  # fmt: skip
    assert chart.kinds == ("waiting", "queued", "ran", "failed", "retrying")


def test_a_live_run_ends_at_now_and_open_segments_say_so() -> None:
    steps = [
        StepTimes("a", 1, "running", T0, [AttemptTimes(1, "running", at(5), None)]),
        StepTimes("b", 2, "blocked", T0),
        StepTimes("c", 3, "retrying", T0, [AttemptTimes(1, "timed_out", at(1), at(4))]),
        StepTimes("d", 4, "pending", T0),
    ]
    chart = timeline(steps, [("a", "b")], now=at(20))
    assert chart.live and chart.end == at(20)
    a, b, c, d = chart.bars
    assert [(s.kind, s.open) for s in a.segments] == [("queued", False), ("ran", True)]
    assert a.segments[-1].width == 75.0
    assert [(s.kind, s.open, s.width) for s in b.segments] == [("waiting", True, 100.0)]
    assert [(s.kind, s.open) for s in c.segments] == [
        ("queued", False), ("failed", False), ("retrying", True),
    ]  # fmt: skip
    assert [(s.kind, s.open, s.width) for s in d.segments] == [("queued", True, 100.0)]
    # the chain that decides: b waits on a, the steps still to end are at now
    assert chart.critical_path[-1] in {"a", "b", "c", "d"}


def test_the_longest_chain_follows_the_upstream_that_ended_last() -> None:
    def done(name: str, run_id: int, start: float, end: float) -> StepTimes:
        return StepTimes(name, run_id, "completed", T0,
                         [AttemptTimes(1, "completed", at(start), at(end))], at(end))  # fmt: skip

    steps = [done("fast", 1, 0, 5), done("slow", 2, 0, 50), done("join", 3, 50, 60),
             done("side", 4, 0, 10)]  # fmt: skip
    chart = timeline(steps, [("fast", "join"), ("slow", "join")], now=at(60))
    assert chart.critical_path == ("slow", "join")
    assert [b.critical for b in chart.bars] == [False, True, True, False]
    # no edges: no chain is drawn, a lone step is just a bar
    assert timeline(steps, [], now=at(60)).critical_path == ()


def test_a_skipped_step_waited_until_its_upstream_failed_and_empty_is_fine() -> None:
    steps = [
        StepTimes("a", 1, "failed", T0, [AttemptTimes(1, "failed", at(0), at(8))], at(8)),
        StepTimes("b", 2, "skipped", T0, [], at(8)),
    ]
    chart = timeline(steps, [("a", "b")], now=at(100))
    assert [(s.kind, s.width) for s in chart.bars[1].segments] == [("waiting", 100.0)]
    assert not chart.live and chart.seconds == 8.0
    empty = timeline([], [], now=T0)
    assert empty.bars == () and empty.seconds == 1.0


def test_axis_labels_fall_on_round_durations() -> None:
    assert [t.seconds for t in axis_ticks(3.4)] == [0, 1, 2, 3]
    assert [t.seconds for t in axis_ticks(80)] == [0, 30, 60]
    assert [t.seconds for t in axis_ticks(3600)] == [0, 900, 1800, 2700, 3600]
    assert [t.position for t in axis_ticks(3600)] == [0.0, 25.0, 50.0, 75.0, 100.0]
    assert [t.seconds for t in axis_ticks(0.0025)] == [0, 0.001, 0.002]
    assert len(axis_ticks(10 * 604800)) == 5  # past the steps: quarters
