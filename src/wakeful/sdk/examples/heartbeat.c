/*
 * heartbeat.c — a timer Loop with a checkpointed counter (guide: "Shape", "Config and checkpoints").
 *
 * Every interval it logs "heartbeat N" and stores {"beats": N} with loop.state.put, so a reload
 * (fault, restart, resume) continues counting from the checkpoint instead of from zero.
 *
 * config: {"interval_ms": 1000, "max_beats": 0}   (max_beats 0 = beat forever, as a Loop does)
 *
 * run-arg: --config {"interval_ms": 1000, "max_beats": 3}
 */
#include <wakeful.h>

static char line[64];

/* loop.state.put {"state": {"beats": beats}}; 0 or a status. Drops every handle it makes. */
static sf_i64 checkpoint(sf_i64 beats) {
    sf_handle args = sf_json_object();
    sf_handle state = sf_json_object();
    sf_handle count = sf_json_number(beats);
    sf_i64 r = (args < 0 || state < 0 || count < 0) ? SF_LIMIT : 0;
    if (r == 0)
        r = sf_json_set(state, "beats", count);
    if (r == 0)
        r = sf_json_set(args, "state", state);
    if (r == 0) {
        sf_handle reply = sf_host_call("loop.state.put", args, 10000);
        r = reply < 0 ? reply : 0;
        if (reply > 0)
            sf_drop(reply);
    }
    if (count > 0)
        sf_drop(count);
    if (state > 0)
        sf_drop(state);
    if (args > 0)
        sf_drop(args);
    return r;
}

SF_MAIN sf_i64 main(void) {
    sf_i64 interval = 1000, max_beats = 0, beats = 0;
    sf_handle cfg = sf_config();
    if (cfg < 0)
        return cfg;
    wf_json_get_i64(cfg, "interval_ms", &interval); /* keeps the default when absent */
    wf_json_get_i64(cfg, "max_beats", &max_beats);
    sf_handle state = sf_json_get(cfg, "state"); /* null on the first start */
    if (state > 0) {
        wf_json_get_i64(state, "beats", &beats);
        sf_drop(state);
    }
    sf_drop(cfg);
    if (interval < 10)
        interval = 10;

    for (;;) {
        if (sf_sleep_ms((sf_u64)interval) < 0)
            return 0;
        beats++;
        sf_u64 n = wf_i64_to_dec(beats, line + 10, sizeof line - 10);
        memcpy(line, "heartbeat ", 10);
        sf_log_raw(line, 10 + n);
        sf_i64 r = checkpoint(beats);
        if (r == SF_CLOSED)
            return 0; /* being stopped */
        if (r == SF_DENIED)
            return 2; /* not allowed to checkpoint: a configuration error */
        /* SF_HOST_ERROR / SF_TIMEOUT: the next beat checkpoints again */
        if (max_beats > 0 && beats >= max_beats)
            return 0;
    }
}
