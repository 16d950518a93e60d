// `nvmetrace probe`: what can attach on this kernel, checked by attaching.
#pragma once

#include <string>
#include <vector>

namespace nvmetrace {

struct ProbeOptions {
    std::vector<std::string> roles;  // host, target
    std::string transport;           // "", tcp, rdma
    std::string spdk_target;         // nvmf_tgt's binary, pid or trace file: SPDK is the target
    std::string spdk_host;           // the same for an app on SPDK's NVMe driver
};

// Prints the report; returns 0 when every hook the roles need attached or
// waits only for a module that is not loaded, 1 otherwise.  A role SPDK plays
// (--spdk-target, --spdk-host) is checked in SPDK's trace ring instead of the
// kernel's hooks.
int run_probe(const ProbeOptions& opts);

}  // namespace nvmetrace
