/* Handle counter exhaustion (sdk.md §5): numbers up to 2^63-1, then SF_LIMIT. */
#include <wakeful.h>
#define CHECK(c) do { if (!(c)) return __LINE__; } while (0)

SF_MAIN sf_i64 main(void) {
    sf_handle a = sf_json_null();
    sf_handle b = sf_json_null();
    CHECK(a == 0x7ffffffffffffffeLL && b == 0x7fffffffffffffffLL);
    CHECK(sf_json_kind(b) == SF_NULL);
    CHECK(sf_drop(a) == 0);
    CHECK(sf_json_null() == SF_LIMIT && sf_config() == SF_LIMIT && sf_bytes("x", 1) == SF_LIMIT);
    return 0;
}
