// stet board's one script, served from the board's own origin (the policy allows no
// other, and no inline script). Pages work without it; it keeps them current.
"use strict";

// --- live: the live page follows /live/events (server-sent events) and redraws its lanes
// from each view; every text goes in through textContent, never as markup.
(function () {
  var root = document.getElementById("live");
  if (!root || !window.EventSource) {
    return;
  }
  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function duration(ms) {
    var s = Math.max(0, Math.floor(ms / 1000));
    if (s < 60) return s + " s";
    var m = Math.floor(s / 60);
    if (m < 60) return m + " min " + String(s % 60).padStart(2, "0") + " s";
    return Math.floor(m / 60) + " h " + String(m % 60).padStart(2, "0") + " min";
  }
  function itemLink(id, label) {
    var a = el("a", null, label || id);
    a.setAttribute("href", "/item/" + encodeURIComponent(id));
    return a;
  }
  function row(cells) {
    var tr = el("tr");
    cells.forEach(function (c) {
      var td = el("td");
      c.forEach(function (part) { td.appendChild(part); });
      tr.appendChild(td);
    });
    return tr;
  }
  function table(headings) {
    var t = el("table", "live-lanes");
    var head = el("thead");
    var tr = el("tr");
    headings.forEach(function (h) { tr.appendChild(el("th", null, h)); });
    head.appendChild(tr);
    t.appendChild(head);
    var body = el("tbody");
    t.appendChild(body);
    return [t, body];
  }
  // Stop, as the page drew it: a form with the session's form token and the drive's process.
  function stopForm(d) {
    var form = el("form", "live-stop");
    form.setAttribute("method", "post");
    form.setAttribute("action", "/live/stop");
    [["csrf", root.getAttribute("data-csrf")], ["owner", d.owner]].forEach(function (kv) {
      var input = el("input");
      input.setAttribute("type", "hidden");
      input.setAttribute("name", kv[0]);
      input.setAttribute("value", kv[1]);
      form.appendChild(input);
    });
    var button = el("button", "danger", d.stopping
      ? "Kill the calls in flight now (a second Ctrl-C)"
      : "Stop after the calls in flight (Ctrl-C)");
    button.setAttribute("type", "submit");
    form.appendChild(button);
    return form;
  }
  function drive(d) {
    var section = el("section", "live-drive");
    var h = el("h3", null, "Drive " + d.run + " ");
    h.appendChild(el("span", "muted", "(process " + d.pid + ", since " + d.started + ")"));
    section.appendChild(h);
    section.appendChild(el("p", "live-overall", d.overall));
    if (d.stopping) section.appendChild(el("p", "live-stopping", d.stopping));
    section.appendChild(stopForm(d));
    var t = table(["Lane", "Item", "Stage", "Time in stage"]);
    d.lanes.forEach(function (l) {
      var item = [];
      if (l.item) {
        item.push(itemLink(l.item, l.handle));
        if (l.title) {
          item.push(document.createTextNode(" "));
          item.push(el("span", "muted", l.title));
        }
      } else {
        item.push(document.createTextNode("—"));
      }
      var stage = [document.createTextNode(l.stage + (l.round ? " (round " + l.round + ")" : ""))];
      if (l.waiting) {
        stage.push(el("br"));
        stage.push(el("span", "muted", l.waiting));
      }
      var tr = row([[document.createTextNode("lane " + l.slot)], item, stage, []]);
      var since = tr.lastChild;
      since.className = "live-since";
      since.setAttribute("data-since", String(l.since_unix_ms));
      since.textContent = duration(Date.now() - l.since_unix_ms);
      t[1].appendChild(tr);
      if (l.lines.length) {
        var lines = el("tr", "live-lines");
        var td = el("td");
        td.setAttribute("colspan", "4");
        td.appendChild(el("pre", null, l.lines.join("\n") + "\n"));
        lines.appendChild(td);
        t[1].appendChild(lines);
      }
    });
    section.appendChild(t[0]);
    return section;
  }
  function draw(view) {
    var drives = document.getElementById("live-drives");
    drives.replaceChildren();
    if (!view.drives.length) drives.appendChild(el("p", "live-none", "No drive runs on this clone."));
    view.drives.forEach(function (d) { drives.appendChild(drive(d)); });
    var ended = document.getElementById("live-ended");
    ended.replaceChildren();
    view.ended.forEach(function (e) { ended.appendChild(el("p", "live-ended", e)); });
    var peers = document.getElementById("live-peers");
    peers.replaceChildren();
    if (!view.peers.length) {
      peers.appendChild(el("p", "live-none", "No other drive holds an item."));
      return;
    }
    var t = table(["Item", "State", "Stage", "Held by", "Until"]);
    view.peers.forEach(function (p) {
      t[1].appendChild(row([
        [itemLink(p.item, p.handle), document.createTextNode(" "), el("span", "muted", p.title)],
        [document.createTextNode(p.state)],
        [document.createTextNode(p.stage)],
        [document.createTextNode(p.holder)],
        [document.createTextNode(p.until)]
      ]));
    });
    peers.appendChild(t[0]);
  }
  var source = new EventSource(root.getAttribute("data-events"));
  source.addEventListener("live", function (e) {
    draw(JSON.parse(e.data));
    root.setAttribute("data-updated", String(Date.now()));
  });
  // The time in stage, counted here between events (no request: a local clock).
  setInterval(function () {
    document.querySelectorAll(".live-since").forEach(function (td) {
      td.textContent = duration(Date.now() - Number(td.getAttribute("data-since")));
    });
  }, 1000);
})();

// --- drive: a drive's page reloads itself while the drive starts or runs (at most once a
// second), so its state and log stay current.
(function () {
  var page = document.querySelector("[data-reload-secs]");
  if (!page) return;
  var secs = Math.max(1, Number(page.getAttribute("data-reload-secs")) || 2);
  setTimeout(function () { window.location.reload(); }, secs * 1000);
})();
