"""Config keys of event intake (interfaces.md §7): server.public_base_url, events.dedup_retention_s and the
limits.* of harness.md §20 for pending events and ingress rates."""

from __future__ import annotations

from pathlib import Path

import pytest

from wakeful.harness.config import load_config
from wakeful.harness.errors import InvalidRequest


def test_defaults_follow_the_spec(tmp_path: Path) -> None:
    config = load_config(env={"WAKEFUL_HOME": str(tmp_path)})
    limits = config.limits
    assert (limits.pending_events, limits.group_backlog_bytes, limits.ack_deadline_s) == (32, 50 * 1024 * 1024, 900)
    assert (limits.ingress_per_loop_per_min, limits.ingress_global_per_min) == (60, 6000)
    assert config.public_base_url is None and config.dedup_retention_s == 86_400


def test_file_then_environment(tmp_path: Path) -> None:
    file = tmp_path / "wakeful.toml"
    file.write_text('[server]\npublic_base_url = "https://a.example"\nport = 9000\n'
                    '[events]\ndedup_retention_s = 60\n[limits]\ningress_per_loop_per_min = 5\n')
    config = load_config(file, env={"WAKEFUL_HOME": str(tmp_path)})
    assert config.public_base_url == "https://a.example" and config.dedup_retention_s == 60
    assert config.limits.ingress_per_loop_per_min == 5
    env = {"WAKEFUL_HOME": str(tmp_path), "WAKEFUL_SERVER__PUBLIC_BASE_URL": "https://b.example",
           "WAKEFUL_EVENTS__DEDUP_RETENTION_S": "120", "WAKEFUL_LIMITS__GROUP_BACKLOG_BYTES": "1000"}
    config = load_config(file, env=env)
    assert (config.public_base_url, config.dedup_retention_s) == ("https://b.example", 120)
    assert config.limits.group_backlog_bytes == 1000


@pytest.mark.parametrize("text", ['[events]\nunknown = 1\n', '[events]\ndedup_retention_s = "x"\n',
                                  '[server]\npublic_base_url = 5\n'])
def test_bad_values_are_refused_at_start(tmp_path: Path, text: str) -> None:
    file = tmp_path / "wakeful.toml"
    file.write_text(text)
    with pytest.raises(InvalidRequest):
        load_config(file, env={"WAKEFUL_HOME": str(tmp_path)})
