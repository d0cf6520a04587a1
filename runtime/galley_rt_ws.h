/*
 * galley_rt_ws.h -- the memory of a scatter workspace (galley_rt_ws of
 * galley_rt.h): the hashed table's slots, their growth, and freeing any
 * workspace.  libc only.  One source for the library's executor
 * (src/exec/exec.c) and the ahead-of-time runtime (runtime/aot_runtime.c,
 * whose embedded text carries this file's text in its place:
 * tools/embed_source.awk).
 */
#ifndef GALLEY_RT_WS_H
#define GALLEY_RT_WS_H

#include <stdlib.h>
#include <string.h>

#include "galley_rt.h"

/* The first hashed capacity: 2^GALLEY_RT_WS_HASH_BITS slots. */
#define GALLEY_RT_WS_HASH_BITS 10

/* Give w 2^bits empty slots (and room for half as many touched keys);
 * 0, or -1 with w's slots unchanged when memory runs out. */
static int galley_rt_ws_alloc_slots(galley_rt_ws *w, int bits) {
  int64_t cap = (int64_t)1 << bits;
  int64_t *slot_key = malloc((size_t)cap * sizeof *slot_key);
  double *val = malloc((size_t)cap * sizeof *val);
  int64_t *keys = realloc(w->keys, (size_t)(cap / 2) * sizeof *keys);
  if (keys)
    w->keys = keys;
  if (!slot_key || !val || !keys) {
    free(slot_key);
    free(val);
    return -1;
  }
  for (int64_t h = 0; h < cap; h++)
    slot_key[h] = -1;
  w->slot_key = slot_key;
  w->val = val;
  w->cap = cap;
  w->bits = bits;
  return 0;
}

/* The hashed workspace's grow callback: double the slots, rehash. */
static int galley_rt_ws_grow(galley_rt_ws *w) {
  if (w->bits >= 60)
    return -1;
  galley_rt_ws old = *w;
  if (galley_rt_ws_alloc_slots(w, old.bits + 1) != 0) {
    w->slot_key = old.slot_key;
    w->val = old.val;
    return -1;
  }
  for (int64_t h = 0; h < old.cap; h++) {
    if (old.slot_key[h] == -1)
      continue;
    int64_t g = galley_rt_ws_probe(w, old.slot_key[h]);
    w->slot_key[g] = old.slot_key[h];
    w->val[g] = old.val[h];
  }
  free(old.slot_key);
  free(old.val);
  return 0;
}

/* Free a dense or hashed workspace and zero it. */
static void galley_rt_ws_free(galley_rt_ws *w) {
  free(w->keys);
  free(w->val);
  free(w->seen);
  free(w->slot_key);
  memset(w, 0, sizeof *w);
}

#endif /* GALLEY_RT_WS_H */
