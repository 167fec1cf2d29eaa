"""Configuration of the harness core (interfaces.md §7): file, environment, defaults; unknown keys refused.
Also the facts each lifecycle notice must state (harness.md §4.4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from wakeful.harness import notices
from wakeful.harness.config import Config, Limits, load_config
from wakeful.harness.errors import InvalidRequest


def test_defaults_follow_the_limits_table(tmp_path: Path) -> None:
    cfg = load_config(env={"WAKEFUL_HOME": str(tmp_path)})
    assert cfg.limits == Limits() and cfg.limits.loops_per_agent == 20 and cfg.limits.notify_per_window == 6
    assert cfg.effective_store_url == f"sqlite:///{tmp_path / 'wakeful.db'}"
    assert cfg.artifact_dir == tmp_path / "artifacts"


def test_file_then_environment(tmp_path: Path) -> None:
    (tmp_path / "wakeful.toml").write_text(
        '[store]\nurl = "postgresql://u@h/db"\n[limits]\nloops_per_agent = 5\nreloads_per_hour = 2\n'
    )
    env = {"WAKEFUL_HOME": str(tmp_path), "WAKEFUL_LIMITS__LOOPS_PER_AGENT": "7"}
    cfg = load_config(env=env)
    assert cfg.limits.loops_per_agent == 7 and cfg.limits.reloads_per_hour == 2
    assert cfg.store_url == "postgresql://u@h/db"
    assert load_config(env={**env, "WAKEFUL_DB_URL": "sqlite:///x.db"}).store_url == "sqlite:///x.db"


@pytest.mark.parametrize(
    "text",
    ["[limits]\nloops_per_agnet = 5\n", "[nonsense]\na = 1\n", "[limits]\nloops_per_agent = 'many'\n",
     "[limits]\nloops_per_agent = -1\n", "not toml ["],
)
def test_bad_files_are_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(InvalidRequest):
        load_config(path, env={"WAKEFUL_HOME": str(tmp_path)})


def test_a_named_file_must_exist(tmp_path: Path) -> None:
    with pytest.raises(InvalidRequest):
        load_config(tmp_path / "missing.toml", env={})


def test_overrides_keep_unset_values() -> None:
    cfg = Config(store_url="sqlite:///a.db").with_overrides(store_url=None, max_objects=3)
    assert (cfg.store_url, cfg.max_objects) == ("sqlite:///a.db", 3)


def test_notices_state_the_required_facts() -> None:
    lp = "lp_01jd0000000000000000000000"
    text = notices.exited("watch", lp, 3)
    assert all(s in text for s in ("'watch'", lp, "exit code 3", "paused", "loop.resume", "checkpoint"))
    text = notices.failed("watch", lp, 3, "MEMORY_READ at pc 4", 2)
    assert all(s in text for s in ("3 times within an hour", "MEMORY_READ at pc 4", "2 pending", "loop.resume",
                                   "loop.delete"))
    text = notices.budget("watch", lp, 6, 10)
    assert all(s in text for s in ("6 wakes per 10 minutes", "an hour", "paused", "dedup keys"))
    text = notices.fault("watch", lp, "expected sha256:aa, found sha256:bb")
    assert "expected sha256:aa, found sha256:bb" in text and "Recreate" in text
    assert "limit of 20 active Loops" in notices.quota("watch", lp, "agent", 20)
    assert notices.notice_id(lp, "failed", 4) == f"loop:{lp}:lifecycle:failed:4"
    assert notices.telling_on_exit(0, True) is False
    assert notices.telling_on_exit(0, False) is True and notices.telling_on_exit(3, True) is True


def test_sections_of_other_parts_pass_through(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[server]\nport = 8470\n[runtime]\nmode = "inprocess"\nmax_objects = 50\n')
    assert load_config(path, env={}).max_objects == 50
