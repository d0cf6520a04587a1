#!/usr/bin/python3
"""mf_numpy.py -- the matrix factorization of examples/mf/mf.c, written
independently with numpy and scipy: the same starting factors (the same
integer formula), the same default step, the textbook gradients of the
squared error over R's nonzero entries plus an L2 penalty,

    E = (R - U V^T) on R's pattern
    dL/dU = -2 E V + 2 lam U,    dL/dV = -2 E^T U + 2 lam V,

and the same printed lines (step N  loss X), so that
tests/test_mf_example.sh can compare the two runs step by step.

    python3 mf_numpy.py [-s STEPS] [-k RANK] [-r RATE] [-l LAMBDA] MATRIX.mtx
"""
import argparse
import sys

import numpy as np
import scipy.io
import scipy.sparse as sp

MASK64 = (1 << 64) - 1


def init_factor(rows, rank, which):
    """mf.c's init_value for every (row, k), in exact 64-bit arithmetic."""
    row = np.arange(rows, dtype=np.uint64)[:, None]
    k = np.arange(rank, dtype=np.uint64)[None, :]
    with np.errstate(over="ignore"):
        h = (row * np.uint64(2654435761) + k * np.uint64(40503)
             + np.uint64(which * 97) + np.uint64(12345))
        h = (h * np.uint64(6364136223846793005)
             + np.uint64(1442695040888963407)) >> np.uint64(33)
    return 0.3 * ((h % np.uint64(1000000)).astype(np.float64) / 1e6 - 0.5)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-s", type=int, default=20, dest="steps")
    ap.add_argument("-k", type=int, default=8, dest="rank")
    ap.add_argument("-r", type=float, default=0.0, dest="rate")
    ap.add_argument("-l", type=float, default=1e-3, dest="lam")
    ap.add_argument("matrix")
    a = ap.parse_args()

    R = sp.coo_matrix(scipy.io.mmread(a.matrix))
    R = sp.csr_matrix(R)
    R.sum_duplicates()
    R.eliminate_zeros()
    R = R.tocoo()
    rows, cols, vals = R.row, R.col, R.data
    m, n = R.shape

    rate = a.rate
    if rate <= 0:
        most = max(1, np.bincount(rows, minlength=m).max(),
                   np.bincount(cols, minlength=n).max())
        mean = np.abs(vals).mean() if len(vals) else 1.0
        rate = 1.0 / (most * mean)
    print("rate %.6e" % rate)

    U = init_factor(m, a.rank, 0)
    V = init_factor(n, a.rank, 1)
    first = loss = 0.0
    for t in range(a.steps + 1):
        err = vals - np.einsum("ek,ek->e", U[rows], V[cols])
        loss = float(err @ err) + a.lam * (float((U * U).sum())
                                           + float((V * V).sum()))
        E = sp.csr_matrix((err, (rows, cols)), shape=(m, n))
        GU = -2 * (E @ V) + 2 * a.lam * U
        GV = -2 * (E.T @ U) + 2 * a.lam * V
        if t == 0:
            first = loss
        print("step %3d  loss %.12e" % (t, loss))
        if t < a.steps:
            U = U - rate * GU
            V = V - rate * GV
    print("loss %.6e -> %.6e in %d steps" % (first, loss, a.steps))
    print("sum U %.12e  sum V %.12e" % (U.sum(), V.sum()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
