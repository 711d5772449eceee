// The monitor page when a site goes silent, and its Abort confirmation, in headless Chromium.
// Usage: node monitor_disconnect.js URL SCREENSHOT.png
// Stand-in sites (tests/integration/test_monitor_disconnect.sh) send RUN frames; the actuator
// site stops after a few seconds. Checks: both RUN with chart data; then the actuator site is
// shown "disconnected" while the numerical site stays RUN and the page keeps drawing; Abort
// dismissed at the confirmation sends nothing; Abort confirmed is sent. Prints one JSON line.
"use strict";
const puppeteer = require("puppeteer-core");

const [url, shot] = process.argv.slice(2);
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";

async function until(page, what, fn, timeoutMs, arg) {
  try {
    await page.waitForFunction(fn, { timeout: timeoutMs, polling: 100 }, arg);
  } catch (e) {
    throw new Error("timed out waiting for " + what);
  }
}

(async () => {
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM, headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"],
  });
  const seen = { dialogs: [] };
  let ok = false, accept = false;
  const page = await browser.newPage();
  const errors = [];
  page.on("pageerror", e => errors.push(String(e)));
  page.on("console", m => { if (m.type() === "error") errors.push(m.text()); });
  page.on("dialog", d => { seen.dialogs.push(d.type()); accept ? d.accept() : d.dismiss(); });
  try {
    await page.setViewport({ width: 1366, height: 900 });
    await page.goto(url, { waitUntil: "load", timeout: 20000 });
    await until(page, "both sites RUN with chart data", () => {
      const m = window.drthsMonitor;
      return m && m.site.physical.last?.state === "RUN" && m.site.numerical.last?.state === "RUN" &&
             m.points()["ch-disp"] > 20;
    }, 20000);
    await until(page, "the actuator site shown disconnected",
      () => document.querySelector("#site-physical .state").textContent === "disconnected",
      20000);
    seen.states = await page.$$eval(".site .state", els => els.map(e => e.textContent));
    if (seen.states[0] !== "RUN") throw new Error("numerical site not RUN: " + seen.states[0]);
    // The page goes on drawing the live site.
    const p0 = await page.evaluate(() => window.drthsMonitor.site.numerical.frames);
    await until(page, "more numerical frames", n => window.drthsMonitor.site.numerical.frames > n + 20,
      5000, p0);

    // Abort asks first; dismissed, nothing is sent.
    await page.click("#btn-abort");
    await new Promise(r => setTimeout(r, 300));
    seen.after_dismiss = await page.$eval("#control-result", e => e.textContent);
    if (seen.dialogs.length !== 1 || seen.dialogs[0] !== "confirm")
      throw new Error("Abort did not ask for confirmation");
    if (seen.after_dismiss !== "") throw new Error("dismissed Abort did something: " + seen.after_dismiss);
    accept = true;
    await page.click("#btn-abort");
    await until(page, "the Abort reply",
      () => /abort sent to/.test(document.getElementById("control-result").textContent), 5000);
    seen.after_accept = await page.$eval("#control-result", e => e.textContent);
    await page.screenshot({ path: shot, fullPage: true });
    if (errors.length) throw new Error("errors in the page: " + errors.join(" | "));
    ok = true;
  } catch (e) {
    seen.error = String(e.message || e);
    try { await page.screenshot({ path: shot, fullPage: true }); } catch (_) {}
  } finally {
    await browser.close();
  }
  console.log(JSON.stringify(seen));
  process.exit(ok ? 0 : 1);
})().catch(e => { console.error(e); process.exit(1); });
