#!/bin/sh
# Run in place of the unit tests when configure found no Check library.
echo "error: the Check unit-test library was not found at configure time;" >&2
echo "install it (apt-get install check) and re-run configure" >&2
exit 1
