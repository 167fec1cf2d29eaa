"use strict";
// Start: who am I (the session, its CSRF token), which group, then the page the path names; refresh every 2 s.
(async function (W) {
  const el = W.el;
  let info;
  try { info = await W.api("/ui/session"); } catch (e) { return; }
  W.session = info;
  const who = info.principal;
  document.getElementById("whoami").textContent = who.role + " key " + who.key_id + (who.agent_id ? " · agent " + who.agent_id : " · person");
  document.getElementById("logout").addEventListener("click", async () => {
    await fetch("/ui/logout", { method: "POST", headers: { "x-wakeful-csrf": info.csrf }, credentials: "same-origin" });
    location.assign("/ui/login");
  });
  W.group = who.group_id;
  if (!W.group) {  // an admin key: pick a group (remembered in this browser)
    const groups = await W.all("/v1/groups");
    const saved = localStorage.getItem("wakeful.group");
    W.group = groups.some((g) => g.id === saved) ? saved : groups.length ? groups[0].id : null;
    const pick = el("select", { testid: "group-picker", onchange: (ev) => { localStorage.setItem("wakeful.group", ev.target.value); location.reload(); } },
      groups.map((g) => el("option", { value: g.id, text: g.name + " (" + g.id + ")", selected: g.id === W.group })));
    W.fill(document.getElementById("group-picker"), pick);
  }
  const main = document.getElementById("main");
  if (!W.group) { W.fill(main, W.empty("There is no group yet.", "no-group")); return; }
  const parts = location.pathname.replace(/^\/ui\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  const routes = { "": "overview", loops: parts.length > 1 ? "loop" : "loops", sessions: "session", goals: parts.length > 1 ? "goal" : "goals" };
  const name = routes[parts[0] || ""];
  if (!name || (name === "session" && parts.length < 2)) { W.fill(main, el("h1", { text: "Not found" }), W.empty("No such page.", "not-found")); return; }
  for (const a of document.querySelectorAll("header nav a")) if (a.getAttribute("href") === "/ui/" + (parts[0] || "")) a.classList.add("on");
  W.page = W.pages[name](main, parts[1]);
  await W.refresh();
  document.body.dataset.ready = "yes";
  W.startRefresh();
})(window.W);
