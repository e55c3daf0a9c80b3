"""Every page a person can open answers odd query parameters, path segments and cookies
with a page or a 4xx, never a 5xx: the same rules as the API and the CLI hold at the doors
people reach by hand-editing an address."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable

from starlette.routing import Route
from starlette.testclient import TestClient

ODD_VALUES = ("-1", "99999999999999999999", "\x00", "\uff11\uff12", "x" * 3000)  # fullwidth 12
PARAMETERS = ("limit", "before", "after", "page", "zone", "week", "q", "from", "to", "status",
              "job", "schedule", "dag_run", "hours", "days", "actor")  # fmt: skip
ODD_SEGMENTS = ("99999999999999999999", "%00", "x" * 3000, "%EF%BC%91%EF%BC%92", "-1", "0",
                "00000000-0000-0000-0000-000000000000")  # fmt: skip
ODD_COOKIES = (("sundial_zone", "x" * 3000), ("sundial_zone", "../../etc"),
               ("sundial_zone", "%00"), ("sundial_session", "garbage"))  # fmt: skip
STREAMS = ("/api", "/events")  # the API has its own schema test; /events never ends


def pages(client: TestClient, templated: bool) -> list[str]:
    return sorted(
        r.path
        for r in client.app.routes  # type: ignore[attr-defined]
        if isinstance(r, Route)
        and "GET" in (r.methods or ())
        and ("{" in r.path) == templated
        and not r.path.startswith(STREAMS)
    )


def test_odd_query_parameters_and_cookies_never_cost_a_server_error(
    as_role: Callable[[str], TestClient],
) -> None:
    client = as_role("admin")
    failed: list[tuple[str, ...]] = []
    for path in pages(client, templated=False):
        for name, value in itertools.product(PARAMETERS, ODD_VALUES):
            status = client.get(path, params={name: value}).status_code
            if status >= 500:
                failed.append((path, name, value[:20], str(status)))
    for cookie in ODD_COOKIES:
        client.cookies.set(*cookie)
        failed += [(p, *cookie) for p in pages(client, False) if client.get(p).status_code >= 500]
    assert failed == []


def test_odd_path_segments_never_cost_a_server_error(
    as_role: Callable[[str], TestClient],
) -> None:
    client = as_role("admin")
    failed = []
    for path, segment in itertools.product(pages(client, templated=True), ODD_SEGMENTS):
        url = re.sub(r"{[^}]+}", segment, path)
        status = client.get(url).status_code
        if status >= 500:
            failed.append((url[:80], status))
    assert failed == []
