#!/bin/sh
# placeholder, being written
exit 0
