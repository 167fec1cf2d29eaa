"""issue 16: ``<data_dir>/node.id`` names the node across restarts — the same id after the previous process
ended, a fresh one while another process holds it or when the file was written on another host."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from wakeful.harness.placement.identity import NodeIdentity
from wakeful.harness.store.ids import is_id


def test_a_restart_on_the_same_data_dir_keeps_the_id(tmp_path: Path) -> None:
    first = NodeIdentity.take(tmp_path)
    assert is_id(first.node_id, "node") and first.kept and not first.reused
    first.release()
    second = NodeIdentity.take(tmp_path)
    try:
        assert (second.node_id, second.reused) == (first.node_id, True)
    finally:
        second.release()


def test_a_second_live_node_on_the_data_dir_gets_a_fresh_unkept_id(tmp_path: Path) -> None:
    first = NodeIdentity.take(tmp_path)
    try:
        second = NodeIdentity.take(tmp_path)
        assert second.node_id != first.node_id and not second.kept
        second.release()
    finally:
        first.release()
    assert NodeIdentity.take(tmp_path).node_id == first.node_id  # the file still names the first


def test_a_killed_holder_leaves_the_id_to_the_next_start(tmp_path: Path) -> None:
    code = ("import sys, os; from pathlib import Path; from wakeful.harness.placement.identity import NodeIdentity;"
            "i = NodeIdentity.take(Path(sys.argv[1])); print(i.node_id, flush=True); os.kill(os.getpid(), 9)")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == -9
    again = NodeIdentity.take(tmp_path)
    try:
        assert again.node_id == done.stdout.strip() and again.reused
    finally:
        again.release()


def test_a_file_from_another_host_or_malformed_is_replaced(tmp_path: Path) -> None:
    for text in ("node_01jd0000000000000000000000 some-other-host\n", "garbage", ""):
        (tmp_path / "node.id").write_text(text)
        got = NodeIdentity.take(tmp_path)
        try:
            assert not got.reused and is_id(got.node_id, "node")
            assert (tmp_path / "node.id").read_text() == f"{got.node_id} {socket.gethostname()}\n"
        finally:
            got.release()
