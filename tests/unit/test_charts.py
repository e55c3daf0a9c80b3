"""Server-drawn line charts (app.web.charts): axis words and lines that stop where the
data stops."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.web.charts import line_chart

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def test_lines_are_cut_where_points_are_further_apart_than_the_gap() -> None:
    hours = [0, 1, 2, 5, 6, 9]
    points = [(T0 + timedelta(hours=h), {"p50": float(h + 1)}) for h in hours]
    chart = line_chart(points, ["p50"], T0, T0 + timedelta(hours=10), gap=timedelta(hours=1))
    assert [len(piece.split()) for piece in chart.pieces["p50"]] == [3, 2, 1]
    assert " ".join(chart.pieces["p50"]) == chart.lines["p50"]
    whole = line_chart(points, ["p50"], T0, T0 + timedelta(hours=10))
    assert whole.pieces["p50"] == [whole.lines["p50"]]  # no gap given: one line
    assert line_chart([], ["p50"], T0, T0 + timedelta(hours=1)).pieces == {"p50": []}


def test_the_time_axis_speaks_minutes_unless_told_otherwise() -> None:
    hour = line_chart([], ["p50"], T0, T0 + timedelta(hours=1))
    assert [t.label for t in hour.x_ticks] == ["-60 min", "-45 min", "-30 min", "-15 min", "now"]
    week = line_chart([], ["p50"], T0, T0 + timedelta(days=8),
                      before_end=lambda s: f"-{s / 86400:g} d")  # fmt: skip
    assert [t.label for t in week.x_ticks] == ["-8 d", "-6 d", "-4 d", "-2 d", "now"]
