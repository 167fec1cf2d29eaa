/* Log flood (vm.md §9.1 item 22) and the rate window of sdk.md §9.3. */
#include <wakeful.h>
#define CHECK(c) do { if (!(c)) return __LINE__; } while (0)

SF_MAIN sf_i64 main(void) {
    sf_i64 ok = 0, limited = 0;
    for (int i = 0; i < 1000; i++) {
        sf_i64 r = sf_log("flood");
        if (r == 0) ok++;
        else if (r == SF_LIMIT) limited++;
    }
    CHECK(ok == 10 && limited == 990);
    CHECK(sf_sleep_ms(1000) == 0); /* the window restarts once 1 s has passed */
    CHECK(sf_log_raw("after \xc3\xa9", 8) == 0);
    CHECK(sf_log_raw((const char *)0, 1025) == SF_LIMIT); /* too long: not read, not counted */
    for (int i = 0; i < 9; i++)
        CHECK(sf_log("more") == 0);
    CHECK(sf_log("over") == SF_LIMIT);
    return 0;
}
