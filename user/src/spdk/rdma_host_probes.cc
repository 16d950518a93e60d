#include "spdk/rdma_host_probes.h"

#include "util/clock.h"
#include "util/elf.h"
#include "util/error.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>

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
    // the request's layout: where its work request, its nvme_request, that one's queue pair
    // and its queue id are
    const auto member = [&](const char* type, const char* name) {
        std::optional<uint64_t> off;
        try {
            off = dwarf_member_offset(sites.complete_file, type, name);
        } catch (const Error& e) {
            throw Error(
                fmt::format("{}: the layout of SPDK's RDMA request is read from its debug "
                            "information (SPDK builds with -g; keep it unstripped)",
                            e.what()));
        }
        if (!off)
            throw Error(
                fmt::format("{}: no struct {} with a member {} in its debug information: "
                            "an SPDK release this nvmetrace does not know",
                            sites.complete_file, type, name));
        return *off;
    };
    sites.wr_offset = member("spdk_nvme_rdma_req", "send_wr");
    sites.req_offset = member("spdk_nvme_rdma_req", "req");
    sites.qpair_offset = member("nvme_request", "qpair");
    sites.qid_offset = member("spdk_nvme_qpair", "id");
    return sites;
}

std::string rdma_submit_args(const RdmaHostSites& sites) {
    // %di: struct spdk_rdma_provider_qp *; %si: struct ibv_send_wr * (opcode at 28, sg_list
    // at 16; the first entry's addr at 0 is the command: opcode 0, cid 2, nsid 4, CDW10/11 40,
    // CDW12 48).  The work request is the request's send_wr: the request's nvme_request, its
    // queue pair and that one's queue id follow from it.
    constexpr const char* sqe = "+0(+16(%si))";
    const int64_t req =
        static_cast<int64_t>(sites.req_offset) - static_cast<int64_t>(sites.wr_offset);
    const std::string qid = fmt::format("+{}(+{}({}{}(%si)))", sites.qid_offset, sites.qpair_offset,
                                        req < 0 ? "-" : "+", req < 0 ? -req : req);
    return fmt::format(
        "qp=%di:x64 wr=%si:x64 wr_opcode=+28(%si):u32 qid={1}:u16 opc=+0({0}):u8 "
        "cid=+2({0}):u16 nsid=+4({0}):u32 cdw10=+40({0}):u64 cdw12=+48({0}):u32",
        sqe, qid);
}

std::string rdma_complete_args() {
    // %di: struct spdk_nvme_rdma_req *; %si: struct spdk_nvme_cpl * (cid at 12, status at 14)
    return "req=%di:x64 cid=+12(%si):u16 status=+14(%si):u16";
}

}  // namespace nvmetrace::spdk

// The function measure_uprobe_hit_ns() places its uprobe on: called as the
// completion's probe is (a pointer, a pointer to a completion).
extern "C" __attribute__((noinline, used)) uint64_t nvmetrace_uprobe_calibration_point(
    const void* req, const void* cpl) {
    asm volatile("" ::: "memory");
    return reinterpret_cast<uintptr_t>(req) ^ reinterpret_cast<uintptr_t>(cpl);
}

namespace nvmetrace::spdk {

std::optional<uint64_t> measure_uprobe_hit_ns() {
    constexpr uint64_t kCalls = 2000;
    constexpr int kRounds = 3;
    const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    const auto off = elf_function_offset(self, "nvmetrace_uprobe_calibration_point");
    if (!off)
        return std::nullopt;
    alignas(8) uint8_t cpl[16] = {};
    volatile uint64_t sink = 0;
    std::vector<PerfSample> samples;
    std::optional<TracepointSampler> sampler;
    // the best round of kCalls calls; the samples read between rounds (a ring holds one)
    auto best = [&] {
        uint64_t b = UINT64_MAX;
        for (int r = 0; r < kRounds; r++) {
            const uint64_t t0 = monotonic_ns();
            for (uint64_t i = 0; i < kCalls; i++)
                sink = sink + nvmetrace_uprobe_calibration_point(cpl + 8, cpl);
            b = std::min(b, monotonic_ns() - t0);
            if (sampler)
                sampler->read(samples);
        }
        return b;
    };
    const uint64_t without = best();
    UprobeEvents events(fmt::format("nvmetrace_{}", getpid()));
    const auto ev = events.add("calibration", self, *off, rdma_complete_args());
    sampler.emplace(getpid(), std::vector<uint64_t>{ev.id}, 64, TracepointSampler::Mode::now);
    const uint64_t with = best();
    const uint64_t counted = samples.size() + sampler->lost();
    sampler.reset();  // its events closed before the uprobe is removed (else EBUSY)
    if (counted != kCalls * kRounds)
        throw Error(fmt::format("the uprobe on nvmetrace itself counted {} hits of {}", counted,
                                kCalls * kRounds));
    return with > without ? (with - without) / kCalls : 0;
}

RdmaSubmit rdma_submit_of(const PerfSample& s, const UprobeEvents::Event& ev) {
    RdmaSubmit r;
    r.ts = s.time;
    r.qp = field(s, ev, "qp");
    r.wr = field(s, ev, "wr");
    r.wr_opcode = static_cast<uint32_t>(field(s, ev, "wr_opcode"));
    r.qid = static_cast<uint16_t>(field(s, ev, "qid"));
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
