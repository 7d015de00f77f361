"""The Slack stand-in's page in a real browser: a person types /backfill, switches to an owner,
approves in Slack's confirm dialog and watches the status reach Succeeded as the bot edits it;
an alert's Approve backfill; the demo's control panel; ephemerals and the App Home tab."""

from __future__ import annotations

import re
from datetime import date

from playwright.async_api import Page, expect

from standins.demo.run import Demo
from tests.browser.support import Shots

SUCCEEDED = re.compile(r"Succeeded · backfill of")  # the status message's headline (has_text
# alone would match any "succeeded", case aside)
SLOW = 60_000  # ms: a whole backfill on the Airflow stand-in, on a loaded 2-core machine


async def act_as(page: Page, user_id: str) -> None:
    await page.select_option("#as-user", user_id)


async def open_channel(page: Page, channel_id: str) -> None:
    await page.locator(f'a.conversation[data-channel="{channel_id}"]').click()


async def test_a_typed_backfill_is_approved_by_an_owner_and_succeeds(
    page: Page, demo: Demo, shots: Shots
) -> None:
    await expect(page.locator("main#channel h1")).to_contain_text("backfill")
    composer = page.locator("textarea#composer")
    await composer.fill("/backfill example.etl_orders 2021-06-04..2021-06-06")
    await composer.press("Enter")
    preview = page.locator("main#channel article.message").filter(has_text="Backfill plan")
    await expect(preview).to_have_count(1, timeout=SLOW)
    await expect(preview.get_by_role("button", name="Approve", exact=True)).to_be_visible()
    await shots.take("preview")

    await act_as(page, "U0ALICE001")  # alice, of the orders team that owns the DAG
    await preview.get_by_role("button", name="Approve", exact=True).click()
    dialog = page.locator("dialog#confirm")
    await expect(dialog).to_be_visible()
    await expect(dialog).to_contain_text("Start this backfill?")
    await shots.take("confirm")
    await dialog.get_by_role("button", name="Start backfill").click()

    status = page.locator("main#channel article.message").filter(has_text="backfill of")
    await expect(status.filter(has_text=SUCCEEDED)).to_have_count(1, timeout=SLOW)
    await shots.take("succeeded")
    await status.locator("button.replies").click()
    thread = page.locator("aside#thread")
    await expect(thread).to_be_visible()
    await expect(thread).to_contain_text("Backfill succeeded", timeout=SLOW)
    await expect(thread).to_contain_text("example.etl_orders")
    await shots.take("thread")
    # rendered, not raw: no mrkdwn markers or shortcodes left in the status message
    shown = await status.first.inner_text()
    assert ":large_green_circle:" not in shown
    assert "*Succeeded*" not in shown
    assert "🟢" in shown


async def test_approve_backfill_in_an_alert_from_the_control_panel_failure(
    page: Page, demo: Demo, shots: Shots
) -> None:
    panel = page.locator("section#demo-panel")
    await expect(panel).to_be_visible()
    await page.fill("#fail-start", "2021-06-04")
    await page.fill("#fail-end", "2021-06-06")
    await panel.get_by_role("button", name="Fail these dates").click()
    await expect(panel).to_contain_text("failed for 2021-06-04..2021-06-06")
    assert demo.world.failed == {date(2021, 6, d) for d in (4, 5, 6)}

    await act_as(page, "U0ALICE001")
    await open_channel(page, "C0ORDERS01")
    alert = page.locator("main#channel article.message").filter(has_text="failed for 2021-06-04")
    await expect(alert).to_have_count(1, timeout=SLOW)
    # the alert's text changes as it resolves: follow it by its ts from here on
    alert = page.locator(
        f'main#channel article.message[data-ts="{await alert.get_attribute("data-ts")}"]'
    )
    await shots.take("alert")
    await alert.get_by_role("button", name="Approve backfill").click()
    dialog = page.locator("dialog#confirm")
    await expect(dialog).to_contain_text("Start this backfill?")
    await dialog.get_by_role("button", name="Approve and start").click()
    # the orders rule asks for a second person: alice is told so, only she sees it
    note = page.locator("main#channel article.message.ephemeral")
    await expect(note.filter(has_text="second person")).to_have_count(1, timeout=SLOW)
    await shots.take("second-person")

    await act_as(page, "U0PAT00001")  # pat, of the data platform approvers
    await expect(note.filter(has_text="second person")).to_have_count(0)
    await alert.locator("button.replies").click()
    thread = page.locator("aside#thread")
    plan = thread.locator("article.message").filter(has_text="Backfill plan")
    await plan.get_by_role("button", name="Approve", exact=True).click()
    await page.locator("dialog#confirm").get_by_role("button", name="Start backfill").click()
    await expect(thread.locator("article.message").filter(has_text=SUCCEEDED)).to_have_count(
        1, timeout=SLOW
    )
    # Airflow's reruns reach the bot as OpenLineage events: the alert resolves by itself
    await expect(alert).to_contain_text("now resolved", timeout=SLOW)
    await expect(panel).to_contain_text("Failed dates none")  # rerun: no longer failing
    await shots.take("resolved")

    await page.locator("section#demo-panel").get_by_role("button", name="+1 day").click()
    await expect(panel).to_contain_text("SLA clock: 2021-06-08 03:00 UTC")
    await open_channel(page, "C0ANALYT01")
    await expect(page.locator("main#channel")).to_contain_text(
        "Weekly KPIs will be late", timeout=SLOW
    )
    await shots.take("sla-miss")


async def test_help_is_an_ephemeral_and_the_home_tab_opens(
    page: Page, demo: Demo, shots: Shots
) -> None:
    composer = page.locator("textarea#composer")
    await composer.fill("/backfill help")
    await composer.press("Enter")
    mine = page.locator("main#channel article.message.ephemeral")
    await expect(mine.first).to_contain_text("Only visible to you", timeout=SLOW)
    await act_as(page, "U0BOB00001")  # someone else does not see it
    await expect(mine).to_have_count(0)

    await page.locator("a.conversation[data-home]").click()
    home = page.locator("section#home")
    await expect(home).to_be_visible()
    # bob is in the logistics team: the bot's Home tab says so, rendered from its blocks
    await expect(home).to_contain_text("Your teams: logistics", timeout=SLOW)
    await shots.take("home")

    await open_channel(page, "C0BACKFILL")
    await composer.fill("/nosuchcommand")
    await composer.press("Enter")
    await expect(page.locator(".local-error")).to_contain_text("not a valid command")


async def test_hostile_text_from_outside_is_shown_as_text_never_run(
    page: Page, demo: Demo, shots: Shots
) -> None:
    # What a DAG id or an error message could carry, as the bot would post it (escaped
    # mrkdwn), plus links Slack itself would never make clickable.
    hostile = (
        "&lt;img src=x onerror=window.__pwned=1&gt; <javascript:window.__pwned=2|click me> "
        "<data:text/html,hi|data link> <https://example.com/ok|fine link> "
        "&lt;script&gt;window.__pwned=3&lt;/script&gt;"
    )
    blocks = [
        {"type": "header", "text": {"type": "plain_text", "text": "<b>not bold</b>"}},
        {"type": "section", "text": {"type": "mrkdwn", "text": hostile}},
    ]
    demo.slack.state.post("C0BACKFILL", text="hostile", blocks=blocks)
    message = page.locator("main#channel article.message").filter(has_text="not bold")
    await expect(message).to_have_count(1)
    await expect(message).to_contain_text("<b>not bold</b>")
    await expect(message).to_contain_text("<img src=x onerror=window.__pwned=1>")
    await expect(message).to_contain_text("<script>window.__pwned=3</script>")
    assert await message.locator("img, script, b").count() == 0
    hrefs = await message.locator("a").evaluate_all("links => links.map(a => a.href)")
    assert hrefs == ["https://example.com/ok"]
    assert await page.evaluate("window.__pwned") is None
    await shots.take("hostile")
