"""The console's stylesheet and script, served from memory at /assets/ (no CDN, no build step).

The script does four small things: fetches a page's live fragments again every few seconds (the server
renders and escapes them), asks before submitting a form marked data-confirm, runs the message browser's live
tail (rows built with textContent, never markup), and shows the message form's offset and time fields only
when they apply.
"""

CSS = """
:root { --fg: #1d2330; --muted: #667085; --line: #e4e7ec; --bg: #f8f9fb; --accent: #3b5bdb; --bad: #c92a2a;
        --good: #2b8a3e; --warn: #b35c00; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
       background: var(--bg); }
header { display: flex; align-items: center; gap: 1.5rem; padding: .6rem 1.5rem; background: #1d2330; color: #fff; }
header a { color: #d0d5dd; text-decoration: none; }
header a.brand { color: #fff; font-weight: 600; }
header nav { display: flex; gap: 1rem; flex-wrap: wrap; }
header nav a.active, header nav a:hover { color: #fff; border-bottom: 2px solid #91a7ff; }
header .who { margin-left: auto; color: #d0d5dd; }
header .who button.link { color: #d0d5dd; }
main { padding: 1rem 1.5rem 3rem; max-width: 1400px; }
h1 { font-size: 1.4rem; margin: .5rem 0 1rem; word-break: break-all; }
h2 { font-size: 1.1rem; margin: 1.6rem 0 .6rem; }
a { color: var(--accent); }
table { border-collapse: collapse; width: 100%; background: #fff; border: 1px solid var(--line); }
th, td { text-align: left; padding: .35rem .6rem; border-bottom: 1px solid var(--line); vertical-align: top; }
th { background: #f2f4f7; font-weight: 600; color: #344054; }
tr:hover td { background: #fafbff; }
.facts { display: grid; grid-template-columns: repeat(auto-fill, minmax(170px, 1fr)); gap: .6rem; margin: 0 0 1rem; }
.fact { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: .5rem .7rem; }
.fact-value { display: block; font-size: 1.05rem; font-weight: 600; word-break: break-all; }
.fact-label { display: block; font-size: .75rem; color: var(--muted); font-weight: 400; }
.bad { color: var(--bad); font-weight: 600; }
.good { color: var(--good); }
.notice { padding: .5rem .8rem; border-radius: 6px; background: #edf2ff; border: 1px solid #bac8ff; }
.notice.error { background: #fff5f5; border-color: #ffc9c9; color: var(--bad); }
.notice.warn { background: #fff9db; border-color: #ffe066; color: var(--warn); }
.empty { color: var(--muted); font-style: italic; }
form.panel { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: .8rem;
             display: flex; flex-wrap: wrap; gap: .8rem; align-items: flex-end; }
form.inline, form.browse { display: flex; flex-wrap: wrap; gap: .6rem; align-items: flex-end; margin: .4rem 0; }
form.config { margin: 0; }
label { display: flex; flex-direction: column; font-size: .8rem; color: #344054; gap: .15rem; }
label.inline { flex-direction: row; align-items: center; gap: .3rem; }
.hint { color: var(--muted); font-size: .72rem; }
input, select, textarea, button { font: inherit; padding: .3rem .45rem; border: 1px solid #d0d5dd; border-radius: 5px; }
textarea { min-width: 22rem; font-family: ui-monospace, SFMono-Regular, Menlo, monospace; }
button { background: var(--accent); color: #fff; border-color: var(--accent); cursor: pointer; }
button.danger { background: var(--bad); border-color: var(--bad); }
button.link { background: none; border: none; color: var(--accent); padding: 0 .2rem; text-decoration: underline; }
button.link.danger { color: var(--bad); }
.danger-zone { border-left: 3px solid var(--bad); padding-left: .6rem; }
nav.tabs { display: flex; gap: .3rem; margin-bottom: 1rem; border-bottom: 1px solid var(--line); }
nav.tabs a { padding: .35rem .8rem; text-decoration: none; border: 1px solid transparent; border-bottom: none;
             border-radius: 5px 5px 0 0; }
nav.tabs a.active { background: #fff; border-color: var(--line); color: var(--fg); font-weight: 600; }
pre.data { margin: 0; max-height: 18rem; max-width: 60rem; overflow: auto; white-space: pre-wrap;
           word-break: break-all; font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace; }
pre.hex { white-space: pre; }
.null { color: var(--muted); font-style: italic; }
.note { display: block; color: var(--warn); font-size: .75rem; }
.override { font-weight: 600; }
.pager, .scan { color: var(--muted); }
tr.fresh td { background: #ebfbee; }
figure.chart { margin: 0; background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: .5rem;
               max-width: 760px; }
figure.chart figcaption { color: var(--muted); font-size: .8rem; }
svg .axis { stroke: #98a2b3; stroke-width: 1; }
svg .label { fill: var(--muted); font-size: 11px; }
svg polyline.series { fill: none; stroke-width: 2; }
.s0 { stroke: #3b5bdb; color: #3b5bdb; } .s1 { stroke: #e8590c; color: #e8590c; } .s2 { stroke: #2b8a3e; color: #2b8a3e; }
.s3 { stroke: #ae3ec9; color: #ae3ec9; } .s4 { stroke: #1098ad; color: #1098ad; } .s5 { stroke: #f08c00; color: #f08c00; }
.legend { margin-left: .6rem; }
.legend::before { content: "■ "; }
form.login { max-width: 22rem; flex-direction: column; display: flex; gap: .7rem; }
.hidden { display: none; }
.notice.good { background: #ebfbee; border-color: #b2f2bb; color: var(--good); }
.notice ul { margin: .3rem 0 0; padding-left: 1.2rem; }
.notice p { margin: 0; }
pre.schema { max-height: 40rem; max-width: none; background: #fff; border: 1px solid var(--line); padding: .5rem;
             white-space: pre; word-break: normal; }
pre.diff span { display: block; }
#check-form > label:first-of-type { flex: 1 1 100%; }
#check-schema { width: 100%; }
pre.diff .add { background: #ebfbee; color: var(--good); }
pre.diff .del { background: #fff5f5; color: var(--bad); }
pre.diff .hunk, pre.diff .file { color: var(--muted); }
"""

JS = r"""
"use strict";
(function () {
  function refresh(section) {
    var url = section.getAttribute("data-refresh");
    var every = parseInt(section.getAttribute("data-interval") || "5000", 10);
    function tick() {
      if (document.hidden) { return; }
      fetch(url, {credentials: "same-origin", headers: {"X-Requested-With": "fetch"}})
        .then(function (r) { if (!r.ok) { throw new Error(String(r.status)); } return r.text(); })
        .then(function (text) { section.innerHTML = text; section.setAttribute("data-refreshed", String(Date.now())); })
        .catch(function () { /* the next tick tries again */ });
    }
    setInterval(tick, every);
  }

  function confirmations() {
    document.addEventListener("submit", function (event) {
      var message = event.target.getAttribute && event.target.getAttribute("data-confirm");
      if (message && !window.confirm(message)) { event.preventDefault(); }
    });
  }

  function cell(row, text, pre, kind) {
    var td = document.createElement("td");
    if (text === null || text === undefined) {
      var span = document.createElement("span"); span.className = "null"; span.textContent = "null"; td.appendChild(span);
    } else if (pre) {
      var p = document.createElement("pre"); p.className = "data " + (kind || "text"); p.textContent = text; td.appendChild(p);
    } else {
      td.textContent = text;
    }
    row.appendChild(td);
    return td;
  }

  function messagesBody() {
    var table = document.getElementById("messages"), none = document.getElementById("no-records");
    if (none) { none.parentNode.removeChild(none); }
    if (!table) { return null; }
    if (table.tagName !== "TABLE") {
      var fresh = document.createElement("table");
      fresh.id = "messages"; fresh.className = "records";
      fresh.innerHTML = "<thead><tr><th>Partition</th><th>Offset</th><th>Timestamp</th><th>Key</th><th>Value</th>" +
                        "<th>Headers</th></tr></thead><tbody></tbody>";
      table.parentNode.replaceChild(fresh, table);
      table = fresh;
    }
    return table.tBodies[0];
  }

  function tail(button) {
    var status = document.getElementById("tail-status");
    var positions = button.getAttribute("data-positions");
    var base = button.getAttribute("data-tail");
    var timer = null, seen = 0;
    function poll() {
      var sep = base.indexOf("?") >= 0 ? "&" : "?";
      fetch(base + sep + "positions=" + encodeURIComponent(positions), {credentials: "same-origin"})
        .then(function (r) { return r.json(); })
        .then(function (answer) {
          if (answer.error) { status.textContent = answer.error; return; }
          positions = answer.positions;
          var body = messagesBody();
          answer.records.forEach(function (rec) {
            var row = document.createElement("tr"); row.className = "fresh";
            cell(row, String(rec.partition)); cell(row, String(rec.offset)); cell(row, rec.time);
            cell(row, rec.key, true, rec.key_format); cell(row, rec.value, true, rec.value_format);
            var headers = cell(row, "");
            rec.headers.forEach(function (h) {
              var div = document.createElement("div"); div.textContent = h[0] + ": " + (h[1] === null ? "null" : h[1]);
              headers.appendChild(div);
            });
            if (body) { body.insertBefore(row, body.firstChild); }
            seen += 1;
          });
          status.textContent = "live: " + seen + " new record" + (seen === 1 ? "" : "s");
          if (timer !== null && answer.more) { setTimeout(poll, 0); }
        })
        .catch(function (e) { status.textContent = "tail failed: " + e; });
    }
    button.addEventListener("click", function () {
      if (timer === null) {
        button.textContent = "Stop tail"; status.textContent = "live: waiting for records";
        poll(); timer = setInterval(poll, 2000);
      } else {
        clearInterval(timer); timer = null; button.textContent = "Live tail"; status.textContent = "stopped";
      }
    });
  }

  function browseFields() {
    var start = document.getElementById("browse-start");
    if (!start) { return; }
    function update() {
      var offset = document.getElementById("browse-offset"), time = document.getElementById("browse-timestamp");
      offset.parentNode.classList.toggle("hidden", start.value !== "offset");
      time.parentNode.classList.toggle("hidden", start.value !== "timestamp");
    }
    start.addEventListener("change", update);
    update();
  }

  document.addEventListener("DOMContentLoaded", function () {
    Array.prototype.forEach.call(document.querySelectorAll("[data-refresh]"), refresh);
    var button = document.getElementById("live-tail");
    if (button) { tail(button); }
    confirmations();
    browseFields();
  });
})();
"""

ASSETS = {"console.css": ("text/css", CSS), "console.js": ("application/javascript", JS)}
