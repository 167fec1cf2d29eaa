/* One fault per case (config "case"); case 0 must pass (vm.md §9.1 items 17-19, sdk.md §4). */
#include <wakeful.h>
#define CHECK(c) do { if (!(c)) return __LINE__; } while (0)
#define S(lit) lit, sizeof(lit) - 1

static char buf[16400];
static const char ro[16] = "read-only data!";
static const char overlong[] = "\xc0\xaf";
static const char surrogate[] = "\xed\xa0\x80";
static const char truncated[] = "ab\xe2\x82";

static sf_i64 accepted(sf_handle cfg, sf_u64 end) {
    /* zero length with a wild pointer is accepted and never dereferenced */
    CHECK(memcpy((void *)0, (void *)-1LL, 0) == (void *)0);
    CHECK(memmove((void *)end, (void *)1, 0) == (void *)end);
    CHECK(memset((void *)0xffff, 1, 0) == (void *)0xffff);
    CHECK(memcmp((void *)0, (void *)end, 0) == 0);
    CHECK(sf_log_raw((const char *)0, 0) == 0);
    CHECK(sf_bytes_len(sf_bytes((void *)-1LL, 0)) == 0);
    CHECK(sf_json_get_raw(cfg, (const char *)3, 0) == SF_INVALID);
    CHECK(sf_log_raw((const char *)0, 1025) == SF_LIMIT); /* length checked before the pointer */
    CHECK(sf_json_parse((const char *)0, 16385) == SF_LIMIT);
    /* bad UTF-8 inside sf_bytes is fine: bytes are opaque */
    sf_handle b = sf_bytes(truncated, 4);
    CHECK(sf_bytes_len(b) == 4);
    CHECK(sf_bytes(surrogate, 3) > 0 && sf_bytes(overlong, 2) > 0);
    /* memmove handles overlap both ways; memcpy of adjacent regions is fine */
    memcpy(buf, "abcdefgh", 8);
    memmove(buf + 2, buf, 6);
    CHECK(memcmp(buf, "ababcdef", 8) == 0);
    memmove(buf, buf + 2, 6);
    CHECK(memcmp(buf, "abcdefef", 8) == 0);
    memcpy(buf + 4, buf, 4);
    CHECK(memcmp(buf, "abcdabcd", 8) == 0);
    /* rodata is readable; the edges of memory are exact */
    CHECK(memcmp(ro, "read-only data!", 16) == 0);
    CHECK(sf_bytes((void *)(end - 16), 16) > 0);
    CHECK(memset(buf, 0, 16384) == buf && memcmp(buf, buf + 1, 16383) == 0);
    return 0;
}

SF_MAIN sf_i64 main(void) {
    sf_handle cfg = sf_config();
    sf_i64 which = 0, end = 0;
    CHECK(wf_json_get_i64(cfg, "case", &which) == 0 && wf_json_get_i64(cfg, "end", &end) == 0);
    sf_handle obj = sf_json_object();
    sf_handle str = sf_json_string_raw(S("str"));
    sf_handle num = sf_json_number(5);
    sf_handle blob = sf_bytes(S("blob"));
    switch (which) {
    case 0: return accepted(cfg, (sf_u64)end);
    /* item 17: bad UTF-8 in log, key, capability name, string builder */
    case 1: return sf_log_raw(overlong, 2);
    case 2: return sf_log_raw(surrogate, 3);
    case 3: return sf_log_raw(truncated, 4);
    case 4: return sf_json_get_raw(cfg, overlong, 2);
    case 5: return sf_json_set_raw(obj, surrogate, 3, num);
    case 6: return sf_json_string_equals_raw(cfg, truncated, 4, S("x"));
    case 7: return sf_json_string_equals_raw(cfg, S("case"), surrogate, 3);
    case 8: return sf_json_string_raw(overlong, 2);
    case 9: return sf_json_parse(truncated, 4);
    case 10: return sf_host_call_raw(surrogate, 3, obj, 1000);
    /* item 18: bad pointers */
    case 11: return sf_log_raw((const char *)0, 5);
    case 12: return sf_bytes((void *)0xffff, 2);
    case 13: return sf_bytes((void *)(end - 4), 8);
    case 14: return (sf_i64)memcpy((void *)ro, buf, 4);
    case 15: return sf_json_read_string(str, (char *)ro, 3);
    case 16: return sf_json_i64(num, (sf_i64 *)ro);
    case 17: return sf_bytes_read(blob, 0, (void *)ro, 4);
    case 18: return sf_json_get_raw(cfg, buf, 0xffffffffffffffffULL);
    case 19: return sf_json_i64(num, (sf_i64 *)(end - 4));
    case 20: return sf_bytes((void *)end, 1);
    case 21: return (sf_i64)memset((void *)0x8000000000000000ULL, 0, 8);
    case 22: return sf_json_get_raw(cfg, buf, 16385); /* a valid region, too long for text */
    /* item 19 */
    case 23: return (sf_i64)memcpy(buf + 2, buf, 8);
    case 24: return (sf_i64)memset(buf, 0, 16385);
    case 25: return memcmp(buf, buf + 1, 16385);
    case 26: return (sf_i64)memcpy(buf, buf + 16384, 16385);
    case 27: return (sf_i64)memmove(buf, buf + 1, 16385);
    case 28: return (sf_i64)memcpy(buf, buf, 1);
    case 29: return sf_json_read_string(str, (char *)(end - 2), 3);
    case 30: return sf_host_call_raw(overlong, 2, obj, 1000);
    case 31: return sf_host_call_raw(truncated, 4, obj, 1000);
    case 32: return sf_host_call_raw((const char *)0xffff, 4, obj, 1000);
    case 33: return sf_json_string_raw(buf, 16385); /* text longer than 16,384 bytes */
    }
    return -100;
}
