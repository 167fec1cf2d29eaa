/*
 * ingress_counter.c — a test Loop for event intake (tests/support/ingress_harness.py).
 *
 * Every event it pops is appended to the array `seen` in its checkpoint (loop.state.put, before the ack), so
 * the checkpoint is the delivery order across incarnations: on start it continues the array from
 * config.state.seen. Topic "hold": seen, never acked. Topic "wake": agent.notify with dedup key
 * "ev:<event_id>" (a key derived from the event, sdk.md), then ack. Any other topic: ack.
 */
#include <wakeful.h>

static char topic[64];
static char eid[160];
static char key[200];

SF_MAIN sf_i64 main(void) {
    sf_handle seen = 0;
    sf_handle cfg = sf_config();
    if (cfg > 0) {
        sf_handle st = sf_json_get(cfg, "state");
        if (st > 0) {
            sf_handle old = sf_json_get(st, "seen");
            if (old > 0)
                seen = old;
            sf_drop(st);
        }
        sf_drop(cfg);
    }
    if (seen <= 0)
        seen = sf_json_array();
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
        sf_json_push(seen, id);
        sf_handle state = sf_json_object();
        sf_json_set(state, "seen", seen);
        sf_handle put = sf_json_object();
        sf_json_set(put, "state", state);
        sf_handle r = sf_host_call("loop.state.put", put, 10000);
        if (r > 0)
            sf_drop(r);
        sf_drop(put);
        sf_drop(state);
        if (wf_str_eq(topic, "wake")) {
            memcpy(key, "ev:", 3);
            sf_u64 n = sf_strlen(eid);
            memcpy(key + 3, eid, n + 1);
            sf_handle text = sf_json_string(key);
            sf_handle args = sf_json_object();
            sf_json_set(args, "content", text);
            sf_json_set(args, "dedup_key", text);
            sf_handle w = sf_host_call("agent.notify", args, 10000);
            if (w > 0)
                sf_drop(w);
            sf_drop(args);
            sf_drop(text);
        }
        if (!wf_str_eq(topic, "hold")) {
            sf_handle args = sf_json_object();
            sf_json_set(args, "event_id", id);
            sf_handle a = sf_host_call("loop.ack", args, 10000);
            if (a > 0)
                sf_drop(a);
            sf_drop(args);
        }
        sf_drop(id);
        sf_drop(ev);
    }
}
