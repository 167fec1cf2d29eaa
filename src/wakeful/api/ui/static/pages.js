"use strict";
// Pages of interfaces.md §6: overview, Loops table, Loop page, session page. Goals live in goals.js.
(function (W) {
  const el = W.el;
  const INJECTED = ["loop_id", "incarnation", "state"];  // keys the harness injects into a Loop's config

  W.stateBadge = (loop, testid) => W.badge(loop.state + (loop.pause_reason ? " · " + loop.pause_reason : ""), loop.state, testid);

  // the sessions this principal can read: its own agent's, or every agent's of the group for a person
  W.sessions = async function () {
    const who = W.session.principal;
    const agents = who.agent_id ? [{ id: who.agent_id }] : await W.all(W.G() + "/agents");
    const out = [];
    for (const agent of agents) out.push(...(await W.all(W.G() + "/agents/" + encodeURIComponent(agent.id) + "/sessions")));
    return out;
  };
  W.messages = (sessionId) => W.all(W.G() + "/sessions/" + encodeURIComponent(sessionId) + "/messages", {}, 50);
  // messages only grow (oldest first, each with its cursor): counting wakes reads just the new ones on each redraw
  const seen = {};
  W.newMessages = async function (sessionId) {
    const known = seen[sessionId] || (seen[sessionId] = { items: [], after: null });
    for (let i = 0; i < 50; i++) {
      const page = await W.api(W.G() + "/sessions/" + encodeURIComponent(sessionId) + "/messages" + W.q({ after: known.after, limit: 200 }));
      known.items.push(...page.items);
      if (page.items.length) known.after = page.items[page.items.length - 1].cursor;
      if (!page.next_cursor) break;
    }
    return known.items;
  };
  W.wakesSince = async function (since, loopId) {
    const out = [];
    for (const s of await W.sessions()) {
      for (const m of await W.newMessages(s.id)) if (m.kind === "loop" && m.created_ms >= since && (!loopId || m.loop_id === loopId)) out.push(m);
    }
    return out;
  };
  // oldest pending event (received) and nearest ack deadline of one Loop, from its detail
  W.pendingOf = async function (loop) {
    if (!loop.pending_count) return null;
    const detail = await W.api(W.G() + "/loops/" + encodeURIComponent(loop.id) + "?include=pending");
    const pending = detail.pending || [];
    const received = pending.map((e) => e.received_ms).filter(Boolean);
    const deadlines = pending.map((e) => e.deadline_ms).filter(Boolean);
    return { oldest: received.length ? Math.min(...received) : null, deadline: deadlines.length ? Math.min(...deadlines) : null };
  };
  W.pauseResume = function (loop, suffix) {
    const path = W.G() + "/loops/" + encodeURIComponent(loop.id);
    return el("span", { class: "actions" },
      W.button("Pause", "pause" + suffix, (ev) => W.act(ev.target, () => W.api(path + "/pause", "POST")), { disabled: loop.state !== "active" }),
      W.button("Resume", "resume" + suffix, (ev) => W.act(ev.target, () => W.api(path + "/resume", "POST")), { disabled: loop.state === "active" }));
  };

  // ---- overview
  W.pages.overview = function (main) {
    return {
      async draw() {
        const who = W.session.principal;
        const [loops, info] = await Promise.all([W.all(W.G() + "/loops"), W.api("/v1/info")]);
        const nodes = who.role === "admin" ? (await W.api("/v1/nodes")).items : null;
        const byState = {};
        for (const l of loops) { const k = l.state + (l.pause_reason ? " · " + l.pause_reason : ""); byState[k] = (byState[k] || 0) + 1; }
        let pending = 0, oldest = null, deadline = null;
        for (const l of loops) {
          pending += l.pending_count || 0;
          const p = await W.pendingOf(l);
          if (p && p.oldest && (!oldest || p.oldest < oldest)) oldest = p.oldest;
          if (p && p.deadline && (!deadline || p.deadline < deadline)) deadline = p.deadline;
        }
        const wakes = await W.wakesSince(W.now() - 24 * 3600 * 1000);
        const lastHour = wakes.filter((m) => m.created_ms >= W.now() - 3600 * 1000).length;
        const refusals = info.recent_refusals || {};
        const sessions = await W.sessions();
        W.fill(main,
          el("h1", { text: "Overview" }),
          el("div", { class: "tiles" },
            tile("Loops", loops.length, "tile-loops"),
            tile("Pending events", pending, "tile-pending", oldest ? "oldest " + W.ago(oldest) + (deadline ? ", ack deadline " + W.ago(deadline) : "") : "none waiting"),
            tile("Wakes, last hour", lastHour, "tile-wakes"),
            tile("429 / 503, last hour", (refusals["429"] || 0) + " / " + (refusals["503"] || 0), "tile-refusals", "on this node")),
          W.card("Loops by state", "loops-by-state", el("div", { class: "chips" },
            Object.keys(byState).sort().map((k) => W.badge(k + ": " + byState[k], k.split(" ")[0], "state-count-" + k.replace(" · ", "-")))),
            loops.length ? null : W.empty("No Loops in this group yet.")),
          W.card("Wakes per hour (24 h)", "wakes-chart", W.hourBars(wakes.map((m) => m.created_ms), "wakes-per-hour")),
          W.card("Nodes", "nodes", nodes === null ? W.empty("Nodes are shown to admin keys.") :
            W.table("nodes-table", ["node", "state", "heartbeat", "objects", "leases"], nodes.map((n) => el("tr", { testid: "node-row-" + n.id },
              el("td", { text: n.name || n.id }), el("td", {}, W.badge(n.state, n.state === "alive" ? "active" : "paused", "node-state-" + n.id)),
              el("td", { text: Math.round((n.heartbeat_age_ms || 0) / 1000) + " s ago" }), el("td", { text: n.objects }), el("td", { text: n.leases_held }))))),
          W.card("Sessions", "sessions", sessions.length ? el("ul", {}, sessions.map((s) => el("li", { testid: "session-row-" + s.id },
            W.link("/ui/sessions/" + encodeURIComponent(s.id), s.title || s.id, "session-link-" + s.id), " ", el("span", { class: "muted", text: s.agent_id })))) : W.empty("No sessions.")));
      },
    };
  };
  function tile(label, value, testid, note) {
    return el("div", { class: "tile", testid }, el("div", { class: "tile-value", text: value, testid: testid + "-value" }), el("div", { class: "tile-label", text: label }), note ? el("div", { class: "muted small", text: note }) : null);
  }

  // ---- Loops table
  W.pages.loops = function (main) {
    const pager = new W.Pager();
    const filters = { state: "", agent_id: "" };
    const head = el("div", { class: "filters" });
    const body = el("div");
    let agents = null;
    return {
      async draw() {
        if (agents === null) agents = W.session.principal.agent_id ? [] : await W.all(W.G() + "/agents");
        const listed = await W.api(W.G() + "/loops" + W.q({ limit: 50, cursor: pager.cursor, state: filters.state.split(":")[0], pause_reason: filters.state.split(":")[1], agent_id: filters.agent_id }));
        const rows = [];
        for (const l of listed.items) {
          const p = await W.pendingOf(l);
          rows.push(el("tr", { testid: "loop-row-" + l.id, "data-loop-name": l.name || "" },
            el("td", {}, W.link("/ui/loops/" + encodeURIComponent(l.id), l.name || l.id, "loop-link-" + l.id)),
            el("td", { class: "mono small", text: l.agent_id }),
            el("td", {}, W.stateBadge(l, "loop-state-" + l.id)),
            el("td", { text: l.incarnation }),
            el("td", { class: "mono small", text: l.node || "—" }),
            el("td", {}, el("span", { testid: "loop-pending-" + l.id, text: l.pending_count })),
            el("td", { class: "small", text: p ? W.ago(p.oldest) + " / " + W.ago(p.deadline) : "—" }),
            el("td", { testid: "loop-wakes-" + l.id, text: (l.wakes ? l.wakes.window_used + " of " + l.wakes.window_limit : "—") + (l.wakes && l.wakes.last_ms ? ", last " + W.ago(l.wakes.last_ms) : "") }),
            el("td", { text: l.reloads ? l.reloads.count : 0 }),
            el("td", {}, W.pauseResume(l, "-" + l.id))));
        }
        if (!head.childElementCount) drawFilters();
        W.fill(body, W.table("loops-table", ["name", "agent", "state", "inc.", "node", "pending", "oldest / deadline", "wakes (window)", "reloads", ""], rows),
          listed.items.length ? null : W.empty("No Loops match.", "loops-empty"), pager.controls(listed.next_cursor, W.refresh, "loops-page"));
        if (!main.contains(body)) W.fill(main, el("h1", { text: "Loops" }), head, body);
      },
    };
    function drawFilters() {
      const states = ["", "active", "paused", "failed", "paused:manual", "paused:exited", "paused:budget", "paused:archive", "paused:quota", "paused:fault"];
      const stateSel = el("select", { testid: "filter-state", onchange: (ev) => { filters.state = ev.target.value; pager.stack = [null]; W.refresh(); } },
        states.map((s) => el("option", { value: s, text: s ? s.replace(":", " · ") : "any state" })));
      const agentSel = el("select", { testid: "filter-agent", onchange: (ev) => { filters.agent_id = ev.target.value; pager.stack = [null]; W.refresh(); } },
        el("option", { value: "", text: "any agent" }), agents.map((a) => el("option", { value: a.id, text: a.name + " (" + a.id + ")" })));
      W.fill(head, el("label", { text: "State " }, stateSel), agents.length ? el("label", { text: " Agent " }, agentSel) : null);
    }
  };

  // ---- Loop page
  W.pages.loop = function (main, loopId) {
    const path = () => W.G() + "/loops/" + encodeURIComponent(loopId);
    const state = { tab: "events", expanded: new Set(), logs: [], afterSeq: null, hook: null, eventsPager: new W.Pager(), eventStatus: "" };
    return {
      missing() { W.fill(main, el("h1", { text: "Loop not found" }), W.empty("No such Loop in your scope.", "not-found")); },
      async draw() {
        const first = state.afterSeq === null;  // the tail starts from the newest 50 lines of the detail
        const loop = await W.api(path() + (first ? "?include=checkpoint,logs" : "?include=checkpoint"));
        if (first) { state.logs = loop.logs || []; state.afterSeq = state.logs.length ? state.logs[state.logs.length - 1].seq : 0; }
        const [events, transitions, wakes] = await Promise.all([
          W.api(path() + "/events" + W.q({ payloads: true, limit: 50, cursor: state.eventsPager.cursor, status: state.eventStatus })),
          W.api(path() + "/transitions"), W.wakesSince(W.now() - 24 * 3600 * 1000, loopId)]);
        const logs = await W.api(path() + "/logs" + W.q({ after_seq: state.afterSeq, limit: 200 }));
        state.logs.push(...logs.items);
        state.logs = state.logs.slice(-500);
        state.afterSeq = logs.next_after_seq;
        const faults = transitions.items.filter((t) => t.to_state === "failed" || t.to_reason === "fault").map((t) => t.at_ms);
        const config = {}, injected = {};
        for (const [k, v] of Object.entries(loop.config && typeof loop.config === "object" ? loop.config : {})) (INJECTED.includes(k) ? injected : config)[k] = v;
        W.fill(main,
          el("h1", {}, el("span", { testid: "loop-name", text: loop.name || loop.id }), " ", W.stateBadge(loop, "loop-state")),
          el("div", { class: "actions" }, W.pauseResume(loop, ""),
            W.button("Rotate webhook", "webhook-rotate", (ev) => W.act(ev.target, async () => { state.hook = await W.api(path() + "/webhook", "POST", { action: "rotate" }); })),
            W.button("Revoke webhook", "webhook-revoke", (ev) => W.act(ev.target, async () => { state.hook = await W.api(path() + "/webhook", "POST", { action: "revoke" }); }), { disabled: !loop.webhook_enabled })),
          state.hook && state.hook.url ? el("p", { class: "notice", testid: "webhook-url" }, "New webhook URL (shown once): ", el("code", { text: state.hook.url })) : null,
          state.hook && !state.hook.url ? el("p", { class: "notice", testid: "webhook-result" }, state.hook.enabled ? "webhook enabled" : "webhook revoked", state.hook.hint ? " · " + state.hook.hint : "") : null,
          el("div", { class: "row" },
            W.card("Loop", "loop-facts", facts([
              ["id", loop.id], ["agent", loop.agent_id], ["session", W.link("/ui/sessions/" + encodeURIComponent(loop.session_id), loop.session_id, "loop-session-link")],
              ["incarnation", loop.incarnation], ["node", loop.node || "—"], ["runtime", (loop.runtime && loop.runtime.state) + (loop.runtime && loop.runtime.wait ? " (waits: " + loop.runtime.wait + ")" : "")],
              ["failure", loop.failure ? W.pretty(loop.failure) : "—", "loop-failure"], ["exit code", loop.exit_code === null ? "—" : loop.exit_code, "loop-exit-code"],
              ["artifact", el("code", { text: loop.artifact, testid: "loop-artifact" })], ["artifact path", loop.artifact_path || "—"],
              ["webhook", (loop.webhook_enabled ? "enabled" : "off") + (state.hook && state.hook.hint ? " · " + state.hook.hint : ""), "loop-webhook"], ["created", W.time(loop.created_ms)]])),
            W.card("Wake budget", "wake-budget", W.gauge(loop.wakes ? loop.wakes.window_used : 0, loop.wakes ? loop.wakes.window_limit : 6, "wake-gauge"),
              el("p", { class: "muted small", text: loop.wakes && loop.wakes.window_resets_ms ? "window resets " + W.ago(loop.wakes.window_resets_ms) : "no wake in the current window" }),
              el("p", { class: "muted small", text: "last wake " + W.ago(loop.wakes && loop.wakes.last_ms) }))),
          W.card("Last 24 h", "loop-timeline", W.timeline([
            { label: "events", kind: "event", times: events.items.map((e) => e.received_ms) },
            { label: "wakes", kind: "wake", times: wakes.map((m) => m.created_ms) },
            { label: "faults", kind: "fault", times: faults }], "timeline")),
          el("div", { class: "row" },
            W.card("Config", "loop-config", el("pre", { text: W.pretty(config), testid: "config-json" }),
              Object.keys(injected).length ? el("p", { class: "muted small", text: "injected by the harness: " + Object.keys(injected).join(", ") }) : null),
            W.card("Checkpoint", "loop-checkpoint", el("p", { class: "muted small", text: (loop.checkpoint_bytes || 0) + " bytes, " + W.time(loop.checkpoint_ms) }),
              el("pre", { text: loop.checkpoint === null || loop.checkpoint === undefined ? "none" : W.pretty(loop.checkpoint), testid: "checkpoint-json" })),
            W.card("Capabilities", "loop-capabilities", el("pre", { text: loop.capabilities ? W.pretty(loop.capabilities) : "none (Loop builtins only)" }))),
          tabs(state, {
            events: () => eventsTab(state, events, path()),
            logs: () => el("pre", { class: "logs", testid: "logs" }, state.logs.map((l) => el("div", { testid: "log-line-" + l.seq, class: "log-" + l.source }, el("span", { class: "muted", text: new Date(l.at_ms).toLocaleTimeString() + " " + l.source + " " }), l.text))),
            transitions: () => W.table("transitions-table", ["time", "from", "to", "incarnation", "actor", "detail"], transitions.items.map((t) => el("tr", { testid: "transition-row-" + t.seq },
              el("td", { text: W.time(t.at_ms) }), el("td", { text: (t.from_state || "—") + (t.from_reason ? " · " + t.from_reason : "") }), el("td", { text: t.to_state + (t.to_reason ? " · " + t.to_reason : "") }),
              el("td", { text: t.incarnation }), el("td", { class: "mono small", text: t.actor }), el("td", { text: t.detail || "" })))),
            // handled flags live on the session page (these rows are read once and not re-read)
            wakes: () => wakes.length ? W.table("wakes-table", ["time", "content", "session"], wakes.slice().reverse().map((m) => el("tr", { testid: "wake-row-" + m.id },
              el("td", { text: W.time(m.created_ms) }), el("td", { class: "content", text: m.content }),
              el("td", {}, W.link("/ui/sessions/" + encodeURIComponent(m.session_id), m.session_id, "wake-session-" + m.id))))) : W.empty("No wakes in the last 24 h.", "wakes-empty"),
          }));
      },
    };
  };
  function facts(pairs) {
    return el("dl", { class: "facts" }, pairs.map(([k, v, testid]) => [el("dt", { text: k }), el("dd", { testid }, v instanceof Node ? v : String(v))]));
  }
  function tabs(state, bodies) {
    const bar = el("div", { class: "tabs" }, Object.keys(bodies).map((name) => W.button(name, "tab-" + name, () => { state.tab = name; W.refresh(); }, { class: state.tab === name ? "tab on" : "tab" })));
    return el("section", { class: "card", testid: "tab-" + state.tab + "-body" }, bar, bodies[state.tab]());
  }
  function eventsTab(state, events, loopPath) {
    const rows = [];
    for (const e of events.items) {
      const open = state.expanded.has(e.event_id);
      const ids = { event_ids: [e.event_id] };
      rows.push(el("tr", { testid: "event-row-" + e.event_id, "data-status": e.status },
        el("td", {}, W.button(open ? "▾" : "▸", "event-expand-" + e.event_id, () => { open ? state.expanded.delete(e.event_id) : state.expanded.add(e.event_id); W.refresh(); }, { class: "mini" })),
        el("td", { text: e.topic }), el("td", {}, W.badge(e.status, e.status, "event-status-" + e.event_id)), el("td", { text: e.source }),
        el("td", { text: W.time(e.received_ms) }), el("td", { text: e.deadline_ms && e.status === "pending" ? W.ago(e.deadline_ms) : "—" }),
        el("td", {}, e.status === "pending" ? [W.button("Retry", "event-retry-" + e.event_id, (ev) => W.act(ev.target, () => W.api(loopPath + "/pending/retry", "POST", ids))),
          W.button("Discard", "event-discard-" + e.event_id, (ev) => W.act(ev.target, () => W.api(loopPath + "/pending/discard", "POST", ids)))] : null)));
      if (open) rows.push(el("tr", { class: "expanded", testid: "event-payload-row-" + e.event_id }, el("td", { colspan: 7 }, el("pre", { testid: "event-payload-" + e.event_id, text: W.pretty(e.payload) }))));
    }
    const pick = el("select", { testid: "events-status", onchange: (ev) => { state.eventStatus = ev.target.value; state.eventsPager.stack = [null]; ev.target.blur(); W.refresh(); } },
      ["", "pending", "acked", "discarded"].map((v) => el("option", { value: v, text: v || "any status", selected: v === state.eventStatus })));
    return [el("div", { class: "filters" }, el("label", { text: "Status " }, pick), el("span", { class: "muted small", text: "pending: " + (events.pending_count || 0) })),
      W.table("events-table", ["", "topic", "status", "source", "received", "ack deadline", ""], rows),
      events.items.length ? null : W.empty("No events.", "events-empty"), state.eventsPager.controls(events.next_cursor, W.refresh, "events-page")];
  }

  // ---- session page: the messages, then live over the SSE stream
  W.pages.session = function (main, sessionId) {
    const base = () => W.G() + "/sessions/" + encodeURIComponent(sessionId);
    const state = { messages: new Map(), stream: null };
    const list = el("div");
    return {
      missing() { W.fill(main, el("h1", { text: "Session not found" }), W.empty("No such session in your scope.", "not-found")); },
      async draw() {
        for (const m of await W.messages(sessionId)) state.messages.set(m.id, m);
        if (!state.stream) listen();
        if (!main.contains(list)) W.fill(main, el("h1", {}, "Session ", el("span", { class: "mono", text: sessionId })),
          el("div", { class: "actions" }, W.button("Mark all handled", "handle-all", (ev) => W.act(ev.target, () => W.api(base() + "/messages/handled", "POST", { up_to: last() })))), list);
        render();
      },
    };
    function last() { let c = null; for (const m of state.messages.values()) c = m.cursor; return c; }
    function listen() {
      const es = new EventSource(base() + "/stream", { withCredentials: true });
      state.stream = es;
      es.addEventListener("message", (ev) => { try { const m = JSON.parse(ev.data); state.messages.set(m.id, m); render(); } catch (e) { /* a keepalive or a foreign line */ } });
      es.addEventListener("open", () => { list.dataset.live = "yes"; });
    }
    function render() {
      const items = Array.from(state.messages.values()).sort((a, b) => b.created_ms - a.created_ms || (a.id < b.id ? 1 : -1));
      W.fill(list, items.length ? W.table("messages-table", ["time", "kind", "Loop", "content", "handled", ""], items.map((m) => el("tr", { testid: "message-row-" + m.id, "data-handled": m.handled ? "yes" : "no" },
        el("td", { text: W.time(m.created_ms) }), el("td", {}, W.badge(m.kind, m.kind === "loop" ? "active" : "paused")),
        el("td", {}, m.loop_id ? W.link("/ui/loops/" + encodeURIComponent(m.loop_id), m.loop_name || m.loop_id, "message-loop-" + m.id) : "—"),
        el("td", { class: "content", text: m.content, testid: "message-content-" + m.id }),
        el("td", {}, W.badge(m.handled ? "handled" : "new", m.handled ? "done" : "active", "message-handled-" + m.id)),
        el("td", {}, m.handled ? null : W.button("Mark handled", "handle-" + m.id, (ev) => W.act(ev.target, () => W.api(base() + "/messages/handled", "POST", { message_ids: [m.id] }))))))) : W.empty("No messages yet.", "messages-empty"));
    }
  };
})(window.W);
