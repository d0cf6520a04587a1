/*
 * aot.h -- ahead of time (`galleyc compile`): the self-contained C file
 * and header of a physical plan (src/aot/aot.c).  A layer beside the
 * executor: it calls the physical plans, codegen and the runtime, and is
 * called by the API.
 */
#ifndef GALLEY_AOT_INTERNAL_H
#define GALLEY_AOT_INTERNAL_H

#include "phys.h"

/* The prefix of the entry points when none is given. */
#define AOT_DEFAULT_PREFIX "galley_aot"

/* Data-free planning: every index of an input whose size no `dim`
 * declaration gives is assumed this large, vectors half full and higher
 * orders with about AOT_ASSUMED_DEGREE entries per outermost coordinate
 * (man/galleyc.1 documents it). */
#define AOT_ASSUMED_DIM 1000
#define AOT_ASSUMED_DEGREE 8

/* Whether prefix is a C identifier of at most 64 characters. */
int aot_prefix_valid(const char *prefix);

/* finite[k] (per input, or a NULL table: every input whose data is
 * finite): whether the plan relies on input k storing only finite values
 * -- planned again with one of k's values made infinite, it differs --
 * so that the driver checks them at entry, O(nnz) a call.  Inputs the
 * plan does not rely on are not checked (SpMV's matrix: its missing
 * entries multiply x, so only x must be finite). */

/* The C file of the plan: kernels (the cg_plan source `kernels`, made
 * static), the embedded AOT runtime (runtime/aot_runtime.c), the plan as
 * tables and the entry points (PREFIX_run, _run_msg, _run_ex, the
 * handle's _threads_new, _run_threads, _prepare,
 * _threads_set_memory_budget, _threads_free, and _free, _strerror) and
 * the name tables, in a new malloc()ed *out.
 * inputs[] are the tensors the plan was made for: the driver takes each
 * in the format the kernels read it in, with its index widths (others
 * copied), its fill, and what the plan relied on (finite values, a
 * symmetry), checked at entry; sizes come from the data at run time. */
galley_status aot_source(const PhysPlan *pp, const galley_tensor *const *inputs,
                         const unsigned char *finite, const char *kernels,
                         const char *prefix, char **out, galley_error *err);

/* The matching header: guard PREFIX_H, the kernel header's text, extern
 * "C" declarations and their documentation, in a new malloc()ed *out. */
galley_status aot_header_text(const PhysPlan *pp,
                              const galley_tensor *const *inputs,
                              const unsigned char *finite,
                              const char *prefix, char **out,
                              galley_error *err);

/* A stand-in for unbound input k to plan with when no data is given: the
 * format fmt (NULL: galley_format_default), the declared fill (else 0),
 * the sizes of the indices it shares with bound[] inputs or that `dim`
 * declares, others and entries as AOT_ASSUMED_DIM says, finite values
 * (nonfinite: one +inf, so that the plan assumes none finite).  GALLEY_EINVAL when its
 * dense levels would be too large to make. */
galley_status aot_placeholder(const Program *p, int k,
                              const galley_format *fmt,
                              const galley_tensor *const *bound,
                              int nonfinite, galley_tensor **out,
                              galley_error *err);

#endif /* GALLEY_AOT_INTERNAL_H */
