"""An admin adds a webhook channel on the Notifications page by its labels, adds a rule,
presses "Send a test", and sees the message in the channel's delivery log as delivered —
sent by a real reaper process to a real HTTP receiver. The pages pass axe-core at 1280 and
390 px; screenshots go to /tmp/shots/notifications."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from tests.helpers.browser import look_at_both_widths, sign_in_page
from tests.helpers.people import make_user
from tests.helpers.processes import services
from tests.helpers.receiver import receiver

SHOTS = Path("/tmp/shots/notifications")


def test_an_admin_adds_a_webhook_channel_and_a_rule_and_a_test_is_delivered(
    live_server: str, db_url: str, browser: Any, tmp_path: Path
) -> None:
    make_user(db_url, "ada", "admin")
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(20_000)
    with receiver() as hook, services(db_url, tmp_path) as start:
        start("reaper")
        try:
            sign_in_page(page, live_server, "ada")
            page.get_by_role("link", name="Notifications").click()
            page.wait_for_url("**/notifications")
            expect(page.get_by_text("No channels yet.")).to_be_visible()
            look_at_both_widths(page, SHOTS, "empty")

            page.get_by_label("Name", exact=True).fill("Team hook")
            page.get_by_label("Kind").select_option(label="Webhook (JSON POST)")
            page.get_by_label("Address (webhook, Slack or Apprise URL)").fill(hook.url)
            page.get_by_role("button", name="Add channel").click()
            page.wait_for_url("**done=channel_added**")
            expect(page.get_by_role("status")).to_contain_text("Channel saved.")
            channel = page.locator(".notify-channel", has_text="Team hook")
            expect(channel).to_contain_text("Webhook http://127.0.0.1")
            expect(channel).not_to_contain_text("/hook")  # the address is not shown again

            page.get_by_label("When").select_option(label="New dead letters")
            page.get_by_label("Tell").select_option(label="Team hook")
            page.get_by_role("button", name="Add rule").click()
            page.wait_for_url("**done=rule_added**")
            expect(page.get_by_role("table")).to_contain_text(
                "Tell Team hook when a new group of dead letters"
            )
            look_at_both_widths(page, SHOTS, "channel-and-rule")

            page.get_by_role("button", name="Send a test to Team hook").click()
            page.wait_for_url("**done=test_queued**")
            expect(page.get_by_role("status")).to_contain_text("Test message queued")
            log = page.locator("#delivery-log")
            # the log refreshes itself until the reaper has sent it
            expect(log.locator("tr", has_text="Test message")).to_contain_text(
                "Delivered", timeout=60_000
            )
            assert hook.count() == 1
            assert hook.posts[0].body["title"] == "Test message from Sundial"
            look_at_both_widths(page, SHOTS, "delivered")
        finally:
            context.close()


def test_an_operator_deletes_a_rule_after_confirming(
    live_server: str, db_url: str, signed_in: Any, conn: Any
) -> None:
    from app.notify import channels, rules

    hook = channels.create(conn, "k", name="Team hook", kind="webhook",
                           fields={"url": "https://example.com/hook"}, actor="t")  # fmt: skip
    rules.create(conn, channel_id=hook.id, event="breaker_open", actor="t")
    page = signed_in("operator")
    page.goto(live_server + "/notifications")
    expect(page.get_by_role("button", name="Add channel")).to_have_count(0)  # admins only
    row = page.locator("tr", has_text="Tell Team hook when a service")
    row.locator("summary").click()
    look_at_both_widths(page, SHOTS, "confirm-rule-delete")
    row.get_by_role("button", name="Yes, delete the rule").click()
    page.wait_for_url("**done=rule_deleted**")
    expect(page.get_by_role("status")).to_contain_text("Rule deleted.")
    expect(page.get_by_text("No rules yet.")).to_be_visible()
