/*
 * spinfoam.h — spinfoam's SDK ABI 1 and nothing else: types, statuses, helpers and the inline
 * wrappers of spinfoam's own header. A program written for spinfoam includes this name and
 * compiles unchanged: wakeful's extensions (memmove, the wf_ functions, WAKEFUL_SDK_*) are not
 * declared here, so a program may define those names itself. wakeful.h includes this file and
 * adds the extensions. Spec: shared/spec/sdk.md (sections cited below); docs/spinfoam-compat.md.
 */
#ifndef SPINFOAM_H
#define SPINFOAM_H

/* ---- sdk.md §2: types and macros ------------------------------------------ */

typedef unsigned long long sf_u64;
typedef long long sf_i64;
typedef sf_i64 sf_handle; /* > 0: a handle; < 0: a status */

/* The entry point: `SF_MAIN sf_i64 main(void) { ... }` (sdk.md §7). */
#define SF_MAIN __attribute__((section("spinfoam.main"), used))
/* A function the compiler must inline (keeps call chains short, sdk.md §8). */
#define SF_INLINE static inline __attribute__((always_inline))

/* ---- sdk.md §3: status codes and JSON kinds ---------------------------------- */

#define SF_INVALID ((sf_i64)-1)    /* unknown/foreign handle, wrong kind, missing key, syntax */
#define SF_LIMIT ((sf_i64)-2)      /* a bound was hit */
#define SF_TIMEOUT ((sf_i64)-3)    /* an event wait or host call timed out */
#define SF_DENIED ((sf_i64)-4)     /* capability not permitted for this object */
#define SF_HOST_ERROR ((sf_i64)-5) /* the embedder answered with an error */
#define SF_CLOSED ((sf_i64)-6)     /* transport closed or object stopping */

#define SF_NULL 0
#define SF_BOOL 1
#define SF_NUMBER 2
#define SF_STRING 3
#define SF_ARRAY 4
#define SF_OBJECT 5

/* ---- sdk.md §9.1: time and scheduling ------------------------------------------ */

extern sf_i64 sf_sleep_ms(sf_u64 milliseconds);
extern sf_i64 sf_yield(void);
extern sf_u64 sf_now_mono_ms(void);
extern sf_u64 sf_now_unix_ms(void);

/* ---- sdk.md §9.2: config, lifetime, events ---------------------------------------- */

extern sf_handle sf_config(void);
extern sf_i64 sf_drop(sf_handle handle);
extern sf_handle sf_event_next(sf_u64 timeout_ms);

/* ---- sdk.md §9.3: host calls and logs --------------------------------------------- */

extern sf_handle sf_host_call_raw(const char *cap, sf_u64 cap_len, sf_handle params,
                                  sf_u64 timeout_ms);
extern sf_i64 sf_log_raw(const char *message, sf_u64 length);

/* ---- sdk.md §9.4: reading JSON ------------------------------------------------------ */

extern sf_handle sf_json_parse(const char *json, sf_u64 length);
extern sf_handle sf_json_get_raw(sf_handle object, const char *key, sf_u64 length);
extern sf_handle sf_json_at(sf_handle array, sf_u64 index);
extern sf_i64 sf_json_kind(sf_handle value);
extern sf_i64 sf_json_i64(sf_handle value, sf_i64 *out);
extern sf_i64 sf_json_bool(sf_handle value);
extern sf_i64 sf_json_read_string(sf_handle value, char *out, sf_u64 capacity);
extern sf_i64 sf_json_string_equals_raw(sf_handle object, const char *key, sf_u64 key_len,
                                        const char *value, sf_u64 value_len);

/* ---- sdk.md §9.5: building JSON ------------------------------------------------------ */

extern sf_handle sf_json_object(void);
extern sf_handle sf_json_array(void);
extern sf_handle sf_json_null(void);
extern sf_handle sf_json_string_raw(const char *value, sf_u64 length);
extern sf_handle sf_json_number(sf_i64 value);
extern sf_handle sf_json_boolean(sf_u64 value);
extern sf_i64 sf_json_set_raw(sf_handle object, const char *key, sf_u64 length, sf_handle value);
extern sf_i64 sf_json_push(sf_handle array, sf_handle value);
extern sf_handle sf_json_dump(sf_handle value);

/* ---- sdk.md §9.6: bytes ------------------------------------------------------------- */

extern sf_handle sf_bytes(const void *bytes, sf_u64 length);
extern sf_i64 sf_bytes_len(sf_handle h);
extern sf_i64 sf_bytes_read(sf_handle h, sf_u64 offset, void *out, sf_u64 capacity);

/* ---- sdk.md §9.7: memory helpers (linked by name) ------------------------------------ */

extern void *memcpy(void *dest, const void *source, unsigned long length);
extern void *memset(void *dest, int value, unsigned long length);
extern int memcmp(const void *a, const void *b, unsigned long length);

/* ---- sdk.md §10: inline wrappers (spinfoam-compatible) -------------------------------- */

/* Bytes before the terminating NUL. */
SF_INLINE sf_u64 sf_strlen(const char *s) {
    sf_u64 n = 0;
    while (s[n] != 0)
        n++;
    return n;
}

SF_INLINE sf_handle sf_host_call(const char *cap, sf_handle params, sf_u64 timeout_ms) {
    return sf_host_call_raw(cap, sf_strlen(cap), params, timeout_ms);
}

SF_INLINE sf_i64 sf_log(const char *message) {
    return sf_log_raw(message, sf_strlen(message));
}

SF_INLINE sf_handle sf_json_get(sf_handle h, const char *key) {
    return sf_json_get_raw(h, key, sf_strlen(key));
}

SF_INLINE sf_handle sf_json_string(const char *value) {
    return sf_json_string_raw(value, sf_strlen(value));
}

SF_INLINE sf_i64 sf_json_set(sf_handle h, const char *key, sf_handle value) {
    return sf_json_set_raw(h, key, sf_strlen(key), value);
}

SF_INLINE sf_i64 sf_json_string_equals(sf_handle h, const char *key, const char *value) {
    return sf_json_string_equals_raw(h, key, sf_strlen(key), value, sf_strlen(value));
}

#endif /* SPINFOAM_H */
