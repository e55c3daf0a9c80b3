"""Where the time of a DAG run went: each step as a bar over one shared time axis (a Gantt
chart), pure and deterministic, with the loader that reads it.

A step's bar is cut into segments, in time order:

- `waiting`: from the DAG run's start until its last upstream ended (steps with
  upstreams only; a step still blocked waits until now);
- `queued`: ready but not started yet (until its first attempt, or now);
- `ran` / `failed` / `paused`: one segment per attempt, from its start to its end; `ran`
  when it completed (or is still running), `failed` when it failed, timed out, was lost
  or cancelled, `paused` when it was snoozed or handed back;
- `retrying`: between the end of an attempt and the start of the next (the backoff),
  until now while it still waits.

The chain of steps that decided when the DAG run ended is marked (`critical`): start
from the step that ended last, and go up through the upstream that ended last, each
time. Positions are percentages of the axis, so the picture scales to any width.

    ran = AttemptTimes(1, "completed", t1, t2)
    chart = timeline([StepTimes("load", 1, "completed", t0, [ran], t2)], edges=[], now=t3)
    chart.bars[0].segments[0].left, chart.bars[0].segments[0].width
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from app.core.db import Conn
from app.core.sql import query

FAILED_OUTCOMES = frozenset({"failed", "timed_out", "lost", "cancelled", "crashed"})
ACTIVE = frozenset({"pending", "blocked", "running"})
SEGMENT_KINDS = ("waiting", "queued", "ran", "failed", "paused", "retrying")
MAX_TICKS = 4  # axis labels besides the start, at round durations
# Round steps between axis labels, in seconds: 1/2/5 below a minute, then whole minutes,
# hours and days.
TICK_STEPS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30,
              60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400,
              172800, 604800)  # fmt: skip
MIN_SPAN = timedelta(seconds=1)


@dataclass(frozen=True, slots=True)
class AttemptTimes:
    attempt: int
    outcome: str  # completed, failed, timed_out, lost, cancelled, snoozed, released, running
    started_at: datetime | None
    finished_at: datetime | None  # None: still running


@dataclass(frozen=True, slots=True)
class StepTimes:
    name: str
    run_id: int
    status: str  # the run's status, or "retrying" (pending after an attempt)
    created_at: datetime
    attempts: Sequence[AttemptTimes] = ()
    finished_at: datetime | None = None  # the run's end, when it ended


@dataclass(frozen=True, slots=True)
class Segment:
    kind: str  # one of SEGMENT_KINDS
    start: datetime
    end: datetime
    left: float = 0.0  # percent of the axis
    width: float = 0.0
    attempt: int | None = None
    outcome: str | None = None
    open: bool = False  # still going (ends now)

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()


@dataclass(frozen=True, slots=True)
class Bar:
    name: str
    run_id: int
    status: str
    segments: tuple[Segment, ...]
    upstreams: tuple[str, ...]
    critical: bool

    def total(self, kind: str) -> float:
        """Seconds this step spent in segments of `kind`."""
        return sum(s.seconds for s in self.segments if s.kind == kind)

    @property
    def attempts(self) -> int:
        return sum(1 for s in self.segments if s.attempt is not None)

    @property
    def retries(self) -> int:
        return max(self.attempts - 1, 0)

    @property
    def failed_attempts(self) -> int:
        return sum(1 for s in self.segments if s.kind == "failed")

    @property
    def end(self) -> datetime | None:
        return self.segments[-1].end if self.segments else None


@dataclass(frozen=True, slots=True)
class Tick:
    position: float  # percent of the axis
    seconds: float  # since the start


@dataclass(frozen=True, slots=True)
class Timeline:
    start: datetime
    end: datetime
    bars: tuple[Bar, ...]
    ticks: tuple[Tick, ...]
    critical_path: tuple[str, ...]  # first step to last
    live: bool
    kinds: tuple[str, ...] = field(default=())  # the segment kinds drawn, in legend order

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()


def axis_ticks(span: float) -> tuple[Tick, ...]:
    """Labels at 0 and every round step up to `span` seconds, at most MAX_TICKS after 0."""
    step = next((t for t in TICK_STEPS if span / t <= MAX_TICKS), span / MAX_TICKS)
    count = int(span / step + 1e-9)
    return tuple(Tick(round(100 * i * step / span, 3), i * step) for i in range(count + 1))


def _attempt_kind(outcome: str) -> str:
    if outcome in ("completed", "running"):
        return "ran"
    return "failed" if outcome in FAILED_OUTCOMES else "paused"


def _segments(step: StepTimes, ready: datetime | None, now: datetime) -> list[Segment]:
    """The step's segments, unplaced: `ready` is when its last upstream ended (None: one
    has not ended yet; the step's own start when it has no upstreams)."""
    segments: list[Segment] = []
    attempts = sorted(
        (a for a in step.attempts if a.started_at is not None), key=lambda a: a.attempt
    )
    first_start = attempts[0].started_at if attempts else None
    ended_at = step.finished_at if step.status not in ACTIVE else None
    # Until the last upstream ended (it cannot start before; a step that never started
    # because an upstream failed waited until it was skipped).
    if ready is None:
        wait_end = first_start or ended_at or now
    else:
        wait_end = ready
        if first_start is not None:
            wait_end = min(wait_end, first_start)
    wait_end = max(wait_end, step.created_at)
    if wait_end > step.created_at:
        still = ready is None and not attempts and step.status in ACTIVE
        segments.append(Segment("waiting", step.created_at, wait_end, open=still))
    if not attempts:
        if step.status in ("pending", "retrying"):
            segments.append(Segment("queued", wait_end, max(now, wait_end), open=True))
        return [s for s in segments if s.end > s.start or s.open]
    if first_start is not None and first_start > wait_end:
        segments.append(Segment("queued", wait_end, first_start))
    previous_end: datetime | None = None
    for a in attempts:
        assert a.started_at is not None
        if previous_end is not None and a.started_at > previous_end:
            segments.append(Segment("retrying", previous_end, a.started_at))
        end = a.finished_at or max(now, a.started_at)
        segments.append(
            Segment(
                _attempt_kind(a.outcome),
                a.started_at,
                end,
                attempt=a.attempt,
                outcome=a.outcome,
                open=a.finished_at is None,
            )
        )
        previous_end = end
    if step.status in ("pending", "retrying") and previous_end is not None:
        segments.append(Segment("retrying", previous_end, max(now, previous_end), open=True))
    return segments


def _critical_path(bars: dict[str, list[Segment]], upstreams: dict[str, list[str]]) -> list[str]:
    """From the step that ended last, up through the upstream that ended last, each time."""

    def end_of(name: str) -> datetime | None:
        return bars[name][-1].end if bars[name] else None

    ended = [(end, name) for name in bars if (end := end_of(name)) is not None]
    if not ended:
        return []
    order = list(bars)
    # latest end; ties go to the step given first
    current = max(ended, key=lambda pair: (pair[0], -order.index(pair[1])))[1]
    path = [current]
    seen = {current}
    while True:
        ups = [(end, name) for name in upstreams.get(current, []) if (end := end_of(name))]
        ups = [(e, n) for e, n in ups if n not in seen]
        if not ups:
            break
        current = max(ups, key=lambda pair: (pair[0], -order.index(pair[1])))[1]
        path.append(current)
        seen.add(current)
    return path[::-1]


def timeline(
    steps: Sequence[StepTimes], edges: Sequence[tuple[str, str]], *, now: datetime
) -> Timeline:
    """Bars for `steps` over one axis from the first step's creation to the last
    segment's end (now, while a step is still to finish); `edges` are (upstream,
    downstream) step names."""
    names = {s.name for s in steps}
    upstreams: dict[str, list[str]] = {s.name: [] for s in steps}
    for up, down in edges:
        if up in names and down in names and up not in upstreams[down]:
            upstreams[down].append(up)
    by_name = {s.name: s for s in steps}

    def ready_of(step: StepTimes) -> datetime | None:
        ups = upstreams[step.name]
        if not ups:
            return step.created_at
        ends = [by_name[u].finished_at if by_name[u].status not in ACTIVE else None for u in ups]
        if any(e is None for e in ends):
            # an upstream still to end: skipped steps waited until the failed one ended
            done = [e for e in ends if e is not None]
            if step.status == "skipped" and done:
                return max(done)
            return None
        return max(e for e in ends if e is not None)

    raw = {s.name: _segments(s, ready_of(s), now) for s in steps}
    live = any(s.status in ACTIVE or s.status == "retrying" for s in steps)
    start = min((s.created_at for s in steps), default=now)
    ends = [seg.end for segs in raw.values() for seg in segs]
    end = max([*ends, start + MIN_SPAN] + ([now] if live else []))
    span = (end - start).total_seconds()

    def place(seg: Segment) -> Segment:
        left = (seg.start - start).total_seconds() / span * 100
        width = (seg.end - seg.start).total_seconds() / span * 100
        return Segment(seg.kind, seg.start, seg.end, round(left, 3), round(width, 3),
                       seg.attempt, seg.outcome, seg.open)  # fmt: skip

    path = _critical_path(raw, upstreams) if edges else []
    on_path = set(path)
    bars = tuple(
        Bar(
            s.name,
            s.run_id,
            s.status,
            tuple(place(seg) for seg in raw[s.name]),
            tuple(upstreams[s.name]),
            s.name in on_path,
        )
        for s in steps
    )
    ticks = axis_ticks(span)
    drawn = {seg.kind for bar in bars for seg in bar.segments}
    kinds = tuple(k for k in SEGMENT_KINDS if k in drawn)
    return Timeline(start, end, bars, ticks, tuple(path), live, kinds)


def _step_status(step: dict[str, Any]) -> str:
    if step["status"] == "pending" and step["attempt"] > 0:
        return "retrying"
    return str(step["status"])


def load(conn: Conn, dag_run_id: uuid.UUID, *, now: datetime | None = None) -> Timeline | None:
    """The timeline of one DAG run, read in three indexed queries (its steps, their
    attempts, their edges); None when there is no such DAG run."""
    steps = conn.execute(
        query("dag_runs", "dag_run_step_times"), {"id": dag_run_id, "now": now}
    ).fetchall()
    if not steps:
        return None
    attempts = conn.execute(query("dag_runs", "dag_run_attempts"), {"id": dag_run_id}).fetchall()
    edges = conn.execute(query("dag_runs", "dag_run_edges"), {"id": dag_run_id}).fetchall()
    clock: datetime = steps[0]["read_at"]
    of_run: dict[int, list[AttemptTimes]] = {}
    for a in attempts:
        of_run.setdefault(a["run_id"], []).append(
            AttemptTimes(a["attempt"], a["outcome"], a["started_at"], a["finished_at"])
        )
    name_of = {s["id"]: str(s["dag_node"] or f"run {s['id']}") for s in steps}
    times = []
    for s in steps:
        own = of_run.get(s["id"], [])
        if s["status"] == "running" and s["started_at"] is not None:
            # the attempt under way is not in the history yet
            own = [a for a in own if a.attempt != s["attempt"]]
            own.append(AttemptTimes(s["attempt"], "running", s["started_at"], None))
        times.append(
            StepTimes(
                name_of[s["id"]], s["id"], _step_status(s), s["created_at"], own, s["finished_at"]
            )
        )
    pairs = [
        (name_of[e["depends_on"]], name_of[e["run_id"]])
        for e in edges
        if e["depends_on"] in name_of and e["run_id"] in name_of
    ]
    return timeline(times, pairs, now=clock)
