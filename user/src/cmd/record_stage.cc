#include "cmd/record_stage.h"

#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <utility>

#include <fmt/core.h>

namespace nvmetrace {

RecordStage::RecordStage(Options opts) : opts_(std::move(opts)) {
    // Ctrl-C and SIGTERM are for the drain thread, which stops the recording:
    // the stage's thread starts with them blocked.
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    try {
        thread_ = std::thread([this] { run(); });
    } catch (...) {
        pthread_sigmask(SIG_SETMASK, &old, nullptr);
        throw;
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

RecordStage::~RecordStage() {
    if (!thread_.joinable())
        return;
    {
        std::lock_guard lock(mu_);
        queue_.clear();
        done_ = true;
    }
    cv_.notify_one();
    thread_.join();
}

void RecordStage::submit(uint64_t now_ns) {
    check();
    Batch b;
    b.now_ns = now_ns;
    b.devices.swap(next_devices_);
    const uint64_t n = next_.size();
    {
        std::lock_guard lock(mu_);
        b.recs.swap(next_);
        b.runs.swap(next_runs_);
        if (!spare_.empty()) {
            next_.swap(spare_.back());
            spare_.pop_back();
        }
        if (!spare_runs_.empty()) {
            next_runs_.swap(spare_runs_.back());
            spare_runs_.pop_back();
        }
        queue_.push_back(std::move(b));
    }
    const uint64_t now_queued = backlog_.fetch_add(n) + n;
    uint64_t peak = peak_.load();
    while (now_queued > peak && !peak_.compare_exchange_weak(peak, now_queued)) {
    }
    cv_.notify_one();
}

void RecordStage::check() const {
    if (!failed_.load())
        return;
    std::lock_guard lock(mu_);
    std::rethrow_exception(error_);
}

void RecordStage::finish() {
    {
        std::lock_guard lock(mu_);
        done_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable())
        thread_.join();
    check();
}

void RecordStage::run() {
    std::unique_lock lock(mu_);
    for (;;) {
        cv_.wait(lock, [this] { return done_ || !queue_.empty(); });
        if (queue_.empty())
            return;  // done, and nothing is left
        Batch b = std::move(queue_.front());
        queue_.pop_front();
        lock.unlock();
        const uint64_t n = b.recs.size();
        try {
            if (!failed_.load())
                handle(b);
        } catch (...) {
            lock.lock();
            error_ = std::current_exception();
            failed_.store(true);
            lock.unlock();
        }
        backlog_.fetch_sub(n);
        b.recs.clear();
        b.runs.clear();
        lock.lock();
        if (spare_.size() < 4)
            spare_.push_back(std::move(b.recs));
        if (spare_runs_.size() < 4)
            spare_runs_.push_back(std::move(b.runs));
    }
}

void RecordStage::handle(Batch& b) {
    const std::span<const nvmetrace_rec> recs(b.recs);
    for (const DeviceChange& c : b.devices) {
        if (opts_.writer)
            opts_.writer->write_devices(c);
        if (opts_.devices)
            opts_.devices(c);
    }
    if (opts_.writer)
        opts_.writer->append(recs, b.runs);
    if (opts_.live && live_ok_.load()) {
        const uint64_t behind = backlog_.load();
        if (behind > opts_.live_backlog) {
            live_ok_.store(false);
            fmt::print(stderr,
                       "nvmetrace: live lines stopped: the analysis fell {} records behind the "
                       "rings; the summary is computed from the file when the recording stops\n",
                       behind);
        } else {
            opts_.live(recs);
            if (opts_.tick)
                opts_.tick(b.now_ns);
        }
    }
    if (opts_.writer)
        opts_.writer->flush_if_due();
}

}  // namespace nvmetrace
