/* A readback Loop (issue 20, control/loops.py): the GPU provider pushes job events
 * {"readback": {"request_key", "attempt", "observed", "external_ref"?}}; the Loop wakes its agent with exactly
 * that readback member, which the control plane's Loop bridge commits as effect.readback. */
#include <wakeful.h>

static char event_id[136];
static char key[160];

static sf_i64 forward(sf_handle ev) {
    sf_handle payload = sf_json_get(ev, "payload");
    sf_handle readback = payload > 0 ? sf_json_get(payload, "readback") : SF_INVALID;
    sf_handle content = sf_json_object();
    sf_handle args = sf_json_object();
    sf_i64 r = (readback < 0 || content < 0 || args < 0) ? SF_INVALID : sf_json_set(content, "readback", readback);
    if (r == 0)
        r = sf_json_set(args, "content", content);
    wf_json_get_str(ev, "event_id", event_id, sizeof event_id);
    memcpy(key, "rb:", 4);
    memcpy(key + 3, event_id, sf_strlen(event_id) + 1);
    sf_handle k = sf_json_string(key);
    if (r == 0)
        r = k < 0 ? k : sf_json_set(args, "dedup_key", k);
    if (r == 0) {
        sf_handle reply = sf_host_call("agent.notify", args, 10000);
        r = reply < 0 ? reply : 0;
        if (reply > 0)
            sf_drop(reply);
    }
    if (k > 0)
        sf_drop(k);
    if (args > 0)
        sf_drop(args);
    if (content > 0)
        sf_drop(content);
    if (readback > 0)
        sf_drop(readback);
    if (payload > 0)
        sf_drop(payload);
    return r == SF_INVALID ? 0 : r; /* an event without a readback is acked and ignored */
}

SF_MAIN sf_i64 main(void) {
    for (;;) {
        sf_handle ev = sf_event_next(3600000);
        if (ev == SF_TIMEOUT)
            continue;
        if (ev < 0)
            return ev == SF_CLOSED ? 0 : ev;
        sf_i64 r = forward(ev);
        if (r == 0) {
            sf_handle args = sf_json_object();
            sf_handle id = sf_json_get(ev, "event_id");
            if (args > 0 && id > 0 && sf_json_set(args, "event_id", id) == 0) {
                sf_handle reply = sf_host_call("loop.ack", args, 10000);
                if (reply > 0)
                    sf_drop(reply);
            }
            if (id > 0)
                sf_drop(id);
            if (args > 0)
                sf_drop(args);
        }
        sf_drop(ev);
    }
}
