/* optimize.c -- placeholder, being written. */
#include "logical.h"
