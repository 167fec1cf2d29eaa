/* sort (benchmarks.md §1.5): insertion sort of 256 32-bit values from an LCG, `iterations` times. */
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

static unsigned int values[256];

SF_MAIN sf_i64 main(void) {
    sf_i64 k = iterations();
    sf_u64 check = 0;
    for (sf_i64 it = 0; it < k; it++) {
        unsigned int seed = 1; /* the same input every iteration, so count(k) = a + b·k exactly */
        for (int i = 0; i < 256; i++) {
            seed = seed * 1103515245u + 12345u;
            values[i] = seed;
        }
        for (int i = 1; i < 256; i++) {
            unsigned int v = values[i];
            int j = i - 1;
            while (j >= 0 && values[j] > v) {
                values[j + 1] = values[j];
                j--;
            }
            values[j + 1] = v;
        }
        check += values[0] ^ values[255];
    }
    return (sf_i64)(check & 0x7fffffff);
}
