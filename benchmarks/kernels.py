#!/usr/bin/python3
"""kernels.py -- `benchmarks/run kernels`: what a host program pays per call
of galleyc's kernels, against SuiteSparse:GraphBLAS and SciPy, in
interleaved rounds on the same arrays.

Workloads (the galleyc programs are benchmarks/kernels/*.tin and
examples/triangles.tin):
  spmv       y[i] = sum(j: A[i,j]*x[j])                    every matrix
  spgemm     C[i,k] = sum(j: A[i,j]*A[j,k]), sorted output  square ones
  sddmm      C[i,j] = S[i,j]*sum(k: U[i,k]*V[j,k]), K = 32  every matrix
  mttkrp     A[i,r] = sum(j,k: B[i,j,k]*C[j,r]*D[k,r]), rank 16, on the
             order-3 tensors of DATA/tensors (library-tests, kg)
  tri_full   examples/triangles.tin as written, on the whole symmetric
             graph G (the baselines' timed call includes tril(G))
  tri_lower  sum(i,j,k: L[i,j]*L[j,k]*L[i,k]) on L = tril(G, -1)
Matrices: every .mtx/.mtx.gz under DATA/matrices (subfolders too) with at
least MIN_NNZ stored entries once symmetric files are expanded (headers
read first, then the exact count from the reading).  Graphs: the
undirected graphs karate (smoke), power, ca-GrQc, as-22july06, polblogs,
luxembourg_osm, crack, copter2, mdual and yeast (DATA/subgraph/
fastest-yeast/yeast.graph, converted); G = the pattern of A + A' without
self-loops, values 1.  Triangle counts are checked against the published
or staged counts of DATA/matrices/README.md where there is one.

Every file is read once, by galleyc (`bench_kernels prep`), into CSR (COO
for tensors) arrays that every tool then gets: galleyc wraps them
(galley_tensor_wrap_csr), GraphBLAS imports them (GrB_Matrix_import),
SciPy loads them (numpy.fromfile).  One galleyc server (bench_kernels
serve) and one GraphBLAS server (baseline_graphblas serve, one thread) per
file; SciPy runs in this process.  With --threads 1,2 every galleyc
backend B runs as tool galleyc-B@1 and galleyc-B@2 (threads set with
galley_program_set_threads) and GraphBLAS as graphblas@1 and graphblas@2
(one server per count, GxB_NTHREADS), in the same rounds.

Per (file, kernel) and tool:
  first call  timed once: galleyc parses, sets the backend, binds and runs
              (planning and compiling included; clang into a private cold
              cache), then waits for the tiered JIT's clang code (swap_ms
              in the note) so that the warm call below is not tcc code;
              the baselines make their first call
  rounds      round r runs every tool once per (file, kernel), the order of
              the tools rotating from round to round; "once" is a batch of
              N whole calls (N set from a warm call so that a batch lasts
              about TARGET_MS, at most MAX_CALLS), each timed with a wall
              clock around the call; the round's value is the batch median.
              galleyc also reports the kernels alone: the sum of the
              seconds of the run's queries (galley_program_query_info).
Reported: the median over rounds per tool; per round the ratio best
baseline / galleyc (> 1: galleyc faster), its median and spread (min-max);
the issue 11 targets; checksums (sum, position-weighted sum) compared
between tools in every round, a mismatch flagged MISMATCH; the load
average (/proc/loadavg) at the start and end of each round; SpMV's
bandwidth as a fraction of the STREAM triad (bench_stream, one thread).
Exception splitting (issue 12, -x SPECS, e.g. -x inf4,inf4nan1): each
galleyc backend B also runs as tool galleyc-B~SPEC on the same operands
with a few stored values made non-finite when loaded (infN: N values set
to +inf; infNnanM: and M to NaN; entries spread evenly over the storage
order; in the symmetric graph G of tri_full each entry's mirror too), in
the same rounds; the report's last table gives each round's
split / finite time (target <= 1.5).  Their results hold NaN and inf (the
dense meaning of tin.md) and are not compared with the finite tools'
(the differential tests check them).  --no-baselines leaves GraphBLAS and
SciPy out (for -x runs: the comparison is galleyc with itself).
Output: Markdown tables on stdout, a CSV (default
benchmarks/out/kernels-<timestamp>.csv, git-ignored), a log of the
servers' stderr beside it, and a PNG of the ratios when gnuplot is
installed (benchmarks/setup installs it; the runner installs nothing).
Exit status 3 when results differ between tools.
"""
import argparse
import csv
import datetime
import gzip
import math
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import baseline_kernels as sk

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

GRAPHS = ["karate", "power", "ca-GrQc", "as-22july06", "polblogs",
          "luxembourg_osm", "crack", "copter2", "mdual", "yeast"]
# DATA/matrices/README.md: published (karate, ca-GrQc) or staged counts
TRIANGLES = {"karate": 45, "ca-GrQc": 48260, "as-22july06": 46873,
             "power": 651, "luxembourg_osm": 68, "copter2": 584982,
             "mdual": 21635, "crack": 20141}
TENSORS = ["library-tests/splatt_small.tns", "library-tests/taco_3tensor.tns",
           "library-tests/splatt_med.tns.gz", "kg/kinship/all.tns",
           "kg/umls/all.tns", "kg/wn18rr/all.tns.gz"]
QUICK_MATRICES = ["luxembourg_osm", "bcsstk33", "xenon1"]
SMOKE_MATRICES = ["west0067", "lp_afiro", "cage8"]
QUICK_GRAPHS = ["karate", "ca-GrQc"]
QUICK_TENSORS = ["kg/kinship/all.tns"]
MATRIX_KERNELS = ["spmv", "spgemm", "sddmm"]
ALL_KERNELS = ["spmv", "spgemm", "sddmm", "mttkrp", "tri_full", "tri_lower"]
PROGRAMS = {k: os.path.join(HERE, "kernels", k + ".tin")
            for k in ("spmv", "spgemm", "sddmm", "mttkrp", "tri_lower")}
PROGRAMS["tri_full"] = os.path.join(REPO, "examples", "triangles.tin")
VARIANT = {"spmv": "A", "spgemm": "A", "sddmm": "A", "mttkrp": "T",
           "tri_full": "G", "tri_lower": "L"}
GRB_KERNELS = {"spmv", "spgemm", "sddmm", "tri_full", "tri_lower"}

COLUMNS = ["kind", "round", "tool", "file", "kernel", "nnz", "calls",
           "call_ms", "call_min_ms", "kernel_ms", "transpose_ms", "first_ms",
           "compile_ms", "backend", "sum", "wsum", "asum", "count",
           "load_start", "load_end", "note"]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def loadavg():
    with open("/proc/loadavg") as f:
        return f.read().split()[:3]


# ---------------------------------------------------------------- files

def mtx_header(path):
    """(rows, cols, stored, symmetric) from a Matrix Market header, or
    None when it is not a coordinate matrix."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", errors="replace") as f:
        banner = f.readline().lower().split()
        if len(banner) < 5 or banner[2] != "coordinate":
            return None
        for line in f:
            if line.strip() and not line.startswith("%"):
                r, c, s = (int(v) for v in line.split()[:3])
                return r, c, s, banner[4] != "general"
    return None


def find_matrices(data, min_nnz, only):
    """name -> path of every matrix that may hold min_nnz entries."""
    out = {}
    for root, dirs, files in os.walk(os.path.join(data, "matrices")):
        dirs.sort()
        for f in sorted(files):
            if not (f.endswith(".mtx") or f.endswith(".mtx.gz")):
                continue
            name = f[:-7] if f.endswith(".gz") else f[:-4]
            if only and name not in only:
                continue
            h = mtx_header(os.path.join(root, f))
            if h and (2 * h[2] if h[3] else h[2]) >= min_nnz:
                out[name] = os.path.join(root, f)
    return out


def find_graph(data, name, scratch):
    """The path of a graph's Matrix Market file; yeast is converted from
    its subgraph-benchmark format (t N M / v ID LABEL DEG / e U V)."""
    if name == "yeast":
        src = os.path.join(data, "subgraph", "fastest-yeast", "yeast.graph")
        if not os.path.exists(src):
            return None
        edges, n = [], 0
        with open(src) as f:
            for line in f:
                t = line.split()
                if t and t[0] == "t":
                    n = int(t[1])
                elif t and t[0] == "e":
                    u, v = int(t[1]) + 1, int(t[2]) + 1
                    edges.append((max(u, v), min(u, v)))  # lower triangle
        dst = os.path.join(scratch, "yeast.mtx")
        with open(dst, "w") as f:
            f.write("%%MatrixMarket matrix coordinate pattern symmetric\n")
            f.write("%% converted from %s by benchmarks/kernels.py\n" % src)
            f.write("%d %d %d\n" % (n, n, len(edges)))
            f.writelines("%d %d\n" % e for e in edges)
        return dst
    for root, dirs, files in os.walk(os.path.join(data, "matrices")):
        for ext in (".mtx", ".mtx.gz"):
            if name + ext in files:
                return os.path.join(root, name + ext)
    return None


def prep_file(bench, scratch, name, path, graph):
    """`bench_kernels prep`: the operand files; a dict of the printed
    fields, or None."""
    cmd = [bench, "prep"] + (["-g"] if graph else []) + ["-o", scratch, name,
                                                         path]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0 or not p.stdout.startswith("ok"):
        log("warning: %s: %s" % (name, p.stderr.strip() or p.stdout.strip()))
        return None
    return dict(kv.split("=", 1) for kv in p.stdout.split()[1:])


# ---------------------------------------------------------------- tools

class Server:
    """A kernel server (bench_kernels serve, baseline_graphblas serve):
    one command line in, one reply line out, each reply within timeout
    seconds or the server is killed."""

    def __init__(self, argv, errlog, timeout):
        # OpenMP's threads (GraphBLAS's) spin for a while after each call
        # by default, holding the second core while the next tool of the
        # round runs; passive waiting keeps the rounds independent
        env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=errlog,
                                     text=True, bufsize=1, env=env)
        self.timeout = timeout
        self.dead = None

    def ask(self, line, timeout=None):
        if self.dead:
            return {"error": self.dead}
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self.dead = "server died"
            return {"error": self.dead}
        ready, _, _ = select.select([self.proc.stdout], [], [],
                                    timeout or self.timeout)
        reply = self.proc.stdout.readline() if ready else None
        if not reply:
            self.kill("no reply within %.0f s" % (timeout or self.timeout)
                      if reply is None else "server died")
            return {"error": self.dead}
        words = reply.split()
        if words[0] != "ok":
            return {"error": reply[len(words[0]):].strip()}
        return dict(w.split("=", 1) for w in words[1:])

    def kill(self, why):
        self.dead = why
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def quit(self):
        if self.proc.poll() is None and not self.dead:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.kill("did not quit")


class ServerJob:
    def __init__(self, server, jid, prep_cmd):
        self.server, self.jid, self.prep_cmd = server, jid, prep_cmd

    def prep(self):
        return self.server.ask(self.prep_cmd)

    def run(self, n):
        return self.server.ask("run %s %d" % (self.jid, n))


class ScipyJob:
    def __init__(self, fn):
        self.fn = fn

    def prep(self):
        t0 = time.perf_counter()
        self.fn()
        return {"first_ms": (time.perf_counter() - t0) * 1e3}

    def run(self, n):
        times, result = sk.time_calls(self.fn, n)
        s, w, a, c = sk.sums(result)
        times.sort()
        mid = len(times) // 2
        med = times[mid] if len(times) % 2 else (times[mid - 1] + times[mid]) / 2
        return {"calls": n, "call_ms": med, "call_min_ms": times[0], "sum": s,
                "wsum": w, "asum": a, "count": c}


# ---------------------------------------------------------------- driver

def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="benchmarks/run kernels",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=__doc__.split("\n\n", 1)[0].split("--", 1)[1].strip(),
        epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("build", nargs="?", default=os.path.join(REPO, "build"),
                    help="a configured build directory (default build/); "
                    "`make benchmarks` is run there")
    ap.add_argument("-q", "--quick", action="store_true",
                    help="quick mode: 2 rounds, matrices %s, graphs %s, "
                    "tensor kinship, TARGET_MS 20, a shorter triad"
                    % (",".join(QUICK_MATRICES), ",".join(QUICK_GRAPHS)))
    ap.add_argument("--smoke", action="store_true",
                    help="a few seconds: 1 round on tiny files (%s, graph "
                    "karate, tensor splatt_small), no triad; checks that "
                    "the harness and every tool agree"
                    % ",".join(SMOKE_MATRICES))
    ap.add_argument("-r", "--rounds", type=int,
                    help="rounds (default 10; quick 2)")
    ap.add_argument("-b", "--backends", default="default",
                    help="galleyc backends, comma-separated, of default, "
                    "clang, tcc, aot, aot-clang (the `galleyc compile` "
                    "output built with gcc, or clang, -O3 -march=native "
                    "-ffp-contract=off and loaded, timed per call like "
                    "the others; default: default, the one users get)")
    ap.add_argument("-j", "--threads",
                    help="thread counts, comma-separated (e.g. 1,2): each "
                    "galleyc backend runs as galleyc-B@N with N threads "
                    "and GraphBLAS as graphblas@N (GxB_NTHREADS N), all in "
                    "the same rounds (default: galleyc's default threads, "
                    "GraphBLAS on 1)")
    ap.add_argument("-k", "--kernels", default=",".join(ALL_KERNELS),
                    help="kernels, comma-separated (default all: %s)"
                    % ",".join(ALL_KERNELS))
    ap.add_argument("-m", "--matrices",
                    help="only these matrices (names, comma-separated; "
                    "default every one with MIN_NNZ entries)")
    ap.add_argument("-g", "--graphs",
                    help="the triangle graphs (default %s)" % ",".join(GRAPHS))
    ap.add_argument("-z", "--min-nnz", type=int, default=100000,
                    help="least stored entries of a matrix (default 100000)")
    ap.add_argument("-T", "--target-ms", type=float,
                    help="a batch of calls lasts about this long (default "
                    "100; quick 20)")
    ap.add_argument("-M", "--max-calls", type=int, default=100,
                    help="most calls in a batch (default 100)")
    ap.add_argument("-c", "--cap", type=float, default=20,
                    help="a tool whose first or warm call takes longer (s) "
                    "sits out the rounds of that workload (default 20)")
    ap.add_argument("-x", "--exceptions",
                    help="exception splitting: also run every galleyc "
                    "backend on the operands with non-finite values, one "
                    "tool galleyc-B~SPEC per SPEC (comma-separated: infN, "
                    "infNnanM; e.g. inf4,inf4nan1)")
    ap.add_argument("--no-baselines", action="store_true",
                    help="run galleyc only (no GraphBLAS, no SciPy)")
    ap.add_argument("-S", "--no-stream", action="store_true",
                    help="skip the STREAM triad")
    ap.add_argument("-N", "--stream-n", type=int,
                    help="triad array length (default 50000000; quick "
                    "20000000)")
    ap.add_argument("-o", "--csv", help="the CSV to write (default "
                    "benchmarks/out/kernels-<timestamp>.csv)")
    ap.add_argument("-t", "--table", metavar="CSV",
                    help="only print the tables of an earlier run's CSV")
    ap.add_argument("--no-build", action="store_true",
                    help="do not run `make benchmarks`")
    ap.add_argument("--keep", action="store_true",
                    help="keep the scratch directory of operand files")
    a = ap.parse_args(argv)
    if a.smoke:
        a.rounds, a.target_ms, a.no_stream, a.min_nnz = a.rounds or 1, 1.0, True, 0
        a.matrices = a.matrices or ",".join(SMOKE_MATRICES)
        a.graphs = a.graphs or "karate"
    a.rounds = a.rounds or (2 if a.quick else 10)
    a.target_ms = a.target_ms or (20.0 if a.quick else 100.0)
    a.stream_n = a.stream_n or (20000000 if a.quick else 50000000)
    for b in a.backends.split(","):
        if b not in ("default", "clang", "tcc", "aot", "aot-clang"):
            ap.error("unknown backend %r (default, clang, tcc, aot, "
                     "aot-clang)" % b)
    try:
        a.thread_counts = [int(t) for t in a.threads.split(",")] \
            if a.threads else []
    except ValueError:
        ap.error("bad --threads %r (numbers, comma-separated)" % a.threads)
    if any(t < 1 for t in a.thread_counts):
        ap.error("thread counts must be positive")
    for k in a.kernels.split(","):
        if k not in ALL_KERNELS:
            ap.error("unknown kernel %r (%s)" % (k, ", ".join(ALL_KERNELS)))
    a.poisons = a.exceptions.split(",") if a.exceptions else []
    for x in a.poisons:
        import re
        if not re.fullmatch(r"inf\d+(nan\d+)?", x):
            ap.error("bad exception spec %r (infN or infNnanM)" % x)
    if a.rounds < 1 or a.max_calls < 1 or a.target_ms <= 0:
        ap.error("-r, -M and -T must be positive")
    return a


class Writer:
    def __init__(self, path):
        self.f = open(path, "w", newline="")
        self.w = csv.DictWriter(self.f, COLUMNS, extrasaction="ignore")
        self.w.writeheader()

    def row(self, **kv):
        self.w.writerow(kv)
        self.f.flush()


def git_commit():
    try:
        c = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                           capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain",
                                "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return c + ("+dirty" if dirty else "")
    except OSError:
        return "?"


def build(builddir):
    if not os.path.exists(os.path.join(builddir, "Makefile")):
        sys.exit("benchmarks/run kernels: %s is not a configured build "
                 "directory" % builddir)
    log("== make -C %s benchmarks" % builddir)
    if subprocess.run(["make", "-C", builddir, "-j1", "benchmarks"],
                      stdout=sys.stderr).returncode != 0:
        sys.exit("benchmarks/run kernels: make benchmarks failed")


def stream(builddir, n, w):
    log("== STREAM triad (bench_stream -n %d, 1 thread)" % n)
    p = subprocess.run([os.path.join(builddir, "benchmarks", "bench_stream"),
                        "-n", str(n), "-r", "10" if n >= 50000000 else "5",
                        "-t", "1"], capture_output=True, text=True)
    if p.returncode != 0 or not p.stdout:
        log("warning: bench_stream failed: %s" % p.stderr.strip())
        return
    f = p.stdout.strip().split(",")  # stream,triad-1t,triad,N,reps,med,min,bytes,note
    w.row(kind="stream", tool="stream", file="triad-1t", nnz=f[3],
          calls=f[4], call_ms=f[5], call_min_ms=f[6], count=f[7],
          note=",".join(f[8:]))


def plan_workloads(a, data, scratch):
    """[(name, path, graph?)] files to prep and the (name, kernel) pairs."""
    kernels = a.kernels.split(",")
    only = set(a.matrices.split(",")) if a.matrices else (
        set(QUICK_MATRICES) if a.quick else None)
    graphs = a.graphs.split(",") if a.graphs else (
        QUICK_GRAPHS if a.quick else GRAPHS)
    files = {}
    if any(k in kernels for k in MATRIX_KERNELS):
        for name, path in find_matrices(data, a.min_nnz, only).items():
            files[name] = {"path": path, "graph": False, "matrix": True}
    if any(k.startswith("tri_") for k in kernels):
        for g in graphs:
            path = find_graph(data, g, scratch)
            if not path:
                log("warning: no graph %s" % g)
                continue
            files.setdefault(g, {"path": path, "matrix": False})["graph"] = True
    if "mttkrp" in kernels:
        for t in (["library-tests/splatt_small.tns"] if a.smoke else
                  QUICK_TENSORS if a.quick else TENSORS):
            path = os.path.join(data, "tensors", t)
            name = t.split("/")[1] if t.startswith("kg/") else \
                os.path.basename(t).split(".")[0]
            if os.path.exists(path):
                files[name] = {"path": path, "graph": False, "matrix": False,
                               "tensor": True}
            else:
                log("warning: no %s" % path)
    return files, kernels


def on_sigterm(signum, frame):
    raise KeyboardInterrupt  # the same clean-up and tables as Ctrl-C


def main(argv):
    signal.signal(signal.SIGTERM, on_sigterm)
    a = parse_args(argv)
    if a.table:
        import report
        sys.exit(report.kernels(a.table))
    data = os.environ.get("GALLEY_DATA_DIR",
                          os.path.join(REPO, "..", "shared", "data"))
    if not os.path.isdir(os.path.join(data, "matrices")):
        sys.exit("benchmarks/run kernels: no %s/matrices (set "
                 "GALLEY_DATA_DIR)" % data)
    if not a.no_build:
        build(a.build)
    bench = os.path.join(a.build, "benchmarks", "bench_kernels")
    grb = os.path.join(a.build, "benchmarks", "baseline_graphblas")
    for exe in (bench, grb):
        if not os.access(exe, os.X_OK):
            sys.exit("benchmarks/run kernels: no %s (make benchmarks)" % exe)
    outdir = os.path.join(HERE, "out")
    os.makedirs(outdir, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    csvpath = a.csv or os.path.join(outdir, "kernels-%s.csv" % stamp)
    errlog = open(csvpath[:-4] + ".log" if csvpath.endswith(".csv")
                  else csvpath + ".log", "w")
    scratch = tempfile.mkdtemp(prefix="galley-kernels.",
                               dir=os.environ.get("TMPDIR", "/tmp"))
    w = Writer(csvpath)
    started = time.time()
    servers = []
    try:
        status = drive(a, data, bench, grb, scratch, w, errlog, servers)
    except KeyboardInterrupt:
        log("== interrupted: the tables of what was measured")
        status = 130
    finally:
        for s in servers:
            s.quit()
        if a.keep:
            log("== kept %s" % scratch)
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    w.f.close()
    log("== done in %.0f s" % (time.time() - started))
    import report
    status = report.kernels(csvpath) or status
    dat = csvpath[:-4] + ".dat"
    if os.path.exists(dat):
        subprocess.run(["bash", os.path.join(HERE, "run"), "plot", dat,
                        csvpath[:-4] + ".png",
                        "galleyc kernels: best baseline / galleyc per call "
                        "(median of rounds)"])
    try:
        latest = os.path.join(outdir, "kernels-latest.csv")
        shutil.copyfile(csvpath, latest)
    except OSError:
        pass
    log("CSV: %s   servers' log: %s" % (csvpath, errlog.name))
    return status


def drive(a, data, bench, grb, scratch, w, errlog, servers):
    # with --threads, every backend at every count (bench_kernels' NAME@N)
    backends = ["%s@%d" % (b, t) for b in a.backends.split(",")
                for t in a.thread_counts] or a.backends.split(",")
    # GraphBLAS: one server per thread count, tool graphblas@N
    grb_threads = a.thread_counts or [None]
    w.row(kind="meta", note="date=%s commit=%s rounds=%d target_ms=%g "
          "max_calls=%d cap_s=%g backends=%s %s nproc=%d" % (
              datetime.datetime.now().isoformat(timespec="seconds"),
              git_commit(), a.rounds, a.target_ms, a.max_calls, a.cap,
              "+".join(backends), sk.version(),
              os.cpu_count()))
    files, kernels = plan_workloads(a, data, scratch)
    log("== reading %d files with galleyc (bench_kernels prep)" % len(files))
    pairs = []  # (name, kernel, nnz)
    for name, f in files.items():
        info = prep_file(bench, scratch, name, f["path"], f["graph"])
        if not info:
            w.row(kind="error", file=name, note="prep failed")
            continue
        dims = info["dims"].split("x")
        if f.get("matrix") and int(info["nnz"]) < a.min_nnz:
            f["matrix"] = False  # symmetric, and fewer once expanded
        w.row(kind="file", file=name, nnz=info["nnz"], note="dims=%s path=%s%s"
              % (info["dims"], f["path"], " g_nnz=%s l_nnz=%s" % (
                  info["g_nnz"], info["l_nnz"]) if f["graph"] else ""))
        for k in kernels:
            if f.get("matrix") and k in MATRIX_KERNELS:
                if k == "spgemm" and dims[0] != dims[1]:
                    w.row(kind="skip", file=name, kernel=k,
                          note="not square: no A*A")
                    continue
                pairs.append((name, k, int(info["nnz"])))
            elif f.get("tensor") and k == "mttkrp" and info["order"] == "3":
                pairs.append((name, k, int(info["nnz"])))
            elif f["graph"] and k.startswith("tri_"):
                pairs.append((name, k, int(info["g_nnz" if k == "tri_full"
                                                   else "l_nnz"])))
    if not a.no_stream:
        stream(a.build, a.stream_n, w)

    # servers and jobs: first calls, then a warm call to size the batches
    timeout = max(60.0, 3 * a.cap + 30)
    jobs = {}  # (name, kernel) -> [(tool, job, calls)]
    by_file = {}
    for name, k, nnz in pairs:
        by_file.setdefault(name, []).append((k, nnz))
    log("== first calls: %d workloads x (%s, graphblas, scipy)" % (
        len(pairs), ", ".join("galleyc-" + b for b in backends)))
    for name, ks in by_file.items():
        variants = sorted({VARIANT[k] for k, _ in ks})
        gs = Server([bench, "serve", "-d", scratch], errlog, timeout)
        servers.append(gs)
        gbs = []  # (tool, server)
        if any(k in GRB_KERNELS for k, _ in ks) and not a.no_baselines:
            for t in grb_threads:
                gb = Server([grb, "serve"] + (["-t", str(t)] if t else []),
                            errlog, timeout)
                servers.append(gb)
                gbs.append(("graphblas" + ("@%d" % t if t else ""), gb))
        loaded = {}
        for v in variants:
            path = os.path.join(scratch, "%s.%s.bin" % (name, v))
            r = gs.ask("load %s %s" % (v, path))
            if "error" in r:
                w.row(kind="error", tool="galleyc", file=name,
                      note="load %s: %s" % (v, r["error"]))
            for gtool, gb in gbs:
                if v == "T":
                    continue
                rg = gb.ask("load %s %s" % (v, path))
                if "error" in rg:
                    w.row(kind="error", tool=gtool, file=name,
                          note="load %s: %s" % (v, rg["error"]))
            for x in a.poisons:
                # the graph G is symmetric: its mirrored entries too
                r = gs.ask("load %s~%s %s %s%s" % (v, x, path, x,
                                                  "s" if v == "G" else ""))
                if "error" in r:
                    w.row(kind="error", tool="galleyc", file=name,
                          note="load %s~%s: %s" % (v, x, r["error"]))
            loaded[v] = sk.load(path)
        for k, nnz in ks:
            v = VARIANT[k]
            tools = []
            for b in backends:
                jid = "%s-%s" % (k, b)
                tools.append(("galleyc-" + b, ServerJob(
                    gs, jid, "prep %s %s %s %s" % (jid, v, b, PROGRAMS[k]))))
                for x in a.poisons:
                    xid = "%s~%s" % (jid, x)
                    tools.append(("galleyc-%s~%s" % (b, x), ServerJob(
                        gs, xid, "prep %s %s~%s %s %s" % (
                            xid, v, x, b, PROGRAMS[k]))))
            for gtool, gb in gbs:
                if k in GRB_KERNELS:
                    tools.append((gtool, ServerJob(
                        gb, k, "prep %s %s %s" % (k, v, k))))
            fn = None if a.no_baselines else sk.make_call(k, *loaded[v])
            if fn:
                tools.append(("scipy", ScipyJob(fn)))
            ready = []
            for tool, job in tools:
                r = job.prep()
                if "error" in r:
                    w.row(kind="error", tool=tool, file=name, kernel=k,
                          nnz=nnz, note="first call: " + r["error"])
                    log("   %s %s %s: ERROR %s" % (name, k, tool, r["error"]))
                    continue
                warm = job.run(1) if float(r["first_ms"]) <= a.cap * 1e3 \
                    else {"error": "first call over the cap"}
                note = "warm_ms=%s plan_ms=%s exec_ms=%s swap_ms=%s" % (
                    warm.get("call_ms", "-"), r.get("plan_ms", ""),
                    r.get("exec_ms", ""), r.get("swap_ms", "-"))
                w.row(kind="first", tool=tool, file=name, kernel=k, nnz=nnz,
                      first_ms=r["first_ms"], compile_ms=r.get("compile_ms", ""),
                      backend=r.get("backend", ""), note=note)
                if "error" in warm or float(warm["call_ms"]) > a.cap * 1e3:
                    w.row(kind="skip", tool=tool, file=name, kernel=k, nnz=nnz,
                          note="over the cap of %g s: first %.0f ms; warm %s"
                          % (a.cap, float(r["first_ms"]),
                             warm.get("call_ms", warm.get("error"))))
                    continue
                calls = max(1, min(a.max_calls, int(math.ceil(
                    a.target_ms / max(float(warm["call_ms"]), 1e-3)))))
                ready.append((tool, job, calls))
            jobs[(name, k)] = (nnz, ready)
        log("   %s: %s" % (name, ", ".join(k for k, _ in ks)))

    # the rounds
    for rnd in range(1, a.rounds + 1):
        l0, t0 = loadavg(), time.time()
        for (name, k), (nnz, ready) in jobs.items():
            if not ready:
                continue
            shift = (rnd - 1) % len(ready)
            for tool, job, calls in ready[shift:] + ready[:shift]:
                r = job.run(calls)
                if "error" in r:
                    w.row(kind="error", round=rnd, tool=tool, file=name,
                          kernel=k, nnz=nnz, note=r["error"])
                    continue
                w.row(kind="run", round=rnd, tool=tool, file=name, kernel=k,
                      nnz=nnz, calls=r["calls"], call_ms=r["call_ms"],
                      call_min_ms=r["call_min_ms"],
                      kernel_ms=r.get("kernel_ms", ""),
                      transpose_ms=r.get("transpose_ms", ""),
                      backend=r.get("backend", ""), sum=r["sum"],
                      wsum=r["wsum"], asum=r["asum"], count=r["count"],
                      note="" if r.get("reused", "1") == "1" else
                      "NOT reused: planned or compiled again")
        l1 = loadavg()
        w.row(kind="round", round=rnd, load_start=l0[0], load_end=l1[0],
              call_ms="%.1f" % ((time.time() - t0) * 1e3),
              note="loadavg start %s end %s" % (" ".join(l0), " ".join(l1)))
        log("== round %d/%d: %.1f s, load %s -> %s" % (
            rnd, a.rounds, time.time() - t0, l0[0], l1[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
