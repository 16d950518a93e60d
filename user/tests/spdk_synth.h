// Synthetic recordings (synth.h) made into what nvmetrace's SPDK recorders
// write (record --spdk-target, --spdk-host), for the join and compare tests.
#pragma once

#include "format/recfile.h"

#include <linux/nvmetrace.h>

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
