/* io_reader.c -- placeholder, being written. */
#include "rt_internal.h"
