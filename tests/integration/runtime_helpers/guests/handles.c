/* Handle forgery and exhaustion (vm.md §9.1 items 14-15, sdk.md §5). */
#include <wakeful.h>
#define CHECK(c) do { if (!(c)) return __LINE__; } while (0)
#define S(lit) lit, sizeof(lit) - 1

static sf_handle live[128];

static sf_i64 forgery(sf_handle cfg, sf_handle foreign) {
    sf_handle h = sf_json_null();
    CHECK(h > cfg);
    CHECK(sf_json_kind(h + 1) == SF_INVALID); /* the next integer after a live handle */
    CHECK(sf_drop(h + 1) == SF_INVALID);
    for (sf_i64 i = -3; i < cfg; i++) /* small integers (other objects took 1..cfg-1) */
        CHECK(sf_json_kind(i) == SF_INVALID);
    CHECK(sf_json_kind(foreign) == SF_INVALID); /* a handle of another object */
    CHECK(sf_drop(foreign) == SF_INVALID);
    CHECK(sf_json_get_raw(foreign, S("k")) == SF_INVALID);
    CHECK(sf_json_push(foreign, h) == SF_INVALID);
    CHECK(sf_json_dump(foreign) == SF_INVALID);
    CHECK(sf_bytes_len(foreign) == SF_INVALID);
    CHECK(sf_json_kind((sf_handle)0x8000000000000000ULL) == SF_INVALID);
    CHECK(sf_json_kind(0x7fffffffffffffffLL) == SF_INVALID);
    CHECK(sf_json_kind(-1) == SF_INVALID);
    CHECK(sf_drop(h) == 0); /* dropped: gone for good */
    CHECK(sf_json_kind(h) == SF_INVALID && sf_drop(h) == SF_INVALID);
    CHECK(sf_json_set(cfg, "x", h) == SF_INVALID);
    return 0;
}

static sf_i64 exhaustion(sf_handle cfg) {
    sf_i64 count = 1; /* cfg is live */
    for (;;) {
        sf_handle x = sf_json_number(count);
        if (x < 0) {
            CHECK(x == SF_LIMIT);
            break;
        }
        CHECK(count < 128);
        live[count++] = x;
    }
    CHECK(count == 128);
    /* validation comes before allocation: invalid requests keep their status when full */
    CHECK(sf_json_get_raw(cfg, S("nope")) == SF_INVALID);
    CHECK(sf_json_parse(S("[1,")) == SF_INVALID);
    CHECK(sf_json_at(cfg, 0) == SF_INVALID);
    CHECK(sf_json_dump(-1) == SF_INVALID);
    CHECK(sf_json_parse(S("[1]")) == SF_LIMIT);
    CHECK(sf_config() == SF_LIMIT && sf_json_object() == SF_LIMIT && sf_json_dump(cfg) == SF_LIMIT);
    CHECK(sf_bytes(S("b")) == SF_LIMIT && sf_json_string_raw(S("s")) == SF_LIMIT);
    CHECK(sf_json_get_raw(cfg, S("foreign")) == SF_LIMIT);
    CHECK(sf_json_boolean(1) == SF_LIMIT && sf_json_null() == SF_LIMIT && sf_json_array() == SF_LIMIT);
    CHECK(sf_json_set(cfg, "k", live[1]) == 0); /* builders allocate nothing */
    CHECK(sf_drop(live[127]) == 0);
    sf_handle again = sf_json_null();
    CHECK(again > live[127]); /* numbers are never reused */
    CHECK(sf_json_null() == SF_LIMIT);
    CHECK(sf_drop(again) == 0);
    for (sf_i64 i = 1; i < 127; i++)
        CHECK(sf_drop(live[i]) == 0);
    for (sf_i64 i = 0; i < 5000; i++) { /* allocate/drop in a long loop: never exhausts */
        sf_handle x = sf_json_number(i);
        CHECK(x > 0);
        CHECK(sf_drop(x) == 0);
    }
    return 0;
}

SF_MAIN sf_i64 main(void) {
    sf_handle cfg = sf_config();
    sf_i64 foreign = 0;
    CHECK(cfg > 0);
    CHECK(wf_json_get_i64(cfg, "foreign", &foreign) == 0 && foreign > 0);
    sf_i64 r = forgery(cfg, foreign);
    if (r) return r;
    return exhaustion(cfg);
}
