#!/usr/bin/env python3
"""baseline_chain.py -- SciPy baseline of the matrix-chain benchmark
(benchmarks/run opt): E = (A @ B) @ C with scipy.sparse CSR, on the matrices
benchmarks/bench_opt chain -d DIR wrote (DIR/A.bin, B.bin, C0.bin..C5.bin:
int64 n, int64 nnz, nnz int64 rows, nnz int64 cols, nnz float64 values).

    baseline_chain.py [-r REPS] DIR

CSV on stdout: chain,scipy,C_DENSITY,C_NNZ,,,exec_ms_median,reps,checksum,E_nnz,
(the median of REPS timed products, after one warm-up; loading excluded).
"""
import sys, time, statistics
import numpy as np
import scipy.sparse as sp

DENS = [1, 0.1, 1e-2, 1e-3, 1e-4, 1e-5]


def load(path):
    raw = np.fromfile(path, dtype=np.int64, count=2)
    n, nnz = int(raw[0]), int(raw[1])
    rows = np.fromfile(path, dtype=np.int64, count=nnz, offset=16)
    cols = np.fromfile(path, dtype=np.int64, count=nnz, offset=16 + 8 * nnz)
    vals = np.fromfile(path, dtype=np.float64, count=nnz, offset=16 + 16 * nnz)
    return sp.csr_matrix((vals, (rows, cols)), shape=(n, n))


def main():
    args = sys.argv[1:]
    reps = 3
    if args[:1] == ["-r"]:
        reps = int(args[1])
        args = args[2:]
    d = args[0]
    A, B = load(d + "/A.bin"), load(d + "/B.bin")
    for k, dens in enumerate(DENS):
        C = load("%s/C%d.bin" % (d, k))
        E = (A @ B) @ C  # warm-up
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            E = (A @ B) @ C
            ts.append((time.perf_counter() - t0) * 1e3)
        E.eliminate_zeros()
        print("chain,scipy,%g,%d,,,%.3f,%d,%.10g,%d," % (
            dens, C.nnz, statistics.median(ts), reps, E.sum(), E.nnz), flush=True)


if __name__ == "__main__":
    main()
