/* codegen.c -- placeholder, being written. */
#include "phys.h"
