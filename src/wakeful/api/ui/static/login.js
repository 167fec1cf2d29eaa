"use strict";
// the login page's only script: say why the last attempt failed (the reason is a fixed word, shown as text)
(function () {
  const failed = new URLSearchParams(location.search).get("failed");
  const box = document.getElementById("login-error");
  const why = { key: "That key is unknown or revoked.", code: "That login link is unknown, used or expired." };
  if (failed && box) {
    box.textContent = why[failed] || "Sign-in failed.";
    box.hidden = false;
  }
})();
