#include "util/error.h"

#include <string.h>

namespace nvmetrace {

ModuleNotLoaded::ModuleNotLoaded() : Error("nvmetrace module not loaded: modprobe nvmetrace") {}

Error errno_error(const std::string& what, int err) {
    // strerrordesc_np() is thread-safe and never fails (glibc >= 2.32).
    const char* desc = strerrordesc_np(err);
    return Error(what + ": " + (desc ? desc : "error " + std::to_string(err)));
}

}  // namespace nvmetrace
