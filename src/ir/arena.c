/*
 * arena.c -- the bump allocator behind all compiler IR (style.md rule 6).
 *
 * Blocks grow geometrically (4 KiB doubling up to 1 MiB), so a program of
 * any size costs O(log) mallocs; an allocation larger than the next block
 * gets a block of its own.  Every allocation is zeroed and 16-byte
 * aligned.  Out of memory either longjmps to `oom` (the single catch at
 * the API entry) or returns NULL, as ir.h says.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

enum {
  ARENA_ALIGN = 16,
  ARENA_FIRST_BLOCK = 4096,
  ARENA_MAX_BLOCK = 1 << 20
};

struct ArenaBlock {
  ArenaBlock *prev; /* the previous (older) block */
  size_t size;      /* usable bytes in data[] */
  size_t used;      /* bytes handed out from data[] */
  /* the header is padded to ARENA_ALIGN so data[] is aligned */
  _Alignas(ARENA_ALIGN) unsigned char data[];
};

Arena *arena_new(void) {
  return calloc(1, sizeof(Arena));
}

void arena_free(Arena *a) {
  if (!a) return;
  ArenaBlock *b = a->head;
  while (b) {
    ArenaBlock *prev = b->prev;
    free(b);
    b = prev;
  }
  free(a);
}

/* Report an allocation failure the way the arena's owner asked for. */
static void *arena_fail(Arena *a) {
  if (a->oom) longjmp(*a->oom, 1);
  return NULL;
}

/* Add a block with room for at least `need` bytes. */
static ArenaBlock *arena_grow(Arena *a, size_t need) {
  size_t size = a->head ? a->head->size * 2 : ARENA_FIRST_BLOCK;
  if (size > ARENA_MAX_BLOCK) size = ARENA_MAX_BLOCK;
  if (size < need) size = need;
  ArenaBlock *b = malloc(sizeof(ArenaBlock) + size);
  if (!b) return NULL;
  b->prev = a->head;
  b->size = size;
  b->used = 0;
  a->head = b;
  return b;
}

void *arena_alloc(Arena *a, size_t size) {
  /* no object may exceed PTRDIFF_MAX; refusing early also keeps absurd
   * sizes away from malloc (sanitizers report those) */
  if (size > (size_t)PTRDIFF_MAX - sizeof(ArenaBlock) - ARENA_ALIGN)
    return arena_fail(a);
  size_t rounded = (size + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
  if (rounded == 0) rounded = ARENA_ALIGN; /* distinct pointers for size 0 */
  ArenaBlock *b = a->head;
  if (!b || b->size - b->used < rounded) {
    b = arena_grow(a, rounded);
    if (!b) return arena_fail(a);
  }
  void *p = b->data + b->used;
  b->used += rounded;
  a->bytes += rounded;
  memset(p, 0, rounded);
  return p;
}

char *arena_strndup(Arena *a, const char *s, size_t n) {
  char *d = arena_alloc(a, n + 1);
  if (!d) return NULL;
  memcpy(d, s, n);
  d[n] = '\0';
  return d;
}

int *arena_ints(Arena *a, int n, const int *v) {
  int *c = arena_alloc(a, ((size_t)n + 1) * sizeof *c);
  if (c && n)
    memcpy(c, v, (size_t)n * sizeof *c);
  return c;
}

char *arena_printf(Arena *a, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) return NULL;
  char *d = arena_alloc(a, (size_t)n + 1);
  if (!d) return NULL;
  va_start(ap, fmt);
  vsnprintf(d, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return d;
}
