/* itoa (benchmarks.md §1.5): 1,000 64-bit values to decimal (division), `iterations` times. */
#include <wakeful.h>

SF_INLINE sf_i64 iterations(void) {
    sf_i64 k = 1;
    sf_handle cfg = sf_config();
    if (cfg >= 0) {
        wf_json_get_i64(cfg, "iterations", &k);
        sf_drop(cfg);
    }
    return k;
}

static char out[32];

static int to_dec(sf_u64 v) {
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (int i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    return n;
}

SF_MAIN sf_i64 main(void) {
    sf_i64 k = iterations();
    sf_i64 digits = 0;
    for (sf_i64 it = 0; it < k; it++) {
        sf_u64 x = 88172645463325252ULL; /* the same values every iteration: count(k) = a + b·k exactly */
        for (int i = 0; i < 1000; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            digits += to_dec(x) + out[0];
        }
    }
    return digits;
}
