/*
 * cluster_echo.c — the Loop of the cluster tests (tests/integration/cluster/).
 *
 * For every event: optionally sleep payload.sleep_ms, then checkpoint {"inc": <incarnation>, "last": <event id>},
 * notify the agent with dedup_key = the event id (a wake derived from the event, as sdk.md teaches), optionally
 * sleep payload.ack_after_ms, and ack it.
 * Each step logs "<step> <event id> -> <status or 1>" so a test can see refused calls.
 */
#include <wakeful.h>

static char id[160];
static char line[256];
static char digits[24];

static void log_step(const char *step, sf_i64 r) {
    sf_u64 len = 0;
    while (*step && len < 20)
        line[len++] = *step++;
    line[len++] = ' ';
    for (sf_u64 i = 0; id[i] && len < 200; i++)
        line[len++] = id[i];
    line[len++] = ' ';
    line[len++] = '-';
    line[len++] = '>';
    line[len++] = ' ';
    sf_u64 d = wf_i64_to_dec(r < 0 ? r : 1, digits, sizeof digits);
    for (sf_u64 i = 0; i < d; i++)
        line[len++] = digits[i];
    sf_log_raw(line, len);
}

static sf_i64 call(const char *cap, sf_handle args) {
    sf_handle r = sf_host_call(cap, args, 10000);
    if (r > 0)
        sf_drop(r);
    return r;
}

SF_MAIN sf_i64 main(void) {
    sf_i64 incarnation = 0;
    sf_handle cfg = sf_config();
    if (cfg > 0) {
        wf_json_get_i64(cfg, "incarnation", &incarnation);
        sf_drop(cfg);
    }
    for (;;) {
        sf_handle ev = sf_event_next(3600000);
        if (ev == SF_TIMEOUT)
            continue;
        if (ev < 0)
            return 0;
        id[0] = 0;
        wf_json_get_str(ev, "event_id", id, sizeof id);
        sf_i64 delay = 0;
        sf_i64 ack_after = 0;
        sf_handle payload = sf_json_get(ev, "payload");
        if (payload > 0) {
            wf_json_get_i64(payload, "sleep_ms", &delay);
            wf_json_get_i64(payload, "ack_after_ms", &ack_after);
            sf_drop(payload);
        }
        if (delay > 0)
            sf_sleep_ms((sf_u64)delay);
        sf_handle idv = sf_json_string(id);

        sf_handle st = sf_json_object();
        sf_handle inner = sf_json_object();
        sf_handle incv = sf_json_number(incarnation);
        sf_json_set(inner, "inc", incv);
        sf_json_set(inner, "last", idv);
        sf_json_set(st, "state", inner);
        log_step("put", call("loop.state.put", st));
        sf_drop(incv);
        sf_drop(inner);
        sf_drop(st);

        sf_handle n = sf_json_object();
        sf_json_set(n, "content", idv);
        sf_json_set(n, "dedup_key", idv);
        log_step("notify", call("agent.notify", n));
        sf_drop(n);
        if (ack_after > 0)
            sf_sleep_ms((sf_u64)ack_after);

        sf_handle a = sf_json_object();
        sf_json_set(a, "event_id", idv);
        log_step("ack", call("loop.ack", a));
        sf_drop(a);
        sf_drop(idv);
        sf_drop(ev);
    }
}
