// fail.js — an HTTP server on 127.0.0.1 that serves files from a directory and fails on request, for the storage tests.
//
//   node fail.js --root DIR
//
// The first path segment says how to answer; the rest names a file under DIR:
//   /ok/F            200 with the file (ETag "<size>-<mtime>")
//   /fail-N-S/F      HTTP status S for the first N requests of this path, then like /ok
//   /status-S/F      HTTP status S always (403, 404, ...)
//   /truncate-N/F    for the first N requests: the full Content-Length, half the body, then a reset
//   /stall/F         headers and the first byte, then nothing (the socket stays open)
//   /hang/F          nothing at all, not even headers
//   /redirect/F      302 to /ok/F
//   /ranges/F        like /ok, but a "Range: bytes=A-B" request gets 206 with those bytes (/ok ignores it)
//   /__count?path=P  how many requests P received (the query is not part of P); /__count alone: all;
//                    &method=GET (or HEAD) counts only that method
//
// Prints "PORT <n>" when listening and serves until standard input closes.
'use strict';

const fs = require('fs');
const http = require('http');
const path = require('path');

let root = null;
for (let i = 2; i < process.argv.length; i++)
  if (process.argv[i] === '--root') root = process.argv[++i];
if (!root) { process.stderr.write('fail.js: --root is required\n'); process.exit(2); }

const counts = new Map();
let total = 0;
const stalled = new Set();

function readFile(rel) {
  const full = path.resolve(root, rel);
  if (!full.startsWith(path.resolve(root) + path.sep)) return null;
  try {
    return { body: fs.readFileSync(full), stat: fs.statSync(full) };
  } catch (e) {
    return null;
  }
}

function sendFile(res, rel) {
  const f = readFile(rel);
  if (!f) { res.writeHead(404, { 'Content-Length': 9 }); res.end('not found'); return; }
  res.writeHead(200, { 'Content-Length': f.body.length,
    'ETag': `"${f.body.length}-${Math.floor(f.stat.mtimeMs)}"` });
  res.end(f.body);
}

function sendRange(res, rel, range) {
  const f = readFile(rel);
  const r = range && range.match(/^bytes=(\d+)-(\d+)$/);
  if (!f || !r) { sendFile(res, rel); return; }
  const a = Number(r[1]), b = Math.min(Number(r[2]), f.body.length - 1);
  if (a > b) { res.writeHead(416, { 'Content-Length': 0 }); res.end(); return; }
  res.writeHead(206, { 'Content-Length': b - a + 1, 'Content-Range': `bytes ${a}-${b}/${f.body.length}`,
    'ETag': `"${f.body.length}-${Math.floor(f.stat.mtimeMs)}"` });
  res.end(f.body.subarray(a, b + 1));
}

const server = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://x');
  if (url.pathname === '/__count') {
    const p = url.searchParams.get('path');
    const m = url.searchParams.get('method');
    const n = p === null ? total : (counts.get(m ? `${m} ${p}` : p) || 0);
    res.writeHead(200, { 'Content-Type': 'text/plain', 'Content-Length': String(n).length });
    res.end(String(n));
    return;
  }
  total++;
  const n = (counts.get(url.pathname) || 0) + 1;
  counts.set(url.pathname, n);
  const byMethod = `${req.method} ${url.pathname}`;
  counts.set(byMethod, (counts.get(byMethod) || 0) + 1);
  const m = url.pathname.match(/^\/([^/]+)\/(.+)$/);
  if (!m) { res.writeHead(400, { 'Content-Length': 0 }); res.end(); return; }
  const [, mode, rel] = m;
  let mm;
  if (mode === 'ok') {
    sendFile(res, decodeURIComponent(rel));
  } else if (mode === 'ranges') {
    sendRange(res, decodeURIComponent(rel), req.headers.range);
  } else if ((mm = mode.match(/^fail-(\d+)-(\d+)$/))) {
    if (n <= Number(mm[1])) {
      res.writeHead(Number(mm[2]), { 'Content-Length': 6 });
      res.end('failed');
    } else {
      sendFile(res, decodeURIComponent(rel));
    }
  } else if ((mm = mode.match(/^status-(\d+)$/))) {
    res.writeHead(Number(mm[1]), { 'Content-Length': 6 });
    res.end('status');
  } else if ((mm = mode.match(/^truncate-(\d+)$/))) {
    if (n > Number(mm[1])) { sendFile(res, decodeURIComponent(rel)); return; }
    const f = readFile(decodeURIComponent(rel));
    if (!f) { res.writeHead(404, { 'Content-Length': 0 }); res.end(); return; }
    res.writeHead(200, { 'Content-Length': f.body.length });
    res.write(f.body.subarray(0, Math.floor(f.body.length / 2)), () => res.destroy());
  } else if (mode === 'stall') {
    res.writeHead(200, { 'Content-Length': 1000000 });
    res.write('x');
    stalled.add(res);
  } else if (mode === 'hang') {
    stalled.add(res);
  } else if (mode === 'redirect') {
    // A body on the redirect, as real servers send, which must not end up in front of the object.
    res.writeHead(302, { 'Location': `/ok/${rel}`, 'Content-Length': 11 });
    res.end('redirecting');
  } else {
    res.writeHead(400, { 'Content-Length': 0 });
    res.end();
  }
});

server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`PORT ${server.address().port}\n`);
});
process.stdin.resume();
process.stdin.on('end', () => process.exit(0));
