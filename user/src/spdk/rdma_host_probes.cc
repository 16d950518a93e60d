#include "spdk/rdma_host_probes.h"

#include "util/clock.h"
#include "util/elf.h"
#include "util/error.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
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
    // %si: struct ibv_send_wr * (opcode at 28, sg_list at 16; the first entry's addr at 0 is
    // the command: its first 8 bytes opcode, flags, cid, nsid; CDW10/11 at 40, CDW12 at 48).
    // The work request is the request's send_wr: the request's nvme_request, its queue pair
    // and that one's queue id follow from it.
    constexpr const char* sqe = "+0(+16(%si))";
    const int64_t req =
        static_cast<int64_t>(sites.req_offset) - static_cast<int64_t>(sites.wr_offset);
    const std::string qid = fmt::format("+{}(+{}({}{}(%si)))", sites.qid_offset, sites.qpair_offset,
                                        req < 0 ? "-" : "+", req < 0 ? -req : req);
    return fmt::format(
        "wr=%si:x64 wr_opcode=+28(%si):u32 qid={1}:u16 head=+0({0}):u64 cdw10=+40({0}):u64 "
        "cdw12=+48({0}):u32",
        sqe, qid);
}

std::string rdma_complete_args() {
    // %di: struct spdk_nvme_rdma_req *; %si: struct spdk_nvme_cpl * (cid at 12, status at 14)
    return "req=%di:x64 cid=+12(%si):u16 status=+14(%si):u16";
}

}  // namespace nvmetrace::spdk

// The function measure_uprobe_cost() places its uprobes on: its arguments
// in %di and %si, as SPDK's two functions have theirs.
extern "C" __attribute__((noinline, used)) uint64_t nvmetrace_uprobe_calibration_point(
    const void* a, const void* b) {
    asm volatile("" ::: "memory");
    return reinterpret_cast<uintptr_t>(a) ^ reinterpret_cast<uintptr_t>(b);
}

namespace nvmetrace::spdk {

std::optional<UprobeCost> measure_uprobe_cost(const RdmaHostSites& sites) {
    constexpr uint64_t kCalls = 2000;
    constexpr int kRounds = 3;
    const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    const auto off = elf_function_offset(self, "nvmetrace_uprobe_calibration_point");
    if (!off)
        return std::nullopt;
    // memory laid out as SPDK's: an RDMA request holding its work request and its
    // nvme_request's address, the work request's scatter entry naming a command, the
    // nvme_request naming its queue pair
    const size_t req_size = std::max(sites.wr_offset + 128, sites.req_offset + 8);
    std::vector<uint64_t> rdma_req(req_size / 8 + 1), nvme_req(sites.qpair_offset / 8 + 1),
        qpair(sites.qid_offset / 8 + 1), sge(2), sqe(8), cpl(2);
    auto* base = reinterpret_cast<uint8_t*>(rdma_req.data());
    auto put = [](void* at, uint64_t v, size_t n) { std::memcpy(at, &v, n); };
    uint8_t* wr = base + sites.wr_offset;
    put(wr + 16, reinterpret_cast<uintptr_t>(sge.data()), 8);  // sg_list
    put(wr + 28, 2, 4);                                        // IBV_WR_SEND
    sge[0] = reinterpret_cast<uintptr_t>(sqe.data());
    sqe[0] = 0x02 | uint64_t{0x1234} << 16 | uint64_t{1} << 32;  // read, cid 0x1234, nsid 1
    put(base + sites.req_offset, reinterpret_cast<uintptr_t>(nvme_req.data()), 8);
    put(reinterpret_cast<uint8_t*>(nvme_req.data()) + sites.qpair_offset,
        reinterpret_cast<uintptr_t>(qpair.data()), 8);
    put(reinterpret_cast<uint8_t*>(qpair.data()) + sites.qid_offset, 1, 2);

    volatile uint64_t sink = 0;
    // ns a call of the calibration point with (a, b), the best round of kCalls; with
    // `args` on it, each hit counted
    auto cost = [&](const void* a, const void* b, const std::string* args) {
        std::optional<UprobeEvents> events;
        std::optional<TracepointSampler> sampler;
        std::vector<PerfSample> samples;
        UprobeEvents::Event ev;
        if (args) {
            events.emplace(fmt::format("nvmetrace_{}", getpid()));
            ev = events->add("calibration", self, *off, *args);
            sampler.emplace(getpid(), std::vector<uint64_t>{ev.id}, 64,
                            TracepointSampler::Mode::now);
        }
        uint64_t b_ns = UINT64_MAX;
        for (int r = 0; r < kRounds; r++) {
            const uint64_t t0 = monotonic_ns();
            for (uint64_t i = 0; i < kCalls; i++)
                sink = sink + nvmetrace_uprobe_calibration_point(a, b);
            b_ns = std::min(b_ns, monotonic_ns() - t0);
            if (sampler)  // the samples read between rounds (a ring holds one)
                sampler->read(samples);
        }
        if (sampler) {
            const uint64_t counted = samples.size() + sampler->lost();
            sampler.reset();  // its events closed before the uprobe is removed (else EBUSY)
            if (counted != kCalls * kRounds)
                throw Error(fmt::format("the uprobe on nvmetrace itself counted {} hits of {}",
                                        counted, kCalls * kRounds));
            // the submission's fetch arguments, three pointers deep, read what was laid out
            if (ev.fields.count("qid") && !samples.empty()) {
                const RdmaSubmit got = rdma_submit_of(samples.front(), ev);
                if (got.qid != 1 || got.wr_opcode != 2 || got.opc != 0x02 || got.cid != 0x1234)
                    throw Error(fmt::format(
                        "the submission's uprobe read queue {} opcode {:#x} cid {:#x} (work "
                        "request opcode {}) from memory laid out with 1, 0x2, 0x1234 (2)",
                        got.qid, got.opc, got.cid, got.wr_opcode));
            }
        }
        return b_ns;
    };
    const std::string submit = rdma_submit_args(sites), complete = rdma_complete_args();
    UprobeCost c;
    const uint64_t bare_submit = cost(nullptr, wr, nullptr);
    const uint64_t with_submit = cost(nullptr, wr, &submit);
    const uint64_t bare_complete = cost(base, cpl.data(), nullptr);
    const uint64_t with_complete = cost(base, cpl.data(), &complete);
    c.submit_ns = with_submit > bare_submit ? (with_submit - bare_submit) / kCalls : 0;
    c.complete_ns = with_complete > bare_complete ? (with_complete - bare_complete) / kCalls : 0;
    return c;
}

RdmaSubmit rdma_submit_of(const PerfSample& s, const UprobeEvents::Event& ev) {
    RdmaSubmit r;
    r.ts = s.time;
    r.wr = field(s, ev, "wr");
    r.wr_opcode = static_cast<uint32_t>(field(s, ev, "wr_opcode"));
    r.qid = static_cast<uint16_t>(field(s, ev, "qid"));
    const uint64_t head = field(s, ev, "head");  // opcode, flags, cid, nsid
    r.opc = static_cast<uint8_t>(head);
    r.cid = static_cast<uint16_t>(head >> 16);
    r.nsid = static_cast<uint32_t>(head >> 32);
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
