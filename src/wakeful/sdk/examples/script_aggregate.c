/*
 * script_aggregate.c — a one-shot script: several tool calls, one aggregated result
 * (script guide; harness.md §18).
 *
 * Not a Loop: it runs once and returns. config is {"kind": "script", "env": {...}}; env.SERVICES
 * lists services separated by commas. For each one it calls tool.call {"tool": "service.status",
 * "args": {"service": name}}, which answers {"ok": true, "value": {...}} or {"ok": false, "error": ...}.
 * It counts healthy, degraded and failed services, tracks the worst latency, stores
 * {"healthy", "degraded", "failed", "worst_latency_ms"} with script.result and returns 0.
 *
 * run-arg: --config {"kind": "script", "env": {"SERVICES": "api,db,queue"}}
 */
#include <wakeful.h>

static char services[256] = "api";
static char name[64];
static char status[32];
static sf_i64 healthy, degraded, failed, worst_latency;

static void console(const char *text) {
    sf_handle args = sf_json_object();
    if (args < 0)
        return;
    if (wf_json_set_owned(args, "message", sf_json_string(text)) == 0)
        wf_call("script.log", args, 10000);
    sf_drop(args);
}

/* tool.call {"tool": "service.status", "args": {"service": name}} and count its answer. */
static sf_i64 check(void) {
    sf_handle args = sf_json_object();
    sf_handle inner = sf_json_object();
    sf_i64 r = (args < 0 || inner < 0) ? SF_LIMIT : wf_json_set_owned(inner, "service", sf_json_string(name));
    if (r == 0)
        r = wf_json_set_owned(args, "tool", sf_json_string("service.status"));
    if (r == 0)
        r = sf_json_set(args, "args", inner);
    sf_handle res = r < 0 ? r : sf_host_call("tool.call", args, 30000);
    if (inner > 0)
        sf_drop(inner);
    if (args > 0)
        sf_drop(args);
    if (res < 0)
        return res;
    sf_handle value = sf_json_get(res, "value");
    if (wf_json_get_bool(res, "ok") != 1 || value < 0) {
        failed++;
        console(name);
    } else {
        sf_i64 latency = 0;
        if (wf_json_get_i64(value, "latency_ms", &latency) == 0 && latency > worst_latency)
            worst_latency = latency;
        if (wf_json_get_str(value, "status", status, sizeof status) > 0 && wf_str_eq(status, "ok"))
            healthy++;
        else
            degraded++;
    }
    if (value > 0)
        sf_drop(value);
    sf_drop(res);
    return 0;
}

static sf_i64 store_result(void) {
    sf_handle args = sf_json_object();
    sf_handle value = sf_json_object();
    sf_i64 r = (args < 0 || value < 0) ? SF_LIMIT : wf_json_set_owned(value, "healthy", sf_json_number(healthy));
    if (r == 0)
        r = wf_json_set_owned(value, "degraded", sf_json_number(degraded));
    if (r == 0)
        r = wf_json_set_owned(value, "failed", sf_json_number(failed));
    if (r == 0)
        r = wf_json_set_owned(value, "worst_latency_ms", sf_json_number(worst_latency));
    if (r == 0)
        r = sf_json_set(args, "value", value);
    if (r == 0)
        r = wf_call("script.result", args, 10000);
    if (value > 0)
        sf_drop(value);
    if (args > 0)
        sf_drop(args);
    return r;
}

SF_MAIN sf_i64 main(void) {
    sf_handle cfg = sf_config();
    if (cfg < 0)
        return cfg;
    sf_handle env = sf_json_get(cfg, "env");
    if (env > 0) {
        wf_json_get_str(env, "SERVICES", services, sizeof services);
        sf_drop(env);
    }
    sf_drop(cfg);

    sf_u64 i = 0;
    while (services[i]) {
        sf_u64 n = 0;
        while (services[i] && services[i] != ',' && n < sizeof name - 1)
            name[n++] = services[i++];
        name[n] = 0;
        while (services[i] && services[i] != ',')
            i++; /* skip the rest of an over-long name */
        if (services[i] == ',')
            i++;
        if (n == 0)
            continue;
        sf_i64 r = check();
        if (r == SF_CLOSED || r == SF_DENIED)
            return 2;
        if (r < 0)
            failed++;
    }
    return store_result() < 0 ? 1 : 0;
}
