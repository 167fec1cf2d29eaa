/*
 * decide_gate.c — a test Loop (tests/integration/harness_decide): for each "mail" event it asks decide
 * whether the mail is urgent, thresholds probability_bp in C against config.threshold_bp and, when urgent,
 * wakes the agent once per event. Logs "urgent <bp>", "calm <bp>" or "decide error <code>"; acks the event.
 */
#include <wakeful.h>

static const char QUESTIONS[] =
    "{\"urgent\":{\"type\":\"noul\",\"instructions\":\"Does this mail need action today?\"}}";
static char line[160];
static char code[48];
static char event_id[80];

static void log2(const char *word, const char *tail, sf_i64 n, int with_n) {
    sf_u64 len = 0;
    while (*word && len < 60)
        line[len++] = *word++;
    while (*tail && len < 120)
        line[len++] = *tail++;
    if (with_n)
        len += wf_i64_to_dec(n, line + len, 24);
    sf_log_raw(line, len);
}

static void ack(void) {
    sf_handle args = sf_json_object();
    sf_json_set(args, "event_id", sf_json_string(event_id));
    sf_handle r = sf_host_call("loop.ack", args, 10000);
    if (r > 0)
        sf_drop(r);
    sf_drop(args);
}

static void wake(sf_i64 bp) {
    sf_handle args = sf_json_object();
    sf_json_set(args, "text", sf_json_string("urgent mail"));
    sf_json_set(args, "dedup_key", sf_json_string(event_id));
    sf_handle r = sf_host_call("agent.notify", args, 10000);
    if (r > 0)
        sf_drop(r);
    sf_drop(args);
    log2("urgent ", "", bp, 1);
}

SF_MAIN sf_i64 main(void) {
    sf_i64 threshold = 7000;
    sf_handle cfg = sf_config();
    if (cfg > 0) {
        wf_json_get_i64(cfg, "threshold_bp", &threshold);
        sf_drop(cfg);
    }
    for (;;) {
        sf_handle ev = sf_event_next(3600000);
        if (ev == SF_TIMEOUT)
            continue;
        if (ev < 0)
            return 0;
        event_id[0] = 0;
        wf_json_get_str(ev, "event_id", event_id, sizeof event_id);
        sf_handle args = sf_json_object();
        sf_json_set(args, "state", sf_json_get(ev, "payload"));
        sf_json_set(args, "questions", sf_json_parse(QUESTIONS, sizeof QUESTIONS - 1));
        sf_handle r = sf_host_call("decide", args, 10000);
        sf_drop(args);
        if (r < 0) {
            log2("decide failed ", "", r, 1);
        } else {
            sf_handle err = sf_json_get(r, "error");
            if (err > 0) {
                code[0] = 0;
                wf_json_get_str(err, "code", code, sizeof code);
                log2("decide error ", code, 0, 0);
                sf_drop(err);
            } else {
                sf_handle answers = sf_json_get(r, "answers");
                sf_handle urgent = sf_json_get(answers, "urgent");
                sf_i64 bp = -1;
                wf_json_get_i64(urgent, "probability_bp", &bp);
                if (bp >= threshold)
                    wake(bp);
                else
                    log2("calm ", "", bp, 1);
                sf_drop(urgent);
                sf_drop(answers);
            }
            sf_drop(r);
        }
        ack();
        sf_drop(ev);
    }
}
