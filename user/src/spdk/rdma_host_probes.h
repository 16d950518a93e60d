// Where `record --spdk-host -t rdma` places its two uprobes in an app on
// SPDK's NVMe/RDMA driver, and what each reads (see rdma_host_commands.h):
// the functions found in the app or the libraries the loader maps for it,
// the request's layout from SPDK's DWARF.
#pragma once

#include "spdk/rdma_host_commands.h"
#include "util/perf_samples.h"
#include "util/uprobe_events.h"

#include <cstdint>
#include <optional>
#include <string>

namespace nvmetrace::spdk {

// The submission probe: the capsule's work request and its command.
inline constexpr const char* kRdmaSubmitFunction = "spdk_rdma_provider_qp_queue_send_wrs";
// The completion probe: the request and its completion.
inline constexpr const char* kRdmaCompleteFunction = "nvme_rdma_req_complete";

struct RdmaHostSites {
    std::string submit_file, complete_file;
    uint64_t submit_offset = 0, complete_offset = 0;
    // from SPDK's DWARF: offsetof(struct spdk_nvme_rdma_req, send_wr) and (req),
    // offsetof(struct nvme_request, qpair), offsetof(struct spdk_nvme_qpair, id)
    uint64_t wr_offset = 0, req_offset = 0, qpair_offset = 0, qid_offset = 0;
};

// Finds both functions for `app` (a program path) and the request layout;
// throws Error saying which is missing and what to do.
RdmaHostSites find_rdma_host_sites(const std::string& app);

// The uprobes' fetch arguments (x86-64: the first two arguments in %di, %si).
std::string rdma_submit_args(const RdmaHostSites& sites);
std::string rdma_complete_args();

// What one hit of each uprobe costs here, in ns: a function of this program
// called with and without a uprobe fetching the same arguments from memory
// laid out as SPDK's (`sites`' offsets), its samples counted, the best of a
// few rounds each.  Nothing when this program's symbols are stripped.
// Throws Error when uprobes cannot be made.
struct UprobeCost {
    uint64_t submit_ns = 0, complete_ns = 0;
};
std::optional<UprobeCost> measure_uprobe_cost(const RdmaHostSites& sites);

// A sample of either event into the converter's terms.
RdmaSubmit rdma_submit_of(const PerfSample& s, const UprobeEvents::Event& ev);
RdmaComplete rdma_complete_of(const PerfSample& s, const UprobeEvents::Event& ev);

}  // namespace nvmetrace::spdk
