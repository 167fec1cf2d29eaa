"use strict";
// Goals list and goal board (interfaces.md §6; control-plane.md §8 projections). Gates: approve/reject for
// person principals only — an agent sees the list without the buttons (and the API would refuse it, 403).
(function (W) {
  const el = W.el;
  const COLUMNS = ["open", "blocked", "deferred", "done"];

  W.pages.goals = function (main) {
    const pager = new W.Pager();
    return {
      async draw() {
        const listed = await W.api(W.G() + "/goals" + W.q({ limit: 50, cursor: pager.cursor }));
        const rows = [];
        for (const g of listed.items) {
          const status = await W.api(W.G() + "/goals/" + encodeURIComponent(g.id) + "/status");
          const counts = { open: 0, blocked: 0, deferred: 0, done: 0 };
          for (const byClass of Object.values(status.counts || {})) for (const k of COLUMNS) counts[k] += byClass[k] || 0;
          rows.push(el("tr", { testid: "goal-row-" + g.id },
            el("td", {}, W.link("/ui/goals/" + encodeURIComponent(g.id), g.title, "goal-link-" + g.id)),
            el("td", {}, W.badge(g.status, g.status === "active" ? "active" : "paused", "goal-status-" + g.id)),
            el("td", {}, W.badge((status.acceptance && status.acceptance.status) || "none", "neutral", "goal-acceptance-" + g.id)),
            el("td", { text: COLUMNS.map((k) => k + " " + counts[k]).join(" · ") }),
            el("td", {}, el("span", { testid: "goal-needs-person-" + g.id, text: (status.needs_person || []).length }))));
        }
        W.fill(main, el("h1", { text: "Goals" }),
          W.table("goals-table", ["goal", "status", "acceptance", "items", "needs a person"], rows),
          listed.items.length ? null : W.empty("No goals in this group.", "goals-empty"), pager.controls(listed.next_cursor, W.refresh, "goals-page"));
      },
    };
  };

  W.pages.goal = function (main, goalId) {
    const base = () => W.G() + "/goals/" + encodeURIComponent(goalId);
    return {
      missing() { W.fill(main, el("h1", { text: "Goal not found" }), W.empty("No such goal in your scope.", "not-found")); },
      async draw() {
        const [board, status, acceptance, commits] = await Promise.all([W.api(base() + "/board"), W.api(base() + "/status"),
          W.api(base() + "/acceptance"), W.all(base() + "/commits", {}, 10)]);
        const person = W.session.principal.kind === "person";
        W.fill(main,
          el("h1", {}, el("span", { text: status.goal.title, testid: "goal-title" }), " ", W.badge(status.goal.status, status.goal.status === "active" ? "active" : "paused", "goal-status")),
          el("div", { class: "board", testid: "board" }, COLUMNS.map((name) => column(name, board.columns[name]))),
          el("div", { class: "row" },
            W.card("Needs a person", "needs-person", (status.needs_person || []).length ? el("ul", { class: "plain" }, status.needs_person.map((n) => gate(n, person, base()))) : W.empty("Nothing waits for a person.", "needs-person-empty")),
            W.card("Acceptance", "acceptance", el("p", {}, "status ", W.badge(acceptance.status, "neutral", "acceptance-status"), " · revision " + acceptance.revision),
              (acceptance.criteria || []).length ? el("ul", { class: "plain" }, acceptance.criteria.map(criterion)) : W.empty("No acceptance criteria set."))),
          W.card("Recent commits", "commits", W.table("commits-table", ["seq", "time", "command", "actor", "result"], commits.slice(-20).reverse().map((c) => el("tr", { testid: "commit-row-" + c.seq },
            el("td", { text: c.seq }), el("td", { text: W.time(c.committed_ms) }), el("td", { text: c.command_type }),
            el("td", { class: "mono small", text: c.actor ? c.actor.kind + ":" + c.actor.id : "" }), el("td", { text: c.receipt ? c.receipt.result : "" }))))));
      },
    };
  };

  // a board column: `open` is split into runnable, claimed and gated (control-plane.md §7.2)
  function column(name, body) {
    const groups = Array.isArray(body) ? { "": body } : body || {};
    return el("div", { class: "column", testid: "column-" + name }, el("h3", { text: name }),
      Object.entries(groups).map(([sub, items]) => [sub ? el("h4", { class: "muted", text: sub }) : null,
        el("div", { testid: "column-" + name + (sub ? "-" + sub : "") }, (items || []).map(item))]));
  }
  function item(it) {
    return el("div", { class: "item c-" + it.class, testid: "item-" + it.id },
      el("div", { class: "item-title", text: it.title }),
      el("div", { class: "chips" }, W.badge(it.class, "neutral"), W.badge("p" + it.priority, "neutral"),
        it.holder ? W.badge("held by " + it.holder, "active", "holder-" + it.id) : null,
        it.evidence ? W.badge("evidence: " + (typeof it.evidence === "object" ? (it.evidence.verdict || it.evidence.status || "yes") : it.evidence), "done", "evidence-" + it.id) : null,
        it.done_kind ? W.badge(it.done_kind, "done") : null,
        (it.missing_scopes || []).length ? W.badge("needs " + it.missing_scopes.join(", "), "paused", "missing-" + it.id) : null),
      it.blocked_reason ? el("div", { class: "muted small", text: it.blocked_reason }) : null);
  }
  // a criterion of the current contract: its status (pass, fail, stale, missing), why when stale, and the
  // evidence row that decided it (control-plane.md §5)
  function criterion(c) {
    const ok = c.status === "pass";
    return el("li", { testid: "criterion-" + c.id }, W.badge(c.status || "—", ok ? "done" : c.status === "fail" ? "failed" : "paused", "criterion-status-" + c.id), " ",
      el("strong", { text: c.id }), " ", el("span", { text: c.text || "" }),
      c.reason ? el("span", { class: "muted small", text: " (" + c.reason + ")" }) : null,
      c.evidence_id ? el("div", { class: "muted small", testid: "criterion-evidence-" + c.id }, "deciding evidence ", el("code", { text: c.evidence_id })) : null);
  }
  function gate(n, person, goalPath) {
    // the kernel fences gate.resolve by the item's revision: read it, then resolve (a conflict is reported)
    const resolve = (outcome) => (ev) => W.act(ev.target, async () => {
      const current = await W.api(goalPath + "/work/" + encodeURIComponent(n.id));
      const goalId = decodeURIComponent(goalPath.split("/").pop());
      await W.api(goalPath + "/commands", "POST", { operation_id: "ui:" + outcome + ":" + n.id + ":" + Date.now().toString(36), goal_id: goalId,
        command: { type: "gate.resolve", item: n.id, outcome }, expected: { item_revision: (current.item || current).revision } });
    });
    return el("li", { testid: "needs-person-" + n.id }, el("strong", { text: n.title }), el("div", { text: n.question || "" }),
      n.options && n.options.length ? el("div", { class: "muted small", text: "options: " + n.options.join(", ") }) : null,
      person && n.class === "user_gate" ? el("div", { class: "actions" }, W.button("Approve", "gate-approve-" + n.id, resolve("approve")), W.button("Reject", "gate-reject-" + n.id, resolve("reject"))) : null);
  }
})(window.W);
