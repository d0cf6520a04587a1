/* build.c -- placeholder, being written. */
#include "rt_internal.h"
