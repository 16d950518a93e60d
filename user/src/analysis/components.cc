#include "analysis/components.h"

#include <algorithm>
#include <bit>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

namespace nvmetrace {

namespace {

bool in_view(const ComponentDef& c, View view) {
    return c.views & static_cast<uint8_t>(view);
}

// Whether a command with the events `present` may lack the event of `slot`.
// A command of SPDK's host driver (it has SPDK_SUBMIT) never passed the
// kernel's block layer or nvme-core: for it every host event is optional.
bool optional_in(int slot, EventMask present) {
    if (kEvents[slot].optional)
        return true;
    static const int spdk = event_slot(NVMETRACE_EV_SPDK_SUBMIT);
    return kEvents[slot].side == Side::host && (present >> spdk & 1u);
}

// First and last events of a view's path for a command with the events
// `present`: the `from` of its first depth-0 row that is present or required
// and the `to` of its last (optional rows at either end, such as the
// nvmet-rdma capsule's receive before nvmet_req_init and its response's send
// completion after nvmet_req_complete, lengthen the path of the commands
// that have them).  present = 0: the required ends.
ViewEnds table_ends(View view, std::span<const ComponentDef> table, EventMask present = 0) {
    ViewEnds e;
    auto counts = [present](int slot) {
        return (present >> slot & 1u) || !optional_in(slot, present);
    };
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
EventMask required_events(View view, std::span<const ComponentDef> table) {
    EventMask m = 0;
    for (const auto& c : table) {
        if (c.depth != 0 || !in_view(c, view))
            continue;
        for (uint16_t ev : {c.from, c.to}) {
            int s = event_slot(ev);
            if (s >= 0 && !kEvents[s].optional)
                m |= EventMask{1} << s;
        }
    }
    return m;
}

const StageDef& stage_def(std::string_view name) {
    for (const auto& s : kStages)
        if (s.name == name)
            return s;
    throw std::logic_error(fmt::format("unknown stage '{}'", name));
}

}  // namespace

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

// ----------------------------------------------------------------- components

View view_of(const Command& cmd) {
    bool host = false, target = false;
    for (EventMask m = cmd.present; m; m &= m - 1)
        (kEvents[std::countr_zero(m)].side == Side::host ? host : target) = true;
    if (host && target)
        return View::joined;
    return target ? View::target_only : View::host_only;
}

std::vector<const ComponentDef*> path_of(View view, EventMask present,
                                         std::span<const ComponentDef> table, EventMask* missing) {
    const ViewEnds ends = table_ends(view, table, present);
    if (ends.first < 0)
        throw std::logic_error("no components for this view");
    std::vector<const ComponentDef*> rows;
    EventMask miss = 0;
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
            if (!fallback && !optional_in(to, present))
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
            miss |= EventMask{1} << cur;
    }
    if (missing)
        *missing = miss;
    return rows;
}

EventMask layout_key(View view, EventMask present, std::span<const ComponentDef> table) {
    EventMask key = 0;
    for (const auto* r : path_of(view, present, table)) {
        key |= EventMask{1} << event_slot(r->from);
        key |= EventMask{1} << event_slot(r->to);
    }
    return key & present;
}

EventMask interior_boundaries(View view, std::span<const ComponentDef> table) {
    auto rows = path_of(view, required_events(view, table), table);
    EventMask mask = 0;
    for (size_t i = 1; i < rows.size(); i++)
        mask |= EventMask{1} << event_slot(rows[i]->from);
    return mask;
}

EventMask missing_boundaries(const Command& cmd, std::span<const ComponentDef> table) {
    EventMask missing = 0;
    path_of(view_of(cmd), cmd.present, table, &missing);
    return missing;
}

Layout make_layout(View view, EventMask missing_mask, std::span<const ComponentDef> table) {
    return layout_for(view, required_events(view, table) & ~missing_mask, table);
}

Layout layout_for(View view, EventMask present, std::span<const ComponentDef> table) {
    EventMask missing_mask = 0;
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

namespace {

// The id of `name` in `table`, the parts of a merged name ("a + b") joined
// with '+'; "" when a part has none.
std::string id_in(std::span<const NamedId> table, std::string_view name) {
    std::string out;
    for (;;) {
        const size_t sep = name.find(" + ");
        const std::string_view part = name.substr(0, sep);
        const NamedId* hit = nullptr;
        for (const auto& e : table)
            if (e.name == part)
                hit = &e;
        if (!hit)
            return {};
        if (!out.empty())
            out += '+';
        out += hit->id;
        if (sep == std::string_view::npos)
            return out;
        name.remove_prefix(sep + 3);
    }
}

}  // namespace

std::string stage_id(std::string_view name) {
    return id_in(kStageIds, name);
}

std::string component_id(std::string_view name) {
    return id_in(kComponentIds, name);
}

std::string spdk_target_name(std::string_view name) {
    if (name == "target driver")
        return "target driver (SPDK)";
    if (name == "storage")
        return "storage (SPDK bdev, drive)";
    if (name == "storage: target block layer and drive")
        return "storage: SPDK bdev and drive";
    return std::string(name);
}

void spdk_target_span(Span& span) {
    if (span.from == kEvents[static_cast<size_t>(event_slot(NVMETRACE_EV_NVMET_INIT))].name)
        span.from = "SPDK's request received (TCP_REQ_NEW, RDMA_REQ_NEW)";
    if (span.to == kEvents[static_cast<size_t>(event_slot(NVMETRACE_EV_NVMET_COMPLETE))].name)
        span.to = "its response handed on (TCP_REQ_RDY_TO_COMPLETE, RDMA_REQ_RDY_TO_COMPL)";
}

// ----------------------------------------------------------------- span

Span span_of(const Layout& l, SubmitPath path, bool reap_unseen, bool reap_ring) {
    Span s;
    s.interface = submit_path_name(path);
    if (l.view == View::target_only) {
        s.from = kEvents[l.first_slot].name;
        s.to = kEvents[l.last_slot].name;
        s.note = "the target's side of the commands: the host's part is not in this view";
        return s;
    }
    std::vector<std::string> notes;
    const uint16_t first = kEvents[l.first_slot].event, last = kEvents[l.last_slot].event;
    switch (first) {
        case NVMETRACE_EV_SYSCALL_SUBMIT:
            s.from = "io_submit() entry";
            break;
        case NVMETRACE_EV_SYNC_SUBMIT:
            s.from =
                "the system call's entry (pread64, pwrite64, preadv, pwritev, preadv2, "
                "pwritev2)";
            break;
        case NVMETRACE_EV_URING_SUBMIT:
            s.from = path == SubmitPath::uring_sqpoll ? "the SQE taken by the SQPOLL thread"
                                                      : "io_uring_enter() entry";
            break;
        case NVMETRACE_EV_FILE_SUBMIT:
            s.from = "the file submission";
            notes.push_back("the system call's entry is not recorded");
            break;
        case NVMETRACE_EV_SPDK_SUBMIT:
            s.from =
                "the command handed to SPDK's queue pair (NVME_TCP_SUBMIT; over RDMA, "
                "spdk_rdma_provider_qp_queue_send_wrs)";
            notes.push_back("the app's own time before it is not recorded");
            break;
        case NVMETRACE_EV_NVME_SETUP:
            s.from = "nvme_setup_cmd (passthrough)";
            notes.push_back("the submission above the driver is not recorded");
            break;
        default:
            s.from = kEvents[l.first_slot].name;
            notes.push_back(path == SubmitPath::kernel
                                ? "queued by a kernel thread (the page cache's write-back, or "
                                  "another kernel user of the disk): no system call starts it"
                                : "the submission above the block layer is not recorded");
            break;
    }
    switch (last) {
        case NVMETRACE_EV_AIO_REAP:
            s.to = "io_getevents() return";
            break;
        case NVMETRACE_EV_SYNC_RETURN:
            s.to = "its return";
            break;
        case NVMETRACE_EV_URING_REAP:
            s.reap_ring = reap_ring;
            s.to = reap_ring ? "the next io_uring_enter() entry, where the kernel saw the CQE "
                               "taken from the mapped ring"
                             : "io_uring_enter() return";
            break;
        case NVMETRACE_EV_URING_CQE:
            s.to = "the CQE posted";
            notes.push_back(reap_unseen ? "its reap is not seen (taken from the mapped CQ ring "
                                          "with no system call waiting for it, or posted by an "
                                          "io thread)"
                                        : "its reap is not recorded");
            break;
        case NVMETRACE_EV_SPDK_COMPLETE:
            s.to =
                "its response processed, before the app's callback (NVME_TCP_COMPLETE; over "
                "RDMA, nvme_rdma_req_complete)";
            notes.push_back("the callback is not recorded");
            break;
        case NVMETRACE_EV_AIO_COMPLETE:
            s.to = "the aio completion posted";
            notes.push_back("its reap is not recorded");
            break;
        default:
            s.to = kEvents[l.last_slot].name;
            notes.push_back("the completion's way back to user space is not recorded");
            break;
    }
    s.user_space = notes.empty();
    s.note = fmt::format("{}", fmt::join(notes, "; "));
    return s;
}

}  // namespace nvmetrace
