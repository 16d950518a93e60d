// `nvmetrace probe`: what can attach on this kernel, checked by attaching.
#pragma once

#include <string>
#include <vector>

namespace nvmetrace {

struct ProbeOptions {
    std::vector<std::string> roles;  // host, target
    std::string transport;           // "", tcp, rdma
};

// Prints the report; returns 0 when every hook the roles need attached or
// waits only for a module that is not loaded, 1 otherwise.
int run_probe(const ProbeOptions& opts);

}  // namespace nvmetrace
