#!/usr/bin/python3
"""convert.py -- TPC-H .tbl(.gz) tables to the tensors of the star-join
programs (linreg.tin, logreg.tin, covar.tin next to this script):

  LI.tns     LI[i, o, s, p] = 1 for lineitem row i of order o, supplier s,
             part p (order 4; i ordered by l_orderkey, l_linenumber; o =
             the order's position among the sorted order keys)
  OC.mtx     OC[c, o] = 1 when order o belongs to customer c
  O.mtx, C.mtx, S.mtx, P.mtx
             the feature matrices F[j, key] (139 x rows of the table): one
             1 per one-hot column in the column's block of j, and the
             numeric columns as floor(x) mod 100 (see tpch.py)
  theta.tns  theta[j] = ((7 j) mod 11 - 5) / 500, dense
  features.txt  the layout of j: NAME KIND OFFSET WIDTH

  convert.py -o OUTDIR TPCH_DIR      (TPCH_DIR holds lineitem.tbl.gz, ...)
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tpch  # noqa: E402


def write_mtx(path, rows, cols, vals, shape, pattern=False):
    with open(path, "w") as f:
        f.write("%%%%MatrixMarket matrix coordinate %s general\n" % ("pattern" if pattern else "real"))
        f.write("%d %d %d\n" % (shape[0], shape[1], len(rows)))
        if pattern:
            f.writelines("%d %d\n" % (r + 1, c + 1) for r, c in zip(rows, cols))
        else:
            f.writelines("%d %d %.17g\n" % (r + 1, c + 1, v) for r, c, v in zip(rows, cols, vals))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", required=True)
    ap.add_argument("tpch_dir")
    a = ap.parse_args()
    os.makedirs(a.o, exist_ok=True)
    T = {t: tpch.read_table(a.tpch_dir, t) for t in tpch.TABLES}
    lay, nf = tpch.layout(T)
    code = tpch.codes(T, lay)
    okeys = np.array(T["orders"][0], dtype=np.int64)
    order_pos = {k: n for n, k in enumerate(np.sort(okeys))}
    opos = np.array([order_pos[k] for k in okeys])        # orders row -> o
    no, nc, ns, npart = len(okeys), len(T["customer"][0]), len(T["supplier"][0]), len(T["part"][0])
    li = T["lineitem"]
    perm = tpch.lineitem_order(li)
    nl = len(perm)
    lo = np.array([order_pos[int(k)] for k in li[0]])[perm]
    lp = np.array(li[1], dtype=np.int64)[perm] - 1
    ls = np.array(li[2], dtype=np.int64)[perm] - 1
    with open(os.path.join(a.o, "LI.tns"), "w") as f:
        f.write("# dims: %d %d %d %d\n" % (nl, no, ns, npart))
        f.writelines("%d %d %d %d 1\n" % (i + 1, o + 1, s + 1, p + 1)
                     for i, (o, s, p) in enumerate(zip(lo, ls, lp)))
    cust = np.array(T["orders"][1], dtype=np.int64) - 1
    write_mtx(os.path.join(a.o, "OC.mtx"), cust, opos, None, (nc, no), pattern=True)
    # feature matrices F[j, row]
    keyrow = {"orders": opos,
              "customer": np.array(T["customer"][0], dtype=np.int64) - 1,
              "supplier": np.array(T["supplier"][0], dtype=np.int64) - 1,
              "part": np.array(T["part"][0], dtype=np.int64) - 1}
    size = {"orders": no, "customer": nc, "supplier": ns, "part": npart}
    for table, fname in (("orders", "O"), ("customer", "C"), ("supplier", "S"), ("part", "P")):
        rr, cc, vv = [], [], []
        for name, t, col, kind, off, cats in lay:
            if t != table:
                continue
            if kind == "onehot":
                rr.append(code[name])
                vv.append(np.ones(len(code[name])))
            else:
                rr.append(np.full(len(code[name]), off))
                vv.append(code[name])
            cc.append(keyrow[table])
        r, c, v = np.concatenate(rr), np.concatenate(cc), np.concatenate(vv)
        keep = v != 0
        write_mtx(os.path.join(a.o, fname + ".mtx"), r[keep], c[keep], v[keep], (nf, size[table]))
    th = tpch.theta(nf)
    with open(os.path.join(a.o, "theta.tns"), "w") as f:
        f.write("# dims: %d\n" % nf)
        f.writelines("%d %.17g\n" % (j + 1, t) for j, t in enumerate(th) if t != 0)
    with open(os.path.join(a.o, "features.txt"), "w") as f:
        for name, t, col, kind, off, cats in lay:
            f.write("%s %s %d %d\n" % (name, kind, off, len(cats) if cats else 1))
    print("convert.py: %d lineitems, %d orders, %d customers, %d suppliers, %d parts, %d features"
          % (nl, no, nc, ns, npart, nf), file=sys.stderr)


if __name__ == "__main__":
    main()
