/* galleyc.c -- placeholder */
#include <stdio.h>
#include "galley.h"
int main(void) { puts(GALLEY_VERSION_STRING); return 0; }
