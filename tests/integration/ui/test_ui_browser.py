"""The dashboard in a real browser (interfaces.md §6 tests): a live node on loopback with a seeded SQLite store
(the demo tenant, its running example Loops and demo goal, a Loop that holds its ack, a Loop with a hostile name,
a second group) and Debian's chromium driven through Playwright. One browser and one server for the module."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "api"))
from live_api import GUESTS, LiveApi, auth  # noqa: E402

from wakeful.api.demo import WEBHOOK_LOOP, DemoInfo, set_up_demo  # noqa: E402
from wakeful.api.routes_ui import sessions_of  # noqa: E402
from wakeful.control.demo import seed_demo_goal  # noqa: E402

pytestmark = pytest.mark.integration

XSS_NAME = "<img src=x onerror=window.__xss=1>"


@dataclass
class Seeded:
    api: LiveApi
    info: DemoInfo
    goal: dict[str, Any]
    held: str  # held_ack: acknowledges an event only when a "release" event names it
    hostile: str  # the Loop named XSS_NAME
    other_key: str  # a group key of another group

    def url(self, path: str) -> str:
        return self.api.url + path

    def post_event(self, loop_id: str, topic: str, payload: dict[str, Any]) -> str:
        resp = self.api.client.post(self.url(f"/v1/agent-groups/{self.info.group_id}/loops/{loop_id}/events"),
                                    headers=auth(self.info.keys["group"]), json={"topic": topic, "payload": payload})
        assert resp.status_code == 202, resp.text
        return str(resp.json()["event_id"])


async def _loop(h: Any, info: DemoInfo, name: str, source: str, entry: str, config: Any = None) -> str:
    report = await h.build(info.agent_id, {"sdk_version": 1, "entry": entry, "files": {entry: source}},
                           path=f"/loops/{entry}.elf")
    assert report.get("state") == "succeeded", report
    view = await h.create_loop(agent_id=info.agent_id, session_id=info.session_id, artifact=report["artifact"],
                               name=name, config=config)
    return str(view.get("id") or view["loop_id"])


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory, browser: Any) -> Iterator[Seeded]:
    data = tmp_path_factory.mktemp("ui-browser")
    with LiveApi(f"sqlite:///{data / 'wakeful.db'}", data / "data") as api:
        info = api.call(set_up_demo)
        goal = api.call(lambda h: seed_demo_goal(h, info.group_id, info.agent_id, info.loops[WEBHOOK_LOOP]))
        held = api.call(lambda h: _loop(h, info, "held_ack", (GUESTS / "held_ack.c").read_text(), "held_ack.c"))
        threshold = (Path(__import__("wakeful.sdk").sdk.__file__).parent / "examples" / "threshold_alert.c").read_text()
        hostile = api.call(lambda h: _loop(h, info, XSS_NAME, threshold, "threshold_alert.c", {"threshold": 90}))

        async def other_group(h: Any) -> str:
            group = await h.create_group("other")
            return str((await h.create_key("group", group_id=group.id))[1])

        yield Seeded(api, info, goal, held, hostile, api.call(other_group))


def login(context: Any, seeded: Seeded, key: str, path: str = "/ui/") -> Any:
    page = context.new_page()
    page.goto(seeded.url("/ui/login"))
    page.fill("[data-testid=login-key]", key)
    page.click("[data-testid=login-submit]")
    page.wait_for_selector("body[data-ready=yes]", state="attached")
    if path != "/ui/":
        page.goto(seeded.url(path))
        page.wait_for_selector("body[data-ready=yes]", state="attached")
    return page


def for_readme(page: Any, name: str) -> None:
    """With WAKEFUL_UI_SCREENSHOTS=<dir>, save the page for the README (docs/dashboard-*.png)."""
    folder = os.environ.get("WAKEFUL_UI_SCREENSHOTS")
    if folder:
        page.wait_for_timeout(300)  # let the last redraw settle before the picture (not an assertion)
        page.screenshot(path=str(Path(folder) / f"dashboard-{name}.png"), full_page=True)


def untagged(page: Any) -> list[str]:
    """Rows, badges, buttons and list items without a data-testid (interfaces.md §6: every one carries one)."""
    return list(page.evaluate("""() => Array.from(document.querySelectorAll('tr, .badge, button, main li'))
        .filter((n) => !n.dataset.testid).map((n) => n.tagName + ' ' + n.textContent.slice(0, 40))"""))


def tid(value: str) -> str:
    return f'[data-testid="{value}"]'


def test_login_with_a_key_and_with_the_demo_link(context: Any, browser: Any, seeded: Seeded) -> None:
    from playwright.sync_api import expect

    page = login(context, seeded, seeded.info.keys["group"])
    expect(page.locator(tid("whoami"))).to_contain_text("group key")
    expect(page.locator(tid("tile-loops-value"))).to_have_text("5")  # 3 demo Loops, held_ack, the hostile name
    expect(page.locator(tid("nodes"))).to_contain_text("admin keys")  # nodes need an admin key
    code = sessions_of(seeded.api.server.config.app).issue_code(seeded.info.keys["admin"])
    fresh = browser.new_context()
    try:
        link = fresh.new_page()
        link.goto(seeded.url(f"/ui/login?code={code}"))
        link.wait_for_selector("body[data-ready=yes]", state="attached")
        assert link.url == seeded.url("/ui/")
        expect(link.locator(tid("whoami"))).to_contain_text("admin key")
        expect(link.locator('[data-testid^="node-row-"]')).to_have_count(1)
        again = fresh.new_page()  # single use: the same link no longer signs anyone in
        again.context.clear_cookies()
        again.goto(seeded.url(f"/ui/login?code={code}"))
        expect(again.locator(tid("login-error"))).to_contain_text("used or expired")
    finally:
        fresh.close()


def test_intake_post_shows_a_pending_event_that_clears_after_the_ack(context: Any, seeded: Seeded) -> None:
    from playwright.sync_api import expect

    page = login(context, seeded, seeded.info.keys["group"], "/ui/loops")
    pending = page.locator(tid(f"loop-pending-{seeded.held}"))
    expect(pending).to_have_text("0")
    event_id = seeded.post_event(seeded.held, "work", {"n": 1})
    expect(pending).to_have_text("1")  # the table redraws every 2 s
    seeded.post_event(seeded.held, "release", {"event_id": event_id})
    expect(pending).to_have_text("0")
    # the Loop page's discard button settles a held event (a state-changing call with the CSRF header)
    held = seeded.post_event(seeded.held, "work", {"n": 2})
    page.click(tid(f"loop-link-{seeded.held}"))
    expect(page.locator(tid(f"event-status-{held}"))).to_have_text("pending")
    page.click(tid(f"event-discard-{held}"))
    expect(page.locator(tid(f"event-status-{held}"))).to_have_text("discarded")


def test_loop_page_shows_log_lines_and_events(context: Any, seeded: Seeded) -> None:
    from playwright.sync_api import expect

    loop_id = seeded.info.loops[WEBHOOK_LOOP]
    event_id = seeded.post_event(loop_id, "metric", {"name": "cpu", "value": 97})
    page = login(context, seeded, seeded.info.keys["group"], f"/ui/loops/{loop_id}")
    expect(page.locator(tid("loop-name"))).to_have_text(WEBHOOK_LOOP)
    expect(page.locator(tid("loop-artifact"))).to_contain_text("sha256:")
    expect(page.locator(tid("config-json"))).to_contain_text('"threshold": 90')
    row = page.locator(tid(f"event-row-{event_id}"))
    expect(row).to_contain_text("metric")
    page.click(tid(f"event-expand-{event_id}"))
    expect(page.locator(tid(f"event-payload-{event_id}"))).to_contain_text('"value": 97')
    for_readme(page, "loop")
    assert untagged(page) == []
    page.select_option(tid("events-status"), "pending")  # the tab's status filter asks the API for pending only
    expect(page.locator(tid("events-empty"))).to_be_visible()
    page.select_option(tid("events-status"), "acked")
    expect(row).to_contain_text("acked")
    page.click(tid("tab-logs"))
    expect(page.locator(tid("logs"))).to_contain_text("cpu is 97, above 90")
    page.click(tid("tab-wakes"))
    expect(page.locator('[data-testid^="wake-row-"]').filter(has_text="cpu is 97")).to_have_count(1)
    assert page.locator(tid("timeline")).locator("circle.event").count() >= 1
    expect(page.locator(tid("wake-gauge"))).to_contain_text("/6")


def test_a_wake_appears_live_on_the_session_page_and_is_marked_handled(context: Any, seeded: Seeded) -> None:
    from playwright.sync_api import expect

    page = login(context, seeded, seeded.info.keys["agent"], f"/ui/sessions/{seeded.info.session_id}")
    page.wait_for_selector("[data-live=yes]", state="attached")  # the SSE stream is open
    seeded.post_event(seeded.info.loops[WEBHOOK_LOOP], "metric", {"name": "cpu", "value": 50})  # back below first:
    seeded.post_event(seeded.info.loops[WEBHOOK_LOOP], "metric", {"name": "cpu", "value": 96})  # it wakes on crossing
    row = page.locator('[data-testid^="message-row-"]').filter(has_text="cpu is 96, above 90")
    expect(row).to_have_count(1)
    expect(row.locator('[data-testid^="message-handled-"]')).to_have_text("new")
    assert untagged(page) == []
    row.locator('[data-testid^="handle-"]').click()
    expect(row.locator('[data-testid^="message-handled-"]')).to_have_text("handled")


def test_pause_and_resume_change_the_badge(context: Any, seeded: Seeded) -> None:
    from playwright.sync_api import expect

    loop_id = seeded.info.loops["batch_summary"]
    page = login(context, seeded, seeded.info.keys["group"], "/ui/loops")
    badge = page.locator(tid(f"loop-state-{loop_id}"))
    expect(badge).to_have_text("active")
    assert untagged(page) == []
    page.click(tid(f"pause-{loop_id}"))
    expect(badge).to_have_text("paused · manual")
    page.click(tid(f"resume-{loop_id}"))
    expect(badge).to_have_text("active")


def test_goal_board_columns_and_a_gate_approval_moves_its_target(context: Any, seeded: Seeded) -> None:
    from playwright.sync_api import expect

    goal = seeded.goal
    page = login(context, seeded, seeded.info.keys["group"], "/ui/goals")
    expect(page.locator(tid(f"goal-needs-person-{goal['goal_id']}"))).to_have_text("1")
    page.click(tid(f"goal-link-{goal['goal_id']}"))
    page.wait_for_selector(tid("board"))
    expect(page.locator(tid("column-open-claimed")).locator(tid(f"item-{goal['monitor']}"))).to_be_visible()
    expect(page.locator(tid(f"holder-{goal['monitor']}"))).to_contain_text("loop:")
    expect(page.locator(tid("column-open-gated")).locator(tid(f"item-{goal['gate']}"))).to_be_visible()
    expect(page.locator(tid(f"missing-{goal['release']}"))).to_be_visible()
    assert untagged(page) == []
    page.click(tid(f"gate-approve-{goal['gate']}"))
    expect(page.locator(tid("column-done")).locator(tid(f"item-{goal['gate']}"))).to_be_visible()
    expect(page.locator(tid(f"missing-{goal['release']}"))).to_have_count(0)  # its target no longer waits on it
    expect(page.locator(tid("needs-person-empty"))).to_be_visible()


def test_an_agent_sees_no_gate_buttons_and_another_group_cannot_open_the_loop(context: Any, seeded: Seeded) -> None:
    from playwright.sync_api import expect

    loop_id = seeded.info.loops["heartbeat"]
    page = login(context, seeded, seeded.other_key, f"/ui/loops/{loop_id}")
    expect(page.locator(tid("not-found"))).to_be_visible()
    direct = page.request.get(seeded.url(f"/v1/agent-groups/{seeded.info.group_id}/loops/{loop_id}"))
    assert direct.status == 404  # the cookie is the other group's key: outside its scope
    agent = login(context.browser.new_context(), seeded, seeded.info.keys["agent"], f"/ui/goals/{seeded.goal['goal_id']}")
    try:
        agent.wait_for_selector(tid("board"))
        assert agent.locator('[data-testid^="gate-approve-"]').count() == 0
    finally:
        agent.context.close()


def test_a_hostile_loop_name_shows_as_text(context: Any, seeded: Seeded) -> None:
    from playwright.sync_api import expect

    page = login(context, seeded, seeded.info.keys["group"], "/ui/loops")
    link = page.locator(tid(f"loop-link-{seeded.hostile}"))
    expect(link).to_have_text(XSS_NAME)
    assert page.locator("main img").count() == 0
    link.click()
    expect(page.locator(tid("loop-name"))).to_have_text(XSS_NAME)
    assert page.evaluate("() => window.__xss") is None
    assert page.locator("main img").count() == 0


def test_csrf_less_posts_with_the_cookie_are_refused(context: Any, seeded: Seeded) -> None:
    loop_id = seeded.info.loops["heartbeat"]
    page = login(context, seeded, seeded.info.keys["group"], "/ui/loops")
    pause = f"/v1/agent-groups/{seeded.info.group_id}/loops/{loop_id}/pause"
    status = page.evaluate("async (p) => { const r = await fetch(p, {method: 'POST'}); return [r.status, (await r.json()).error]; }", pause)
    assert status == [403, "csrf_required"]
    view = seeded.api.client.get(seeded.url(f"/v1/agent-groups/{seeded.info.group_id}/loops/{loop_id}"),
                                 headers=auth(seeded.info.keys["group"])).json()
    assert view["state"] == "active"


def test_overview_counts_and_draws_the_wakes_of_the_last_hour(context: Any, seeded: Seeded) -> None:
    from playwright.sync_api import expect

    wakes = seeded.api.client.get(seeded.url(f"/v1/agent-groups/{seeded.info.group_id}/sessions/"
                                             f"{seeded.info.session_id}/messages"),
                                  headers=auth(seeded.info.keys["agent"])).json()["items"]
    sent = len([m for m in wakes if m["kind"] == "loop"])
    assert sent >= 2  # the earlier tests of this module made wakes (a held-ack work event, threshold crossings)
    page = login(context, seeded, seeded.info.keys["admin"])
    expect(page.locator(tid("tile-wakes-value"))).to_have_text(str(sent))
    bars = page.locator(tid("wakes-per-hour")).locator("rect.bar")
    expect(bars).to_have_count(24)
    assert bars.nth(23).get_attribute("data-count") == str(sent)  # this hour's bar
    expect(page.locator(tid("state-count-active"))).to_have_text("active: 5")
    for_readme(page, "overview")


def test_api_docs_render_from_this_server_alone(context: Any, seeded: Seeded) -> None:
    """/docs and /redoc draw the operations with every request going to this server (a machine without internet)."""
    elsewhere: list[str] = []

    def only_here(route: Any) -> None:
        if route.request.url.startswith(seeded.api.url):
            route.continue_()
        else:
            elsewhere.append(route.request.url)
            route.abort()

    context.route("**/*", only_here)
    page = context.new_page()
    page.goto(seeded.url("/docs"))
    page.wait_for_selector(".swagger-ui .opblock")
    assert page.locator(".swagger-ui .authorization__btn").count() > 1  # the bearer lock on keyed operations
    page.goto(seeded.url("/redoc"))
    page.wait_for_selector("redoc [role=search], redoc .menu-content")
    page.wait_for_load_state("networkidle")
    assert elsewhere == []
