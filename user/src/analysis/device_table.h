// What a recording says about its machine's block devices and target
// namespaces (its META `devices`): names, multipath heads, block sizes and
// controller ids, for the Assembler and the report's group labels.
#pragma once

#include <stdint.h>

#include <string>
#include <unordered_map>
#include <vector>

namespace nvmetrace {

// A dev number in the kernel encoding (major << 20 | minor) as "major:minor".
std::string dev_number(uint32_t dev);

// What the recording says about the machine's block devices and target
// namespaces.  Host dev numbers use the kernel encoding (major << 20 | minor).
class DeviceTable {
public:
    // A namespace disk (nvme1n1), or an NVMe multipath head.  cntlid: the
    // controller id of its controller (0: unknown, or a multipath head).
    // since: from when (the records' clock) this holds, for a disk that
    // appeared again or whose controller changed while recording (a reset
    // gives it a new controller id); 0: from the start.  The latest entry
    // gives the name, head and block size.
    void add_disk(uint32_t dev, std::string name, uint32_t block_size = 0, uint16_t cntlid = 0,
                  uint64_t since = 0);
    // A path disk (nvme1c1n1) of the multipath head `head`, on controller cntlid.
    void add_path(uint32_t path_dev, uint32_t head_dev, std::string name = {}, uint16_t cntlid = 0,
                  uint64_t since = 0);
    // A target namespace (the nsid in nvmet_req_init's record).
    void add_target_namespace(uint32_t nsid, std::string name, uint32_t block_size);

    // The head of a path disk; any other disk is its own head.  at: when
    // (the records' clock): a dev number that a disk of another name had
    // earlier in the recording (freed by one namespace, taken by another)
    // gives each its own number, an alias above kAliasBase for the later
    // ones, so their commands are not grouped or named as one disk.
    uint32_t head(uint32_t dev, uint64_t at = UINT64_MAX) const;
    static constexpr uint32_t kAliasBase = 0xffe00000u;  // major 4094: no real disk's
    // "nvme1n1", or "dev 259:3" for a disk the table does not know.
    std::string disk_name(uint32_t dev) const;
    std::string target_name(uint32_t nsid) const;
    uint32_t target_block_size(uint32_t nsid) const;  // 0: unknown
    // A disk went away while recording, at ts (the records' clock).
    void set_gone(uint32_t dev, uint64_t ts);
    // The first time at or after ts the disk went away; 0: none.
    uint64_t gone_after(uint32_t dev, uint64_t ts) const;
    // The controller id of the controller a (path) disk belongs to at ts
    // (the last one known: UINT64_MAX); 0: unknown.
    uint16_t cntlid(uint32_t dev, uint64_t ts = UINT64_MAX) const;
    // The controller id the disk got at its first change after ts, if that
    // change came at most `within` ns after ts; 0: none.  A change is known
    // from when the recorder saw it, a little after it happened: a command
    // in between ran on the new controller under the old id.
    uint16_t cntlid_next(uint32_t dev, uint64_t ts, uint64_t within) const;
    // Every disk's and target namespace's name, as the names above give them.
    std::vector<std::string> names() const;

private:
    struct Disk {
        std::string name;
        uint32_t head = 0;
        uint32_t block_size = 0;
        uint16_t cntlid = 0;
        std::vector<uint64_t> gone;  // when it went away, in order
        // (since, cntlid) when the controller changed while recording, by since
        std::vector<std::pair<uint64_t, uint16_t>> history;
    };
    void add(uint32_t dev, Disk d, uint64_t since);
    struct TargetNs {
        std::string name;
        uint32_t block_size = 0;
    };
    std::unordered_map<uint32_t, Disk> disks_;
    // dev numbers that disks of several names had: from when each went by
    // which number (its own, or an alias), by since
    struct Instance {
        uint64_t since = 0;
        uint32_t id = 0;
        std::string name;
    };
    std::unordered_map<uint32_t, std::vector<Instance>> instances_;
    uint32_t next_alias_ = kAliasBase;
    std::unordered_map<uint32_t, TargetNs> target_ns_;
};

}  // namespace nvmetrace
