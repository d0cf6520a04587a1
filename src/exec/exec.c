/* exec.c -- placeholder, being written. */
#include "phys.h"
