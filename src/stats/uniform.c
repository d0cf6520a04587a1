/* uniform.c -- placeholder, being written. */
#include "stats.h"
