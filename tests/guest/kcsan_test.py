#!/usr/bin/env python3
"""Known answers for tests/guest/kcsan.py, the judge of KCSAN's reports in a guest's kernel
log: a race with a frame of nvmetrace's is nvmetrace's, one between two accesses of the
kernel's own code is not, a report with no frame is not judged. Run by ctest
(user/tests/CMakeLists.txt)."""
import os, subprocess, sys, tempfile, unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kcsan  # noqa: E402

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kcsan.py")
SEP = "=" * 66


def report(title, first, second, ts="12.345678"):
    lines = [SEP, f"BUG: KCSAN: {title}", "", "write to 0xffff88800a1b2c30 of 4 bytes by task 1 on cpu 1:"]
    lines += [f" {f}" for f in first]
    lines += ["", "read to 0xffff88800a1b2c30 of 4 bytes by task 2 on cpu 0:"]
    lines += [f" {f}" for f in second]
    lines += ["", "value changed: 0x00000000 -> 0x00000001", "",
              "Reported by Kernel Concurrency Sanitizer on:",
              "CPU: 0 PID: 2 Comm: fio Not tainted 6.12.118-nvt-kcsan612 #1", SEP]
    return [f"[{ts}] {x}" for x in lines]


KERNEL = report("data-race in tcp_poll / tcp_sendmsg_locked",
                ["tcp_sendmsg_locked+0x6c1/0x1a30", "tcp_sendmsg+0x2c/0x50"],
                ["tcp_poll+0x2d6/0x6f0", "sock_poll+0x9b/0x1d0"])
MODULES = report("data-race in nvme_tcp_io_work [nvme_tcp] / nvme_tcp_data_ready [nvme_tcp]",
                 ["nvme_tcp_io_work+0x1a/0x300 [nvme_tcp]"], ["nvme_tcp_data_ready+0x33/0x120 [nvme_tcp]"])
OURS = report("data-race in blk_mq_start_request / probe_rq_issue",
              ["blk_mq_start_request+0x5c/0x2b0", "nvme_tcp_queue_rq+0x1a/0x300 [nvme_tcp]"],
              ["? probe_rq_issue+0x33/0x120 [nvmetrace]", "__traceiter_block_rq_issue+0x33/0x60"])


def judge(lines):
    with tempfile.TemporaryDirectory() as d:
        log, out = os.path.join(d, "dmesg.txt"), os.path.join(d, "judged.txt")
        with open(log, "w") as f:
            f.write("\n".join(lines) + "\n")
        p = subprocess.run([sys.executable, "-B", SCRIPT, log, "--out", out], capture_output=True, text=True)
        with open(out) as f:
            return p.returncode, f.read().splitlines()


class Judge(unittest.TestCase):
    def test_the_kernels_own_races_pass(self):
        rc, lines = judge(["[1.0] boot"] + KERNEL + ["[13.0] nvme nvme0: new ctrl"] + MODULES)
        self.assertEqual(rc, 0)
        self.assertEqual(lines[-1], "kcsan: 2 reports: 2 in the kernel's own code, 0 nvmetrace's")

    def test_a_frame_of_nvmetraces_fails(self):
        rc, lines = judge(KERNEL + OURS)
        self.assertEqual(rc, 1)
        self.assertIn("nvmetrace's: BUG: KCSAN: data-race in blk_mq_start_request / probe_rq_issue", lines)
        self.assertEqual(lines[-1], "kcsan: 2 reports: 1 in the kernel's own code, 1 nvmetrace's")

    def test_a_report_without_frames_is_not_judged(self):
        rc, lines = judge([SEP, "BUG: KCSAN: data-race in a / b", SEP])
        self.assertEqual(rc, 2)
        self.assertIn("1 not judged", lines[-1])

    def test_a_log_without_reports(self):
        rc, lines = judge(["[1.0] boot", "[2.0] nvme nvme0: new ctrl"])
        self.assertEqual(rc, 0)
        self.assertEqual(lines[-1], "kcsan: 0 reports: 0 in the kernel's own code, 0 nvmetrace's")

    def test_frames_read_with_their_module(self):
        found = kcsan.reports(OURS)
        self.assertEqual(len(found), 1)
        self.assertIn(("probe_rq_issue", "nvmetrace"), found[0][1])
        self.assertIn(("blk_mq_start_request", None), found[0][1])


if __name__ == "__main__":
    unittest.main()
