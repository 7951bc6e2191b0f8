// s3.js — starts s3rver on 127.0.0.1 (port 0 = ephemeral) over a temp directory, for the storage tests.
//
//   node s3.js --dir DIR [--bucket NAME]... [--put BUCKET/KEY=LOCALFILE]...
//
// Prints "PORT <n>" once the buckets exist and the files are uploaded, then
// serves until its standard input closes (the test closes it, or dies), so a
// crashed test never leaves a server behind.
'use strict';

const fs = require('fs');
const http = require('http');
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
    const eq = p.indexOf('=');
    await put(port, p.slice(0, eq), p.slice(eq + 1));
  }
  process.stdout.write(`PORT ${port}\n`);
  process.stdin.resume();
  process.stdin.on('end', () => server.close().then(() => process.exit(0)));
}

main().catch(err => { process.stderr.write(`s3.js: ${err.stack || err}\n`); process.exit(1); });
