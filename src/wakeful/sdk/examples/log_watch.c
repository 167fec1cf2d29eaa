/*
 * log_watch.c — wake on error log lines that mention a pattern, once per distinct line
 * (guide: "Text and numbers", "Wakes", "Patterns").
 *
 * Events {"topic": "log", "payload": {"service": "api", "level": "ERROR", "line": "..."}}. A line
 * wakes the agent when its level is "error" in any letter case, it contains config.pattern, and it
 * does not end with config.ignore_suffix (a line the service says it recovers from itself). The
 * dedup key is "line:<hex hash of service and line>": stable per distinct line, so the same failure
 * logged again (or replayed after a reload) is a duplicate, not a second wake. Every event is acked
 * after it was handled; a wake that cannot be sent leaves the event pending and ends the Loop.
 *
 * config: {"pattern": "timeout", "ignore_suffix": "(retrying)"}
 *
 * run-arg: --config {"pattern": "timeout", "ignore_suffix": "(retrying)"}
 * run-arg: --event log={"service": "api", "level": "info", "line": "request timeout budget is 30s"}
 * run-arg: --event log={"service": "api", "level": "ERROR", "line": "upstream timeout after 30s"}
 * run-arg: --event log={"service": "api", "level": "Error", "line": "upstream timeout after 30s (retrying)"}
 * run-arg: --event log={"service": "db", "level": "error", "line": "disk full"}
 * run-arg: --event log={"service": "api", "level": "error", "line": "upstream timeout after 30s"}
 */
#include <wakeful.h>

static char pattern[64] = "timeout";
static char ignore_suffix[64];
static char service[64];
static char level[16];
static char line[1024];
static char text[1200];
static char key[40];

/* FNV-1a, 64 bits, over the n bytes at s, continuing from h (start with 14695981039346656037). */
SF_INLINE sf_u64 fnv1a(sf_u64 h, const char *s, sf_u64 n) {
    for (sf_u64 i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

/* 1 when the line should wake the agent. */
static int interesting(void) {
    if (!wf_str_ieq(level, "error"))
        return 0;
    if (wf_str_find(line, pattern) < 0)
        return 0;
    return !(ignore_suffix[0] && wf_str_ends_with(line, ignore_suffix));
}

/* Handle one log event; 0 when it may be acked. */
static sf_i64 handle(sf_handle ev) {
    sf_handle payload = sf_json_get(ev, "payload");
    /* SF_LIMIT means "cut": the NUL-terminated prefix is kept and is still worth checking */
    sf_i64 got_line = payload < 0 ? payload : wf_json_get_str(payload, "line", line, sizeof line);
    sf_i64 got_level = payload < 0 ? payload : wf_json_get_str(payload, "level", level, sizeof level);
    if (payload > 0 && wf_json_get_str(payload, "service", service, sizeof service) < 0)
        memcpy(service, "unknown", 8);
    if (payload > 0)
        sf_drop(payload);
    if ((got_line < 0 && got_line != SF_LIMIT) || (got_level < 0 && got_level != SF_LIMIT)) {
        sf_log("log event without line or level: ignored");
        return 0; /* malformed: it will never get better, ack it */
    }
    if (!interesting())
        return 0;
    sf_u64 h = fnv1a(14695981039346656037ULL, service, sf_strlen(service));
    h = fnv1a(h, "\n", 1);
    h = fnv1a(h, line, sf_strlen(line));
    wf_cat_hex(key, sizeof key, wf_cat(key, sizeof key, 0, "line:"), h); /* 5 + 16 bytes: always fits */
    sf_u64 n = wf_cat(text, sizeof text, 0, service);
    n = wf_cat(text, sizeof text, n, ": ");
    wf_cat(text, sizeof text, n, line);
    sf_log(key);
    return wf_notify(text, key); /* queued or duplicate: 0 */
}

SF_MAIN sf_i64 main(void) {
    sf_handle cfg = sf_config();
    if (cfg < 0)
        return cfg;
    wf_json_get_str(cfg, "pattern", pattern, sizeof pattern);
    wf_json_get_str(cfg, "ignore_suffix", ignore_suffix, sizeof ignore_suffix);
    sf_drop(cfg);

    for (;;) {
        sf_handle ev = sf_event_next(3600000);
        if (ev == SF_TIMEOUT)
            continue;
        if (ev < 0)
            return ev == SF_CLOSED ? 0 : ev;
        sf_i64 r = handle(ev);
        if (r == 0)
            r = wf_ack(ev);
        sf_drop(ev);
        if (r == SF_CLOSED)
            return 0;
        if (r == SF_DENIED)
            return 2;
        if (r < 0)
            return 3; /* the event stays pending; exiting tells the agent */
    }
}
