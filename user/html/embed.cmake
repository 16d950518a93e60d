# Writes OUT, a C++ source defining nvmetrace::builtin_html_assets()
# (report/html.h): the plotting library's minified scripts from MODULES (a
# node_modules folder from tools/html-deps; empty or incomplete: none, and
# the reason instead) and the page's own report.js and report.css from SRC,
# each as a raw string literal.  Run at build time (cmake -P).
set(libs vega/build/vega.min.js vega-lite/build/vega-lite.min.js vega-embed/build/vega-embed.min.js)
set(lib_js "")
set(missing "")
if(NOT MODULES)
    set(missing "the plotting library (npm: vega, vega-lite, vega-embed) was not found when nvmetrace was built")
else()
    foreach(f IN LISTS libs)
        if(NOT EXISTS "${MODULES}/${f}")
            set(missing "the plotting library was not built in: ${MODULES}/${f} is missing")
            break()
        endif()
        file(READ "${MODULES}/${f}" text)
        # the source map is not embedded; a browser must not go looking for it
        string(REGEX REPLACE "\n//# sourceMappingURL=[^\n]*" "" text "${text}")
        string(APPEND lib_js "${text}\n")
    endforeach()
endif()
if(missing)
    set(lib_js "")
    string(APPEND missing "; run tools/html-deps (or tools/deps) and rebuild")
endif()
file(READ "${SRC}/report.js" report_js)
file(READ "${SRC}/report.css" report_css)
# inlined in <script> and <style>: nothing may end them early
foreach(part lib_js report_js report_css)
    string(TOLOWER "${${part}}" lower)
    if(lower MATCHES "</script|</style|<!--")
        message(FATAL_ERROR "embed.cmake: ${part} holds </script, </style or <!--")
    endif()
endforeach()

# A raw string literal may not hold its own closing delimiter, and a compiler
# takes literals of a limited length: cut the text into pieces of 60000 bytes.
function(literal var text)
    string(LENGTH "${text}" len)
    set(out "")
    set(pos 0)
    while(pos LESS len)
        string(SUBSTRING "${text}" ${pos} 60000 piece)
        if(piece MATCHES "\\)nvmetrace_\"")
            message(FATAL_ERROR "embed.cmake: the text holds the literal's delimiter")
        endif()
        string(APPEND out "R\"nvmetrace_(${piece})nvmetrace_\"\n")
        math(EXPR pos "${pos} + 60000")
    endwhile()
    if(NOT out)
        set(out "\"\"")
    endif()
    set(${var} "${out}" PARENT_SCOPE)
endfunction()
literal(lib_js_lit "${lib_js}")
literal(report_js_lit "${report_js}")
literal(report_css_lit "${report_css}")

set(text "// Generated at build time by html/embed.cmake; do not edit.
#include \"report/html.h\"

namespace nvmetrace {

namespace {
constexpr const char kLibraryJs[] =
${lib_js_lit};
constexpr const char kReportJs[] =
${report_js_lit};
constexpr const char kReportCss[] =
${report_css_lit};
}  // namespace

const HtmlAssets& builtin_html_assets() {
    static const HtmlAssets a{kLibraryJs, kReportJs, kReportCss, \"${missing}\"};
    return a;
}

}  // namespace nvmetrace
")
include(${CMAKE_CURRENT_LIST_DIR}/../write_if_changed.cmake)
write_if_changed("${OUT}" "${text}")
