// A FIFO of records in one circular buffer that grows by doubling: the
// recorder's per-CPU streams (Reorderer), filled straight from the rings
// (RingReader::drain_into) and emptied from the front without moving what
// stays.  Records are trivially copyable; free slots are never zeroed.
#pragma once

#include <linux/nvmetrace.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <span>

namespace nvmetrace {

class RecordQueue {
public:
    [[nodiscard]] size_t size() const { return size_; }
    [[nodiscard]] bool empty() const { return size_ == 0; }
    [[nodiscard]] size_t capacity() const { return cap_; }
    // The i-th record from the front (i < size()).
    [[nodiscard]] const nvmetrace_rec& operator[](size_t i) const {
        return buf_[(head_ + i) & (cap_ - 1)];
    }
    [[nodiscard]] const nvmetrace_rec& front() const { return buf_[head_]; }

    // The first min(n, size()) records, or fewer where the buffer wraps:
    // the longest contiguous piece at the front.
    [[nodiscard]] std::span<const nvmetrace_rec> front_span(size_t n) const {
        n = std::min(n, size_);
        return {buf_.get() + head_, std::min(n, cap_ - head_)};
    }
    void pop_front(size_t n) {
        n = std::min(n, size_);
        size_ -= n;
        head_ = size_ ? (head_ + n) & (cap_ - 1) : 0;
    }

    // Free slots at the back, contiguous, at least one: fill some of them,
    // then commit() how many.  Grows (doubling) when there is no room for
    // `want` more records.
    [[nodiscard]] std::span<nvmetrace_rec> space(size_t want) {
        if (cap_ - size_ < std::max<size_t>(want, 1))
            grow(size_ + std::max<size_t>(want, 1));
        const size_t tail = (head_ + size_) & (cap_ - 1);
        // size_ < cap_ here: tail == head_ only when empty
        const size_t end = tail >= head_ ? cap_ : head_;
        return {buf_.get() + tail, end - tail};
    }
    void commit(size_t n) { size_ += n; }

    void push_back(std::span<const nvmetrace_rec> recs) {
        while (!recs.empty()) {
            std::span<nvmetrace_rec> s = space(recs.size());
            const size_t n = std::min(s.size(), recs.size());
            std::memcpy(s.data(), recs.data(), n * sizeof(nvmetrace_rec));
            commit(n);
            recs = recs.subspan(n);
        }
    }

private:
    void grow(size_t need) {
        size_t cap = cap_ ? cap_ : 1024;
        while (cap < need)
            cap *= 2;
        // operator new[] of a trivial type: not zeroed
        std::unique_ptr<nvmetrace_rec[]> buf(new nvmetrace_rec[cap]);
        const size_t first = std::min(size_, cap_ - head_);
        if (size_) {
            std::memcpy(buf.get(), buf_.get() + head_, first * sizeof(nvmetrace_rec));
            std::memcpy(buf.get() + first, buf_.get(), (size_ - first) * sizeof(nvmetrace_rec));
        }
        buf_ = std::move(buf);
        cap_ = cap;
        head_ = 0;
    }

    std::unique_ptr<nvmetrace_rec[]> buf_;
    size_t cap_ = 0;   // a power of two, or 0
    size_t head_ = 0;  // index of the front record
    size_t size_ = 0;
};

}  // namespace nvmetrace
