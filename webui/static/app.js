// flashgate web UI: small progressive enhancements. Every page works
// without this file; it adds live refresh, the PSK generator, confirm
// dialogs and the commit-confirmed countdown.
"use strict";
(function () {
  var csrf = (document.querySelector('meta[name="csrf-token"]') || {}).content || "";

  // Live regions: <div data-live="/live/x" data-every="5"> is replaced by
  // the server-rendered fragment every few seconds, while the tab is
  // visible. A 401 means the session ended: reload to reach the login.
  document.querySelectorAll("[data-live]").forEach(function (el) {
    var every = Math.max(2, parseInt(el.dataset.every || "5", 10)) * 1000;
    var busy = false;
    function refresh() {
      if (busy || document.hidden) return;
      busy = true;
      fetch(el.dataset.live, { credentials: "same-origin", headers: { "X-CSRF-Token": csrf } })
        .then(function (r) {
          if (r.status === 401) { location.reload(); return null; }
          return r.ok ? r.text() : null;
        })
        .then(function (html) {
          if (html === null) return;
          var pre = el.querySelector("pre");
          var atEnd = pre && pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
          el.innerHTML = html;
          if (el.hasAttribute("data-scroll")) scrollLog(el, atEnd || !pre);
        })
        .catch(function () {})
        .then(function () { busy = false; });
    }
    setInterval(refresh, every);
    if (el.hasAttribute("data-scroll")) scrollLog(el, true);
  });

  function scrollLog(el, toEnd) {
    var pre = el.querySelector("pre");
    if (pre && toEnd) pre.scrollTop = pre.scrollHeight;
  }

  // PSK generator: 256 random bits from the box (crypto/rand).
  document.querySelectorAll("[data-psk]").forEach(function (b) {
    b.addEventListener("click", function () {
      fetch("/api/v1/psk", { credentials: "same-origin" })
        .then(function (r) { return r.json(); })
        .then(function (j) {
          var f = document.getElementById(b.dataset.psk);
          f.value = j.psk; f.select();
        });
    });
  });

  // Destructive forms ask first.
  document.querySelectorAll("form[data-confirm]").forEach(function (f) {
    f.addEventListener("submit", function (e) {
      if (!confirm(f.dataset.confirm)) e.preventDefault();
    });
  });

  // Commit-confirmed countdown; at zero the page reloads to show the rollback.
  document.querySelectorAll("[data-countdown]").forEach(function (el) {
    var deadline = parseInt(el.dataset.countdown, 10) * 1000;
    function tick() {
      var left = Math.max(0, Math.round((deadline - Date.now()) / 1000));
      el.textContent = Math.floor(left / 60) + ":" + ("0" + (left % 60)).slice(-2);
      if (left === 0) { setTimeout(function () { location.reload(); }, 3000); return; }
      setTimeout(tick, 1000);
    }
    tick();
  });
})();
