# write_if_changed(PATH TEXT): PATH gets TEXT, written only when it differs, so
# that a generated source whose text did not change does not rebuild its users.
function(write_if_changed path text)
    if(EXISTS "${path}")
        file(READ "${path}" old)
    else()
        set(old "")
    endif()
    if(NOT old STREQUAL text)
        file(WRITE "${path}" "${text}")
    endif()
endfunction()
