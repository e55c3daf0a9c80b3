"""Browser journeys sign in through the real form first."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.browser import sign_in_page
from tests.helpers.live import Start
from tests.helpers.people import make_user
from tests.helpers.processes import services


@pytest.fixture
def signed_in(live_server: str, db_url: str, page: Any) -> Callable[[str], Any]:
    """`signed_in("editor")`: the page, signed in as a new user with that role."""

    def as_role(role: str) -> Any:
        make_user(db_url, role, role)
        sign_in_page(page, live_server, role)
        return page

    return as_role


@pytest.fixture
def start(db_url: str, tmp_path: Path) -> Iterator[Start]:
    """`start("worker")`, `start("web", ...)`: Sundial's processes on the test's database,
    all stopped when the test ends."""
    with services(db_url, tmp_path) as start_service:
        yield start_service
