/*
 * loop_driver.c — a test Loop steered by its events (harness tests, tests/support/loops_harness.py).
 *
 * On start it logs "config <json>" (so tests see loop_id, incarnation and the checkpoint in `state`).
 * config.start_fault = N (N > 0): read address N at start (a fault before the first event).
 * Events: "call" {cap, args} → sf_host_call(cap, args) and log "call <cap> -> <status or handle kind>";
 *         "exit" {code} → return code; "fault" {addr} → read that address (a memory fault).
 */
#include <wakeful.h>

static char topic[32];
static char cap[64];
static char line[1200];
static char digits[24];

static void log_line(const char *a, const char *b, sf_i64 n) {
    sf_u64 len = 0;
    while (*a && len < 100)
        line[len++] = *a++;
    while (*b && len < 200)
        line[len++] = *b++;
    line[len++] = ' ';
    line[len++] = '-';
    line[len++] = '>';
    line[len++] = ' ';
    sf_u64 d = wf_i64_to_dec(n, digits, sizeof digits);
    for (sf_u64 i = 0; i < d; i++)
        line[len++] = digits[i];
    sf_log_raw(line, len);
}

static void log_config(sf_handle cfg) {
    sf_handle text = sf_json_dump(cfg);
    if (text < 0)
        return;
    memcpy(line, "config ", 7);
    sf_i64 n = sf_bytes_read(text, 0, line + 7, sizeof line - 8);
    sf_drop(text);
    if (n >= 0)
        sf_log_raw(line, 7 + (sf_u64)n);
}

static sf_i64 read_at(sf_i64 addr) {
    volatile sf_u64 *p = (volatile sf_u64 *)(sf_u64)addr;
    return (sf_i64)*p;
}

SF_MAIN sf_i64 main(void) {
    sf_i64 start_fault = 0;
    sf_handle cfg = sf_config();
    if (cfg > 0) {
        log_config(cfg);
        wf_json_get_i64(cfg, "start_fault", &start_fault);
        sf_drop(cfg);
    }
    if (start_fault > 0)
        return read_at(start_fault);
    for (;;) {
        sf_handle ev = sf_event_next(3600000);
        if (ev == SF_TIMEOUT)
            continue;
        if (ev < 0)
            return 0;
        topic[0] = 0;
        wf_json_get_str(ev, "topic", topic, sizeof topic);
        sf_handle payload = sf_json_get(ev, "payload");
        if (wf_str_eq(topic, "exit")) {
            sf_i64 code = 0;
            wf_json_get_i64(payload, "code", &code);
            return code;
        }
        if (wf_str_eq(topic, "fault")) {
            sf_i64 addr = 8;
            wf_json_get_i64(payload, "addr", &addr);
            return read_at(addr);
        }
        if (wf_str_eq(topic, "call")) {
            cap[0] = 0;
            wf_json_get_str(payload, "cap", cap, sizeof cap);
            sf_handle args = sf_json_get(payload, "args");
            sf_handle r = sf_host_call(cap, args, 10000);
            log_line("call ", cap, r < 0 ? r : 1);
            if (r > 0)
                sf_drop(r);
            if (args > 0)
                sf_drop(args);
        }
        if (payload > 0)
            sf_drop(payload);
        sf_drop(ev);
    }
}
