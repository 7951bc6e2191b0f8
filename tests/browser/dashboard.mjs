// dashboard.mjs — the dashboard in headless Chromium against a real traind on loopback, started
// with --token-file, each part of the page held to what the API says: the token asked for (again
// after a wrong one), kept in the tab's session storage and sent as a bearer token; the list
// (running with an ETA, finished, filtered by state, pages of 50 read as the API pages them); a
// job's loss chart drawing the API's rows (read back from canvas.__series) against iteration and
// wall time, on linear and log axes with round ticks, EMA-smoothed as asked, a constant drawn flat;
// hover and arrow-key read-outs, drag to zoom every chart and double-click back; the checkpoint
// download (the API's bytes); clone and edit through the form; two jobs overlaid after "Compare
// selected"; a bad spec's field error under the editor and at the form's input; the replicas table
// with the replica a straggler warning names highlighted; pause, resume and cancel from the
// buttons, the live chart long-polling and ending on an API row; the CPU's memory bar; a failed
// job's error and spec; delete; a phone's width without sideways scrolling, and the dark scheme. No
// request may leave the daemon's origin and the console must stay free of errors. Screenshots
// (dashboard-*.png) go to $BROWSER_OUT_DIR. It also holds the page to a weight budget: every file /
// needs, gzipped as served, under 150 kB.
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
// The daemon runs a job that never ends: it must not outlive this script, however the script
// ends (an exception thrown in a callback, or meson's SIGTERM at its timeout).
process.on('exit', () => { if (daemon && daemon.exitCode === null) daemon.kill('SIGKILL'); });
process.on('SIGTERM', () => process.exit(1));

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

// ---- The steps, each on the one page, in order: t holds the ids, the spec and the page.

async function tokenFlow(t) {
  const { page } = t;
  await page.goto(base + '/');
  await page.locator('#token-form').waitFor({ state: 'visible', timeout: 10000 });
  if (await page.locator('#jobs tbody tr').count()) fail('jobs listed before the token was given');
  // A wrong token is refused, and the form asks again.
  await page.fill('#token', 'not-' + TOKEN);
  await page.click('#token-form button[type=submit]');
  await waitFor('the wrong token refused', async () =>
    (await page.locator('#status').innerText()) === 'the token was refused' && page.locator('#token-form').isVisible(), 10000);
  if (await page.locator('#jobs tbody tr').count()) fail('jobs listed with a wrong token');
  t.expected = 0;
  await page.fill('#token', TOKEN);
  await page.click('#token-form button[type=submit]');
  await t.row(t.idA).waitFor({ timeout: 10000 });
  if (await page.locator('#token-form').isVisible()) fail('the token form stays after the token was given');
  // Kept for the tab only, and sent as a bearer token.
  const kept = await page.evaluate(() => [sessionStorage.getItem('traind.token'), localStorage.length]);
  if (kept[0] !== TOKEN || kept[1] !== 0) fail('the token is kept as ' + JSON.stringify(kept));
  if (!t.bearer) fail('no API request carried the bearer token');
}

// The list: the long job running with an ETA, the short ones finished.
async function jobsList(t) {
  const cells = async id => t.row(id).locator('td').allInnerTexts();
  const a = await cells(t.idA);
  if (!a[1].includes('browser-a') || a[2] !== 'succeeded' || !a[3].includes('40 / 40'))
    fail('the finished job\'s row reads ' + JSON.stringify(a));
  const l = await waitFor('the running job\'s ETA', async () => {
    const c = await cells(t.idLong);
    return c[4] ? c : null;
  }, 10000);
  if (!l[1].includes('browser-long') || l[2] !== 'running') fail('the running job\'s row reads ' + JSON.stringify(l));
  const eta = (await get('/jobs/' + t.idLong)).progress.eta_s;
  if (!(eta > 0) || !/^(\d+d)?(\d+h)?(\d+m)?(\d+(\.\d+)?s)?$/.test(l[4])) fail(`the ETA cell reads ${l[4]}, the API's eta_s ${eta}`);
  await t.page.screenshot({ path: path.join(t.outDir, 'dashboard-jobs-list.png'), fullPage: true });
  // Filtered by state: the API's jobs in that state, and back.
  const ids = () => t.page.locator('#jobs tbody tr').evaluateAll(rs => rs.map(r => r.dataset.job).join());
  await t.page.selectOption('#state-filter', 'succeeded');
  const want = (await get('/jobs?state=succeeded')).jobs.map(j => j.id).join();
  await waitFor('the succeeded jobs only', async () => (await ids()) === want, 10000);
  await t.page.selectOption('#state-filter', '');
  await waitFor('every job again', async () => (await ids()).includes(t.idLong), 10000);
}

// A job's loss chart: one point per API row, on the axis the controls ask for; wall time on x.
async function lossChart(t) {
  const { page } = t;
  const metrics = await get('/jobs/' + t.idA + '/metrics');
  const col = n => metrics.rows.map(r => r[metrics.columns.indexOf(n)]);
  const apiX = col('iteration'), apiLoss = col('loss'), apiTime = col('time');
  if (apiLoss.length !== 40) fail('the API has ' + apiLoss.length + ' metrics rows for 40 iterations');
  await t.row(t.idA).locator('a').click();
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
  await setControl(page, 'x-axis', 'time');
  [d] = await lossSeries(page, true);
  d.xs.forEach((x, i) => {
    if (!close(x, apiTime[i] - apiTime[0])) fail(`on wall time, point ${i} is at ${x} s, the API's row ${apiTime[i] - apiTime[0]} s after the first`);
  });
  await setControl(page, 'x-axis', 'iteration');
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
  t.apiLoss = apiLoss;
  await page.screenshot({ path: path.join(t.outDir, 'dashboard-job-page.png'), fullPage: true });
}

// Hover and the keyboard read values out; a drag zooms every chart to one x range, a
// double-click zooms out.
async function readoutAndZoom(t) {
  const { page } = t;
  const canvas = page.locator('#charts canvas').first();
  const box = await canvas.boundingBox();
  await page.mouse.move(box.x + box.width * 0.5, box.y + box.height * 0.5);
  const hover = await page.locator('#readout').innerText();
  if (!/^loss at iteration \d+: loss: \S+/.test(hover)) fail('hovering the loss chart reads ' + JSON.stringify(hover));
  await page.mouse.move(box.x + box.width * 0.3, box.y + box.height * 0.5);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width * 0.5, box.y + box.height * 0.5, { steps: 5 });
  await page.mouse.move(box.x + box.width * 0.6, box.y + box.height * 0.5, { steps: 5 });
  await page.mouse.up();
  const ranges = await page.evaluate(() => [...document.querySelectorAll('#charts canvas')].map(c => {
    const s = (c.__series || []).find(d => !d.name.endsWith(' raw'));
    return s ? [s.xs[0], s.xs[s.xs.length - 1], s.xs.length] : null;
  }));
  const [first] = ranges;
  if (!first || first[2] >= 40 || first[2] < 3) fail('after a drag the loss chart draws ' + JSON.stringify(first));
  if (ranges.some(r => !r || r[0] !== first[0] || r[1] !== first[1])) fail('the charts zoomed to different ranges: ' + JSON.stringify(ranges));
  await canvas.dblclick({ position: { x: box.width * 0.5, y: box.height * 0.5 } });
  const [all] = await lossSeries(page, false);
  if (all.xs.length !== 40) fail('a double-click leaves ' + all.xs.length + ' of 40 points drawn');
  // The keyboard: a focused chart's arrow keys move the read-out.
  await page.mouse.move(0, 0);
  await canvas.focus();
  await page.keyboard.press('ArrowRight');
  await page.keyboard.press('ArrowRight');
  const key = await page.locator('#readout').innerText();
  if (!/^loss at iteration \d+:/.test(key)) fail('the arrow keys on a focused chart read ' + JSON.stringify(key));
}

// Download checkpoint saves the API's bytes; Clone and edit fills the editor and its form.
async function checkpointAndClone(t) {
  const { page } = t;
  const [dl] = await Promise.all([page.waitForEvent('download', { timeout: 10000 }),
                                  page.click('#job-actions [data-action=checkpoint]')]);
  const saved = fs.readFileSync(await dl.path());
  const res = await fetch(base + '/jobs/' + t.idA + '/checkpoint', { headers: auth });
  const want = Buffer.from(await res.arrayBuffer());
  if (!saved.equals(want)) fail(`the downloaded checkpoint (${saved.length} bytes) differs from the API's (${want.length})`);
  const named = /filename="([^"]+)"/.exec(res.headers.get('content-disposition') || '');
  if (!named || dl.suggestedFilename() !== named[1]) fail(`the checkpoint is saved as ${dl.suggestedFilename()}, the API names it ${named && named[1]}`);

  const specA = (await get('/jobs/' + t.idA)).spec;
  await page.click('#job-actions [data-action=clone]');
  await page.locator('#view-submit:not([hidden])').waitFor({ timeout: 10000 });
  const cloned = JSON.parse(await page.locator('#spec-editor').inputValue());
  const wantSpec = { ...specA, name: specA.name + '-clone' };
  delete wantSpec.client_id;
  if (JSON.stringify(cloned) !== JSON.stringify(wantSpec)) fail('the clone reads ' + JSON.stringify(cloned));
  const field = f => page.locator(`#spec-form [data-field="${f}"]`);
  if (await field('batch_size').inputValue() !== '64' || await field('data.train').inputValue() !== specA.data.train)
    fail('the form does not show the cloned spec');
  await field('iterations').fill('5');
  const edited = JSON.parse(await page.locator('#spec-editor').inputValue());
  if (edited.iterations !== 5) fail('the form\'s iterations left the JSON at ' + edited.iterations);
  await page.click('#submit-form button[type=submit]');
  await page.waitForURL(/#\/job\/[0-9a-f]{16}$/, { timeout: 10000 });
  const idC = page.url().split('/').pop();
  const got = await get('/jobs/' + idC);
  if (got.spec.name !== 'browser-a-clone' || got.spec.iterations !== 5 ||
      JSON.stringify({ ...got.spec, name: 0, iterations: 0 }) !== JSON.stringify({ ...specA, name: 0, iterations: 0 }))
    fail('the cloned job\'s spec is ' + JSON.stringify(got.spec));
}

// Overlay: two jobs on one chart after "Compare selected"; log ticks round and read back.
async function overlay(t) {
  const { page } = t;
  await page.goto(base + '/#/jobs');
  await t.row(t.idB).waitFor({ timeout: 10000 });
  await t.row(t.idA).locator('input[type=checkbox]').check();
  await t.row(t.idB).locator('input[type=checkbox]').check();
  // Job A's record held back past its metrics: its series, drawn first under its id, take its
  // name once it loads.
  await page.route(new RegExp('/jobs/' + t.idA + '$'), async r => {
    await new Promise(res => setTimeout(res, 1500));
    await r.continue();
  });
  await page.click('#compare');
  await page.waitForSelector('#view-job:not([hidden]) canvas');
  let both = await waitFor('two series on the loss chart', async () => {
    const s = await lossSeries(page, false);
    return s.length === 2 && s.every(x => x.xs.length === 40) ? s : null;
  }, 10000);
  const named = s => s.length === 2 && s[0].name.includes('browser-a') && s[1].name.includes('browser-b');
  for (const end = Date.now() + 10000; !named(both); await new Promise(r => setTimeout(r, 100))) {
    if (Date.now() > end) fail('the overlaid series are ' + both.map(s => s.name).join(', '));
    both = await lossSeries(page, false);
  }
  await page.unrouteAll({ behavior: 'wait' });
  const mB = await get('/jobs/' + t.idB + '/metrics');
  const lossB = mB.rows.map(r => r[mB.columns.indexOf('loss')]);
  const wNow = Number(await page.locator('#smoothing').inputValue());
  both[1].ys.forEach((y, i) => { if (!close(y, emaOf(lossB, wNow)[i])) fail(`job b's point ${i} is ${y}, not its API's`); });
  if (await page.locator('#legend a').count() !== 2) fail('the legend does not name both jobs');
  // A log axis labels round numbers (two significant digits at most), two or more on each chart:
  // the learning rate's 0.01 to 0.03 spans less than a decade.
  if (await page.locator('#y-scale').inputValue() !== 'log') fail('the y scale is no longer log');
  const ticks = await page.evaluate(() => [...document.querySelectorAll('#charts canvas')].map(c => c.__yTicks));
  ticks.forEach((tk, k) => {
    if (tk.length < 2 || tk.some(v => !(v > 0) || Math.abs(Number(v.toPrecision(2)) - v) > 1e-9 * v))
      fail(`chart ${k}'s log axis labels ${tk.join(', ')}`);
  });
  // Each label reads as its tick's value, without zeros that claim digits (1.00e-4); the data
  // wait's ticks are most likely under 1e-3; the last three are in the exponent form for sure.
  const tv = ticks.flat().concat([1e-4, 2e-5, 5e15]);
  const labels = await page.evaluate(v => v.map(x => window.chartFormat.num(x)), tv);
  labels.forEach((s, i) => {
    const v = tv[i];
    if (/\.\d*0(e|$)/.test(s) || Math.abs(parseShown(s) - v) > 1e-6 * v) fail(`the tick ${v} is labelled ${s}`);
  });
  await page.screenshot({ path: path.join(t.outDir, 'dashboard-compare.png'), fullPage: true });
}

// A bad spec: the API's field and message under the editor, and at the form's input for it.
async function badSpec(t) {
  const { page } = t;
  const bad = { ...t.spec, name: 'browser-bad', batch_size: 0 };
  const apiErr = (await (await post('/jobs', bad)).json()).error;
  if (!apiErr || apiErr.field !== 'batch_size') fail('the API gave no batch_size field for batch_size 0: ' + JSON.stringify(apiErr));
  await page.goto(base + '/#/submit');
  await page.fill('#spec-editor', JSON.stringify(bad, null, 2));
  t.expected = 400;
  await page.click('#submit-form button[type=submit]');
  const box = page.locator('#spec-errors');
  await box.waitFor({ state: 'visible', timeout: 10000 });
  t.expected = 0;
  const field = await box.locator('.field').innerText(), text = await box.innerText();
  const msg = apiErr.message.startsWith(apiErr.field + ': ') ? apiErr.message.slice(apiErr.field.length + 2) : apiErr.message;
  if (field !== apiErr.field || !text.includes(msg)) fail(`the editor's error reads ${JSON.stringify(text)}, the API's ${JSON.stringify(apiErr)}`);
  const eb = await page.locator('#spec-editor').boundingBox(), bb = await box.boundingBox();
  if (!(bb.y >= eb.y + eb.height - 1 && bb.y - (eb.y + eb.height) < 40)) fail('the error is not right under the editor');
  const input = page.locator('#spec-form [data-field="batch_size"]');
  const note = page.locator('#spec-form label:has([data-field="batch_size"]) .field-error');
  if (await input.getAttribute('aria-invalid') !== 'true' || await input.inputValue() !== '0') fail('the form\'s batch_size is not marked');
  if (!(await note.innerText()).includes(msg)) fail('the form\'s batch_size says ' + JSON.stringify(await note.innerText()));
  const others = await page.locator('#spec-form [aria-invalid=true]').count();
  if (others !== 1) fail(others + ' form fields are marked for one error');
  // The JSON's key is selected, for a field the form does not show.
  const sel = await page.evaluate(() => { const e = document.getElementById('spec-editor'); return e.value.slice(e.selectionStart, e.selectionEnd); });
  if (sel !== '"batch_size"') fail('the editor selects ' + JSON.stringify(sel) + ' for the error');
  await page.screenshot({ path: path.join(t.outDir, 'dashboard-submit-error.png'), fullPage: true });
}

// Replicas: the table while they run, a replica the job's warnings name as a straggler
// highlighted (the warning put into the job's record on its way to the page).
async function replicas(t) {
  const { page } = t;
  const idR = await submitJob({ ...t.spec, name: 'browser-replicas', iterations: 100000000, batch_size: 16,
                                device: 'cpu', replicas: 2 });
  await waitState(idR, 'running', 30000);
  const warning = { kind: 'straggler', replica: 1, message: 'replica 1 is a straggler: its median step is 3.0× the others\'' };
  const record = u => u.pathname === '/jobs/' + idR;
  await page.route(record, async route => {
    const res = await route.fetch();
    const j = await res.json();
    await route.fulfill({ response: res, json: { ...j, warnings: [warning] } });
  });
  await page.goto(base + '/#/job/' + idR);
  const rows = page.locator('#replicas tbody tr');
  await waitFor('the replicas table', async () => (await rows.count()) === 2, 15000);
  const api = await get('/jobs/' + idR + '/replicas');
  const ranks = await rows.evaluateAll(rs => rs.map(r => r.cells[0].textContent));
  if (ranks.join() !== api.replicas.map(r => String(r.rank)).join()) fail('the replicas table lists ranks ' + ranks);
  const marked = await page.locator('#replicas tbody tr.straggler').evaluateAll(rs => rs.map(r => r.dataset.rank));
  if (marked.join() !== '1') fail('the straggler rows are ' + JSON.stringify(marked) + ', the warning names replica 1');
  if (!(await page.locator('#job-warnings').innerText()).includes(warning.message)) fail('the job\'s warning is not shown');
  const devs = 'devices ' + api.replicas.map(r => r.device).join(', ');
  await waitFor('the replicas\' devices in the summary', async () => (await page.locator('#job-summary').innerText()).includes(devs), 10000);
  await page.screenshot({ path: path.join(t.outDir, 'dashboard-replicas.png'), fullPage: true });
  await page.unrouteAll({ behavior: 'wait' });   // a poll in the handler ends there first
  const res = await fetch(base + '/jobs/' + idR + '/cancel', { method: 'POST', headers: auth });
  if (res.status !== 202) fail('cancelling the replicas: ' + res.status + ' ' + await res.text());
  await waitState(idR, 'cancelled', 20000);
}

// Pause, resume and cancel from the buttons; the live chart ends on an API row.
async function controls(t) {
  const { page } = t;
  await page.goto(base + '/#/job/' + t.idLong);
  const button = a => page.locator(`#job-actions [data-action=${a}]`);
  await waitFor('Pause to be enabled', async () => !(await button('pause').isDisabled()), 10000);
  await button('pause').click();
  await waitState(t.idLong, 'paused', 20000);
  await waitFor('Resume to be enabled', async () => !(await button('resume').isDisabled()), 10000);
  await button('resume').click();
  await waitState(t.idLong, 'running', 20000);
  // Its live chart, unsmoothed: ascending iterations, the last one the API's row.
  await setControl(page, 'smoothing', '0');
  const live = await waitFor('the running job\'s chart', async () => {
    const s = await lossSeries(page, false);
    return s.length === 1 && s[0].xs.length >= 2 ? s[0] : null;
  }, 10000);
  if (!live.xs.every((x, i) => i === 0 || x > live.xs[i - 1])) fail('the live chart\'s iterations are not ascending');
  const x1 = live.xs[live.xs.length - 1];
  const at = await get(`/jobs/${t.idLong}/metrics?since=${x1}&limit=1`);
  if (!at.rows.length || at.rows[0][at.columns.indexOf('iteration')] !== x1 ||
      !close(at.rows[0][at.columns.indexOf('loss')], live.ys[live.ys.length - 1]))
    fail(`the live chart's last point (${x1}, ${live.ys[live.ys.length - 1]}) is not the API's row: ${JSON.stringify(at.rows[0])}`);
  await waitFor('Cancel to be enabled', async () => !(await button('cancel').isDisabled()), 10000);
  await button('cancel').click();
  await waitState(t.idLong, 'cancelled', 20000);
  await page.locator('#job-summary .state-cancelled').waitFor({ timeout: 10000 });
  // The live chart follows by long polls of new rows, thinned to max_points.
  const polls = t.requests.filter(u => u.pathname === `/jobs/${t.idLong}/metrics` && u.searchParams.get('wait') > 0);
  if (!polls.length || !polls.every(u => u.searchParams.get('max_points') && u.searchParams.has('since')))
    fail('the live chart did not long-poll with since, wait and max_points: ' + polls.map(String).join(' '));
}

// Devices: the CPU's memory bar at the API's share in use.
async function devices(t) {
  const { page } = t;
  await page.goto(base + '/#/devices');
  const barLabel = await page.locator('#devices .device .bar').first().getAttribute('aria-label', { timeout: 10000 });
  const d = await get('/devices');
  const used = 100 * (d.cpu.memory_total - d.cpu.memory_available) / d.cpu.memory_total;
  if (Math.abs(parseInt(barLabel, 10) - used) > 5) fail(`the CPU's memory bar reads ${barLabel}, the API ${used.toFixed(0)}% in use`);
  if (!(await page.locator('#devices').innerText()).includes(d.cpu.device)) fail('the devices page does not name the CPU');
}

// A failed job's page: its error as the API words it, and its spec as stored.
async function failedJob(t) {
  const { page } = t;
  const idF = await submitJob({ ...t.spec, name: 'browser-fails', data: { train: path.join(dir, 'nothing', 'part*.csv') } });
  const j = await waitFor('the job to fail', async () => {
    const x = await get('/jobs/' + idF);
    return x.state === 'failed' ? x : null;
  }, 30000);
  await page.goto(base + '/#/job/' + idF);
  const err = page.locator('#job-error');
  await err.waitFor({ state: 'visible', timeout: 10000 });
  if (await err.innerText() !== j.error.code + ': ' + j.error.message) fail('the error reads ' + JSON.stringify(await err.innerText()) + ', the API\'s ' + JSON.stringify(j.error));
  const shown = JSON.parse(await page.locator('#job-spec').innerText());
  if (JSON.stringify(shown) !== JSON.stringify(j.spec)) fail('the spec shown is not the API\'s: ' + JSON.stringify(shown));
}

// Delete from the job page (after the confirmation), then the list pages 50 jobs at a time.
async function deleteAndPages(t) {
  const { page } = t;
  page.once('dialog', dlg => dlg.accept());
  // Coming from the failed job, whose Delete was enabled: until job B has loaded (held back
  // here), its actions are off, so no click can act on a job the page does not show.
  const jobB = new RegExp('/jobs/' + t.idB + '$');
  await page.route(jobB, async r => {
    if (r.request().method() === 'GET') await new Promise(res => setTimeout(res, 1500));
    await r.continue();
  });
  await page.goto(base + '/#/job/' + t.idB);
  const del = page.locator('#job-actions [data-action=delete]');
  if (!(await del.isDisabled())) fail('Delete is enabled before the job it would delete has loaded');
  await waitFor('Delete to be enabled', async () => !(await del.isDisabled()), 10000);
  await page.unrouteAll({ behavior: 'wait' });
  await del.click();
  await page.waitForURL(/#\/jobs$/, { timeout: 10000 });
  const gone = await fetch(base + '/jobs/' + t.idB, { headers: auth });
  if (gone.status !== 404) fail('after Delete, GET /jobs/' + t.idB + ' is ' + gone.status);

  for (let i = 0; i < 50; i++) await submitJob({ ...t.spec, name: 'browser-page-' + i, iterations: 1 });
  const all = [];
  for (let after = null; ;) {
    const r = await get('/jobs?limit=100' + (after ? '&after=' + after : ''));
    all.push(...r.jobs.map(j => j.id));
    if (!(after = r.next_after)) break;
  }
  await page.goto(base + '/#/jobs');
  await page.reload();
  const ids = () => page.locator('#jobs tbody tr').evaluateAll(rs => rs.map(r => r.dataset.job));
  await waitFor('the first page of 50', async () => (await ids()).length === 50, 10000);
  if ((await ids()).join() !== all.slice(0, 50).join()) fail('the first page is not the API\'s 50 newest');
  await page.click('#page-next');
  await waitFor('the second page', async () => (await ids()).join() === all.slice(50).join(), 10000);
  if (!(await page.locator('#page-next').isDisabled()) || await page.locator('#page-prev').isDisabled())
    fail('on the last page, Older is enabled or Newer is not');
  await page.click('#page-prev');
  await waitFor('the first page again', async () => (await ids()).join() === all.slice(0, 50).join(), 10000);
}

// A phone's width: nothing wider than the screen but the tables' own scrolling; dark, when the
// system asks for it.
async function phoneAndDark(t) {
  const { page } = t;
  await page.setViewportSize({ width: 390, height: 844 });
  const views = [['#/jobs', '#jobs tbody tr'], ['#/job/' + t.idA, '#job-spec:not(:empty)'],
                 ['#/submit', '#spec-form'], ['#/devices', '#devices .device']];
  for (const [hash, shown] of views) {
    await page.goto(base + '/' + hash);
    await page.locator(shown).first().waitFor({ timeout: 10000 });
    const wide = await page.evaluate(() => document.documentElement.scrollWidth);
    if (wide > 390) fail(`on a 390 px screen, ${hash} is ${wide} px wide`);
  }
  await page.goto(base + '/#/job/' + t.idA);
  await page.locator('#charts canvas').first().waitFor();
  await setControl(page, 'y-scale', 'auto');
  await setControl(page, 'smoothing', '0.6');
  await waitFor('the lr chart', async () => page.evaluate(() =>
    (document.querySelectorAll('#charts canvas')[2].__series || []).some(d => d.name === 'lr' && d.xs.length === 40)), 10000);
  await page.screenshot({ path: path.join(t.outDir, 'dashboard-phone.png'), fullPage: true });
  // A constant lr, smoothed (equal but for rounding) on a linear axis, is drawn flat.
  const lr = await page.evaluate(() => {
    const c = document.querySelectorAll('#charts canvas')[2];
    return { log: c.__yTicks, s: (c.__series || []).find(d => d.name === 'lr') };
  });
  if (!lr.s || Math.max(...lr.s.py) - Math.min(...lr.s.py) > 1) fail('the constant lr is drawn from row ' + Math.min(...lr.s.py) + ' to ' + Math.max(...lr.s.py));
  await page.emulateMedia({ colorScheme: 'dark' });
  const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  const [r, g, b] = bg.match(/\d+/g).map(Number);
  if (r + g + b > 150) fail('with prefers-color-scheme: dark the page is ' + bg);
  // The charts draw again in the dark scheme's colours.
  const grids = () => page.evaluate(() => {
    const want = getComputedStyle(document.documentElement).getPropertyValue('--grid').trim();
    return [...document.querySelectorAll('#charts canvas')].map(c => c.__grid === want);
  });
  // The media query's change event comes when it comes: wait for it, then the charts must agree.
  await page.waitForFunction(() => matchMedia('(prefers-color-scheme: dark)').matches);
  await waitFor('the charts to draw again in the dark scheme\'s grid colour', async () => (await grids()).every(Boolean), 5000);
  await page.screenshot({ path: path.join(t.outDir, 'dashboard-phone-dark.png'), fullPage: true });
}

async function main() {
  const outDir = process.env.BROWSER_OUT_DIR || dir;
  execFileSync(gen, ['--rows', '2000', '--partitions', '1', '--seed', '0', path.join(dir, 'dev')]);
  fs.writeFileSync(path.join(dir, 'token'), TOKEN + '\n', { mode: 0o600 });
  const log = fs.openSync(path.join(dir, 'log'), 'w');
  // Three CPU workers: the long job and a job of two replicas at once.
  daemon = spawn(bin, ['--listen', '127.0.0.1:0', '--port-file', path.join(dir, 'port'), '--data-root', dir,
                       '--state-dir', state, '--token-file', path.join(dir, 'token'), '--gpus', 'none',
                       '--cpu-workers', '3'],
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
    const page = await browser.newPage({ viewport: { width: 1200, height: 900 }, acceptDownloads: true });
    // The one error status a step expects (401 before the token, 400 for the bad spec):
    // the browser logs each such response as a console error too.
    const t = { page, outDir, spec, idA, idB, idLong, expected: 401, requests: [],
                row: id => page.locator(`#jobs tr[data-job="${id}"]`) };
    const errors = [], foreign = [];
    page.on('console', m => {
      if (m.type() === 'error' && !m.text().includes(`status of ${t.expected} `)) errors.push(m.text());
    });
    page.on('pageerror', e => errors.push(String(e)));
    page.on('response', r => {
      if (r.status() >= 400 && r.status() !== t.expected) errors.push(r.status() + ' ' + r.url());
    });
    page.on('request', r => {
      const u = new URL(r.url());
      if (u.protocol !== 'data:' && u.origin !== base) foreign.push(r.url());
      else t.requests.push(u);
      if (r.headers().authorization === 'Bearer ' + TOKEN && u.pathname === '/jobs') t.bearer = true;
    });
    for (const step of [tokenFlow, jobsList, lossChart, readoutAndZoom, checkpointAndClone, overlay, badSpec,
                        replicas, controls, devices, failedJob, deleteAndPages, phoneAndDark])
      await step(t);
    if (foreign.length) fail('requests left the daemon\'s origin:\n' + foreign.join('\n'));
    if (errors.length) fail('console errors:\n' + errors.join('\n'));
    console.log(`ok: the page (${weight.n} files) weighs ${weight.total} bytes gzipped; token asked for, a wrong one refused; ` +
                `list shows running (with an ETA) and finished; 40 points as the API's, on iterations and wall time, ` +
                `linear, log and EMA; hover, keys and zoom; checkpoint download; clone and edit; two jobs overlaid; ` +
                `log ticks round; the field error at the editor and the form's field; replicas with the straggler marked; ` +
                `pause, resume, cancel and long polls; device memory; a failed job's error; delete; pages of 50; a phone's width; dark; ` +
                `no foreign request, no console error`);
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
