/*
 * classify_decide.c — classify inbound messages with `decide` and wake only for the important ones
 * (guide: "decide", "Status handling").
 *
 * Events {"topic": "message", "payload": {"from": "...", "text": "..."}}. Each text is sent to
 * `decide` as the state of one yes/no ("noul") question. Answers are integers: probability_bp is
 * the probability in basis points (0..10000). At or above 7000 the Loop wakes its agent (key
 * "important:<event_id>"); at or below 3000 it ignores the message; in between it logs that it is
 * unsure and does not wake. A `decide` failure is data ({"error": {"code": ...}}): rate_limited,
 * timeout and unavailable are retried a few times with backoff; anything else is logged and the
 * message is left unclassified. Every message is acked after it was handled.
 *
 * config: {}
 *
 * run-arg: --event message={"from": "ops", "text": "Production database is down"}
 * run-arg: --event message={"from": "newsletter", "text": "Our weekly digest"}
 * run-arg: --event message={"from": "ci", "text": "Release pipeline blocked on approval"}
 */
#include <wakeful.h>

static const char QUESTION[] =
    "{\"questions\":{\"important\":{\"type\":\"noul\","
    "\"instructions\":\"Does this message need the agent's attention within the hour?\"}}}";

static char event_id[136];
static char code[64];
static char key[160];

/* decide {state: text, questions: ...}; probability in basis points, or a status. The reply's
 * error code (if any) is left in `code`. */
static sf_i64 ask(sf_handle text) {
    code[0] = 0;
    sf_handle args = sf_json_parse(QUESTION, sizeof(QUESTION) - 1);
    if (args < 0)
        return args;
    sf_i64 r = sf_json_set(args, "state", text);
    sf_handle result = r < 0 ? r : sf_host_call("decide", args, 10000);
    sf_drop(args);
    if (result < 0)
        return result;
    sf_handle error = sf_json_get(result, "error");
    sf_i64 p = SF_INVALID;
    if (error > 0) {
        wf_json_get_str(error, "code", code, sizeof code);
        sf_drop(error);
    } else {
        sf_handle answers = sf_json_get(result, "answers");
        sf_handle important = sf_json_get(answers, "important");
        if (wf_json_get_i64(important, "probability_bp", &p) < 0)
            p = SF_INVALID;
        if (important > 0)
            sf_drop(important);
        if (answers > 0)
            sf_drop(answers);
    }
    sf_drop(result);
    return p;
}

SF_INLINE int transient(void) {
    return wf_str_eq(code, "rate_limited") || wf_str_eq(code, "timeout") || wf_str_eq(code, "unavailable");
}

/* Classify with bounded retries: probability in bp, or a negative status when unclassified. */
static sf_i64 classify(sf_handle text) {
    sf_u64 delay = 300;
    for (int attempt = 0; attempt < 4; attempt++) {
        sf_i64 p = ask(text);
        if (p >= 0 || p == SF_CLOSED || p == SF_DENIED)
            return p;
        if (!transient() && p != SF_TIMEOUT && p != SF_HOST_ERROR)
            return p;
        sf_log(code[0] ? code : "decide call failed; retrying");
        if (sf_sleep_ms(delay + sf_now_mono_ms() % (delay / 4 + 1)) < 0)
            return SF_CLOSED;
        delay *= 2;
    }
    return SF_TIMEOUT;
}

/* agent.notify {content: the message text, dedup_key: "important:<event_id>"}; 0 or a status. */
static sf_i64 wake(sf_handle text) {
    if (wf_cat(key, sizeof key, wf_cat(key, sizeof key, 0, "important:"), event_id) >= sizeof key)
        return SF_LIMIT;
    return wf_notify_value(text, key);
}

static sf_i64 handle(sf_handle ev) {
    wf_json_get_str(ev, "event_id", event_id, sizeof event_id);
    sf_handle payload = sf_json_get(ev, "payload");
    sf_handle text = sf_json_get(payload, "text");
    sf_i64 r = 0;
    if (text < 0) {
        sf_log("message without text: ignored");
    } else {
        sf_i64 p = classify(text);
        if (p == SF_CLOSED || p == SF_DENIED)
            r = p;
        else if (p < 0)
            sf_log("could not classify; left for the agent's next look");
        else if (p >= 7000)
            r = wake(text);
        else if (p > 3000)
            sf_log("unsure about a message; not waking");
        else
            sf_log("not important");
        sf_drop(text);
    }
    if (payload > 0)
        sf_drop(payload);
    return r;
}

SF_MAIN sf_i64 main(void) {
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
            return 2; /* decide or agent.notify not granted: configuration error */
        if (r < 0)
            return 3;
    }
}
