/*
 * held_ack.c — a test Loop that acknowledges only when told (tests/integration/api, crash safety).
 *
 * Checkpoint {"got": [event ids popped, in order, across incarnations], "acked": [ids it acked]}, continued
 * from config.state. Topic "work": wake the agent with dedup key "work:<event_id>", never ack. Topic
 * "release" {"event_id": X}: ack X (recorded in "acked" when the ack succeeded), then ack itself. Any other
 * topic: ack.
 */
#include <wakeful.h>

static char topic[64];
static char eid[160];
static char target[160];
static char key[200];

static sf_handle load_list(sf_handle st, const char *name) {
    sf_handle old = st > 0 ? sf_json_get(st, name) : 0;
    return old > 0 ? old : sf_json_array();
}

static sf_i64 ack(const char *id) {
    sf_handle args = sf_json_object();
    sf_handle v = sf_json_string(id);
    sf_json_set(args, "event_id", v);
    sf_handle r = sf_host_call("loop.ack", args, 10000);
    if (r > 0)
        sf_drop(r);
    sf_drop(v);
    sf_drop(args);
    return r;
}

SF_MAIN sf_i64 main(void) {
    sf_handle got = 0, acked = 0;
    sf_handle cfg = sf_config();
    if (cfg > 0) {
        sf_handle st = sf_json_get(cfg, "state");
        got = load_list(st, "got");
        acked = load_list(st, "acked");
        if (st > 0)
            sf_drop(st);
        sf_drop(cfg);
    } else {
        got = sf_json_array();
        acked = sf_json_array();
    }
    for (;;) {
        sf_handle ev = sf_event_next(3600000);
        if (ev == SF_TIMEOUT)
            continue;
        if (ev < 0)
            return 0;
        topic[0] = 0;
        eid[0] = 0;
        wf_json_get_str(ev, "topic", topic, sizeof topic);
        wf_json_get_str(ev, "event_id", eid, sizeof eid);
        sf_handle id = sf_json_string(eid);
        sf_json_push(got, id);
        if (wf_str_eq(topic, "work")) {
            memcpy(key, "work:", 5);
            memcpy(key + 5, eid, sf_strlen(eid) + 1);
            sf_handle text = sf_json_string(key);
            sf_handle args = sf_json_object();
            sf_json_set(args, "text", text);
            sf_json_set(args, "dedup_key", text);
            sf_handle w = sf_host_call("agent.notify", args, 10000);
            if (w > 0)
                sf_drop(w);
            sf_drop(args);
            sf_drop(text);
        }
        if (wf_str_eq(topic, "release")) {
            sf_handle payload = sf_json_get(ev, "payload");
            target[0] = 0;
            wf_json_get_str(payload, "event_id", target, sizeof target);
            if (payload > 0)
                sf_drop(payload);
            if (ack(target) > 0) {
                sf_handle t = sf_json_string(target);
                sf_json_push(acked, t);
                sf_drop(t);
            }
        }
        sf_handle state = sf_json_object();
        sf_json_set(state, "got", got);
        sf_json_set(state, "acked", acked);
        sf_handle put = sf_json_object();
        sf_json_set(put, "state", state);
        sf_handle r = sf_host_call("loop.state.put", put, 10000);
        if (r > 0)
            sf_drop(r);
        sf_drop(put);
        sf_drop(state);
        if (!wf_str_eq(topic, "work"))
            ack(eid);
        sf_drop(id);
        sf_drop(ev);
    }
}
