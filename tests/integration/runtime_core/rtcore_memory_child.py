"""Child process of the handle-memory calibration (test_runtime_core_memory_rss.py): measures how much the
process RSS grows while handles are filled, next to what the accounting charged, and prints one JSON line.

``guest ELF OBJECTS``: OBJECTS handle_filler.c guests each parse maximal objects until their guard stops them.
``shapes COPIES``: COPIES decoded copies of each value of ``SHAPES`` boxed like ``parse`` boxes them, held in
one table, shape after shape.
Nothing is freed while a sample is taken, so every sample's RSS growth is fresh memory; gc runs before each
reading (then freezes what survived). RSS comes from /proc/self/statm (resident pages).
"""

from __future__ import annotations

import gc
import json
import os
import sys
from pathlib import Path
from typing import Any

from wakeful.runtime import ManualClock, Runtime, RuntimeOptions, jsonval
from wakeful.runtime.handles import HandleSpace

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss() -> int:
    gc.collect()
    gc.freeze()  # what is held from now on is never traversed again: later collections stay cheap
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE


def _keys(count: int) -> list[str]:
    return [chr(97 + i % 26) + chr(97 + i // 26 % 26) + chr(97 + i // 676 % 26) for i in range(count)]


# value shapes near the 16 KB limit: containers, members, strings of each width, numbers
SHAPES: dict[str, Any] = {
    "object of small ints": dict.fromkeys(_keys(2040), 7),
    "object of strings": {k: "value" for k in _keys(1150)},
    "object of empty objects": {k: {} for k in _keys(1600)},
    "array of floats": [0.5] * 4000,
    "array of large ints": [123456] * 2300,
    "array of small objects": [{"id": i % 100, "ok": True} for i in range(800)],
    "array of strings": [f"item-{i:05d}" for i in range(1200)],
    "nested arrays": [[[i, i + 1], [i + 2, -i]] for i in range(580)],
    "ascii string": "a" * 16_000,
    "ascii string with one emoji": "a" * 4_000 + "\U0001f600",
    "cjk string": "\u4e00" * 5_400,
}


def guest(elf_path: str, objects: int) -> dict[str, Any]:
    elf = Path(elf_path).read_bytes()
    clock = ManualClock()
    filled: dict[str, str] = {}
    rt = Runtime(RuntimeOptions(), host_handler=lambda call: {}, clock=clock,
                 on_log=lambda oid, text: filled.__setitem__(oid, text) and None)
    ids = [rt.load_nowait(elf, config={"count": 128}).object_id for _ in range(objects)]
    before = rss()
    for oid in ids:
        rt.start_nowait(oid)
    while len(filled) < objects:
        clock.advance(ms=1)
        rt.run_batch()
    after = rss()
    memory = rt.stats_nowait()["wakeful"]["memory"]
    return {"rss_growth": after - before, "charged": memory["handle_bytes"], "handles": memory["handles"],
            "logs": sorted(set(filled.values()))}


def shapes(copies: int) -> dict[str, Any]:
    space = HandleSpace(max_bytes=1 << 40, object_max_bytes=1 << 40)
    table = space.table(limit=1 << 30)
    out: dict[str, Any] = {}
    for name, value in SHAPES.items():
        text = jsonval.dumps(jsonval.from_python(value))
        box = jsonval.parse(text)  # every copy is boxed like this one: decode only, keep the box's figures
        charged, before = table.bytes, rss()
        for _ in range(copies):
            assert table.add(box._replace(value=jsonval.parse_value(text))) > 0
        out[name] = {"rss_growth": rss() - before, "charged": table.bytes - charged}
    return out


if __name__ == "__main__":
    mode = sys.argv[1]
    result = guest(sys.argv[2], int(sys.argv[3])) if mode == "guest" else shapes(int(sys.argv[2]))
    print(json.dumps(result))
