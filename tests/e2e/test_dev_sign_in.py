"""`sundial dev` prints a one-time link that lands a browser on the dashboard, signed in."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path
from typing import Any

from tests.helpers.commands import free_port, start_dev, sundial_env, wait_for_http
from tests.helpers.processes import wait_until

LINK = re.compile(r"Sign in as the local admin \(once, within 15 minutes\): (\S+)")


def test_the_printed_link_signs_the_local_admin_in_once(
    db_url: str, tmp_path: Path, page: Any
) -> None:
    port = free_port()
    log_path = tmp_path / "dev.log"
    proc = start_dev(sundial_env(db_url), port, log_path)
    try:
        wait_for_http(f"http://127.0.0.1:{port}/healthz", timeout=30, proc=proc)
        wait_until(lambda: LINK.search(log_path.read_text()) is not None, "sign-in link printed")
        match = LINK.search(log_path.read_text())
        assert match
        link = match[1].replace("localhost", "127.0.0.1")
        page.goto(link)
        assert page.title() == "Overview · Sundial"
        assert "admin (admin)" in page.locator(".who").inner_text()
        # Leave the live overview first: signed out, its next update would send it to the
        # sign-in page, racing the navigation below.
        page.goto("about:blank")
        page.context.clear_cookies()
        page.goto(link)
        assert "already used or has expired" in page.content()
    except AssertionError:
        print(log_path.read_text())
        raise
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(30)
