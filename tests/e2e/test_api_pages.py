"""An admin creates an API token in a real browser (shown once), uses it, revokes it;
the tokens page and the API reference pass axe-core and are photographed at 1280 and
390 px (to /tmp/shots, for a person to look at)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from playwright.sync_api import expect

from tests.helpers.api_client import request
from tests.helpers.axe import SHOTS, violations
from tests.helpers.browser import sign_in_page
from tests.helpers.people import make_user
from tests.helpers.processes import query


def test_an_admin_creates_uses_and_revokes_a_token(
    live_server: str, db_url: str, signed_in: Callable[[str], Any]
) -> None:
    make_user(db_url, "billing-bot", "operator")
    page = signed_in("admin")
    page.get_by_role("link", name="API tokens").click()
    page.get_by_label("What uses it").fill("billing service")
    page.get_by_label("Acts as user").select_option("billing-bot")
    page.get_by_label("Scope").select_option("write")
    page.get_by_role("button", name="Create token").click()
    secret = page.locator("#new-token").inner_text()
    assert secret.startswith("sundial_")
    assert request(live_server, "POST", "/api/v1/runs", secret, {"handler": "noop"}).status == 201
    page.goto(live_server + "/tokens")
    assert page.locator("#new-token").count() == 0  # shown once
    row = page.locator("tbody tr", has_text="billing service")
    assert "active" in row.inner_text() and secret[:14] in row.inner_text()
    page.evaluate("window.stayedOnThePage = true")
    row.get_by_role("button", name="Revoke token billing service").click()
    # the row changes in place and a message says what happened; the page is not reloaded
    expect(page.locator("tbody tr", has_text="billing service")).to_contain_text("revoked")
    expect(page.get_by_role("status").filter(has_text="Token revoked")).to_be_visible()
    assert page.evaluate("window.stayedOnThePage === true")
    assert request(live_server, "GET", "/api/v1/runs", secret).status == 401
    actions = [r["action"] for r in query(db_url, "SELECT action FROM audit_log ORDER BY id")]
    assert actions[-2:] == ["token.create", "token.revoke"]


def test_a_wrong_token_form_says_what_to_fix_and_only_admins_see_the_page(
    live_server: str, db_url: str, signed_in: Callable[[str], Any]
) -> None:
    page = signed_in("admin")
    page.goto(live_server + "/tokens")
    page.get_by_label("What uses it").fill("x")
    page.get_by_label("Acts as user").select_option("admin")
    page.evaluate("document.getElementById('token-user').options[1].value = 'ghost'")
    page.get_by_label("Acts as user").select_option("ghost")
    page.get_by_role("button", name="Create token").click()
    assert "no user named 'ghost'" in page.locator("#user-error").inner_text()
    assert query(db_url, "SELECT count(*) AS n FROM api_tokens")[0]["n"] == 0
    make_user(db_url, "ed", "editor")
    page.get_by_role("button", name="Sign out").click()
    sign_in_page(page, live_server, "ed")
    assert page.get_by_role("link", name="API tokens").count() == 0
    assert page.goto(live_server + "/tokens").status == 403


def test_tokens_and_reference_pages_pass_axe_and_are_photographed(
    live_server: str, db_url: str, browser: Any
) -> None:
    make_user(db_url, "admin", "admin")
    make_user(db_url, "reporter", "viewer")
    SHOTS.mkdir(exist_ok=True)
    problems: dict[str, list[str]] = {}
    for width in (1280, 390):
        context = browser.new_context(viewport={"width": width, "height": 900}, bypass_csp=True)
        page = context.new_page()
        page.set_default_timeout(10_000)
        sign_in_page(page, live_server, "admin")
        page.goto(live_server + "/tokens")
        page.get_by_label("What uses it").fill(f"dashboards-{width}")
        page.get_by_label("Acts as user").select_option("reporter")
        page.get_by_role("button", name="Create token").click()
        for name in ("tokens-created", "api-docs"):
            if name == "api-docs":
                page.goto(live_server + "/api/v1/docs")
            # a full-page shot of the long reference page takes seconds on a busy machine
            page.screenshot(path=str(SHOTS / f"{name}-{width}.png"), full_page=True, timeout=60_000)
            found = violations(page)
            if found:
                problems[f"{name}@{width}"] = found
        context.close()
    assert problems == {}
