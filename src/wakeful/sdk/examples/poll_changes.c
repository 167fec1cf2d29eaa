/*
 * poll_changes.c — poll a read capability, back off on errors, wake only when the answer changed
 * since the last one seen (guide: "Timers and retries", "Config and checkpoints").
 *
 * Calls the embedder tool "service.status" {"service": config.service} every interval. A failed
 * call (SF_HOST_ERROR, SF_TIMEOUT) is retried with exponential backoff and jitter, capped. The
 * "version" it returns is compared with the last one seen, which is checkpointed: the first answer
 * only sets the baseline; a different one wakes the agent with the key "changed:<version>", then
 * becomes the new checkpoint. A reload between the wake and the checkpoint repeats the same key,
 * which the harness answers "duplicate".
 *
 * config: {"service": "api", "interval_ms": 60000}
 *
 * run-arg: --config {"service": "api", "interval_ms": 200}
 */
#include <wakeful.h>

#define TOOL "service.status"
#define MAX_BACKOFF_MS 60000

static char service[64] = "api";
static char seen[64];    /* last version seen ("" = none yet) */
static char current[64]; /* version just read */
static char key[96];

/* service.status {"service": ...} → copies result.version into `current`; 0 or a status. */
static sf_i64 read_version(void) {
    sf_handle args = sf_json_object();
    sf_i64 r = args < 0 ? args : wf_json_set_owned(args, "service", sf_json_string(service));
    if (r == 0) {
        sf_handle result = sf_host_call(TOOL, args, 15000); /* above the tool's own 10 s */
        if (result < 0) {
            r = result;
        } else {
            r = wf_json_get_str(result, "version", current, sizeof current);
            r = r < 0 ? SF_INVALID : 0;
            sf_drop(result);
        }
    }
    if (args > 0)
        sf_drop(args);
    return r;
}

/* loop.state.put {"state": {"last_seen": seen}} */
static sf_i64 checkpoint(void) {
    sf_handle args = sf_json_object();
    sf_handle state = sf_json_object();
    sf_i64 r = (args < 0 || state < 0) ? SF_LIMIT : 0;
    if (r == 0)
        r = wf_json_set_owned(state, "last_seen", sf_json_string(seen));
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

static sf_i64 on_change(void) {
    if (wf_cat(key, sizeof key, wf_cat(key, sizeof key, 0, "changed:"), current) >= sizeof key)
        return SF_LIMIT; /* cannot happen: versions are at most 63 bytes */
    sf_log(key);
    sf_i64 r = wf_notify(key, key);
    if (r < 0)
        return r; /* not woken: keep the old checkpoint, so the next poll tries again */
    memcpy(seen, current, sizeof seen);
    return checkpoint();
}

SF_MAIN sf_i64 main(void) {
    sf_i64 interval = 60000;
    sf_handle cfg = sf_config();
    if (cfg < 0)
        return cfg;
    wf_json_get_i64(cfg, "interval_ms", &interval);
    wf_json_get_str(cfg, "service", service, sizeof service);
    sf_handle state = sf_json_get(cfg, "state");
    if (state > 0) {
        wf_json_get_str(state, "last_seen", seen, sizeof seen);
        sf_drop(state);
    }
    sf_drop(cfg);

    sf_u64 backoff = 0;
    for (;;) {
        sf_i64 r = read_version();
        if (r == SF_CLOSED)
            return 0;
        if (r == SF_DENIED)
            return 2; /* the capability is not granted: a configuration error */
        if (r < 0) {
            backoff = backoff ? backoff * 2 : 500;
            if (backoff > MAX_BACKOFF_MS)
                backoff = MAX_BACKOFF_MS;
            sf_log("service.status failed; backing off");
            if (sf_sleep_ms(backoff + sf_now_mono_ms() % (backoff / 4 + 1)) < 0)
                return 0;
            continue;
        }
        backoff = 0;
        if (seen[0] == 0) {
            memcpy(seen, current, sizeof seen); /* first answer: the baseline, no wake */
            sf_log("baseline recorded");
            r = checkpoint();
        } else if (!wf_str_eq(seen, current)) {
            r = on_change();
        }
        if (r == SF_CLOSED)
            return 0;
        if (sf_sleep_ms((sf_u64)interval) < 0)
            return 0;
    }
}
