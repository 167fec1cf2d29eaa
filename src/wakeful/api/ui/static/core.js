"use strict";
// wakeful dashboard core (interfaces.md §6): DOM building (text only, never HTML), the JSON API with the session
// cookie and CSRF header, paging with the API's cursors, the 2 s refresh while the tab is visible.
window.W = (function () {
  const W = {};
  W.session = null;  // {csrf, principal: {role, kind, group_id, agent_id, key_id}}
  W.group = null;
  W.pages = {};  // name -> (main, ...args) => {draw, missing?}

  // el("tr", {testid: "x", class: "y", text: "z", onclick: f}, child, "text child", …)
  W.el = function (tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name === "testid") node.dataset.testid = value;
      else if (name === "text") node.textContent = String(value);
      else if (name === "class") node.className = value;
      else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else node.setAttribute(name, value === true ? "" : String(value));
    }
    W.append(node, children);
    return node;
  };
  W.append = function (node, children) {
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  };
  W.fill = function (node, ...children) { node.replaceChildren(); return W.append(node, children); };
  W.link = (href, text, testid) => W.el("a", { href, text, testid });
  // every row, badge and button carries a data-testid (interfaces.md §6); a badge without its own names its kind
  W.badge = (text, kind, testid) => W.el("span", { class: "badge b-" + (kind || text), text, testid: testid || "badge-" + String(kind || text).replace(/[^A-Za-z0-9_-]+/g, "-") });
  W.button = (text, testid, onclick, extra) => W.el("button", Object.assign({ type: "button", testid, text, onclick }, extra || {}));
  W.table = function (testid, headers, rows) {
    const head = W.el("tr", { testid: testid + "-header" }, headers.map((h) => W.el("th", { text: h })));
    return W.el("table", { class: "grid", testid }, W.el("thead", {}, head), W.el("tbody", {}, rows));
  };
  W.card = (title, testid, ...body) => W.el("section", { class: "card", testid }, W.el("h2", { text: title }), body);
  W.empty = (text, testid) => W.el("p", { class: "muted", text, testid });

  // times
  W.now = () => Date.now();
  W.time = (ms) => (ms ? new Date(ms).toLocaleString() : "—");
  W.ago = function (ms) {
    if (!ms) return "—";
    const s = Math.round((W.now() - ms) / 1000);
    const a = Math.abs(s);
    const text = a < 90 ? a + " s" : a < 5400 ? Math.round(a / 60) + " min" : a < 172800 ? Math.round(a / 3600) + " h" : Math.round(a / 86400) + " d";
    return s >= 0 ? text + " ago" : "in " + text;
  };
  W.pretty = (value) => JSON.stringify(value, null, 2);

  // the JSON API: the session cookie stands for the key; state-changing calls carry the CSRF token header
  W.ApiError = class extends Error {
    constructor(status, body) {
      super((body && body.message) || "HTTP " + status);
      this.status = status; this.code = body && body.error; this.body = body;
    }
  };
  W.api = async function (path, method, body) {
    const headers = { accept: "application/json" };
    method = method || "GET";
    if (method !== "GET") headers["x-wakeful-csrf"] = W.session ? W.session.csrf : "";
    if (body !== undefined) headers["content-type"] = "application/json";
    const resp = await fetch(path, { method, headers, credentials: "same-origin", body: body === undefined ? undefined : JSON.stringify(body) });
    if (resp.status === 401) { location.assign("/ui/login"); throw new W.ApiError(401, null); }
    if (resp.status === 204) return null;
    let data = null;
    try { data = await resp.json(); } catch (e) { data = null; }
    if (!resp.ok) throw new W.ApiError(resp.status, data);
    return data;
  };
  W.G = () => "/v1/agent-groups/" + encodeURIComponent(W.group);
  W.q = function (params) {
    const parts = [];
    for (const [k, v] of Object.entries(params || {})) if (v !== null && v !== undefined && v !== "") parts.push(encodeURIComponent(k) + "=" + encodeURIComponent(v));
    return parts.length ? "?" + parts.join("&") : "";
  };
  // every page of a list (for counts and charts), following next_cursor, at most `max` pages
  W.all = async function (path, params, max) {
    const items = [];
    let cursor = null;
    for (let i = 0; i < (max || 20); i++) {
      const page = await W.api(path + W.q(Object.assign({}, params, { limit: 200, cursor })));
      items.push(...(page.items || []));
      cursor = page.next_cursor;
      if (!cursor) break;
    }
    return items;
  };
  // a paged list: the cursors seen so far, so "previous" and "next" walk the API's own pages
  W.Pager = class {
    constructor() { this.stack = [null]; }
    get cursor() { return this.stack[this.stack.length - 1]; }
    controls(next, redraw, testid) {
      const prev = W.button("◀ previous", testid + "-prev", () => { this.stack.pop(); redraw(); }, { disabled: this.stack.length < 2 });
      const fwd = W.button("next ▶", testid + "-next", () => { this.stack.push(next); redraw(); }, { disabled: !next });
      return W.el("div", { class: "pager" }, prev, fwd);
    }
  };

  W.status = function (text, error) {
    const bar = document.getElementById("status");
    if (!bar) return;
    bar.textContent = text || "";
    bar.className = "status" + (error ? " error" : "");
    bar.dataset.testid = error ? "status-error" : "status";
  };
  // run an action from a button: disable it, report the outcome, redraw
  W.act = async function (button, fn) {
    if (button) button.disabled = true;
    try { await fn(); W.status("done"); } catch (e) { W.status((e.code ? e.code + ": " : "") + e.message, true); }
    finally { if (button) button.disabled = false; }
    await W.refresh();
  };

  // the current page: {draw: async () => …}; redrawn every 2 s while the tab is visible (interfaces.md §6)
  W.page = null;
  let drawing = false;
  W.refresh = async function () {
    if (!W.page || drawing) return;
    drawing = true;
    try { await W.page.draw(); } catch (e) {
      if (e instanceof W.ApiError && e.status === 404) W.page.missing && W.page.missing(e);
      else W.status((e.code ? e.code + ": " : "") + e.message, true);
    } finally { drawing = false; }
  };
  W.startRefresh = function () {
    // not while the person works a select or a field in the page (a redraw would close it)
    const busy = () => { const a = document.activeElement; return a && (a.tagName === "SELECT" || a.tagName === "INPUT") && a.closest("main"); };
    setInterval(() => { if (document.visibilityState === "visible" && !busy()) W.refresh(); }, 2000);
    document.addEventListener("visibilitychange", () => { if (document.visibilityState === "visible") W.refresh(); });
  };
  return W;
})();
