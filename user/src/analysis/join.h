// Matching host commands with target commands (Joiner, join_commands), and
// reading the recordings of both sides and joining them, streaming.
//
// `report h1.ntr h2.ntr t.ntr` and `compare` hand the files here: each file
// is read block by block through its own Assembler, the commands of all
// files are merged in completion order on the target's clock and matched by
// the Joiner (below) as they come, and every command (joined, or alone
// with the reason) goes to Stats.  Nothing holds a whole recording: memory is
// one block per file, the commands waiting for their partner, and the
// per-group accumulators.
#pragma once

#include "analysis/assembler.h"
#include "analysis/events.h"
#include "analysis/stats.h"

#include <stddef.h>

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace nvmetrace {

// The host's last send-side event before the target (nvme-tcp command PDU
// to the socket, or block_rq_issue) and its first receive-side event after it
// (C2H data, response capsule, nvme_complete_rq, or block_rq_complete), as
// slots; -1 when the command has none.
int host_send_slot(const Command& host);
int host_receive_slot(const Command& host);
// The target's first receive-side event (nvmet-rdma's capsule receive, or
// nvmet_req_init) and its last send-side one (nvmet-rdma's response posted,
// or nvmet_req_complete): its residence as the host sees it.
int target_receive_slot(const Command& target);
int target_send_slot(const Command& target);

// A host command and its target command as one command of the joined view,
// on the host's clock.  The clocks of the two sides are never compared: the
// target's timestamps are shifted so that its nvmet_req_complete falls on the
// host's first receive-side event, which makes the row before the target's
// first event the computed network, (receive - send) on the host minus
// (send - receive) on the target (target_send_slot(), target_receive_slot()).  *network_ns gets it
// (negative when the target's residence is longer than the host's span).
Command join_commands(const Command& host, const Command& target, int64_t* network_ns = nullptr);

// Why a command found no partner on the other side.
enum class Unmatched : uint8_t {
    no_command_id,     // host: no nvme_setup_cmd record, so no command id
    not_sampled,       // the other side's 1-of-N predicate does not pick its LBA
    outside_window,    // it ran before or after the other recording
    not_found,         // inside the other recording, but not in it (records lost, cut)
    no_other_side,     // no recording of the other side
    other_controller,  // the other side's recordings are not of its controller
    before_device,     // target: its controller's host device was not followed then; host:
                       // no command id, in flight as a device of its recording was admitted
    failed_over,       // host: a failed-over request (its bios went again on another) that the
                       // target never had or never answered; target: one the target ran whose
                       // host request failed over before its answer came
};
inline constexpr size_t kUnmatchedReasons = 8;
std::string_view unmatched_reason(Unmatched u, Side side);
std::string_view unmatched_key(Unmatched u);  // "not_sampled", for JSON

struct JoinCounts {
    bool active = false;            // both sides were recorded: the join ran
    uint64_t host = 0, target = 0;  // completed commands offered
    uint64_t matched = 0;
    uint64_t negative_network = 0;  // matched commands whose computed network is < 0
    uint64_t ambiguous = 0;         // matches chosen among several candidates (by time)
    std::array<uint64_t, kUnmatchedReasons> host_unmatched{}, target_unmatched{};
    size_t peak_pending = 0;  // commands waiting for a partner at most, both sides
};

// Matches host commands with target commands, streaming, in bounded memory.
//
// Key: (controller id, qid, command id, LBA, op, namespace): the host's
// command id and qid come from nvme_setup_cmd, its controller id from the
// recording's devices (0: unknown, matches any); the target's from its
// records.  The clocks of the machines are never used in a figure: each host
// recording gets an offset onto the target's clock (`Source::offset_ns`,
// estimated by estimate_offset() from commands whose key occurs once on each
// side, then followed as matches come: clocks drift), and it is used only to
// pick, among the commands with the same key (command ids are reused: a 4-bit
// generation over the tag), the one at the expected time -- which is the
// per-queue order, as both sides see a queue's commands in the same order.
//
// Feed commands with push() in the order of their completion on the target's
// clock (host: ts + offset_ns), all recordings interleaved (see merge in
// run_report's join); each is matched as it comes or waits, at most `window`
// past its send, for its partner.  Memory: the commands waiting, i.e. about
// the command rate times the window for unmatched ones, and times the offset
// error (small after the first matches) for matched ones.
struct RecordingMeta;

// Which fields of the join's key a recording's commands hold.  An SPDK
// target's records have no NVMe command id or namespace id, and over RDMA no
// queue id either.  A field one recording lacks is left out of every
// recording's key: commands are then told apart by the rest of the key (LBA,
// direction) and by time.
struct KeyFields {
    bool cid = true, nsid = true, qid = true;
    KeyFields operator&(const KeyFields& o) const {
        return {cid && o.cid, nsid && o.nsid, qid && o.qid};
    }
};
// What a recording's commands hold, from its META (an SPDK side says so).
KeyFields key_fields(const RecordingMeta& m);

// (cntlid, nsid) -> the [from, to) spans of a host recording's clock in
// which it followed that namespace of that controller.
using Followed =
    std::map<std::pair<uint16_t, uint32_t>, std::vector<std::pair<uint64_t, uint64_t>>>;
// A host recording's Followed, from its devices' appeared_ns and gone_ns (a
// path disk's namespace is its head's); only the namespaces with a disk that
// came or went while it recorded.
Followed host_followed(const RecordingMeta& m);

class Joiner {
public:
    struct Source {
        Side side = Side::host;
        uint32_t sample_n = 1;
        uint64_t seed = 0;
        uint64_t first_ts = 0, last_ts = UINT64_MAX;  // the recording's window, its own clock
        // host: added to its timestamps to land on the target's clock
        int64_t offset_ns = 0;
        // host: the controllers of its devices; target: the controllers it
        // served.  Empty: unknown (then no command is "other_controller").
        std::vector<uint16_t> cntlids;
        // host: when (its own clock) it followed each namespace of each
        // controller, (cntlid, nsid) -> [from, to) spans (from 0: at the
        // start; to UINT64_MAX: to the end).  One not in it: all along.
        Followed followed = {};
        // What its commands' key holds (KeyFields).
        KeyFields keys = {};
    };
    struct Options {
        uint64_t window_ns = 2'000'000'000;  // how long a command waits for its partner
    };
    using Sink = std::function<void(const Command&)>;

    Joiner() : Joiner(Options{}) {}
    explicit Joiner(Options opts) : opts_(opts) {}

    // A recording; returns its index for push() and add().
    size_t add_source(const Source& s);
    Source& source(size_t i) { return sources_.at(i); }
    // The window of a source once known (a file's last record is known at its end).
    void set_window(size_t source, uint64_t first_ts, uint64_t last_ts);

    // Streaming: one command, in completion order on the target's clock.
    // Hands matched (joined) commands and those whose wait ran out to sink.
    void push(size_t source, const Command& cmd, const Sink& sink);
    // Everything still waiting is unmatched; returns the counts.
    JoinCounts finish(const Sink& sink);

    // Buffered, for tests and small inputs: add() every command, then join()
    // estimates each host recording's offset from all of them, sorts by
    // completion and streams them through push()/finish().
    void add(size_t source, const Command& cmd);
    JoinCounts join(const Sink& sink);

    size_t pending() const { return pending_[0].live + pending_[1].live; }

private:
    struct Key {
        uint64_t lba;
        uint32_t nsid;
        uint16_t qid, cid;
        uint8_t op;
        bool operator==(const Key&) const = default;
    };
    struct KeyHash {
        size_t operator()(const Key& k) const;
    };
    struct Entry {
        Command cmd;
        uint32_t source;
        bool done;
        uint64_t anchor;  // on the target's clock
        uint64_t until;   // waits for its partner until then: its end plus the window
    };
    struct Side_ {
        std::deque<Entry> q;  // arrival order; q[i] has id base + i
        uint64_t base = 0;
        size_t live = 0;
        std::unordered_multimap<Key, uint64_t, KeyHash> index;
    };

    Key key_of(const Command& c) const;
    // A host command may pair with a target command of this controller id.
    static bool compatible(const Command& host, uint16_t target_cntlid);
    void emit_unmatched(Entry& e, int side, const Sink& sink);
    void evict(uint64_t now, const Sink& sink);
    void match(Entry& host, Entry& target, const Sink& sink);

    // Target commands that waited out the window unmatched (not_found), for
    // a failed-over host request that comes later: the host gives up on a
    // command only at its I/O timeout or error recovery, seconds after the
    // target ran it.  Bounded: the newest kLostKept.
    struct Lost {
        Key key;
        uint16_t cntlid;
        uint64_t anchor;
    };
    static constexpr size_t kLostKept = 65536;
    bool take_lost_target(const Entry& host);
    KeyFields keys_;       // the key fields every source has (add_source)
    bool pushed_ = false;  // keys are made from keys_: no source after the first push
    bool in_flight_at_admission(const Entry& host) const;

    Options opts_;
    std::vector<Source> sources_;
    std::deque<Lost> lost_target_;
    Side_ pending_[2];  // [0] host, [1] target
    uint64_t now_ = 0;
    JoinCounts jc_;
    std::vector<std::pair<size_t, Command>> buffered_;
};

// The anchor of a command for matching: the host's last send-side event, the
// target's nvmet_req_init.
uint64_t join_anchor(const Command& c);

// The offset (target clock - host clock) that the commands whose key occurs
// exactly once in `host` and once in `target` agree on (their median), or
// nullopt when there are none.  The key holds the fields of `fields`.
std::optional<int64_t> estimate_offset(std::span<const Command> host,
                                       std::span<const Command> target, KeyFields fields = {});

// ----------------------------------------------------------------- files

struct JoinFilesOptions {
    uint64_t window_ns = Joiner::Options{}.window_ns;
    // Commands of each host recording read first to estimate its clock
    // offset against the target's (estimate_offset()).
    size_t calibration_commands = 4096;
    // Also called with every command handed to Stats (tests, --commands).
    std::function<void(const Command&)> on_command;
    // Interval snapshots (Stats::Options::interval_ns, on the lead host
    // recording's clock) to on_interval, the last one cut at the last
    // command's end.  0: none.
    uint64_t interval_ns = 0;
    Stats::IntervalSink on_interval;
};

struct JoinedReport {
    Summary summary;
    AssemblyCounts counts;  // all files
    JoinCounts join;
    uint64_t lost_host = 0, lost_target = 0;
    std::string recorded_on;            // "host1 (kernel 6.1...) and target1 (kernel 6.12...)"
    std::vector<std::string> notes;     // per file, for stderr
    std::vector<std::string> problems;  // files that ended badly, for stderr
    bool corrupt = false;               // a file had a damaged block
    size_t host_files = 0, target_files = 0;
};

// Whether the files, by their META role, hold both sides between them.
bool files_hold_both_sides(const std::vector<std::string>& files);

// The drop runs (GAP markers) of a recording, read ahead of its assembly
// (Assembler::set_gaps()).  A file that cannot be read to its end gives the
// runs before the damage.
std::vector<GapRun> gap_runs_in(const std::string& path);

// Joins and aggregates; throws Error for a file that is not a usable recording.
JoinedReport join_files(const std::vector<std::string>& files, const JoinFilesOptions& opts = {});

}  // namespace nvmetrace
