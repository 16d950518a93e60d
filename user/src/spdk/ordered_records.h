// The records of finished commands of an SPDK recorder (TargetCommands,
// HostCommands), handed on in time order: a command's records are made
// when it finishes, so a later command's can be older than an earlier one's.
#pragma once

#include <linux/nvmetrace.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace nvmetrace::spdk {

class OrderedRecords {
public:
    void add(const nvmetrace_rec& r) { recs_.push_back(r); }
    // The records older than `before`, in time order (the records of one
    // command keep their order: their times may tie), numbered (seq) as
    // they go.
    std::vector<nvmetrace_rec> take_before(uint64_t before) {
        std::stable_sort(
            recs_.begin(), recs_.end(),
            [](const nvmetrace_rec& a, const nvmetrace_rec& b) { return a.ts < b.ts; });
        const auto cut =
            std::lower_bound(recs_.begin(), recs_.end(), before,
                             [](const nvmetrace_rec& r, uint64_t t) { return r.ts < t; });
        std::vector<nvmetrace_rec> out(recs_.begin(), cut);
        recs_.erase(recs_.begin(), cut);
        for (auto& r : out)
            r.seq = seq_++;
        return out;
    }
    std::vector<nvmetrace_rec> take_all() {
        std::vector<nvmetrace_rec> out = take_before(UINT64_MAX);
        for (auto& r : recs_)
            r.seq = seq_++;
        out.insert(out.end(), recs_.begin(), recs_.end());
        recs_.clear();
        return out;
    }

private:
    std::vector<nvmetrace_rec> recs_;
    uint32_t seq_ = 0;
};

}  // namespace nvmetrace::spdk
