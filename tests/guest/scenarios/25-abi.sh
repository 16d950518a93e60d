#!/bin/bash
# 25-abi: the module's user-space ABI spoken by hand (tests/guest/abi_check.py): netlink
# commands, attribute validation and extack messages, START/STOP and the hook dump, ring
# mmap rules, no mapping across fork, rmmod refused while a ring is mapped.
# lane-timeout: 90
. "$NVMETRACE_SRC/tests/guest/lib.sh"
need_ko
python3 "$NVMETRACE_SRC/tests/guest/abi_check.py"
