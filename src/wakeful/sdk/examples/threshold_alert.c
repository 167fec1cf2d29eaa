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
static sf_u64 text_len;

SF_INLINE void put(const char *s) {
    while (*s && text_len < sizeof text - 1)
        text[text_len++] = *s++;
    text[text_len] = 0;
}

SF_INLINE void put_i64(sf_i64 v) {
    char digits[24];
    wf_i64_to_dec(v, digits, sizeof digits);
    put(digits);
}

/* One capability call with a one-member object {name: value}; drops everything, returns 0 or a status. */
static sf_i64 call1(const char *cap, const char *name, sf_handle value) {
    sf_handle args = sf_json_object();
    if (args < 0)
        return args;
    sf_i64 r = sf_json_set(args, name, value);
    if (r == 0) {
        sf_handle reply = sf_host_call(cap, args, 10000);
        r = reply < 0 ? reply : 0;
        if (reply > 0)
            sf_drop(reply);
    }
    sf_drop(args);
    return r;
}

/* agent.notify {text, dedup_key}; "duplicate" is success too. */
static sf_i64 notify(const char *message, const char *dedup_key) {
    sf_handle args = sf_json_object();
    sf_handle t = sf_json_string(message);
    sf_handle k = sf_json_string(dedup_key);
    sf_i64 r = (args < 0 || t < 0 || k < 0) ? SF_LIMIT : 0;
    if (r == 0)
        r = sf_json_set(args, "text", t);
    if (r == 0)
        r = sf_json_set(args, "dedup_key", k);
    if (r == 0) {
        sf_handle reply = sf_host_call("agent.notify", args, 10000);
        r = reply < 0 ? reply : 0;
        if (reply > 0)
            sf_drop(reply);
    }
    if (k > 0)
        sf_drop(k);
    if (t > 0)
        sf_drop(t);
    if (args > 0)
        sf_drop(args);
    return r;
}

/* Retry a wake a few times with backoff; SF_CLOSED and SF_DENIED are final. */
static sf_i64 notify_with_retry(const char *message, const char *dedup_key) {
    sf_u64 delay = 500;
    for (int attempt = 0; attempt < 4; attempt++) {
        sf_i64 r = notify(message, dedup_key);
        if (r == 0 || r == SF_CLOSED || r == SF_DENIED)
            return r;
        sf_sleep_ms(delay + sf_now_mono_ms() % (delay / 4 + 1));
        delay *= 2;
    }
    return SF_HOST_ERROR;
}

static sf_i64 save_above(sf_i64 above) {
    sf_handle state = sf_json_object();
    sf_handle flag = sf_json_boolean((sf_u64)above);
    sf_i64 r = (state < 0 || flag < 0) ? SF_LIMIT : sf_json_set(state, "above", flag);
    if (r == 0)
        r = call1("loop.state.put", "state", state);
    if (flag > 0)
        sf_drop(flag);
    if (state > 0)
        sf_drop(state);
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
        text_len = 0;
        put(name);
        put(" is ");
        put_i64(value);
        put(", above ");
        put_i64(threshold);
        wf_json_get_str(ev, "event_id", event_id, sizeof event_id);
        memcpy(key, "above:", 7);
        memcpy(key + 6, event_id, sf_strlen(event_id) + 1);
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
        if (r == 0) {
            sf_handle id = sf_json_get(ev, "event_id");
            r = call1("loop.ack", "event_id", id);
            if (id > 0)
                sf_drop(id);
        }
        sf_drop(ev);
        if (r == SF_CLOSED)
            return 0;
        if (r == SF_DENIED)
            return 2;
        if (r < 0)
            return 3; /* could not wake the agent: the event stays pending; exiting tells the agent */
    }
}
