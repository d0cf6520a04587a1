/* io_write.c -- placeholder, being written. */
#include "rt_internal.h"
