"""Dashboard login and authority over plain HTTP (interfaces.md §6; docs/decisions-ui.md): the key form and the
one-time code set an HttpOnly, SameSite=Strict session cookie; the cookie stands for the key's principal on the
JSON API; a state-changing request with the cookie needs the session's CSRF header and this origin; --no-ui and
ui.enabled = false leave /ui/ unserved; /docs and /redoc load only from this server."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "api"))
from live_api import LiveApi, ServeProcess, auth, tenant  # noqa: E402

from wakeful.api.routes_ui import sessions_of  # noqa: E402
from wakeful.harness.config import UiSettings  # noqa: E402

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveApi]:
    data = tmp_path_factory.mktemp("ui-login")
    with LiveApi(f"sqlite:///{data / 'wakeful.db'}", data / "data") as api:
        api.tenant = api.call(tenant)  # type: ignore[attr-defined]
        yield api


def _client(live: LiveApi) -> httpx.Client:
    return httpx.Client(base_url=live.url, timeout=30, follow_redirects=False)


def _login(c: httpx.Client, key: str) -> dict[str, str]:
    """Sign in with a key; the session's CSRF token."""
    resp = c.post("/ui/login", content=f"key={key}", headers={"content-type": "application/x-www-form-urlencoded"})
    assert resp.status_code == 303 and resp.headers["location"] == "/ui/", resp.text
    return dict(c.get("/ui/session").json())


def test_key_login_sets_a_strict_httponly_session_cookie(live: LiveApi) -> None:
    t = live.tenant  # type: ignore[attr-defined]
    with _client(live) as c:
        assert c.get("/ui/session").status_code == 401
        bad = c.post("/ui/login", content="key=wk_nope_nope", headers={"content-type": "application/x-www-form-urlencoded"})
        assert bad.status_code == 303 and bad.headers["location"] == "/ui/login?failed=key"
        resp = c.post("/ui/login", content=f"key={t['gkey']}",
                      headers={"content-type": "application/x-www-form-urlencoded"})
        cookie = resp.headers["set-cookie"]
        assert re.search(r"wakeful_ui=[\w-]{40,};", cookie), cookie
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Max-Age=28800" in cookie, cookie
        assert t["gkey"] not in cookie
        info = c.get("/ui/session").json()
        assert info["principal"] == {"role": "group", "kind": "person", "key_id": info["principal"]["key_id"],
                                     "group_id": t["group"], "agent_id": None}
        assert len(info["csrf"]) >= 40 and t["gkey"] not in str(info)
        # the cookie is the group key's principal on the JSON API: its group yes, another group not (404)
        assert c.get(f"/v1/agent-groups/{t['group']}/loops").status_code == 200
        other = live.call(lambda h: h.create_group("other"))
        assert c.get(f"/v1/agent-groups/{other.id}/loops").status_code == 404
        assert c.get("/v1/nodes").status_code == 403  # a group key is no admin
        # the shell pages: no inline script allowed, nothing from elsewhere
        assert c.get("/").headers["location"] == "/ui/" and c.get("/ui").headers["location"] == "/ui/"
        page = c.get("/ui/loops/lp_x")
        assert page.status_code == 200 and "script-src 'self'" in page.headers["content-security-policy"]


def test_state_changing_requests_need_the_csrf_header_and_this_origin(live: LiveApi) -> None:
    t = live.tenant  # type: ignore[attr-defined]
    with _client(live) as c:
        csrf = _login(c, t["gkey"])["csrf"]
        agents = f"/v1/agent-groups/{t['group']}/agents"
        refused = c.post(agents, json={"name": "no-token"})
        assert refused.status_code == 403 and refused.json()["error"] == "csrf_required"
        wrong = c.post(agents, json={"name": "wrong"}, headers={"x-wakeful-csrf": "x" + csrf[1:]})
        assert wrong.status_code == 403 and wrong.json()["error"] == "csrf_required"
        foreign = c.post(agents, json={"name": "foreign"},
                         headers={"x-wakeful-csrf": csrf, "origin": "http://evil.example"})
        assert foreign.status_code == 403 and foreign.json()["error"] == "csrf_required"
        made = c.post(agents, json={"name": "with-token"}, headers={"x-wakeful-csrf": csrf, "origin": live.url})
        assert made.status_code == 201, made.text
        names = {a["name"] for a in c.get(agents).json()["items"]}
        assert "with-token" in names and not names & {"no-token", "wrong", "foreign"}
        # a login form posted from another site is refused too (login CSRF)
        assert c.post("/ui/login", content=f"key={t['gkey']}", headers={
            "content-type": "application/x-www-form-urlencoded", "origin": "http://evil.example"}).status_code == 403
        # signing out ends the session at the server: the same cookie no longer works
        cookie = c.cookies.get("wakeful_ui")
        assert c.post("/ui/logout").status_code == 403
        assert c.post("/ui/logout", headers={"x-wakeful-csrf": csrf}).status_code == 204
    with httpx.Client(base_url=live.url, cookies={"wakeful_ui": str(cookie)}) as after:
        assert after.get(agents).status_code == 401


def test_the_session_follows_the_key_an_agent_key_and_a_revoked_key(live: LiveApi) -> None:
    t = live.tenant  # type: ignore[attr-defined]
    with _client(live) as c:
        info = _login(c, t["akey"])
        assert info["principal"]["kind"] == "agent" and info["principal"]["agent_id"] == t["agent"]
        assert c.post(f"/v1/agent-groups/{t['group']}/agents", json={"name": "x"},
                      headers={"x-wakeful-csrf": info["csrf"]}).status_code == 403  # an agent key lacks the role
        assert c.get(f"/v1/agent-groups/{t['group']}/agents/{t['agent']}/sessions").status_code == 200
    made, key = live.call(lambda h: h.create_key("group", group_id=t["group"]))
    key_id = made.id
    with _client(live) as c:
        _login(c, key)
        assert c.get(f"/v1/agent-groups/{t['group']}/loops").status_code == 200
        # this node forgets a revoked key at once (the key cache spans 5 s only on other nodes)
        revoked = live.client.delete(f"{live.url}/v1/groups/{t['group']}/keys/{key_id}", headers=auth(t["admin"]))
        assert revoked.status_code == 204
        assert c.get(f"/v1/agent-groups/{t['group']}/loops").status_code == 401


def test_one_time_code_signs_in_once_within_ten_minutes(live: LiveApi) -> None:
    t = live.tenant  # type: ignore[attr-defined]
    sessions = sessions_of(live.server.config.app)
    code = sessions.issue_code(t["admin"])
    with _client(live) as c:
        first = c.get("/ui/login", params={"code": code})
        assert first.status_code == 200 and 'url=/ui/' in first.text and "wakeful_ui=" in first.headers["set-cookie"]
        assert c.get("/ui/session").json()["principal"]["role"] == "admin"
    with _client(live) as c:
        again = c.get("/ui/login", params={"code": code})
        assert again.status_code == 303 and again.headers["location"] == "/ui/login?failed=code"
        assert "set-cookie" not in again.headers
    # expiry on the store's own clock: a code older than 10 minutes is refused
    stale = sessions.issue_code(t["admin"])
    sessions._codes[stale] = (t["admin"], 0.0)
    with _client(live) as c:
        assert c.get("/ui/login", params={"code": stale}).headers["location"] == "/ui/login?failed=code"


def test_docs_are_served_from_this_server_with_the_bearer_scheme(live: LiveApi) -> None:
    with _client(live) as c:
        for path, asset in (("/docs", "swagger-ui-bundle.js"), ("/redoc", "redoc.standalone.js")):
            page = c.get(path).text
            urls = re.findall(r"""(?:src|href)=["']([^"']+)""", page) + re.findall(r"url: *'([^']+)'", page)
            assert urls and all(u.startswith("/") for u in urls), urls
            assert f"/docs-static/{asset}" in page
            assert c.get(f"/docs-static/{asset}").status_code == 200
        doc = c.get("/openapi.json").json()
        assert doc["paths"]["/v1/info"]["get"]["security"] == [{"bearer": []}]
        assert "security" not in doc["paths"]["/healthz"]["get"]


def test_no_ui_when_disabled(tmp_path: Path) -> None:
    with LiveApi(f"sqlite:///{tmp_path / 'w.db'}", tmp_path / "data", ui=UiSettings(enabled=False)) as api:
        assert api.client.get(f"{api.url}/ui/").status_code == 404
        assert api.client.get(f"{api.url}/ui/login").status_code == 404
        assert api.client.get(f"{api.url}/").status_code == 404
        assert api.client.get(f"{api.url}/healthz").status_code == 200


def test_wakeful_serve_no_ui_flag(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path / "home", f"sqlite:///{tmp_path / 'w.db'}", "--no-ui")
    try:
        serve.start()
        assert serve.client.get(f"{serve.url}/ui/login").status_code == 404
        assert serve.client.get(f"{serve.url}/healthz").status_code == 200
        assert serve.terminate() == 0
    finally:
        serve.close()


def test_ui_session_hours_sets_the_session_length(tmp_path: Path) -> None:
    with LiveApi(f"sqlite:///{tmp_path / 'w.db'}", tmp_path / "data", ui=UiSettings(session_hours=2)) as api:
        t = api.call(tenant)
        resp = httpx.post(f"{api.url}/ui/login", content=f"key={t['gkey']}",
                          headers={"content-type": "application/x-www-form-urlencoded"})
        assert "Max-Age=7200" in resp.headers["set-cookie"]
        assert sessions_of(api.server.config.app).session_s == 7200
