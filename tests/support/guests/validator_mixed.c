/* A validator script (issue 20, control/validators.py): passes when it is run for the mixed-load workload on
 * a known revision, fails otherwise; stores {"verdict", "summary"} with script.result. */
#include <wakeful.h>

static char ref[96], revision[128], summary[256];

SF_MAIN sf_i64 main(void) {
    sf_handle cfg = sf_config();
    if (cfg < 0)
        return cfg;
    sf_handle env = sf_json_get(cfg, "env");
    if (env > 0) {
        wf_json_get_str(env, "WORKLOAD_REF", ref, sizeof ref);
        wf_json_get_str(env, "REVISION", revision, sizeof revision);
        sf_drop(env);
    }
    sf_drop(cfg);
    const char *verdict = wf_str_eq(ref, "bench/mixed") && revision[0] ? "pass" : "fail";
    sf_u64 n = wf_cat(summary, sizeof summary, 0, "ran ");
    n = wf_cat(summary, sizeof summary, n, ref);
    n = wf_cat(summary, sizeof summary, n, " on ");
    wf_cat(summary, sizeof summary, n, revision); /* a summary that does not fit keeps its prefix */
    sf_handle value = sf_json_object();
    sf_handle args = sf_json_object();
    sf_i64 r = (value < 0 || args < 0) ? SF_LIMIT : wf_json_set_owned(value, "verdict", sf_json_string(verdict));
    if (r == 0)
        r = wf_json_set_owned(value, "summary", sf_json_string(summary));
    if (r == 0)
        r = wf_json_set_owned(args, "value", value);
    else if (value > 0)
        sf_drop(value);
    if (r == 0)
        r = wf_call("script.result", args, 10000);
    if (args > 0)
        sf_drop(args);
    return r < 0 ? 1 : 0;
}
