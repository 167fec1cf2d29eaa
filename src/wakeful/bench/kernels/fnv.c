/* fnv (benchmarks.md §1.5): FNV-1a over a 4 KiB buffer, `iterations` times. */
#include "common.h"

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
