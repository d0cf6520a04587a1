/* front_internal.h -- placeholder, being written. */
#include "ir.h"
