// driver.mjs drives Debian's Chromium through playwright-core for the
// console's browser test (console/e2e_test.go). The Go test starts it and
// sends one JSON command per line on stdin; each gets one JSON line back on
// stdout: {"ok":true,"value":…} or {"ok":false,"error":"…"}. The Go side
// holds the scenario and the assertions; this file only knows how to act.
//
// Environment: JOBQ_CHROMIUM (default /usr/bin/chromium), JOBQ_PROFILE (a
// fresh --user-data-dir, required).
import { chromium } from 'playwright-core';
import readline from 'node:readline';

const profile = process.env.JOBQ_PROFILE;
if (!profile) {
  console.error('driver: JOBQ_PROFILE (a fresh user data dir) is required');
  process.exit(2);
}
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.JOBQ_CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
    '--disable-sync', '--no-first-run', '--disable-dev-shm-usage'],
  viewport: { width: 1360, height: 900 },
  timezoneId: 'UTC',
  locale: 'en-US',
});
const page = context.pages()[0] || await context.newPage();
page.setDefaultTimeout(20000);

// lastStatus is the HTTP status of the latest console response (a page
// load or an htmx request), static files aside.
let lastStatus = 0;
page.on('response', (resp) => {
  const u = new URL(resp.url());
  if (u.pathname.startsWith('/ui/') && !u.pathname.startsWith('/ui/static/')) lastStatus = resp.status();
});
const consoleErrors = [];
page.on('pageerror', (err) => consoleErrors.push(String(err)));

const ops = {
  async goto({ url }) {
    const resp = await page.goto(url, { waitUntil: 'load' });
    return { status: resp ? resp.status() : 0, url: page.url() };
  },
  // click removes the elements matching `wait`, clicks `selector`, then
  // waits for `wait` to appear again: the answer of the request it started.
  async click({ selector, wait }) {
    if (wait) await page.evaluate((w) => document.querySelectorAll(w).forEach((e) => e.remove()), wait);
    await page.locator(selector).first().click();
    if (wait) await page.locator(wait).first().waitFor({ state: 'attached' });
    await page.waitForLoadState('load');
    return { status: lastStatus, url: page.url() };
  },
  async fill({ selector, value }) { await page.locator(selector).first().fill(value); return null; },
  async select({ selector, value }) { await page.locator(selector).first().selectOption(value); return null; },
  async text({ selector }) { return (await page.locator(selector).first().innerText()).trim(); },
  async texts({ selector }) { return (await page.locator(selector).allInnerTexts()).map((t) => t.trim()); },
  async attrs({ selector, name }) {
    return page.evaluate(([s, n]) => [...document.querySelectorAll(s)].map((e) => e.getAttribute(n)), [selector, name]);
  },
  async count({ selector }) { return page.locator(selector).count(); },
  // waitText waits until the first `selector` element's text is `text`
  // (live refresh: no reload, no click).
  async waitText({ selector, text, timeout }) {
    await page.waitForFunction(([s, t]) => {
      const e = document.querySelector(s);
      return e && e.innerText.trim() === t;
    }, [selector, text], { timeout: timeout || 20000 });
    return null;
  },
  async screenshot({ path }) { await page.screenshot({ path, fullPage: true }); return path; },
  async clearCookies() { await context.clearCookies(); return null; },
  async errors() { return consoleErrors.splice(0); },
  async close() { await context.close(); return null; },
};

const rl = readline.createInterface({ input: process.stdin });
for await (const line of rl) {
  if (!line.trim()) continue;
  let cmd;
  try {
    cmd = JSON.parse(line);
    const fn = ops[cmd.op];
    if (!fn) throw new Error(`unknown op ${cmd.op}`);
    const value = await fn(cmd);
    process.stdout.write(JSON.stringify({ ok: true, value }) + '\n');
    if (cmd.op === 'close') break;
  } catch (err) {
    process.stdout.write(JSON.stringify({ ok: false, error: String(err && err.message || err) }) + '\n');
  }
}
process.exit(0);
