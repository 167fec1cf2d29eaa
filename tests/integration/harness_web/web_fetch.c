/*
 * web_fetch.c — a test Loop (tests/integration/harness_web): for each event, payload {url}, it calls
 * web.http_request {url, max_bytes: 64} and logs "web <status> <body>" or "web error <code>".
 */
#include <wakeful.h>

static char line[200];
static char text[80];

static sf_u64 put(sf_u64 len, const char *s) {
    while (*s && len < 180)
        line[len++] = *s++;
    return len;
}

SF_MAIN sf_i64 main(void) {
    for (;;) {
        sf_handle ev = sf_event_next(3600000);
        if (ev == SF_TIMEOUT)
            continue;
        if (ev < 0)
            return 0;
        sf_handle payload = sf_json_get(ev, "payload");
        sf_handle args = sf_json_object();
        sf_json_set(args, "url", sf_json_get(payload, "url"));
        sf_json_set(args, "max_bytes", sf_json_number(64));
        sf_handle r = sf_host_call("web.http_request", args, 10000);
        sf_u64 len = put(0, "web ");
        if (r < 0) {
            len = put(len, "failed ");
            len += wf_i64_to_dec(r, line + len, 24);
        } else {
            sf_handle err = sf_json_get(r, "error");
            text[0] = 0;
            if (err > 0) {
                wf_json_get_str(err, "code", text, sizeof text);
                len = put(len, "error ");
                len = put(len, text);
                sf_drop(err);
            } else {
                sf_i64 status = 0;
                wf_json_get_i64(r, "status", &status);
                len += wf_i64_to_dec(status, line + len, 24);
                wf_json_get_str(r, "body", text, sizeof text);
                len = put(len, " ");
                len = put(len, text);
            }
            sf_drop(r);
        }
        sf_log_raw(line, len);
        sf_drop(args);
        sf_drop(payload);
        sf_drop(ev);
    }
}
