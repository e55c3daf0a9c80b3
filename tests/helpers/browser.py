"""Driving the dashboard in a real browser as a person would."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.helpers.axe import violations_with_axe
from tests.helpers.people import PASSWORD

# The elements wider than the page, to name in a failure
WIDER_THAN_THE_PAGE = """() => [...document.querySelectorAll('body *')]
    .filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1)
    .slice(0, 5).map(e => e.tagName + ' ' + (e.textContent || '').slice(0, 40))"""


def sign_in_page(page: Any, base: str, name: str) -> None:
    page.goto(base + "/login")
    page.get_by_label("User name").fill(name)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(base + "/")


def look_at_both_widths(page: Any, shots: Path, name: str) -> None:
    """At 1280 and 390 px: a screenshot in `shots`, no sideways scrolling, no serious axe
    finding; the page is left at 1280 px."""
    shots.mkdir(parents=True, exist_ok=True)
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=str(shots / f"{name}-{width}.png"), full_page=True)
        overflow = page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        wide = page.evaluate(WIDER_THAN_THE_PAGE) if overflow > 1 else []
        assert overflow <= 1, f"{name} is {overflow} px too wide at {width} px: {wide}"
        assert violations_with_axe(page) == [], (name, width)
    page.set_viewport_size({"width": 1280, "height": 900})
