/* Reading JSON (sdk.md §9.4) and bytes lengths (§9.6): every success and status path. */
#include <wakeful.h>
#define CHECK(c) do { if (!(c)) return __LINE__; } while (0)
#define S(lit) lit, sizeof(lit) - 1

static char buf[64];
static const char text[] =
    "{\"n\":-42,\"big\":18446744073709551615,\"min\":-9223372036854775808,\"f\":1.5,\"one\":1.0,"
    "\"t\":true,\"no\":false,\"s\":\"h\\u00e9llo\",\"a\":[1,\"x\",null],\"o\":{},\"n\":-43}";

static sf_i64 numbers(sf_handle v) {
    sf_i64 out = 0;
    sf_handle n = sf_json_get_raw(v, S("n"));
    CHECK(sf_json_kind(n) == SF_NUMBER);
    CHECK(sf_json_i64(n, &out) == 0 && out == -43); /* duplicate keys: the last one wins */
    sf_handle m = sf_json_get(v, "min");
    CHECK(sf_json_i64(m, &out) == 0 && out == (sf_i64)0x8000000000000000ULL);
    out = 7;
    sf_handle big = sf_json_get(v, "big"); /* an integer, but outside i64: nothing written */
    CHECK(sf_json_kind(big) == SF_NUMBER && sf_json_i64(big, &out) == SF_INVALID && out == 7);
    sf_handle one = sf_json_get(v, "one"); /* 1.0 is a float */
    CHECK(sf_json_kind(one) == SF_NUMBER && sf_json_i64(one, &out) == SF_INVALID && out == 7);
    sf_handle t = sf_json_get(v, "t");
    CHECK(sf_json_i64(t, &out) == SF_INVALID && out == 7); /* a boolean is not a number */
    CHECK(sf_json_bool(t) == 1 && sf_json_bool(sf_json_get(v, "no")) == 0);
    CHECK(sf_json_bool(n) == SF_INVALID && sf_json_bool(one) == SF_INVALID);
    CHECK(sf_json_kind(t) == SF_BOOL);
    return 0;
}

static sf_i64 strings(sf_handle v) {
    sf_handle s = sf_json_get(v, "s");
    CHECK(sf_json_kind(s) == SF_STRING);
    CHECK(sf_json_read_string(s, buf, sizeof buf) == 6);
    CHECK(memcmp(buf, "h\xc3\xa9llo", 6) == 0);
    memset(buf, '#', 8);
    CHECK(sf_json_read_string(s, buf, 2) == 6); /* truncated, may cut a character, no NUL */
    CHECK(buf[0] == 'h' && (unsigned char)buf[1] == 0xc3 && buf[2] == '#');
    CHECK(sf_json_read_string(s, buf, 0) == 6);
    CHECK(sf_json_read_string(s, buf, 16385) == SF_LIMIT);
    CHECK(sf_json_read_string(v, buf, 8) == SF_INVALID);
    CHECK(sf_bytes_len(s) == 6);
    CHECK(sf_json_string_equals_raw(v, S("s"), S("h\xc3\xa9llo")) == 1);
    CHECK(sf_json_string_equals(v, "s", "hello") == 0);
    CHECK(sf_json_string_equals(v, "s", "h\xc3\xa9ll") == 0);
    CHECK(sf_json_string_equals(v, "n", "-43") == SF_INVALID); /* member not a string */
    CHECK(sf_json_string_equals(v, "zz", "x") == SF_INVALID);  /* key absent */
    CHECK(sf_json_string_equals(s, "s", "x") == SF_INVALID);   /* not an object */
    CHECK(sf_json_string_equals_raw(v, S("s"), "", 0) == 0);
    return 0;
}

static sf_i64 containers(sf_handle v) {
    sf_handle a = sf_json_get(v, "a");
    CHECK(sf_json_kind(a) == SF_ARRAY && sf_bytes_len(a) == 3);
    sf_handle a1 = sf_json_at(a, 1);
    CHECK(sf_json_kind(a1) == SF_STRING && sf_json_string_equals(v, "s", "x") == 0);
    CHECK(sf_json_kind(sf_json_at(a, 2)) == SF_NULL);
    CHECK(sf_json_at(a, 3) == SF_INVALID);
    CHECK(sf_json_at(a, (sf_u64)-1) == SF_INVALID);
    CHECK(sf_json_at(v, 0) == SF_INVALID);             /* not an array */
    CHECK(sf_json_get_raw(a, S("n")) == SF_INVALID);   /* not an object */
    CHECK(sf_json_get_raw(v, S("missing")) == SF_INVALID);
    CHECK(sf_json_get_raw(v, "n\0", 2) == SF_INVALID); /* the embedded NUL is part of the key */
    CHECK(sf_json_kind(sf_json_get(v, "o")) == SF_OBJECT);
    CHECK(sf_bytes_len(v) == 10); /* members after the duplicate collapsed */
    CHECK(sf_bytes_len(sf_json_get(v, "n")) == SF_INVALID);
    CHECK(sf_bytes_len(sf_json_null()) == SF_INVALID);
    return 0;
}

static sf_i64 syntax(void) {
    CHECK(sf_json_parse(S("[1,]")) == SF_INVALID);
    CHECK(sf_json_parse(S("NaN")) == SF_INVALID);
    CHECK(sf_json_parse(S("[-Infinity]")) == SF_INVALID);
    CHECK(sf_json_parse(S("\"\\ud800\"")) == SF_INVALID);
    CHECK(sf_json_parse(S("1e400")) == SF_INVALID);
    CHECK(sf_json_parse(S("{\"a\":1 \"b\":2}")) == SF_INVALID);
    CHECK(sf_json_parse("", 0) == SF_INVALID);
    CHECK(sf_json_parse(S("\"\\ud83d\\ude00\"")) > 0); /* a surrogate pair is fine */
    return 0;
}

SF_MAIN sf_i64 main(void) {
    sf_handle v = sf_json_parse(text, sizeof(text) - 1);
    CHECK(v > 0);
    CHECK(sf_json_kind(v) == SF_OBJECT);
    sf_i64 r = numbers(v);
    if (r) return r;
    if ((r = strings(v))) return r;
    if ((r = containers(v))) return r;
    if ((r = syntax())) return r;
    sf_handle b = sf_bytes(S("xyz"));
    CHECK(sf_json_kind(b) == SF_INVALID && sf_bytes_len(b) == 3 && sf_json_bool(b) == SF_INVALID);
    CHECK(sf_drop(v) == 0);
    CHECK(sf_json_kind(v) == SF_INVALID && sf_drop(v) == SF_INVALID);
    return 0;
}
