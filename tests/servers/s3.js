// s3.js — starts s3rver on 127.0.0.1 (port 0 = ephemeral) over a temp directory, for the storage tests.
//
//   node s3.js --dir DIR [--bucket NAME]... [--put BUCKET/KEY=LOCALFILE]...
//
// Prints "PORT <n>" once the buckets exist and the files are uploaded, then
// serves until its standard input closes (the test closes it, or dies), so a
// crashed test never leaves a server behind.
'use strict';

const crypto = require('crypto');
const fs = require('fs');
const http = require('http');

// s3rver 3.7.1 makes its ListObjectsV2 continuation tokens with DES, which
// OpenSSL 3 only has in its legacy provider; without it every truncated listing
// is an InternalError. The tokens are opaque to clients, so an AES-CTR stand-in
// (same 8-byte IV layout s3rver slices) keeps pagination working on any node.
for (const name of ['createCipheriv', 'createDecipheriv']) {
  const original = crypto[name];
  crypto[name] = function (algorithm, key, iv, ...rest) {
    if (algorithm !== 'des') return original.call(crypto, algorithm, key, iv, ...rest);
    const k = Buffer.concat([Buffer.from(key), Buffer.alloc(16)]).subarray(0, 16);
    const v = Buffer.concat([Buffer.from(iv), Buffer.alloc(16)]).subarray(0, 16);
    return original.call(crypto, 'aes-128-ctr', k, v, ...rest);
  };
}

const S3rver = require('s3rver');

function parseArgs(argv) {
  const a = { dir: null, buckets: [], puts: [] };
  for (let i = 0; i < argv.length; i++) {
    const v = argv[i + 1];
    if (argv[i] === '--dir') { a.dir = v; i++; }
    else if (argv[i] === '--bucket') { a.buckets.push(v); i++; }
    else if (argv[i] === '--put') { a.puts.push(v); i++; }
    else throw new Error(`unknown argument ${argv[i]}`);
  }
  if (!a.dir) throw new Error('--dir is required');
  return a;
}

// Anonymous path-style PUT: s3rver accepts unsigned requests.
function put(port, bucketKey, file) {
  const body = fs.readFileSync(file);
  const path = '/' + bucketKey.split('/').map(encodeURIComponent).join('/');
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, method: 'PUT',
      headers: { 'Content-Length': body.length } }, res => {
      res.resume();
      res.on('end', () => res.statusCode === 200 ? resolve()
        : reject(new Error(`PUT ${bucketKey}: HTTP ${res.statusCode}`)));
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const server = new S3rver({
    address: '127.0.0.1', port: 0, silent: true, directory: a.dir,
    configureBuckets: a.buckets.map(name => ({ name, configs: [] })),
  });
  const { port } = await server.run();
  for (const p of a.puts) {
    const eq = p.lastIndexOf('='); // keys may hold '='; local paths here do not
    await put(port, p.slice(0, eq), p.slice(eq + 1));
  }
  process.stdout.write(`PORT ${port}\n`);
  process.stdin.resume();
  process.stdin.on('end', () => server.close().then(() => process.exit(0)));
}

main().catch(err => { process.stderr.write(`s3.js: ${err.stack || err}\n`); process.exit(1); });
