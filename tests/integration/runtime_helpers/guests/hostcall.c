/* Host calls: policy (runtime-protocol.md §9.1), forgery and constraints (vm.md §9.1 items 20-21). */
#include <wakeful.h>
#define CHECK(c) do { if (!(c)) return __LINE__; } while (0)
#define S(lit) lit, sizeof(lit) - 1

static sf_handle params(const char *json, sf_u64 len) {
    return sf_json_parse(json, len);
}

static sf_i64 forged(void) {
    sf_handle p = params(S("{\"n\":1}"));
    CHECK(p > 0);
    CHECK(sf_host_call_raw(S("tool.ech"), p, 1000) == SF_DENIED);    /* prefix */
    CHECK(sf_host_call_raw(S("tool.echoo"), p, 1000) == SF_DENIED);  /* suffix */
    CHECK(sf_host_call_raw(S("Tool.echo"), p, 1000) == SF_DENIED);   /* case */
    CHECK(sf_host_call_raw(S("tool.echo\0"), p, 1000) == SF_DENIED); /* embedded NUL */
    CHECK(sf_host_call_raw(S(" tool.echo"), p, 1000) == SF_DENIED);
    CHECK(sf_host_call_raw("", 0, p, 1000) == SF_DENIED);
    return 0;
}

static sf_i64 constraints(void) {
    CHECK(sf_host_call("tool.echo", params(S("{\"n\":1.0}")), 1000) == SF_DENIED);
    CHECK(sf_host_call("tool.echo", params(S("{\"n\":true}")), 1000) == SF_DENIED);
    CHECK(sf_host_call("tool.echo", params(S("{\"n\":\"1\"}")), 1000) == SF_DENIED);
    CHECK(sf_host_call("tool.echo", params(S("{\"m\":1}")), 1000) == SF_DENIED);
    CHECK(sf_host_call("tool.echo", params(S("[1]")), 1000) == SF_DENIED);
    CHECK(sf_host_call("tool.echo", params(S("1")), 1000) == SF_DENIED);
    CHECK(sf_host_call("tool.nested", params(S("{\"o\":{\"a\":[1,true]}}")), 1000) > 0);
    CHECK(sf_host_call("tool.nested", params(S("{\"o\":{\"a\":[1.0,true]}}")), 1000) == SF_DENIED);
    CHECK(sf_host_call("tool.nested", params(S("{\"o\":{\"a\":[1,true],\"b\":0}}")), 1000) == SF_DENIED);
    CHECK(sf_host_call("tool.echo", sf_bytes(S("{\"n\":1}")), 1000) == SF_INVALID);
    CHECK(sf_host_call("tool.echo", 0x7fffffff, 1000) == SF_INVALID);
    CHECK(sf_host_call("nope", sf_bytes(S("x")), 1000) == SF_INVALID); /* params before policy */
    return 0;
}

static sf_i64 outcomes(void) {
    sf_handle p = params(S("{\"n\":1,\"extra\":[2]}"));
    sf_handle r = sf_host_call("tool.echo", p, 5000); /* extra keys allowed */
    CHECK(r > 0 && sf_json_kind(r) == SF_OBJECT);
    CHECK(sf_json_string_equals(r, "echo", "tool.echo") == 1);
    CHECK(sf_host_call("tool.echo", p, 0) == SF_TIMEOUT); /* timeout 0: nothing sent */
    CHECK(sf_host_call("tool.fail", p, 1000) == SF_HOST_ERROR);
    CHECK(sf_host_call("tool.big", p, 1000) == SF_LIMIT);   /* 16,385 bytes */
    CHECK(sf_host_call("tool.deep", p, 1000) == SF_LIMIT);  /* depth 33 */
    CHECK(sf_host_call("tool.wide", p, 1000) == SF_LIMIT);  /* 4,097 nodes */
    CHECK(sf_host_call("tool.weird", p, 1000) == SF_HOST_ERROR); /* not JSON at all */
    sf_handle edge = sf_host_call("tool.edge", p, 1000);    /* exactly 16,384 bytes */
    CHECK(edge > 0 && sf_bytes_len(edge) == 16382);
    return 0;
}

SF_MAIN sf_i64 main(void) {
    sf_i64 r = forged();
    if (r) return r;
    if ((r = constraints())) return r;
    return outcomes();
}
