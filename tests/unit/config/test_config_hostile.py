"""Hostile configuration values (interfaces.md §7): absurd integers, an empty listen address, bad flags, and
secrets that must not reach ``config show``, error messages or the log (passwords with ``/``, ``?password=``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from wakeful.cli.logsetup import redact
from wakeful.harness.config import KEYS, load_config, redacted_url
from wakeful.harness.errors import InvalidRequest


def _load(tmp_path: Path, text: str) -> object:
    path = tmp_path / "w.toml"
    path.write_text(text)
    return load_config(path, env={"WAKEFUL_HOME": str(tmp_path)})


@pytest.mark.parametrize("section,name", [(s, k) for s, keys in KEYS.items() for k, key in keys.items()
                                          if key.kind == "int"])
def test_an_absurd_integer_is_refused_for_every_key(tmp_path: Path, section: str, name: str) -> None:
    """10**30 (or 2**63 - 1) in any integer key would overflow a store column or a timeout later: refused at start."""
    for value in (10**30, 2**63 - 1):
        with pytest.raises(InvalidRequest) as err:
            _load(tmp_path, f"[{section}]\n{name} = {value}\n")
        assert err.value.details["field"] == f"{section}.{name}"
        assert err.value.details["source"] == f"file {tmp_path / 'w.toml'}"
    with pytest.raises(InvalidRequest) as err:
        load_config(env={"WAKEFUL_HOME": str(tmp_path), f"WAKEFUL_{section.upper()}__{name.upper()}": "9" * 30})
    assert err.value.details["source"] == f"env WAKEFUL_{section.upper()}__{name.upper()}"


def test_the_ceilings_keep_the_defaults_and_large_real_values(tmp_path: Path) -> None:
    cfg = _load(tmp_path, "[build]\ncache_max_bytes = 1099511627776\n[events]\ndedup_retention_s = 31536000\n"
                          "[scripts]\nwall_time_ms = 86400000\n")
    assert cfg.build.cache_max_bytes == 1 << 40  # type: ignore[attr-defined]
    assert cfg.dedup_retention_s == 31_536_000  # type: ignore[attr-defined]


def test_an_empty_listen_address_is_refused(tmp_path: Path) -> None:
    """server.host = "" would bind every interface (the socket's INADDR_ANY) instead of loopback."""
    with pytest.raises(InvalidRequest) as err:
        _load(tmp_path, '[server]\nhost = ""\n')
    assert err.value.details["field"] == "server.host"
    with pytest.raises(InvalidRequest) as err:
        load_config(env={"WAKEFUL_HOME": str(tmp_path), "WAKEFUL_SERVER__HOST": " "})
    assert err.value.details["source"] == "env WAKEFUL_SERVER__HOST"


def test_flags_are_checked_like_the_file(tmp_path: Path) -> None:
    """``serve --port 99999`` was an ``internal`` OverflowError at bind time: now the typed error of the key."""
    cfg = load_config(env={"WAKEFUL_HOME": str(tmp_path)})
    for changes, key in (({"server_port": 99_999}, "server.port"), ({"server_port": -1}, "server.port"),
                         ({"server_host": ""}, "server.host"), ({"max_objects": 0}, "runtime.max_objects")):
        with pytest.raises(InvalidRequest) as err:
            cfg.with_overrides(**changes)
        assert err.value.details["field"] == key and err.value.details["source"] == "flag"
    assert cfg.with_overrides(server_port=0, server_host="::1").server_port == 0


def test_a_secret_of_the_wrong_type_is_not_echoed(tmp_path: Path) -> None:
    for text in ('[decide]\napi_key = ["sk-very-secret"]\n', '[store]\nurl = ["postgresql://u:sk-very-secret@h/d"]\n'):
        with pytest.raises(InvalidRequest) as err:
            _load(tmp_path, text)
        assert "sk-very-secret" not in str(err.value) and "must be a string" in str(err.value)


@pytest.mark.parametrize("url", ["postgresql://me:Zq/9:xy@127.0.0.1/test",
                                 "postgresql://me@127.0.0.1/test?password=Zq%2F9",
                                 "postgresql://me@127.0.0.1/test?sslmode=disable&password=Zq/9"])
def test_store_passwords_of_every_form_are_redacted(tmp_path: Path, url: str) -> None:
    """SQLAlchemy and asyncpg take a password with ``/`` in it and one given as ``?password=``."""
    for shown in (redacted_url(url), redact(f"cannot open the store {url}: refused")):
        assert "Zq" not in shown and "127.0.0.1" in shown, shown
    cfg = _load(tmp_path, f'[store]\nurl = "{url}"\n')
    assert "Zq" not in str(cfg.effective()["store.url"][0])  # type: ignore[attr-defined]


def test_a_config_file_that_is_a_fifo_or_huge_is_refused_without_blocking(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "wakeful.toml"
    os.mkfifo(fifo)  # nobody writes to it: a plain read would block forever
    with pytest.raises(InvalidRequest) as caught:
        load_config(env={"WAKEFUL_HOME": str(tmp_path)})
    assert "not a regular file" in caught.value.message
    fifo.unlink()
    (tmp_path / "wakeful.toml").write_text("# padding\n" * 120_000)
    with pytest.raises(InvalidRequest) as caught:
        load_config(env={"WAKEFUL_HOME": str(tmp_path)})
    assert "larger than" in caught.value.message
