/* logical.c -- placeholder, being written. */
#include "logical.h"
