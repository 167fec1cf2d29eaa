/* search (benchmarks.md §1.5): naive search of a 16-byte needle in 4 KiB, `iterations` times. */
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

static unsigned char hay[4096];
static unsigned char needle[16];

static sf_i64 find(void) {
    for (int i = 0; i + 16 <= 4096; i++) {
        int j = 0;
        while (j < 16 && hay[i + j] == needle[j])
            j++;
        if (j == 16)
            return i;
    }
    return -1;
}

SF_MAIN sf_i64 main(void) {
    sf_i64 k = iterations();
    sf_u64 x = 12345;
    for (int i = 0; i < 4096; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        hay[i] = (unsigned char)('a' + (x >> 60) % 4);
    }
    for (int j = 0; j < 16; j++)
        needle[j] = hay[4000 + j];
    sf_i64 total = 0;
    for (sf_i64 it = 0; it < k; it++)
        total += find();
    return total;
}
