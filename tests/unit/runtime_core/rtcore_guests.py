"""C guests and small drivers shared by the runtime-core tests (compiled with the `compile_c` fixture).

Every guest reads its parameters from the load-time config through `cfg()`, so one ELF serves many tests.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from wakeful.runtime import ManualClock, Runtime, RuntimeOptions

PRELUDE = r"""
#include <wakeful.h>

static sf_i64 cfg(const char *key, sf_i64 fallback) {
    sf_handle c = sf_config();
    sf_i64 v = fallback;
    if (c >= 0) {
        if (wf_json_get_i64(c, key, &v) != 0)
            v = fallback;
        sf_drop(c);
    }
    return v;
}
"""

SPIN = PRELUDE + r"""
volatile sf_u64 counter;
SF_MAIN sf_i64 main(void) {
    for (;;)
        counter++;
}
"""

NESTED_SPIN = PRELUDE + r"""
volatile sf_u64 counter;
SF_MAIN sf_i64 main(void) {
    for (;;)
        for (sf_u64 i = 0; i < 1000; i++)
            for (sf_u64 j = 0; j < 1000; j++)
                counter += i ^ j;
}
"""

YIELD_SPIN = PRELUDE + r"""
volatile sf_u64 counter;
SF_MAIN sf_i64 main(void) {
    for (;;) {
        counter++;
        sf_yield();
    }
}
"""

COUNT = PRELUDE + r"""
volatile sf_u64 acc;
SF_MAIN sf_i64 main(void) {
    sf_u64 n = (sf_u64)cfg("n", 1000000000);
    for (sf_u64 i = 0; i < n; i++)
        acc += i;
    return (sf_i64)acc;
}
"""

SLEEPER = PRELUDE + r"""
volatile sf_u64 ticks;
SF_MAIN sf_i64 main(void) {
    sf_u64 period = (sf_u64)cfg("period_ms", 10);
    sf_i64 rounds = cfg("rounds", -1);
    for (sf_i64 r = 0; rounds < 0 || r < rounds; r++) {
        sf_sleep_ms(period);
        ticks++;
    }
    return (sf_i64)ticks;
}
"""

# vm.md §9.1 item 25: maximal sf_json_parse / sf_json_dump / sf_json_set_raw calls in a loop
JSON_LOOP = PRELUDE + r"""
static char text[16384];
SF_MAIN sf_i64 main(void) {
    sf_u64 n = 0;
    text[n++] = '[';
    for (int i = 0; i < 4095; i++) {
        text[n++] = '1'; text[n++] = '0'; text[n++] = '0'; text[n++] = ',';
    }
    text[n - 1] = ']';
    sf_handle holder = sf_json_object();
    for (;;) {
        sf_handle v = sf_json_parse(text, n);
        sf_handle d = sf_json_dump(v);
        sf_json_set_raw(holder, "a", 1, v);
        sf_drop(d);
        sf_drop(v);
    }
}
"""

# vm.md §9.1 item 9: 8 levels of straight-line functions, each calling the next 500 times
CALL_BOMB = PRELUDE + r"""
#define R5(x) x x x x x
#define R500(x) R5(R5(R5(x x x x)))
volatile sf_u64 leaf_calls;
static __attribute__((noinline)) void f7(void) { leaf_calls++; }
static __attribute__((noinline)) void f6(void) { R500(f7();) }
static __attribute__((noinline)) void f5(void) { R500(f6();) }
static __attribute__((noinline)) void f4(void) { R500(f5();) }
static __attribute__((noinline)) void f3(void) { R500(f4();) }
static __attribute__((noinline)) void f2(void) { R500(f3();) }
static __attribute__((noinline)) void f1(void) { R500(f2();) }
SF_MAIN sf_i64 main(void) {
    f1();
    return 0;
}
"""

WRITE_FAULT = PRELUDE + r"""
SF_MAIN sf_i64 main(void) {
    sf_sleep_ms((sf_u64)cfg("delay_ms", 0));
    *(volatile sf_u64 *)(sf_u64)cfg("address", 8) = 1;
    return 0;
}
"""

EXIT_CODE = PRELUDE + r"""
SF_MAIN sf_i64 main(void) {
    return cfg("code", 7);
}
"""

# Pops `count` events (timeout `timeout_ms` each); each envelope goes to the host as `sink`'s params.
EVENT_SINK = PRELUDE + r"""
SF_MAIN sf_i64 main(void) {
    sf_i64 count = cfg("count", 1);
    sf_u64 timeout = (sf_u64)cfg("timeout_ms", 60000);
    for (sf_i64 i = 0; i < count; i++) {
        sf_handle ev = sf_event_next(timeout);
        if (ev < 0)
            return ev;
        sf_handle r = sf_host_call("sink", ev, 10000);
        if (r >= 0)
            sf_drop(r);
        sf_drop(ev);
    }
    return count;
}
"""

# One host call to `cap` with params {"x": x}; returns result.v + 1, or the status.
HOST_CALLER = PRELUDE + r"""
SF_MAIN sf_i64 main(void) {
    sf_handle p = sf_json_object();
    sf_handle x = sf_json_number(cfg("x", 1));
    sf_json_set(p, "x", x);
    sf_drop(x);
    sf_handle r = sf_host_call("cap", p, (sf_u64)cfg("timeout_ms", 1000));
    sf_drop(p);
    if (r < 0)
        return r;
    sf_i64 v = 0;
    sf_i64 st = wf_json_get_i64(r, "v", &v);
    sf_drop(r);
    return st < 0 ? st : v + 1;
}
"""


def refuse(call: Any) -> Any:
    raise AssertionError(f"unexpected host call {call}")


def make_runtime(
    clock: ManualClock | None = None,
    handler: Callable[[Any], Any] = refuse,
    **options: Any,
) -> Runtime:
    """A runtime on a manual clock: nothing runs until the test calls ``run_batch``."""
    return Runtime(RuntimeOptions(**options), host_handler=handler, clock=clock or ManualClock())


def load_started(rt: Runtime, elf: bytes, **load: Any) -> str:
    status = rt.load_nowait(elf, **load)
    rt.start_nowait(status.object_id)
    return status.object_id


def settle(rt: Runtime, clock: ManualClock, *, until: Callable[[], bool], step_ms: float = 1.0,
           max_batches: int = 10_000) -> int:
    """Advance the clock and run batches until ``until()``; returns the batches run."""
    for n in range(1, max_batches + 1):
        clock.advance(ms=step_ms)
        rt.run_batch()
        if until():
            return n
    raise AssertionError(f"condition not reached after {max_batches} batches")
