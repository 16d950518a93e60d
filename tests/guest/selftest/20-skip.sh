#!/bin/bash
# self-test: exits 77 -> SKIP
. "$NVMETRACE_SRC/tests/guest/lib.sh"
skip "selftest skip marker"
