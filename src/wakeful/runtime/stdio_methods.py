"""The methods of the stdio runtime: each decodes its params and calls the in-process ``Runtime``.

runtime-protocol.md §6 (spinfoam v1 methods) and §13 (``wakeful.*`` extensions); the session in
``stdio.py`` does framing, dispatch, slots and queues.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import platform
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from wakeful import __version__
from wakeful.errors import Busy, InvalidParams
from wakeful.runtime.core import ObjectStatus
from wakeful.runtime.framing import Encoded
from wakeful.runtime.stdio_params import INITIALIZE_WAKEFUL, LOAD_WAKEFUL, SCHEMAS, decode

if TYPE_CHECKING:
    from wakeful.runtime.stdio import Session

__all__ = ["EXTENSIONS", "Methods"]

Handler = Callable[[dict[str, Any]], Awaitable[Any]]
SyncHandler = Callable[[dict[str, Any]], Any]

EXTENSIONS = ["wakeful.object.inspect", "wakeful.stats", "wakeful.elf.verify", "detail", "load_options"]
PINNED_REVISION = ("0.17.1", "22.1.8")  # build.md §2
_NOT_AN_ARRAY = "null"  # a value parse_capabilities refuses ("invalid capabilities"): not a list


def _b64(text: str) -> bytes:
    """Standard base64 with padding; anything else is ``-32602 invalid base64`` (§6.3).

    Strict: the alphabet is checked (``validate``) and the text must be the canonical encoding of what it
    decodes to, so extra ``=`` padding and non-zero trailing bits (RFC 4648 §3.5) are refused too."""
    try:
        raw = text.encode("ascii")
        data = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError, UnicodeEncodeError):
        raise InvalidParams("invalid base64") from None
    if base64.b64encode(data) != raw:
        raise InvalidParams("invalid base64")
    return data


# the four results of sf.event.deliver, pre-encoded (benchmarks.md §1.8 fan-out)
_DELIVERED = {
    (accepted, duplicate): Encoded(
        b'{"accepted":' + (b"true" if accepted else b"false") + b',"duplicate":'
        + (b"true" if duplicate else b"false") + b"}"
    )
    for accepted in (True, False)
    for duplicate in (True, False)
}


_STATS = (b'{"objects":%d,"host":{"pending_host_calls":%d,"ignored_host_responses":%d},"output":'
          b'{"queued_control_frames":%d,"queued_object_bytes":%d,"dropped_data_notifications":%d},'
          b'"uptime_ms":%d,"execution_threads":%d}')


def _later(handler: SyncHandler) -> Handler:
    """The awaitable form of a synchronous handler (the task path of ``Session``)."""

    async def run(p: dict[str, Any]) -> Any:
        return handler(p)

    return run


class Methods:
    """One handler per method name; each returns the JSON result or raises a ``WakefulError``.

    ``inline`` holds the methods that never wait: the session answers them as the frame is read, with no task.
    """

    def __init__(self, session: Session) -> None:
        self.s = session
        self.inline: dict[str, SyncHandler] = {
            "sf.object.load": self.load,
            "sf.object.start": self.start,
            "sf.object.get": self.get,
            "sf.object.list": self.list,
            "sf.event.deliver": self.deliver,
            "sf.stats": self.stats,
            "wakeful.object.inspect": self.inspect,
            "wakeful.stats": self.wakeful_stats,
            "wakeful.elf.verify": self.verify,
        }
        self.table: dict[str, Handler] = {name: _later(fn) for name, fn in self.inline.items()} | {
            "sf.initialize": self.initialize,
            "sf.object.stop": self.stop,
            "sf.object.unload": self.unload,
            "sf.build.compile": self.compile,
            "sf.shutdown": self.shutdown,
        }

    def decode(self, method: str, params: Any) -> dict[str, Any]:
        if (method == "sf.event.deliver" and type(params) is dict and len(params) == 4 and "payload" in params
                and type(params.get("object_id")) is str and type(params.get("event_id")) is str
                and type(params.get("topic")) is str):
            return params  # exactly the four fields, well typed: what ``decode`` would accept (the hot path)
        return decode(params, SCHEMAS[method])

    def _status(self, status: ObjectStatus) -> dict[str, Any]:
        return status.to_json(detail=self.s.detail)

    # §6.1
    async def initialize(self, p: dict[str, Any]) -> Any:
        if p["protocol_version"] != 1:
            raise InvalidParams(f"unsupported protocol_version {p['protocol_version']}")
        ext = decode(p.get("wakeful", {}), INITIALIZE_WAKEFUL, "params.wakeful")
        if self.s.initialized:
            raise Busy("already initialized")
        self.s.initialized = True  # before any await: requests behind it in the pipe see it
        self.s.detail = bool(ext.get("detail", False))
        info = await self._compiler_info()
        return {
            "protocol_version": 1,
            "sdk_version": 1,
            "session_id": self.s.rt.session_id,
            "target": f"{sys.platform}-{platform.machine()}",
            "async_ebpf_revision": f"wakeful-vm/{__version__}",
            "compiler": info.to_json(),
            "limits": {"frame_bytes": 262_144, "value_bytes": 16_384, "mailbox_entries": 32,
                       "mailbox_bytes": 32_768, "handles": 128},
            "memory_target_bytes": 8192,
            "memory_target_enforced": False,
            "wakeful": self._advertisement(info),
        }

    async def _compiler_info(self) -> Any:
        from wakeful.build import disabled_info

        builder = self.s.rt.builder
        if builder is not None:
            return await asyncio.to_thread(builder.info)
        opts = self.s.rt.options
        # build.md §5.3: sandbox_level is scan | landlock | namespace; disabled builds are `scan` with a reason
        return disabled_info(
            "builds are disabled (start the runtime with --enable-builds)",
            zig_version=PINNED_REVISION[0], clang_version=PINNED_REVISION[1],
            workers=opts.build_workers, cache=opts.build_cache != "off",
        )

    # §13 the extension advertisement
    def _advertisement(self, info: Any) -> dict[str, Any]:
        opts = self.s.rt.options
        return {
            "version": __version__,
            "extensions": list(EXTENSIONS),
            "vm": {"max_elf_bytes": opts.max_elf_bytes, "max_instructions": opts.max_instructions,
                   "max_image_bytes": opts.max_image_bytes, "slice_insns": opts.slice_insns,
                   "stack_frame_bytes": 4096, "max_call_depth": 8},
            "builds": {"sandbox_level": info.sandbox_level, "sandbox_reason": info.sandbox_reason,
                       "workers": opts.build_workers,
                       "cache": opts.build_cache if opts.build_cache is not None else "default"},
        }

    # §6.3: params → base64 → config → capabilities → object limit → id → loader
    def load(self, p: dict[str, Any]) -> Any:
        elf = _b64(p["elf"])
        ext = decode(p.get("wakeful", {}), LOAD_WAKEFUL, "params.wakeful")
        caps = p.get("capabilities", ())
        # §6.3 (spinfoam v1, issue 21): `capabilities` is an array; `null` is not one. The core reads None as
        # "no capabilities", so null is handed on as a non-array, refused at the capabilities step
        if caps is None:
            caps = _NOT_AN_ARRAY
        status = self.s.rt.load_nowait(
            elf, config=p.get("config"), capabilities=caps,
            cpu_limit_ms=ext.get("cpu_limit_ms"), label=ext.get("label"),
        )
        return self._status(status)

    # §6.4
    def start(self, p: dict[str, Any]) -> Any:
        return self._status(self.s.rt.start_nowait(p["object_id"]))

    # §6.5
    async def stop(self, p: dict[str, Any]) -> Any:
        return self._status(await self.s.rt.stop(p["object_id"]))

    # §6.6
    async def unload(self, p: dict[str, Any]) -> Any:
        await self.s.rt.unload(p["object_id"])
        return {"unloaded": True}

    # §6.7
    def get(self, p: dict[str, Any]) -> Any:
        return self._status(self.s.rt.get_nowait(p["object_id"]))

    # §6.8
    def list(self, p: dict[str, Any]) -> Any:
        statuses, following = self.s.rt.list_nowait(p.get("after"), p.get("limit", 100))
        return {"objects": [self._status(s) for s in statuses], "next": following}

    # §6.9
    def deliver(self, p: dict[str, Any]) -> Any:
        got = self.s.rt.deliver_nowait(p["object_id"], p["event_id"], p["topic"], p["payload"])
        return _DELIVERED[bool(got.accepted), bool(got.duplicate)]

    # §6.10: bundle validation, then availability, then the pipeline
    async def compile(self, p: dict[str, Any]) -> Any:
        result = await self.s.rt.compile(p)
        out: dict[str, Any] = {"state": result.state, "result": None}
        if result.state == "succeeded":
            out["result"] = {
                "sha256": result.sha256, "elf": base64.b64encode(result.elf or b"").decode("ascii"),
                "sdk_version": 1, "toolchain": result.toolchain, "diagnostics": result.diagnostics,
                "diagnostics_truncated": result.diagnostics_truncated,
            }
        elif result.state == "failed":
            out["result"] = {"kind": "BUILD_FAILED", "error": result.error or ""}
        if self.s.detail:
            out["wakeful"] = {
                "cached": result.cached, "duration_ms": result.duration_ms, "failure": result.failure,
                "report": result.report.to_json() if result.report is not None else None,
            }
        return out

    # §6.11
    def stats(self, p: dict[str, Any]) -> Any:
        if not self.s.detail:  # spinfoam's control round trip (benchmarks.md §1.3 step 5): bytes, no encoder
            core = self.s.rt.stats_nowait(extensions=False)
            outbox, calls = self.s.outbox, self.s.calls
            numbers = (core["objects"], calls.pending, core["host"]["ignored_host_responses"] + calls.ignored,
                       outbox.control_frames, outbox.data_bytes, outbox.dropped, core["uptime_ms"],
                       core["execution_threads"])
            if all(type(n) is int for n in numbers):
                return Encoded(_STATS % numbers)
        return self.stats_value()

    def stats_value(self) -> dict[str, Any]:
        """The §6.11 result as a value (``stats`` gives the same bytes without the encoder)."""
        stats = self.s.rt.stats_nowait(extensions=self.s.detail)  # the wakeful totals are O(objects)
        wakeful = stats.pop("wakeful", None)
        stats["host"]["pending_host_calls"] = self.s.calls.pending
        stats["host"]["ignored_host_responses"] += self.s.calls.ignored
        stats["output"] = {
            "queued_control_frames": self.s.outbox.control_frames,
            "queued_object_bytes": self.s.outbox.data_bytes,
            "dropped_data_notifications": self.s.outbox.dropped,
        }
        if self.s.detail and wakeful is not None:
            stats["wakeful"] = wakeful
        return stats

    # §6.12
    async def shutdown(self, p: dict[str, Any]) -> Any:
        self.s.shutdown_requested = True
        return {"shutdown": True}

    # §13 wakeful.object.inspect
    def inspect(self, p: dict[str, Any]) -> Any:
        return self.s.rt.inspect_nowait(p["object_id"])

    # §13 wakeful.stats: core counters plus the server's own (request waits in scheduler terms)
    def wakeful_stats(self, p: dict[str, Any]) -> Any:
        stats: dict[str, Any] = self.s.rt.stats_nowait()["wakeful"]
        builder = self.s.rt.builder
        if builder is not None:
            stats["builds"].update(builder.stats())
        stats["server"] = self.s.server_stats()
        return stats

    # §13 wakeful.elf.verify
    def verify(self, p: dict[str, Any]) -> Any:
        report = self.s.rt.verify_nowait(_b64(p["elf"]))
        return {"ok": True, "report": report.to_json()}
