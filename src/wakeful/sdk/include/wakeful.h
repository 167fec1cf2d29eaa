/*
 * wakeful.h — the guest C interface of wakeful (spinfoam SDK ABI 1).
 *
 * A guest program includes this header, marks exactly one function SF_MAIN and
 * talks to its host only through the helpers declared below. Every helper takes
 * up to five 64-bit integers and returns one; pointers are guest addresses.
 * Negative results are statuses (SF_INVALID ... SF_CLOSED); invalid memory
 * regions and invalid UTF-8 text are faults, not statuses.
 *
 * This header declares helpers and defines static inline wrappers only; it holds
 * no data. Spec: shared/spec/sdk.md (section numbers cited below).
 */
#ifndef WAKEFUL_H
#define WAKEFUL_H

/* The spinfoam ABI-1 part (sdk.md §2-§10) lives in spinfoam.h; wakeful.h adds the extensions. */
#include "spinfoam.h"

/* ---- sdk.md §2: wakeful's version macros (extensions) --------------------------------- */

#define WAKEFUL_SDK_ABI 1 /* same ABI as spinfoam SDK 1 */
#define WAKEFUL_SDK_EXT 1 /* level of the wf_ extensions (sdk.md §11) */

/* ---- sdk.md §9.7: memmove (extension; linked by name like memcpy) ---------------------- */

extern void *memmove(void *dest, const void *source, unsigned long length);

/* ---- sdk.md §11: wakeful extensions (prefix wf_, built from ABI-1 helpers only) ------- */

/* Non-negative: success or a handle; negative: a status. */
#define WF_OK(x) ((x) >= 0)

/* h[key] as an i64 into *out; 0 or the first status. Drops its temporary handle. */
SF_INLINE sf_i64 wf_json_get_i64(sf_handle h, const char *key, sf_i64 *out) {
    sf_handle v = sf_json_get(h, key);
    if (v < 0)
        return v;
    sf_i64 r = sf_json_i64(v, out);
    sf_drop(v);
    return r;
}

/* h[key] as 1/0, or a status. Drops its temporary handle. */
SF_INLINE sf_i64 wf_json_get_bool(sf_handle h, const char *key) {
    sf_handle v = sf_json_get(h, key);
    if (v < 0)
        return v;
    sf_i64 r = sf_json_bool(v);
    sf_drop(v);
    return r;
}

/* Copies the string h[key] plus a NUL into buf; returns its length, or SF_LIMIT when it
 * needed more than cap - 1 bytes (a NUL-terminated prefix is left), or a lookup status. */
SF_INLINE sf_i64 wf_json_get_str(sf_handle h, const char *key, char *buf, sf_u64 cap) {
    if (cap == 0)
        return SF_LIMIT;
    sf_handle v = sf_json_get(h, key);
    if (v < 0)
        return v;
    sf_u64 room = cap - 1;
    if (room > 16384)
        room = 16384;
    sf_i64 n = sf_json_read_string(v, buf, room);
    sf_drop(v);
    if (n < 0) {
        buf[0] = 0;
        return n;
    }
    if ((sf_u64)n > room) {
        buf[room] = 0;
        return SF_LIMIT;
    }
    buf[n] = 0;
    return n;
}

/* Decimal text of v with a NUL; returns its length, or 0 if cap is too small. */
SF_INLINE sf_u64 wf_u64_to_dec(sf_u64 v, char *buf, sf_u64 cap) {
    sf_u64 digits = 1;
    for (sf_u64 t = v; t >= 10; t /= 10)
        digits++;
    if (cap < digits + 1)
        return 0;
    buf[digits] = 0;
    for (sf_u64 i = digits; i > 0; i--) {
        buf[i - 1] = (char)('0' + v % 10);
        v /= 10;
    }
    return digits;
}

/* Decimal text of v (with '-' when negative) and a NUL; returns its length, or 0 if cap is too small. */
SF_INLINE sf_u64 wf_i64_to_dec(sf_i64 v, char *buf, sf_u64 cap) {
    if (v >= 0)
        return wf_u64_to_dec((sf_u64)v, buf, cap);
    if (cap < 2)
        return 0;
    sf_u64 n = wf_u64_to_dec((sf_u64)0 - (sf_u64)v, buf + 1, cap - 1);
    if (n == 0)
        return 0;
    buf[0] = '-';
    return n + 1;
}

/* 1 when the NUL-terminated strings a and b are equal, else 0. */
SF_INLINE int wf_str_eq(const char *a, const char *b) {
    sf_u64 i = 0;
    while (a[i] != 0 && a[i] == b[i])
        i++;
    return a[i] == b[i];
}

#endif /* WAKEFUL_H */
