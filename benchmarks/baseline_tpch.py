#!/usr/bin/python3
"""baseline_tpch.py -- the baselines of `benchmarks/run tpch`: the TPC-H
star join with one-hot features (benchmarks/tpch/tpch.py) followed by
linear regression inference (y = X theta), logistic regression inference
(y = sigmoid(X theta)) and the covariance matrix X^T X, as

  numpy          the join as gathers through the dense key arrays
                 (lineitem -> order -> customer, supplier, part), the dense
                 X built with one-hot scatters, the math with NumPy
  duckdb+numpy   the join and the feature coding in DuckDB SQL (one query,
                 one thread by default, through benchmarks/duckdb_query.mjs
                 and node; the table reaches NumPy through a CSV file, not
                 timed), then the same X build and math in NumPy; skipped
                 when node or @duckdb/node-api (benchmarks/setup) is absent
  pandas+numpy   the join with pandas merges; skipped when pandas is not
                 installed

and prints CSV lines in the bench_tin format

  tool,workload,status,reps,median_ms,p90_ms,max_ms,opt_ms,plan_ms,
  compile_ms,first_ms,result,note

with workload linreg / logreg / covar, median_ms = the median total time
(join + X build + math: every workload repeats the join, as a galleyc
program does), result = the sum of the output's entries.  Reading the
.tbl files is not timed.  With -g DIR, each result is checked against
galleyc's DIR/<workload>/{y,cov}.tns (written by bench_tin -w): the note
says "check ok" or "check DIFFER" with the largest relative error.

  baseline_tpch.py [-r REPS] [-g GALLEY_OUT] [-w WORKDIR] [-T THREADS]
                   [-t TOOLS] TPCH_DIR
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "tpch"))
import tpch  # noqa: E402

WORKLOADS = ("linreg", "logreg", "covar")
OUTNAME = {"linreg": "y", "logreg": "y", "covar": "cov"}


def math(X, th, w):
    if w == "linreg":
        return X @ th
    if w == "logreg":
        return 1.0 / (1.0 + np.exp(-(X @ th)))
    return X.T @ X


def build_x(n, nf, cols, lay):
    """Dense X from per-lineitem columns: cols[name] = j (one-hot) or value."""
    X = np.zeros((n, nf))
    rows = np.arange(n)
    for name, table, col, kind, off, cats in lay:
        if kind == "onehot":
            X[rows, cols[name]] = 1.0
        else:
            X[:, off] = cols[name]
    return X


def read_tns(path):
    dims, fill = None, 0.0
    idx, vals = [], []
    with open(path) as f:
        for line in f:
            t = line.split()
            if not t:
                continue
            if t[0] == "#":
                if len(t) > 1 and t[1] == "dims:":
                    dims = [int(x) for x in t[2:]]
                elif len(t) > 2 and t[1] == "fill:":
                    fill = float(t[2])
                continue
            idx.append([int(x) - 1 for x in t[:-1]])
            vals.append(float(t[-1]))
    out = np.full(dims, fill)
    if idx:
        out[tuple(np.array(idx).T)] = vals
    return out


def check(res, w, gdir):
    if not gdir:
        return ""
    path = os.path.join(gdir, w, OUTNAME[w] + ".tns")
    if not os.path.exists(path):
        return "; no galleyc result to check"
    g = read_tns(path)
    if g.shape != res.shape:
        return "; check DIFFER: shape %s vs galleyc %s" % (res.shape, g.shape)
    scale = max(1e-300, float(np.abs(res).max()))
    err = float(np.abs(g - res).max()) / scale
    return "; check %s max err %.2g (relative to max |x|)" % ("ok" if err <= 1e-9 else "DIFFER", err)


def timed(fn, reps):
    times, res = [], None
    for _ in range(reps):
        t0 = time.perf_counter()
        res = fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return res, times


def emit(tool, w, times, res, note, first=None):
    t = sorted(times)
    n = len(t)
    p90 = t[max(0, min(n - 1, -(-9 * n // 10) - 1))]
    print("%s,%s,ok,%d,%.3f,%.3f,%.3f,,,,%.3f,%.17g,%s" % (
        tool, w, n, statistics.median(t), p90, t[-1], first if first is not None else t[0],
        float(np.sum(res)), note.replace(",", " ")), flush=True)


def numpy_pipeline(T, lay, nf, reps, gdir):
    # the inputs as arrays keyed by table rows (parsing not timed)
    code = tpch.codes(T, lay)
    li = T["lineitem"]
    perm = tpch.lineitem_order(li)
    l_ok = np.array(li[0], dtype=np.int64)[perm]
    l_pk = np.array(li[1], dtype=np.int64)[perm]
    l_sk = np.array(li[2], dtype=np.int64)[perm]
    okeys = np.array(T["orders"][0], dtype=np.int64)
    o_ck = np.array(T["orders"][1], dtype=np.int64)
    c_key = np.array(T["customer"][0], dtype=np.int64)
    s_key = np.array(T["supplier"][0], dtype=np.int64)
    p_key = np.array(T["part"][0], dtype=np.int64)
    th = tpch.theta(nf)

    def join():
        # key -> row lookup arrays (a hash join on dense keys), then gathers
        def index(keys):
            a = np.full(int(keys.max()) + 1, -1, dtype=np.int64)
            a[keys] = np.arange(len(keys))
            return a
        orow = index(okeys)[l_ok]
        crow = index(c_key)[o_ck[orow]]
        srow = index(s_key)[l_sk]
        prow = index(p_key)[l_pk]
        row = {"orders": orow, "customer": crow, "supplier": srow, "part": prow}
        cols = {name: code[name][row[table]] for name, table, col, kind, off, cats in lay}
        return build_x(len(perm), nf, cols, lay)

    for w in WORKLOADS:
        res, times = timed(lambda: math(join(), th, w), reps)
        emit("numpy", w, times, res, "numpy %s: join by key arrays + dense X + math%s" % (
            np.__version__, check(res, w, gdir)))


def pandas_pipeline(T, lay, nf, reps, gdir):
    try:
        import pandas as pd
    except ImportError:
        print("baseline_tpch: pandas is not installed: pandas+numpy skipped", file=sys.stderr)
        return
    code = tpch.codes(T, lay)
    li = T["lineitem"]
    L = pd.DataFrame({"ok": np.array(li[0], dtype=np.int64), "ln": np.array(li[3], dtype=np.int64),
                      "pk": np.array(li[1], dtype=np.int64), "sk": np.array(li[2], dtype=np.int64)})
    frames = {}
    keys = {"orders": "ok", "customer": "ck", "supplier": "sk", "part": "pk"}
    for table in ("orders", "customer", "supplier", "part"):
        d = {keys[table]: np.array(T[table][0], dtype=np.int64)}
        if table == "orders":
            d["ck"] = np.array(T["orders"][1], dtype=np.int64)
        for name, t, col, kind, off, cats in lay:
            if t == table:
                d[name] = code[name]
        frames[table] = pd.DataFrame(d)
    th = tpch.theta(nf)

    def join():
        J = (L.merge(frames["orders"], on="ok").merge(frames["customer"], on="ck")
             .merge(frames["supplier"], on="sk").merge(frames["part"], on="pk")
             .sort_values(["ok", "ln"]))
        cols = {name: J[name].to_numpy() for name, t, col, kind, off, cats in lay}
        return build_x(len(J), nf, cols, lay)

    for w in WORKLOADS:
        res, times = timed(lambda: math(join(), th, w), reps)
        emit("pandas+numpy", w, times, res, "pandas %s: merges + dense X + math%s" % (
            pd.__version__, check(res, w, gdir)))


SQL_COLS = {  # the feature columns the SQL query computes, by feature name
    "o_orderstatus": "o.o_orderstatus", "o_orderpriority": "o.o_orderpriority",
    "o_shippriority": "o.o_shippriority", "o_totalprice": "o.o_totalprice",
    "c_nationkey": "c.c_nationkey", "c_mktsegment": "c.c_mktsegment", "c_acctbal": "c.c_acctbal",
    "s_nationkey": "s.s_nationkey", "s_acctbal": "s.s_acctbal",
    "p_mfgr": "p.p_mfgr", "p_brand": "p.p_brand", "p_container": "p.p_container",
    "p_size": "p.p_size", "p_retailprice": "p.p_retailprice",
}
TBL_COLS = {
    "lineitem": ["l_orderkey BIGINT", "l_partkey BIGINT", "l_suppkey BIGINT", "l_linenumber BIGINT"]
    + ["l_c%d VARCHAR" % k for k in range(4, 16)],
    "orders": ["o_orderkey BIGINT", "o_custkey BIGINT", "o_orderstatus VARCHAR", "o_totalprice DOUBLE",
               "o_orderdate VARCHAR", "o_orderpriority VARCHAR", "o_clerk VARCHAR",
               "o_shippriority VARCHAR", "o_comment VARCHAR"],
    "customer": ["c_custkey BIGINT", "c_name VARCHAR", "c_address VARCHAR", "c_nationkey VARCHAR",
                 "c_phone VARCHAR", "c_acctbal DOUBLE", "c_mktsegment VARCHAR", "c_comment VARCHAR"],
    "supplier": ["s_suppkey BIGINT", "s_name VARCHAR", "s_address VARCHAR", "s_nationkey VARCHAR",
                 "s_phone VARCHAR", "s_acctbal DOUBLE", "s_comment VARCHAR"],
    "part": ["p_partkey BIGINT", "p_name VARCHAR", "p_mfgr VARCHAR", "p_brand VARCHAR",
             "p_type VARCHAR", "p_size DOUBLE", "p_container VARCHAR", "p_retailprice DOUBLE",
             "p_comment VARCHAR"],
}


def duckdb_pipeline(tpch_dir, lay, nf, reps, gdir, work, threads):
    node = shutil.which("node")
    if not node:
        print("baseline_tpch: no node: duckdb+numpy skipped", file=sys.stderr)
        return
    probe = subprocess.run([node, "-e", "require('@duckdb/node-api')"], cwd=os.path.join(here, "node"),
                           capture_output=True) if os.path.isdir(os.path.join(here, "node")) else None
    if probe is None or probe.returncode != 0:
        print("baseline_tpch: @duckdb/node-api is not installed (benchmarks/setup): duckdb+numpy skipped",
              file=sys.stderr)
        return
    os.makedirs(work, exist_ok=True)
    setup = os.path.join(work, "setup.sql")
    with open(setup, "w") as f:
        for t, cols in TBL_COLS.items():
            path = os.path.join(tpch_dir, t + ".tbl.gz")
            if not os.path.exists(path):
                path = os.path.join(tpch_dir, t + ".tbl")
            spec = ", ".join("'%s': '%s'" % tuple(c.split()) for c in cols + ["trail VARCHAR"])
            f.write("CREATE TABLE %s AS SELECT * EXCLUDE (trail) FROM read_csv('%s', delim = '|', "
                    "header = false, quote = '', escape = '', columns = {%s});\n" % (t, path, spec))
    # the join and the feature coding: one-hot columns become their j
    # (offset + dense_rank over the table's sorted distinct values - 1),
    # numeric ones floor(x) mod 100
    sel, ctes = [], []
    for name, table, col, kind, off, cats in lay:
        a = SQL_COLS[name]
        alias, cname = a.split(".")
        if kind == "onehot":
            ctes.append("%s_codes AS (SELECT %s AS v, %d + dense_rank() OVER (ORDER BY %s) - 1 AS j "
                        "FROM (SELECT DISTINCT %s FROM %s))" % (name, cname, off, cname, cname, table))
            sel.append("(SELECT j FROM %s_codes WHERE v = %s) AS %s" % (name, a, name))
        else:
            sel.append("(((floor(%s)::BIGINT %% 100) + 100) %% 100)::DOUBLE AS %s" % (a, name))
    q = ("CREATE OR REPLACE TABLE feat AS WITH %s\nSELECT %s\nFROM lineitem l JOIN orders o ON l.l_orderkey = o.o_orderkey "
         "JOIN customer c ON o.o_custkey = c.c_custkey JOIN supplier s ON l.l_suppkey = s.s_suppkey "
         "JOIN part p ON l.l_partkey = p.p_partkey\nORDER BY l.l_orderkey, l.l_linenumber;\n"
         "SELECT count(*) FROM feat;\n" % (",\n  ".join(ctes), ",\n  ".join(sel)))
    join_sql = os.path.join(work, "join.sql")
    with open(join_sql, "w") as f:
        f.write(q)
    csv_path = os.path.join(work, "feat.csv")
    post = os.path.join(work, "post.sql")
    with open(post, "w") as f:
        f.write("COPY feat TO '%s' (HEADER false);\n" % csv_path)
    r = subprocess.run([node, os.path.join(here, "duckdb_query.mjs"), "-n", "-t", str(threads), "-r", str(reps),
                        "-s", setup, "-p", post, "-l", "join", join_sql], capture_output=True, text=True)
    line = r.stdout.strip().splitlines()
    f = line[-1].split(",") if line else []
    if r.returncode != 0 or len(f) < 13 or f[2] != "ok":
        print("baseline_tpch: the DuckDB join failed: %s %s" % (r.stdout.strip(), r.stderr.strip()[-500:]),
              file=sys.stderr)
        for w in WORKLOADS:
            print("duckdb+numpy,%s,error,0,,,,,,,,,DuckDB join failed" % w)
        return
    join_ms, join_first, dver = float(f[4]), float(f[10]), f[12].split(";")[0]
    data = np.loadtxt(csv_path, delimiter=",", ndmin=2)
    cols = {name: (data[:, k].astype(np.int64) if kind == "onehot" else data[:, k])
            for k, (name, table, col, kind, off, cats) in enumerate(lay)}
    th = tpch.theta(nf)
    for w in WORKLOADS:
        res, times = timed(lambda: math(build_x(len(data), nf, cols, lay), th, w), reps)
        emit("duckdb+numpy", w, [join_ms + t for t in times], res,
             "%s SQL join + coding (median %.1f ms) + numpy %s dense X + math (median %.1f ms); "
             "CSV hand-off not timed%s" % (dver, join_ms, np.__version__, statistics.median(times),
                                           check(res, w, gdir)),
             first=join_first + times[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-r", type=int, default=5)
    ap.add_argument("-g", help="galleyc's output directory (DIR/<workload>/*.tns)")
    ap.add_argument("-w", default=None, help="scratch directory for the DuckDB files")
    ap.add_argument("-T", type=int, default=1, help="DuckDB threads")
    ap.add_argument("-t", default="numpy,duckdb+numpy,pandas+numpy", help="tools")
    ap.add_argument("tpch_dir")
    a = ap.parse_args()
    T = {t: tpch.read_table(a.tpch_dir, t) for t in tpch.TABLES}
    lay, nf = tpch.layout(T)
    tools = a.t.split(",")
    if "numpy" in tools:
        numpy_pipeline(T, lay, nf, a.r, a.g)
    if "duckdb+numpy" in tools:
        duckdb_pipeline(a.tpch_dir, lay, nf, a.r, a.g, a.w or os.path.join(a.g or ".", "duckdb"), a.T)
    if "pandas+numpy" in tools:
        pandas_pipeline(T, lay, nf, a.r, a.g)


if __name__ == "__main__":
    main()
