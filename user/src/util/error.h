// Errors the tool reports to its user.
#pragma once

#include <stdexcept>
#include <string>

namespace nvmetrace {

// Every failure the user can act on: what() is one line, already phrased for
// the user ("nvmetrace module not loaded: modprobe nvmetrace"), without the
// program name or a trailing newline.  main() prints it and exits 1.
class Error : public std::runtime_error {
public:
    explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// The generic netlink family is not registered: the module is not loaded.
// `nvmetrace --version` catches this one to print "module: not loaded".
class ModuleNotLoaded : public Error {
public:
    ModuleNotLoaded();
};

// Error(what + ": " + strerror(err)); err is a positive errno.
[[nodiscard]] Error errno_error(const std::string& what, int err);

}  // namespace nvmetrace
