/*
 * handle_filler.c — fills its handle table with maximal JSON objects (issue 14, reproduction 6; memory tests).
 *
 * It writes one object of 16,384 bytes or fewer with about 2,000 distinct three-letter keys, {"aaa":0,"baa":1,…},
 * and parses it config.count times (default 128), one live handle each, until a parse fails. Then it waits
 * for an event (its handles stay live while the test measures), logs "filled <handles> status <first failure
 * or 0>", and on "drop" drops every handle and parses once more (logging "after drop <status>");
 * it exits with the number of handles it filled.
 */
#include <wakeful.h>

static char text[16400];
static sf_handle held[128];
static char line[64];

static sf_u64 object_text(void) {
    sf_u64 n = 0;
    text[n++] = '{';
    for (sf_u64 i = 0; n + 9 <= 16384; i++) { /* ',"abc":7' is 8 bytes, the closing brace 1 */
        if (i)
            text[n++] = ',';
        text[n++] = '"';
        text[n++] = (char)('a' + i % 26);
        text[n++] = (char)('a' + i / 26 % 26);
        text[n++] = (char)('a' + i / 676 % 26);
        text[n++] = '"';
        text[n++] = ':';
        text[n++] = (char)('0' + i % 10);
    }
    text[n++] = '}';
    return n;
}

static void log_two(const char *a, sf_i64 x, const char *b, sf_i64 y) {
    sf_u64 len = 0;
    while (*a)
        line[len++] = *a++;
    len += wf_i64_to_dec(x, line + len, 24);
    while (*b)
        line[len++] = *b++;
    len += wf_i64_to_dec(y, line + len, 24);
    sf_log_raw(line, len);
}

SF_MAIN sf_i64 main(void) {
    sf_i64 count = 128;
    sf_handle cfg = sf_config();
    if (cfg >= 0) {
        if (wf_json_get_i64(cfg, "count", &count) != 0 || count < 0 || count > 128)
            count = 128;
        sf_drop(cfg);
    }
    sf_u64 n = object_text();
    sf_i64 filled = 0, status = 0;
    while (filled < count) {
        sf_handle h = sf_json_parse(text, n);
        if (h < 0) {
            status = h;
            break;
        }
        held[filled++] = h;
    }
    log_two("filled ", filled, " status ", status);
    sf_handle ev = sf_event_next(86400000);
    if (ev >= 0 && sf_json_string_equals(ev, "topic", "drop") == 1) {
        for (sf_i64 i = 0; i < filled; i++)
            sf_drop(held[i]);
        sf_handle again = sf_json_parse(text, n);
        log_two("after drop ", again > 0 ? 0 : again, " parsed ", again > 0);
    }
    return filled;
}
