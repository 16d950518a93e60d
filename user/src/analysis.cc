#include "analysis.h"

#include "sampling.h"

#include <algorithm>
#include <bit>
#include <map>
#include <optional>
#include <queue>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

namespace nvmetrace {

std::string_view op_name(Op op) {
    return op == Op::write ? "write" : "read";
}

int event_slot(uint16_t event) {
    // A direct table: this runs once per record.
    static const auto table = [] {
        std::array<int8_t, 256> t{};
        t.fill(-1);
        for (size_t i = 0; i < std::size(kEvents); i++)
            t[kEvents[i].event] = static_cast<int8_t>(i);
        return t;
    }();
    return event < table.size() ? table[event] : -1;
}

namespace {

constexpr uint16_t kNoTag = 0xffff;  // (u16)BLK_MQ_NO_TAG: no driver tag yet

Op rec_op(const nvmetrace_rec& r) {
    return (r.flags & NVMETRACE_REC_WRITE) ? Op::write : Op::read;
}

uint64_t host_key(const nvmetrace_rec& r) {
    return uint64_t{r.dev} << 32 | uint64_t{r.qid} << 16 | r.tag;
}

uint64_t target_key(const nvmetrace_rec& r) {
    return uint64_t{r.cntlid} << 32 | uint64_t{r.qid} << 16 | r.cid;
}

bool in_view(const ComponentDef& c, View view) {
    return c.views & static_cast<uint8_t>(view);
}

// First and last events of a view's path for a command with the events
// `present`: the `from` of its first depth-0 row that is present or required
// and the `to` of its last (optional rows at either end, such as the
// nvmet-rdma capsule's receive before nvmet_req_init and its response's send
// completion after nvmet_req_complete, lengthen the path of the commands
// that have them).  present = 0: the required ends.
struct ViewEnds {
    int first = -1, last = -1;
};
ViewEnds table_ends(View view, std::span<const ComponentDef> table, uint32_t present = 0) {
    ViewEnds e;
    auto counts = [present](int slot) { return (present >> slot & 1u) || !kEvents[slot].optional; };
    for (const auto& c : table) {
        if (c.depth != 0 || !in_view(c, view))
            continue;
        if (event_slot(c.from) < 0 || event_slot(c.to) < 0)
            throw std::logic_error(fmt::format("component '{}': unknown event", c.name));
        if (e.first < 0 && counts(event_slot(c.from)))
            e.first = event_slot(c.from);
        if (counts(event_slot(c.to)))
            e.last = event_slot(c.to);
    }
    return e;
}

// The events of a view's rows that are required (not optional).
uint32_t required_events(View view, std::span<const ComponentDef> table) {
    uint32_t m = 0;
    for (const auto& c : table) {
        if (c.depth != 0 || !in_view(c, view))
            continue;
        for (uint16_t ev : {c.from, c.to}) {
            int s = event_slot(ev);
            if (s >= 0 && !kEvents[s].optional)
                m |= 1u << s;
        }
    }
    return m;
}

// A view's first and last required events: where every command of the view
// starts and ends when it has no optional event before or after them (host:
// block_bio_queue and block_rq_complete).
ViewEnds required_ends_of(View view) {
    static const auto ends = [] {
        std::array<ViewEnds, 3> e{};
        for (View v : {View::host_only, View::target_only, View::joined}) {
            auto rows = path_of(v, required_events(v, kComponents), kComponents);
            e[std::countr_zero(static_cast<unsigned>(v))] =
                ViewEnds{event_slot(rows.front()->from), event_slot(rows.back()->to)};
        }
        return e;
    }();
    return ends[std::countr_zero(static_cast<unsigned>(view))];
}

// A record of `ev` for a command that already has the events up to
// f.max_rank: out of its order (the key was reused) if its rank is not above
// them, or, for an unordered event, if the command has it already.
template <typename InFlight>
bool out_of_order(const InFlight& f, const EventDef& ev, int slot) {
    if (ev.unordered)
        return f.cmd.has(slot);
    return ev.rank <= f.max_rank;
}

// Whether a command that has reached its view's last required event still
// waits for a trailing one (EventDef::ends_at).
bool awaits_trailing(const Command& c) {
    for (uint32_t m = c.present; m; m &= m - 1) {
        const EventDef& ev = kEvents[std::countr_zero(m)];
        if (ev.ends_at && !c.has(event_slot(ev.ends_at)))
            return true;
    }
    return false;
}

const StageDef& stage_def(std::string_view name) {
    for (const auto& s : kStages)
        if (s.name == name)
            return s;
    throw std::logic_error(fmt::format("unknown stage '{}'", name));
}

}  // namespace

uint64_t Command::first_ts() const {
    uint64_t t = UINT64_MAX;
    for (uint32_t m = present; m; m &= m - 1)
        t = std::min(t, ts[std::countr_zero(m)]);
    return present ? t : 0;
}

uint64_t Command::last_ts() const {
    uint64_t t = 0;
    for (uint32_t m = present; m; m &= m - 1)
        t = std::max(t, ts[std::countr_zero(m)]);
    return t;
}

// ----------------------------------------------------------------- devices

void DeviceTable::add_disk(uint32_t dev, std::string name, uint32_t block_size, uint16_t cntlid) {
    disks_[dev] = Disk{std::move(name), dev, block_size, cntlid};
}

void DeviceTable::add_path(uint32_t path_dev, uint32_t head_dev, std::string name,
                           uint16_t cntlid) {
    disks_[path_dev] = Disk{std::move(name), head_dev, 0, cntlid};
}

uint16_t DeviceTable::cntlid(uint32_t dev) const {
    auto it = disks_.find(dev);
    return it == disks_.end() ? 0 : it->second.cntlid;
}

void DeviceTable::add_target_namespace(uint32_t nsid, std::string name, uint32_t block_size) {
    target_ns_[nsid] = TargetNs{std::move(name), block_size};
}

uint32_t DeviceTable::head(uint32_t dev) const {
    auto it = disks_.find(dev);
    return it == disks_.end() ? dev : it->second.head;
}

std::string DeviceTable::disk_name(uint32_t dev) const {
    auto it = disks_.find(dev);
    if (it != disks_.end() && !it->second.name.empty())
        return it->second.name;
    return fmt::format("dev {}:{}", dev >> 20, dev & 0xfffff);
}

std::string DeviceTable::target_name(uint32_t nsid) const {
    auto it = target_ns_.find(nsid);
    if (it != target_ns_.end() && !it->second.name.empty())
        return it->second.name;
    return fmt::format("nsid {}", nsid);
}

uint32_t DeviceTable::target_block_size(uint32_t nsid) const {
    auto it = target_ns_.find(nsid);
    return it == target_ns_.end() ? 0 : it->second.block_size;
}

// ----------------------------------------------------------------- assembler

size_t Assembler::WaitKeyHash::operator()(const WaitKey& k) const {
    uint64_t h = k.lba * 0x9e3779b97f4a7c15ull;
    h ^= (uint64_t{k.dev} << 16 | uint64_t{k.op} << 8 | k.kind) * 0xbf58476d1ce4e5b9ull;
    return static_cast<size_t>(h ^ (h >> 29));
}

Assembler::Assembler(const DeviceTable& devices, Sink sink, uint64_t bio_horizon_ns)
    : devices_(devices), sink_(std::move(sink)), bio_horizon_ns_(bio_horizon_ns) {
    const ViewEnds h = required_ends_of(View::host_only), t = required_ends_of(View::target_only);
    host_ends_ = {h.first, h.last};
    target_ends_ = {t.first, t.last};
}

void Assembler::push(const nvmetrace_rec& rec) {
    if (counts_.first_ts == 0 && counts_.last_ts == 0)
        counts_.first_ts = rec.ts;
    if (rec.ts < counts_.last_ts)
        counts_.records_out_of_order++;
    else
        counts_.last_ts = rec.ts;

    int slot = event_slot(rec.event);
    if (slot < 0) {
        counts_.records_unknown++;
        return;
    }
    if (kEvents[slot].side == Side::target) {
        counts_.records_target++;
        push_target(rec, slot);
        return;
    }
    counts_.records_host++;
    expire_waiting(rec.ts);
    expire_tail(rec.ts);
    auto op = static_cast<uint8_t>(rec_op(rec));
    if (rec.event == NVMETRACE_EV_FILE_SUBMIT) {
        push_waiting(rec, WaitKey{rec.lba, devices_.head(rec.dev), op, 2});
    } else if (rec.event == NVMETRACE_EV_AIO_COMPLETE) {
        push_aio_complete(rec, slot);
    } else if (rec.event == NVMETRACE_EV_AIO_REAP) {
        push_aio_reap(rec, slot);
    } else if (rec.event == NVMETRACE_EV_BIO_QUEUE) {
        WaitKey key{rec.lba, devices_.head(rec.dev), op, 0};
        // NVMe multipath: the bio is queued on the head disk, then again on
        // the path disk it is sent to.  Keep the head's (the earliest).
        if (key.dev != rec.dev) {
            auto it = waiting_.find(key);
            if (it != waiting_.end() && !it->second.empty()) {
                counts_.multipath_duplicates++;
                return;
            }
        }
        push_waiting(rec, key);
    } else if (rec.event == NVMETRACE_EV_RQ_INSERT && rec.tag == kNoTag) {
        // Inserted into the I/O scheduler before it has a driver tag.
        push_waiting(rec, WaitKey{rec.lba, rec.dev, op, 1});
    } else {
        push_host_rq(rec, slot);
    }
}

void Assembler::push_waiting(const nvmetrace_rec& rec, const WaitKey& key) {
    Waiting w{next_wait_id_++, rec.ts, rec.len, rec.aux};
    waiting_[key].push_back(w);
    wait_order_.emplace_back(key, w);
    waiting_count_++;
}

bool Assembler::take_waiting(const WaitKey& key, Waiting* out) {
    auto it = waiting_.find(key);
    if (it == waiting_.end())
        return false;
    *out = it->second.front();
    it->second.pop_front();
    if (it->second.empty())
        waiting_.erase(it);
    waiting_count_--;
    return true;
}

// Drops the order entries of records already taken, and the records that
// waited longer than the horizon.  Amortized O(1) per record.
void Assembler::expire_waiting(uint64_t now) {
    while (!wait_order_.empty()) {
        const auto& [key, w] = wait_order_.front();
        auto it = waiting_.find(key);
        bool taken = it == waiting_.end() || it->second.front().id != w.id;
        if (!taken) {
            if (w.ts + bio_horizon_ns_ >= now)
                break;
            (key.kind == 0   ? counts_.bios_unmatched
             : key.kind == 1 ? counts_.inserts_unmatched
                             : counts_.user_unmatched)++;
            it->second.pop_front();
            if (it->second.empty())
                waiting_.erase(it);
            waiting_count_--;
        }
        wait_order_.pop_front();
    }
}

void Assembler::push_host_rq(const nvmetrace_rec& rec, int slot) {
    const EventDef& ev = kEvents[slot];
    auto [it, fresh] = host_.try_emplace(host_key(rec));
    InFlight& f = it->second;
    if (!fresh && ev.repeats && f.cmd.has(slot) && f.cmd.lba == rec.lba) {
        counts_.repeats++;  // another R2T, H2C or C2H PDU: the first one counts
        return;
    }
    if (!fresh && (f.cmd.lba != rec.lba || out_of_order(f, ev, slot))) {
        // The tag was reused: the command before lost its last records.
        counts_.lost_end++;
        fresh = true;
    }
    if (fresh) {
        f = InFlight{};
        Command& c = f.cmd;
        c.side = Side::host;
        c.op = rec_op(rec);
        c.lba = rec.lba;
        c.size = rec.len;
        c.len_flags = rec.flags;
        c.dev = devices_.head(rec.dev);
        c.cntlid = devices_.cntlid(rec.dev);
        if (rec.flags & NVMETRACE_REC_HAS_QID)
            c.qid = rec.qid;
        auto op = static_cast<uint8_t>(c.op);
        Waiting w;
        if (take_waiting(WaitKey{rec.lba, rec.dev, op, 1}, &w)) {
            int s = event_slot(NVMETRACE_EV_RQ_INSERT);
            c.ts[s] = w.ts;
            c.present |= 1u << s;
            f.max_rank = kEvents[s].rank;
        }
        if (take_waiting(WaitKey{rec.lba, c.dev, op, 0}, &w)) {
            int s = event_slot(NVMETRACE_EV_BIO_QUEUE);
            c.ts[s] = w.ts;
            c.present |= 1u << s;
            // the file submission came before its bio
            if (take_waiting(WaitKey{rec.lba, c.dev, op, 2}, &w)) {
                int fs = event_slot(NVMETRACE_EV_FILE_SUBMIT);
                c.ts[fs] = w.ts;
                c.present |= 1u << fs;
                c.pid = NVMETRACE_UAUX_PID(w.aux);
                uint64_t since = NVMETRACE_UAUX_HI(w.aux);
                if (since && since <= w.ts) {
                    int ss = event_slot(NVMETRACE_EV_SYSCALL_SUBMIT);
                    c.ts[ss] = w.ts - since;
                    c.present |= 1u << ss;
                }
            }
        }
    }
    Command& c = f.cmd;
    c.ts[slot] = rec.ts;
    c.present |= 1u << slot;
    if (rec.flags & NVMETRACE_REC_PASSTHRU)
        c.passthru = true;
    if (!ev.unordered)
        f.max_rank = std::max(f.max_rank, ev.rank);
    if (rec.event == NVMETRACE_EV_NVME_SETUP) {
        c.nsid = static_cast<uint32_t>(rec.aux);
        if (rec.flags & NVMETRACE_REC_HAS_CID) {
            c.cid = rec.cid;
            c.has_cid = true;
        }
        if (rec.flags & NVMETRACE_REC_HAS_QID)
            c.qid = rec.qid;
    }
    if (slot == host_ends_[1]) {
        c.status = rec.aux;
        if (c.has(event_slot(NVMETRACE_EV_FILE_SUBMIT)))
            hold_for_user(c);
        else
            emit(c);
        host_.erase(it);
    }
}

void Assembler::push_target(const nvmetrace_rec& rec, int slot) {
    const EventDef& ev = kEvents[slot];
    auto [it, fresh] = target_.try_emplace(target_key(rec));
    InFlight& f = it->second;
    if (!fresh && ev.repeats && f.cmd.has(slot) && f.cmd.lba == rec.lba) {
        counts_.repeats++;
        return;
    }
    if (!fresh && (f.cmd.lba != rec.lba || out_of_order(f, ev, slot))) {
        // The key was reused.  A command that had reached nvmet_req_complete
        // and waited only for a trailing event (ends_at) is done as it is.
        if (f.cmd.has(target_ends_[1]))
            emit(f.cmd);
        else
            counts_.lost_end++;
        fresh = true;
    }
    if (fresh) {
        f = InFlight{};
        Command& c = f.cmd;
        c.side = Side::target;
        c.op = rec_op(rec);
        c.lba = rec.lba;
        c.size = rec.len;
        c.len_flags = rec.flags;
        c.qid = rec.qid;
        c.cid = rec.cid;
        c.cntlid = rec.cntlid;
        c.has_cid = true;
    }
    Command& c = f.cmd;
    if (ev.ts_in_aux) {
        // noted before the side's first event; later: another PDU's arrival
        const int first = target_ends_[0];
        if (!c.has(first) || rec.aux > c.at(first)) {
            counts_.late_times++;
            f.max_rank = std::max(f.max_rank, ev.rank);
            return;
        }
        c.ts[slot] = rec.aux;
    } else {
        c.ts[slot] = rec.ts;
    }
    c.present |= 1u << slot;
    if (!ev.unordered)
        f.max_rank = std::max(f.max_rank, ev.rank);
    if (rec.event == NVMETRACE_EV_NVMET_INIT)
        c.nsid = static_cast<uint32_t>(rec.aux);
    const int last = target_ends_[1];
    if (slot == last)
        c.status = rec.aux;
    if (c.has(last) && !awaits_trailing(c)) {
        emit(c);
        target_.erase(it);
    }
}

void Assembler::emit(Command& c) {
    // a passthrough command has no bio: it starts at nvme_setup_cmd
    const int first = c.side == Side::target ? target_ends_[0]
                      : c.passthru           ? event_slot(NVMETRACE_EV_NVME_SETUP)
                                             : host_ends_[0];
    if (!c.has(first)) {
        counts_.cut_start++;
        return;
    }
    if (c.len_flags & kRecLenBlocks) {
        uint32_t bs = devices_.target_block_size(c.nsid);
        if (bs)
            c.size *= bs;
        else
            c.size_in_blocks = true;
    }
    counts_.complete++;
    sink_(c);
}

void Assembler::finish() {
    // held commands are complete at the block layer: hand them on as they are
    expire_tail(UINT64_MAX);
    counts_.cut_end += host_.size();
    // target commands that waited only for a trailing event are done as they are
    for (auto& [key, f] : target_) {
        if (f.cmd.has(target_ends_[1]))
            emit(f.cmd);
        else
            counts_.cut_end++;
    }
    host_.clear();
    target_.clear();
    for (const auto& [key, q] : waiting_)
        (key.kind == 0   ? counts_.bios_unmatched
         : key.kind == 1 ? counts_.inserts_unmatched
                         : counts_.user_unmatched) += q.size();
    waiting_.clear();
    wait_order_.clear();
    waiting_count_ = 0;
}

// How long a command past block_rq_complete waits for its aio completion
// and its reap (both normally follow within microseconds).
constexpr uint64_t kUserHorizonNs = 1'000'000'000ull;

void Assembler::hold_for_user(Command& c) {
    uint64_t id = next_tail_id_++;
    tail_by_key_[WaitKey{c.lba, c.dev, static_cast<uint8_t>(c.op), 3}].push_back(id);
    tail_order_.emplace_back(c.at(event_slot(NVMETRACE_EV_RQ_COMPLETE)), id);
    tail_cmds_.emplace(id, c);
}

void Assembler::push_aio_complete(const nvmetrace_rec& rec, int slot) {
    const WaitKey key{rec.lba, devices_.head(rec.dev), static_cast<uint8_t>(rec_op(rec)), 3};
    uint64_t id;
    if (!take_tail(key, &id)) {
        counts_.user_unmatched++;
        return;
    }
    Command& c = tail_cmds_.at(id);
    c.ts[slot] = rec.ts;
    c.present |= 1u << slot;
    tail_by_key_[WaitKey{key.lba, key.dev, key.op, 4}].push_back(id);
}

// io_getevents() handed this command's event to user space: the module
// knows which by the iocb the event names (kmod/hooks.c).
void Assembler::push_aio_reap(const nvmetrace_rec& rec, int slot) {
    const WaitKey key{rec.lba, devices_.head(rec.dev), static_cast<uint8_t>(rec_op(rec)), 4};
    uint64_t id;
    if (!take_tail(key, &id)) {
        counts_.user_unmatched++;
        return;
    }
    auto c = tail_cmds_.find(id);
    c->second.ts[slot] = rec.ts;
    c->second.present |= 1u << slot;
    emit(c->second);
    tail_cmds_.erase(c);
}

// The oldest held command under key that is still held.
bool Assembler::take_tail(const WaitKey& key, uint64_t* id) {
    auto it = tail_by_key_.find(key);
    if (it == tail_by_key_.end())
        return false;
    bool found = false;
    while (!it->second.empty() && !found) {
        *id = it->second.front();
        it->second.pop_front();
        found = tail_cmds_.count(*id) != 0;  // else handed on already (expired)
    }
    if (it->second.empty())
        tail_by_key_.erase(it);
    return found;
}

void Assembler::expire_tail(uint64_t now) {
    while (!tail_order_.empty()) {
        auto [ts, id] = tail_order_.front();
        if (now != UINT64_MAX && ts + kUserHorizonNs >= now)
            break;
        tail_order_.pop_front();
        auto c = tail_cmds_.find(id);
        if (c == tail_cmds_.end())
            continue;
        emit(c->second);
        tail_cmds_.erase(c);
    }
    if (tail_cmds_.empty())
        tail_by_key_.clear();
}

void merge_by_ts(std::span<const std::span<const nvmetrace_rec>> streams,
                 const std::function<void(const nvmetrace_rec&)>& sink) {
    using Head = std::tuple<uint64_t, size_t, size_t>;  // ts, stream, index
    std::priority_queue<Head, std::vector<Head>, std::greater<>> heads;
    for (size_t s = 0; s < streams.size(); s++)
        if (!streams[s].empty())
            heads.emplace(streams[s][0].ts, s, 0);
    while (!heads.empty()) {
        auto [ts, s, i] = heads.top();
        heads.pop();
        sink(streams[s][i]);
        if (i + 1 < streams[s].size())
            heads.emplace(streams[s][i + 1].ts, s, i + 1);
    }
}

// ----------------------------------------------------------------- components

View view_of(const Command& cmd) {
    bool host = false, target = false;
    for (uint32_t m = cmd.present; m; m &= m - 1)
        (kEvents[std::countr_zero(m)].side == Side::host ? host : target) = true;
    if (host && target)
        return View::joined;
    return target ? View::target_only : View::host_only;
}

std::vector<const ComponentDef*> path_of(View view, uint32_t present,
                                         std::span<const ComponentDef> table, uint32_t* missing) {
    const ViewEnds ends = table_ends(view, table, present);
    if (ends.first < 0)
        throw std::logic_error("no components for this view");
    std::vector<const ComponentDef*> rows;
    uint32_t miss = 0;
    int cur = ends.first;
    // Leading events the command lacks: start at the first it has.  Those are
    // optional ones, or the bio of a passthrough command, which has none (the
    // assembler hands on no other command without its first required event).
    while (!(present >> cur & 1u)) {
        const ComponentDef* first = nullptr;
        for (const auto& c : table)
            if (c.depth == 0 && in_view(c, view) && event_slot(c.from) == cur) {
                first = &c;
                break;
            }
        if (!first || cur == ends.last)
            throw std::logic_error(
                fmt::format("no component leads on from '{}'", kEvents[cur].name));
        cur = event_slot(first->to);
    }
    while (cur != ends.last) {
        const ComponentDef* next = nullptr;
        const ComponentDef* fallback = nullptr;
        bool any = false;
        for (const auto& c : table) {
            if (c.depth != 0 || !in_view(c, view) || event_slot(c.from) != cur)
                continue;
            any = true;
            int to = event_slot(c.to);
            if (to < 0)
                throw std::logic_error(fmt::format("component '{}': unknown event", c.name));
            if (present >> to & 1u) {
                next = &c;
                break;
            }
            if (!fallback && !kEvents[to].optional)
                fallback = &c;
        }
        if (!next)
            next = fallback;
        // Only optional events the command lacks follow: its path ends here.
        if (!next && any && !rows.empty())
            break;
        if (!next || rows.size() >= kMaxEvents)
            throw std::logic_error(
                fmt::format("no component leads on from '{}'", kEvents[cur].name));
        rows.push_back(next);
        cur = event_slot(next->to);
        if (cur != ends.last && !(present >> cur & 1u))
            miss |= 1u << cur;
    }
    if (missing)
        *missing = miss;
    return rows;
}

uint32_t layout_key(View view, uint32_t present, std::span<const ComponentDef> table) {
    uint32_t key = 0;
    for (const auto* r : path_of(view, present, table)) {
        key |= 1u << event_slot(r->from);
        key |= 1u << event_slot(r->to);
    }
    return key & present;
}

uint32_t interior_boundaries(View view, std::span<const ComponentDef> table) {
    auto rows = path_of(view, required_events(view, table), table);
    uint32_t mask = 0;
    for (size_t i = 1; i < rows.size(); i++)
        mask |= 1u << event_slot(rows[i]->from);
    return mask;
}

uint32_t missing_boundaries(const Command& cmd, std::span<const ComponentDef> table) {
    uint32_t missing = 0;
    path_of(view_of(cmd), cmd.present, table, &missing);
    return missing;
}

Layout make_layout(View view, uint32_t missing_mask, std::span<const ComponentDef> table) {
    return layout_for(view, required_events(view, table) & ~missing_mask, table);
}

Layout layout_for(View view, uint32_t present, std::span<const ComponentDef> table) {
    uint32_t missing_mask = 0;
    auto rows = path_of(view, present, table, &missing_mask);
    Layout l;
    l.view = view;
    l.first_slot = event_slot(rows.front()->from);
    l.last_slot = event_slot(rows.back()->to);
    l.missing_mask = missing_mask;

    // Segments: runs of rows between present boundaries, with their stages.
    std::vector<std::vector<std::string_view>> seg_stages;
    std::vector<size_t> seg_of_row;
    for (size_t i = 0; i < rows.size(); i++) {
        int from = event_slot(rows[i]->from);
        if (i > 0 && (missing_mask >> from & 1u)) {
            Layout::Segment& s = l.segments.back();
            s.name += " + ";
            s.name += rows[i]->name;
            s.to_slot = event_slot(rows[i]->to);
            s.merged = true;
            s.seam = false;
            seg_stages.back().push_back(rows[i]->stage);
            if (std::find(l.missing.begin(), l.missing.end(), kEvents[from].name) ==
                l.missing.end())
                l.missing.emplace_back(kEvents[from].name);
        } else if (i > 0 && rows[i]->name == rows[i - 1]->name &&
                   l.segments.back().name == rows[i]->name) {
            // consecutive rows of one name: one component
            l.segments.back().to_slot = event_slot(rows[i]->to);
            seg_stages.back().push_back(rows[i]->stage);
        } else {
            l.segments.push_back(
                {std::string(rows[i]->name), from, event_slot(rows[i]->to), 0, false});
            l.segments.back().seam = rows[i]->seam;
            seg_stages.push_back({rows[i]->stage});
        }
        seg_of_row.push_back(l.segments.size() - 1);
    }

    // Stages: the table's stages, with those joined by a merged segment made
    // one (union-find over stage names, in order of first appearance).
    std::vector<std::string_view> names;
    std::vector<size_t> parent;
    auto id = [&](std::string_view n) {
        stage_def(n);  // throws for an unknown stage
        auto it = std::find(names.begin(), names.end(), n);
        if (it != names.end())
            return static_cast<size_t>(it - names.begin());
        names.push_back(n);
        parent.push_back(parent.size());
        return names.size() - 1;
    };
    auto find = [&](size_t x) {
        while (parent[x] != x)
            x = parent[x] = parent[parent[x]];
        return x;
    };
    for (const auto& st : seg_stages) {
        size_t a = id(st.front());
        for (auto n : st) {
            size_t b = find(id(n)), ra = find(a);
            if (ra != b)
                parent[std::max(ra, b)] = std::min(ra, b);
        }
    }
    std::vector<size_t> group_of_root(names.size(), SIZE_MAX);
    for (size_t i = 0; i < names.size(); i++) {
        size_t r = find(i);
        const StageDef& def = stage_def(names[i]);
        if (group_of_root[r] == SIZE_MAX) {
            group_of_root[r] = l.stages.size();
            l.stages.push_back({std::string(names[i]), def.column, def.not_recorded, false});
        } else {
            Layout::Stage& g = l.stages[group_of_root[r]];
            g.name += " + ";
            g.name += names[i];
            g.not_recorded = g.not_recorded || def.not_recorded;
            g.merged = true;
        }
    }
    for (size_t i = 0; i < l.segments.size(); i++)
        l.segments[i].stage = group_of_root[find(id(seg_stages[i].front()))];

    // Details: after the last row of the path before them in the table.
    const ComponentDef* last_row = nullptr;
    for (const auto& c : table) {
        if (!in_view(c, view))
            continue;
        if (c.depth == 0) {
            if (std::find(rows.begin(), rows.end(), &c) != rows.end())
                last_row = &c;
            continue;
        }
        int from = event_slot(c.from);
        if (c.from == NVMETRACE_EV_NONE) {
            // the path's hop into c.to from an nvme-tcp host event, if it has
            // one (nvme-rdma's hop, from nvme_rdma_complete_rq, is a
            // component of its own)
            auto hop = std::find_if(rows.begin(), rows.end(), [&](const ComponentDef* r) {
                return r->to == c.to && !r->seam && r->from >= NVMETRACE_EV_TCP_CMD_SEND &&
                       r->from <= NVMETRACE_EV_TCP_RSP_RECV;
            });
            if (hop == rows.end())
                continue;
            from = event_slot((*hop)->from);
        }
        if (from < 0 || event_slot(c.to) < 0)
            throw std::logic_error(fmt::format("detail '{}': unknown event", c.name));
        const ComponentDef* after = last_row;
        if (c.from == NVMETRACE_EV_NONE) {
            // the hop into c.to is listed under the block layer's completion row (the one
            // that starts at c.to), as in the seed, not under rows after it (aio's)
            auto next = std::find_if(rows.begin(), rows.end(), [&](const ComponentDef* r) {
                return r->from == c.to && !r->seam;
            });
            if (next != rows.end())
                after = *next;
        }
        if (!after)
            continue;
        size_t row = static_cast<size_t>(std::find(rows.begin(), rows.end(), after) - rows.begin());
        l.details.push_back({std::string(c.name), from, event_slot(c.to), seg_of_row[row]});
    }
    return l;
}

// ----------------------------------------------------------------- joining

namespace {

int first_present(const Command& c, std::initializer_list<uint16_t> events) {
    for (uint16_t ev : events)
        if (c.has(event_slot(ev)))
            return event_slot(ev);
    return -1;
}

// Where a host command's send side ends, for ordering and window checks.
uint64_t host_anchor(const Command& c) {
    int s = host_send_slot(c);
    if (s < 0)
        s = first_present(c, {NVMETRACE_EV_NVME_SETUP, NVMETRACE_EV_BIO_QUEUE});
    return s < 0 ? c.first_ts() : c.at(s);
}

uint64_t target_anchor(const Command& c) {
    int s = event_slot(NVMETRACE_EV_NVMET_INIT);
    return c.has(s) ? c.at(s) : c.first_ts();
}

}  // namespace

int host_send_slot(const Command& c) {
    return first_present(
        c, {NVMETRACE_EV_TCP_CMD_SEND, NVMETRACE_EV_RDMA_POST_SEND, NVMETRACE_EV_RQ_ISSUE});
}

int host_receive_slot(const Command& c) {
    return first_present(
        c, {NVMETRACE_EV_TCP_C2H_RECV, NVMETRACE_EV_TCP_RSP_RECV, NVMETRACE_EV_RDMA_RECV_DONE,
            NVMETRACE_EV_NVME_COMPLETE, NVMETRACE_EV_RQ_COMPLETE});
}

int target_receive_slot(const Command& c) {
    return first_present(
        c, {NVMETRACE_EV_RDMAT_RECV, NVMETRACE_EV_TCPT_CMD_RECV, NVMETRACE_EV_NVMET_INIT});
}

int target_send_slot(const Command& c) {
    return first_present(c, {NVMETRACE_EV_RDMAT_RSP_POST, NVMETRACE_EV_NVMET_COMPLETE});
}

Command join_commands(const Command& host, const Command& target, int64_t* network_ns) {
    Command j = host;
    const int done = target_send_slot(target);
    const int init = target_receive_slot(target);
    const int recv = host_receive_slot(host);
    // target ts + shift = host ts; unsigned arithmetic wraps, as intended
    const uint64_t shift = recv >= 0 && done >= 0 ? host.at(recv) - target.at(done) : 0;
    for (uint32_t m = target.present; m; m &= m - 1) {
        int s = std::countr_zero(m);
        if (kEvents[s].side != Side::target)
            continue;
        j.ts[static_cast<size_t>(s)] = target.ts[static_cast<size_t>(s)] + shift;
        j.present |= 1u << s;
    }
    if (network_ns) {
        int send = host_send_slot(host);
        *network_ns = send >= 0 && init >= 0 ? static_cast<int64_t>(j.at(init) - host.at(send)) : 0;
    }
    return j;
}

std::string_view unmatched_reason(Unmatched u, Side side) {
    bool h = side == Side::host;
    switch (u) {
        case Unmatched::no_command_id:
            return "no nvme_setup_cmd record, so no command id";
        case Unmatched::not_sampled:
            return h ? "not sampled on the target (its 1-of-N or seed differs)"
                     : "not sampled on the host (its 1-of-N or seed differs)";
        case Unmatched::outside_window:
            return h ? "outside the target recording's window"
                     : "outside the host recording's window";
        case Unmatched::not_found:
            return h ? "not in the target recording (records lost or cut)"
                     : "not in the host recording (records lost or cut)";
        case Unmatched::no_other_side:
            return h ? "no target recording" : "no host recording";
        case Unmatched::other_controller:
            return h ? "no target recording for that controller"
                     : "no host recording for that controller";
    }
    return "?";
}

std::string_view unmatched_key(Unmatched u) {
    static constexpr std::string_view kKeys[] = {"no_command_id",  "not_sampled",
                                                 "outside_window", "not_found",
                                                 "no_other_side",  "other_controller"};
    static_assert(std::size(kKeys) == kUnmatchedReasons);
    return kKeys[static_cast<size_t>(u)];
}

uint64_t join_anchor(const Command& c) {
    return c.side == Side::host ? host_anchor(c) : target_anchor(c);
}

std::optional<int64_t> estimate_offset(std::span<const Command> host,
                                       std::span<const Command> target) {
    struct K {
        uint64_t lba;
        uint32_t nsid;
        uint16_t qid, cid, cntlid;
        uint8_t op;
        auto operator<=>(const K&) const = default;
    };
    // key -> (count, anchor) per side; cntlid 0 (unknown) on the host matches any
    std::map<K, std::pair<uint32_t, uint64_t>> h, t;
    for (const auto& c : host)
        if (c.has_cid) {
            auto& e = h[K{c.lba, c.nsid, c.qid, c.cid, 0, static_cast<uint8_t>(c.op)}];
            e.first++;
            e.second = host_anchor(c);
        }
    for (const auto& c : target) {
        auto& e = t[K{c.lba, c.nsid, c.qid, c.cid, 0, static_cast<uint8_t>(c.op)}];
        e.first++;
        e.second = target_anchor(c);
    }
    std::vector<int64_t> offsets;
    for (const auto& [k, hv] : h) {
        auto it = t.find(k);
        if (hv.first == 1 && it != t.end() && it->second.first == 1)
            offsets.push_back(static_cast<int64_t>(it->second.second - hv.second));
    }
    if (offsets.empty())
        return std::nullopt;
    std::nth_element(offsets.begin(), offsets.begin() + offsets.size() / 2, offsets.end());
    return offsets[offsets.size() / 2];
}

size_t Joiner::KeyHash::operator()(const Key& k) const {
    uint64_t h = k.lba * 0x9e3779b97f4a7c15ull;
    h ^= (uint64_t{k.qid} << 40 | uint64_t{k.cid} << 24 | uint64_t{k.op} << 16 | k.nsid) *
         0xbf58476d1ce4e5b9ull;
    return static_cast<size_t>(h ^ (h >> 31));
}

Joiner::Key Joiner::key_of(const Command& c) {
    return Key{c.lba, c.nsid, c.qid, c.cid, static_cast<uint8_t>(c.op)};
}

size_t Joiner::add_source(const Source& s) {
    sources_.push_back(s);
    bool host = false, target = false;
    for (const auto& x : sources_)
        (x.side == Side::host ? host : target) = true;
    jc_.active = host && target;
    return sources_.size() - 1;
}

void Joiner::set_window(size_t source, uint64_t first_ts, uint64_t last_ts) {
    sources_.at(source).first_ts = first_ts;
    sources_.at(source).last_ts = last_ts;
}

bool Joiner::compatible(const Entry& h, const Entry& t) const {
    return !h.cmd.cntlid || h.cmd.cntlid == t.cmd.cntlid;
}

void Joiner::match(Entry& h, Entry& t, const Sink& sink) {
    int64_t net = 0;
    Command j = join_commands(h.cmd, t.cmd, &net);
    jc_.matched++;
    jc_.negative_network += net < 0;
    // Follow the clock: what this pair says the offset is, smoothed (the
    // network's one-way time is in it; it only has to be close, not exact).
    auto& off = sources_[h.source].offset_ns;
    int64_t seen = static_cast<int64_t>(t.anchor) - static_cast<int64_t>(host_anchor(h.cmd));
    off += (seen - off) / 16;
    sink(j);
}

void Joiner::push(size_t source, const Command& cmd, const Sink& sink) {
    const Source& src = sources_.at(source);
    const int me = src.side == Side::host ? 0 : 1;
    Entry e{cmd, static_cast<uint32_t>(source), false, 0};
    e.anchor = join_anchor(cmd) + static_cast<uint64_t>(me == 0 ? src.offset_ns : 0);
    const uint64_t done = cmd.last_ts() + static_cast<uint64_t>(me == 0 ? src.offset_ns : 0);
    (me == 0 ? jc_.host : jc_.target)++;
    if (jc_.active && (me == 1 || cmd.has_cid)) {
        // The partner: same key, same controller, nearest the expected time.
        Side_& other = pending_[1 - me];
        auto [lo, hi] = other.index.equal_range(key_of(cmd));
        auto best = other.index.end();
        uint64_t best_d = opts_.window_ns;
        size_t candidates = 0;
        for (auto it = lo; it != hi; ++it) {
            Entry& o = other.q[it->second - other.base];
            if (!(me == 0 ? compatible(e, o) : compatible(o, e)))
                continue;
            candidates++;
            uint64_t d = o.anchor > e.anchor ? o.anchor - e.anchor : e.anchor - o.anchor;
            if (d <= best_d) {
                best_d = d;
                best = it;
            }
        }
        if (best != other.index.end()) {
            Entry& o = other.q[best->second - other.base];
            jc_.ambiguous += candidates > 1;
            o.done = true;
            other.live--;
            other.index.erase(best);
            me == 0 ? match(e, o, sink) : match(o, e, sink);
            evict(std::max(now_, done), sink);
            return;
        }
    }
    if (me == 0 && !cmd.has_cid) {  // no command id: nothing can match it
        emit_unmatched(e, 0, sink);
        evict(std::max(now_, done), sink);
        return;
    }
    Side_& mine = pending_[me];
    mine.index.emplace(key_of(cmd), mine.base + mine.q.size());
    mine.q.push_back(std::move(e));
    mine.live++;
    jc_.peak_pending = std::max(jc_.peak_pending, pending());
    evict(std::max(now_, done), sink);
}

void Joiner::emit_unmatched(Entry& e, int side, const Sink& sink) {
    Side mine = side == 0 ? Side::host : Side::target;
    Unmatched why = Unmatched::not_found;
    if (!jc_.active) {
        why = Unmatched::no_other_side;
    } else if (mine == Side::host && !e.cmd.has_cid) {
        why = Unmatched::no_command_id;
    } else {
        // The other side's recordings of this controller, if any is known.
        bool any_ctrl = false, any_sampled = false, any_inside = false;
        for (size_t i = 0; i < sources_.size(); i++) {
            const Source& o = sources_[i];
            if (o.side == mine)
                continue;
            const uint16_t id = e.cmd.cntlid;
            if (id && !o.cntlids.empty() &&
                std::find(o.cntlids.begin(), o.cntlids.end(), id) == o.cntlids.end())
                continue;
            any_ctrl = true;
            if (!sampled(e.cmd.lba, o.seed, o.sample_n))
                continue;
            any_sampled = true;
            // the command's time on the other recording's clock
            int64_t shift = mine == Side::host ? sources_[e.source].offset_ns : -o.offset_ns;
            uint64_t t = join_anchor(e.cmd) + static_cast<uint64_t>(shift);
            if (t >= o.first_ts && t <= o.last_ts)
                any_inside = true;
        }
        why = !any_ctrl      ? Unmatched::other_controller
              : !any_sampled ? Unmatched::not_sampled
              : !any_inside  ? Unmatched::outside_window
                             : Unmatched::not_found;
    }
    (side == 0 ? jc_.host_unmatched : jc_.target_unmatched)[static_cast<size_t>(why)]++;
    sink(e.cmd);
}

void Joiner::evict(uint64_t now, const Sink& sink) {
    now_ = now;
    for (int side = 0; side < 2; side++) {
        Side_& p = pending_[side];
        while (!p.q.empty()) {
            Entry& e = p.q.front();
            if (!e.done) {
                if (e.anchor + opts_.window_ns >= now)
                    break;
                auto [lo, hi] = p.index.equal_range(key_of(e.cmd));
                for (auto it = lo; it != hi; ++it)
                    if (it->second == p.base) {
                        p.index.erase(it);
                        break;
                    }
                p.live--;
                emit_unmatched(e, side, sink);
            }
            p.q.pop_front();
            p.base++;
        }
    }
}

JoinCounts Joiner::finish(const Sink& sink) {
    evict(UINT64_MAX, sink);
    JoinCounts out = jc_;
    bool active = jc_.active;
    jc_ = JoinCounts{};
    jc_.active = active;
    now_ = 0;
    return out;
}

void Joiner::add(size_t source, const Command& cmd) {
    buffered_.emplace_back(source, cmd);
}

JoinCounts Joiner::join(const Sink& sink) {
    // each host recording's offset, from the keys it shares with the targets
    std::vector<Command> targets;
    for (const auto& [s, c] : buffered_)
        if (sources_[s].side == Side::target)
            targets.push_back(c);
    for (size_t s = 0; s < sources_.size(); s++) {
        if (sources_[s].side != Side::host)
            continue;
        std::vector<Command> hosts;
        for (const auto& [src, c] : buffered_)
            if (src == s)
                hosts.push_back(c);
        if (auto off = estimate_offset(hosts, targets))
            sources_[s].offset_ns = *off;
    }
    auto done = [&](const std::pair<size_t, Command>& x) {
        const Source& src = sources_[x.first];
        return x.second.last_ts() +
               static_cast<uint64_t>(src.side == Side::host ? src.offset_ns : 0);
    };
    std::stable_sort(buffered_.begin(), buffered_.end(),
                     [&](const auto& a, const auto& b) { return done(a) < done(b); });
    for (const auto& [s, c] : buffered_)
        push(s, c, sink);
    buffered_.clear();
    return finish(sink);
}

}  // namespace nvmetrace
