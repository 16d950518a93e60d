// Synthetic recordings (synth.h) made into what nvmetrace's SPDK recorders
// write (record --spdk-target, --spdk-host), for the join and compare tests.
#pragma once

#include "format/recfile.h"

#include <linux/nvmetrace.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <span>
#include <vector>

namespace nvmetrace::synth {

// The target recording of `from` as an SPDK target's recorder writes it: no
// NVMe command id (a number of its own per command), no namespace id in the
// key, the flag on every record, and the META saying so.
inline void as_spdk_target(const std::filesystem::path& from, const std::filesystem::path& to,
                           bool tcp) {
    RecordingReader in = RecordingReader::open(from);
    RecordingMeta meta = in.meta();
    meta.extra["spdk"] = {{"role", "target"}, {"transport", tcp ? "tcp" : "rdma"}};
    RecordingWriter out = RecordingWriter::open(to);
    out.write_meta(meta);
    std::map<uint64_t, uint16_t> numbers;  // (qid, cid) in flight -> the recorder's number
    uint16_t next = 0;
    in.for_each([&](std::span<const nvmetrace_rec> recs) {
        std::vector<nvmetrace_rec> v(recs.begin(), recs.end());
        for (auto& r : v) {
            const uint64_t k = uint64_t{r.qid} << 16 | r.cid;
            if (r.event == NVMETRACE_EV_NVMET_INIT)
                numbers[k] = next++;
            r.cid = numbers.at(k);
            r.cntlid = 0;
            r.flags = static_cast<uint8_t>((r.flags & ~NVMETRACE_REC_HAS_CID) | NVMETRACE_REC_SPDK);
            if (!tcp) {
                r.qid = 0;
                r.flags = static_cast<uint8_t>(r.flags & ~NVMETRACE_REC_HAS_QID);
            }
            if (r.event == NVMETRACE_EV_NVMET_INIT)
                r.aux = 0;  // the namespace not known
        }
        out.append(v);
    });
    out.close();
}

// The kernel target recording of `from` (nvmet-tcp) as nvmet-rdma's would
// be: the command's arrival is nvmet_rdma_recv_done, its response posted
// (nvmet_rdma_queue_response) 1 us after nvmet_req_complete, its send
// completion (nvmet_rdma_send_done) send_done_after_ns after that; TCP's own
// target events left out.
inline void as_rdma_target(const std::filesystem::path& from, const std::filesystem::path& to,
                           uint64_t send_done_after_ns) {
    RecordingReader in = RecordingReader::open(from);
    RecordingMeta meta = in.meta();
    meta.transport = "rdma";
    std::vector<nvmetrace_rec> all;
    in.for_each([&](std::span<const nvmetrace_rec> recs) {
        for (nvmetrace_rec r : recs) {
            if (r.event == NVMETRACE_EV_TCPT_CMD_RECV) {
                r.event = NVMETRACE_EV_RDMAT_RECV;
            } else if (r.event > NVMETRACE_EV_TCPT_CMD_RECV &&
                       r.event <= NVMETRACE_EV_TCPT_DATA_RECV) {
                continue;  // R2T, H2C data, in-capsule data: nvmet-tcp's own
            }
            all.push_back(r);
            if (r.event == NVMETRACE_EV_NVMET_COMPLETE) {
                r.event = NVMETRACE_EV_RDMAT_RSP_POST;
                r.ts += 1000;
                all.push_back(r);
                // its send completion: after the host has the response
                r.event = NVMETRACE_EV_RDMAT_SEND_DONE;
                r.ts += send_done_after_ns;
                all.push_back(r);
            }
        }
    });
    std::stable_sort(all.begin(), all.end(),
                     [](const nvmetrace_rec& a, const nvmetrace_rec& b) { return a.ts < b.ts; });
    for (size_t i = 0; i < all.size(); i++)
        all[i].seq = i;
    RecordingWriter out = RecordingWriter::open(to);
    out.write_meta(meta);
    out.append(all);
    out.close();
}

// The host recording of `from` as SPDK's host recorder writes it: no block layer, the
// command handed to the queue pair at block_rq_issue's time, its response processed at
// nvme_complete_rq's; no namespace id.
inline void as_spdk_host(const std::filesystem::path& from, const std::filesystem::path& to) {
    RecordingReader in = RecordingReader::open(from);
    RecordingMeta meta = in.meta();
    meta.extra["spdk"] = {{"role", "host"}, {"transport", "tcp"}};
    RecordingWriter out = RecordingWriter::open(to);
    out.write_meta(meta);
    std::map<uint64_t, uint16_t> cids;  // (dev, qid, tag) in flight -> its command id
    in.for_each([&](std::span<const nvmetrace_rec> recs) {
        std::vector<nvmetrace_rec> v;
        for (nvmetrace_rec r : recs) {
            const uint64_t k = uint64_t{r.dev} << 32 | uint64_t{r.qid} << 16 | r.tag;
            if (r.event == NVMETRACE_EV_NVME_SETUP)
                cids[k] = r.cid;
            if (r.event != NVMETRACE_EV_RQ_ISSUE && r.event != NVMETRACE_EV_NVME_COMPLETE)
                continue;
            r.event = r.event == NVMETRACE_EV_RQ_ISSUE ? NVMETRACE_EV_SPDK_SUBMIT
                                                       : NVMETRACE_EV_SPDK_COMPLETE;
            r.cid = cids.at(k);
            r.flags = static_cast<uint8_t>(r.flags | NVMETRACE_REC_SPDK | NVMETRACE_REC_HAS_CID |
                                           NVMETRACE_REC_HAS_QID);
            v.push_back(r);
        }
        out.append(v);
    });
    out.close();
}

}  // namespace nvmetrace::synth
