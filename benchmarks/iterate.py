#!/usr/bin/python3
"""iterate.py -- `benchmarks/run iterate`: the per-step cost of the
iterative examples (examples/iterate/) driven from galleyc's C host loop,
against SciPy doing the same step, in interleaved rounds.

Algorithms (galleyc: examples/iterate/iterate ALGO GRAPH -t, which binds
the previous step's results and runs the same program again; its step
time runs from the binds to the results copied for the next step):
  pagerank      the weights once (iterate/pagerank_weights.tin), then
                iterate/pagerank_step.tin, NSTEPS steps from the uniform
                ranks; SciPy: the weights once, then per step
                x = r * w; rnew = 0.15/n + 0.85 (A^T x + r[dangling].sum()/n);
                delta = |rnew - r|_1, with A^T as a CSR matrix made once
  pagerank1     examples/pagerank.tin, the one-program step (out-degrees
                summed again at every step); SciPy: as for pagerank
  bellman-ford  iterate/bellman_ford_step.tin from vertex 1 to the fixed
                point; SciPy: the min-plus relaxation over W^T as CSR
                (made once): cand = d[indices] + data, one
                np.minimum.reduceat per step over the non-empty rows,
                dnew = min(d, that), changed = count(dnew < d)
  bfs           examples/bfs.tin from vertex 1 until the frontier is
                empty; SciPy: frontier expansion with CSR, A[frontier]
                (row slicing), np.unique of its column indices, minus the
                visited ones
Before the rounds, one untimed run of each (graph, algorithm), waiting
for clang's code after every run (iterate -w), fills the clang kernel
cache (-W: none), so that the rounds time the steady state.
Graphs: GRAPHS (default as-22july06, pgp-strong-2009, copter2, mdual;
-q: as-22july06 and pgp-strong-2009), from DATA/matrices, read by both
(the values as weights).  Each round runs every (graph, algorithm) with
galleyc then SciPy, the order alternating from round to round; per run,
the median and the mean of the step times after the first step (the
first plans and compiles; it is reported apart), and for galleyc how
many steps planned again.  Both runs' results are compared (ranks to
1e-9 relative, distances and levels exactly): MISMATCH in the table.
Reported: the median over rounds of those, and SciPy / galleyc of the
median step (> 1: galleyc faster); for galleyc also the median time of
the run alone (galley_run_info's exec time: the kernels) and the mean
time a step spends planning and compiling (re-plans).  Output: a Markdown table, a CSV
(default benchmarks/out/iterate-<timestamp>.csv, one row per run) and
the load average before and after.
"""
import argparse
import csv
import datetime
import os
import statistics as st
import subprocess
import sys
import tempfile
import time

import numpy as np
import scipy.io
import scipy.sparse as sp

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
ALGOS = ["pagerank", "pagerank1", "bellman-ford", "bfs"]
GRAPHS = ["as-22july06", "pgp-strong-2009", "copter2", "mdual"]
QUICK = ["as-22july06", "pgp-strong-2009"]


def graph_path(data, name):
    for ext in (".mtx", ".mtx.gz"):
        p = os.path.join(data, "matrices", name + ext)
        if os.path.exists(p):
            return p
    raise SystemExit("iterate.py: no %s under %s/matrices" % (name, data))


def read_tns(path, n):
    fill, x = 0.0, None
    with open(path) as f:
        for line in f:
            if line.startswith("# fill:"):
                fill = float(line.split()[2])
            elif line.strip() and not line.startswith("#"):
                if x is None:
                    x = np.full(n, fill)
                k, v = line.split()
                x[int(k) - 1] = float(v)
    return np.full(n, fill) if x is None else x


# ---- SciPy: one function per algorithm; each returns (result, step ms) ----

def timed_steps(step, state, max_steps):
    """Run step(state) -> done until done or max_steps; the step times."""
    ms = []
    for _ in range(max_steps):
        t0 = time.perf_counter()
        done = step(state)
        ms.append(1e3 * (time.perf_counter() - t0))
        if done:
            break
    return ms


def scipy_pagerank(A, nsteps):
    n = A.shape[0]
    d = np.asarray(A.sum(axis=1)).ravel()
    dangling = d == 0
    w = np.where(dangling, 0.0, 1.0 / np.where(dangling, 1.0, d))
    AT = A.T.tocsr()
    s = {"r": np.full(n, 1.0 / n)}

    def step(s):
        r = s["r"]
        rn = 0.15 / n + 0.85 * (AT @ (r * w) + r[dangling].sum() / n)
        s["delta"] = np.abs(rn - r).sum()
        s["r"] = rn
        return False
    ms = timed_steps(step, s, nsteps)
    return s["r"], ms


def scipy_bellman_ford(A, source):
    n = A.shape[0]
    WT = A.T.tocsr()  # row j: the in-edges of j
    rows = np.flatnonzero(np.diff(WT.indptr))
    starts = WT.indptr[rows]
    d = np.full(n, np.inf)
    d[source] = 0.0
    s = {"d": d}

    def step(s):
        d = s["d"]
        cand = d[WT.indices] + WT.data
        dn = d.copy()
        dn[rows] = np.minimum(d[rows], np.minimum.reduceat(cand, starts))
        changed = np.count_nonzero(dn < d)
        s["d"] = dn
        return changed == 0
    ms = timed_steps(step, s, n)
    return s["d"], ms


def scipy_bfs(A, source):
    n = A.shape[0]
    visited = np.zeros(n, dtype=bool)
    level = np.full(n, np.inf)
    visited[source] = True
    level[source] = 0
    s = {"f": np.array([source]), "k": 0}

    def step(s):
        s["k"] += 1
        nb = np.unique(A[s["f"]].indices)
        new = nb[~visited[nb]]
        visited[new] = True
        level[new] = s["k"]
        s["f"] = new
        return new.size == 0
    ms = timed_steps(step, s, n + 1)
    return level, ms


def run_scipy(algo, A, nsteps):
    if algo.startswith("pagerank"):
        return scipy_pagerank(A, nsteps)
    if algo == "bellman-ford":
        return scipy_bellman_ford(A, 0)
    return scipy_bfs(A, 0)


# ---- galleyc: the C host loop ----

def run_galleyc(host, backend, algo, path, nsteps, n, out, wait=False):
    cmd = [host, "-t", "-o", out] + (["-w"] if wait else [])
    if backend != "default":
        cmd += ["-b", backend]
    if algo.startswith("pagerank"):
        cmd += ["-n", str(nsteps), "-e", "0"]
    cmd += [algo, path]
    if not algo.startswith("pagerank"):
        cmd.append("1")
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit("iterate.py: %s failed: %s" % (" ".join(cmd), p.stderr))
    ms, replans, backends, parts = [], 0, set(), []
    for line in p.stdout.splitlines():
        f = line.replace(",", "").replace(")", "").split()
        if f and f[0] == "step":
            # step K MS ms replanned|reused BACKEND (plan P compile C run R
            ms.append(float(f[2]))
            replans += f[4] == "replanned" and len(ms) > 1
            backends.add(f[5])
            parts.append((float(f[7]), float(f[9]), float(f[11])))
    # after the first step: the median run (the kernels alone) and the
    # mean planning and compiling a step
    later = parts[1:] or parts
    detail = (st.median(p[2] for p in later), st.mean(p[0] for p in later),
              st.mean(p[1] for p in later))
    return read_tns(out, n), ms, replans, "+".join(sorted(backends)), detail


def agree(algo, x, y):
    if algo.startswith("pagerank"):
        return np.allclose(x, y, rtol=1e-9, atol=0)
    return np.array_equal(np.isfinite(x), np.isfinite(y)) and \
        np.allclose(x[np.isfinite(x)], y[np.isfinite(y)], rtol=1e-12, atol=0)


def summary(ms):
    later = ms[1:] or ms
    return ms[0], st.median(later), st.mean(later), len(ms)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-q", action="store_true", help="quick: 2 rounds, 2 graphs")
    ap.add_argument("-r", type=int, default=5, help="rounds (default 5)")
    ap.add_argument("-g", help="graphs, comma-separated names under DATA/matrices")
    ap.add_argument("-a", default=",".join(ALGOS), help="algorithms (default all)")
    ap.add_argument("-n", type=int, default=30, help="PageRank steps (default 30)")
    ap.add_argument("-b", default="default", help="galleyc backend (default: default)")
    ap.add_argument("-o", help="CSV path")
    ap.add_argument("-W", dest="no_warmup", action="store_true",
                    help="no warm-up run (the first round compiles the kernels)")
    ap.add_argument("build", nargs="?", default=os.path.join(REPO, "build"))
    a = ap.parse_args()
    rounds = 2 if a.q and a.r == 5 else a.r
    graphs = a.g.split(",") if a.g else (QUICK if a.q else GRAPHS)
    algos = a.a.split(",")
    data = os.environ.get("GALLEY_DATA_DIR", os.path.join(REPO, "..", "shared", "data"))
    host = os.path.join(a.build, "examples", "iterate", "iterate")
    if not os.access(host, os.X_OK):
        raise SystemExit("iterate.py: no %s (make -C %s examples/iterate/iterate)" % (host, a.build))
    out_csv = a.o or os.path.join(HERE, "out", "iterate-%s.csv" %
                                  datetime.datetime.now().strftime("%Y%m%d-%H%M%S"))
    os.makedirs(os.path.dirname(os.path.abspath(out_csv)), exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="galley-iterate.")
    load0 = open("/proc/loadavg").read().split()[:3]
    mats = {}
    for g in graphs:
        path = graph_path(data, g)
        mats[g] = (path, sp.csr_matrix(scipy.io.mmread(path), dtype=float))
    rows = []
    # a warm-up run of each that waits for clang's code after every run
    # (iterate -w): the kernel cache then holds every kernel of the loop's
    # plans, so that the rounds time the steady state (the default backend
    # runs clang's code from the cache at once) instead of tcc's code
    # racing a background clang compile for the cores (and a compile still
    # under way when the loop ends is killed, never cached)
    for g in graphs:
        for algo in algos:
            if not a.no_warmup:
                run_galleyc(host, a.b, algo, mats[g][0], a.n, mats[g][1].shape[0],
                            os.path.join(tmp, "r.tns"), wait=True)
    for rnd in range(rounds):
        for g in graphs:
            path, A = mats[g]
            for algo in algos:
                order = ["galleyc", "scipy"] if rnd % 2 == 0 else ["scipy", "galleyc"]
                res = {}
                for tool in order:
                    if tool == "galleyc":
                        x, ms, replans, be, detail = run_galleyc(
                            host, a.b, algo, path, a.n, A.shape[0], os.path.join(tmp, "r.tns"))
                    else:
                        (x, ms), replans, be, detail = run_scipy(algo, A, a.n), 0, "-", ("", "", "")
                    res[tool] = (x, ms, replans, be, detail)
                ok = agree(algo, res["galleyc"][0], res["scipy"][0])
                for tool in ("galleyc", "scipy"):
                    x, ms, replans, be, detail = res[tool]
                    first, med, mean, steps = summary(ms)
                    rows.append([rnd + 1, g, A.shape[0], A.nnz, algo, tool, be, steps,
                                 "%.4f" % first, "%.4f" % med, "%.4f" % mean, replans,
                                 "ok" if ok else "MISMATCH"] +
                                [d if d == "" else "%.4f" % d for d in detail])
                print("round %d %s %s: galleyc %.3f ms, scipy %.3f ms a step%s" % (
                    rnd + 1, g, algo, summary(res["galleyc"][1])[1], summary(res["scipy"][1])[1],
                    "" if ok else " MISMATCH"), file=sys.stderr)
    load1 = open("/proc/loadavg").read().split()[:3]
    with open(out_csv, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["round", "graph", "n", "nnz", "algo", "tool", "backend", "steps",
                    "first_ms", "median_step_ms", "mean_step_ms", "replans", "check",
                    "median_run_ms", "mean_plan_ms", "mean_compile_ms"])
        w.writerows(rows)
    print("Per-step time of the iterative examples, galleyc's C host loop (backend %s) "
          "vs SciPy; median over %d rounds of each run's median (and mean) step after "
          "the first.  Load average %s before, %s after.\n" % (a.b, rounds, " ".join(load0), " ".join(load1)))
    print("| graph | nnz | algorithm | steps | galleyc first ms | galleyc median ms | galleyc mean ms "
          "| of which: median run ms, mean plan + compile ms | re-plans | scipy median ms "
          "| scipy mean ms | scipy/galleyc (median) | check |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for g in graphs:
        for algo in algos:
            sel = lambda tool: [r for r in rows if r[1] == g and r[4] == algo and r[5] == tool]
            gr, sr = sel("galleyc"), sel("scipy")
            med = lambda rs, i: st.median(float(r[i]) for r in rs)
            gm, sm = med(gr, 9), med(sr, 9)
            print("| %s | %d | %s | %d | %.2f | %.3f | %.3f | %.3f, %.3f | %d | %.3f | %.3f | %.2f | %s |" % (
                g, gr[0][3], algo, gr[0][7], med(gr, 8), gm, med(gr, 10), med(gr, 13),
                med(gr, 14) + med(gr, 15), gr[0][11], sm,
                med(sr, 10), sm / gm if gm > 0 else float("nan"),
                "ok" if all(r[12] == "ok" for r in gr) else "MISMATCH"))
    print("\nCSV: %s" % out_csv, file=sys.stderr)
    return 3 if any(r[12] != "ok" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
