#!/usr/bin/env python3
"""Known answers for tests/guest/edges.py, the arithmetic behind 35-accuracy's figures: the
syscall edges of an io_edges recording, and fio's own time from a recording of fio between
io_edges runs.  Synthetic inputs in the formats of io_edges, `nvmetrace report --commands`
and fio (JSON and per-I/O latency log); run by ctest (user/tests/CMakeLists.txt)."""
import contextlib, io, json, os, sys, tempfile, unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import edges  # noqa: E402

LBS = 512
US = 1000


def command(op, lba, submit, reap, side="host", span=(edges.SUBMIT, edges.REAP), ring=None):
    c = {"side": side, "op": op, "lba": lba, "events": {span[0]: submit, span[1]: reap}}
    if ring is not None:  # reaped from io_uring's CQ ring: the reap is the next entry
        c[edges.RING] = ring
    return c


class Files:
    """Writes the given texts to files in a temporary directory."""

    def __init__(self):
        self.dir = tempfile.TemporaryDirectory()

    def write(self, name, text):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def commands(self, name, cmds):
        return self.write(name, "".join(json.dumps(c) + "\n" for c in cmds))


def fio_json(side, ios, lat_mean_ns, engine=None):
    empty = {"total_ios": 0, "lat_ns": {"mean": 0.0}}
    job = {"error": 0, "read": dict(empty), "write": dict(empty)}
    if engine:
        job["job options"] = {"ioengine": engine}
    job[side] = {"total_ios": ios, "lat_ns": {"mean": lat_mean_ns}}
    # fio may print notes before its JSON
    return "fio: a note before the JSON\n" + json.dumps({"jobs": [job]})


def run_own(*args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        edges.own(*args)
    return json.loads(out.getvalue())


class EdgesTest(unittest.TestCase):
    def setUp(self):
        self.files = Files()

    def tearDown(self):
        self.files.dir.cleanup()

    def test_edges_of_joined_commands(self):
        # three I/Os; entry edges 2, 3, 4 us and exit edges 1, 2, 3 us
        ios, cmds = [], []
        for i, (entry, exit_) in enumerate([(2, 1), (3, 2), (4, 3)]):
            t0 = 1_000_000 * (i + 1)
            submit, reap = t0 + entry * US, t0 + entry * US + 50 * US
            ios.append("read %d %d %d %d" % (i * 8 * LBS, t0, submit + 5 * US, reap + exit_ * US))
            cmds.append(command("read", i * 8, submit, reap))
        # a command of another I/O (its io_submit entry outside every [t0, t1]) joins nothing
        cmds.append(command("read", 0, 10_000_000, 10_050_000))
        rows = edges.join(edges.load_ios(self.files.write("aio.out", "\n".join(ios) + "\n# x\n")),
                          self.files.commands("c.jsonl", cmds), LBS)
        self.assertEqual(len(rows), 3)
        s = edges.summarize(rows)
        self.assertAlmostEqual(s["entry_us"], 3.0)
        self.assertAlmostEqual(s["exit_us"], 2.0)
        self.assertAlmostEqual(s["edges_us"], 5.0)
        self.assertAlmostEqual(s["e2e_us"], 50.0)
        self.assertEqual((s["negative"], s["stalled"]), (0, 0))

    def test_split_stalled(self):
        kept, stalled, med = edges.split_stalled([5, 6, 7, 8, 7 + edges.STALL_NS + 1])
        self.assertEqual((kept, stalled, med), ([5, 6, 7, 8], [7 + edges.STALL_NS + 1], 7))

    def test_fio_lat_log_units(self):
        log = "0, 20000, 0, 4096, 4096\n1, 30000, 1, 4096, 8192, 0\n"
        path = self.files.write("lat.log", log)
        self.assertEqual(edges.fio_lat_log(path, LBS, 25000),
                         [("read", 8, 20000), ("write", 16, 30000)])
        # a log in microseconds (older fio): scaled to nanoseconds by fio's own mean
        path = self.files.write("lat_us.log", "0, 20, 0, 4096, 4096\n1, 30, 0, 4096, 8192\n")
        self.assertEqual([v for _, _, v in edges.fio_lat_log(path, LBS, 25000)], [20000, 30000])

    def test_outside_span_pairs_in_completion_order(self):
        # LBA 8 is read twice: fio logs its I/Os in completion order, the commands are sorted
        # by their reap; LBA 16 lost a command and is left out
        fio_ios = [("read", 8, 100 * US), ("read", 8, 200 * US), ("read", 16, 300 * US)]
        spans = edges.host_spans(self.files.commands("c.jsonl", [
            command("read", 8, 500 * US, 690 * US),  # reaped second: 190 us
            command("read", 8, 0, 95 * US),          # reaped first: 95 us
            command("write", 16, 0, 10 * US),        # another op
        ]))
        self.assertEqual(sorted(edges.outside_span(fio_ios, spans)),
                         [(100 * US, 95 * US, 5 * US, False, 0),
                          (200 * US, 190 * US, 10 * US, False, 1)])

    def test_speed_spread_in_log_order(self):
        # 80 I/Os 10 us outside their spans, the run's middle eighth 20 us: the machine slowed
        # there (the parts' medians 10 .. 20); the items come in any order, fio's log decides
        slow = range(30, 40)
        items = [(0, 0, (20 if i in slow else 10) * US, False, i) for i in reversed(range(80))]
        self.assertAlmostEqual(edges.speed_spread(items), 2.0)
        # a few slow I/Os spread over the run leave each part's median alone
        items = [(0, 0, (20 if i % 10 == 3 else 10) * US, False, i) for i in range(80)]
        self.assertAlmostEqual(edges.speed_spread(items), 1.0)
        # too few I/Os to tell, or a part at 0: not known
        self.assertIsNone(edges.speed_spread(items[:63]))
        self.assertIsNone(edges.speed_spread([(0, 0, 0, False, i) for i in range(80)]))

    def test_engines_join_at_their_own_system_calls(self):
        # io_uring: its span is io_uring_enter() to io_uring_enter(); a command reaped from the
        # CQ ring (its span ends at the next entry) is not joined; an aio event is not io_uring's
        ios = ["# engine io_uring",
               "read 0 1000000 1010000 1100000",
               "read %d 2000000 2010000 2100000" % (8 * LBS),
               "read %d 3000000 3010000 3100000" % (16 * LBS)]
        cmds = [command("read", 0, 1002000, 1099000, span=edges.URING),
                command("read", 8, 2002000, 2150000, span=edges.URING, ring=40000),
                command("read", 16, 3002000, 3099000)]
        loaded = edges.load_ios(self.files.write("u.out", "\n".join(ios) + "\n"))
        self.assertEqual(loaded[0], "io_uring")
        rows = edges.join(loaded, self.files.commands("c.jsonl", cmds), LBS)
        self.assertEqual(rows, [(2000, 1000, 97000, 100000)])
        # psync: the system call's entry and return; t1 is t2
        ios = ["# engine psync", "write 0 1000000 1100000 1100000"]
        cmds = [command("write", 0, 1001500, 1098000, span=edges.SYNC)]
        rows = edges.join(edges.load_ios(self.files.write("p.out", "\n".join(ios) + "\n")),
                          self.files.commands("p.jsonl", cmds), LBS)
        self.assertEqual(rows, [(1500, 2000, 96500, 100000)])
        with self.assertRaises(SystemExit):
            edges.span_of("sg")

    def test_own_time_of_io_uring_leaves_ring_reaps_out(self):
        # io_edges by io_uring: 2 I/Os with 2 us entry and 1 us exit edges
        ios, cmds = ["# engine io_uring"], []
        for i in range(2):
            t0 = 10_000_000 * (i + 1)
            ios.append("read %d %d %d %d" % (i * LBS, t0, t0 + 10 * US, t0 + 61 * US))
            cmds.append(command("read", i, t0 + 2 * US, t0 + 60 * US, span=edges.URING))
        # fio: 3 I/Os 9 us outside their spans; a fourth reaped from the ring, its span past
        # fio's lat (ending at the next entry): left out
        lat_log, span = [], 50 * US
        for i in range(4):
            lat_log.append("%d, %d, 0, 4096, %d" % (i, span + 9 * US, (1000 + i) * LBS))
            t = 100_000_000 * (i + 1)
            cmds.append(command("read", 1000 + i, t, t + (span if i < 3 else span + 20 * US),
                                span=edges.URING, ring=None if i < 3 else 30 * US))
        own = run_own(self.files.write("fio.json", fio_json("read", 4, span + 9 * US, "io_uring")),
                      self.files.write("lat.log", "\n".join(lat_log) + "\n"),
                      self.files.commands("c.jsonl", cmds), LBS,
                      [self.files.write("u.out", "\n".join(ios) + "\n")])
        self.assertAlmostEqual(own["fio_outside_us"], 9.0)
        self.assertAlmostEqual(own["client_edges_us"], 3.0)
        self.assertAlmostEqual(own["own_us"], 6.0)
        self.assertEqual((own["engine"], own["fio_joined"], own["client_joined"]), ("io_uring", 3, 2))

    def test_own_time_refuses_a_client_of_another_engine(self):
        ios = ["# engine libaio", "read 0 1000 2000 90000"]
        with self.assertRaises(SystemExit) as e:
            run_own(self.files.write("fio.json", fio_json("read", 1, 60000, "psync")),
                    self.files.write("lat.log", "0, 60000, 0, 4096, 0\n"),
                    self.files.commands("c.jsonl", [command("read", 0, 1500, 80000)]), LBS,
                    [self.files.write("a.out", "\n".join(ios) + "\n")])
        self.assertEqual(e.exception.code, 1)

    def test_own_time(self):
        # io_edges (libaio, no engine line): 4 I/Os with 2 us entry and 1 us exit edges (3 us together)
        ios, cmds = [], []
        for i in range(4):
            t0 = 10_000_000 * (i + 1)
            submit, reap = t0 + 2 * US, t0 + 60 * US
            ios.append("write %d %d %d %d" % (i * LBS, t0, t0 + 10 * US, reap + 1 * US))
            cmds.append(command("write", i, submit, reap))
        # fio: 5 I/Os on LBAs from 1000, each 8 us outside its span, but one stalled 3 ms
        # outside it (left out), and one on an LBA that lost its command (not joined)
        lat_log, span = [], 50 * US
        for i in range(5):
            outside = 8 * US + (3_000 * US if i == 4 else 0)
            lat_log.append("%d, %d, 1, 4096, %d" % (i, span + outside, (1000 + i) * LBS))
            t = 100_000_000 * (i + 1)
            cmds.append(command("write", 1000 + i, t, t + span))
        lat_log.append("5, %d, 1, 4096, %d" % (span + 8 * US, 2000 * LBS))
        mean = (5 * (span + 8 * US) + 3_000 * US) / 6
        own = run_own(self.files.write("fio.json", fio_json("write", 6, mean)),
                      self.files.write("lat.log", "\n".join(lat_log) + "\n"),
                      self.files.commands("c.jsonl", cmds), LBS,
                      [self.files.write("a1.out", "\n".join(ios[:2]) + "\n"),
                       self.files.write("a2.out", "\n".join(ios[2:]) + "\n")])
        self.assertAlmostEqual(own["fio_outside_us"], 8.0)
        self.assertAlmostEqual(own["client_edges_us"], 3.0)
        self.assertAlmostEqual(own["own_us"], 5.0)
        self.assertEqual((own["fio_ios"], own["fio_joined"], own["client_joined"], own["stalled"]),
                         (6, 5, 4, 1))
        self.assertIsNone(own["speed_spread"])  # 4 I/Os: too few to tell

    def test_own_time_refuses_a_recording_that_lost_most_commands(self):
        ios = ["read 0 1000 2000 90000"]
        cmds = [command("read", 0, 1500, 80000)]
        lat_log = "".join("%d, 60000, 0, 4096, %d\n" % (i, (1000 + i) * LBS) for i in range(4))
        with self.assertRaises(SystemExit) as e:
            run_own(self.files.write("fio.json", fio_json("read", 4, 60000)),
                    self.files.write("lat.log", lat_log), self.files.commands("c.jsonl", cmds),
                    LBS, [self.files.write("a.out", "\n".join(ios) + "\n")])
        self.assertEqual(e.exception.code, 1)


if __name__ == "__main__":
    unittest.main()
