/* Allocates a few handles and returns the last one, for the cross-object test (S4). */
#include <wakeful.h>

SF_MAIN sf_i64 main(void) {
    sf_json_null();
    sf_handle h = sf_json_object();
    sf_json_set_raw(h, "k", 1, sf_json_number(5));
    return h;
}
