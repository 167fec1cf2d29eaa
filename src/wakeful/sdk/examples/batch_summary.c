/*
 * batch_summary.c — batch many events into one summary wake per window (guide: "Wakes", "Events").
 *
 * Events {"topic": "job.done", "payload": {"job": "build-17", "ok": true}} are counted, not
 * forwarded. Each event updates the counters, the counters are checkpointed, and only then is the
 * event acked — so a reload never loses a counted event and never counts an acked one twice.
 * When the window (config.window_ms) ends and it saw anything, one wake summarises it, with the
 * dedup key "summary:<first event id of the window>" so a replayed window deduplicates.
 *
 * config: {"window_ms": 600000}
 *
 * run-arg: --config {"window_ms": 1500}
 * run-arg: --event job.done={"job": "build-17", "ok": true}
 * run-arg: --event job.done={"job": "build-18", "ok": false}
 * run-arg: --event job.done={"job": "deploy-3", "ok": true}
 * run-arg: --event job.done={"job": "build-19", "ok": true}
 */
#include <wakeful.h>

static sf_i64 ok_count, failed_count;
static char first_id[136]; /* event id that opened the window ("" = empty window) */
static char text[160];
static char key[160];

/* loop.state.put {"state": {"ok", "failed", "first_id"}} */
static sf_i64 checkpoint(void) {
    sf_handle args = sf_json_object();
    sf_handle state = sf_json_object();
    sf_i64 r = (args < 0 || state < 0) ? SF_LIMIT : 0;
    if (r == 0)
        r = wf_json_set_owned(state, "ok", sf_json_number(ok_count));
    if (r == 0)
        r = wf_json_set_owned(state, "failed", sf_json_number(failed_count));
    if (r == 0)
        r = wf_json_set_owned(state, "first_id", sf_json_string(first_id));
    if (r == 0)
        r = sf_json_set(args, "state", state);
    if (r == 0)
        r = wf_call("loop.state.put", args, 10000);
    if (state > 0)
        sf_drop(state);
    if (args > 0)
        sf_drop(args);
    return r;
}

/* Count one event, checkpoint, then ack it. */
static sf_i64 take(sf_handle ev) {
    sf_handle payload = sf_json_get(ev, "payload");
    sf_i64 ok = wf_json_get_bool(payload, "ok");
    if (payload > 0)
        sf_drop(payload);
    if (ok == 1)
        ok_count++;
    else
        failed_count++; /* a missing or non-boolean "ok" counts as a failure */
    if (first_id[0] == 0)
        wf_json_get_str(ev, "event_id", first_id, sizeof first_id);
    sf_i64 r = checkpoint();
    return r < 0 ? r : wf_ack(ev);
}

/* One wake for the whole window, then an empty window. */
static sf_i64 flush(void) {
    sf_u64 n = wf_cat_i64(text, sizeof text, 0, ok_count + failed_count);
    n = wf_cat(text, sizeof text, n, " jobs finished in the last window, ");
    n = wf_cat_i64(text, sizeof text, n, failed_count);
    wf_cat(text, sizeof text, n, " failed");
    if (wf_cat(key, sizeof key, wf_cat(key, sizeof key, 0, "summary:"), first_id) >= sizeof key)
        return SF_LIMIT; /* cannot happen with ids of at most 128 bytes; a cut key could collide */
    sf_log(text);
    sf_i64 r = wf_notify(text, key);
    if (r < 0)
        return r; /* keep the window; the next flush retries with the same key */
    ok_count = failed_count = 0;
    first_id[0] = 0;
    return checkpoint();
}

SF_MAIN sf_i64 main(void) {
    sf_i64 window = 600000;
    sf_handle cfg = sf_config();
    if (cfg < 0)
        return cfg;
    wf_json_get_i64(cfg, "window_ms", &window);
    sf_handle state = sf_json_get(cfg, "state");
    if (state > 0) {
        wf_json_get_i64(state, "ok", &ok_count);
        wf_json_get_i64(state, "failed", &failed_count);
        wf_json_get_str(state, "first_id", first_id, sizeof first_id);
        sf_drop(state);
    }
    sf_drop(cfg);

    sf_u64 window_end = sf_now_mono_ms() + (sf_u64)window;
    for (;;) {
        sf_u64 now = sf_now_mono_ms();
        if (now >= window_end) {
            sf_i64 r = first_id[0] ? flush() : 0;
            if (r == SF_CLOSED)
                return 0;
            if (r == SF_DENIED)
                return 2;
            window_end = now + (sf_u64)window;
            continue;
        }
        sf_handle ev = sf_event_next(window_end - now);
        if (ev == SF_TIMEOUT)
            continue;
        if (ev < 0)
            return ev == SF_CLOSED ? 0 : ev;
        sf_i64 r = take(ev);
        sf_drop(ev);
        if (r == SF_CLOSED)
            return 0;
        if (r < 0)
            return 3; /* not acked: the event stays pending and is replayed after a resume */
    }
}
