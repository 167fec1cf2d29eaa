/* fnv (benchmarks.md §1.5): FNV-1a over a 4 KiB buffer, `iterations` times. */
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
    for (int i = 0; i < 4096; i++)
        buf[i] = (unsigned char)(i * 31 + 7);
    sf_u64 h = 0xcbf29ce484222325ULL;
    for (sf_i64 it = 0; it < k; it++) {
        for (int i = 0; i < 4096; i++) {
            h ^= buf[i];
            h *= 0x100000001b3ULL;
        }
    }
    return (sf_i64)(h & 0x7fffffff);
}
