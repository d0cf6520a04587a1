/* plan.c -- placeholder, being written. */
#include "phys.h"
