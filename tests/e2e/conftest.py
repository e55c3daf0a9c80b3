"""Browser journeys sign in through the real form first."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.web.conftest import PASSWORD, make_user


def sign_in_page(page: Any, base: str, name: str) -> None:
    page.goto(base + "/login")
    page.get_by_label("User name").fill(name)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(base + "/")


@pytest.fixture
def signed_in(live_server: str, db_url: str, page: Any) -> Callable[[str], Any]:
    """`signed_in("editor")`: the page, signed in as a new user with that role."""

    def as_role(role: str) -> Any:
        make_user(db_url, role, role)
        sign_in_page(page, live_server, role)
        return page

    return as_role
