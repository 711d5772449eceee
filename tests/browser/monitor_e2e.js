// The monitor page in headless Chromium (puppeteer-core from web/node_modules, Debian's
// /usr/bin/chromium). Usage: node monitor_e2e.js URL SCREENSHOT.png [ACTUATOR_SITES]
// ACTUATOR_SITES: comma-separated, "physical" by default; several for a file with sites (the
// numerical site's panel must then list each laboratory in its link table, with a round trip).
// With every site started with --wait-start: waits until all are READY, presses Start, waits
// until every site acknowledges it (the panels say so) and the charts receive data and the
// counters move, presses Stop (acknowledged by the numerical site), waits until every site
// reports DONE, saves a screenshot, and prints one JSON line of what it saw. Exit 0 when every
// check passed; every wait is bounded.
"use strict";
const puppeteer = require("puppeteer-core");

const [url, shot, actArg] = process.argv.slice(2);
const ACTS = (actArg || "physical").split(",");
const SITES = ["numerical"].concat(ACTS);
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";

function fail(msg) { throw new Error(msg); }

async function until(page, what, fn, timeoutMs, arg) {
  try {
    await page.waitForFunction(fn, { timeout: timeoutMs, polling: 100 }, arg);
  } catch (e) {
    fail("timed out waiting for " + what);
  }
}

(async () => {
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    // root in a container: no sandbox; no GPU on a test machine
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"],
  });
  const seen = {};
  let ok = false;
  const page = await browser.newPage();
  const errors = [];
  page.on("pageerror", e => errors.push(String(e)));
  page.on("console", m => { if (m.type() === "error") errors.push(m.text()); });
  page.on("dialog", d => d.accept()); // the Abort confirm(), should the test press it
  try {
    await page.setViewport({ width: 1366, height: 900 }); // a laptop screen
    await page.goto(url, { waitUntil: "load", timeout: 20000 });
    await until(page, "the page script", () => !!window.drthsMonitor, 10000);

    // Start is enabled only when every site reports READY.
    await until(page, "every site READY and Start enabled",
      () => !document.getElementById("btn-start").disabled, 30000);
    seen.panels = await page.$$eval(".site[data-site]", els => els.map(e => e.dataset.site));
    if (seen.panels.join() !== SITES.join()) fail("the panels are " + seen.panels.join());
    seen.ready = await page.$$eval(".site .state", els => els.map(e => e.textContent));
    await page.click("#btn-start");
    // Each site acknowledges Start (its frames carry the counter), and the panel says so.
    await until(page, "Start acknowledged by every site in its panel",
      sites => sites.every(s => new RegExp("^start: acknowledged by " + s + " at ")
              .test(document.getElementById("site-" + s).querySelector(".ctl").textContent)),
      10000, SITES);
    seen.start_ack = await page.$$eval(".site .ctl", els => els.map(e => e.textContent));

    // Charts receive data and the counters move.
    await until(page, "every site RUN with chart data",
      sites => {
        const m = window.drthsMonitor, p = m.points();
        return sites.every(s => m.site[s]?.last?.state === "RUN") &&
               p["ch-disp"] > 50 && p["ch-loop"] > 20;
      }, 30000, SITES);
    const first = "#site-" + ACTS[0] + " .tick";
    const tick0 = await page.$eval(first, e => Number(e.textContent));
    await until(page, "the actuator site's tick counter to move on by 1 s of ticks",
      ([sel, t0]) => Number(document.querySelector(sel)?.textContent) > t0 + 4000,
      15000, [first, tick0]);
    seen.points = await page.evaluate(() => window.drthsMonitor.points());
    seen.tick0 = tick0;
    seen.tick1 = await page.$eval(first, e => Number(e.textContent));
    seen.frames = await page.evaluate(sites => Object.fromEntries(
      sites.map(s => [s, window.drthsMonitor.site[s].frames])), SITES);
    seen.series = await page.evaluate(() => Object.fromEntries(Object.entries(
      window.drthsMonitor.charts).map(([k, c]) => [k, (c.u.series || []).slice(1).map(s => s.label)])));
    if (ACTS.length > 1) {
      // The numerical site's view of each laboratory: a row per link, its round trip a number.
      seen.links = await page.$$eval("#site-numerical table.links tr[data-site]",
        rs => rs.map(r => [...r.children].map(c => c.textContent)));
      if (seen.links.map(r => r[0]).join() !== ACTS.join()) fail("link table: " + JSON.stringify(seen.links));
      if (!seen.links.every(r => / ms$/.test(r[1]))) fail("a link without a round trip: " + JSON.stringify(seen.links));
      // Each laboratory has its own measured displacement and loop.
      for (const a of ACTS)
        if (!seen.series["ch-disp"].includes(a + ": measured") || !seen.series["ch-loop"].includes(a))
          fail("no chart series of " + a + ": " + JSON.stringify(seen.series));
    }
    for (const [k, v] of Object.entries(seen.points))
      if (!(v > 20)) fail(`chart ${k} has only ${v} points`);
    // The data in the displacement chart is real: the measured displacement is not flat.
    seen.disp_range_mm = await page.evaluate(() => {
      const d = window.drthsMonitor.charts["ch-disp"].u.data[3].filter(v => v != null);
      return Math.max(...d) - Math.min(...d);
    });
    if (!(seen.disp_range_mm > 0)) fail("the measured displacement is flat");

    // Stop: both sites end and report DONE with their reason.
    await page.click("#btn-stop");
    await until(page, "the Stop reply",
      () => /stop sent to/.test(document.getElementById("control-result").textContent), 10000);
    await until(page, "Stop acknowledged by the numerical site",
      () => /^stop: acknowledged by numerical at /.test(
              document.querySelector("#site-numerical .ctl").textContent), 10000);
    await until(page, "every site DONE",
      sites => sites.every(s => window.drthsMonitor.site[s].last?.state === "DONE"),
      30000, SITES);
    // The panels refresh every 250 ms: then each site's last event is its end line.
    await until(page, "every site's end line in its panel",
      sites => sites.every(s => /\(exit \d+\)$/.test(
        document.getElementById("site-" + s).querySelector(".event").textContent)), 5000, SITES);
    seen.done_events = await page.$$eval(".site .event", els => els.map(e => e.textContent));
    await page.screenshot({ path: shot, fullPage: true });
    seen.screenshot = shot;
    if (errors.length) fail("errors in the page: " + errors.join(" | "));
    ok = true;
  } catch (e) {
    seen.error = String(e.message || e);
    seen.page_errors = errors;
    try { await page.screenshot({ path: shot, fullPage: true }); seen.screenshot = shot; } catch (_) {}
  } finally {
    await browser.close();
  }
  console.log(JSON.stringify(seen));
  process.exit(ok ? 0 : 1);
})().catch(e => { console.error(e); process.exit(1); });
