"""``HttpCapability`` (a configured capability's call) on a real loopback server: the node's ``web.*`` policy
decides egress (``web.allow_networks`` admits the endpoint without ``allow_private``), POST sends the arguments as
JSON, text bodies stay text, and a missing secret is a typed refusal that names its source, never a value."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from support.capability_server import ci_server

from wakeful.harness.capability_config import HeaderSpec, HttpCapabilitySpec
from wakeful.harness.capability_http import HttpCapability
from wakeful.harness.errors import HostCallRefused
from wakeful.harness.registry import ToolContext
from wakeful.harness.web_policy import WebSettings

OPERATOR = ToolContext(principal="operator", loop_id=None, agent_id=None, session_id=None, group_id=None,
                       incarnation=None, deadline_unix_ms=None)


def _call(spec: HttpCapabilitySpec, args: object, web: WebSettings | None = None,
          env: dict[str, str] | None = None) -> object:
    cap = HttpCapability(spec, web or WebSettings(), monotonic_ns=time.monotonic_ns, env=(env or {}).get)
    return asyncio.run(cap(args, OPERATOR))


def test_the_node_policy_decides_egress() -> None:
    with ci_server() as ci:
        spec = HttpCapabilitySpec(name="ci.read", description="d", url=ci.base + "/runs/{id}")
        with pytest.raises(HostCallRefused) as refused:
            _call(spec, {"id": 1})
        assert refused.value.code == "tool_failed" and "loopback" in refused.value.message
        assert ci.seen == []
        allowed = WebSettings(allow_networks=("127.0.0.1/32",))
        assert _call(spec, {"id": 1}, allowed) == {"status": 200, "body": {"path": "/runs/1", "method": "GET"}}


def test_post_sends_the_arguments_as_json_and_text_stays_text() -> None:
    with ci_server() as ci:
        post = HttpCapabilitySpec(name="ci.rerun", description="d", url=ci.base + "/jobs/{job}", method="POST",
                                  allow_private=True, read_only=False)
        assert _call(post, {"job": "j1", "reason": "flaky"})["status"] == 200  # type: ignore[index]
        assert json.loads(ci.seen[-1].body) == {"job": "j1", "reason": "flaky"}
        assert ci.seen[-1].headers["content-type"] == "application/json"
        text = HttpCapabilitySpec(name="ci.text", description="d", url=ci.base + "/text", allow_private=True)
        assert _call(text, {}) == {"status": 200, "body": "plain words"}


def test_a_missing_secret_names_its_source_and_never_a_value(tmp_path: Path) -> None:
    with ci_server() as ci:
        def spec(header: HeaderSpec) -> HttpCapabilitySpec:
            return HttpCapabilitySpec(name="ci.read", description="d", url=ci.base + "/runs/x", allow_private=True,
                                      headers=(header,))

        for header, words in ((HeaderSpec("Authorization", env="CI_TOKEN"), "environment variable CI_TOKEN"),
                              (HeaderSpec("Authorization", file=str(tmp_path / "none")), "secrets file"),
                              (HeaderSpec("Authorization", file=str(tmp_path)), "not a regular file")):
            with pytest.raises(HostCallRefused) as refused:
                _call(spec(header), {})
            assert refused.value.code == "tool_failed" and words in refused.value.message
        (tmp_path / "bad").write_text("line one\nline two\n")
        with pytest.raises(HostCallRefused) as refused:
            _call(spec(HeaderSpec("Authorization", file=str(tmp_path / "bad"))), {})
        assert "line one" not in refused.value.message
        assert ci.seen == []
        ok = _call(spec(HeaderSpec("Authorization", env="CI_TOKEN", prefix="Bearer ")), {}, env={"CI_TOKEN": "t"})
        assert ok["status"] == 200 and ci.seen[-1].headers["authorization"] == "Bearer t"  # type: ignore[index]
