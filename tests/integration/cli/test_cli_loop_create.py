"""issue 19: `wakeful loop create --source FILE.c` builds and creates in one step; C source given to --elf or
--artifact is refused with a build hint (exit 2); a local create says when the Loop will start."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wakeful.cli.main import main

pytestmark = pytest.mark.integration

SOURCE = "#include <wakeful.h>\nSF_MAIN sf_i64 main(void) { return 0; }\n"


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, str]:
    assert main(["--json", *args]) == 0
    value: dict[str, str] = json.loads(capsys.readouterr().out)
    return value


@pytest.fixture
def tenant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> list[str]:
    monkeypatch.setenv("WAKEFUL_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("WAKEFUL_SERVER", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.c").write_text(SOURCE)
    group = _json(capsys, "group", "create", "g")["id"]
    agent = _json(capsys, "agent", "create", "--group", group, "a")["id"]
    session = _json(capsys, "session", "create", "--agent", agent)["id"]
    return ["loop", "create", "--agent", agent, "--session", session]


def test_create_from_source(tenant: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*tenant, "--source", "p.c", "--name", "from-source"]) == 0
    captured = capsys.readouterr()
    assert "name: from-source" in captured.out and "runtime: loading" in captured.out
    assert "the Loop starts when `wakeful serve` runs on it" in captured.err
    assert main(["--json", "loop", "list"]) == 0
    assert [v["name"] for v in json.loads(capsys.readouterr().out)] == ["from-source"]


@pytest.mark.parametrize("flag", ["--elf", "--artifact"])
def test_c_source_gets_a_build_hint(tenant: list[str], flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*tenant, flag, "p.c"]) == 2
    err = capsys.readouterr().err
    assert "C source: use --source p.c, or `wakeful build p.c -o OUT.o` first" in err


def test_one_input_only(tenant: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*tenant, "--source", "p.c", "--elf", "p.c"]) == 2
    assert "exactly one of --source, --elf or --artifact" in capsys.readouterr().err


def test_local_create_names_the_running_node(tenant: list[str], tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    from wakeful.cli import nodefile

    home = tmp_path / "home"  # this test process stands in for the node: its pid runs
    nodefile.write(home, url="http://127.0.0.1:9", store_url=f"sqlite:///{home / 'wakeful.db'}", node_name="n")
    assert main([*tenant, "--source", "p.c"]) == 0
    err = capsys.readouterr().err
    assert "using the store of the node at http://127.0.0.1:9" in err
    assert "waiting for the node at http://127.0.0.1:9 to adopt it: its next reconcile, up to 60 s" in err


def test_local_create_gives_the_nodes_own_reconcile_period(tenant: list[str], tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """issue 19: the wait named is the running node's (its node file), not this command's configuration."""
    from wakeful.cli import nodefile

    home = tmp_path / "home"
    nodefile.write(home, url="http://127.0.0.1:9", store_url=f"sqlite:///{home / 'wakeful.db'}", node_name="n",
                   reconcile_s=5)
    assert main([*tenant, "--source", "p.c"]) == 0
    assert "waiting for the node at http://127.0.0.1:9 to adopt it: its next reconcile, up to 5 s" in (
        capsys.readouterr().err)


def test_a_failed_build_creates_nothing(tenant: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bad.c").write_text("#include <wakeful.h>\nSF_MAIN sf_i64 main(void) { return undefined_name; }\n")
    assert main([*tenant, "--source", "bad.c"]) == 1
    assert "build failed" in capsys.readouterr().err
    assert main(["--json", "loop", "list"]) == 0
    assert json.loads(capsys.readouterr().out) == []


FAULTING = """#include <wakeful.h>
SF_MAIN sf_i64 main(void) {
  sf_handle cfg = sf_config();
  sf_i64 at = 0;
  wf_json_get_i64(cfg, "at", &at);
  char *where = (char *)at; /* an address clang cannot see */
  return (sf_i64)wf_u64_to_dec(12345, where, 8);
}
"""


def test_a_loop_created_from_source_faults_naming_its_line(tenant: list[str], tmp_path: Path) -> None:
    """issue 18/19: `loop create --source` stores the build's line table beside the ELF, so the Loop's fault (in
    the node that adopts it) names `main.c:7`, as a Loop built with `loop.build` does."""
    import asyncio

    from support.loops_harness import loop_row, until

    from wakeful.harness import Harness
    from wakeful.harness.config import Config

    (tmp_path / "main.c").write_text(FAULTING)  # the line table names the file as given
    (tmp_path / "cfg.json").write_text('{"at": 16}')
    url = f"sqlite:///{tmp_path / 'home' / 'wakeful.db'}"
    assert main(["--json", "--db", url, *tenant, "--source", "main.c", "--config-file", "cfg.json"]) == 0

    async def adopted_fault() -> str:
        h = Harness(Config(data_dir=tmp_path / "node", store_url=url), sweeps=False)
        await h.start()  # adopts the active Loop the command wrote
        try:
            (view,) = await h.list_loops()

            async def faulted() -> bool:
                await h.settle()
                return (await loop_row(h, view["id"])).reload_count >= 1

            await until(faulted)
            return (await loop_row(h, view["id"])).failure or ""
        finally:
            await h.stop()

    failure = asyncio.run(adopted_fault())
    assert failure.startswith("main.c:7: ") and failure.endswith(" (in wf_u64_to_dec)"), failure
