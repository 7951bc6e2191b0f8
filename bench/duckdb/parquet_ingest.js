#!/usr/bin/env node
// DuckDB's side of bench/run-parquet-ingest, single-threaded (SET threads = 1):
//   node parquet_ingest.js write CSV DIR        DIR/<codec>.parquet for each codec, from the taxi CSV
//                                               (no header; fare, pickup and dropoff lat/lon as DOUBLE,
//                                               year, month, day of week, hour as BIGINT), and each
//                                               file's column chunks' encodings and sizes
//   node parquet_ingest.js read [--repeats R] --columns GROUP=a,b... [--columns ...] FILE...
//                                               SELECT sum(a), sum(b)... over each file, once untimed,
//                                               then R times timed, one line each:
//                                               duckdb FILE GROUP rows N columns C cpu_s X wall_s Y
// cpu_s is the process's user + system time over the query (DuckDB runs it on one thread).
'use strict';
const { DuckDBInstance } = require('@duckdb/node-api');

const columns = "{'fare':'DOUBLE','pickup_lat':'DOUBLE','pickup_lon':'DOUBLE','dropoff_lat':'DOUBLE'," +
  "'dropoff_lon':'DOUBLE','year':'BIGINT','month':'BIGINT','dow':'BIGINT','hour':'BIGINT'}";
// codec name, COPY options. plain: no dictionary (DICTIONARY_SIZE_LIMIT 1); the others as DuckDB writes
// by default, dictionary where a column chunk's values are few enough.
const codecs = [
  ['plain', "COMPRESSION 'uncompressed', DICTIONARY_SIZE_LIMIT 1"],
  ['dictionary', "COMPRESSION 'uncompressed'"],
  ['snappy', "COMPRESSION 'snappy'"],
  ['gzip', "COMPRESSION 'gzip'"],
  ['zstd', "COMPRESSION 'zstd'"],
  ['lz4_raw', "COMPRESSION 'lz4_raw'"],
];

async function connect() {
  const db = await DuckDBInstance.create(':memory:');
  const con = await db.connect();
  await con.run('SET threads = 1');
  return con;
}

async function write(csv, dir) {
  const con = await connect();
  await con.run(`CREATE TABLE taxi AS SELECT * FROM read_csv('${csv}', header = false, columns = ${columns})`);
  for (const [name, opts] of codecs) {
    await con.run(`COPY taxi TO '${dir}/${name}.parquet' (FORMAT parquet, ${opts})`);
  }
  const r = await con.runAndReadAll(`SELECT regexp_extract(file_name, '([a-z0-9_]+)\\.parquet$', 1), path_in_schema,
      string_agg(DISTINCT encodings, ' / '), count(*), sum(total_compressed_size), sum(total_uncompressed_size)
      FROM parquet_metadata('${dir}/*.parquet') GROUP BY ALL ORDER BY 1, 2`);
  for (const row of r.getRows()) {
    console.log(`encodings ${row[0]} ${row[1]}: ${row[2]} in ${row[3]} row groups, ${row[4]} bytes (${row[5]} uncompressed)`);
  }
}

async function read(args) {
  let repeats = 1;
  const groups = [];
  while (args.length && args[0].startsWith('--')) {
    const [flag, value] = args.splice(0, 2);
    if (flag === '--repeats') repeats = Number(value);
    else if (flag === '--columns') {
      const [label, names] = value.split('=');
      groups.push({ label, names: names.split(',') });
    } else throw new Error(`unknown flag ${flag}`);
  }
  const con = await connect();
  for (const file of args) {
    for (const g of groups) {
      const sql = `SELECT count(*), ${g.names.map((c) => `sum(${c})`).join(', ')} FROM read_parquet('${file}')`;
      const rows = Number((await con.runAndReadAll(sql)).getRows()[0][0]); // untimed
      for (let r = 0; r < repeats; r++) {
        const c0 = process.cpuUsage();
        const t0 = process.hrtime.bigint();
        await con.runAndReadAll(sql);
        const t = Number(process.hrtime.bigint() - t0) / 1e9;
        const c = process.cpuUsage(c0);
        console.log(`duckdb ${file} ${g.label} rows ${rows} columns ${g.names.length} ` +
                    `cpu_s ${((c.user + c.system) / 1e6).toFixed(6)} wall_s ${t.toFixed(6)}`);
      }
    }
  }
}

const [mode, ...rest] = process.argv.slice(2);
(mode === 'write' ? write(rest[0], rest[1]) : mode === 'read' ? read(rest) : Promise.reject(new Error('mode?')))
  .catch((err) => {
    console.error(`parquet_ingest.js: ${err.message}`);
    process.exit(1);
  });
