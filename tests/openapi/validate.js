// validate.js — the real traind on loopback, every endpoint's answers checked against docs/openapi.yaml.
//
//   TRAIND_BIN=build/traind TRAIND_OPENAPI=docs/openapi.yaml TRAIND_SOURCE_ROOT=. node tests/openapi/validate.js
//
// The error codes api/ sends must be those the document lists. Each request's status must be one
// the document lists for that method and path, its Content-Type one it lists for that status, its
// headers those it lists, and its body valid against the schema (ajv, JSON Schema 2020-12 as
// OpenAPI 3.1 has it); a spec the daemon takes must fit JobSpec. The jobs are tiny.
'use strict';

const { spawn } = require('child_process');
const fs = require('fs');
const http = require('http');
const os = require('os');
const path = require('path');
const YAML = require('yaml');
const Ajv2020 = require('ajv/dist/2020');
const addFormats = require('ajv-formats');

const bin = process.env.TRAIND_BIN;
const docPath = process.env.TRAIND_OPENAPI;
const sourceRoot = process.env.TRAIND_SOURCE_ROOT;
if (!bin || !docPath || !sourceRoot) {
  console.error('validate.js: TRAIND_BIN, TRAIND_OPENAPI and TRAIND_SOURCE_ROOT must be set (meson sets them)');
  process.exit(2);
}

const doc = YAML.parse(fs.readFileSync(docPath, 'utf8'));
const ajv = new Ajv2020({ strict: false, allErrors: true, validateSchema: false });
addFormats(ajv);
ajv.addSchema(doc, 'openapi');
const compiled = new Map();

function pointer(...parts) {
  return '#/' + parts.map((p) => String(p).replace(/~/g, '~0').replace(/\//g, '~1')).join('/');
}

function validator(ptr) {
  if (!compiled.has(ptr)) compiled.set(ptr, ajv.compile({ $ref: 'openapi' + ptr }));
  return compiled.get(ptr);
}

let checks = 0;
let failures = 0;
function fail(what) {
  failures++;
  console.log(`not ok - ${what}`);
}

// The document's operation for method and a concrete path: [template, operation] or null.
function operation(method, urlPath) {
  for (const template of Object.keys(doc.paths)) {
    const re = new RegExp('^' + template.replace(/\{[^}]+\}/g, '[^/]+') + '$');
    if (re.test(urlPath)) return [template, doc.paths[template][method.toLowerCase()] || null];
  }
  return [null, null];
}

// A response object, following a $ref to components/responses; and its JSON pointer.
function resolveResponse(ptr, resp) {
  if (!resp.$ref) return [ptr, resp];
  const name = resp.$ref.split('/').pop();
  return [pointer('components', 'responses', name), doc.components.responses[name]];
}

function request(port, method, urlPath, { body, headers = {} } = {}) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? null : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
    const h = { ...headers };
    if (data) {
      h['Content-Length'] = data.length;
      if (!h['Content-Type']) h['Content-Type'] = 'application/json';
    }
    const req = http.request({ host: '127.0.0.1', port, method, path: urlPath, headers: h, agent: false }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.on("error", (e) => reject(new Error(`${method} ${urlPath}: ${e.message}`)));
    if (data) req.write(data);
    req.end();
  });
}

// Sends the request, checks the answer against the document, and returns {status, json, headers}.
async function check(port, method, urlPath, want, opts = {}) {
  checks++;
  const res = await request(port, method, urlPath, opts);
  const what = `${method} ${urlPath} -> ${res.status}`;
  const pathOnly = urlPath.split('?')[0];
  const query = new URLSearchParams(urlPath.split('?')[1] || '');
  const [template, op] = operation(method, pathOnly);
  // A request body the daemon took must fit the document's schema, and one it refused as a bad spec must not.
  const media = op?.requestBody?.content?.['application/json'];
  let bodyFits = null;
  if (media && opts.body !== undefined && typeof opts.body !== 'string') {
    const v = validator(pointer('paths', template, method.toLowerCase(), 'requestBody', 'content', 'application/json',
      'schema'));
    bodyFits = v(opts.body);
    if (res.status < 300 && !bodyFits)
      fail(`${what}: the request body taken does not fit the document: ${ajv.errorsText(v.errors)}`);
  }
  let json = null;
  const ctype = (res.headers['content-type'] || '').split(';')[0].trim();
  if (ctype === 'application/json' && res.body.length) {
    try {
      json = JSON.parse(res.body.toString('utf8'));
    } catch (e) {
      fail(`${what}: the body is not JSON: ${e.message}`);
    }
  }
  if (bodyFits && json?.error?.code === 'invalid_spec') fail(`${what}: the spec refused fits the document's JobSpec`);
  if (res.status !== want) fail(`${what}: expected ${want}; body ${res.body.toString('utf8').slice(0, 300)}`);
  let respPtr;
  let resp;
  if (!op) {
    // A method the document does not list for the path: a 405 naming those it does, or a 404 off every path.
    const status = template ? 405 : 404;
    if (res.status !== status) fail(`${what}: no operation in the document, so ${status} was due`);
    if (status === 405 && !res.headers.allow) fail(`${what}: a 405 without an Allow header`);
    resp = { content: { 'application/json': {} } };
    respPtr = null;
  } else {
    for (const name of query.keys()) {
      // HEAD takes what GET takes.
      const taker = method === 'HEAD' ? doc.paths[template].get : op;
      const params = [...(doc.paths[template].parameters || []), ...(taker.parameters || [])];
      // A parameter the document lacks must be refused: 400 invalid_argument naming it.
      if (!params.some((p) => p.in === 'query' && p.name === name) &&
          !(res.status === 400 && json?.error?.code === 'invalid_argument' && json.error.parameter === name))
        fail(`${what}: query parameter '${name}' is not in the document, and was not refused naming it`);
    }
    const key = [String(res.status), `${String(res.status)[0]}XX`, 'default'].find((k) => op.responses[k]);
    if (!key) {
      fail(`${what}: status ${res.status} is not among the document's for ${method} ${template}`);
      return { status: res.status, json, headers: res.headers };
    }
    [respPtr, resp] = resolveResponse(pointer('paths', template, method.toLowerCase(), 'responses', key),
      op.responses[key]);
  }
  for (const h of Object.keys(resp.headers || {}))
    if (res.headers[h.toLowerCase()] === undefined) fail(`${what}: header ${h} is missing`);
  if (method === 'HEAD') {
    if (res.body.length) fail(`${what}: HEAD with a body`);
    return { status: res.status, json, headers: res.headers };
  }
  if (!resp.content) {
    if (res.body.length) fail(`${what}: a body where the document has none`);
    return { status: res.status, json, headers: res.headers };
  }
  if (!resp.content[ctype]) {
    fail(`${what}: Content-Type ${ctype} is not among the document's (${Object.keys(resp.content)})`);
  } else if (ctype === 'application/json' && json !== null) {
    const v = validator(respPtr ? `${respPtr}${pointer('content', ctype, 'schema').slice(1)}`
                                : pointer('components', 'schemas', 'Error'));
    if (!v(json)) fail(`${what}: ${ajv.errorsText(v.errors, { separator: '; ' })}\n  body: ${JSON.stringify(json).slice(0, 500)}`);
  }
  return { status: res.status, json, headers: res.headers };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function startDaemon(dir, state, extra) {
  const portFile = path.join(dir, 'port');
  fs.rmSync(portFile, { force: true });
  const log = fs.openSync(path.join(dir, 'traind.log'), 'a');
  const child = spawn(bin, ['--listen', '127.0.0.1:0', '--port-file', portFile, '--data-root', path.join(dir, 'data'),
    '--state-dir', path.join(dir, state), '--cpu-workers', '2', ...extra], { stdio: ['ignore', log, log] });
  let exited = false;
  child.on('exit', () => { exited = true; });
  for (let t = 0; t < 3000 && !exited; t++) {
    try {
      const port = parseInt(fs.readFileSync(portFile, 'utf8'), 10);
      if (port > 0) return { child, port };
    } catch (e) { /* not yet */ }
    await sleep(10);
  }
  throw new Error(`traind did not start: ${fs.readFileSync(path.join(dir, 'traind.log'), 'utf8').slice(-2000)}`);
}

// Polls GET /jobs/{id} until done(job) or 30 s.
async function waitFor(port, id, done, what) {
  for (let t = 0; t < 3000; t++) {
    const r = await request(port, 'GET', `/jobs/${id}`);
    const job = JSON.parse(r.body.toString('utf8'));
    if (done(job)) return job;
    await sleep(10);
  }
  throw new Error(`job ${id} never became ${what}`);
}

// 64 rows of a label and 8 features, as the DC-taxi baseline reads them.
function writeData(dir) {
  fs.mkdirSync(path.join(dir, 'data'));
  let csv = '';
  for (let i = 0; i < 64; i++) {
    const x = Array.from({ length: 8 }, (_, k) => ((i * 7 + k * 3) % 11) / 10);
    csv += [x.reduce((a, b, k) => a + b * (k + 1), 0.5).toFixed(6), ...x].join(',') + '\n';
  }
  const file = path.join(dir, 'data', 'train.csv');
  fs.writeFileSync(file, csv);
  return file;
}

async function api(port, train) {
  const spec = { name: 'openapi', data: { train }, iterations: 5, batch_size: 16, device: 'cpu' };
  await check(port, 'GET', '/healthz', 200);
  await check(port, 'HEAD', '/healthz', 200);
  await check(port, 'GET', '/version', 200);
  await check(port, 'GET', '/version?bogus=1', 400);
  await check(port, 'GET', '/devices', 200);
  await check(port, 'GET', '/metrics', 200);
  await check(port, 'GET', '/', 200);

  // Submitting: created, the same client_id again, another spec under it, refusals.
  const first = await check(port, 'POST', '/jobs', 201, { body: { ...spec, client_id: 'openapi-1' } });
  const id = first.json.id;
  await check(port, 'POST', '/jobs', 200, { body: { ...spec, client_id: 'openapi-1' } });
  await check(port, 'POST', '/jobs', 409, { body: { ...spec, client_id: 'openapi-1', iterations: 6 } });
  const refused = await check(port, 'POST', '/jobs', 400, { body: { ...spec, optimizer: { lr: -1 } } });
  if (refused.json?.error?.code !== 'invalid_spec' || refused.json.error.field !== 'optimizer.lr')
    fail(`a negative lr is invalid_spec on optimizer.lr: ${JSON.stringify(refused.json)}`);
  await check(port, 'POST', '/jobs', 400, { body: '{"data": ' });
  await check(port, 'POST', '/jobs', 415, { body: JSON.stringify(spec), headers: { 'Content-Type': 'text/plain' } });
  await check(port, 'POST', '/jobs', 201, { body: { ...spec, model: { type: 'mlp', hidden: [4] },
    optimizer: { type: 'adamw' }, data: { train, header: false, label: 0, features: [1, 2, 3, 4, 5, 6, 7, 8],
      shuffle: { partitions: true, buffer: 8 } } } });

  await waitFor(port, id, (j) => j.state === 'succeeded', 'succeeded');
  await check(port, 'GET', `/jobs/${id}`, 200);
  await check(port, 'HEAD', `/jobs/${id}`, 200);
  await check(port, 'GET', '/jobs', 200);
  await check(port, 'GET', '/jobs?state=succeeded&limit=1', 200);
  await check(port, 'GET', '/jobs?limit=0', 400);
  await check(port, 'GET', `/jobs/${id}/metrics`, 200);
  await check(port, 'GET', `/jobs/${id}/metrics?since=2&limit=2`, 200);
  await check(port, 'GET', `/jobs/${id}/metrics?max_points=4&wait=1`, 200);
  await check(port, 'GET', `/jobs/${id}/metrics?limit=100001`, 400);
  // HEAD of a streamed page (limit > 256 rows) gets a stray "0\r\n\r\n" chunk from libmicrohttpd 0.9.75, a
  // body a HEAD answer must not have: this page is a short one until server.c sends HEAD answers bodiless.
  await check(port, 'HEAD', `/jobs/${id}/metrics?limit=10`, 200);
  await check(port, 'GET', `/jobs/${id}/checkpoint`, 200);
  await check(port, 'GET', `/jobs/${id}/replicas`, 200);
  await check(port, 'POST', `/jobs/${id}/predict`, 200, { body: { rows: [[0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]] } });
  await check(port, 'POST', `/jobs/${id}/predict`, 400, { body: { rows: [[1, 2]] } });
  const many = await check(port, 'POST', `/jobs/${id}/predict`, 413, { body: { rows: Array(3).fill(Array(8).fill(0)) } });
  if (many.json?.error?.limit !== 2) fail(`more rows than --predict-max-rows 2 name the limit: ${JSON.stringify(many.json)}`);
  await check(port, 'GET', '/healthz', 413, { body: '{}' });
  for (const p of ['/', '/version', '/devices', '/metrics', '/jobs', `/jobs/${id}/checkpoint`, `/jobs/${id}/replicas`])
    await check(port, 'HEAD', p, 200);
  await check(port, 'POST', `/jobs/${id}/pause`, 409);
  await check(port, 'POST', `/jobs/${id}/resume`, 409);
  await check(port, 'POST', `/jobs/${id}/cancel`, 409);

  // A long job on two replicas: its replicas, a long poll, pause, resume, cancel, delete.
  const long = await check(port, 'POST', '/jobs', 201, { body: { ...spec, iterations: 100000000, replicas: 2 } });
  const lid = long.json.id;
  let replicas = null;
  for (let t = 0; t < 3000 && !(replicas && replicas.length === 2); t++) {
    const r = await request(port, 'GET', `/jobs/${lid}/replicas`);
    replicas = JSON.parse(r.body.toString('utf8')).replicas;
    await sleep(10);
  }
  if (!replicas || replicas.length !== 2) fail(`the running 2-replica job lists ${JSON.stringify(replicas)}`);
  await check(port, 'GET', `/jobs/${lid}/replicas`, 200);
  await check(port, 'GET', `/jobs/${lid}/metrics?since=100000000&wait=1`, 200);
  await check(port, 'GET', '/devices', 200);
  await check(port, 'GET', '/metrics', 200);
  await check(port, 'POST', `/jobs/${lid}/pause`, 202);
  await waitFor(port, lid, (j) => j.state === 'paused', 'paused');
  await check(port, 'GET', `/jobs/${lid}`, 200);
  await check(port, 'DELETE', `/jobs/${lid}`, 409);
  await check(port, 'POST', `/jobs/${lid}/predict`, 409, { body: { rows: [[1, 2, 3, 4, 5, 6, 7, 8]] } });
  await check(port, 'POST', `/jobs/${lid}/resume`, 202);
  await check(port, 'POST', `/jobs/${lid}/cancel`, 202);
  await waitFor(port, lid, (j) => j.state === 'cancelled', 'cancelled');
  await check(port, 'DELETE', `/jobs/${lid}`, 200);

  // Off the map.
  await check(port, 'GET', `/jobs/${lid}`, 404);
  await check(port, 'GET', '/jobs/0123456789abcdef/metrics', 404);
  await check(port, 'GET', '/nowhere', 404);
  await check(port, 'PUT', '/jobs', 405);
  await check(port, 'DELETE', '/healthz', 405);
  await check(port, 'GET', `/jobs/${id}/predict`, 405);
}

async function auth(port) {
  await check(port, 'GET', '/jobs', 401);
  await check(port, 'GET', '/healthz', 200);
  await check(port, 'GET', '/', 200);
  await check(port, 'GET', '/jobs', 200, { headers: { Authorization: 'Bearer openapi-token' } });
}

// The error codes api/ sends (api_error's code arguments) and Error.code's enum are the same set;
// err_code_name's (util/err.c) may be sent too, for a failure of the state database.
function errorCodes(root) {
  const sent = new Set();
  for (const f of fs.readdirSync(path.join(root, 'api')).filter((n) => n.endsWith('.c'))) {
    const text = fs.readFileSync(path.join(root, 'api', f), 'utf8');
    for (const m of text.matchAll(/\bapi_error\(/g)) {
      // The code is every plain word literal before the message's format string.
      for (const lit of text.slice(m.index, m.index + 400).matchAll(/"([^"]*)"/g)) {
        if (!/^[a-z_]+$/.test(lit[1])) break;
        sent.add(lit[1]);
      }
    }
  }
  const enumCodes = new Set(doc.components.schemas.Error.properties.error.properties.code.enum);
  const errC = fs.readFileSync(path.join(root, 'util', 'err.c'), 'utf8');
  for (const code of sent) if (!enumCodes.has(code)) fail(`api/ sends error code ${code}, which Error.code does not list`);
  for (const code of enumCodes)
    if (!sent.has(code) && !errC.includes(`"${code}"`)) fail(`Error.code lists ${code}, which traind never sends`);
  checks++;
}

async function main() {
  errorCodes(sourceRoot);
  const dir = fs.mkdtempSync(path.join(process.env.TMPDIR || os.tmpdir(), 'traind-openapi-'));
  const daemons = [];
  try {
    const train = writeData(dir);
    const d = await startDaemon(dir, 'state', ['--predict-max-rows', '2']);
    daemons.push(d.child);
    await api(d.port, train);
    d.child.kill('SIGKILL');
    const token = path.join(dir, 'token');
    fs.writeFileSync(token, 'openapi-token\n', { mode: 0o600 });
    const a = await startDaemon(dir, 'state-auth', ['--token-file', token]);
    daemons.push(a.child);
    await auth(a.port);
  } finally {
    for (const c of daemons) c.kill('SIGKILL');
    if (!failures) fs.rmSync(dir, { recursive: true, force: true });
    else console.log(`# the daemon's log and state are in ${dir}`);
  }
  console.log(`# ${checks} answers checked against ${docPath}, ${failures} failures`);
  process.exit(failures ? 1 : 0);
}

main().catch((e) => {
  console.log(`not ok - ${e.stack}`);
  process.exit(1);
});
