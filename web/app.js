/* The drths monitor page: frames from drths-monitor's /events stream (one JSON object per site
 * frame, see platform/telemetry.h) into uPlot strip charts, the sites' state, the run's statistics
 * and the Start / Stop / Abort buttons (POST /control/...); whether each site acknowledged the
 * last command comes from GET /sites, polled twice a second. */
"use strict";

(function () {
  const WINDOW_S = 20;          // strip charts show the last 20 s of run time
  const LOOP_S = 10;            // the force-displacement loop shows the last 10 s
  const STALE_MS = 1500;        // a site with no frame for this long is shown disconnected
  const token = new URLSearchParams(location.search).get("token");
  const q = token ? "?token=" + encodeURIComponent(token) : "";

  // Sites: "numerical" and the actuator sites ("physical", or each laboratory's name when the
  // experiment file lists several sites; the numerical site's frames then carry "links").
  // Rows keyed by tick: every site samples the same ticks (every rate/50), so one row holds all.
  let rows = new Map();
  let ticks = [];              // sorted keys of rows
  const site = {};
  let dirty = false;
  let streamUp = false;
  let monitorSites = null;     // the last GET /sites answer (control acknowledgements)
  let layout = "";             // the actuator sites the charts were built for

  function num(v) { return typeof v === "number" && isFinite(v) ? v : null; }

  function siteState(name) {
    if (!site[name])
      site[name] = { last: null, lastAt: 0, frames: 0, prev: null, linkPrev: {}, maxTick: -1,
                     maxLate: 0, maxRtt: 0, peakDisp: 0, peakForce: 0 };
    return site[name];
  }
  siteState("numerical");
  siteState("physical");

  // The numerical site's links (several laboratories), [] with one actuator site.
  function links() { return site.numerical.last?.links || []; }
  // The actuator sites: the numerical site's links when it has several, else "physical" and
  // any other site heard from.
  function actuators() {
    const l = links().map(x => x.site);
    if (l.length) return l.concat(Object.keys(site).filter(n => n !== "numerical" &&
                                                          n !== "physical" && !l.includes(n)));
    return ["physical"].concat(Object.keys(site).filter(n => n !== "numerical" && n !== "physical"
                                                         && site[n].frames > 0));
  }
  function allSites() { return ["numerical"].concat(actuators()); }
  // Where the numerical site's figures for actuator site a are in a row.
  function nkey(a, what) { return links().length ? "numerical:" + a + ":" + what : "numerical:" + what; }

  function resetRun() {
    rows = new Map();
    ticks = [];
    for (const s of Object.values(site)) {
      Object.assign(s, { prev: null, linkPrev: {}, maxTick: -1, maxLate: 0, maxRtt: 0,
                         peakDisp: 0, peakForce: 0 });
    }
  }

  function rowFor(f) {
    let r = rows.get(f.tick);
    if (!r) {
      r = { t: f.t };
      rows.set(f.tick, r);
      if (!ticks.length || f.tick > ticks[ticks.length - 1]) ticks.push(f.tick);
      else { // rare: another site's frame of an earlier tick arrives later
        let i = ticks.length;
        while (i > 0 && ticks[i - 1] > f.tick) i--;
        ticks.splice(i, 0, f.tick);
      }
    }
    return r;
  }

  function rate(prev, now, t, key) {
    return prev && t > prev.t ? (now - prev[key]) / (t - prev.t) : null;
  }

  function onFrame(f) {
    if (typeof f.site !== "string") return;
    const s = siteState(f.site);
    s.frames++;
    s.lastAt = performance.now();
    if (f.tick >= 0 && f.tick + 2000 < s.maxTick && (f.state === "RUN" || f.state === "READY"))
      resetRun(); // a new run began
    if (f.tick >= 0 && num(f.t) !== null && f.tick > s.maxTick) {
      const r = rowFor(f);
      const p = f.site + ":";
      for (const k of ["cmd", "meas", "fmeas", "fused", "smith", "rtt", "L", "lateness"])
        r[p + k] = num(f[k]);
      r[p + "late_rate"] = rate(s.prev, f.late, f.t, "late");
      r[p + "conc_rate"] = rate(s.prev, f.concealed, f.t, "concealed");
      s.prev = { t: f.t, late: f.late, concealed: f.concealed };
      for (const l of f.links || []) { // the numerical site's view of each laboratory
        const lk = p + l.site + ":", ch = (l.ch || [])[0] || [];
        r[lk + "rtt"] = num(l.rtt);
        r[lk + "cmd"] = num(ch[0]);
        r[lk + "fused"] = num(ch[1]);
        r[lk + "smith"] = num(ch[1]) !== null && num(l.fmeas) !== null ? ch[1] - l.fmeas : null;
        const lp = s.linkPrev[l.site];
        r[lk + "late_rate"] = rate(lp, l.late, f.t, "late");
        r[lk + "conc_rate"] = rate(lp, l.concealed, f.t, "concealed");
        s.linkPrev[l.site] = { t: f.t, late: l.late, concealed: l.concealed };
        if (num(l.rtt) !== null) s.maxRtt = Math.max(s.maxRtt, l.rtt);
      }
      s.maxTick = f.tick;
      if (num(f.lateness) !== null) s.maxLate = Math.max(s.maxLate, f.lateness);
      if (num(f.rtt) !== null) s.maxRtt = Math.max(s.maxRtt, f.rtt);
      const d = num(f.meas) ?? num(f.cmd);
      if (d !== null) s.peakDisp = Math.max(s.peakDisp, Math.abs(d));
      if (num(f.fmeas) !== null) s.peakForce = Math.max(s.peakForce, Math.abs(f.fmeas));
      // keep the window (and a little more for the loop)
      const tmin = f.t - WINDOW_S;
      while (ticks.length && rows.get(ticks[0]).t < tmin) rows.delete(ticks.shift());
    }
    s.last = f;
    dirty = true;
  }

  // ---- charts ------------------------------------------------------------------------------
  // Built for the actuator sites known (one: the series as always; several: each site's own),
  // and built again when they change.
  const charts = {};
  const colors = { cmd: "#1f77b4", ncmd: "#9467bd", meas: "#d62728", fmeas: "#d62728",
                   fused: "#1f77b4", smith: "#2ca02c", rtt: "#1f77b4", L: "#ff7f0e",
                   late: "#ff7f0e", conc: "#d62728", nconc: "#9467bd", lateness: "#8c564b" };
  const palette = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
                   "#17becf"];

  function size(el) {
    const w = Math.max(280, el.clientWidth - 16);
    return { width: w, height: Math.round(Math.min(260, Math.max(160, w * 0.38))) };
  }

  function mount(id) {
    const el = document.getElementById(id);
    if (charts[id]) charts[id].u.destroy();
    for (const c of [...el.children]) if (c.tagName !== "H3") c.remove();
    return el;
  }

  function strip(id, series, extraScales, axes) {
    const el = mount(id);
    const opts = Object.assign({
      ...size(el),
      scales: Object.assign({ x: { time: false } }, extraScales || {}),
      legend: { live: true },
      cursor: { drag: { x: false, y: false } },
      series: [{ label: "t (s)", value: (u, v) => v == null ? "-" : v.toFixed(2) }].concat(
        series.map(s => Object.assign({ width: 1.5, spanGaps: true }, s))),
      axes: axes || [{ label: "run time (s)" }, {}],
    });
    const u = new uPlot(opts, [[], ...series.map(() => [])], el);
    charts[id] = { u, keys: series.map(s => s.key), el };
    return u;
  }

  function buildCharts(acts, several) {
    const one = !several;
    const tag = (a, text) => one ? text : a + ": " + text;
    const col = (i, fallback) => one ? fallback : palette[i % palette.length];
    const dash = [6, 3];
    strip("ch-disp", (one ? [{ key: "numerical:cmd", label: "command (numerical)", stroke: colors.ncmd, scale: "mm" }] : [])
      .concat(acts.flatMap((a, i) => [
        { key: a + ":cmd", label: one ? "command (actuator site)" : a + ": command", stroke: col(i, colors.cmd), scale: "mm", dash: one ? undefined : dash },
        { key: a + ":meas", label: tag(a, "measured"), stroke: col(i, colors.meas), scale: "mm" }])),
      { mm: {} }, [{ label: "run time (s)" }, { scale: "mm" }]);
    strip("ch-force", acts.flatMap((a, i) => [
      { key: a + ":fmeas", label: tag(a, "measured"), stroke: col(i, colors.fmeas), scale: "kN" },
      { key: nkey(a, "fused"), label: tag(a, "used by the integrator"), stroke: col(i, colors.fused), scale: "kN", dash: one ? undefined : dash },
      { key: nkey(a, "smith"), label: tag(a, "Smith correction"), stroke: one ? colors.smith : col(i), scale: "kN", dash: one ? undefined : [2, 3] }]),
      { kN: {} }, [{ label: "run time (s)" }, { scale: "kN" }]);
    strip("ch-rtt", (one ? [{ key: "numerical:rtt", label: "round trip (ms)", stroke: colors.rtt, scale: "ms" }]
                         : acts.map((a, i) => ({ key: nkey(a, "rtt"), label: a + ": round trip (ms)", stroke: col(i), scale: "ms" })))
      .concat([{ key: "numerical:L", label: "L (ticks)", stroke: colors.L, scale: "ticks" }]),
      { ms: {}, ticks: {} },
      [{ label: "run time (s)" }, { scale: "ms", label: "ms" },
       { scale: "ticks", side: 1, label: "ticks", grid: { show: false } }]);
    strip("ch-rates", acts.flatMap((a, i) => [
      { key: a + ":late_rate", label: tag(a, "late commands /s"), stroke: col(i, colors.late), scale: "r" },
      { key: a + ":conc_rate", label: tag(a, "concealed commands /s"), stroke: col(i, colors.conc), scale: "r", dash: one ? undefined : dash },
      { key: nkey(a, "conc_rate"), label: tag(a, "concealed feedback /s"), stroke: col(i, colors.nconc), scale: "r", dash: one ? undefined : [2, 3] },
      { key: nkey(a, "late_rate"), label: tag(a, "late feedback /s"), stroke: col(i, "#17becf"), scale: "r", dash: one ? undefined : [8, 2, 2, 2] }]),
      { r: { range: (u, lo, hi) => [0, Math.max(1, hi)] } }, [{ label: "run time (s)" }, { scale: "r" }]);
    strip("ch-late", acts.map((a, i) => (
      { key: a + ":lateness", label: tag(a, "wake-up lateness (us)"), stroke: col(i, colors.lateness), scale: "us" })),
      { us: { range: (u, lo, hi) => [0, Math.max(50, hi)] } }, [{ label: "run time (s)" }, { scale: "us" }]);

    // The loop: uPlot's x-y mode (mode 2), measured displacement against measured force, one
    // series per actuator site.
    const el = mount("ch-loop");
    const u = new uPlot({
      ...size(el),
      mode: 2,
      scales: { x: { time: false }, y: {} },
      legend: { show: !one },
      cursor: { drag: { x: false, y: false } },
      axes: [{ label: "measured displacement (mm)" }, { label: "measured force (kN)" }],
      series: [{}].concat(acts.map((a, i) => ({
        label: one ? "loop" : a, stroke: col(i, colors.meas), width: 1.2,
        points: { show: false }, facets: [{ scale: "x", auto: true }, { scale: "y", auto: true }] }))),
    }, [null, ...acts.map(() => [[], []])], el);
    charts["ch-loop"] = { u, el, loop: acts };
  }

  function scaleOf(key, v) {
    if (v == null) return null;
    if (key.endsWith(":cmd") || key.endsWith(":meas")) return v * 1e3;
    if (key.endsWith(":fmeas") || key.endsWith(":fused") || key.endsWith(":smith")) return v * 1e-3;
    return v;
  }

  function redraw() {
    const acts = actuators(), several = links().length > 0;
    const want = (several ? "links:" : "one:") + acts.join(",");
    if (want !== layout) {
      layout = want;
      buildCharts(acts, several);
      dirty = true;
    }
    if (!dirty) return;
    dirty = false;
    const xs = ticks.map(k => rows.get(k).t);
    for (const id in charts) {
      const c = charts[id];
      if (c.loop) {
        const tmin = xs.length ? xs[xs.length - 1] - LOOP_S : 0;
        c.points = 0;
        const data = [null];
        for (const a of c.loop) {
          const dx = [], fy = [];
          for (const k of ticks) {
            const r = rows.get(k);
            if (r.t >= tmin && r[a + ":meas"] != null && r[a + ":fmeas"] != null) {
              dx.push(r[a + ":meas"] * 1e3);
              fy.push(r[a + ":fmeas"] * 1e-3);
            }
          }
          data.push([dx, fy]);
          c.points += dx.length;
        }
        c.u.setData(data);
        continue;
      }
      const data = [xs];
      for (const key of c.keys)
        data.push(ticks.map(k => scaleOf(key, rows.get(k)[key] ?? null)));
      c.u.setData(data);
      c.points = xs.length;
    }
  }

  window.addEventListener("resize", () => {
    for (const id in charts) charts[id].u.setSize(size(charts[id].el));
  });

  // ---- sites, statistics, buttons ----------------------------------------------------------
  function fmt(v, d, unit) { return v == null ? "-" : v.toFixed(d) + (unit ? " " + unit : ""); }

  function kv(el, pairs) {
    el.replaceChildren(...pairs.flatMap(([k, v]) => {
      const a = document.createElement("span"); a.textContent = k;
      const b = document.createElement("span"); b.textContent = v;
      if (k === "tick") b.className = "tick";
      return [a, b];
    }));
  }

  // A site's panel, made when the site is first known (numerical first, then the actuator
  // sites in the order of the numerical site's links).
  function panel(name) {
    let el = document.getElementById("site-" + name);
    if (el) return el;
    el = document.createElement("div");
    el.className = "site";
    el.id = "site-" + name;
    el.dataset.site = name;
    const h = document.createElement("h2");
    h.textContent = name === "numerical" ? "numerical site " : name === "physical" ? "actuator site " : "actuator site " + name + " ";
    const b = document.createElement("span");
    b.className = "state badge off";
    b.textContent = "no data";
    h.append(b);
    const ev = document.createElement("div"); ev.className = "event"; ev.textContent = "-";
    const ctl = document.createElement("div"); ctl.className = "ctl";
    ctl.title = "the last Start / Stop / Abort sent to this site and whether it arrived";
    ctl.textContent = "control: none sent";
    const k = document.createElement("div"); k.className = "kv";
    el.append(h, ev, ctl, k);
    if (name === "numerical") {
      const t = document.createElement("table"); t.className = "links"; t.hidden = true;
      el.append(t);
    }
    document.getElementById("sites").insertBefore(el, document.getElementById("stats"));
    return el;
  }

  function layoutPanels() {
    const names = allSites();
    for (const n of names) panel(n);
    // "physical" stands for the one actuator site: gone once the laboratories are named.
    const ph = document.getElementById("site-physical");
    if (ph && !names.includes("physical")) ph.remove();
    const box = document.getElementById("sites"), stats = document.getElementById("stats");
    for (const n of names) box.insertBefore(document.getElementById("site-" + n), stats);
  }

  // The numerical site's view of each laboratory: round trip, feedback late and concealed,
  // datagrams rejected, and each channel's command and force.
  function linkTable(el, f) {
    const t = el.querySelector("table.links");
    const ls = f.links || [];
    t.hidden = ls.length === 0;
    el.classList.toggle("wide", ls.length > 0);
    if (!ls.length) return;
    const head = ["link", "round trip", "late", "concealed", "rejected", "command", "force used",
                  "force measured"];
    const tr = (cells, tag) => {
      const r = document.createElement("tr");
      for (const c of cells) { const d = document.createElement(tag); d.textContent = c; r.append(d); }
      return r;
    };
    t.replaceChildren(tr(head, "th"), ...ls.map(l => {
      const ch = (l.ch || [])[0] || [];
      const r = tr([l.site, fmt(num(l.rtt), 3, "ms"), String(l.late), String(l.concealed),
                    String(l.rejected), fmt(num(ch[0]) == null ? null : ch[0] * 1e3, 3, "mm"),
                    fmt(num(ch[1]) == null ? null : ch[1] * 1e-3, 2, "kN"),
                    fmt(num(l.fmeas) == null ? null : l.fmeas * 1e-3, 2, "kN")], "td");
      r.dataset.site = l.site;
      return r;
    }));
  }

  function clock(iso) {
    const d = new Date(iso);
    return d.toLocaleTimeString([], { hour12: false }) + "." + String(d.getMilliseconds()).padStart(3, "0");
  }

  // "abort: acknowledged by physical at 19:40:01.123", "... sent, not acknowledged yet (3 tries)"
  function controlText(name, c) {
    if (!c) return "control: none sent";
    const sent = c.command + " sent at " + clock(c.sent_at);
    if (c.status === "acknowledged") return c.command + ": acknowledged by " + name + " at " + clock(c.acked_at);
    if (c.status === "sent") return sent + ", not acknowledged yet (" + c.tries + " tries)";
    return sent + ": NOT acknowledged by " + name + " after " + c.tries + " tries";
  }

  function updateControl() {
    for (const name of allSites()) {
      const el = panel(name).querySelector(".ctl");
      const m = monitorSites?.sites?.find(x => x.site === name);
      const c = m ? m.control : null;
      el.textContent = controlText(name, c);
      el.className = "ctl " + (c ? c.status : "");
    }
  }

  async function pollSites() {
    try {
      const headers = token ? { "X-Drths-Token": token } : {};
      const r = await fetch("sites" + q, { headers, cache: "no-store" });
      if (r.ok) monitorSites = await r.json();
    } catch (e) { /* the stream badge already says the monitor is unreachable */ }
    updateControl();
  }

  function stale(s) { return !s.last || performance.now() - s.lastAt > STALE_MS; }

  function updatePanels() {
    layoutPanels();
    const acts = actuators();
    for (const name of allSites()) {
      const s = siteState(name), el = panel(name);
      const badge = el.querySelector(".state");
      const f = s.last;
      let state = f ? f.state : "no data";
      if (f && stale(s) && f.state !== "DONE") state = "disconnected";
      badge.textContent = state;
      badge.className = "state badge " + (state === "no data" ? "off" : state);
      el.classList.toggle("stale", stale(s));
      el.querySelector(".event").textContent = f ? f.event : "-";
      if (!f) continue;
      const pairs = [["tick", String(f.tick)], ["run time", fmt(num(f.t), 2, "s")],
                     ["late", String(f.late)], ["concealed", String(f.concealed)],
                     ["rejected", String(f.rejected)], ["L", fmt(num(f.L), 0, "ticks")]];
      if (name === "numerical") pairs.push(["round trip", fmt(num(f.rtt), 3, "ms")]);
      else pairs.push(["tick lateness", fmt(num(f.lateness), 1, "us")],
                      ["peak displacement", s.maxTick >= 0 ? fmt(s.peakDisp * 1e3, 2, "mm") : "-"],
                      ["peak force", s.maxTick >= 0 ? fmt(s.peakForce * 1e-3, 1, "kN") : "-"]);
      pairs.push(["frames", String(s.frames)],
                 ["last frame", stale(s) ? ((performance.now() - s.lastAt) / 1e3).toFixed(1) + " s ago" : "now"]);
      kv(el.querySelector(".kv"), pairs);
      if (name === "numerical") linkTable(el, f);
    }
    const n = site.numerical, ps = acts.map(a => siteState(a));
    const sum = (xs, k) => xs.reduce((a, x) => a + (x.last?.[k] || 0), 0);
    const heard = ps.filter(p => p.last);
    const ran = ps.filter(p => p.maxTick >= 0);
    const tmax = Math.max(num(n.last?.t) ?? -1, ...ps.map(p => num(p.last?.t) ?? -1));
    kv(document.getElementById("stats-kv"), [
      ["run time", fmt(tmax >= 0 ? tmax : null, 2, "s")],
      ["commands late / concealed", heard.length ? sum(heard, "late") + " / " + sum(heard, "concealed") : "-"],
      ["feedback late / concealed", n.last ? n.last.late + " / " + n.last.concealed : "-"],
      ["rejected datagrams", String(sum([n, ...ps], "rejected"))],
      ["max tick lateness", ran.length ? fmt(Math.max(...ran.map(p => p.maxLate)), 1, "us") : "-"],
      ["max round trip", n.maxTick >= 0 ? fmt(n.maxRtt, 3, "ms") : "-"],
      ["peak displacement", ran.length ? fmt(Math.max(...ran.map(p => p.peakDisp)) * 1e3, 2, "mm") : "-"],
      ["peak force", ran.length ? fmt(Math.max(...ran.map(p => p.peakForce)) * 1e-3, 1, "kN") : "-"],
      ["telemetry lost at the sites", String(sum([n, ...ps], "tlm_errors"))],
      ["control refused at the sites", String(sum([n, ...ps], "ctl_refused"))],
      ["telemetry refused by the monitor", monitorSites
        ? String(Object.values(monitorSites.rejected || {}).reduce((a, b) => a + b, 0)) : "-"],
    ]);
    // Start when every site (the numerical site and each of its laboratories) reports READY.
    const names = allSites();
    const live = names.filter(x => !stale(siteState(x)));
    const ready = names.every(x => !stale(siteState(x)) && site[x].last.state === "READY");
    const running = live.some(x => ["RUN", "HOLD", "WAITING", "READY"].includes(site[x].last.state));
    document.getElementById("btn-start").disabled = !streamUp || !ready;
    document.getElementById("btn-stop").disabled = !streamUp || !running;
    document.getElementById("btn-abort").disabled = !streamUp || !running;
    const link = document.getElementById("link");
    link.textContent = streamUp ? "stream: live" : "stream: lost (retrying)";
    link.className = "badge " + (streamUp ? "on" : "off");
  }

  async function control(what) {
    if (what === "abort" && !confirm("Abort: HOLD now at every site. The run ends. Continue?"))
      return;
    const out = document.getElementById("control-result");
    out.textContent = what + ": sending...";
    try {
      const headers = { "X-Drths-Control": "1" };
      if (token) headers["X-Drths-Token"] = token;
      const r = await fetch("control/" + what + q, { method: "POST", headers });
      const j = await r.json().catch(() => ({}));
      out.textContent = r.ok ? what + " sent to " + (j.sent_to || []).join(", ")
                             : what + " failed: " + (j.error || r.status);
      pollSites();
    } catch (e) {
      out.textContent = what + " failed: " + e;
    }
  }
  for (const w of ["start", "stop", "abort"])
    document.getElementById("btn-" + w).addEventListener("click", () => control(w));

  // ---- stream ------------------------------------------------------------------------------
  const es = new EventSource("events" + q);
  es.onopen = () => { streamUp = true; };
  es.onerror = () => { streamUp = false; };
  es.onmessage = (ev) => {
    try { onFrame(JSON.parse(ev.data)); } catch (e) { /* a malformed frame is skipped */ }
  };

  layoutPanels();
  setInterval(redraw, 100);
  setInterval(updatePanels, 250);
  setInterval(pollSites, 500);

  // For the browser test and for curious operators in the console.
  window.drthsMonitor = {
    site, charts, controlText: (name) => {
      const m = monitorSites?.sites?.find(x => x.site === name);
      return controlText(name, m ? m.control : null);
    },
    points: () => Object.fromEntries(Object.entries(charts).map(([k, c]) => [k, c.points || 0])),
  };
})();
