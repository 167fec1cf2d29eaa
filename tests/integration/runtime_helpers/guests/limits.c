/* JSON limits from a guest (vm.md §9.1 item 16, sdk.md §6): 16,384 bytes, depth 32, 4,096 nodes. */
#include <wakeful.h>
#define CHECK(c) do { if (!(c)) return __LINE__; } while (0)
#define S(lit) lit, sizeof(lit) - 1

static char text[16400];

static sf_u64 nest(sf_u64 depth, int leaf) { /* "[" x depth, optional "1", "]" x depth */
    sf_u64 n = 0;
    for (sf_u64 i = 0; i < depth; i++) text[n++] = '[';
    if (leaf) text[n++] = '1';
    for (sf_u64 i = 0; i < depth; i++) text[n++] = ']';
    return n;
}

static sf_u64 zeros(sf_u64 count) { /* an array of count zeros: count + 1 nodes */
    sf_u64 n = 0;
    text[n++] = '[';
    for (sf_u64 i = 0; i < count; i++) {
        if (i) text[n++] = ',';
        text[n++] = '0';
    }
    text[n++] = ']';
    return n;
}

static sf_i64 parse_limits(void) {
    memset(text, ' ', 16384);
    text[16384] = '1';
    CHECK(sf_json_parse(text, 16385) == SF_LIMIT); /* 16,385 bytes: memory not even read */
    CHECK(sf_json_parse(text + 1, 16384) > 0);      /* 16,384 bytes of text is fine */
    CHECK(sf_json_parse(text, nest(32, 1)) > 0);
    CHECK(sf_json_parse(text, nest(33, 0)) > 0);
    CHECK(sf_json_parse(text, nest(33, 1)) == SF_LIMIT);
    CHECK(sf_json_parse(text, nest(34, 0)) == SF_LIMIT);
    CHECK(sf_json_parse(text, nest(8000, 1)) == SF_LIMIT);
    CHECK(sf_json_parse(text, zeros(4095)) > 0);
    CHECK(sf_json_parse(text, zeros(4096)) == SF_LIMIT); /* 4,097 nodes */
    text[0] = '"';
    memset(text + 1, 'x', 16382);
    text[16383] = '"';
    CHECK(sf_json_parse(text, 16384) > 0); /* a 16,384-byte string value */
    return 0;
}

static sf_i64 build_limits(void) {
    memset(text, 'x', 16384);
    CHECK(sf_json_string_raw(text, 16382) > 0);
    CHECK(sf_json_string_raw(text, 16383) == SF_LIMIT); /* 16,385 bytes with its quotes */
    memset(text, '"', 8192);
    CHECK(sf_json_string_raw(text, 8191) > 0);          /* 2 x 8,191 + 2 = 16,384 bytes */
    CHECK(sf_json_string_raw(text, 8192) == SF_LIMIT); /* escapes count */
    memset(text, 'x', 16384);
    sf_handle o = sf_json_object();
    sf_handle big = sf_json_string_raw(text, 16000);
    CHECK(sf_json_set(o, "k", big) == 0);
    sf_handle more = sf_json_string_raw(text, 400);
    CHECK(sf_json_set(o, "y", more) == SF_LIMIT);
    CHECK(sf_bytes_len(o) == 1); /* unchanged */
    sf_handle arr = sf_json_array();
    CHECK(sf_json_push(arr, big) == 0);
    CHECK(sf_json_push(arr, more) == SF_LIMIT && sf_bytes_len(arr) == 1);
    sf_handle deep = sf_json_parse(text, nest(32, 1));
    sf_handle a2 = sf_json_array();
    CHECK(sf_json_push(a2, deep) == SF_LIMIT && sf_bytes_len(a2) == 0); /* depth 33 */
    sf_handle d31 = sf_json_parse(text, nest(31, 1));
    sf_handle o2 = sf_json_object();
    CHECK(sf_json_set(o2, "d", d31) == 0);
    CHECK(sf_json_set(o2, "e", deep) == SF_LIMIT && sf_bytes_len(o2) == 1);
    sf_handle many = sf_json_parse(text, zeros(4094)); /* 4,095 nodes */
    CHECK(many > 0);
    CHECK(sf_json_push(many, sf_json_number(1)) == 0); /* 4,096 */
    CHECK(sf_json_push(many, sf_json_number(2)) == SF_LIMIT);
    CHECK(sf_bytes_len(many) == 4095);
    sf_handle wrap = sf_json_object();
    CHECK(sf_json_set(wrap, "m", many) == SF_LIMIT); /* 4,097 with the wrapper */
    return 0;
}

SF_MAIN sf_i64 main(void) {
    sf_i64 r = parse_limits();
    if (r) return r;
    return build_limits();
}
