/* Helper work is charged as fuel (vm.md §6.3): the same loop with small or large helper work. */
#include <wakeful.h>

static char a[16384], b[16384];
static char text[16384];

SF_MAIN sf_i64 main(void) {
    sf_handle cfg = sf_config();
    sf_i64 which = 0;
    wf_json_get_i64(cfg, "case", &which);
    sf_u64 n = 0;
    text[n++] = '[';
    for (int i = 0; i < 3000; i++) {
        if (i) text[n++] = ',';
        text[n++] = '0';
    }
    text[n++] = ']';
    for (int i = 0; i < 64; i++) {
        if (which == 0) memcpy(a, b, 16);
        if (which == 1) memcpy(a, b, 16384);
        if (which == 2) memcmp(a, b, 16384);
        if (which == 3) sf_drop(sf_json_parse(text, n));
    }
    return 0;
}
