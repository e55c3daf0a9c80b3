"""Sparklines as server-drawn SVG (a series of counts becomes a polyline's points), and
short durations for statistics.

Registered as the Jinja filter `spark_points`; `templates/shared/_sparkline.html` draws
it with a text alternative (the numbers in words), so no chart library is needed.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.web.render import duration, env

WIDTH = 120
HEIGHT = 24


def spark_points(
    values: Sequence[float | int | None], width: int = WIDTH, height: int = HEIGHT
) -> str:
    """`"0.0,24.0 5.2,12.0 …"`: values scaled into a width x height box (missing = 0)."""
    numbers = [float(v or 0) for v in values]
    if not numbers:
        return ""
    top = max(numbers) or 1.0
    step = width / max(len(numbers) - 1, 1)
    pad = 1.0  # keep the stroke inside the box
    return " ".join(
        f"{i * step:.1f},{pad + (height - 2 * pad) * (1 - v / top):.1f}"
        for i, v in enumerate(numbers)
    )


def short_duration(seconds: float | None) -> str:
    """Like `duration`, with milliseconds under a second: `120 ms`, `3 s`."""
    if seconds is not None and seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    return duration(seconds)


env.filters.update(spark_points=spark_points, short_duration=short_duration)
