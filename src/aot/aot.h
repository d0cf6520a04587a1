/*
 * aot.h -- ahead-of-time drivers (`galleyc compile`): the layer above the
 * executor's peers (physical plans, codegen), called by the API.
 */
#ifndef GALLEY_AOT_H_INTERNAL
#define GALLEY_AOT_H_INTERNAL

#include "phys.h"

/* Ahead of time (`galleyc compile`): append to *src (as cg_plan does) the
 * C text of a driver `int galley_aot_run(const struct galley_tensor *const
 * *inputs, struct galley_tensor **outputs)` that runs the plan's queries
 * in order with the kernels cg_plan emitted, plus its helpers (malloc
 * only: no libgalley).  inputs[] are the tensors the plan was made for;
 * the driver takes each in the format the plan reads it in (its own, or
 * the format of the transpose query that copies it: the host passes it
 * transposed) and refuses others (order, dims, formats, fills).
 * Supported: plans whose results and intermediates are all-dense and that
 * read each input in one format and transpose no intermediate; others
 * fail with GALLEY_EINVAL and a message saying why. */
galley_status aot_driver(const PhysPlan *pp, const galley_tensor *const *inputs,
                         char **src, size_t *len, galley_error *err);

/* The matching header: the kernel header's text and the driver's
 * declarations, in a new malloc()ed string. */
galley_status aot_header(const PhysPlan *pp, const galley_tensor *const *inputs,
                         char **text, galley_error *err);

#endif /* GALLEY_AOT_H_INTERNAL */
