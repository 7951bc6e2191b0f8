// dashboard.mjs — the dashboard in headless Chromium against a real traind on loopback, started
// with --token-file: the page asks for the token (again after a wrong one), then lists a running
// and a finished job; a job's loss chart draws the API's rows (read back from canvas.__series), on
// a log axis with round ticks and EMA-smoothed as asked; two jobs overlay after "Compare
// selected"; a bad spec shows the API's field error next to the editor; the running job's live
// chart ends on an API row, and Cancel ends the job; no request leaves the daemon's origin and the
// console stays free of errors. Screenshots of the list, a job and the comparison go to
// $BROWSER_OUT_DIR. It also holds the page to a weight budget: every file / needs, gzipped as
// served, under 150 kB.
// Needs Debian's chromium and playwright-core (scripts/deps installs both); without them it
// skips (exit 77) on a dev machine and fails under CI=true.
import { spawn, execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';

const SKIP = 77;
const here = path.dirname(new URL(import.meta.url).pathname);

function missing(what) {
  const fix = 'install it with scripts/deps (apt: chromium; npm ci --prefix tests/browser)';
  if (process.env.CI === 'true') {
    console.error(`FAIL: ${what} is missing, and CI=true needs this test: ${fix}`);
    process.exit(1);
  }
  console.log(`SKIP: ${what} is missing: ${fix}`);
  process.exit(SKIP);
}

function findChromium() {
  if (process.env.CHROMIUM) return fs.existsSync(process.env.CHROMIUM) ? process.env.CHROMIUM : null;
  for (const name of ['chromium', 'chromium-browser']) {
    for (const dir of (process.env.PATH || '').split(':')) {
      const p = path.join(dir, name);
      if (fs.existsSync(p)) return p;
    }
  }
  return null;
}

let chromiumPw;
try {
  chromiumPw = createRequire(path.join(here, 'package.json'))('playwright-core').chromium;
} catch {
  missing('playwright-core (tests/browser/node_modules)');
}
const exe = findChromium();
if (!exe) missing('chromium');
const bin = process.env.TRAIND_BIN, gen = process.env.GEN_DCTAXI;
if (!bin || !gen) {
  console.error('FAIL: TRAIND_BIN and GEN_DCTAXI must be set (meson test sets them)');
  process.exit(1);
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'traind-browser-'));
const state = dir + '.state';
let daemon;

function fail(msg) {
  console.error('FAIL: ' + msg);
  try { console.error('---- traind log ----\n' + fs.readFileSync(path.join(dir, 'log'), 'utf8').slice(-4000)); } catch {}
  process.exitCode = 1;
  throw new Error(msg);
}

// A number as the charts print it: 587.9, 1.23e+6, 123k, 4.5M.
function parseShown(t) {
  const k = ' kMGT'.indexOf(t.slice(-1));
  return k > 0 ? Number(t.slice(0, -1)) * Math.pow(1000, k) : Number(t);
}

async function waitFor(what, fn, timeoutMs) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn().catch(() => null);
    if (v) return v;
    if (Date.now() > end) fail('timed out waiting for ' + what);
    await new Promise(r => setTimeout(r, 100));
  }
}

const TOKEN = 'browser-test-token';
const WEIGHT_BUDGET = 150 * 1000;   // bytes on the wire for everything / needs, gzipped

let base;
const auth = { Authorization: 'Bearer ' + TOKEN };

async function get(p) {
  const res = await fetch(base + p, { headers: auth });
  if (!res.ok) fail('GET ' + p + ': ' + res.status + ' ' + await res.text());
  return res.json();
}

async function post(p, body) {
  return fetch(base + p, { method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' },
                           body: JSON.stringify(body) });
}

async function submitJob(spec) {
  const res = await post('/jobs', spec);
  if (res.status !== 201) fail('POST /jobs: ' + res.status + ' ' + await res.text());
  return (await res.json()).id;
}

async function waitState(id, want, ms) {
  return waitFor(`job ${id} to be ${want}`, async () => {
    const j = await get('/jobs/' + id);
    if (j.state !== want && ['failed', 'cancelled', 'succeeded'].includes(j.state))
      fail(`job ${id} is ${j.state}, not ${want}: ` + JSON.stringify(j.error));
    return j.state === want;
  }, ms);
}

// The bytes of one response body as they crossed the wire (no decoding), and its headers.
function rawGet(p, headers) {
  return new Promise((resolve, reject) => {
    http.get(base + p, { headers }, res => {
      const chunks = [];
      res.on('data', c => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }));
    }).on('error', reject);
  });
}

// The page and each file its <link href> and <script src> name, as a browser asking for gzip gets them.
async function pageWeight() {
  const ask = { 'Accept-Encoding': 'gzip, deflate, br' };
  const index = await rawGet('/', ask);
  if (index.status !== 200) fail('GET /: ' + index.status);
  const html = (index.headers['content-encoding'] === 'gzip' ? zlib.gunzipSync(index.body) : index.body).toString();
  const refs = [...html.matchAll(/<(?:script[^>]*\ssrc|link[^>]*\shref)="(\/[^"]*)"/g)].map(m => m[1]);
  if (refs.length < 3) fail('index.html names only ' + refs.join(', '));
  const files = [['/', index]];
  for (const r of refs) files.push([r, await rawGet(r, ask)]);
  let total = 0;
  for (const [p, f] of files) {
    if (f.status !== 200) fail('GET ' + p + ': ' + f.status);
    if (f.headers['content-encoding'] !== 'gzip') fail(p + ' came back without gzip');
    total += f.body.length;
  }
  if (total > WEIGHT_BUDGET) fail(`the dashboard weighs ${total} bytes gzipped (${files.map(([p, f]) => p + ' ' + f.body.length).join(', ')}), over the budget of ${WEIGHT_BUDGET}`);
  return { total, n: files.length };
}

// The loss chart's drawn series (canvas.__series), the faint raw ones left out unless asked.
function lossSeries(page, faint) {
  return page.evaluate(faint => {
    const s = document.querySelector('#charts canvas').__series || [];
    return s.filter(d => faint || !d.name.endsWith(' raw'));
  }, faint);
}

async function setControl(page, id, value) {
  await page.evaluate(([id, value]) => {
    const e = document.getElementById(id);
    e.value = value;
    e.dispatchEvent(new Event('input'));
  }, [id, value]);
}

// The pixel rows py must be an affine function of t(ys), up to rounding: that is the axis transform.
function checkAxis(d, t, what) {
  const v = d.ys.map(t);
  let lo = 0, hi = 0;
  v.forEach((x, i) => { if (x < v[lo]) lo = i; if (x > v[hi]) hi = i; });
  if (v[hi] === v[lo]) fail(what + ': a flat series tells nothing');
  const a = (d.py[hi] - d.py[lo]) / (v[hi] - v[lo]);
  if (!(a < 0)) fail(what + ': larger values are not drawn higher');
  v.forEach((x, i) => {
    const want = d.py[lo] + a * (x - v[lo]);
    if (Math.abs(want - d.py[i]) > 0.01) fail(`${what}: point ${i} (${d.ys[i]}) at row ${d.py[i]}, the axis puts it at ${want}`);
  });
}

function emaOf(ys, w) {   // TensorBoard's smoothing, debiased
  let last = 0;
  return ys.map((y, n) => { last = last * w + (1 - w) * y; return last / (1 - Math.pow(w, n + 1)); });
}

function close(a, b) { return Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(b)); }

async function main() {
  const outDir = process.env.BROWSER_OUT_DIR || dir;
  execFileSync(gen, ['--rows', '2000', '--partitions', '1', '--seed', '0', path.join(dir, 'dev')]);
  fs.writeFileSync(path.join(dir, 'token'), TOKEN + '\n', { mode: 0o600 });
  const log = fs.openSync(path.join(dir, 'log'), 'w');
  daemon = spawn(bin, ['--listen', '127.0.0.1:0', '--port-file', path.join(dir, 'port'), '--data-root', dir,
                       '--state-dir', state, '--token-file', path.join(dir, 'token')],
                 { stdio: ['ignore', log, log] });
  const port = await waitFor('the port file', async () => fs.readFileSync(path.join(dir, 'port'), 'utf8').trim(), 30000);
  base = `http://127.0.0.1:${port}`;
  const weight = await pageWeight();

  const spec = {
    name: 'browser-a', data: { train: path.join(dir, 'dev', 'part*.csv') },
    model: { type: 'linear' }, loss: 'mse', optimizer: { type: 'sgd', lr: 0.03 }, clip_grad_norm: 0.5,
    batch_size: 64, iterations: 40, seed: 0,
  };
  const idA = await submitJob(spec);
  const idB = await submitJob({ ...spec, name: 'browser-b', optimizer: { type: 'sgd', lr: 0.01 }, seed: 1 });
  await waitState(idA, 'succeeded', 60000);
  await waitState(idB, 'succeeded', 60000);
  // Runs until the test cancels it: tiny steps, so it keeps one core busy at most.
  const idLong = await submitJob({ ...spec, name: 'browser-long', iterations: 100000000, batch_size: 8 });
  await waitState(idLong, 'running', 30000);

  const browser = await chromiumPw.launch({ executablePath: exe, headless: true, args: ['--no-sandbox'] });
  try {
    const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    const errors = [], foreign = [];
    // The one error status a step expects (401 before the token, 400 for the bad spec):
    // the browser logs each such response as a console error too.
    let expected = 401;
    page.on('console', m => {
      if (m.type() === 'error' && !m.text().includes(`status of ${expected} `)) errors.push(m.text());
    });
    page.on('pageerror', e => errors.push(String(e)));
    page.on('response', r => {
      if (r.status() >= 400 && r.status() !== expected) errors.push(r.status() + ' ' + r.url());
    });
    page.on('request', r => {
      const u = new URL(r.url());
      if (u.protocol !== 'data:' && u.origin !== base) foreign.push(r.url());
    });

    // Token flow: the page asks for it, then lists the jobs.
    await page.goto(base + '/');
    await page.locator('#token-form').waitFor({ state: 'visible', timeout: 10000 });
    if (await page.locator('#jobs tbody tr').count()) fail('jobs listed before the token was given');
    // A wrong token is refused, and the form asks again.
    await page.fill('#token', 'not-' + TOKEN);
    await page.click('#token-form button[type=submit]');
    await waitFor('the wrong token refused', async () =>
      (await page.locator('#status').innerText()) === 'the token was refused' && page.locator('#token-form').isVisible(), 10000);
    if (await page.locator('#jobs tbody tr').count()) fail('jobs listed with a wrong token');
    expected = 0;
    await page.fill('#token', TOKEN);
    await page.click('#token-form button[type=submit]');
    const row = id => page.locator(`#jobs tr[data-job="${id}"]`);
    await row(idA).waitFor({ timeout: 10000 });
    if (await page.locator('#token-form').isVisible()) fail('the token form stays after the token was given');

    // The list: the long job running, the short ones finished.
    const cells = async id => row(id).locator('td').allInnerTexts();
    const a = await cells(idA), l = await cells(idLong);
    if (!a[1].includes('browser-a') || a[2] !== 'succeeded' || !a[3].includes('40 / 40'))
      fail('the finished job\'s row reads ' + JSON.stringify(a));
    if (!l[1].includes('browser-long') || l[2] !== 'running') fail('the running job\'s row reads ' + JSON.stringify(l));
    await page.screenshot({ path: path.join(outDir, 'dashboard-jobs-list.png'), fullPage: true });

    // A job's loss chart: one point per API row, on the axis the controls ask for.
    const metrics = await get('/jobs/' + idA + '/metrics');
    const it = metrics.columns.indexOf('iteration'), lo = metrics.columns.indexOf('loss');
    const apiX = metrics.rows.map(r => r[it]), apiLoss = metrics.rows.map(r => r[lo]);
    if (apiLoss.length !== 40) fail('the API has ' + apiLoss.length + ' metrics rows for 40 iterations');
    await row(idA).locator('a').click();
    await page.waitForSelector('#view-job:not([hidden]) canvas');
    await setControl(page, 'smoothing', '0');
    await setControl(page, 'y-scale', 'linear');
    let [d] = await waitFor('the loss chart', async () => {
      const s = await lossSeries(page, true);
      return s.length === 1 && s[0].xs.length ? s : null;
    }, 10000);
    if (d.xs.length !== apiX.length) fail(`the chart draws ${d.xs.length} points, the API has ${apiX.length} rows`);
    d.xs.forEach((x, i) => {
      if (x !== apiX[i] || !close(d.ys[i], apiLoss[i])) fail(`point ${i} is (${x}, ${d.ys[i]}), the API's row (${apiX[i]}, ${apiLoss[i]})`);
    });
    checkAxis(d, y => y, 'linear y');
    await setControl(page, 'y-scale', 'log');
    [d] = await lossSeries(page, true);
    checkAxis(d, Math.log10, 'log y');
    const w = 0.6;
    await setControl(page, 'smoothing', String(w));
    const sm = await lossSeries(page, true);
    const raw = sm.find(s => s.name === 'loss raw'), smooth = sm.find(s => s.name === 'loss');
    if (sm.length !== 2 || !raw || !smooth) fail('smoothed, the chart draws ' + sm.map(s => s.name).join(', '));
    const want = emaOf(apiLoss, w);
    if (smooth.ys.length !== want.length) fail('the smoothed series has ' + smooth.ys.length + ' points');
    smooth.ys.forEach((y, i) => { if (!close(y, want[i])) fail(`smoothed point ${i} is ${y}, the EMA of the API's losses ${want[i]}`); });
    if (smooth.ys.every((y, i) => close(y, apiLoss[i]))) fail('smoothing changed nothing');
    raw.ys.forEach((y, i) => { if (!close(y, apiLoss[i])) fail('the raw series under the smoothed one is not the API\'s'); });
    checkAxis(smooth, Math.log10, 'smoothed, log y');
    await page.screenshot({ path: path.join(outDir, 'dashboard-job-page.png'), fullPage: true });

    // Overlay: two jobs on one chart after "Compare selected".
    await page.goto(base + '/#/jobs');
    await row(idB).waitFor({ timeout: 10000 });
    await row(idA).locator('input[type=checkbox]').check();
    await row(idB).locator('input[type=checkbox]').check();
    await page.click('#compare');
    await page.waitForSelector('#view-job:not([hidden]) canvas');
    const both = await waitFor('two series on the loss chart', async () => {
      const s = await lossSeries(page, false);
      return s.length === 2 && s.every(x => x.xs.length === 40) ? s : null;
    }, 10000);
    if (!both[0].name.includes('browser-a') || !both[1].name.includes('browser-b'))
      fail('the overlaid series are ' + both.map(s => s.name).join(', '));
    const lossB = (await get('/jobs/' + idB + '/metrics')).rows.map(r => r[lo]);
    const wNow = Number(await page.locator('#smoothing').inputValue());
    both[1].ys.forEach((y, i) => { if (!close(y, emaOf(lossB, wNow)[i])) fail(`job b's point ${i} is ${y}, not its API's`); });
    if (await page.locator('#legend a').count() !== 2) fail('the legend does not name both jobs');
    // A log axis labels round numbers (two significant digits at most), two or more on each chart:
    // the learning rate's 0.01 to 0.03 spans less than a decade.
    if (await page.locator('#y-scale').inputValue() !== 'log') fail('the y scale is no longer log');
    const ticks = await page.evaluate(() => [...document.querySelectorAll('#charts canvas')].map(c => c.__yTicks));
    ticks.forEach((t, k) => {
      if (t.length < 2 || t.some(v => !(v > 0) || Math.abs(Number(v.toPrecision(2)) - v) > 1e-9 * v))
        fail(`chart ${k}'s log axis labels ${t.join(', ')}`);
    });
    // Each label reads as its tick's value, without zeros that claim digits (1.00e-4); the data
    // wait's ticks are most likely under 1e-3; the last three are in the exponent form for sure.
    const tv = ticks.flat().concat([1e-4, 2e-5, 5e15]);
    const labels = await page.evaluate(t => t.map(v => window.chartFormat.num(v)), tv);
    labels.forEach((s, i) => {
      const v = tv[i];
      if (/\.\d*0(e|$)/.test(s) || Math.abs(parseShown(s) - v) > 1e-6 * v) fail(`the tick ${v} is labelled ${s}`);
    });
    await page.screenshot({ path: path.join(outDir, 'dashboard-compare.png'), fullPage: true });

    // A bad spec: the API's field and message next to the editor.
    const bad = { ...spec, name: 'browser-bad', batch_size: 0 };
    const apiErr = (await (await post('/jobs', bad)).json()).error;
    if (!apiErr || !apiErr.field) fail('the API gave no field for batch_size 0: ' + JSON.stringify(apiErr));
    await page.goto(base + '/#/submit');
    await page.fill('#spec-editor', JSON.stringify(bad, null, 2));
    expected = 400;
    await page.click('#submit-form button[type=submit]');
    const box = page.locator('#spec-errors');
    await box.waitFor({ state: 'visible', timeout: 10000 });
    expected = 0;
    const field = await box.locator('.field').innerText(), text = await box.innerText();
    const msg = apiErr.message.startsWith(apiErr.field + ': ') ? apiErr.message.slice(apiErr.field.length + 2) : apiErr.message;
    if (field !== apiErr.field || !text.includes(msg)) fail(`the editor's error reads ${JSON.stringify(text)}, the API's ${JSON.stringify(apiErr)}`);
    const eb = await page.locator('#spec-editor').boundingBox(), bb = await box.boundingBox();
    if (!(bb.y >= eb.y + eb.height - 1 && bb.y - (eb.y + eb.height) < 40)) fail('the error is not right under the editor');

    // Cancel: the running job ends cancelled, as the API tells.
    await page.goto(base + '/#/job/' + idLong);
    const cancel = page.locator('#job-actions [data-action=cancel]');
    await waitFor('Cancel to be enabled', async () => !(await cancel.isDisabled()), 10000);
    // Its live chart, unsmoothed: ascending iterations, the last one the API's row.
    await setControl(page, 'smoothing', '0');
    const live = await waitFor('the running job\'s chart', async () => {
      const s = await lossSeries(page, false);
      return s.length === 1 && s[0].xs.length >= 2 ? s[0] : null;
    }, 10000);
    if (!live.xs.every((x, i) => i === 0 || x > live.xs[i - 1])) fail('the live chart\'s iterations are not ascending');
    const x1 = live.xs[live.xs.length - 1];
    const at = await get(`/jobs/${idLong}/metrics?since=${x1}&limit=1`);
    if (!at.rows.length || at.rows[0][at.columns.indexOf('iteration')] !== x1 ||
        !close(at.rows[0][at.columns.indexOf('loss')], live.ys[live.ys.length - 1]))
      fail(`the live chart's last point (${x1}, ${live.ys[live.ys.length - 1]}) is not the API's row: ${JSON.stringify(at.rows[0])}`);
    await cancel.click();
    await waitState(idLong, 'cancelled', 20000);
    await page.locator('#job-summary .state-cancelled').waitFor({ timeout: 10000 });

    if (foreign.length) fail('requests left the daemon\'s origin:\n' + foreign.join('\n'));
    if (errors.length) fail('console errors:\n' + errors.join('\n'));
    console.log(`ok: the page (${weight.n} files) weighs ${weight.total} bytes gzipped; token asked for, a wrong one refused; ` +
                `list shows running and finished; 40 points as the API's, linear, log and EMA ${w}; ` +
                `two jobs overlaid; log ticks round; the field error ${apiErr.field} shown; a live chart; cancel; no foreign request, no console error`);
  } finally {
    await browser.close();
  }
}

main().catch(e => {
  if (!process.exitCode) { console.error('FAIL: ' + (e.stack || e)); process.exitCode = 1; }
}).finally(() => {
  if (daemon) daemon.kill('SIGTERM');
  fs.rmSync(dir, { recursive: true, force: true });
  fs.rmSync(state, { recursive: true, force: true });
});
