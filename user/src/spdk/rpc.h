// A few calls to an SPDK application's JSON-RPC socket (/var/tmp/spdk.sock
// unless it was started with -r): what a recording of SPDK's target needs to
// know of its namespaces.  SPDK's trace names a bdev I/O's bdev (its owner's
// description) but not the namespace it serves or its block size.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace nvmetrace::spdk {

inline constexpr const char* kDefaultRpcSocket = "/var/tmp/spdk.sock";

// One call: sends {"method": method} and returns the reply's "result";
// throws Error when the socket cannot be reached, the reply is not JSON, or
// SPDK answers with an error.  Waits at most timeout_ms for the reply.
nlohmann::json rpc_call(const std::string& socket, const std::string& method,
                        int timeout_ms = 5000);

// A namespace an SPDK target serves.
struct SpdkNamespace {
    std::string subsysnqn;
    uint32_t nsid = 0;
    std::string bdev;
    uint32_t block_size = 0;  // 0: its bdev was not listed
};

// From the replies of nvmf_get_subsystems and bdev_get_bdevs; throws Error on
// a reply of another shape.
std::vector<SpdkNamespace> namespaces_of(const nlohmann::json& subsystems,
                                         const nlohmann::json& bdevs);

}  // namespace nvmetrace::spdk
