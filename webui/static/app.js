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
  // Firmware upgrade (System page): the file's header goes to
  // /api/v1/upgrade/inspect first, so version, board and signer show
  // before anything is written; the file then streams to /api/v1/upgrade
  // with a progress bar, and the page follows the box through its reboot.
  document.querySelectorAll("[data-upgrade]").forEach(function (box) {
    var input = box.querySelector('input[type="file"]');
    var plan = box.querySelector("[data-upgrade-plan]");
    var go = box.querySelector("[data-upgrade-go]");
    var down = box.querySelector("[data-upgrade-downgrade]");
    var bar = box.querySelector("[data-upgrade-progress]");
    var pw = box.querySelector("[data-upgrade-password]");
    function query() {
      return "?size=" + input.files[0].size + (down.checked ? "&confirm_downgrade=1" : "");
    }
    function describe(j) {
      return j.version ? "flashgate " + j.version + " for " + j.board + ", signed by " + j.signer +
        (j.target_slot ? ", into slot " + j.target_slot : "") + (j.downgrade ? " (a downgrade)" : "") +
        (j.config ? ". " + j.config : "") : "";
    }
    function inspect() {
      go.disabled = true;
      if (!input.files.length) return;
      plan.textContent = "Checking…";
      fetch("/api/v1/upgrade/inspect" + query(), { method: "POST", credentials: "same-origin",
        headers: { "X-CSRF-Token": csrf, "Content-Type": "application/octet-stream" }, body: input.files[0].slice(0, 4096) })
        .then(function (r) { return r.json().then(function (j) { return [r.ok, j]; }); })
        .then(function (a) {
          var ok = a[0], j = a[1];
          plan.textContent = ok ? describe(j) : "Refused: " + (j.error || "?") + (j.version ? " (" + describe(j) + ")" : "");
          plan.className = ok ? "help" : "flash error";
          go.disabled = !ok;
        })
        .catch(function (e) { plan.textContent = "Could not ask the box: " + e; });
    }
    input.addEventListener("change", inspect);
    down.addEventListener("change", inspect);
    go.addEventListener("click", function () {
      go.disabled = true; input.disabled = true; bar.hidden = false;
      var x = new XMLHttpRequest();
      x.open("POST", "/api/v1/upgrade" + query() + "&reboot=1");
      x.setRequestHeader("X-CSRF-Token", csrf);
      x.setRequestHeader("Content-Type", "application/octet-stream");
      // The current password, percent-encoded (a header holds ASCII only).
      x.setRequestHeader("X-Flashgate-Password", encodeURIComponent(pw.value));
      x.upload.onprogress = function (e) {
        if (e.lengthComputable) bar.value = Math.round(100 * e.loaded / e.total);
      };
      x.upload.onload = function () { plan.textContent = "Uploaded; the box is reading the slot back…"; };
      x.onload = function () {
        var j = {};
        try { j = JSON.parse(x.responseText); } catch (e) {}
        if (x.status !== 200) {
          plan.textContent = "Upgrade failed, nothing switched: " + (j.error || x.status);
          plan.className = "flash error"; input.disabled = false; go.disabled = false; bar.hidden = true;
          return;
        }
        plan.textContent = "Slot " + j.target_slot + " written and verified. The box reboots into a test boot of " +
          j.version + "; this page reloads when it answers again (log in once more).";
        plan.className = "flash";
        var tries = 0;
        (function wait() {
          if (++tries > 200) return;
          setTimeout(function () {
            fetch("/login", { credentials: "same-origin" }).then(function (r) {
              if (r.ok && tries > 5) location.href = "/system#firmware"; else wait();
            }).catch(wait);
          }, 3000);
        })();
      };
      x.onerror = function () { plan.textContent = "The upload broke off; nothing was switched."; input.disabled = false; };
      x.send(input.files[0]);
    });
  });
})();
