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
#define WAKEFUL_SDK_EXT 2 /* level of the wf_ extensions (sdk.md §11); 2 adds text, formatting, notify/ack */

/* ---- sdk.md §9.7: memmove (extension; linked by name like memcpy) ---------------------- */

extern void *memmove(void *dest, const void *source, unsigned long length);

/* ---- sdk.md §11: wakeful extensions (prefix wf_, built from ABI-1 helpers only) ------- */

/* Non-negative: success or a handle; negative: a status. */
#define WF_OK(x) ((x) >= 0)

/* Reminder for spinfoam.h's sf_json_string_equals(h, key, value): 1 when h[key] is a string equal to
 * value, 0 when it is another string, SF_INVALID (-1) when h is not an object, key is absent or the
 * member is not a string. Test it with == 1. The wf_ functions below document every result. */

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

/* Lowercase hexadecimal text of v (no "0x", no leading zeros) with a NUL; returns its length, or 0 if
 * cap is too small (nothing written). */
SF_INLINE sf_u64 wf_u64_to_hex(sf_u64 v, char *buf, sf_u64 cap) {
    sf_u64 digits = 1;
    for (sf_u64 t = v; t >= 16; t >>= 4)
        digits++;
    if (cap < digits + 1)
        return 0;
    buf[digits] = 0;
    for (sf_u64 i = digits; i > 0; i--) {
        sf_u64 d = v & 15;
        buf[i - 1] = (char)(d < 10 ? '0' + d : 'a' + (d - 10));
        v >>= 4;
    }
    return digits;
}

/* 1 when the NUL-terminated strings a and b are equal, else 0. */
SF_INLINE int wf_str_eq(const char *a, const char *b) {
    sf_u64 i = 0;
    while (a[i] != 0 && a[i] == b[i])
        i++;
    return a[i] == b[i];
}

/* ---- text search and comparison (sdk.md §11; issue 18) ---------------------------------- */

/* 1 when the n bytes at a and b are equal, else 0. Any n: compares in slices memcmp accepts. */
SF_INLINE int wf_mem_eq(const void *a, const void *b, sf_u64 n) {
    const char *x = (const char *)a;
    const char *y = (const char *)b;
    while (n > 16384) {
        if (memcmp(x, y, 16384) != 0)
            return 0;
        x += 16384;
        y += 16384;
        n -= 16384;
    }
    return memcmp(x, y, n) == 0;
}

/* Offset of the first occurrence of needle[0, needle_len) in hay[0, hay_len), or SF_INVALID (-1) when
 * there is none. An empty needle is found at offset 0. Bytes, not characters: no NUL is needed. */
SF_INLINE sf_i64 wf_mem_find(const char *hay, sf_u64 hay_len, const char *needle, sf_u64 needle_len) {
    if (needle_len == 0)
        return 0;
    for (sf_u64 i = 0; needle_len <= hay_len && i <= hay_len - needle_len; i++)
        if (hay[i] == needle[0] && wf_mem_eq(hay + i + 1, needle + 1, needle_len - 1))
            return (sf_i64)i;
    return SF_INVALID;
}

/* Offset of the first occurrence of the NUL-terminated needle in the NUL-terminated hay, or
 * SF_INVALID (-1) when there is none; "" is found at 0. wf_str_find(s, x) >= 0 means "s contains x". */
SF_INLINE sf_i64 wf_str_find(const char *hay, const char *needle) {
    return wf_mem_find(hay, sf_strlen(hay), needle, sf_strlen(needle));
}

/* 1 when s begins with prefix (every string begins with ""), else 0. */
SF_INLINE int wf_str_starts_with(const char *s, const char *prefix) {
    for (sf_u64 i = 0; prefix[i] != 0; i++)
        if (s[i] != prefix[i])
            return 0;
    return 1;
}

/* 1 when s ends with suffix (every string ends with ""), else 0. */
SF_INLINE int wf_str_ends_with(const char *s, const char *suffix) {
    sf_u64 n = sf_strlen(s);
    sf_u64 m = sf_strlen(suffix);
    return m <= n && wf_mem_eq(s + (n - m), suffix, m);
}

/* c with ASCII 'A'..'Z' mapped to 'a'..'z'; every other byte unchanged. */
SF_INLINE int wf_ascii_lower(int c) {
    return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

/* 1 when a and b are equal ignoring ASCII case ("OK" equals "ok"), else 0. Bytes outside A-Z and a-z
 * (UTF-8 included) must match exactly. */
SF_INLINE int wf_str_ieq(const char *a, const char *b) {
    const unsigned char *x = (const unsigned char *)a;
    const unsigned char *y = (const unsigned char *)b;
    sf_u64 i = 0;
    while (x[i] != 0 && wf_ascii_lower(x[i]) == wf_ascii_lower(y[i]))
        i++;
    return wf_ascii_lower(x[i]) == wf_ascii_lower(y[i]);
}

/* ---- building text in a buffer (sdk.md §11; issue 18) ----------------------------------- *
 * buf has room for cap bytes, the NUL included; pos is the length of the text already there. Each
 * wf_cat* appends, keeps buf NUL-terminated and returns the new length. When a piece does not fit
 * the result is cap: text keeps the prefix that fits, a number writes nothing (a cut number would be
 * a wrong one), and every later wf_cat* returns cap unchanged. So chain the calls and check once:
 *     n = wf_cat(buf, sizeof buf, 0, "cpu is "); n = wf_cat_i64(buf, sizeof buf, n, v);
 *     if (n >= sizeof buf) ... did not fit ...                                                    */

/* Appends len bytes of s (which may lie inside buf); the new length, or cap when they did not all fit. */
SF_INLINE sf_u64 wf_cat_raw(char *buf, sf_u64 cap, sf_u64 pos, const char *s, sf_u64 len) {
    if (pos >= cap)
        return cap;
    sf_u64 room = cap - 1 - pos;
    sf_u64 n = len < room ? len : room;
    for (sf_u64 done = 0; done < n;) {
        sf_u64 k = n - done > 16384 ? 16384 : n - done;
        memmove(buf + pos + done, s + done, k);
        done += k;
    }
    buf[pos + n] = 0;
    return n < len ? cap : pos + n;
}

/* Appends the NUL-terminated s; the new length, or cap when it did not all fit. */
SF_INLINE sf_u64 wf_cat(char *buf, sf_u64 cap, sf_u64 pos, const char *s) {
    return wf_cat_raw(buf, cap, pos, s, sf_strlen(s));
}

/* Appends len bytes of s whole or not at all: the new length, or cap (nothing written) when they do
 * not fit. For numbers and ids, where a cut piece would be a wrong one. */
SF_INLINE sf_u64 wf_cat_whole(char *buf, sf_u64 cap, sf_u64 pos, const char *s, sf_u64 len) {
    if (pos >= cap || len > cap - 1 - pos) {
        if (pos < cap)
            buf[pos] = 0;
        return cap;
    }
    return wf_cat_raw(buf, cap, pos, s, len);
}

/* Appends the decimal text of v ('-' when negative); the new length, or cap when it did not fit. */
SF_INLINE sf_u64 wf_cat_i64(char *buf, sf_u64 cap, sf_u64 pos, sf_i64 v) {
    char digits[24];
    return wf_cat_whole(buf, cap, pos, digits, wf_i64_to_dec(v, digits, sizeof digits));
}

/* Appends the decimal text of v; the new length, or cap when it did not fit. */
SF_INLINE sf_u64 wf_cat_u64(char *buf, sf_u64 cap, sf_u64 pos, sf_u64 v) {
    char digits[24];
    return wf_cat_whole(buf, cap, pos, digits, wf_u64_to_dec(v, digits, sizeof digits));
}

/* Appends the lowercase hexadecimal text of v; the new length, or cap when it did not fit. */
SF_INLINE sf_u64 wf_cat_hex(char *buf, sf_u64 cap, sf_u64 pos, sf_u64 v) {
    char digits[24];
    return wf_cat_whole(buf, cap, pos, digits, wf_u64_to_hex(v, digits, sizeof digits));
}

/* ---- JSON and host calls without the boilerplate (sdk.md §11; issue 18) ------------------- */

/* Number of elements of the JSON array; SF_INVALID (-1) when it is not an array or not a handle. */
SF_INLINE sf_i64 wf_json_array_len(sf_handle array) {
    sf_i64 kind = sf_json_kind(array);
    if (kind < 0)
        return kind;
    if (kind != SF_ARRAY)
        return SF_INVALID;
    return sf_bytes_len(array);
}

/* object[key] = a copy of value, then drops value: for a value made only to be stored, as in
 * wf_json_set_owned(args, "n", sf_json_number(3)). A negative value (a failed allocation) is returned
 * as it is, so calls chain: 0, or the first status (SF_INVALID, SF_LIMIT). */
SF_INLINE sf_i64 wf_json_set_owned(sf_handle object, const char *key, sf_handle value) {
    if (value < 0)
        return value;
    sf_i64 r = sf_json_set(object, key, value);
    sf_drop(value);
    return r;
}

/* sf_host_call for its effect only: drops the reply. 0, or the call's status (SF_INVALID, SF_DENIED,
 * SF_LIMIT, SF_TIMEOUT, SF_HOST_ERROR, SF_CLOSED). args stays the caller's to drop. */
SF_INLINE sf_i64 wf_call(const char *cap, sf_handle args, sf_u64 timeout_ms) {
    sf_handle reply = sf_host_call(cap, args, timeout_ms);
    if (reply < 0)
        return reply;
    sf_drop(reply);
    return 0;
}

/* The host-call timeout of wf_notify, wf_notify_value and wf_ack: above the harness's own. */
#define WF_CALL_TIMEOUT_MS 10000

/* agent.notify {member: a copy of value, "dedup_key": dedup_key}, every handle it made dropped; value
 * stays the caller's. The core of wf_notify ("text") and wf_notify_value ("content"). 0 when the wake
 * was queued or was a duplicate (the same key again), else a status: SF_LIMIT (handles or sizes),
 * SF_INVALID (value not a JSON handle), SF_DENIED (not granted), SF_HOST_ERROR (refused: budget,
 * arguments, store), SF_TIMEOUT, SF_CLOSED. A negative value is returned as it is. */
SF_INLINE sf_i64 wf_notify_member(const char *member, sf_handle value, const char *dedup_key) {
    if (value < 0)
        return value;
    sf_handle args = sf_json_object();
    if (args < 0)
        return args;
    sf_i64 r = sf_json_set(args, member, value);
    if (r == 0)
        r = wf_json_set_owned(args, "dedup_key", sf_json_string(dedup_key));
    if (r == 0)
        r = wf_call("agent.notify", args, WF_CALL_TIMEOUT_MS);
    sf_drop(args);
    return r;
}

/* agent.notify {"content": content, "dedup_key": dedup_key}; content is a string, object or array
 * handle and stays the caller's. Results as wf_notify_member. */
SF_INLINE sf_i64 wf_notify_value(sf_handle content, const char *dedup_key) {
    return wf_notify_member("content", content, dedup_key);
}

/* agent.notify {"text": text, "dedup_key": dedup_key} in one call, every handle dropped. 0 when the
 * wake was queued or was a duplicate, else a status as for wf_notify_member. */
SF_INLINE sf_i64 wf_notify(const char *text, const char *dedup_key) {
    sf_handle t = sf_json_string(text);
    sf_i64 r = wf_notify_member("text", t, dedup_key);
    if (t > 0)
        sf_drop(t);
    return r;
}

/* loop.ack {"event_id": event.event_id} for an envelope from sf_event_next (which stays the caller's).
 * 0 when acked (also when it was acked before), else a status: SF_INVALID (no event_id), SF_LIMIT,
 * SF_DENIED, SF_HOST_ERROR, SF_TIMEOUT, SF_CLOSED. */
SF_INLINE sf_i64 wf_ack(sf_handle event) {
    sf_handle args = sf_json_object();
    if (args < 0)
        return args;
    sf_i64 r = wf_json_set_owned(args, "event_id", sf_json_get(event, "event_id"));
    if (r == 0)
        r = wf_call("loop.ack", args, WF_CALL_TIMEOUT_MS);
    sf_drop(args);
    return r;
}

#endif /* WAKEFUL_H */
