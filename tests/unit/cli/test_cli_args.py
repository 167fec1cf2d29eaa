"""`wakeful` in process: argument validation, exit codes and `--json` shapes of the commands that need no compiler."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wakeful import sdk
from wakeful.cli.main import main
from wakeful.cli.output import UsageError
from wakeful.cli.run import INJECTED_CONFIG, parse_request


@pytest.fixture
def prog(tmp_path: Path) -> Path:
    path = tmp_path / "p.c"
    path.write_text("#include <wakeful.h>\nSF_MAIN sf_i64 main(void) { return 0; }\n")
    return path


def test_run_request_injects_the_harness_keys(prog: Path) -> None:
    req = parse_request(prog, '{"threshold": 3}', ["a={}", 'b={"x": [1]}', "c=null"], None, "interp", 2)
    assert req.config == {**INJECTED_CONFIG, "threshold": 3}
    assert (
        req.config["loop_id"] == "lp_local" and req.config["incarnation"] == 1 and req.config["state"] is None
    )
    assert req.events == [("a", {}), ("b", {"x": [1]}), ("c", None)]
    assert req.engine == "interp" and req.timeout_s == 2


def test_event_payload_may_contain_equals(prog: Path) -> None:
    req = parse_request(prog, None, ['t={"q": "a=b"}'], None, "translate", 1)
    assert req.events == [("t", {"q": "a=b"})]


@pytest.mark.parametrize(
    ("config", "events", "engine", "timeout"),
    [
        ("[1]", [], "translate", 1.0),
        ("{", [], "translate", 1.0),
        ('{"x": NaN}', [], "translate", 1.0),
        (None, ["noequals"], "translate", 1.0),
        (None, ["={}"], "translate", 1.0),
        (None, ["t=not json"], "translate", 1.0),
        (None, ["t" * 129 + "={}"], "translate", 1.0),
        (None, [], "jit", 1.0),
        (None, [], "translate", 0.0),
        (None, [], "translate", -1.0),
    ],
)
def test_bad_run_arguments(
    prog: Path, config: str | None, events: list[str], engine: str, timeout: float
) -> None:
    with pytest.raises(UsageError):
        parse_request(prog, config, events, None, engine, timeout)


def test_missing_program_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such file"):
        parse_request(tmp_path / "nope.c", None, [], None, "translate", 1)


def test_exit_code_2_and_json_error_for_bad_arguments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--json", "run", str(tmp_path / "nope.c")]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["error"] == "invalid_request" and "no such file" in doc["message"]


def test_bad_replies_file_exits_2(prog: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "r.json"
    bad.write_text('{"t": []}')
    assert main(["run", str(prog), "--host-replies", str(bad)]) == 2
    assert "non-empty list" in capsys.readouterr().err


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["no-such-command"]) == 2
    assert main(["run"]) == 2
    assert main(["run", "x.c", "--timeout", "soon"]) == 2
    assert main(["build"]) == 2  # neither FILE nor --check
    assert "Traceback" not in capsys.readouterr().err


def test_every_command_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (
        [],
        ["build"],
        ["run"],
        ["vm"],
        ["vm", "dump"],
        ["sdk"],
        ["sdk", "header"],
        ["sdk", "guide"],
        ["sdk", "script-guide"],
        ["sdk", "examples"],
        ["version"],
    ):
        assert main([*argv, "--help"]) == 0, argv
        assert "Usage:" in capsys.readouterr().out


def test_sdk_texts_are_verbatim(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sdk", "header"]) == 0
    assert capsys.readouterr().out == sdk.header_text()
    assert main(["sdk", "guide"]) == 0
    assert capsys.readouterr().out == sdk.guide_text()
    assert main(["sdk", "script-guide", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"script_guide": sdk.script_guide_text(), "sdk_version": 1}


def test_sdk_examples_writes_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--json", "sdk", "examples", str(tmp_path / "out")]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert sorted(Path(p).name for p in doc["files"]) == sorted(
        f"{ex.name}{suffix}" for ex in sdk.examples() for suffix in (".c", ".replies.json")
    )
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["sdk", "examples", str(blocker)]) == 2


def test_version_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["version", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["wakeful"] and doc["sdk_version"] == 1 and doc["protocol_version"] == 1
    assert "schema_version" in doc


def test_check_of_missing_file_exits_2(tmp_path: Path) -> None:
    assert main(["build", "--check", str(tmp_path / "missing.o")]) == 2


def test_vm_dump_of_missing_file_exits_2(tmp_path: Path) -> None:
    assert main(["vm", "dump", str(tmp_path / "missing.o")]) == 2


def test_runtime_dump_sdk_prints_the_header(capsys: pytest.CaptureFixture[str]) -> None:
    # sdk.md §1: `wakeful runtime --dump-sdk` prints wakeful.h
    assert main(["runtime", "--dump-sdk"]) == 0
    assert capsys.readouterr().out == sdk.header_text()


def test_top_level_dump_sdk_is_the_runtime_dump(capsys: pytest.CaptureFixture[str]) -> None:
    # docs/spinfoam-compat.md: `wakeful --dump-sdk` exited 2 on main; it now prints wakeful.h like
    # `wakeful runtime --dump-sdk`
    assert main(["--dump-sdk"]) == 0
    assert capsys.readouterr().out == sdk.header_text()


def test_spinfoam_entry_dumps_spinfoam_h_and_refuses_unknown_options(capsys: pytest.CaptureFixture[str]) -> None:
    from wakeful.cli import spinfoam

    assert spinfoam.main(["--dump-sdk"]) == 0
    assert capsys.readouterr().out == sdk.spinfoam_header_text()
    assert spinfoam.main(["--enable-builds", "--no-such-option"]) == 2
    assert "wakeful-spinfoam" in capsys.readouterr().err


def test_exit_codes_follow_the_error_code() -> None:
    """interfaces.md §4.1: 3 when a store, server or compiler is unreachable, whatever layer raised it."""
    from wakeful.cli.output import UsageError, exit_code_for
    from wakeful.errors import BuildUnavailable, InvalidObject
    from wakeful.harness.errors import StoreUnavailable

    assert exit_code_for(StoreUnavailable("database down")) == 3
    assert exit_code_for(BuildUnavailable("no zig")) == 3
    assert exit_code_for(UsageError("bad flag")) == 2
    assert exit_code_for(InvalidObject("ELF_HEADER", "bad magic")) == 1


def test_version_names_the_schema_this_code_writes(capsys: pytest.CaptureFixture[str]) -> None:
    """interfaces.md §4.2: `wakeful version` gives the schema version too (it printed null)."""
    import json

    from wakeful.harness.ops.store_admin import SCHEMA_HEAD

    assert main(["version", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["schema_version"] == SCHEMA_HEAD
