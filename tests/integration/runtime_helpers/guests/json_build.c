/* Building JSON (sdk.md §9.5), dump and bytes (§9.6); the result is checked byte for byte. */
#include <wakeful.h>
#define CHECK(c) do { if (!(c)) return __LINE__; } while (0)
#define S(lit) lit, sizeof(lit) - 1

static char out[256];
static const char want[] =
    "{\"i\":-9223372036854775808,\"u\":-1,\"t\":true,\"f\":false,\"z\":null,"
    "\"s\":\"a\\\"b\\\\\\nc\\u0001\xc3\xa9\",\"arr\":[1,[],{}],\"k\":2}";

static sf_i64 build(sf_handle o) {
    CHECK(sf_json_set_raw(o, S("i"), sf_json_number((sf_i64)0x8000000000000000ULL)) == 0);
    CHECK(sf_json_set_raw(o, S("u"), sf_json_number(-1)) == 0);
    CHECK(sf_json_set(o, "t", sf_json_boolean(7)) == 0);
    CHECK(sf_json_set(o, "f", sf_json_boolean(0)) == 0);
    CHECK(sf_json_set(o, "z", sf_json_null()) == 0);
    CHECK(sf_json_set(o, "s", sf_json_string_raw(S("a\"b\\\nc\x01\xc3\xa9"))) == 0);
    sf_handle arr = sf_json_array();
    sf_handle one = sf_json_number(1);
    CHECK(sf_json_push(arr, one) == 0);
    CHECK(sf_json_push(arr, sf_json_array()) == 0);
    CHECK(sf_json_push(arr, sf_json_object()) == 0);
    CHECK(sf_json_set(o, "arr", arr) == 0);
    CHECK(sf_json_push(arr, one) == 0); /* o holds a copy: unchanged */
    CHECK(sf_bytes_len(arr) == 4);
    CHECK(sf_json_set(o, "k", one) == 0);
    CHECK(sf_json_set(o, "k", sf_json_number(2)) == 0); /* replace keeps the position */
    return 0;
}

static sf_i64 statuses(sf_handle o) {
    sf_handle b = sf_bytes(S("raw"));
    sf_handle arr = sf_json_array();
    CHECK(sf_json_set(o, "x", b) == SF_INVALID);        /* value not JSON */
    CHECK(sf_json_set(b, "x", arr) == SF_INVALID);      /* object is bytes */
    CHECK(sf_json_set(arr, "x", arr) == SF_INVALID);    /* object is an array */
    CHECK(sf_json_set(o, "x", 0x7fffffff) == SF_INVALID);
    CHECK(sf_json_push(o, arr) == SF_INVALID);          /* not an array */
    CHECK(sf_json_push(arr, b) == SF_INVALID);
    CHECK(sf_json_push(arr, arr) == 0);                 /* itself: a copy of [] */
    CHECK(sf_json_push(arr, arr) == 0);
    CHECK(sf_bytes_len(arr) == 2);
    CHECK(sf_json_dump(b) == SF_INVALID);
    CHECK(sf_json_dump(-5) == SF_INVALID);
    sf_handle d = sf_json_dump(arr);
    CHECK(d > 0 && sf_bytes_len(d) == 9 && sf_bytes_read(d, 0, out, 9) == 9);
    CHECK(memcmp(out, "[[],[[]]]", 9) == 0);
    return 0;
}

static sf_i64 bytes(void) {
    sf_handle b = sf_bytes("\xff\xfe\x00\xc0\xaf", 5); /* any bytes, no UTF-8 rule */
    CHECK(b > 0 && sf_bytes_len(b) == 5);
    memset(out, 0, 8);
    CHECK(sf_bytes_read(b, 1, out, 3) == 3);
    CHECK((unsigned char)out[0] == 0xfe && out[1] == 0 && (unsigned char)out[2] == 0xc0 && out[3] == 0);
    CHECK(sf_bytes_read(b, 3, out, 100) == 2);
    CHECK(sf_bytes_read(b, 5, out, 100) == 0);          /* at the end */
    CHECK(sf_bytes_read(b, 6, out, 1) == SF_INVALID);    /* past the end */
    CHECK(sf_bytes_read(b, 0, out, 16385) == SF_LIMIT);
    CHECK(sf_bytes_read(sf_json_null(), 0, out, 1) == SF_INVALID);
    CHECK(sf_bytes(out, 16385) == SF_LIMIT);
    CHECK(sf_bytes_len(sf_bytes(out, 0)) == 0);
    return 0;
}

SF_MAIN sf_i64 main(void) {
    sf_handle o = sf_json_object();
    CHECK(o > 0 && sf_json_kind(o) == SF_OBJECT);
    sf_i64 r = build(o);
    if (r) return r;
    sf_handle d = sf_json_dump(o);
    CHECK(d > 0);
    sf_i64 n = sf_bytes_len(d);
    CHECK(n == sizeof(want) - 1);
    CHECK(sf_bytes_read(d, 0, out, sizeof out) == n);
    CHECK(memcmp(out, want, n) == 0);
    CHECK(sf_log_raw(out, n) == 0);
    CHECK(sf_json_kind(d) == SF_INVALID);
    if ((r = statuses(o))) return r;
    if ((r = bytes())) return r;
    return 0;
}
