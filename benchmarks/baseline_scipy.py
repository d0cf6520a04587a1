#!/usr/bin/python3
"""baseline_scipy.py -- the SciPy side of benchmarks/run.

Times, for each Matrix Market file (optionally .gz), the operations of
bench_load that SciPy has an equivalent for, and prints the same CSV lines:

    tool,file,op,nnz,reps,median_ms,min_ms,bytes,note

  read_csr   scipy.io.mmread(file).tocsr()   (bench_load: galley_tensor_read)
  to_csc     A.tocsc()                       (bench_load: CSR -> dense:1,list:0)
  to_coo     A.tocoo()                       (bench_load: galley_tensor_to_coo)

bytes is the memory of the result's arrays; a last line per file, op
peak_rss, gives the process's peak resident set size.

Run it with Debian's interpreter (/usr/bin/python3, package python3-scipy);
it needs nothing else.
"""
import argparse
import os
import resource
import statistics
import sys
import time

import numpy as np
import scipy
import scipy.io


def timed(fn, reps):
    times, result = [], None
    for _ in range(reps):
        result = None  # let the previous result go before the next run
        t0 = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return result, times


def nbytes(m):
    if hasattr(m, "indptr"):
        return m.data.nbytes + m.indices.nbytes + m.indptr.nbytes
    return m.data.nbytes + m.row.nbytes + m.col.nbytes


def emit(path, op, nnz, times, size, note=""):
    print("scipy,%s,%s,%d,%d,%.3f,%.3f,%d,%s" % (
        os.path.basename(path), op, nnz, len(times),
        statistics.median(times), min(times), size, note.replace(",", " ")),
        flush=True)


def bench(path, reps):
    a, times = timed(lambda: scipy.io.mmread(path).tocsr(), reps)
    nnz = int(a.nnz)
    emit(path, "read_csr", nnz, times, nbytes(a), "mmread().tocsr()")
    c, times = timed(a.tocsc, reps)
    emit(path, "to_csc", nnz, times, nbytes(c), "tocsc()")
    del c
    c, times = timed(a.tocoo, reps)
    emit(path, "to_coo", nnz, times, nbytes(c), "tocoo()")
    del c, a
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print("scipy,%s,peak_rss,%d,,,,%d," % (os.path.basename(path), nnz, rss),
          flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-r", "--reps", type=int, default=5)
    ap.add_argument("-n", "--no-header", action="store_true")
    ap.add_argument("--version", action="store_true",
                    help="print the SciPy and NumPy versions and exit")
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    if args.version:
        print("scipy %s numpy %s python %s" % (
            scipy.__version__, np.__version__, sys.version.split()[0]))
        return 0
    if args.reps < 1 or not args.files:
        ap.error("need REPS >= 1 and at least one file")
    if not args.no_header:
        print("tool,file,op,nnz,reps,median_ms,min_ms,bytes,note")
    for path in args.files:
        bench(path, args.reps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
