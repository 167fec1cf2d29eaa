/* The density guest (benchmarks.md §1.2): the "typical watch Loop" of the density benchmark and of the
 * 150 MB sanity test (vm.md §10). It waits for events forever; each event is acknowledged with one host call.
 *
 * Markers the benchmark rewrites per object:
 *   - data mode: `seed`, a volatile global initialised to 0x1122334455667788;
 *   - imm mode:  the LD_IMM64 constant 0x8877665544332211 compared with the event's `sequence`.
 */
#include <wakeful.h>

volatile sf_u64 seed = 0x1122334455667788ULL;

static sf_u64 wait_timeout_ms(void) {
    return 30000 + seed % 1000;
}

/* Compare the event's payload.sequence with the imm-mode marker (kept by the volatile read below). */
static void check_sequence(sf_handle event) {
    sf_handle payload = sf_json_get(event, "payload");
    sf_i64 sequence = 0;
    if (payload >= 0) {
        if (wf_json_get_i64(payload, "sequence", &sequence) == 0 &&
            (sf_u64)sequence == 0x8877665544332211ULL) {
            seed = seed + 1;
        }
        sf_drop(payload);
    }
}

SF_MAIN sf_i64 main(void) {
    for (;;) {
        sf_handle event = sf_event_next(wait_timeout_ms());
        if (event == SF_TIMEOUT)
            continue;
        if (event == SF_CLOSED)
            return 0;
        if (event < 0)
            return event;
        check_sequence(event);
        sf_handle reply = sf_host_call("benchmark.ack", event, 10000);
        if (reply >= 0)
            sf_drop(reply);
        sf_drop(event);
    }
}
