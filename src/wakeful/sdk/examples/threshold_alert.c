/*
 * threshold_alert.c — alert when a metric crosses a threshold, once per occurrence
 * (guide: "Events", "Wakes").
 *
 * Events {"topic": "metric", "payload": {"name": "cpu", "value": 93}}. When a value goes above
 * config.threshold after being at or below it, the Loop wakes its agent with the dedup key
 * "above:<event_id>": fresh per occurrence, but the same for a replay of the same event, so a
 * reload that sees the event again produces a duplicate, not a second wake. Each event is acked
 * only after it was handled. Whether the metric is above is checkpointed, so a reload does not
 * re-alert on a level it already reported.
 *
 * config: {"threshold": 90}
 *
 * run-arg: --config {"threshold": 90}
 * run-arg: --event metric={"name": "cpu", "value": 50}
 * run-arg: --event metric={"name": "cpu", "value": 95}
 * run-arg: --event metric={"name": "cpu", "value": 97}
 * run-arg: --event metric={"name": "cpu", "value": 40}
 * run-arg: --event metric={"name": "cpu", "value": 99}
 */
#include <wakeful.h>

static char event_id[136];
static char key[160];
static char text[200];

/* Retry a wake a few times with backoff; SF_CLOSED and SF_DENIED are final. */
static sf_i64 notify_with_retry(const char *message, const char *dedup_key) {
    sf_u64 delay = 500;
    for (int attempt = 0; attempt < 4; attempt++) {
        sf_i64 r = wf_notify(message, dedup_key); /* queued or duplicate: 0 */
        if (r == 0 || r == SF_CLOSED || r == SF_DENIED)
            return r;
        sf_sleep_ms(delay + sf_now_mono_ms() % (delay / 4 + 1));
        delay *= 2;
    }
    return SF_HOST_ERROR;
}

/* loop.state.put {"state": {"above": above}} */
static sf_i64 save_above(sf_i64 above) {
    sf_handle args = sf_json_object();
    sf_handle state = sf_json_object();
    sf_i64 r = (args < 0 || state < 0) ? SF_LIMIT : 0;
    if (r == 0)
        r = wf_json_set_owned(state, "above", sf_json_boolean((sf_u64)above));
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

/* Handle one metric event; 0 when it may be acked. */
static sf_i64 handle(sf_handle ev, sf_i64 threshold, sf_i64 *above) {
    sf_handle payload = sf_json_get(ev, "payload");
    sf_i64 value = 0;
    sf_i64 r = wf_json_get_i64(payload, "value", &value);
    if (r < 0) {
        sf_log("metric without an integer value: ignored");
        if (payload > 0)
            sf_drop(payload);
        return 0; /* a malformed event will never get better: ack it */
    }
    char name[64];
    if (wf_json_get_str(payload, "name", name, sizeof name) < 0)
        memcpy(name, "metric", 7);
    sf_drop(payload);

    sf_i64 now_above = value > threshold;
    if (now_above && !*above) {
        /* "cpu is 95, above 90"; a text that did not fit keeps its prefix, good enough for a wake */
        sf_u64 n = wf_cat(text, sizeof text, 0, name);
        n = wf_cat(text, sizeof text, n, " is ");
        n = wf_cat_i64(text, sizeof text, n, value);
        n = wf_cat(text, sizeof text, n, ", above ");
        wf_cat_i64(text, sizeof text, n, threshold);
        /* "above:<event_id>": the key must be whole, or two occurrences could share it */
        if (wf_json_get_str(ev, "event_id", event_id, sizeof event_id) < 0)
            return SF_INVALID;
        if (wf_cat(key, sizeof key, wf_cat(key, sizeof key, 0, "above:"), event_id) >= sizeof key)
            return SF_LIMIT;
        sf_log(text);
        r = notify_with_retry(text, key);
        if (r < 0)
            return r;
    }
    if (now_above != *above) {
        *above = now_above;
        save_above(now_above); /* checkpoint before the ack that consumes the event */
    }
    return 0;
}

SF_MAIN sf_i64 main(void) {
    sf_i64 threshold = 90, above = 0;
    sf_handle cfg = sf_config();
    if (cfg < 0)
        return cfg;
    wf_json_get_i64(cfg, "threshold", &threshold);
    sf_handle state = sf_json_get(cfg, "state");
    if (state > 0) {
        sf_i64 b = wf_json_get_bool(state, "above");
        above = b == 1;
        sf_drop(state);
    }
    sf_drop(cfg);

    for (;;) {
        sf_handle ev = sf_event_next(3600000);
        if (ev == SF_TIMEOUT)
            continue;
        if (ev < 0)
            return ev == SF_CLOSED ? 0 : ev;
        sf_i64 r = handle(ev, threshold, &above);
        if (r == 0)
            r = wf_ack(ev); /* last, after the wake and the checkpoint */
        sf_drop(ev);
        if (r == SF_CLOSED)
            return 0;
        if (r == SF_DENIED)
            return 2;
        if (r < 0)
            return 3; /* could not wake the agent: the event stays pending; exiting tells the agent */
    }
}
