"""Driving the dashboard in a real browser as a person would."""

from __future__ import annotations

from typing import Any

from tests.helpers.people import PASSWORD


def sign_in_page(page: Any, base: str, name: str) -> None:
    page.goto(base + "/login")
    page.get_by_label("User name").fill(name)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(base + "/")
