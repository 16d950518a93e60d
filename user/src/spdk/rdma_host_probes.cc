#include "spdk/rdma_host_probes.h"

#include "util/elf.h"
#include "util/error.h"

#include <fmt/core.h>

namespace nvmetrace::spdk {

namespace {

uint64_t field(const PerfSample& s, const UprobeEvents::Event& ev, const char* name) {
    const auto it = ev.fields.find(name);
    if (it == ev.fields.end())
        throw Error(fmt::format("uprobe event {} has no field {}", ev.name, name));
    return trace_field(s.raw, it->second);
}

}  // namespace

RdmaHostSites find_rdma_host_sites(const std::string& app) {
    RdmaHostSites sites;
    const auto files = loaded_objects(app);
    for (const auto& f : files) {
        if (sites.submit_file.empty())
            if (const auto off = elf_function_offset(f, kRdmaSubmitFunction)) {
                sites.submit_file = f;
                sites.submit_offset = *off;
            }
        if (sites.complete_file.empty())
            if (const auto off = elf_function_offset(f, kRdmaCompleteFunction)) {
                sites.complete_file = f;
                sites.complete_offset = *off;
            }
    }
    if (sites.submit_file.empty() || sites.complete_file.empty())
        throw Error(fmt::format(
            "{}: {} is not in it or the libraries it loads: is it an app on SPDK's NVMe driver "
            "built with RDMA (configure --with-rdma)? A stripped SPDK has no local symbols: "
            "keep them (SPDK's build keeps them)",
            app, sites.submit_file.empty() ? kRdmaSubmitFunction : kRdmaCompleteFunction));
    std::optional<uint64_t> off;
    try {
        off = dwarf_member_offset(sites.complete_file, "spdk_nvme_rdma_req", "send_wr");
    } catch (const Error& e) {
        throw Error(
            fmt::format("{}: the layout of SPDK's RDMA request is read from its debug "
                        "information (SPDK builds with -g; keep it unstripped)",
                        e.what()));
    }
    if (!off)
        throw Error(
            fmt::format("{}: no struct spdk_nvme_rdma_req with a send_wr in its debug "
                        "information: an SPDK release this nvmetrace does not know",
                        sites.complete_file));
    sites.wr_offset = *off;
    return sites;
}

std::string rdma_submit_args() {
    // %di: struct spdk_rdma_provider_qp *; %si: struct ibv_send_wr * (opcode at 28, sg_list
    // at 16; the first entry's addr at 0 is the command: opcode 0, cid 2, nsid 4, CDW10/11 40,
    // CDW12 48)
    constexpr const char* sqe = "+0(+16(%si))";
    return fmt::format(
        "qp=%di:x64 wr=%si:x64 wr_opcode=+28(%si):u32 opc=+0({0}):u8 cid=+2({0}):u16 "
        "nsid=+4({0}):u32 cdw10=+40({0}):u64 cdw12=+48({0}):u32",
        sqe);
}

std::string rdma_complete_args() {
    // %di: struct spdk_nvme_rdma_req *; %si: struct spdk_nvme_cpl * (cid at 12, status at 14)
    return "req=%di:x64 cid=+12(%si):u16 status=+14(%si):u16";
}

RdmaSubmit rdma_submit_of(const PerfSample& s, const UprobeEvents::Event& ev) {
    RdmaSubmit r;
    r.ts = s.time;
    r.qp = field(s, ev, "qp");
    r.wr = field(s, ev, "wr");
    r.wr_opcode = static_cast<uint32_t>(field(s, ev, "wr_opcode"));
    r.opc = static_cast<uint8_t>(field(s, ev, "opc"));
    r.cid = static_cast<uint16_t>(field(s, ev, "cid"));
    r.nsid = static_cast<uint32_t>(field(s, ev, "nsid"));
    r.cdw10 = field(s, ev, "cdw10");
    r.cdw12 = static_cast<uint32_t>(field(s, ev, "cdw12"));
    return r;
}

RdmaComplete rdma_complete_of(const PerfSample& s, const UprobeEvents::Event& ev) {
    return {.ts = s.time,
            .rdma_req = field(s, ev, "req"),
            .cid = static_cast<uint16_t>(field(s, ev, "cid")),
            .status = static_cast<uint16_t>(field(s, ev, "status"))};
}

}  // namespace nvmetrace::spdk
