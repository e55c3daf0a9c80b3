"""Sparklines as server-drawn SVG: a series of counts becomes a polyline's points.

Registered as the Jinja filter `spark_points`; `templates/shared/_sparkline.html` draws
it with a text alternative (the numbers in words), so no chart library is needed.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.web.render import env

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


env.filters["spark_points"] = spark_points
