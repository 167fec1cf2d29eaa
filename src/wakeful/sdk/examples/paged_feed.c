/*
 * paged_feed.c — follow a paginated JSON feed with `web.http_request`, keeping a cursor
 * (guide: "Capabilities", "Text and numbers", "Config and checkpoints").
 *
 * GET <config.feed_url>?cursor=<cursor> answers {"items": [{"id", "severity", ...}], "next": "<cursor>"}.
 * High-severity items wake the agent (key "item:<id>": a refetch after a reload deduplicates).
 * After a page is handled its "next" cursor is checkpointed; an empty page means caught up, and the
 * Loop sleeps a poll interval. Transport failures arrive as data ({"error": {"code"}}) and non-200
 * statuses are retried with capped exponential backoff and jitter.
 *
 * config: {"feed_url": "https://feed.example.com/items", "poll_ms": 300000}
 *
 * run-arg: --config {"feed_url": "https://feed.example.com/items", "poll_ms": 300}
 */
#include <wakeful.h>

static char base_url[512] = "https://feed.example.com/items";
static char cursor[128];
static char url[700];
static char body[12289]; /* web.http_request returns at most 12,288 body bytes */
static char id[128];
static char key[160];

/* url = base_url + "?cursor=" + cursor; its length, or 0 when it does not fit. */
static sf_u64 build_url(void) {
    sf_u64 n = wf_cat(url, sizeof url, 0, base_url);
    n = wf_cat(url, sizeof url, n, "?cursor=");
    n = wf_cat(url, sizeof url, n, cursor);
    return n < sizeof url ? n : 0;
}

/* Fetches one page; a handle to the parsed page, or a status (SF_HOST_ERROR for HTTP failures). */
static sf_handle fetch_page(void) {
    sf_u64 n = build_url();
    if (n == 0)
        return SF_LIMIT;
    sf_handle args = sf_json_object();
    sf_i64 r = args < 0 ? args : wf_json_set_owned(args, "url", sf_json_string_raw(url, n));
    if (r == 0)
        r = wf_json_set_owned(args, "max_bytes", sf_json_number(12288));
    sf_handle res = r < 0 ? r : sf_host_call("web.http_request", args, 25000); /* > its 10 s default */
    if (args > 0)
        sf_drop(args);
    if (res < 0)
        return res;
    sf_i64 status = 0;
    sf_i64 len = SF_INVALID;
    if (wf_json_get_i64(res, "status", &status) == 0 && status == 200)
        len = wf_json_get_str(res, "body", body, sizeof body);
    sf_drop(res); /* an {"error": ...} result has no status: it falls through to the retry */
    if (len < 0)
        return SF_HOST_ERROR;
    return sf_json_parse(body, (sf_u64)len);
}

static sf_i64 notify_item(sf_handle item) {
    if (wf_json_get_str(item, "id", id, sizeof id) < 0)
        return 0; /* an item without an id cannot be deduplicated: skip it */
    if (wf_cat(key, sizeof key, wf_cat(key, sizeof key, 0, "item:"), id) >= sizeof key)
        return 0; /* cannot happen: a longer id was refused above */
    sf_log(key);
    sf_handle args = sf_json_object();
    sf_i64 r = args < 0 ? args : wf_json_set_owned(args, "content", sf_json_get(item, "title"));
    if (r == SF_INVALID)
        r = wf_json_set_owned(args, "content", sf_json_string(key)); /* no title: say which item */
    if (r == 0)
        r = wf_json_set_owned(args, "dedup_key", sf_json_string(key));
    if (r == 0)
        r = wf_call("agent.notify", args, 10000);
    if (args > 0)
        sf_drop(args);
    return r;
}

/* Handles every item of a page; the number of items, or a status. */
static sf_i64 handle_page(sf_handle page) {
    sf_handle items = sf_json_get(page, "items");
    sf_i64 count = wf_json_array_len(items); /* SF_INVALID when "items" is missing or not an array */
    if (count < 0)
        count = 0;
    sf_i64 r = 0;
    for (sf_i64 i = 0; i < count && r == 0; i++) {
        sf_handle item = sf_json_at(items, (sf_u64)i);
        if (item < 0)
            break;
        char severity[16];
        if (wf_json_get_str(item, "severity", severity, sizeof severity) >= 0 && wf_str_ieq(severity, "high"))
            r = notify_item(item); /* "high", "High" and "HIGH" alike */
        sf_drop(item);
    }
    if (items > 0)
        sf_drop(items);
    return r < 0 ? r : count;
}

/* loop.state.put {"state": {"cursor": cursor}} */
static sf_i64 checkpoint(void) {
    sf_handle args = sf_json_object();
    sf_handle state = sf_json_object();
    sf_i64 r = (args < 0 || state < 0) ? SF_LIMIT : 0;
    if (r == 0)
        r = wf_json_set_owned(state, "cursor", sf_json_string(cursor));
    if (r == 0)
        r = sf_json_set(args, "state", state);
    if (r == 0)
        r = wf_call("loop.state.put", args, 10000);
    if (state > 0)
        sf_drop(state);
    if (args > 0)
        sf_drop(args);
    return r;
}

SF_MAIN sf_i64 main(void) {
    sf_i64 poll = 300000;
    sf_handle cfg = sf_config();
    if (cfg < 0)
        return cfg;
    wf_json_get_i64(cfg, "poll_ms", &poll);
    wf_json_get_str(cfg, "feed_url", base_url, sizeof base_url);
    if (!wf_str_starts_with(base_url, "https://") && !wf_str_starts_with(base_url, "http://")) {
        sf_log("config.feed_url must be an absolute http(s) URL");
        sf_drop(cfg);
        return 2; /* a configuration error: tell the agent */
    }
    sf_handle state = sf_json_get(cfg, "state");
    if (state > 0) {
        wf_json_get_str(state, "cursor", cursor, sizeof cursor);
        sf_drop(state);
    }
    sf_drop(cfg);

    sf_u64 backoff = 0;
    for (;;) {
        sf_handle page = fetch_page();
        if (page == SF_CLOSED)
            return 0;
        if (page == SF_DENIED)
            return 2;
        if (page < 0) {
            backoff = backoff ? backoff * 2 : 1000;
            if (backoff > 300000)
                backoff = 300000;
            sf_log("feed fetch failed; backing off");
            if (sf_sleep_ms(backoff + sf_now_mono_ms() % (backoff / 4 + 1)) < 0)
                return 0;
            continue;
        }
        backoff = 0;
        sf_i64 count = handle_page(page);
        sf_i64 r = count < 0 ? count : 0;
        char next[128];
        if (r == 0 && wf_json_get_str(page, "next", next, sizeof next) > 0 && !wf_str_eq(next, cursor)) {
            memcpy(cursor, next, sizeof cursor);
            r = checkpoint(); /* the page is done: move the cursor past it */
        }
        sf_drop(page);
        if (r == SF_CLOSED)
            return 0;
        if (r == SF_DENIED)
            return 2;
        if (count == 0 || r < 0) {
            if (sf_sleep_ms((sf_u64)poll) < 0) /* caught up (or a failed wake): wait, then re-read */
                return 0;
        }
    }
}
