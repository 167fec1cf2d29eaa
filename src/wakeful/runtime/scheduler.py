"""The guest scheduler: one run queue, a timer heap, batches, fuel refills, throttling and CPU accounting.

Implements the scheduler model of vm.md §7 on one thread; asyncio only calls ``run_batch`` (tests call it
directly with a ``ManualClock``). Suspending helpers (sdk.md §9.1-9.3) are executed here.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import heapq
import logging
from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any

from wakeful.errors import GuestFault
from wakeful.runtime.clock import Clock
from wakeful.vm.guest import PREEMPT

if TYPE_CHECKING:
    from wakeful.runtime.hostcall import HostCalls
    from wakeful.runtime.mailbox import Mailbox

__all__ = [
    "BATCH_NS",
    "BATCH_SLICES",
    "MAX_DURATION_MS",
    "THROTTLE_AFTER",
    "THROTTLE_NS",
    "Ending",
    "Run",
    "Scheduler",
    "one_malloc_arena",
]

log = logging.getLogger("wakeful.runtime")

# vm.md §7 constants
BATCH_NS = 2_000_000  # a batch lasts at most 2 ms on the scheduler clock ...
BATCH_SLICES = 64  # ... or 64 slices' worth of fuel
THROTTLE_AFTER = 16  # preemptions in a row without a real wait
THROTTLE_NS = 20_000_000  # then the instance sleeps 20 ms
HYGIENE_LOADS = 1_000  # a load burst of at least this many loads ...
HYGIENE_QUIET_NS = 100_000_000  # ... followed by 100 ms without a load → gc.collect + gc.freeze
HYGIENE_RETRY_NS = 10_000_000  # ... once the run queue is empty (the started guests reached their first wait),
HYGIENE_MAX_WAIT_NS = 1_000_000_000  # ... waiting for that at most 1 s past the quiet point
MAX_DURATION_MS = 86_400_000  # sdk.md §4: durations clamp to 24 h

SF_TIMEOUT = -3

WAIT_NONE = "none"
WAIT_TIMER = "timer"
WAIT_EVENT = "event"
WAIT_HOST = "host_rpc"

Value = tuple[int, int] | None  # what a guest generator is sent: None first, then (r0, fuel)
Guest = Generator[tuple[str, int, tuple[int, ...]], Value, int]


@dataclass(frozen=True, slots=True)
class Ending:
    """How a run ended: ``exit_code`` (signed i64) or ``fault``; neither when it was cancelled."""

    exit_code: int | None = None
    fault: GuestFault | None = None


class Run:
    """One started guest as the scheduler sees it: its generator, wait state and counters."""

    __slots__ = (
        "cpu_limit_ns", "ctx", "deadline_ns", "done", "gen", "guest_ns", "host_call", "mailbox",
        "max_step_work", "owner", "preempts", "resume", "slices", "started", "stepping",
        "stop_requested", "throttled", "throttles", "token", "wait", "work",
    )

    def __init__(self, gen: Guest, ctx: Any, mailbox: Mailbox, owner: Any, cpu_limit_ms: int | None) -> None:
        self.gen: Guest | None = gen
        self.ctx = ctx  # the object's GuestContext (runtime/helpers.py)
        self.mailbox = mailbox
        self.owner = owner  # the runtime's record of the object
        self.cpu_limit_ns = None if cpu_limit_ms is None else cpu_limit_ms * 1_000_000
        self.wait = WAIT_NONE
        self.token = 0  # bumped by every suspension and wake: stale timers are ignored
        self.deadline_ns: int | None = None  # deadline of the current timer, if any
        self.throttled = False
        self.resume: Value = None  # send value kept across a throttle sleep
        self.host_call: Any = None  # pending host-call entry (runtime/hostcall.py)
        self.preempts = 0  # preemptions in a row without a real wait
        self.throttles = 0
        self.slices = 0
        self.guest_ns = 0
        self.work = 0  # fuel units spent: instructions plus helper charges (vm.md §6.3)
        self.max_step_work = 0  # most fuel spent in one step (S6: ≤ slice + one helper's charge)
        self.started = False
        self.stepping = False
        self.stop_requested = False
        self.done = False


class Scheduler:
    """Run queue, timer heap and batches (vm.md §7).

    ``on_running(run)`` is called before a run's first slice; ``on_end(run, ending)`` when a run exits or
    faults, and when a stop requested from inside the run's own step completes (an empty ``Ending``).
    """

    def __init__(
        self,
        clock: Clock,
        *,
        slice_insns: int,
        on_running: Callable[[Run], None],
        on_end: Callable[[Run, Ending], None],
    ) -> None:
        self.clock = clock
        self.slice_insns = slice_insns
        self.on_running = on_running
        self.on_end = on_end
        self.hostcalls: HostCalls | None = None  # set by the runtime (host-call router)
        self._runq: deque[tuple[Run, Value]] = deque()
        self._later: deque[tuple[Run, Value]] = deque()  # preempted: runs again in the next batch
        self._timers: list[tuple[int, int, Run | None, int]] = []
        self._stale = 0  # heap entries whose wait ended early (compacted when they dominate)
        self._seq = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        # two independent asyncio handles: a batch soon (work queued) and one timer for the earliest deadline;
        # a kick does not cancel the timer, so an event round trip costs one call_soon and no call_later
        self._soon: asyncio.Handle | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._armed_ns = 0  # the deadline the timer handle is for
        self._loads_in_burst = 0
        self._last_load_ns = 0
        self._bursts = 0  # hold_hygiene: an embedder's load burst in progress (its pauses are not quiet)
        self._gc_holds = 0  # held bursts of at least HYGIENE_LOADS loads in progress: the collector is off
        self._gc_was_enabled = True  # (and was on before the first of them, so their end turns it back on)
        # counters for wakeful.stats
        self.batches = 0
        self.batch_start_ns = 0
        self.total_slices = 0
        self.total_preemptions = 0
        self.total_throttles = 0
        self.gc_freezes = 0
        self.heap_trims = 0  # the hygiene's malloc_trim calls (glibc only)

    # ------------------------------------------------------------------ asyncio hook

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Let asyncio drive batches (one ``call_soon`` or one ``call_at`` at a time)."""
        self._loop = loop
        self._rearm()

    def detach(self) -> None:
        for handle in (self._soon, self._timer):
            if handle is not None:
                handle.cancel()
        self._soon = self._timer = None
        self._loop = None

    def _soon_hook(self) -> None:
        self._soon = None
        self.run_batch()

    def _timer_hook(self) -> None:
        """The timer fired (maybe for a stale top entry): a due deadline queues a batch, else re-arm.

        The batch runs from the soon handle, never from here, so one loop turn runs at most one batch and a
        control request waits at most one slice of anybody (runtime-protocol.md §16 item 10).
        """
        self._timer = None
        self._drop_stale_timers()
        if self._runq or (self._timers and self._timers[0][0] <= self.clock.monotonic_ns()):
            self._kick()
        else:
            self._rearm()  # nothing due: just re-arm for the earliest live deadline

    def _kick(self) -> None:
        """Ensure one batch is scheduled soon (§7: never one Future per guest request)."""
        if self._soon is None and self._loop is not None:
            self._soon = self._loop.call_soon(self._soon_hook)

    def _rearm(self) -> None:
        """After a batch: more work → one call_soon; else the timer handle for the earliest deadline.

        Stale heap entries are not popped here (a heap pop per answered host call and per delivered event),
        and a timer armed for an earlier deadline than the top is kept: waking early is never late, and
        ``_timer_hook`` then re-arms without a batch. Only a deadline earlier than the armed one re-arms.
        """
        if self._loop is None:
            return
        if self._runq:
            self._kick()
            return
        timers = self._timers
        if not timers:
            return
        deadline = timers[0][0]
        timer = self._timer
        if timer is not None:
            if self._armed_ns <= deadline:
                return
            timer.cancel()
        delay = max(0.0, (deadline - self.clock.monotonic_ns()) / 1e9)
        self._timer = self._loop.call_later(delay, self._timer_hook)
        self._armed_ns = deadline

    # ------------------------------------------------------------------ queries

    @property
    def runnable(self) -> int:
        return len(self._runq)

    @property
    def timers(self) -> int:
        """Armed timers (live heap entries)."""
        return len(self._timers) - self._stale

    @property
    def heap_entries(self) -> int:
        """Timer-heap entries, stale ones included (bounded by compaction)."""
        return len(self._timers)

    def has_work(self) -> bool:
        return bool(self._runq)

    def next_deadline_ns(self) -> int | None:
        self._drop_stale_timers()
        return self._timers[0][0] if self._timers else None

    # ------------------------------------------------------------------ batches

    def run_batch(self) -> int:
        """vm.md §7 batch: due timers first, then the queue until empty or the budget is spent.

        Returns the number of steps run. A preempted instance runs again only in a later batch.
        """
        start = self.clock.monotonic_ns()
        self.batches += 1
        self.batch_start_ns = start
        budget = BATCH_SLICES * self.slice_insns
        steps = spent = 0
        runq = self._runq
        try:
            self._fire_due(start)
            while runq:
                run, value = runq.popleft()
                if run.done:
                    continue
                spent += self._step(run, value)
                steps += 1
                if spent >= budget or self.clock.monotonic_ns() - start >= BATCH_NS:
                    break
        finally:  # a callback that raised (a bug) must not leave the queue and the timers without a handle
            runq.extend(self._later)
            self._later.clear()
            self._rearm()
        return steps

    def _fire_due(self, now: int) -> None:
        """Move every timer due at ``now`` to the front of the queue, earliest first."""
        fired: list[tuple[Run, Value]] = []
        timers = self._timers
        while timers and timers[0][0] <= now:
            _, _, run, token = heapq.heappop(timers)
            if run is None:
                self._hygiene(now)
            elif token == run.token and not run.done:
                fired.append((run, self._timer_value(run)))
            else:
                self._stale -= 1
        self._runq.extendleft(reversed(fired))

    def _timer_value(self, run: Run) -> Value:
        """What a run is sent when its timer fires, by wait reason (§7, sdk.md §9.1-9.3)."""
        run.token += 1  # the entry was popped: nothing becomes stale
        run.deadline_ns = None
        if run.throttled:
            run.throttled = False
            value, run.resume = run.resume, None
            return value
        wait, run.wait = run.wait, WAIT_NONE
        run.preempts = 0
        if wait == WAIT_HOST and self.hostcalls is not None:
            self.hostcalls.expire(run)
            return (SF_TIMEOUT, self.slice_insns)
        if wait == WAIT_EVENT:
            return (SF_TIMEOUT, self.slice_insns)
        return (0, self.slice_insns)

    def _arm(self, run: Run, deadline_ns: int) -> None:
        self._invalidate(run)
        run.deadline_ns = deadline_ns
        self._seq += 1
        heapq.heappush(self._timers, (deadline_ns, self._seq, run, run.token))

    def _invalidate(self, run: Run) -> None:
        """End the run's current suspension: its armed timer, if any, becomes a stale heap entry."""
        run.token += 1
        if run.deadline_ns is not None:
            run.deadline_ns = None
            self._stale += 1
            if self._stale > 1024 and self._stale * 2 > len(self._timers):
                self._compact_timers()

    def _compact_timers(self) -> None:
        """Drop stale entries (e.g. long event timeouts answered by deliveries) so the heap stays bounded."""
        self._timers = [t for t in self._timers if t[2] is None or (t[3] == t[2].token and not t[2].done)]
        heapq.heapify(self._timers)
        self._stale = 0

    def _drop_stale_timers(self) -> None:
        timers = self._timers
        while timers:
            _, _, run, token = timers[0]
            if run is not None and (run.done or token != run.token):
                heapq.heappop(timers)
                self._stale -= 1
            else:
                break

    # ------------------------------------------------------------------ steps

    def _step(self, run: Run, value: Value) -> int:
        """Send to the guest until it suspends, is requeued, ends or faults; returns fuel spent."""
        gen = run.gen
        if gen is None:
            return 0
        if not run.started:
            run.started = True
            self.on_running(run)
        ctx = run.ctx
        if ctx is not None and ctx.squeezed:  # the memory is whole before the guest runs (``GuestContext.squeeze``)
            ctx.unsqueeze()
        run.slices += 1
        self.total_slices += 1
        budget = self.slice_insns if value is None else value[1]
        spent = 0
        run.stepping = True
        t0 = perf_counter_ns()
        try:
            while True:
                kind, fuel, args = gen.send(value)
                spent += budget - fuel
                budget = fuel  # counted up to here
                if run.stop_requested:
                    break
                try:
                    value = self._dispatch(run, kind, fuel, args)
                except GuestFault as fault:
                    # a suspending helper's guest-side check faulted (e.g. a bad capability pointer):
                    # raise it at the guest's suspension point so the VM fills in function and pc
                    gen.throw(fault)
                    raise  # the generator cannot swallow a fault; defensive
                if value is None or run.stop_requested:
                    break
                budget = value[1]
        except StopIteration as stop:
            spent += _last_work(run, budget)
            self._end(run, Ending(exit_code=_signed(stop.value)))
        except GuestFault as fault:
            spent += _last_work(run, budget)
            self._end(run, Ending(fault=fault))
        except Exception as exc:  # a VM or helper bug: fault INTERNAL (vm.md §8), never escapes
            log.exception("internal error in guest step")
            self._end(run, Ending(fault=GuestFault("INTERNAL", f"internal error: {type(exc).__name__}")))
        finally:
            run.stepping = False
            run.guest_ns += perf_counter_ns() - t0
        return self._account(run, spent)

    def _account(self, run: Run, spent: int) -> int:
        """CPU accounting (§7): fuel → instructions; guest time checked against ``cpu_limit_ms``."""
        run.work += spent
        if spent > run.max_step_work:
            run.max_step_work = spent
        if run.stop_requested and not run.done:  # a deferred stop (see ``cancel``) completes now
            self._close(run)
            run.done = True
            self.on_end(run, Ending())
        elif run.cpu_limit_ns is not None and not run.done and run.guest_ns > run.cpu_limit_ns:
            limit_ms = run.cpu_limit_ns // 1_000_000
            self._close(run)
            self._end(run, Ending(fault=GuestFault("CPU_LIMIT", f"cpu limit exceeded: {limit_ms} ms")))
        return spent

    def _dispatch(self, run: Run, kind: str, fuel: int, args: tuple[int, ...]) -> Value:
        """One suspension request → a value to continue with now, or ``None`` (suspended/requeued)."""
        if kind == PREEMPT:
            return self._preempt(run, fuel)
        if kind == "sf_sleep_ms":
            return self._sleep(run, args[0])
        if kind == "sf_event_next":
            return self._event_next(run, fuel, args[0])
        if kind == "sf_host_call_raw":
            return self._host_call(run, fuel, args)
        if kind == "sf_yield":
            # sdk.md §9.1: back of the run queue once; keeps its fuel; not a wait (no preemption reset)
            self._runq.append((run, (0, fuel)))
            return None
        raise GuestFault("INTERNAL", f"internal error: unknown suspension {kind!r}")

    # vm.md §7 Throttle: 16 preemptions in a row without a real wait → sleep 20 ms, wait stays none
    def _preempt(self, run: Run, fuel: int) -> Value:
        self.total_preemptions += 1
        value = (0, self.slice_insns + fuel)  # the debt carries over (vm/guest.py)
        run.preempts += 1
        if run.preempts < THROTTLE_AFTER:
            self._later.append((run, value))
            return None
        run.preempts = 0
        run.throttles += 1
        self.total_throttles += 1
        run.throttled = True
        run.resume = value
        self._arm(run, self.clock.monotonic_ns() + THROTTLE_NS)
        return None

    # sdk.md §9.1 sf_sleep_ms: clamped to 24 h; wait reason timer
    def _sleep(self, run: Run, ms: int) -> Value:
        run.wait = WAIT_TIMER
        self._arm(run, self.clock.monotonic_ns() + min(ms, MAX_DURATION_MS) * 1_000_000)
        run.ctx.squeeze()
        return None

    # sdk.md §9.2 sf_event_next: a ready event at once (even timeout 0); empty + timeout 0 → SF_TIMEOUT
    def _event_next(self, run: Run, fuel: int, timeout_ms: int) -> Value:
        envelope = run.mailbox.pop()
        if envelope is not None:
            return (run.ctx.event_to_handle(envelope), fuel)
        timeout_ms = min(timeout_ms, MAX_DURATION_MS)
        if timeout_ms == 0:
            return (SF_TIMEOUT, fuel)
        run.wait = WAIT_EVENT
        self._arm(run, self.clock.monotonic_ns() + timeout_ms * 1_000_000)
        run.ctx.squeeze()  # issue 16: a waiting Loop keeps no zero stack bytes
        return None

    # sdk.md §9.3 sf_host_call_raw: guest-side checks by the context, then the host-call router
    def _host_call(self, run: Run, fuel: int, args: tuple[int, ...]) -> Value:
        hostcalls = self.hostcalls
        if hostcalls is None:
            raise GuestFault("INTERNAL", "internal error: no host-call router")
        request = run.ctx.begin_host_call(*args, pending=hostcalls.pending_count, copy=hostcalls.copy_arguments)
        if type(request) is int:
            return (request, fuel)
        r0 = hostcalls.submit(run, request)
        if r0 is not None:
            return (r0, fuel)
        run.wait = WAIT_HOST
        self._arm(run, self.clock.monotonic_ns() + request.timeout_ms * 1_000_000)
        return None

    # ------------------------------------------------------------------ waking, starting, ending

    def start(self, run: Run) -> None:
        """Queue a run's first slice (the generator is sent ``None``)."""
        self._runq.append((run, None))
        self._kick()

    def wake(self, run: Run, r0: int) -> None:
        """End a real wait (event delivered, host reply): fuel refills, the preemption count resets."""
        if run.done or run.wait == WAIT_NONE:
            return
        run.wait = WAIT_NONE
        self._invalidate(run)
        run.preempts = 0
        self._runq.append((run, (r0, self.slice_insns)))
        self._kick()

    def event_arrived(self, run: Run) -> None:
        """A delivery to a run waiting in sf_event_next hands it the oldest envelope (§6.9)."""
        if run.done or run.wait != WAIT_EVENT:
            return
        envelope = run.mailbox.pop()
        if envelope is not None:
            self.wake(run, run.ctx.event_to_handle(envelope))

    def cancel(self, run: Run) -> None:
        """Stop a run at its current suspension point (§7 Cancellation): no guest code runs again."""
        if run.done:
            return
        if run.stepping:  # a host callback asked to stop the guest that is running it
            run.stop_requested = True
            return
        self._close(run)
        run.done = True

    def _close(self, run: Run) -> None:
        self._release_waits(run)
        gen, run.gen = run.gen, None
        if gen is not None:
            try:
                gen.close()
            except Exception:  # closing must never fail the caller
                log.exception("error while closing a guest")

    def _release_waits(self, run: Run) -> None:
        run.wait = WAIT_NONE
        self._invalidate(run)
        run.throttled = False
        run.resume = None
        if self.hostcalls is not None:
            self.hostcalls.cancel(run)

    def _end(self, run: Run, ending: Ending) -> None:
        if run.done:
            return
        self._close(run)  # a fault raised while dispatching leaves the generator suspended
        run.done = True
        self.on_end(run, ending)

    # ------------------------------------------------------------------ memory hygiene

    def note_load(self) -> None:
        """vm.md §7: after ≥ 1,000 loads then 100 ms without one, gc.collect() then gc.freeze()."""
        now = self.clock.monotonic_ns()
        self._loads_in_burst += 1
        self._last_load_ns = now
        if self._loads_in_burst % HYGIENE_LOADS == 0:
            # vm.md §10 load path: freeze each 1,000 loads' survivors so the collector's older generations do
            # not rescan a growing heap during the burst (10,000 loads: ~1.4 s of gc); the quiet-time
            # hygiene below unfreezes, collects everything once (cycles made meanwhile included), refreezes.
            # The young generation is collected first: the cyclic garbage of the loads since the last collection
            # (up to a node's raised young threshold, serve_cmd.NODE_GC_YOUNG) is freed now, while its memory can
            # be reused by the next loads, instead of frozen among them until the hygiene (a collector turned off —
            # a held burst, hold_hygiene — stays unrun)
            if gc.isenabled():
                gc.collect(0)
            gc.freeze()
        if self._loads_in_burst == HYGIENE_LOADS:
            self._arm_hygiene(now + HYGIENE_QUIET_NS)

    def hold_hygiene(self, loads: int = 0) -> None:
        """An embedder starts a burst of loads with pauses of its own between them (a node loading its Loops
        batch by batch, waiting for its store in between): until ``release_hygiene`` no pause counts as the
        quiet that ends the burst, so the collection runs once after it, not once per 1,000 loads.

        ``loads``: the loads the burst will make. From ``HYGIENE_LOADS`` up, the collector is off until the
        release (issue 16: a restart at N = 10,000 spent ~0.2 s of its ~1.1 s load in the collector's automatic
        runs — ~480 young and ~36 middle collections and one full one — over a heap that is almost all live;
        the one collection after such a burst, below, finds whatever cycles they would have freed)."""
        self._bursts += 1
        if loads >= HYGIENE_LOADS:
            if self._gc_holds == 0:
                self._gc_was_enabled = gc.isenabled()
                gc.disable()
            self._gc_holds += 1

    @property
    def hygiene_held(self) -> bool:
        """Whether an embedder's burst is held (``hold_hygiene`` not yet released)."""
        return self._bursts > 0

    def release_hygiene(self, loads: int = 0) -> None:
        """The burst ended (``loads`` as given to ``hold_hygiene``): the 100 ms of quiet count from now."""
        self._bursts = max(0, self._bursts - 1)
        self._last_load_ns = max(self._last_load_ns, self.clock.monotonic_ns())
        if loads >= HYGIENE_LOADS and self._gc_holds > 0:
            self._gc_holds -= 1
            if self._gc_holds == 0 and self._gc_was_enabled:
                gc.enable()

    def _arm_hygiene(self, deadline_ns: int) -> None:
        self._seq += 1
        heapq.heappush(self._timers, (deadline_ns, self._seq, None, 0))
        self._rearm()

    def _hygiene(self, now: int) -> None:
        if self._loads_in_burst < HYGIENE_LOADS:
            return
        quiet_until = self._last_load_ns + HYGIENE_QUIET_NS
        if self._bursts:  # a held burst: look again a quiet period from now
            self._arm_hygiene(now + HYGIENE_QUIET_NS)
            return
        if now < quiet_until:
            self._arm_hygiene(quiet_until)
            return
        if self._runq and now < quiet_until + HYGIENE_MAX_WAIT_NS:
            # the burst's guests are still running their first slices: freezing now would leave the rest
            # (their generators and frames) to be rescanned by the collector's older generations while idle
            self._arm_hygiene(now + HYGIENE_RETRY_NS)
            return
        self._loads_in_burst = 0
        gc.unfreeze()  # the burst's interim freezes (note_load) are collected like everything else
        gc.collect()
        gc.freeze()
        self.gc_freezes += 1
        # issue 16: the burst's garbage (a node's create burst: requests, rows, SQL) is free now but glibc keeps
        # the pages in its arenas (~8 KB per Loop created at N = 1,000, half of it in whole free pages); hand the
        # whole free pages back once per burst, as the collection above hands back Python's
        if _MALLOC_TRIM is not None:
            _MALLOC_TRIM(0)
            self.heap_trims += 1


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim`` (returns free heap pages to the system), None where the C library has none."""
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError, TypeError):
        return None
    return trim


_MALLOC_TRIM = _malloc_trim()
_M_ARENA_MAX = -8  # glibc's mallopt parameter number for the arena limit (malloc.h)


def one_malloc_arena() -> bool:
    """Make every thread of the process allocate from glibc's main arena (``mallopt(M_ARENA_MAX, 1)``); True
    when the C library took it. Call before the process starts its threads: a thread keeps the arena it
    first allocated from.

    issue 16: a node's store threads (aiosqlite's connection threads) each got an arena of their own, and what
    they allocate for a create burst (rows, statements, SQLite's pages) was freed there in fragments no trim
    could return: 12-15 KB per Loop of free memory held in the PSS at N = 500 (mallinfo2 fordblks), 1.3 KB with
    one arena. The threads' Python work runs under the GIL, so one arena costs no lock contention worth having
    several."""
    try:
        mallopt: Callable[[int, int], int] = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, TypeError):
        return False
    return bool(mallopt(_M_ARENA_MAX, 1))


def _last_work(run: Run, budget: int) -> int:
    """vm.md §7: the fuel spent since the last suspension by a guest that just ended (the VM leaves what
    it had left in ``env.fuel_left``, vm/guest.py)."""
    left = getattr(run.ctx, "fuel_left", None)
    return max(0, budget - left) if isinstance(left, int) else 0


def _signed(r0: int) -> int:
    """A guest's r0 (u64) read as signed i64: the exit code (sdk.md §7)."""
    r0 &= 0xFFFF_FFFF_FFFF_FFFF
    return r0 - (1 << 64) if r0 >> 63 else r0
