# Writes OUT (a C++ header defining NVMETRACE_GIT_COMMIT) from `git describe`
# in SRC; leaves OUT untouched when its content would not change.
execute_process(COMMAND git describe --always --dirty --abbrev=12
                WORKING_DIRECTORY "${SRC}"
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE
                ERROR_QUIET)
if(NOT commit)
    set(commit "unknown")
endif()
set(text "// Generated at build time by git_commit.cmake; do not edit.\n#pragma once\n#define NVMETRACE_GIT_COMMIT \"${commit}\"\n")
include(${CMAKE_CURRENT_LIST_DIR}/write_if_changed.cmake)
write_if_changed("${OUT}" "${text}")
