"""Server-rendered SVG charts: geometry computed here, drawn by templates (no script).

chart = line_chart(minutes, {"p50": [...], "p99": [...]}, start, end)
chart.lines["p99"]  # "x1,y1 x2,y2 ..." for a <polyline points>
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

WIDTH, HEIGHT = 720, 200
PAD_LEFT, PAD_BOTTOM, PAD_TOP = 44, 20, 8


@dataclass(frozen=True, slots=True)
class Tick:
    position: float
    label: str


@dataclass(frozen=True, slots=True)
class LineChart:
    width: int
    height: int
    lines: dict[str, str]  # series name -> polyline points
    dots: dict[str, list[tuple[float, float]]]  # the same points, drawn (one alone shows)
    y_ticks: list[Tick]
    x_ticks: list[Tick]
    empty: bool
    plot_left: int = PAD_LEFT
    plot_bottom: int = HEIGHT - PAD_BOTTOM
    last: dict[str, float | None] = field(default_factory=dict)
    # Each series' line cut where its points are further apart than the chart's `gap`
    # (no data between them): one polyline per piece.
    pieces: dict[str, list[str]] = field(default_factory=dict)


def nice_ceiling(value: float) -> float:
    """The next 1, 2 or 5 times a power of ten at or above `value` (axes read easily)."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if value <= step * power:
            return float(step * power)
    return float(10 * power)


def seconds_label(value: float) -> str:
    if value >= 60:
        return f"{value / 60:g} min"
    if value >= 1 or value == 0:
        return f"{value:g} s"
    return f"{value * 1000:g} ms"


def line_chart(
    points: list[tuple[datetime, dict[str, float | None]]],
    series: list[str],
    start: datetime,
    end: datetime,
    before_end: Callable[[float], str] | None = None,
    gap: timedelta | None = None,
) -> LineChart:
    """Lines of `series` over time from `start` to `end`; values are seconds. The time
    axis says how long before the end each tick is: `-15 min` unless `before_end` turns
    those seconds into words. With `gap`, `pieces` cuts each line where two of its points
    are more than `gap` apart."""
    span = max((end - start).total_seconds(), 1.0)
    values = [v for _, row in points for s in series if (v := row.get(s)) is not None]
    top = nice_ceiling(max(values, default=0.0))
    plot_w = WIDTH - PAD_LEFT - 4
    plot_h = HEIGHT - PAD_BOTTOM - PAD_TOP

    def x(at: datetime) -> float:
        return PAD_LEFT + plot_w * min(max((at - start).total_seconds() / span, 0.0), 1.0)

    def y(value: float) -> float:
        return PAD_TOP + plot_h * (1 - min(value / top, 1.0))

    dots = {
        s: [
            (round(x(at), 1), round(y(v), 1)) for at, row in points if (v := row.get(s)) is not None
        ]
        for s in series
    }
    lines = {s: " ".join(f"{px},{py}" for px, py in dots[s]) for s in series}
    pieces: dict[str, list[str]] = {}
    for s in series:
        times = [at for at, row in points if row.get(s) is not None]
        cuts: list[list[tuple[float, float]]] = []
        for i, dot in enumerate(dots[s]):
            if not cuts or (gap is not None and times[i] - times[i - 1] > gap):
                cuts.append([])
            cuts[-1].append(dot)
        pieces[s] = [" ".join(f"{px},{py}" for px, py in cut) for cut in cuts]
    y_ticks = [Tick(y(top * f), seconds_label(top * f)) for f in (0.0, 0.5, 1.0)]
    minutes = span / 60

    def label(f: float) -> str:
        if f >= 1:
            return "now"
        if before_end is not None:
            return before_end(span * (1 - f))
        return f"-{round(minutes * (1 - f))} min"

    x_ticks = [Tick(PAD_LEFT + plot_w * f, label(f)) for f in (0.0, 0.25, 0.5, 0.75, 1.0)]
    last = {
        s: next((r[s] for _, r in reversed(points) if r.get(s) is not None), None) for s in series
    }
    return LineChart(
        WIDTH, HEIGHT, lines, dots, y_ticks, x_ticks, not values, last=last, pieces=pieces
    )
