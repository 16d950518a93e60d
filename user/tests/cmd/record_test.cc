#include "cmd/record.h"

#include "analysis/assembler.h"
#include "analysis/device_table.h"
#include "kernel/btf_layout.h"
#include "kernel/memfd_rings.h"
#include "kernel/ring_reader.h"
#include "tempdir.h"
#include "util/error.h"

#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include <bpf/btf.h>
#include <gtest/gtest.h>

namespace nvmetrace {
namespace {

nvmetrace_rec rec_at(uint64_t ts, uint32_t seq) {
    nvmetrace_rec r{};
    r.ts = ts;
    r.seq = seq;
    return r;
}

// The recording ends while a ring is in a drop run: the ring holds no
// marker for it, and the recorder adds the one its control page describes,
// after that CPU's records; the markers then add up to the ring's lost.
TEST(RecordLoop, ClosesTheDropRunOpenAtTheEnd) {
    MemfdRings dev(2, 4);
    for (uint64_t i = 0; i < 7; i++)  // 4 fit, 3 dropped
        EXPECT_EQ(dev.produce(1, rec_at(1000 + i, 0)), i < 4);
    EXPECT_TRUE(dev.produce(0, rec_at(500, 0)));
    RingReader rings(dev.fd(), dev.geo());
    DeviceTable table;
    Assembler seen(table, [](const Command&) {});
    RecordLoop loop(rings, nullptr, &seen);
    EXPECT_EQ(loop.drain(), 5u);
    EXPECT_EQ(loop.close_open_gaps(), 1u);
    loop.release(UINT64_MAX, true);
    const auto& gaps = seen.counts().gaps;
    ASSERT_EQ(gaps.size(), 1u);
    EXPECT_EQ(gaps[0].cpu, 1u);
    EXPECT_EQ(gaps[0].records, 3u);
    EXPECT_EQ(gaps[0].records, rings.lost());
    EXPECT_LE(gaps[0].first_ts, gaps[0].last_ts);
}

// A FIFO that wraps and grows keeps its records in order, and hands out
// its front in contiguous pieces.
TEST(RecordQueue, WrapsAndGrowsInOrder) {
    RecordQueue q;
    uint64_t in = 0, out = 0;
    size_t most = 0;
    std::mt19937_64 rng(3);
    for (int round = 0; round < 300; round++) {
        // fill through space()/commit() and push_back(), in uneven pieces
        size_t n = rng() % 700;
        while (n) {
            std::span<nvmetrace_rec> room = q.space(n);
            ASSERT_FALSE(room.empty());
            const size_t k = std::min(room.size(), n);
            for (size_t i = 0; i < k; i++)
                room[i] = rec_at(in++, 0);
            q.commit(k);
            n -= k;
        }
        std::vector<nvmetrace_rec> more;
        for (size_t i = rng() % 50; i > 0; i--)
            more.push_back(rec_at(in++, 0));
        q.push_back(more);
        ASSERT_EQ(q.size(), in - out);
        most = std::max(most, q.size());
        ASSERT_EQ(q.capacity() & (q.capacity() - 1), 0u) << "capacity not a power of two";
        // take from the front in pieces
        size_t take = rng() % (q.size() + 1);
        while (take) {
            std::span<const nvmetrace_rec> piece = q.front_span(take);
            ASSERT_FALSE(piece.empty());
            for (const auto& r : piece)
                ASSERT_EQ(r.ts, out++);
            q.pop_front(piece.size());
            take -= piece.size();
        }
        if (!q.empty()) {
            ASSERT_EQ(q.front().ts, out);
            ASSERT_EQ(q[q.size() - 1].ts, in - 1);
        }
    }
    EXPECT_GT(in, 50'000u);
    // grows only for what it holds (doubling; space() asks for up to 700 more)
    EXPECT_LE(q.capacity(), 2 * (most + 700));
}

// With one busy ring, what is released comes straight from its queue, in
// pieces where the queue wraps, in order and exactly once.
TEST(Reorderer, OneRingIsReleasedInPlaceAcrossTheWrap) {
    Reorderer ro(100);
    std::vector<uint64_t> out;
    uint64_t ts = 0;
    for (int round = 0; round < 50; round++) {
        std::vector<nvmetrace_rec> batch;
        for (int i = 0; i < 333; i++)
            batch.push_back(rec_at(ts += 3, 0));
        ro.add(0, batch);
        ro.release(ts, false, [&](std::span<const nvmetrace_rec> recs) {
            for (const auto& r : recs) {
                EXPECT_LT(r.ts + 100, ts);
                out.push_back(r.ts);
            }
        });
        EXPECT_LE(ro.pending(), 34u);
    }
    ro.release(ts, true, [&](std::span<const nvmetrace_rec> recs) {
        for (const auto& r : recs)
            out.push_back(r.ts);
    });
    ASSERT_EQ(out.size(), 50u * 333u);
    for (size_t i = 0; i < out.size(); i++)
        ASSERT_EQ(out[i], 3 * (i + 1));
}

// Released with runs, every record comes with the ring (CPU) it was added
// from, whether the rings are merged or one is released in place.
TEST(Reorderer, RunsSayWhichRingEachRecordCameFrom) {
    Reorderer ro(100);
    std::vector<std::pair<uint64_t, uint32_t>> out;  // ts, CPU
    auto take = [&](std::span<const nvmetrace_rec> recs, std::span<const CpuRun> runs) {
        size_t i = 0;
        for (const CpuRun& r : runs) {
            EXPECT_GT(r.count, 0u);
            for (uint32_t k = 0; k < r.count; k++, i++) {
                ASSERT_LT(i, recs.size());
                EXPECT_EQ(recs[i].aux, r.cpu) << "record " << recs[i].ts;
                out.emplace_back(recs[i].ts, r.cpu);
            }
        }
        EXPECT_EQ(i, recs.size());
    };
    auto on = [](uint64_t ts, uint32_t cpu) {
        nvmetrace_rec r = rec_at(ts, 0);
        r.aux = cpu;  // where the test put it
        return r;
    };
    // CPUs 0, 2 and 5 taking turns: merged
    for (uint32_t cpu : {0u, 2u, 5u}) {
        std::vector<nvmetrace_rec> recs;
        for (uint64_t ts = 10 + cpu; ts < 400; ts += 15)
            recs.push_back(on(ts, cpu));
        recs.push_back(on(cpu == 5 ? 1005 : 3000 + cpu, cpu));
        ro.add(cpu, recs);
    }
    ro.release(800, false, take);
    // then only CPU 5 has anything older than the window: released in place
    ro.release(1106, false, take);
    ro.release(0, true, take);
    ASSERT_EQ(out.size(), 3u * 26u + 3u);
    for (size_t i = 1; i < out.size(); i++)
        EXPECT_LE(out[i - 1].first, out[i].first);
    EXPECT_EQ(out[out.size() - 3], (std::pair<uint64_t, uint32_t>{1005, 5}));
    EXPECT_EQ(out[out.size() - 2], (std::pair<uint64_t, uint32_t>{3000, 0}));
    EXPECT_EQ(out.back(), (std::pair<uint64_t, uint32_t>{3002, 2}));
}

// What the rings held reaches the file with each record's CPU.
TEST(RecordLoop, WritesEachRecordsCpu) {
    test::TempDir dir;
    const std::string path = dir / "loop.ntr";
    MemfdRings dev(3, 64);
    for (uint32_t i = 0; i < 30; i++) {
        const uint32_t cpu = i % 3 == 2 ? 2 : i % 2;  // CPUs 0, 1 and 2, unevenly
        nvmetrace_rec x = rec_at(1000 + i, 0);
        x.aux = cpu;
        ASSERT_TRUE(dev.produce(cpu, x));
    }
    RingReader rings(dev.fd(), dev.geo());
    RecordingWriter w = RecordingWriter::open(path, {});
    w.write_meta(make_recording_meta());
    RecordLoop loop(rings, &w, nullptr);
    EXPECT_EQ(loop.drain(), 30u);
    loop.release(UINT64_MAX, true);
    w.close();
    RecordingReader r = RecordingReader::open(path);
    std::span<const nvmetrace_rec> recs;
    size_t n = 0;
    while (r.next(recs)) {
        const std::span<const CpuRun> runs = r.cpu_runs();
        ASSERT_FALSE(runs.empty());
        size_t i = 0;
        for (const CpuRun& run : runs)
            for (uint32_t k = 0; k < run.count; k++, i++)
                EXPECT_EQ(recs[i].aux, run.cpu) << recs[i].ts;
        n += recs.size();
    }
    EXPECT_EQ(n, 30u);
    EXPECT_TRUE(r.notes().empty());
}

// Every command sampled: records stored raw, a drain's release written
// straight; fewer: zstd level 1; --zstd wins either way, and a level zstd
// does not have is refused before anything is attached.
TEST(RecordWriterOptions, RawAtOneOfOneAndTheZstdOption) {
    RecordingWriterOptions all = recorder_writer_options(1);
    EXPECT_EQ(all.zstd_level, 0);
    EXPECT_EQ(all.direct_records, 1024u);
    EXPECT_EQ(all.flush_interval, std::chrono::seconds(1));
    EXPECT_EQ(recorder_writer_options(100).zstd_level, 1);
    EXPECT_EQ(recorder_writer_options(100).direct_records, 0u);
    EXPECT_EQ(recorder_writer_options(1, -5).zstd_level, -5);
    EXPECT_EQ(recorder_writer_options(1, -5).direct_records, 0u);
    EXPECT_EQ(recorder_writer_options(100, 0).zstd_level, 0);
    EXPECT_EQ(recorder_writer_options(100, 0).direct_records, 1024u);

    RecordOptions o;
    o.roles = {"host"};
    o.output = "/nonexistent/x.ntr";
    o.zstd_level = 1000;
    try {
        run_record(o);
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("--zstd 1000: the level is"), std::string::npos)
            << e.what();
    }
}

// Without -r the machine decides: namespaces make a host, subsystems a
// target, both make both, and neither is an error that says what to do.
TEST(RoleFromMachine, HostTargetBothOrAnErrorThatSaysWhatToDo) {
    std::string said;
    EXPECT_EQ(role_from_machine(2, false, 0, said), uint32_t{NVMETRACE_ROLE_HOST});
    EXPECT_EQ(said,
              "recording as host: this machine has 2 NVMe-oF namespaces (-r host or -r target "
              "to choose)");
    EXPECT_EQ(role_from_machine(0, false, 1, said), uint32_t{NVMETRACE_ROLE_TARGET});
    EXPECT_NE(said.find("recording as target: this machine has 1 nvmet subsystem "),
              std::string::npos)
        << said;
    EXPECT_EQ(role_from_machine(1, false, 3, said),
              uint32_t{NVMETRACE_ROLE_HOST | NVMETRACE_ROLE_TARGET});
    EXPECT_NE(said.find("host+target: this machine has 1 NVMe-oF namespace and 3 nvmet "
                        "subsystems"),
              std::string::npos)
        << said;
    // --dev may name a namespace to come: that is a host
    EXPECT_EQ(role_from_machine(0, true, 0, said), uint32_t{NVMETRACE_ROLE_HOST});
    EXPECT_NE(said.find("--dev names a host namespace"), std::string::npos) << said;
    said = "unchanged";
    try {
        role_from_machine(0, false, 0, said);
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("-r host or -r target"), std::string::npos)
            << e.what();
        EXPECT_NE(std::string(e.what()).find("nvme connect"), std::string::npos) << e.what();
    }
    EXPECT_EQ(said, "unchanged");
}

TEST(Reorderer, ReleasesOnlyWhatIsOlderThanTheWindowInTimeOrder) {
    Reorderer ro(100);
    // two rings, each in time order, interleaved in time
    std::vector<nvmetrace_rec> cpu0{rec_at(10, 0), rec_at(30, 1), rec_at(250, 2)};
    std::vector<nvmetrace_rec> cpu1{rec_at(20, 0), rec_at(40, 1), rec_at(260, 2)};
    ro.add(0, cpu0);
    ro.add(1, cpu1);
    std::vector<uint64_t> out;
    auto take = [&](std::span<const nvmetrace_rec> recs) {
        for (const auto& r : recs)
            out.push_back(r.ts);
    };
    ro.release(200, false, take);  // limit 100
    EXPECT_EQ(out, (std::vector<uint64_t>{10, 20, 30, 40}));
    EXPECT_EQ(ro.pending(), 2u);
    // a record inside the window is put in its place
    ro.add(0, std::vector<nvmetrace_rec>{rec_at(255, 3)});
    ro.release(1000, true, take);
    EXPECT_EQ(out, (std::vector<uint64_t>{10, 20, 30, 40, 250, 255, 260}));
    EXPECT_EQ(ro.pending(), 0u);
}

TEST(Reorderer, RandomStreamsComeOutSorted) {
    std::mt19937_64 rng(7);
    Reorderer ro(1'000);
    std::vector<uint64_t> out;
    uint64_t clock = 0;
    std::vector<uint64_t> next(4, 0);
    for (int round = 0; round < 200; round++) {
        clock += 500;
        for (uint32_t cpu = 0; cpu < next.size(); cpu++) {
            uint64_t& n = next[cpu];
            std::vector<nvmetrace_rec> batch;
            while (n + 50 < clock) {
                n += 1 + rng() % 100;
                batch.push_back(rec_at(n, 0));
            }
            ro.add(cpu, batch);
        }
        ro.release(clock, false, [&](std::span<const nvmetrace_rec> recs) {
            for (const auto& r : recs)
                out.push_back(r.ts);
        });
    }
    ro.release(clock, true, [&](std::span<const nvmetrace_rec> recs) {
        for (const auto& r : recs)
            out.push_back(r.ts);
    });
    EXPECT_TRUE(std::is_sorted(out.begin(), out.end()));
    EXPECT_GT(out.size(), 1000u);
}

// A tiny vmlinux + module BTF pair with nvmet's structs laid out as in 6.12,
// including a member inside an anonymous union, written as raw BTF files.
class FakeBtf : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = std::filesystem::temp_directory_path() /
               ("nvmetrace-btf-" + std::to_string(::getpid()));
        std::filesystem::create_directories(dir_);
        btf* base = btf__new_empty();
        int u16 = btf__add_int(base, "u16", 2, 0);
        int u64 = btf__add_int(base, "u64", 8, 0);
        int vptr = btf__add_ptr(base, 0);
        write(base, "vmlinux");
        btf* mod = btf__new_empty_split(base);
        // struct nvmet_req { void *cmd; void *cqe; void *sq; }
        btf__add_struct(mod, "nvmet_req", 24);
        btf__add_field(mod, "cmd", vptr, 0, 0);
        btf__add_field(mod, "cqe", vptr, 64, 0);
        btf__add_field(mod, "sq", vptr, 128, 0);
        // struct nvmet_sq { void *ctrl; u64 ref[2]; u16 qid; }
        btf__add_struct(mod, "nvmet_sq", 32);
        btf__add_field(mod, "ctrl", vptr, 0, 0);
        btf__add_field(mod, "ref", u64, 64, 0);
        btf__add_field(mod, "ref2", u64, 128, 0);
        btf__add_field(mod, "qid", u16, 192, 0);
        // struct nvmet_ctrl { u64 a[11]; union { u16 cntlid; u16 other; }; }
        int anon = btf__add_union(mod, nullptr, 2);
        btf__add_field(mod, "cntlid", u16, 0, 0);
        btf__add_field(mod, "other", u16, 0, 0);
        btf__add_struct(mod, "nvmet_ctrl", 96);
        btf__add_field(mod, "a", u64, 0, 0);
        btf__add_field(mod, "", anon, 88 * 8, 0);
        write(mod, "nvmet");
        btf__free(mod);
        btf__free(base);
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }
    void write(btf* b, const char* name) {
        uint32_t size = 0;
        const void* raw = btf__raw_data(b, &size);
        std::ofstream(dir_ / name, std::ios::binary)
            .write(static_cast<const char*>(raw), static_cast<std::streamsize>(size));
    }
    std::filesystem::path dir_;
};

TEST_F(FakeBtf, FindsNvmetOffsetsIncludingAnonymousMembers) {
    BtfLayout l = BtfLayout::load("nvmet", dir_.string());
    ASSERT_TRUE(l.ok()) << l.error();
    auto n = l.nvmet();
    ASSERT_TRUE(n) << l.error();
    EXPECT_EQ(n->req_cmd.offset, 0u);
    EXPECT_EQ(n->req_cqe.offset, 8u);
    EXPECT_EQ(n->req_sq.offset, 16u);
    EXPECT_EQ(n->sq_ctrl.offset, 0u);
    EXPECT_EQ(n->sq_qid.offset, 24u);
    EXPECT_EQ(n->ctrl_cntlid.offset, 88u);
    EXPECT_EQ(n->ctrl_cntlid.size, 2u);
}

TEST_F(FakeBtf, AFieldOfAnotherSizeIsRefused) {
    BtfLayout l = BtfLayout::load("nvmet", dir_.string());
    ASSERT_TRUE(l.ok()) << l.error();
    EXPECT_TRUE(l.sized_member("nvmet_sq", "qid", 2));
    EXPECT_TRUE(l.sized_member("nvmet_sq", "qid", 0));
    EXPECT_FALSE(l.sized_member("nvmet_sq", "qid", 4));
    EXPECT_EQ(l.error(), "nvmet_sq.qid is 2 bytes in this kernel, nvmetrace reads 4");
}

TEST_F(FakeBtf, MissingMemberOrModuleIsAClearError) {
    BtfLayout l = BtfLayout::load("nvmet", dir_.string());
    EXPECT_FALSE(l.member("nvmet_req", "nope"));
    EXPECT_NE(l.error().find("no member nope"), std::string::npos);
    EXPECT_FALSE(l.member("nvmet_nothing", "x"));
    EXPECT_NE(l.error().find("struct nvmet_nothing"), std::string::npos);
    BtfLayout absent = BtfLayout::load("nvme_tcp", dir_.string());
    EXPECT_FALSE(absent.ok());
    EXPECT_NE(absent.error().find("module not loaded"), std::string::npos);
    BtfLayout nokernel = BtfLayout::load("nvmet", (dir_ / "nowhere").string());
    EXPECT_FALSE(nokernel.ok());
    EXPECT_NE(nokernel.error().find("CONFIG_DEBUG_INFO_BTF"), std::string::npos);
}

// nvmet-rdma's group from a module BTF that carries the RDMA core's structs:
// offsets in NVMETRACE_L_RDMAT_* order; an embedded struct of another size
// than its type (a layout nvmetrace does not know) is refused.
class FakeRdmaBtf : public FakeBtf {
protected:
    void build(uint32_t req_size_in_rsp) {
        btf* base = btf__new_empty();
        int u16 = btf__add_int(base, "u16", 2, 0);
        int u32 = btf__add_int(base, "u32", 4, 0);
        int vptr = btf__add_ptr(base, 0);
        write(base, "vmlinux");
        btf* mod = btf__new_empty_split(base);
        // struct ib_wc { union { u64 wr_id; void *wr_cqe; }; u32 status; ...; void *qp; }
        int anon = btf__add_union(mod, nullptr, 8);
        btf__add_field(mod, "wr_id", vptr, 0, 0);
        btf__add_field(mod, "wr_cqe", vptr, 0, 0);
        btf__add_struct(mod, "ib_wc", 32);
        btf__add_field(mod, "", anon, 0, 0);
        btf__add_field(mod, "status", u32, 64, 0);
        btf__add_field(mod, "qp", vptr, 192, 0);
        btf__add_struct(mod, "ib_qp", 64);
        btf__add_field(mod, "qp_context", vptr, 56 * 8, 0);
        btf__add_struct(mod, "nvmet_rdma_cmd", 272);
        btf__add_field(mod, "cqe", vptr, 80 * 8, 0);
        btf__add_field(mod, "nvme_cmd", vptr, 248 * 8, 0);
        int sq = btf__add_struct(mod, "nvmet_sq", 280);
        btf__add_field(mod, "qid", u16, 0, 0);
        btf__add_struct(mod, "nvmet_rdma_queue", 504);
        btf__add_field(mod, "nvme_sq", sq, 72 * 8, 0);
        int req = btf__add_struct(mod, "nvmet_req", 440);
        btf__add_field(mod, "cmd", vptr, 0, 0);
        int odd = btf__add_struct(mod, "nvmet_req_old", req_size_in_rsp);
        btf__add_field(mod, "cmd", vptr, 0, 0);
        btf__add_struct(mod, "nvmet_rdma_rsp", 656);
        btf__add_field(mod, "send_cqe", vptr, 16 * 8, 0);
        btf__add_field(mod, "read_cqe", vptr, 80 * 8, 0);
        btf__add_field(mod, "req", req_size_in_rsp == 440 ? req : odd, 176 * 8, 0);
        write(mod, "nvmet_rdma");
        btf__free(mod);
        btf__free(base);
    }
};

TEST_F(FakeRdmaBtf, NvmetRdmaOffsetsInUapiOrder) {
    build(440);
    BtfLayout l = BtfLayout::load("nvmet_rdma", dir_.string());
    ASSERT_TRUE(l.ok()) << l.error();
    auto r = l.nvmet_rdma();
    ASSERT_TRUE(r) << l.error();
    EXPECT_EQ(r->offsets, (std::vector<uint32_t>{0, 8, 24, 56, 80, 248, 72, 16, 80, 176}));
    EXPECT_EQ(r->offsets.size(),
              size_t{NVMETRACE_L_RDMAT_RSP_REQ - NVMETRACE_L_RDMAT_WC_WR_CQE + 1});
}

TEST_F(FakeRdmaBtf, EmbeddedStructOfAnotherSizeIsRefused) {
    build(432);
    BtfLayout l = BtfLayout::load("nvmet_rdma", dir_.string());
    ASSERT_TRUE(l.ok()) << l.error();
    EXPECT_FALSE(l.nvmet_rdma());
    EXPECT_EQ(l.error(), "nvmet_rdma_rsp.req is 432 bytes in this kernel, nvmetrace reads 440");
    BtfLayout host = BtfLayout::load("nvme_rdma", dir_.string());
    EXPECT_FALSE(host.ok());
    EXPECT_NE(host.error().find("module not loaded"), std::string::npos);
}

std::string slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
}

void spit(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
}

// Runs the test body in a fresh folder, the current one again afterwards.
struct InTempDir : ::testing::Test {
    test::TempDir dir{"nvmetrace-record-output"};
    std::filesystem::path was = std::filesystem::current_path();
    void SetUp() override { std::filesystem::current_path(dir.root()); }
    void TearDown() override { std::filesystem::current_path(was); }
};

TEST_F(InTempDir, DefaultNameInTheCurrentFolder) {
    RecordOutput out = prepare_record_output("");
    EXPECT_EQ(out.path, "nvmetrace.ntr");
    EXPECT_EQ(out.kept_as, "");
    EXPECT_EQ(record_output_note(out), "");
    EXPECT_FALSE(std::filesystem::exists("nvmetrace.ntr")) << "preparing creates nothing";
    EXPECT_FALSE(std::filesystem::exists("nvmetrace.ntr.old"));
}

TEST_F(InTempDir, AnExistingRecordingIsKeptAsOld) {
    spit("nvmetrace.ntr", "first");
    RecordOutput out = prepare_record_output("");
    EXPECT_EQ(out.path, "nvmetrace.ntr");
    EXPECT_EQ(out.kept_as, "nvmetrace.ntr.old");
    EXPECT_FALSE(out.replaced);
    EXPECT_FALSE(std::filesystem::exists("nvmetrace.ntr"));
    EXPECT_EQ(slurp("nvmetrace.ntr.old"), "first");
    EXPECT_EQ(record_output_note(out),
              "nvmetrace: nvmetrace.ntr exists: moved to nvmetrace.ntr.old");

    // the next one replaces the .old: only the newest previous file is kept
    spit("nvmetrace.ntr", "second");
    out = prepare_record_output("");
    EXPECT_TRUE(out.replaced);
    EXPECT_EQ(slurp("nvmetrace.ntr.old"), "second");
    EXPECT_NE(record_output_note(out).find("replacing the older one"), std::string::npos);
}

TEST_F(InTempDir, ExplicitOutputIsUsedAndKeptTheSameWay) {
    std::filesystem::create_directory("runs");
    RecordOutput out = prepare_record_output("runs/host.ntr");
    EXPECT_EQ(out.path, "runs/host.ntr");
    EXPECT_EQ(out.kept_as, "");
    spit("runs/host.ntr", "host");
    out = prepare_record_output("runs/host.ntr");
    EXPECT_EQ(out.kept_as, "runs/host.ntr.old");
    EXPECT_EQ(slurp("runs/host.ntr.old"), "host");
    EXPECT_FALSE(std::filesystem::exists("nvmetrace.ntr"));
}

TEST_F(InTempDir, AFolderIsRefusedAndNothingMoves) {
    std::filesystem::create_directory("out");
    try {
        prepare_record_output("out");
        FAIL() << "a folder as the output";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("folder"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("-o out/nvmetrace.ntr"), std::string::npos)
            << e.what();
    }
    EXPECT_TRUE(std::filesystem::is_directory("out"));
    // a folder in the way of the .old: the recording stays where it is
    spit("x.ntr", "keep");
    std::filesystem::create_directory("x.ntr.old");
    EXPECT_THROW(prepare_record_output("x.ntr"), Error);
    EXPECT_EQ(slurp("x.ntr"), "keep");
}

TEST_F(InTempDir, ADeviceIsWrittenAsItIs) {
    RecordOutput out = prepare_record_output("/dev/null");
    EXPECT_EQ(out.path, "/dev/null");
    EXPECT_EQ(out.kept_as, "");
    EXPECT_TRUE(std::filesystem::exists("/dev/null"));
}

// record [options] -- CMD ARGS: what follows the first "--" is the command,
// options included; other subcommands' "--" is left to the parser.
struct Argv {
    std::vector<std::string> words;
    std::vector<char*> ptrs;
    explicit Argv(std::vector<std::string> w) : words(std::move(w)) {
        for (auto& x : words)
            ptrs.push_back(x.data());
        ptrs.push_back(nullptr);
    }
    int argc() const { return static_cast<int>(words.size()); }
};

TEST(SplitRecordCommand, EverythingAfterTheSeparatorIsTheCommand) {
    Argv a({"nvmetrace", "record", "-r", "host", "-d", "30", "--", "fio", "--name=x", "-o", "y",
            "--", "z"});
    std::vector<std::string> cmd;
    bool sep = false;
    EXPECT_EQ(split_record_command(a.argc(), a.ptrs.data(), cmd, sep), 6);
    EXPECT_TRUE(sep);
    EXPECT_EQ(cmd, (std::vector<std::string>{"fio", "--name=x", "-o", "y", "--", "z"}));
}

TEST(SplitRecordCommand, NoSeparatorNoCommand) {
    Argv a({"nvmetrace", "record", "-r", "host", "-o", "h.ntr"});
    std::vector<std::string> cmd{"left over"};
    bool sep = true;
    EXPECT_EQ(split_record_command(a.argc(), a.ptrs.data(), cmd, sep), a.argc());
    EXPECT_FALSE(sep);
    EXPECT_TRUE(cmd.empty());
}

TEST(SplitRecordCommand, SeparatorWithNothingAfterIt) {
    Argv a({"nvmetrace", "record", "-r", "host", "--"});
    std::vector<std::string> cmd;
    bool sep = false;
    EXPECT_EQ(split_record_command(a.argc(), a.ptrs.data(), cmd, sep), 4);
    EXPECT_TRUE(sep);
    EXPECT_TRUE(cmd.empty());
}

TEST(SplitRecordCommand, OtherSubcommandsKeepTheirSeparator) {
    Argv a({"nvmetrace", "report", "--", "-odd.ntr"});
    std::vector<std::string> cmd;
    bool sep = false;
    EXPECT_EQ(split_record_command(a.argc(), a.ptrs.data(), cmd, sep), a.argc());
    EXPECT_FALSE(sep);
    Argv b({"nvmetrace", "--help"});
    EXPECT_EQ(split_record_command(b.argc(), b.ptrs.data(), cmd, sep), b.argc());
}

TEST(LostAdvice, SaysHowManyAndEachWayToLoseNone) {
    RecordOptions o;
    o.sample = 1;
    std::string a = lost_advice(110, o);
    EXPECT_NE(a.find("dropped 110 records"), std::string::npos) << a;
    EXPECT_NE(a.find("--realtime 1"), std::string::npos) << a;
    EXPECT_NE(a.find("ring_kb="), std::string::npos) << a;
    EXPECT_NE(a.find("-s 100"), std::string::npos) << a;

    // already at a real-time priority: not advised again; a sparser rate
    o.realtime = 1;
    o.sample = 50;
    a = lost_advice(7, o);
    EXPECT_EQ(a.find("--realtime"), std::string::npos) << a;
    EXPECT_NE(a.find("-s 500"), std::string::npos) << a;

    // sampling already sparse: only the rings
    o.sample = 1000;
    a = lost_advice(7, o);
    EXPECT_EQ(a.find("-s "), std::string::npos) << a;
    EXPECT_NE(a.find("ring_kb="), std::string::npos) << a;
}

TEST(DrainAtRealtime, APriorityOutOfRangeIsRefusedBeforeAnythingChanges) {
    EXPECT_THROW(drain_at_realtime(0), Error);
    EXPECT_THROW(drain_at_realtime(100), Error);
    EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
    try {
        drain_at_realtime(100);
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("1..99"), std::string::npos) << e.what();
    }
}

TEST(TransportModule, ByTheHooksName) {
    EXPECT_EQ(transport_module("nvme_rdma_recv_done"), "nvme_rdma");
    EXPECT_EQ(transport_module("nvmet_rdma_send_done"), "nvmet_rdma");
    EXPECT_EQ(transport_module("nvme_tcp_try_send"), "nvme_tcp");
    EXPECT_EQ(transport_module("nvme_setup_cmd"), "");
    EXPECT_EQ(transport_module("nvmet_req_init"), "");
}

TEST(StaleNote, NamesTheModuleAndWhatToDo) {
    EXPECT_EQ(stale_note("nvme_tcp_recv_skb"),
              "layout of the reloaded nvme_tcp differs from START's: restart the recording");
    EXPECT_EQ(stale_note("nvmet_tcp_queue_response"),
              "layout of the reloaded nvmet_tcp differs from START's: restart the recording");
    EXPECT_EQ(stale_note("nvmet_req_init"),
              "layout of the reloaded nvmet differs from START's: restart the recording");
    EXPECT_EQ(stale_note("nvme_rdma_recv_done"),
              "layout of the reloaded nvme_rdma differs from START's: restart the recording");
}

}  // namespace
}  // namespace nvmetrace
