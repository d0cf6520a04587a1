"""tpch.py -- the shared definition of the TPC-H star-join features of
`benchmarks/run tpch` (used by convert.py and ../baseline_tpch.py).

The Galley paper's star join (section 7.1, with customers reached through
orders as in Galley's tpc_script_inference.jl):

  X[i,j] = sum(o,s,p: LI[i,o,s,p] * (O[j,o] + sum(c: OC[c,o]*C[j,c])
                                     + S[j,s] + P[j,p]))

i = a lineitem row (ordered by l_orderkey, l_linenumber), o = an order
(by o_orderkey, remapped to 0..n-1: order keys are sparse), c, s, p =
custkey, suppkey, partkey - 1.  Each table's features occupy a disjoint
block of j, so "+" concatenates them: the one-hot encoded categorical
columns (categories = the sorted distinct values of the column in its
table) and the numeric columns as floor(x) mod 100 (non-negative), in the
order of FEATURES below: 139 features in all.  theta[j] =
((7 j) mod 11 - 5) / 500.
"""
import gzip
import os

import numpy as np

# (table, column index in the .tbl file, column name, kind)
FEATURES = [
    ("orders", 2, "o_orderstatus", "onehot"),
    ("orders", 5, "o_orderpriority", "onehot"),
    ("orders", 7, "o_shippriority", "onehot"),
    ("orders", 3, "o_totalprice", "numeric"),
    ("customer", 3, "c_nationkey", "onehot"),
    ("customer", 6, "c_mktsegment", "onehot"),
    ("customer", 5, "c_acctbal", "numeric"),
    ("supplier", 3, "s_nationkey", "onehot"),
    ("supplier", 5, "s_acctbal", "numeric"),
    ("part", 2, "p_mfgr", "onehot"),
    ("part", 3, "p_brand", "onehot"),
    ("part", 6, "p_container", "onehot"),
    ("part", 5, "p_size", "numeric"),
    ("part", 7, "p_retailprice", "numeric"),
]
TABLES = ["lineitem", "orders", "customer", "supplier", "part"]


def read_table(d, name):
    """The .tbl(.gz) table as a list of columns (strings)."""
    path = os.path.join(d, name + ".tbl.gz")
    opener = gzip.open
    if not os.path.exists(path):
        path, opener = os.path.join(d, name + ".tbl"), open
    with opener(path, "rt") as f:
        rows = [line.rstrip("\n").rstrip("|").split("|") for line in f if line.strip()]
    return [list(c) for c in zip(*rows)]


def numeric(col):
    """floor(x) mod 100, non-negative."""
    return np.mod(np.floor(np.array(col, dtype=float)).astype(np.int64), 100).astype(float)


def layout(tables):
    """[(name, table, column, kind, offset, categories or None)], nfeatures."""
    out, off = [], 0
    for table, col, name, kind in FEATURES:
        if kind == "onehot":
            cats = sorted(set(tables[table][col]))
            out.append((name, table, col, kind, off, cats))
            off += len(cats)
        else:
            out.append((name, table, col, kind, off, None))
            off += 1
    return out, off


def theta(nf):
    j = np.arange(nf)
    return ((7 * j) % 11 - 5) / 500.0


def codes(tables, lay):
    """Per feature, per row of its table: the feature index j (one-hot) or
    the value (numeric)."""
    out = {}
    for name, table, col, kind, off, cats in lay:
        if kind == "onehot":
            pos = {v: k for k, v in enumerate(cats)}
            out[name] = np.array([off + pos[v] for v in tables[table][col]], dtype=np.int64)
        else:
            out[name] = numeric(tables[table][col])
    return out


def lineitem_order(li):
    """Lineitem rows sorted by (orderkey, linenumber): the i order."""
    ok = np.array(li[0], dtype=np.int64)
    ln = np.array(li[3], dtype=np.int64)
    return np.lexsort((ln, ok))
