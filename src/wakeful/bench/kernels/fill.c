/* fill (benchmarks.md §1.5): fill 4 KiB with a pattern and sum it back, `iterations` times. */
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

static unsigned char buf[4096];

SF_MAIN sf_i64 main(void) {
    sf_i64 k = iterations();
    sf_u64 sum = 0;
    for (sf_i64 it = 0; it < k; it++) {
        for (int i = 0; i < 4096; i++)
            buf[i] = (unsigned char)(i ^ it);
        for (int i = 0; i < 4096; i++)
            sum += buf[i];
    }
    return (sf_i64)sum;
}
