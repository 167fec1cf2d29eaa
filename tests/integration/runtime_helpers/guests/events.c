/* Time, config, sleep, yield and events (sdk.md §9.1-9.2) through a real suspension loop. */
#include <wakeful.h>
#define CHECK(c) do { if (!(c)) return __LINE__; } while (0)
#define S(lit) lit, sizeof(lit) - 1

static char buf[64];

SF_MAIN sf_i64 main(void) {
    sf_u64 t0 = sf_now_mono_ms();
    CHECK(sf_now_unix_ms() == 1767225600000ULL);
    CHECK(sf_sleep_ms(250) == 0);
    CHECK(sf_now_mono_ms() >= t0 + 250);
    CHECK(sf_yield() == 0);
    sf_handle cfg = sf_config();
    CHECK(sf_json_kind(cfg) == SF_OBJECT && sf_json_string_equals(cfg, "who", "me") == 1);
    sf_handle cfg2 = sf_config();
    CHECK(cfg2 != cfg && sf_drop(cfg2) == 0);
    sf_handle ev = sf_event_next(0); /* a ready event is returned even with timeout 0 */
    CHECK(ev > 0 && sf_json_kind(ev) == SF_OBJECT);
    CHECK(sf_json_string_equals(ev, "event_id", "e1") == 1 && sf_json_string_equals(ev, "topic", "t") == 1);
    sf_handle payload = sf_json_get(ev, "payload");
    sf_i64 n = 0;
    CHECK(wf_json_get_i64(payload, "n", &n) == 0 && n == 7);
    sf_handle deep = sf_event_next(1000); /* its payload is nested 32 deep: envelope exempt */
    CHECK(deep > 0 && sf_json_kind(sf_json_get(deep, "payload")) == SF_ARRAY);
    sf_i64 held = 0;
    while (sf_json_null() > 0) held++;
    CHECK(sf_event_next(5) == SF_LIMIT); /* table full: the event is lost */
    CHECK(sf_drop(cfg) == 0 && sf_drop(payload) == 0);
    sf_handle third = sf_event_next(5);
    CHECK(third > 0 && sf_json_string_equals(third, "event_id", "e4") == 1);
    CHECK(wf_json_get_str(third, "topic", buf, sizeof buf) == 1 && buf[0] == 'z' && buf[1] == 0);
    CHECK(sf_event_next(0) == SF_TIMEOUT); /* empty mailbox, timeout 0 */
    CHECK(sf_event_next(0xffffffffffffffffULL) == SF_TIMEOUT);
    return 0;
}
