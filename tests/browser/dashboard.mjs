// dashboard.mjs — the dashboard in headless Chromium against a real traind with one finished job:
// the job list shows it, its page draws the loss chart, whose hover read-out is the API's loss,
// and the console stays free of errors (a policy violation is one).
// Needs Debian's chromium and playwright-core (scripts/deps installs both); without them it
// skips (exit 77) on a dev machine and fails under CI=true.
import { spawn, execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

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

async function main() {
  execFileSync(gen, ['--rows', '2000', '--partitions', '1', '--seed', '0', path.join(dir, 'dev')]);
  const log = fs.openSync(path.join(dir, 'log'), 'w');
  daemon = spawn(bin, ['--listen', '127.0.0.1:0', '--port-file', path.join(dir, 'port'), '--data-root', dir,
                       '--state-dir', state], { stdio: ['ignore', log, log] });
  const port = await waitFor('the port file', async () => fs.readFileSync(path.join(dir, 'port'), 'utf8').trim(), 30000);
  const base = `http://127.0.0.1:${port}`;
  const spec = {
    name: 'browser-baseline', data: { train: path.join(dir, 'dev', 'part*.csv') },
    model: { type: 'linear' }, loss: 'mse', optimizer: { type: 'sgd', lr: 0.03 }, clip_grad_norm: 0.5,
    batch_size: 64, iterations: 40, seed: 0,
  };
  const res = await fetch(base + '/jobs', { method: 'POST', headers: { 'Content-Type': 'application/json' },
                                            body: JSON.stringify(spec) });
  if (res.status !== 201) fail('POST /jobs: ' + res.status + ' ' + await res.text());
  const id = (await res.json()).id;
  await waitFor('the job to succeed', async () => {
    const j = await (await fetch(base + '/jobs/' + id)).json();
    if (j.state === 'failed' || j.state === 'cancelled') fail('the job ' + j.state + ': ' + JSON.stringify(j.error));
    return j.state === 'succeeded';
  }, 60000);

  const browser = await chromiumPw.launch({ executablePath: exe, headless: true, args: ['--no-sandbox'] });
  try {
    const page = await browser.newPage();
    const errors = [];
    page.on('console', m => { if (m.type() === 'error') errors.push(m.text()); });
    page.on('pageerror', e => errors.push(String(e)));
    page.on('response', r => { if (r.status() >= 400) errors.push(r.status() + ' ' + r.url()); });

    await page.goto(base + '/');
    const row = page.locator(`#jobs tr[data-job="${id}"]`);
    await row.waitFor({ timeout: 10000 });
    const cells = await row.locator('td').allInnerTexts();
    if (!cells[1].includes('browser-baseline')) fail('the row names ' + cells[1]);
    if (cells[2] !== 'succeeded') fail('the row says ' + cells[2]);
    if (!cells[3].includes('40 / 40')) fail('the row\'s progress is ' + cells[3]);

    await row.locator('a').click();
    await page.waitForSelector('#view-job:not([hidden]) canvas');
    // The loss chart is drawn once its rows are in: it has pixels of the first job's colour.
    const drawn = await waitFor('the loss chart', () => page.evaluate(() => {
      const c = document.querySelector('#charts canvas');
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      let blue = 0;
      for (let i = 0; i < d.length; i += 4) if (d[i] === 0x25 && d[i + 1] === 0x63 && d[i + 2] === 0xeb) blue++;
      return blue > 20 ? blue : 0;
    }), 10000);
    // The hover read-out, unsmoothed, against the API's own row at that iteration.
    await page.evaluate(() => {
      const r = document.getElementById('smoothing');
      r.value = '0';
      r.dispatchEvent(new Event('input'));
    });
    const box = await page.locator('#charts canvas').first().boundingBox();
    await page.mouse.move(box.x + box.width * 0.6, box.y + box.height / 2);
    const readout = await page.locator('#readout').innerText();
    const m = /^loss at iteration (\S+): loss: (\S+)$/.exec(readout);
    if (!m) fail('the read-out is ' + JSON.stringify(readout));
    const rows = (await (await fetch(base + '/jobs/' + id + '/metrics')).json());
    const it = rows.columns.indexOf('iteration'), lo = rows.columns.indexOf('loss');
    const apiRow = rows.rows.find(r => r[it] === Number(m[1]));
    if (!apiRow) fail('no metrics row at iteration ' + m[1]);
    if (Number(m[1]) < 10 || Number(m[1]) > 35) fail('60% across 40 iterations read iteration ' + m[1]);
    const shown = parseShown(m[2]);
    if (!(Math.abs(shown - apiRow[lo]) <= 5e-3 * Math.abs(apiRow[lo])))
      fail(`the read-out shows loss ${m[2]} at iteration ${m[1]}, the API ${apiRow[lo]}`);
    const spec2 = JSON.parse(await page.locator('#job-spec').innerText());
    if (spec2.iterations !== 40) fail('the spec shown has iterations ' + spec2.iterations);
    if (errors.length) fail('console errors:\n' + errors.join('\n'));
    console.log(`ok: the job list row, a loss chart of ${drawn} line pixels whose read-out (${readout}) is the API's, ` +
                'the spec, no console errors');
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
