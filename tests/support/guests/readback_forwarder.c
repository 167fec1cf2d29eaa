/* A readback Loop (issue 20, control/loops.py): the GPU provider pushes job events
 * {"readback": {"request_key", "attempt", "observed", "external_ref"?}}; the Loop wakes its agent with exactly
 * that readback member, which the control plane's Loop bridge commits as effect.readback. */
#include <wakeful.h>

static char event_id[136];
static char key[160];

/* 0 when the event may be acked: forwarded, or without a readback member (ignored). */
static sf_i64 forward(sf_handle ev) {
    sf_handle payload = sf_json_get(ev, "payload");
    sf_handle readback = payload > 0 ? sf_json_get(payload, "readback") : SF_INVALID;
    if (payload > 0)
        sf_drop(payload);
    if (readback < 0)
        return 0;
    sf_handle content = sf_json_object();
    sf_i64 r = content < 0 ? content : wf_json_set_owned(content, "readback", readback);
    wf_json_get_str(ev, "event_id", event_id, sizeof event_id);
    if (r == 0 && wf_cat(key, sizeof key, wf_cat(key, sizeof key, 0, "rb:"), event_id) < sizeof key)
        r = wf_notify_value(content, key);
    if (content > 0)
        sf_drop(content);
    return r;
}

SF_MAIN sf_i64 main(void) {
    for (;;) {
        sf_handle ev = sf_event_next(3600000);
        if (ev == SF_TIMEOUT)
            continue;
        if (ev < 0)
            return ev == SF_CLOSED ? 0 : ev;
        if (forward(ev) == 0)
            wf_ack(ev);
        sf_drop(ev);
    }
}
