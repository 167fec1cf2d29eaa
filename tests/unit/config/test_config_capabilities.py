"""``[capabilities."<name>"]`` in the configuration file (docs/decisions-config.md "Configured capabilities"):
what is read, and every refusal naming the key and the file — unknown keys, secrets written into the file,
placeholders outside the path and query, bounds, names that are not capability names."""

from __future__ import annotations

from pathlib import Path

import pytest

from wakeful.harness.capability_config import HeaderSpec
from wakeful.harness.config import Config, load_config
from wakeful.harness.errors import InvalidRequest

GOOD = """
[capabilities."ci.run.read"]
description = "Read one CI run by id"
url = "https://ci.example.com/api/runs/{run_id}?attempt={attempt}"
timeout_ms = 5000
max_bytes = 4096
per_minute = 30

[capabilities."ci.run.read".headers]
Authorization = { env = "CI_TOKEN", prefix = "Bearer " }
X-Api-Key = { file = "/run/secrets/ci" }
Accept = "application/json"

[capabilities."ci.rerun"]
description = "Ask CI to rerun a job"
method = "post"
url = "https://ci.example.com/api/jobs/{job}/rerun"
read_only = false
allow_private = true
"""


def _load(tmp_path: Path, text: str) -> Config:
    path = tmp_path / "w.toml"
    path.write_text(text)
    return load_config(path, env={"WAKEFUL_HOME": str(tmp_path)})


def test_declared_capabilities_are_read_with_their_defaults(tmp_path: Path) -> None:
    read, rerun = _load(tmp_path, GOOD).capabilities
    assert (read.name, read.method, read.timeout_ms, read.max_bytes, read.per_minute) == (
        "ci.run.read", "GET", 5000, 4096, 30)
    assert (read.read_only, read.allow_private, read.arguments) == (True, False, ("run_id", "attempt"))
    assert read.headers == (HeaderSpec("Authorization", env="CI_TOKEN", prefix="Bearer "),
                            HeaderSpec("X-Api-Key", file="/run/secrets/ci"),
                            HeaderSpec("Accept", value="application/json"))
    assert (rerun.method, rerun.read_only, rerun.allow_private, rerun.timeout_ms, rerun.max_bytes) == (
        "POST", False, True, 10_000, 8192)
    shown = read.describe()
    assert shown["headers"] == {"Authorization": "env CI_TOKEN", "X-Api-Key": "file /run/secrets/ci",
                                "Accept": "literal"}
    assert _load(tmp_path, "").capabilities == ()


CAP = '[capabilities."ci.run.read"]\ndescription = "d"\nurl = "https://ci.example.com/runs/{id}"\n'


@pytest.mark.parametrize("extra,field", [
    ("colour = 1\n", 'capabilities."ci.run.read".colour'),  # unknown keys refused like the rest of the file
    ("method = \"TRACE\"\n", 'capabilities."ci.run.read".method'),
    ("timeout_ms = 0\n", 'capabilities."ci.run.read".timeout_ms'),
    ("timeout_ms = 20001\n", 'capabilities."ci.run.read".timeout_ms'),
    ("max_bytes = 12289\n", 'capabilities."ci.run.read".max_bytes'),
    ("per_minute = 0\n", 'capabilities."ci.run.read".per_minute'),
    ("read_only = \"yes\"\n", 'capabilities."ci.run.read".read_only'),
    ("allow_private = 1\n", 'capabilities."ci.run.read".allow_private'),
    # a secret written into the file itself is refused without being echoed
    ("headers = { Authorization = \"Bearer hunter2\" }\n", 'capabilities."ci.run.read".headers.Authorization'),
    ("headers = { X-Ci-Token = \"hunter2\" }\n", 'capabilities."ci.run.read".headers.X-Ci-Token'),
    ("headers = { Authorization = { env = \"A\", file = \"/b\" } }\n",
     'capabilities."ci.run.read".headers.Authorization'),
    ("headers = { Authorization = { value = \"x\" } }\n", 'capabilities."ci.run.read".headers.Authorization'),
    ("headers = { Host = \"evil\" }\n", 'capabilities."ci.run.read".headers.Host'),
    ("headers = { X-Wakeful-Principal = \"admin\" }\n", 'capabilities."ci.run.read".headers.X-Wakeful-Principal'),
    ("headers = { Accept = \"a\\nb\" }\n", 'capabilities."ci.run.read".headers.Accept'),
])
def test_a_bad_key_is_refused_naming_key_and_file(tmp_path: Path, extra: str, field: str) -> None:
    with pytest.raises(InvalidRequest) as err:
        _load(tmp_path, CAP + extra)
    assert err.value.details == {"field": field, "source": f"file {tmp_path / 'w.toml'}"}
    assert "hunter2" not in err.value.message


@pytest.mark.parametrize("url", [
    "https://{host}/runs",  # the host, port and scheme are the operator's, never an argument's
    "https://ci.example.com:{port}/runs",
    "{scheme}://ci.example.com/runs",
    "https://ci.example.com/runs/{id",
    "https://ci.example.com/runs/{1x}",
    "ftp://ci.example.com/runs",
    "https://user@ci.example.com/runs",
    "https://ci.example.com/runs#{id}",
    "ci.example.com/runs",
])
def test_a_url_template_with_placeholders_outside_path_and_query_is_refused(tmp_path: Path, url: str) -> None:
    with pytest.raises(InvalidRequest) as err:
        _load(tmp_path, f'[capabilities."ci.x"]\ndescription = "d"\nurl = "{url}"\n')
    assert err.value.details["field"] == 'capabilities."ci.x".url'


@pytest.mark.parametrize("name", ["decide", "web.http_request", "CI.Read", "1ci", "a b"])
def test_a_name_that_is_a_builtin_or_no_capability_name_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(InvalidRequest) as err:
        _load(tmp_path, f'[capabilities."{name}"]\ndescription = "d"\nurl = "https://ci.example.com/"\n')
    assert err.value.details["field"] == f'capabilities."{name}"'


def test_required_keys_and_the_section_shape(tmp_path: Path) -> None:
    with pytest.raises(InvalidRequest) as err:
        _load(tmp_path, '[capabilities."ci.x"]\nurl = "https://ci.example.com/"\n')
    assert err.value.details["field"] == 'capabilities."ci.x".description'
    with pytest.raises(InvalidRequest) as err:
        _load(tmp_path, '[capabilities."ci.x"]\ndescription = "d"\n')
    assert err.value.details["field"] == 'capabilities."ci.x".url'
    with pytest.raises(InvalidRequest) as err:
        _load(tmp_path, "capabilities = 3\n")
    assert err.value.details["field"] == "capabilities"


def test_capabilities_are_declared_in_the_file_only(tmp_path: Path) -> None:
    with pytest.raises(InvalidRequest) as err:
        load_config(env={"WAKEFUL_HOME": str(tmp_path), "WAKEFUL_CAPABILITIES__URL": "https://x/"})
    assert err.value.details == {"field": "capabilities", "source": "env WAKEFUL_CAPABILITIES__URL"}
