// app.js — the dashboard: jobs, a job's live charts, submit and control, devices, all over the JSON API.
'use strict';

const $ = id => document.getElementById(id);
const fmt = window.chartFormat;
const PALETTE = ['#2563eb', '#e8590c', '#12b886', '#ae3ec9', '#f59f00', '#0ca678', '#e64980', '#495057'];
const TERMINAL = new Set(['succeeded', 'failed', 'cancelled', 'unreadable_spec']);
const PAGE = 50;
const INITIAL_POINTS = 2000;   // max_points of the first metrics page: a long history draws fast
const WAIT_S = 20;             // long poll for new rows
const MAX_HELD = 4 * INITIAL_POINTS;   // past this many points a series is read again, thinned

// Every view's timers and requests hang off one generation; leaving the view ends them.
let gen = { alive: true, ctl: new AbortController() };
function newGeneration() {
  gen.alive = false;
  gen.ctl.abort();
  gen = { alive: true, ctl: new AbortController() };
  return gen;
}

class ApiError extends Error {
  constructor(status, body) {
    const e = (body && body.error) || {};
    super(e.message || ('HTTP ' + status));
    this.status = status;
    this.code = e.code;
    this.field = e.field;
    this.line = e.line;
    this.column = e.column;
  }
}

function token() { return sessionStorage.getItem('traind.token') || ''; }

async function api(path, opts) {
  opts = opts || {};
  const headers = {};
  if (token()) headers.Authorization = 'Bearer ' + token();
  if (opts.json !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(path, {
    method: opts.method || 'GET',
    headers,
    body: opts.json !== undefined ? opts.json : undefined,
    signal: opts.signal,
  });
  if (res.status === 401) {
    $('token-form').hidden = false;
    $('token').focus();
    throw new ApiError(401, { error: { message: token() ? 'the token was refused' : 'this traind needs a token' } });
  }
  if (opts.raw) {
    if (!res.ok) throw new ApiError(res.status, await res.json().catch(() => null));
    return res;
  }
  const body = await res.json().catch(() => null);
  if (!res.ok) throw new ApiError(res.status, body);
  return body;
}

function say(msg, bad) {
  $('status').textContent = msg || '';
  $('status').className = bad ? 'error' : 'muted';
}

function failed(e) {
  if (e.name !== 'AbortError') say(e.message, true);
}

function el(tag, attrs, ...kids) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') n.className = v;
    else if (k === 'text') n.textContent = v;
    else if (k.startsWith('on')) n.addEventListener(k.slice(2), v);
    else n.setAttribute(k, v);
  }
  for (const kid of kids) n.append(kid);
  return n;
}

function bar(fraction, under, wide) {
  const b = el('span', { class: 'bar' + (wide ? ' wide' : ''), role: 'img',
                          'aria-label': Math.round((fraction || 0) * 100) + '%' });
  if (under !== undefined) b.append(el('span', { class: 'under' }));
  b.append(el('span'));
  // Widths through the CSSOM: the style-src policy refuses style attributes in markup.
  if (under !== undefined) b.children[0].style.width = (100 * Math.min(1, under || 0)) + '%';
  b.lastChild.style.width = (100 * Math.min(1, fraction || 0)) + '%';
  return b;
}

function bytes(n) {
  if (n === null || n === undefined) return '—';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + ' ' + u[i];
}

function jobLabel(j) { return (j.name || j.id) + (j.name ? ' (' + j.id.slice(0, 8) + ')' : ''); }

function eta(j) {
  if (j.progress && j.progress.eta_s !== null && j.progress.eta_s !== undefined) return j.progress.eta_s;
  // Not running at pace yet: the last step's time for each iteration left.
  const m = j.metrics, p = j.progress;
  if (j.state !== 'running' || !m || !p || !p.iterations) return null;
  const per = (m.seconds_per_iteration || 0) + (m.data_wait_seconds || 0);
  return per > 0 ? (p.iterations - p.iteration) * per : null;
}

// ---- Jobs list ----

const list = { after: [], next: null, selected: new Set() };

function showJobs(g) {
  const state = $('state-filter').value;
  let q = '/jobs?limit=' + PAGE + (state ? '&state=' + state : '');
  const after = list.after[list.after.length - 1];
  if (after) q += '&after=' + encodeURIComponent(after);
  api(q, { signal: g.ctl.signal }).then(r => {
    if (!g.alive) return;
    say('');
    list.next = r.next_after;
    renderJobs(r.jobs);
  }).catch(failed).finally(() => { if (g.alive) setTimeout(() => showJobs(g), 3000); });
}

function renderJobs(jobs) {
  const tb = $('jobs').tBodies[0];
  // The rows are rebuilt every refresh: keep the keyboard's place in them.
  const f = document.activeElement, frow = f && tb.contains(f) ? f.closest('tr').dataset.job : null;
  const fsel = f && f.tagName === 'INPUT' ? 'input' : 'a';
  tb.replaceChildren(...jobs.map(j => {
    const p = j.progress || {}, m = j.metrics || {};
    const box = el('input', { type: 'checkbox', 'aria-label': 'compare ' + jobLabel(j) });
    box.checked = list.selected.has(j.id);
    box.addEventListener('change', () => {
      if (box.checked) list.selected.add(j.id); else list.selected.delete(j.id);
      $('compare').disabled = list.selected.size < 1;
    });
    const frac = p.fraction !== null && p.fraction !== undefined ? p.fraction : null;
    return el('tr', { 'data-job': j.id },
      el('td', {}, box),
      el('td', {}, el('a', { href: '#/job/' + j.id, text: jobLabel(j) })),
      el('td', { class: 'state state-' + j.state, text: j.state }),
      el('td', {}, bar(frac), ' ', el('span', { class: 'muted',
        text: (p.iteration || 0) + (p.iterations ? ' / ' + p.iterations : '') })),
      el('td', { text: eta(j) === null ? '' : fmt.duration(eta(j)) }),
      el('td', { text: j.device || '' }),
      el('td', { class: 'num', text: m.loss === undefined ? '' : fmt.num(m.loss) }),
      el('td', { class: 'num', text: m.samples_per_second === undefined ? '' : fmt.num(m.samples_per_second) }),
      el('td', { class: 'muted', text: (j.created_at || '').replace('T', ' ').slice(0, 19) }));
  }));
  if (frow) {
    const again = tb.querySelector(`tr[data-job="${frow}"] ${fsel}`);
    if (again) again.focus();
  }
  $('jobs-empty').hidden = jobs.length > 0;
  $('page-prev').disabled = list.after.length === 0;
  $('page-next').disabled = !list.next;
  $('compare').disabled = list.selected.size < 1;
}

// ---- One job (and others overlaid) ----

const CHARTS = [
  { title: 'loss', cols: ['loss', 'eval_loss'], log: true },   // log unless linear is chosen
  { title: 'grad_norm', cols: ['grad_norm'] },
  { title: 'learning rate', cols: ['lr'] },
  { title: 'samples/s', cols: ['samples_per_second'] },
  { title: 'data wait (s)', cols: ['data_wait_seconds'] },
];

const view = { ids: [], jobs: {}, series: {}, charts: [], zoom: null };

// A job's metrics as columns: arrays of numbers (NaN for null), appended to as rows arrive.
function addRows(s, page) {
  if (!s.cols) {
    s.cols = {};
    for (const c of page.columns) s.cols[c] = [];
  }
  const idx = page.columns.map(c => s.cols[c]);
  for (const row of page.rows) {
    for (let k = 0; k < row.length; k++) if (idx[k]) idx[k].push(row[k] === null ? NaN : row[k]);
  }
  s.next = page.next_since;
}

// TensorBoard's smoothing: an EMA, debiased so the start is not pulled towards 0.
function ema(ys, w) {
  if (!(w > 0)) return ys;
  const out = new Array(ys.length);
  let last = 0, n = 0;
  for (let i = 0; i < ys.length; i++) {
    const y = ys[i];
    if (!isFinite(y)) { out[i] = NaN; continue; }
    last = last * w + (1 - w) * y;
    n++;
    out[i] = last / (1 - Math.pow(w, n));
  }
  return out;
}

function xsOf(s) {
  if ($('x-axis').value === 'iteration') return s.cols.iteration;
  const t = s.cols.time, t0 = t.length ? t[0] : 0;
  return t.map(v => v - t0);   // seconds since the job's first step, so jobs line up
}

function redraw() {
  const w = +$('smoothing').value;
  $('smoothing-out').textContent = w.toFixed(2);
  const scale = $('y-scale').value;
  view.charts.forEach((ch, k) => {
    const spec = CHARTS[k], series = [];
    view.ids.forEach((id, n) => {
      const s = view.series[id];
      if (!s || !s.cols) return;
      const color = PALETTE[n % PALETTE.length], xs = xsOf(s);
      const who = view.ids.length > 1 ? jobLabel(view.jobs[id] || { id }) + ' ' : '';
      for (const col of spec.cols) {
        const ys = s.cols[col];
        if (!ys) continue;
        if (col === 'eval_loss') {   // sparse: only the rows that evaluated
          const ex = [], ey = [];
          ys.forEach((y, i) => { if (isFinite(y)) { ex.push(xs[i]); ey.push(y); } });
          if (ex.length) series.push({ name: who + 'eval_loss', color, xs: ex, ys: ey, dashed: true });
          continue;
        }
        if (w > 0) series.push({ name: who + col + ' raw', color, xs, ys, faint: true });
        series.push({ name: who + col, color, xs, ys: ema(ys, w) });
      }
    });
    ch.chart.log = scale === 'log' || (scale === 'auto' && !!spec.log);
    ch.chart.zoom = view.zoom;
    ch.chart.setSeries(series);
  });
}

function buildCharts() {
  const xFormat = v => $('x-axis').value === 'time' ? fmt.duration(v) : fmt.num(v);
  view.charts = CHARTS.map(spec => {
    const canvas = el('canvas', { role: 'img', tabindex: '0',
                                  'aria-label': spec.title + ' chart: left and right arrows read the values' });
    const box = el('div', { class: 'chart' }, el('h3', { text: spec.title }), canvas);
    const chart = new window.LineChart(canvas, {
      xFormat,
      onZoom: range => { view.zoom = range; redraw(); },   // every chart shows the same x range
      onHover: lines => {
        $('readout').textContent = lines ? spec.title + ' at ' + $('x-axis').value + ' ' + lines[0] + ': ' +
                                           lines.slice(1).join(' · ') : '';
      },
    });
    return { box, chart };
  });
  $('charts').replaceChildren(...view.charts.map(c => c.box));
}

function renderLegend() {
  $('legend').replaceChildren(...(view.ids.length > 1 ? view.ids.map((id, n) => {
    const sw = el('span', { class: 'swatch' });
    sw.style.background = PALETTE[n % PALETTE.length];
    const j = view.jobs[id] || { id };
    return el('span', {}, sw, el('a', { href: '#/job/' + id, text: jobLabel(j) }),
              ' ', el('span', { class: 'state state-' + j.state, text: j.state || '' }));
  }) : []));
}

function renderJob(j, reps) {
  $('job-title').textContent = jobLabel(j);
  const p = j.progress || {}, m = j.metrics || {};
  // A job running as replicas: each replica's device (the job's is replica 0's).
  const devs = ((reps && reps.replicas) || []).map(r => r.device).filter(Boolean);
  const bits = [j.state, devs.length > 1 ? 'devices ' + devs.join(', ') : 'device ' + (j.device || '—'),
    'iteration ' + (p.iteration || 0) + (p.iterations ? ' of ' + p.iterations : '')];
  if (eta(j) !== null) bits.push('ETA ' + fmt.duration(eta(j)));
  if (m.loss !== undefined) bits.push('loss ' + fmt.num(m.loss));
  if (m.eval_loss !== undefined && m.eval_loss !== null) bits.push('eval_loss ' + fmt.num(m.eval_loss));
  $('job-summary').replaceChildren(el('span', { class: 'state state-' + j.state, text: bits[0] }),
                                   ' · ' + bits.slice(1).join(' · '));
  const err = $('job-error');
  err.hidden = !j.error;
  err.textContent = j.error ? j.error.code + ': ' + j.error.message : '';
  const warns = (j.warnings || []).map(warningText);
  $('job-warnings').hidden = !warns.length;
  $('job-warnings').textContent = warns.join('\n');
  $('job-spec').textContent = JSON.stringify(j.spec, null, 2);
  const act = $('job-actions').querySelector.bind($('job-actions'));
  act('[data-action=pause]').disabled = !(j.state === 'queued' || j.state === 'running');
  act('[data-action=resume]').disabled = j.state !== 'paused';
  act('[data-action=cancel]').disabled = TERMINAL.has(j.state);
  act('[data-action=delete]').disabled = !TERMINAL.has(j.state);
  act('[data-action=checkpoint]').disabled = !j.checkpoint;
  act('[data-action=clone]').disabled = false;
}

// The job's straggler warnings ({kind: "straggler", replica: rank, ...}), by rank.
function stragglers(j) {
  const out = new Map();
  for (const w of (j && j.warnings) || []) {
    if (w && w.kind === 'straggler' && w.replica !== undefined) out.set(w.replica, w);
  }
  return out;
}

function warningText(w) {
  return w.message || (w.kind + (w.replica !== undefined ? ': replica ' + w.replica : ''));
}

function renderReplicas(r, j) {
  const reps = (r && r.replicas) || [];
  $('replicas-box').hidden = reps.length < 2;
  if (reps.length < 2) return;
  const med = a => { const s = a.slice().sort((x, y) => x - y); const k = s.length >> 1; return s.length % 2 ? s[k] : (s[k - 1] + s[k]) / 2; };
  const medians = reps.map(x => (x.step_seconds || {}).median).filter(v => typeof v === 'number');
  const mom = medians.length ? med(medians) : null;
  // The daemon names stragglers in the job's warnings; a daemon without warnings, by the medians.
  const named = stragglers(j), judged = j && Array.isArray(j.warnings);
  $('replicas').tBodies[0].replaceChildren(...reps.map(x => {
    const st = x.step_seconds || {};
    const w = named.get(x.rank);
    const slow = w !== undefined || (!judged && mom !== null && typeof st.median === 'number' && st.median > 1.5 * mom);
    const why = w ? warningText(w) : 'straggler: median step over 1.5× the median of medians';
    return el('tr', slow ? { class: 'hi straggler', title: why, 'data-rank': x.rank } : { 'data-rank': x.rank },
      el('td', { text: x.rank }), el('td', { text: x.host || '' }), el('td', { text: x.device || '' }),
      el('td', { class: 'num', text: x.iterations }),
      el('td', { class: 'num', text: fmt.num(st.median) + (slow ? ' ⚠' : '') }),
      el('td', { class: 'num', text: fmt.num(st.last) }),
      el('td', { class: 'num', text: fmt.num(x.data_wait_seconds) }),
      el('td', { class: 'num', text: fmt.num(x.allreduce_seconds) }));
  }));
}

// A job's record, as loaded: the legend and, when jobs are compared, the charts' series are
// named by it (until it loads, by the job's id).
function learnJob(id, j) {
  const had = view.jobs[id];
  view.jobs[id] = j;
  renderLegend();
  if (view.ids.length > 1 && (!had || jobLabel(had) !== jobLabel(j))) redraw();
}

// Follows a job's metrics: a thinned whole history first, then every new row by long polls.
async function follow(g, id) {
  const s = view.series[id] = { cols: null, next: 0 };
  try {
    const whole = () => api('/jobs/' + id + '/metrics?max_points=' + INITIAL_POINTS, { signal: g.ctl.signal });
    addRows(s, await whole());
    if (g.alive) redraw();
    while (g.alive) {
      const j = view.jobs[id];
      // max_points here too: however far a fast job ran ahead, one answer catches up, thinned.
      const page = await api('/jobs/' + id + '/metrics?since=' + s.next + '&wait=' + WAIT_S +
                             '&max_points=' + INITIAL_POINTS, { signal: g.ctl.signal });
      if (!g.alive) return;
      if (page.rows.length) {
        addRows(s, page);
        if (s.cols.iteration.length > MAX_HELD) {   // a long live run: start again from a thinned whole
          s.cols = null;
          addRows(s, await whole());
        }
        redraw();
        await new Promise(r => setTimeout(r, 1000));   // at most a redraw a second
      } else if (!j || !TERMINAL.has(j.state)) {
        // Nothing new: the wait ran out, or the job ended; ask which before polling again.
        const now = await api('/jobs/' + id, { signal: g.ctl.signal });
        if (!g.alive) return;
        learnJob(id, now);
      } else {
        return;
      }
    }
  } catch (e) { failed(e); }
}

async function pollJob(g, id, main) {
  while (g.alive) {
    try {
      const j = await api('/jobs/' + id, { signal: g.ctl.signal });
      if (!g.alive) return;
      learnJob(id, j);
      if (main) {
        const reps = j.spec && j.spec.replicas > 1 || $('replicas-box').hidden === false ?
          await api('/jobs/' + id + '/replicas', { signal: g.ctl.signal }).catch(() => null) : null;
        if (!g.alive) return;
        renderJob(j, reps);
        renderReplicas(reps, j);
      }
      if (TERMINAL.has(j.state)) return;
    } catch (e) { failed(e); }
    await new Promise(r => setTimeout(r, 3000));
  }
}

function showJob(g, ids) {
  view.ids = ids;
  view.jobs = {};
  view.series = {};
  view.zoom = null;
  $('replicas-box').hidden = true;
  $('job-error').hidden = true;
  $('job-warnings').hidden = true;
  $('job-spec').textContent = '';
  // The previous job's actions must not act on this one before it has loaded.
  for (const b of $('job-actions').querySelectorAll('[data-action]')) b.disabled = true;
  buildCharts();
  ids.forEach((id, n) => { pollJob(g, id, n === 0); follow(g, id); });
}

async function jobAction(action) {
  const id = view.ids[0], j = view.jobs[id];
  if (!id || !j) return;
  try {
    if (action === 'clone') {
      const spec = Object.assign({}, j.spec);
      delete spec.client_id;   // the same client_id would return this job, not a new one
      if (spec.name) spec.name += '-clone';
      $('spec-editor').value = JSON.stringify(spec, null, 2);
      location.hash = '#/submit?keep';
      return;
    }
    if (action === 'checkpoint') {
      // Through fetch, so the token goes with it; then saved from memory.
      const res = await api('/jobs/' + id + '/checkpoint', { raw: true });
      const named = /filename="([^"]+)"/.exec(res.headers.get('Content-Disposition') || '');
      const url = URL.createObjectURL(await res.blob());
      const a = el('a', { href: url, download: named ? named[1] : id + '.safetensors' });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
      return;
    }
    if (action === 'delete') {
      if (!confirm('Delete job ' + jobLabel(j) + ', its metrics and checkpoints?')) return;
      await api('/jobs/' + id, { method: 'DELETE' });
      location.hash = '#/jobs';
      return;
    }
    renderJob(await api('/jobs/' + id + '/' + action, { method: 'POST' }));
    say(jobLabel(j) + ': ' + action + ' asked');
  } catch (e) { failed(e); }
}

// ---- Submit ----

// The form's fields edit the JSON in the editor, and follow it when it is edited.
const formFields = () => [...document.querySelectorAll('#spec-form [data-field]')];

function getPath(o, path) {
  return path.split('.').reduce((v, k) => (v && typeof v === 'object' ? v[k] : undefined), o);
}

function setPath(o, path, v) {
  const ks = path.split('.');
  let cur = o;
  for (const k of ks.slice(0, -1)) {
    if (!cur[k] || typeof cur[k] !== 'object') cur[k] = {};
    cur = cur[k];
  }
  if (v === undefined) delete cur[ks[ks.length - 1]]; else cur[ks[ks.length - 1]] = v;
}

function formValue(f) {
  const s = f.value.trim();
  if (s === '') return undefined;
  if (f.type === 'number') return Number(s);
  if (f.dataset.field === 'device' && s.startsWith('[')) {
    try { return JSON.parse(s); } catch { return s; }
  }
  return s;
}

function fillForm() {
  let spec;
  try { spec = JSON.parse($('spec-editor').value); } catch { return; }
  for (const f of formFields()) {
    const v = getPath(spec, f.dataset.field);
    f.value = v === undefined || v === null ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v);
  }
}

function formEdited(ev) {
  const f = ev.target.closest('[data-field]');
  if (!f) return;
  let spec;
  try { spec = JSON.parse($('spec-editor').value || '{}'); } catch {
    showSpecError({ message: 'the JSON below does not parse, so the form cannot edit it' });
    return;
  }
  setPath(spec, f.dataset.field, formValue(f));
  $('spec-editor').value = JSON.stringify(spec, null, 2);
}

function clearSpecErrors() {
  $('spec-errors').hidden = true;
  for (const f of formFields()) {
    f.removeAttribute('aria-invalid');
    const note = f.parentNode.querySelector('.field-error');
    if (note) note.remove();
  }
}

// The API's error at its field: next to the form's input for it, and selected in the JSON.
function markField(e) {
  const f = formFields().find(x => e.field === x.dataset.field || e.field.startsWith(x.dataset.field + '['));
  if (f) {
    f.setAttribute('aria-invalid', 'true');
    const note = el('span', { class: 'field-error', role: 'alert', text: e.message });
    f.after(note);
    f.setAttribute('aria-describedby', 'spec-errors');
    f.focus();
  }
  const key = e.field.replace(/\[\d+\]$/, '').split('.').pop();
  const ed = $('spec-editor'), at = ed.value.lastIndexOf('"' + key + '"');
  if (at >= 0) {
    ed.setSelectionRange(at, at + key.length + 2);
    if (!f) ed.focus();
  }
}

function showSpecError(e) {
  const box = $('spec-errors');
  box.hidden = false;
  box.replaceChildren();
  if (e.field) markField(e);
  let msg = e.message;
  if (e.field) {
    box.append(el('span', { class: 'field', text: e.field }), ': ');
    if (msg.startsWith(e.field + ': ')) msg = msg.slice(e.field.length + 2);
  }
  box.append(msg);
  if (e.line) box.append(' (line ' + e.line + (e.column ? ', column ' + e.column : '') + ')');
}

async function submit(ev) {
  ev.preventDefault();
  clearSpecErrors();
  const text = $('spec-editor').value;
  try {
    JSON.parse(text);
  } catch (e) {
    showSpecError({ message: 'not JSON: ' + e.message });
    return;
  }
  try {
    const j = await api('/jobs', { method: 'POST', json: text });
    say('submitted ' + jobLabel(j));
    location.hash = '#/job/' + j.id;
  } catch (e) {
    if (e.status === 401) return failed(e);
    showSpecError(e);
  }
}

const EXAMPLE = {
  name: 'dc-taxi-baseline',
  data: { train: '/srv/data/dc-taxi/csv/dev/part*.csv' },
  model: { type: 'linear' }, loss: 'mse',
  optimizer: { type: 'sgd', lr: 0.03 }, clip_grad_norm: 0.5,
  batch_size: 1048576, iterations: 50,
};

// ---- Devices ----

function renderDevices(d) {
  const out = [];
  const c = d.cpu;
  if (c) {
    const used = c.memory_total ? (c.memory_total - c.memory_available) / c.memory_total : 0;
    out.push(el('div', { class: 'device' },
      el('h3', { text: c.device + (c.rank !== undefined ? ' (rank ' + c.rank + (c.host ? ', ' + c.host : '') + ')' : '') }),
      el('p', { text: (c.model || '') + (c.cores ? ', ' + c.cores + ' cores' : '') }),
      el('p', {}, bar(used, undefined, true), ' ', bytes(c.memory_total - c.memory_available) + ' of ' + bytes(c.memory_total) + ' in use'),
      el('p', { class: 'muted', text: 'jobs: ' + ((c.jobs || []).join(', ') || 'none') })));
  }
  for (const gpu of d.gpus || []) {
    const t = gpu.memory_total || 0;
    const alloc = t ? (gpu.memory_allocated || 0) / t : 0, res = t ? (gpu.memory_reserved || 0) / t : 0;
    out.push(el('div', { class: 'device' },
      el('h3', { text: gpu.device + ' — ' + gpu.name + (gpu.host ? ' on ' + gpu.host : '') }),
      el('p', { class: 'muted', text: 'compute ' + gpu.compute_capability + ', ' + gpu.sm_count + ' SMs, PCI ' + gpu.pci_bus_id +
                                      (gpu.used === false ? ', not used (--gpus)' : '') }),
      el('p', {}, bar(alloc, res, true), ' allocated ' + bytes(gpu.memory_allocated) + ', reserved ' +
         bytes(gpu.memory_reserved) + ' of ' + bytes(t)),
      el('p', {}, 'job: ', gpu.job ? el('a', { href: '#/job/' + gpu.job, text: gpu.job }) : 'none'),
      gpu.error ? el('p', { class: 'error', text: gpu.error }) : ''));
  }
  if (d.gpu_unavailable) out.push(el('p', { class: 'muted', text: 'No GPU: ' + d.gpu_unavailable }));
  $('devices').replaceChildren(...out);
}

function showDevices(g) {
  api('/devices', { signal: g.ctl.signal }).then(d => { if (g.alive) { say(''); renderDevices(d); } })
    .catch(failed).finally(() => { if (g.alive) setTimeout(() => showDevices(g), 5000); });
}

// ---- Routing: #/jobs, #/job/ID[,ID...], #/submit, #/devices ----

function route() {
  const g = newGeneration();
  const h = location.hash.replace(/^#\/?/, '');
  const [name, arg] = h.split('/');
  for (const v of ['jobs', 'job', 'submit', 'devices']) $('view-' + v).hidden = true;
  say('');
  if (name === 'job' && arg) {
    $('view-job').hidden = false;
    showJob(g, arg.split(',').filter(Boolean));
  } else if (name.startsWith('submit')) {
    $('view-submit').hidden = false;
    if (!name.includes('keep') && !$('spec-editor').value) $('spec-editor').value = JSON.stringify(EXAMPLE, null, 2);
    clearSpecErrors();
    fillForm();
    $('spec-editor').focus();
  } else if (name === 'devices') {
    $('view-devices').hidden = false;
    showDevices(g);
  } else {
    $('view-jobs').hidden = false;
    showJobs(g);
  }
}

function showVersion() {
  api('/version').then(v => { $('version').textContent = 'v' + v.version + (v.cuda ? ' · CUDA ' + v.cuda : ''); })
    .catch(() => {});
}

function init() {
  $('token-form').addEventListener('submit', ev => {
    ev.preventDefault();
    sessionStorage.setItem('traind.token', $('token').value.trim());
    $('token').value = '';
    $('token-form').hidden = true;
    showVersion();
    route();
  });
  $('state-filter').addEventListener('change', () => { list.after = []; route(); });
  $('page-next').addEventListener('click', () => { list.after.push(list.next); route(); });
  $('page-prev').addEventListener('click', () => { list.after.pop(); route(); });
  $('compare').addEventListener('click', () => { location.hash = '#/job/' + [...list.selected].join(','); });
  $('job-actions').addEventListener('click', ev => {
    const b = ev.target.closest('button');
    if (b) jobAction(b.dataset.action);
  });
  for (const id of ['x-axis', 'y-scale', 'smoothing']) $(id).addEventListener('input', () => {
    if (id === 'x-axis') view.zoom = null;
    redraw();
  });
  $('zoom-reset').addEventListener('click', () => { view.zoom = null; redraw(); });
  // The charts take their colours from the style sheet when they draw: draw again when the
  // system turns dark or light.
  matchMedia('(prefers-color-scheme: dark)').addEventListener('change', () => { if (view.charts.length) redraw(); });
  $('submit-form').addEventListener('submit', submit);
  $('spec-form').addEventListener('input', formEdited);
  $('spec-editor').addEventListener('input', fillForm);
  showVersion();
  window.addEventListener('hashchange', route);
  route();
}

init();
