// duckdb_query.mjs -- the DuckDB side of `benchmarks/run subgraph` and
// `benchmarks/run tpch`: runs SQL files in one in-memory DuckDB (the npm
// package @duckdb/node-api, installed by benchmarks/setup into
// benchmarks/node/; never installed by the runner) and prints CSV lines in
// the format of benchmarks/bench_tin:
//
//   tool,workload,status,reps,median_ms,p90_ms,max_ms,opt_ms,plan_ms,
//   compile_ms,first_ms,result,note
//
//   node duckdb_query.mjs [-t THREADS] [-r REPS] [-c CAP_MS] [-s SETUP.sql]
//                         [-p POST.sql] [-l LABEL] [-n] QUERY.sql ...
//
// SETUP.sql (loading tables; not timed) runs once.  Each QUERY.sql (its
// statements run in order, the whole file timed) runs once cold, then up
// to REPS (default 5) more times until CAP_MS / 2 of run time is spent;
// a run still going after CAP_MS (default 60000) is interrupted
// (status "timeout").  When the cold run alone took over CAP_MS / 2 it is
// the only sample.  result = the first column of the first row of the last
// statement (a count), or 0.  POST.sql (not timed) runs after each query,
// e.g. to COPY a result table to a file.  tool = duckdb, workload = LABEL
// or the query file's base name without .sql; THREADS default 1.
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(here, 'node', 'package.json'));
let duckdb;
try {
  duckdb = require('@duckdb/node-api');
} catch (e) {
  console.error('duckdb_query: @duckdb/node-api is not installed (run benchmarks/setup)');
  process.exit(3);
}

const args = process.argv.slice(2);
let threads = 1, reps = 5, cap = 60000, setup = null, post = null, label = null, header = true;
const queries = [];
for (let k = 0; k < args.length; k++) {
  const a = args[k];
  if (a === '-t') threads = Number(args[++k]);
  else if (a === '-r') reps = Number(args[++k]);
  else if (a === '-c') cap = Number(args[++k]);
  else if (a === '-s') setup = args[++k];
  else if (a === '-p') post = args[++k];
  else if (a === '-l') label = args[++k];
  else if (a === '-n') header = false;
  else queries.push(a);
}
if (!queries.length) {
  console.error('usage: node duckdb_query.mjs [-t THREADS] [-r REPS] [-c CAP_MS] [-s SETUP.sql] [-p POST.sql] [-l LABEL] [-n] QUERY.sql ...');
  process.exit(2);
}

const instance = await duckdb.DuckDBInstance.create(':memory:', { threads: String(threads) });
const con = await instance.connect();
if (header)
  console.log('tool,workload,status,reps,median_ms,p90_ms,max_ms,opt_ms,plan_ms,compile_ms,first_ms,result,note');
if (setup) await con.run(readFileSync(setup, 'utf8'));

// Run every statement of sql; the first cell of the last one's first row.
async function runAll(sql) {
  const reader = await con.runAndReadAll(sql);
  const rows = reader.getRows();
  if (rows.length && rows[0].length) {
    const v = rows[0][0];
    return typeof v === 'bigint' ? v.toString() : String(v);
  }
  return '0';
}

// One timed run, interrupted after cap ms: [ms, result] or null on timeout.
async function timedRun(sql) {
  let timedOut = false;
  const timer = setTimeout(() => { timedOut = true; con.interrupt(); }, cap);
  const t0 = process.hrtime.bigint();
  try {
    const r = await runAll(sql);
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    return [ms, r];
  } catch (e) {
    if (timedOut) return null;
    throw e;
  } finally {
    clearTimeout(timer);
  }
}

function fmt(x) { return x.toFixed(3); }

for (const q of queries) {
  const name = label && queries.length === 1 ? label : basename(q).replace(/\.sql$/, '');
  const sql = readFileSync(q, 'utf8');
  try {
    const first = await timedRun(sql);
    if (!first) {
      console.log(`duckdb,${name},timeout,0,,,,,,,,,interrupted after ${cap} ms`);
      continue;
    }
    const ms = [];
    let result = first[1], spent = 0, how = '';
    if (first[0] > cap / 2) {
      ms.push(first[0]);
      how = '; cold run only';
    } else {
      while (ms.length < reps && spent <= cap / 2) {
        const r = await timedRun(sql);
        if (!r) break;
        ms.push(r[0]);
        spent += r[0];
        if (r[1] !== result) how = '; RESULT CHANGED between runs';
      }
      if (!ms.length) { ms.push(first[0]); how = '; cold run only'; }
    }
    if (post) await con.run(readFileSync(post, 'utf8'));
    ms.sort((a, b) => a - b);
    const n = ms.length;
    const med = n % 2 ? ms[(n - 1) / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
    const p90 = ms[Math.min(n - 1, Math.max(0, Math.ceil(0.9 * n) - 1))];
    console.log(`duckdb,${name},ok,${n},${fmt(med)},${fmt(p90)},${fmt(ms[n - 1])},,,,${fmt(first[0])},${result},DuckDB ${duckdb.version()} threads ${threads}${how}`);
  } catch (e) {
    console.log(`duckdb,${name},error,0,,,,,,,,,${String(e.message || e).replace(/[,\n]/g, ' ').slice(0, 300)}`);
  }
}
con.closeSync();
process.exit(0);
