"""The in-process runtime: objects, their states and mailboxes, host calls and the scheduler in one place.

Implements the in-process core API of runtime-protocol.md §14 (states §7, cleanup §7.1, limits §6.3/§6.9,
extensions §13); the stdio server and the harness drive this same object.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple, TypedDict, Unpack

from wakeful.errors import (
    BuildUnavailable,
    Busy,
    InvalidObject,
    InvalidParams,
    ObjectNotFound,
    WakefulError,
)
from wakeful.runtime import footprint, jsonval
from wakeful.runtime.clock import Clock, SystemClock
from wakeful.runtime.handles import MAX_HANDLE_BYTES, MAX_OBJECT_HANDLE_BYTES, HandleSpace
from wakeful.runtime.helpers import GuestContext
from wakeful.runtime.hostcall import HostCalls, HostHandler
from wakeful.runtime.mailbox import Mailbox
from wakeful.runtime.policy import CapabilityPolicy, parse_capabilities
from wakeful.runtime.scheduler import Ending, Run, Scheduler
from wakeful.sdk.rules import SLICE_INSNS, VALUE_BYTES
from wakeful.vm import shape_stats
from wakeful.vm.elf import MissingEntry

__all__ = ["Delivery", "ObjectStatus", "Runtime", "RuntimeOptions"]

log = logging.getLogger("wakeful.runtime")

MAX_CAPABILITIES = 1_024  # §6.3
MAX_NAME_BYTES = 128  # capability names, topics, event ids, labels (§6.3, §6.9, §13)
MAX_ENVELOPE_BYTES = VALUE_BYTES  # §6.9
MAX_CPU_LIMIT_MS = 86_400_000  # §13 load_options
LIST_LIMIT_MAX = 256  # §6.8

LOADED, STARTING, RUNNING, STOPPING = "loaded", "starting", "running", "stopping"
STOPPED, EXITED, FAILED = "stopped", "exited", "failed"
TERMINAL = frozenset({STOPPED, EXITED, FAILED})
ACCEPTS_EVENTS = frozenset({LOADED, STARTING, RUNNING})


class LoadOptions(TypedDict, total=False):
    """The keywords of ``Runtime.load`` / ``load_nowait`` (§6.3); an absent one takes its default there."""

    config: Any
    capabilities: Iterable[Any] | CapabilityPolicy  # a policy: ``parse_capabilities`` made it (once for many)
    cpu_limit_ms: int | None
    label: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class RuntimeOptions:
    """Options of the runtime (runtime-protocol.md §2; VM options of vm.md §1)."""

    max_objects: int = 10_000
    max_elf_bytes: int = 65_536
    max_instructions: int = 8_192
    max_image_bytes: int = 65_536
    slice_insns: int = SLICE_INSNS
    engine: str = "translate"
    enable_builds: bool = False
    build_workers: int = 2
    build_cache: str | None = None  # a directory, "off", or None for the default
    build_root: str | None = None  # None: <data>/build (build.md §5.1)
    max_handle_bytes: int = MAX_HANDLE_BYTES  # sdk.md §5 runtime guard, estimated Python bytes of all handles
    max_object_handle_bytes: int = MAX_OBJECT_HANDLE_BYTES  # the same, per object


@dataclass(frozen=True, slots=True)
class ObjectStatus:
    """The status object of §6.2 plus ``guest_ms`` and ``instructions`` (§14) and the fault detail (§13)."""

    object_id: str
    sha256: str
    state: str
    wait: str
    mailbox_entries: int
    outcome: dict[str, Any] | None
    guest_ms: float = 0.0
    instructions: int = 0
    memory_bytes: int = 0
    fault: dict[str, Any] | None = field(default=None)

    def to_json(self, *, detail: bool = False) -> dict[str, Any]:
        """§6.2 form; with ``detail`` the ``wakeful`` member of §13."""
        out: dict[str, Any] = {
            "object_id": self.object_id,
            "sha256": self.sha256,
            "state": self.state,
            "wait": self.wait,
            "mailbox_entries": self.mailbox_entries,
            "outcome": self.outcome,
        }
        if detail:
            extra: dict[str, Any] = {
                "guest_ms": self.guest_ms,
                "instructions": self.instructions,
                "memory_bytes": self.memory_bytes,
            }
            if self.fault is not None:
                extra["fault"] = self.fault
            out["wakeful"] = extra
        return out


StatusPage = tuple[list[ObjectStatus], str | None]


class Delivery(NamedTuple):
    """Result of ``deliver`` (§6.9)."""

    accepted: bool
    duplicate: bool


_ACCEPTED, _DUPLICATE = Delivery(accepted=True, duplicate=False), Delivery(accepted=True, duplicate=True)


class _Object:
    """The runtime's record of one loaded object."""

    __slots__ = (
        "capabilities", "config", "ctx", "cpu_limit_ms", "done", "ended_ms", "fault", "inst", "label",
        "loaded_ms", "mailbox", "object_id", "outcome", "program", "run", "sha256", "started_ms", "state",
    )

    def __init__(self, object_id: str, program: Any, label: str | None, cpu_limit_ms: int | None) -> None:
        self.object_id = object_id
        self.program = program
        self.sha256: str = program.sha256
        self.label = label
        self.cpu_limit_ms = cpu_limit_ms
        self.state = LOADED
        self.mailbox = Mailbox()
        self.ctx: GuestContext | None = None
        self.inst: Any = None
        self.run: Run | None = None
        self.config: Any = None
        self.capabilities: CapabilityPolicy | None = None
        self.outcome: dict[str, Any] | None = None
        self.fault: dict[str, Any] | None = None
        self.loaded_ms = 0
        self.started_ms: int | None = None
        self.ended_ms: int | None = None
        self.done: asyncio.Future[None] | None = None  # set while a deferred stop is in progress


class Runtime:
    """runtime-protocol.md §14: the in-process core API.

    ``run_batch()`` runs one scheduler batch by hand; after ``await open()`` asyncio drives batches.
    """

    def __init__(
        self,
        options: RuntimeOptions | None = None,
        *,
        host_handler: HostHandler,
        on_state: Callable[[ObjectStatus], None] | None = None,
        on_log: Callable[[str, str], bool | None] | None = None,
        clock: Clock | None = None,
        on_log_refused: Callable[[str, str], None] | None = None,
    ) -> None:
        self.options = options or RuntimeOptions()
        self.clock: Clock = clock or SystemClock()
        self.session_id = secrets.token_hex(16)
        self._on_state = on_state
        self._on_log = on_log
        self._on_log_refused = on_log_refused  # (object_id, "rate" | "length"): a line sdk.md §9.3 refused
        self._objects: dict[str, _Object] = {}
        self._counter = 0
        self._opened_ns = self.clock.monotonic_ns()
        self._builder: Any = None
        # issue 16: the program of the last ELF object loaded — a node's start loads thousands of objects from one
        # ``bytes`` it read and verified once; the same object (immutable, held here so its identity stays its
        # own) gives the same program without hashing the ELF again for the program cache's key
        self._last_program: tuple[bytes, Any] | None = None
        self.handles = _new_handle_space(self.options)
        self.scheduler = Scheduler(
            self.clock, slice_insns=self.options.slice_insns,
            on_running=self._on_running, on_end=self._on_end,
        )
        self.hostcalls = HostCalls(host_handler, self.scheduler, self.clock, session_id=self.session_id)
        self.scheduler.hostcalls = self.hostcalls

    # ------------------------------------------------------------------ lifecycle of the runtime

    async def open(self) -> None:
        """Start driving the scheduler from the running loop (and the build helper when enabled)."""
        if self.options.enable_builds:
            await self._open_builder()
        self.scheduler.attach(asyncio.get_running_loop())

    async def close(self) -> None:
        """§12 without the writer: cancel and stop every object, stop the build helper."""
        for obj in list(self._objects.values()):
            self._stop_now(obj)
        self.hostcalls.cancel_all()
        self.scheduler.detach()
        builder, self._builder = self._builder, None
        if builder is not None:
            builder.close()

    async def __aenter__(self) -> Runtime:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def builder(self) -> Any:
        """The ``wakeful.build.Builder`` once builds are enabled and opened, else ``None``."""
        return self._builder

    def run_batch(self) -> int:
        """Run one scheduler batch now (vm.md §7); returns the number of steps."""
        return self.scheduler.run_batch()

    def run_of(self, object_id: str) -> Run | None:
        """The scheduler's view of a started object (wait deadline, counters), for tests and tools."""
        return self._find(object_id).run

    # ------------------------------------------------------------------ load (§6.3)

    async def load(self, elf: bytes, **options: Unpack[LoadOptions]) -> ObjectStatus:
        """§6.3 in order: params → config → capabilities → object limit → new id → loader → memory."""
        return self.load_nowait(elf, **options)

    def load_nowait(
        self,
        elf: bytes,
        *,
        config: Any = None,
        capabilities: Iterable[Any] | CapabilityPolicy = (),
        cpu_limit_ms: int | None = None,
        label: str | None = None,
    ) -> ObjectStatus:
        """``load`` without the coroutine wrapper (benchmarks and tests)."""
        if not isinstance(elf, bytes | bytearray | memoryview):
            raise InvalidParams("elf must be bytes")
        _check_load_options(cpu_limit_ms, label)
        config_box = _checked_json(config, "config exceeds JSON limits")
        caps = parse_capabilities(capabilities)
        if len(self._objects) >= self.options.max_objects:
            raise Busy("object limit reached")
        self._counter += 1
        object_id = f"o{self._counter}"  # ids advance even when the load fails (§6.3)
        program = self._load_program(bytes(elf))
        return self._status(self._new_object(object_id, program, label, cpu_limit_ms, config_box, caps,
                                             self.clock.unix_ms()))

    def _new_object(self, object_id: str, program: Any, label: str | None, cpu_limit_ms: int | None,
                    config_box: Any, caps: CapabilityPolicy, loaded_ms: int) -> _Object:
        """§6.3's last step: the object with its context and memory, registered (its load counted)."""
        obj = _Object(object_id, program, label, cpu_limit_ms)
        obj.config, obj.capabilities, obj.loaded_ms = config_box, caps, loaded_ms
        obj.ctx = self._new_context(obj)
        obj.inst = program.instantiate(obj.ctx)
        _attach_memory(obj.ctx, obj.inst)
        self._objects[object_id] = obj
        self.scheduler.note_load()
        return obj

    async def load_many(self, elf: bytes, items: Sequence[tuple[Any, str | None]], *,
                        capabilities: Iterable[Any] | CapabilityPolicy = (),
                        cpu_limit_ms: int | None = None) -> list[str | WakefulError]:
        """``load`` for many objects of one program (a node's start): see ``load_many_nowait``."""
        return self.load_many_nowait(elf, items, capabilities=capabilities, cpu_limit_ms=cpu_limit_ms)

    def load_many_nowait(self, elf: bytes, items: Sequence[tuple[Any, str | None]], *,
                         capabilities: Iterable[Any] | CapabilityPolicy = (),
                         cpu_limit_ms: int | None = None) -> list[str | WakefulError]:
        """§6.3 for each ``(config, label)`` of ``items`` in order, as ``load`` would run it, answering per item
        its object id or the error ``load`` would have raised for it (a program the loader refuses: that error
        for every item; ids advance as they would). issue 16 (a restart at N = 10,000): the program is made, the
        capabilities parsed and the load time read once for all, and no status is built per object. An invalid
        ``elf`` or ``capabilities`` raises for the whole call."""
        if not isinstance(elf, bytes | bytearray | memoryview):
            raise InvalidParams("elf must be bytes")
        data = bytes(elf)
        caps = parse_capabilities(capabilities)
        program: Any = None
        refused: WakefulError | None = None
        loaded_ms = self.clock.unix_ms()
        objects, limit = self._objects, self.options.max_objects
        out: list[str | WakefulError] = []
        for config, label in items:
            try:
                _check_load_options(cpu_limit_ms, label)
                config_box = _checked_json(config, "config exceeds JSON limits")
                if len(objects) >= limit:
                    raise Busy("object limit reached")
                self._counter += 1
                object_id = f"o{self._counter}"  # ids advance even when the load fails (§6.3)
                if program is None and refused is None:
                    try:
                        program = self._load_program(data)
                    except WakefulError as exc:  # the loader's refusal holds for every item
                        refused = exc
            except WakefulError as exc:
                out.append(exc)
                continue
            if refused is not None:
                out.append(refused)
                continue
            self._new_object(object_id, program, label, cpu_limit_ms, config_box, caps, loaded_ms)
            out.append(object_id)
        return out

    def _load_program(self, elf: bytes) -> Any:
        last = self._last_program
        if last is not None and last[0] is elf:
            return last[1]
        from wakeful.vm import load

        opts = self.options
        try:
            program = load(
                elf, max_elf_bytes=opts.max_elf_bytes, max_instructions=opts.max_instructions,
                max_image_bytes=opts.max_image_bytes, slice_insns=opts.slice_insns, engine=opts.engine,
            )
        except InvalidObject as exc:
            # §6.3: no spinfoam.main section → -32602; any other refusal → -32010. The loader marks the
            # ELF_ENTRY refusal for "no section named exactly spinfoam.main" (vm/elf.py MissingEntry)
            if exc.rule == "ELF_ENTRY" and isinstance(exc, MissingEntry):
                raise InvalidParams("missing spinfoam.main section") from None
            raise
        self._last_program = (elf, program)
        return program

    def _new_context(self, obj: _Object) -> GuestContext:
        return GuestContext(
            self.handles,
            obj.object_id,
            layout=obj.program.layout,
            config=obj.config,
            clock=self.clock,
            log=self._log_sink(obj.object_id),
            log_refused=self._refused_sink(obj.object_id),
            capabilities=obj.capabilities if obj.capabilities is not None else (),
        )

    # a partial per object, not a closure: ~120 B instead of ~280 B (function, cells, tuple) each (issue 16)
    def _refused_sink(self, object_id: str) -> Callable[[str], None] | None:
        told = self._on_log_refused
        if told is None:
            return None
        return partial(told, object_id)

    def _log_sink(self, object_id: str) -> Callable[[str], bool | None]:
        return partial(self._log_one, object_id)

    def _log_one(self, object_id: str, message: str) -> bool | None:
        # on_log returning False means the object's output queue is full: SF_LIMIT (runtime-protocol.md §10)
        if self._on_log is None:
            return None
        try:
            return self._on_log(object_id, message)
        except Exception:  # a broken log callback must not fail the guest
            log.exception("on_log callback failed")
            return None

    # ------------------------------------------------------------------ start, stop, unload (§6.4-6.6)

    async def start(self, object_id: str) -> ObjectStatus:
        return self.start_nowait(object_id)

    def start_nowait(self, object_id: str) -> ObjectStatus:
        """§6.4: only a ``loaded`` object starts; the first slice sets ``running``."""
        return self._status(self._start(object_id))

    def start_unreported(self, object_id: str) -> None:
        """``start_nowait`` without the status it answers. issue 16 (a restart at N = 10,000): a node's start
        starts every Loop it loads and reads none of their statuses — 10,000 ``ObjectStatus`` built and dropped
        were ~0.1 s of a start's ~2.7 s of CPU."""
        self._start(object_id)

    def _start(self, object_id: str) -> _Object:
        obj = self._find(object_id)
        if obj.state != LOADED:
            raise Busy("object can only start once")
        obj.state = STARTING
        obj.started_ms = self.clock.unix_ms()
        obj.run = Run(obj.inst.gen, obj.ctx, obj.mailbox, obj, obj.cpu_limit_ms)
        if obj.ctx is not None:
            obj.ctx.mark_started()
        self.scheduler.start(obj.run)
        return obj

    async def stop(self, object_id: str) -> ObjectStatus:
        """§6.5: always returns the status in its terminal state; concurrent stops all succeed."""
        obj = self._find(object_id)
        self._stop_now(obj)
        if obj.state == STOPPING and obj.done is not None:
            await asyncio.shield(obj.done)
        return self._status(obj)

    def stop_nowait(self, object_id: str) -> ObjectStatus:
        obj = self._find(object_id)
        self._stop_now(obj)
        return self._status(obj)

    def _stop_now(self, obj: _Object) -> None:
        if obj.state in TERMINAL or obj.state == STOPPING:
            return
        if obj.state == LOADED or obj.run is None:
            self._terminal(obj, STOPPED)
            return
        obj.state = STOPPING
        self.scheduler.cancel(obj.run)
        if obj.run.done:
            self._terminal(obj, STOPPED)
        else:  # deferred: a callback inside the guest's own step asked to stop it
            try:
                obj.done = asyncio.get_running_loop().create_future()
            except RuntimeError:  # no loop: the step finishes the stop when it returns
                obj.done = None

    async def unload(self, object_id: str) -> None:
        """§6.6: stops the object if needed and forgets it; an unknown id is fine."""
        obj = self._objects.get(object_id)
        if obj is None:
            return
        await self.stop(object_id)
        self._objects.pop(object_id, None)

    def unload_nowait(self, object_id: str) -> None:
        obj = self._objects.get(object_id)
        if obj is not None:
            self._stop_now(obj)
            self._objects.pop(object_id, None)

    # ------------------------------------------------------------------ scheduler callbacks

    def _on_running(self, run: Run) -> None:
        obj: _Object = run.owner
        if obj.state == STARTING:
            obj.state = RUNNING

    def _on_end(self, run: Run, ending: Ending) -> None:
        obj: _Object = run.owner
        if ending.fault is not None:
            obj.fault = ending.fault.detail()
            obj.outcome = {"error": ending.fault.message, "kind": "PROGRAM_FAULT"}
            self._terminal(obj, FAILED)
        elif ending.exit_code is not None:
            obj.outcome = {"exit_code": ending.exit_code}
            self._terminal(obj, EXITED)
        else:
            self._terminal(obj, STOPPED)

    # §7.1 terminal cleanup, in order
    def _terminal(self, obj: _Object, state: str) -> None:
        obj.state = state
        obj.ended_ms = self.clock.unix_ms()
        if obj.run is not None and not obj.run.done:
            self.scheduler.cancel(obj.run)  # wait → none; pending host calls resolved as closed
        obj.mailbox.clear()
        _release_context(obj.ctx)
        obj.ctx = obj.inst = None  # handles and guest memory go back to Python
        if obj.run is not None:
            obj.run.ctx = None
        if obj.done is not None and not obj.done.done():
            obj.done.set_result(None)
        status = self._status(obj)
        if self._on_state is not None:
            try:
                self._on_state(status)
            except Exception:
                log.exception("on_state callback failed")

    # ------------------------------------------------------------------ events (§6.9)

    async def deliver(self, object_id: str, event_id: str, topic: str, payload: Any) -> Delivery:
        return self.deliver_nowait(object_id, event_id, topic, payload)

    def deliver_nowait(self, object_id: str, event_id: str, topic: str, payload: Any) -> Delivery:
        """§6.9 checks in order, then append and wake a waiting sf_event_next."""
        if not isinstance(event_id, str) or not isinstance(topic, str):
            raise InvalidParams("event_id and topic must be strings")
        if (len(topic) > MAX_NAME_BYTES or not topic.isascii()) and _utf8_len(topic) > MAX_NAME_BYTES:
            raise InvalidParams("event exceeds limits: topic over 128 bytes")
        payload_box = _checked_json(payload, "event exceeds limits")
        obj = self._find(object_id)
        if obj.state not in ACCEPTS_EVENTS:
            raise Busy("object no longer accepts events")
        if (len(event_id) > MAX_NAME_BYTES or not event_id.isascii()) and _utf8_len(event_id) > MAX_NAME_BYTES:
            raise InvalidParams("event_id over 128 bytes")
        if obj.mailbox.is_duplicate(event_id):
            return _DUPLICATE
        envelope = _envelope(event_id, topic, payload_box)
        if envelope.size > MAX_ENVELOPE_BYTES:
            raise InvalidParams(f"event exceeds limits: envelope of {envelope.size} bytes over {MAX_ENVELOPE_BYTES}")
        obj.mailbox.offer(event_id, envelope, envelope.size)
        if obj.run is not None:
            self.scheduler.event_arrived(obj.run)
        return _ACCEPTED

    # ------------------------------------------------------------------ queries (§6.7, §6.8, §6.11, §13)

    async def get(self, object_id: str) -> ObjectStatus:
        return self.get_nowait(object_id)

    def get_nowait(self, object_id: str) -> ObjectStatus:
        return self._status(self._find(object_id))

    def state_of(self, object_id: str) -> tuple[str, str]:
        """The object's ``state`` and ``wait`` as its status would give them, without building the status (issue 16:
        a listing of 10,000 Loops shows these two for each resident one)."""
        obj = self._find(object_id)
        run = obj.run
        return obj.state, run.wait if run is not None and obj.state == RUNNING else "none"

    async def list(self, after: str | None = None, limit: int = 100) -> StatusPage:
        return self.list_nowait(after, limit)

    def list_nowait(self, after: str | None = None, limit: int = 100) -> StatusPage:
        """§6.8: string order of ids, strictly after ``after``; ``next`` when more remain."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= LIST_LIMIT_MAX:
            raise InvalidParams(f"limit must be 1..{LIST_LIMIT_MAX}")
        if after is not None and not isinstance(after, str):
            raise InvalidParams("after must be a string")
        ids = sorted(i for i in self._objects if after is None or i > after)
        page = ids[:limit]
        following = page[-1] if len(ids) > limit else None
        return [self._status(self._objects[i]) for i in page], following

    async def stats(self) -> dict[str, Any]:
        return self.stats_nowait()

    def stats_nowait(self, *, extensions: bool = True) -> dict[str, Any]:
        """§6.11 form (queues are the stdio server's: zero in-process) plus the ``wakeful`` counters.

        ``extensions=False`` leaves out the ``wakeful`` member, whose guest totals walk every object: plain
        ``sf.stats`` stays O(1) (spinfoam's control round trip, benchmarks.md §1.3 step 5).
        """
        uptime_ms = (self.clock.monotonic_ns() - self._opened_ns) // 1_000_000
        out = {
            "objects": len(self._objects),
            "host": {
                "pending_host_calls": self.hostcalls.pending_count,
                "ignored_host_responses": self.hostcalls.ignored,
            },
            "output": {"queued_control_frames": 0, "queued_object_bytes": 0, "dropped_data_notifications": 0},
            "uptime_ms": uptime_ms,
            "execution_threads": 1,
        }
        if extensions:
            out["wakeful"] = self._wakeful_stats()
        return out

    def _wakeful_stats(self) -> dict[str, Any]:
        sched = self.scheduler
        runs = [o.run for o in self._objects.values() if o.run is not None]
        return {
            "scheduler": {
                "runnable": sched.runnable, "timers": sched.timers, "batches": sched.batches,
                "slices": sched.total_slices, "preemptions": sched.total_preemptions,
                "throttles": sched.total_throttles, "gc_freezes": sched.gc_freezes,
            },
            "guests": {
                "guest_ms": sum(r.guest_ns for r in runs) / 1e6,
                "instructions": sum(r.work for r in runs),
            },
            "memory": {
                "guest_bytes": sum(_memory_bytes(o) for o in self._objects.values()),
                "handle_bytes": self.handles.live_bytes,
                "handles": self.handles.live_handles,
            },
            "shapes": shape_stats(),
            "builds": self._build_stats(),
        }

    def _build_stats(self) -> dict[str, Any]:
        builder = self._builder
        if builder is None:
            return {"enabled": self.options.enable_builds, "running": 0, "queued": 0, "compiles": 0}
        counts = builder.stats()  # wakeful.build.Builder: running + queued share one counter under its lock
        return {
            "enabled": True,
            "running": counts["running"],
            "queued": counts["queued"],
            "compiles": getattr(builder, "compiles", 0),
        }

    async def inspect(self, object_id: str) -> dict[str, Any]:
        return self.inspect_nowait(object_id)

    def inspect_nowait(self, object_id: str) -> dict[str, Any]:
        """§13 ``wakeful.object.inspect``: status plus memory, cpu, program, fault, times and label."""
        obj = self._find(object_id)
        run = obj.run
        layout = obj.program.layout
        out = self._status(obj).to_json()
        out.update({
            "memory": {
                "image_bytes": layout.rodata_bytes + layout.data_bytes if obj.inst is not None else 0,
                "stack_bytes": layout.stack_bytes if obj.inst is not None else 0,
                "handles": _handle_count(obj.ctx),
                "handle_bytes": _handle_bytes(obj.ctx),
                "mailbox_bytes": obj.mailbox.bytes,
            },
            "cpu": {
                "instructions": run.work if run else 0,
                "slices": run.slices if run else 0,
                "guest_ms": run.guest_ns / 1e6 if run else 0.0,
                "throttles": run.throttles if run else 0,
            },
            "program": {
                "sha256": obj.sha256, "shape": obj.program.shape_key,
                "functions": len(obj.program.code.functions), "instructions": len(obj.program.code.insns),
                "helpers": sorted(obj.program.code.helpers),
            },
            "fault": obj.fault,
            "times": {"loaded_ms": obj.loaded_ms, "started_ms": obj.started_ms, "ended_ms": obj.ended_ms},
            "label": obj.label,
        })
        return out

    async def verify(self, elf: bytes) -> Any:
        return self.verify_nowait(elf)

    def verify_nowait(self, elf: bytes) -> Any:
        """§13 ``wakeful.elf.verify``: the ``VerifyReport`` or ``InvalidObject``."""
        from wakeful.vm import verify_elf

        if not isinstance(elf, bytes | bytearray | memoryview):
            raise InvalidParams("elf must be bytes")
        opts = self.options
        return verify_elf(
            bytes(elf), max_elf_bytes=opts.max_elf_bytes, max_instructions=opts.max_instructions,
            max_image_bytes=opts.max_image_bytes,
        )

    async def compile(self, request: Any) -> Any:
        """§6.10 through ``wakeful.build.Builder``: bundle validation first, then availability."""
        from wakeful.build.bundle import validate

        validate(request)
        builder = await self._open_builder()
        return await builder.compile(request)

    async def _open_builder(self) -> Any:
        if self._builder is not None:
            return self._builder
        if not self.options.enable_builds:
            raise BuildUnavailable("builds are disabled (enable_builds is off)")
        from wakeful.build import Builder, BuildOptions

        cache = self.options.build_cache
        options = BuildOptions(
            workers=self.options.build_workers,
            cache=cache != "off",
            cache_dir=Path(cache) if cache not in (None, "off") else None,
            build_root=Path(self.options.build_root) if self.options.build_root else None,
        )
        self._builder = await asyncio.to_thread(Builder, options)  # starts the build helper (build.md §5.2)
        return self._builder

    # ------------------------------------------------------------------ helpers

    def _find(self, object_id: str) -> _Object:
        obj = self._objects.get(object_id) if isinstance(object_id, str) else None
        if obj is None:
            raise ObjectNotFound(f"unknown object {object_id!r}")
        return obj

    def _status(self, obj: _Object) -> ObjectStatus:
        run = obj.run
        return ObjectStatus(
            object_id=obj.object_id,
            sha256=obj.sha256,
            state=obj.state,
            wait=run.wait if run is not None and obj.state == RUNNING else "none",
            mailbox_entries=len(obj.mailbox),
            outcome=obj.outcome,
            guest_ms=run.guest_ns / 1e6 if run is not None else 0.0,
            instructions=run.work if run is not None else 0,
            memory_bytes=_memory_bytes(obj),
            fault=obj.fault,
        )


# ---------------------------------------------------------------------- validation (§6.3, §13)


def _checked_json(value: Any, message: str) -> Any:
    """A value within the JSON limits of sdk.md §6, boxed; else ``InvalidParams(message)``."""
    try:
        return jsonval.from_python(value)
    except jsonval.JsonError as exc:
        raise InvalidParams(f"{message}: {exc.message}") from None


_ENVELOPE_FRAME = len(b'{"event_id":,"topic":,"payload":}')
_ENVELOPE_COST = footprint.DICT + 3 * footprint.MEMBER + 2 * footprint.WIDE_STR  # keys: interned literals


def _envelope(event_id: str, topic: str, payload: jsonval.Json) -> jsonval.Json:
    """§6.9 envelope ``{event_id, topic, payload}`` boxed with its encoded size (root + 2 strings + payload)."""
    value = {"event_id": event_id, "topic": topic, "payload": payload.value}
    # '{"event_id":' + id + ',"topic":' + topic + ',"payload":' + payload + '}': the payload is not re-encoded
    size = _ENVELOPE_FRAME + jsonval.str_size(event_id) + jsonval.str_size(topic) + payload.size
    cost = _ENVELOPE_COST + footprint.WIDEST * (len(event_id) + len(topic)) + payload.cost  # ids: ≤ 128 B
    return jsonval.Json(value, size, payload.nodes + 3, payload.depth + 1, cost)


def _check_load_options(cpu_limit_ms: int | None, label: str | None) -> None:
    """§13 load_options: ``cpu_limit_ms`` 1..86,400,000; ``label`` ≤ 128 bytes."""
    if cpu_limit_ms is not None and (
        isinstance(cpu_limit_ms, bool) or not isinstance(cpu_limit_ms, int)
        or not 1 <= cpu_limit_ms <= MAX_CPU_LIMIT_MS
    ):
        raise InvalidParams(f"cpu_limit_ms must be 1..{MAX_CPU_LIMIT_MS}")
    if label is not None and (not isinstance(label, str) or _utf8_len(label) > MAX_NAME_BYTES):
        raise InvalidParams("label must be a string of at most 128 bytes")


def _utf8_len(text: str) -> int:
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:  # lone surrogates: never valid
        return 1 << 30


# ---------------------------------------------------------------------- seams to runtime/helpers.py


def _new_handle_space(options: RuntimeOptions) -> HandleSpace:
    return HandleSpace(max_bytes=options.max_handle_bytes, object_max_bytes=options.max_object_handle_bytes)


def _attach_memory(ctx: GuestContext, inst: Any) -> None:
    ctx.mem = inst.mem


def _release_context(ctx: GuestContext | None) -> None:
    if ctx is not None:
        ctx.close()


def _handle_count(ctx: GuestContext | None) -> int:
    return ctx.handle_count if ctx is not None else 0


def _handle_bytes(ctx: GuestContext | None) -> int:
    return ctx.handle_bytes if ctx is not None else 0


def _memory_bytes(obj: _Object) -> int:
    return obj.program.layout.size if obj.inst is not None else 0  # whole, also while squeezed

