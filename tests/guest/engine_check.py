#!/usr/bin/env python3
"""Check a recording of fio's io_uring or synchronous engines against the fio job it recorded
(tests/guest/scenarios/36-uring.sh, 37-sync.sh).

  engine_check.py NAME FIO_JSON REPORT_JSON FIO-ARGS...

Every fio I/O is one reported host command of the job's path (recorded at 1 of 1, so all of
them): for --ioengine=psync or pvsync2 the pread/pwrite path, from the system call's entry to
its return; for io_uring (the default) io-wq for --force_async, the SQPOLL thread for
--sqthread_poll, else the inline issue in io_uring_enter(); of an inline or SQPOLL job, a
command the kernel issued again from io-wq after EAGAIN counts as that, and at least half of
them must have taken the path asked for; --ioengine=io_uring_cmd (NVMe passthrough on /dev/ngXnY)
is the io_uring_cmd path, from the io_uring_enter() entry to the reap. Every group says what its end to
end spans: a group from the io_uring_enter() entry to its return reaches user space; one whose
reap is not seen says so. Prints the report's end to end beside fio's mean lat, per group and
over the commands whose span reaches user space. With POLL_QID in the environment (the
controller's poll queue), an io_uring --hipri=1 job's commands (IORING_SETUP_IOPOLL) all ran on
that queue, and no command of a job without it did; a synchronous --hipri=1 job (RWF_HIPRI)
goes where the kernel sends it: block/fops.c polls only asynchronous direct I/O, so its
commands take the interrupt-driven queues, and the count is printed. Exit 1 with the reasons
when a check fails.
"""
import json
import os
import sys


def fio_doc(path):
    text = open(path).read()
    return json.loads(text[text.index("{"):])


def fio_median_us(fio):
    """fio's median total latency (us) of a one-direction job, from its lat percentiles; None
    without them (no --lat_percentiles=1) or when the job did both directions"""
    dirs = [j[d] for j in fio["jobs"] for d in ("read", "write") if j[d]["total_ios"]]
    if len(dirs) != 1:
        return None
    p50 = dirs[0]["lat_ns"].get("percentile", {}).get("50.000000")
    return p50 / 1e3 if p50 else None


def main():
    name, fio_path, report_path, *args = sys.argv[1:]
    opts = dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)
    fio = fio_doc(fio_path)
    ios = sum(j[d]["total_ios"] for j in fio["jobs"] for d in ("read", "write"))
    lat_sum = sum(j[d]["lat_ns"]["mean"] * j[d]["total_ios"] for j in fio["jobs"]
                  for d in ("read", "write") if j[d]["total_ios"])
    fio_lat_us = lat_sum / ios / 1e3
    rep = json.load(open(report_path))[0]
    groups = [g for g in rep["groups"] if g["view"] != "target" and g["device"].startswith("nvme")]
    bad = []
    sync = opts.get("ioengine") in ("psync", "pvsync2")
    # every I/O of these reaches user space, and its span is nearly all of fio's lat
    inline = sync or (not opts.get("force_async") and not opts.get("sqthread_poll"))
    want = ("pread/pwrite" if sync else
            "io_uring_cmd" if opts.get("ioengine") == "io_uring_cmd" else
            "io_uring, io-wq" if opts.get("force_async") else
            "io_uring, SQPOLL" if opts.get("sqthread_poll") else "io_uring")
    n_path = sum(g["n"] for g in groups if g["span"]["interface"] == want)
    n_all = sum(g["n"] for g in groups)
    # An inline (or SQPOLL) issue whose bio would have blocked comes back EAGAIN and the
    # kernel issues it again from io-wq: such a command is reported on the io-wq path, as
    # it went. A loaded machine sees a few (writes at QD16 waiting for a request); the
    # path the job asked for still has to be most of them.
    n_punted = (sum(g["n"] for g in groups if g["span"]["interface"] == "io_uring, io-wq")
                if want not in ("io_uring, io-wq", "pread/pwrite") else 0)
    print(f"{name}: fio {ios} I/Os, mean lat {fio_lat_us:.1f} us; report {n_all} host commands, "
          f"{n_path} of them by {want}"
          + (f", {n_punted} issued again by io-wq after EAGAIN" if n_punted else ""))
    for g in groups:
        sp = g["span"]
        stages = ", ".join(f"{s['name']} {s['mean_us']:.1f}" for s in g["stages"])
        print(f"  {g['label']}: n {g['n']}, mean {g['latency_us']['mean']:.1f} us "
              f"({g['latency_us']['mean'] / fio_lat_us:.3f} of fio's lat); "
              f"{sp['from']} to {sp['to']}{'' if sp['user_space'] else ' (' + sp['note'] + ')'}")
        print(f"    stages (mean us): {stages}")
    if n_all != ios:
        bad.append(f"the report has {n_all} host commands, fio did {ios} I/Os")
    if n_path + n_punted != ios:
        bad.append(f"{ios - n_path - n_punted} of fio's I/Os are reported neither as {want} nor "
                   f"as issued again by io-wq")
    if n_path < 0.5 * ios:
        bad.append(f"only {n_path} of fio's {ios} I/Os are reported as {want}")
    user = [g for g in groups if g["span"]["user_space"]]
    n_user = sum(g["n"] for g in user)
    if user:
        e2e = sum(g["latency_us"]["mean"] * g["n"] for g in user) / n_user
        print(f"  reaching user space: {n_user} commands, end to end {e2e:.1f} us, "
              f"{e2e / fio_lat_us:.3f} of fio's lat")
        # the span is inside fio's lat: never longer (2 % for the rounding of two clocks' means).
        # Only over (nearly) all of fio's I/Os: a subset's mean is no bound of fio's.
        if n_user >= 0.95 * ios and e2e > fio_lat_us * 1.02:
            bad.append(f"end to end {e2e:.1f} us is longer than fio's lat {fio_lat_us:.1f} us")
        # An inline job's commands all reach user space: at the io_uring_enter() return that
        # handed the CQE over, or at the next entry after fio took it from the mapped CQ ring
        # (seen by the ring's head). fio's lat adds only its own user-space time to that, so
        # the span is most of it; taken at the return that posted it, a QD16 command's span
        # would be a tenth of fio's lat.
        # With fio's lat percentiles (--lat_percentiles=1) the medians are compared instead:
        # at QD1 the time outside the span is fio's own and the system call's way in and out,
        # and a few stalls of the emulated CPU while fio is in user space move a mean (one of
        # 100 ms adds 15 us to the mean of 6000 I/Os) but not the median.
        fio_p50 = fio_median_us(fio)
        big = max(user, key=lambda g: g["n"])
        if inline and fio_p50 and big["n"] >= 0.95 * ios:
            p50 = big["latency_us"]["p50"]
            print(f"  median: {p50:.1f} us, {p50 / fio_p50:.3f} of fio's median lat "
                  f"{fio_p50:.1f} us")
            if p50 < fio_p50 * 0.9:
                bad.append(f"median end to end {p50:.1f} us is under 0.9 of fio's median lat "
                           f"{fio_p50:.1f} us")
        elif inline and n_user >= 0.95 * ios and e2e < fio_lat_us * 0.9:
            bad.append(f"end to end {e2e:.1f} us is under 0.9 of fio's lat {fio_lat_us:.1f} us")
    if inline and n_user < 0.95 * ios:
        bad.append(f"only {n_user} of {ios} commands reach user space")
    for g in groups:
        # a reap seen from the ring is bounded: the window between the last return (or the
        # CQE) and the entry that saw it is given, and is inside the span
        sp = g["span"]
        if not sp.get("reap_from_ring"):
            continue
        w = g.get("reap_window_us")
        if not w or not 0 <= w["mean"] <= w["max"] or w["mean"] > g["latency_us"]["mean"]:
            bad.append(f"{g['label']}: reaped from the ring, its reap window is {w}")
    for g in groups:
        sp = g["span"]
        if sp["interface"].startswith("io_uring") and sp["from"] not in (
                "io_uring_enter() entry", "the SQE taken by the SQPOLL thread"):
            bad.append(f"{g['label']}: starts at {sp['from']}, not where the kernel took the SQE")
        if sp["interface"] == "pread/pwrite" and (
                not sp["from"].startswith("the system call's entry") or sp["to"] != "its return"):
            bad.append(f"{g['label']}: spans {sp['from']} to {sp['to']}, not the system call")
        if not sp["user_space"] and not sp["note"]:
            bad.append(f"{g['label']}: does not reach user space and does not say why")
    if opts.get("force_async"):
        # io-wq's queueing is a stage of its own; a command whose queueing time is not
        # between its SQE and its file submission has it merged into the submission
        queued = sum(g["n"] for g in groups
                     if any(s["name"] == "queued in io-wq" for s in g["stages"]))
        print(f"  queued in io-wq as a stage of its own: {queued} of {n_all} commands")
        if queued < 0.8 * n_all:
            bad.append(f"only {queued} of {n_all} io-wq commands have a 'queued in io-wq' stage")
    elif opts.get("sqthread_poll"):
        for g in groups:
            if g["span"]["interface"] != want:
                continue
            if g["span"]["user_space"] or "not seen" not in g["span"]["note"]:
                bad.append(f"{g['label']}: SQPOLL's reap is unseen, the group does not say so")
    if os.environ.get("POLL_QID"):
        poll_qid = int(os.environ["POLL_QID"])
        hipri = opts.get("hipri") == "1"
        on_poll = sum(q["n"] for g in groups for q in g.get("queues", []) if q["qid"] == poll_qid)
        print(f"  on the poll queue (qid {poll_qid}): {on_poll} of {n_all} commands")
        if hipri and not sync and on_poll != n_all:
            bad.append(f"--hipri=1: {n_all - on_poll} of {n_all} commands not on the poll "
                       f"queue {poll_qid}")
        if not hipri and on_poll:
            bad.append(f"{on_poll} commands of a job without --hipri on the poll queue {poll_qid}")
    for b in bad:
        print(f"  FAIL: {b}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
