#!/usr/bin/env python3
# Guest check of nvmetrace's user-space ABI, spoken by hand (no libnl, no tool): generic
# netlink commands and their validation, the hook dump, the ring mmap rules, unload while
# mapped. Run by tests/guest/scenarios/25-abi.sh.
import errno, mmap, os, signal, socket, struct, subprocess, sys

KO = os.environ["NVMETRACE_KO"]
fails = 0
def check(cond, what):
    global fails
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        fails += 1

def sh(*a):
    r = subprocess.run(a, capture_output=True, text=True)
    return r.returncode, (r.stdout + r.stderr).strip()

# ---------------------------------------------------------------- netlink
NLM_F_REQUEST, NLM_F_ACK, NLM_F_DUMP = 1, 4, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
GENL_ID_CTRL, CTRL_CMD_GETFAMILY, CTRL_ATTR_FAMILY_ID, CTRL_ATTR_FAMILY_NAME = 0x10, 3, 1, 2
A = dict(ABI_VERSION=1, MODULE_VERSION=2, RING_VERSION=3, STATE=4, NR_RINGS=5, RING_RECS=6,
         RING_MAP_SIZE=7, REC_SIZE=8, RECORDS=9, LOST=10, ROLE=11, SAMPLE=12, SEED=13,
         DEVS=14, DEV=15, HOOK=16, HOOK_NAME=17, HOOK_KIND=18, HOOK_STATE=19, HOOK_ERROR=20,
         FLAGS=22, LAYOUT=24)
CMD = dict(GET_VERSION=1, GET_STATUS=2, START=3, STOP=4, GET_HOOKS=5, ADMIT=8, LAYOUT=9)

def attr(t, payload):
    l = 4 + len(payload)
    return struct.pack("HH", l, t) + payload + b"\0" * ((4 - l % 4) % 4)

def parse_attrs(b):
    out = {}
    while len(b) >= 4:
        l, t = struct.unpack_from("HH", b)
        out[t & 0x3fff] = b[4:l]
        b = b[(l + 3) & ~3:]
    return out

class Genl:
    def __init__(self):
        self.s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 16)
        self.s.setsockopt(270, 11, 1)  # SOL_NETLINK, NETLINK_EXT_ACK
        self.s.bind((0, 0))
        self.seq = 0
    def req(self, fam, cmd, attrs=b"", flags=0, version=1):
        self.seq += 1
        body = struct.pack("BBH", cmd, version, 0) + attrs
        self.s.send(struct.pack("IHHII", 16 + len(body), fam, NLM_F_REQUEST | NLM_F_ACK | flags,
                                self.seq, 0) + body)
        msgs = []
        while True:
            data = self.s.recv(65536)
            while data:
                l, t, f, seq, pid = struct.unpack_from("IHHII", data)
                m = data[16:l]
                data = data[(l + 3) & ~3:]
                if t == NLMSG_ERROR:
                    err = struct.unpack_from("i", m)[0]
                    ext = ""
                    if err:
                        inner = struct.unpack_from("I", m, 4)[0]
                        tlv = parse_attrs(m[4 + inner:]) if len(m) > 4 + inner else {}
                        if 1 in tlv:  # NLMSGERR_ATTR_MSG
                            ext = tlv[1].rstrip(b"\0").decode()
                    return err, msgs, ext
                if t == NLMSG_DONE:
                    return 0, msgs, ""
                msgs.append(parse_attrs(m[4:]))

g = Genl()

def u32(b): return struct.unpack("I", b)[0]
def u64(b): return struct.unpack("Q", b)[0]

# ---------------------------------------------------------------- load
rc, out = sh("insmod", KO, "ring_kb=2")
check(rc != 0, "insmod ring_kb=2 refused (%s)" % out)
rc, out = sh("insmod", KO, "ring_kb=4")
check(rc == 0, "insmod ring_kb=4 " + out)

err, msgs, _ = g.req(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, attr(CTRL_ATTR_FAMILY_NAME, b"nvmetrace\0"))
check(err == 0 and msgs, "family resolved")
fam = struct.unpack("H", msgs[0][CTRL_ATTR_FAMILY_ID])[0]

err, msgs, _ = g.req(fam, CMD["GET_VERSION"])
v = msgs[0] if msgs else {}
check(err == 0 and u32(v[A["ABI_VERSION"]]) == 8 and u32(v[A["RING_VERSION"]]) == 2,
      "GET_VERSION abi 7, ring 2")
mv = v.get(A["MODULE_VERSION"], b"").rstrip(b"\0").decode()
check(mv == open(os.environ["NVMETRACE_SRC"] + "/VERSION").read().strip(), "MODULE_VERSION " + mv)

err, msgs, _ = g.req(fam, CMD["GET_STATUS"])
st = msgs[0] if msgs else {}
ncpu = os.cpu_count()
print({k: st[A[k]] for k in A if A[k] in st})
nr = u32(st[A["NR_RINGS"]]); recs = u32(st[A["RING_RECS"]]); msz = u64(st[A["RING_MAP_SIZE"]])
check(err == 0 and u32(st[A["STATE"]]) == 0, "GET_STATUS idle")
check(nr >= ncpu, "NR_RINGS %d >= cpus %d" % (nr, ncpu))
check(recs == 64, "RING_RECS 64 for ring_kb=4 (got %d)" % recs)
check(msz == 8192, "RING_MAP_SIZE 8192 (got %d)" % msz)
check(u32(st[A["REC_SIZE"]]) == 48 and u64(st[A["RECORDS"]]) == 0 and u64(st[A["LOST"]]) == 0,
      "REC_SIZE 48, RECORDS 0, LOST 0")
check(u32(st[A["SAMPLE"]]) == 1 and u32(st[A["ROLE"]]) == 0, "idle SAMPLE 1 ROLE 0")

# bit 0 is START's DEV_FILTER (ABI 5); bit 1 is unknown
err, _, ext = g.req(fam, CMD["GET_STATUS"], attr(A["FLAGS"], struct.pack("I", 2)))
check(err == -errno.EINVAL and ext, "FLAGS=2 -> EINVAL, extack '%s'" % ext)
err, _, ext = g.req(fam, CMD["GET_STATUS"], attr(A["FLAGS"], struct.pack("I", 0)))
check(err == 0, "FLAGS=0 accepted")
err, _, ext = g.req(fam, CMD["GET_STATUS"], attr(A["RECORDS"], struct.pack("Q", 0)))
check(err == -errno.EINVAL, "reply-only attribute refused (%d, '%s')" % (err, ext))
err, _, ext = g.req(fam, CMD["START"])
check(err == -errno.EINVAL, "START without ROLE -> EINVAL ('%s')" % ext)
err, _, ext = g.req(fam, CMD["START"], attr(A["ROLE"], struct.pack("I", 4)))
check(err == -errno.EINVAL, "START ROLE=4 -> EINVAL ('%s')" % ext)
err, _, ext = g.req(fam, CMD["START"], attr(A["ROLE"], struct.pack("I", 1)) +
                    attr(A["SAMPLE"], struct.pack("I", 0)))
check(err == -errno.ERANGE, "START SAMPLE=0 -> ERANGE ('%s')" % ext)
devs = attr(A["DEVS"] | 0x8000, b"".join(attr(A["DEV"], struct.pack("I", i)) for i in range(3)))
err, _, ext = g.req(fam, CMD["START"], attr(A["ROLE"], struct.pack("I", 3)) + devs)
check(err != 0 and "layout" in ext, "START target role without layout refused (%d, '%s')" % (err, ext))
lay = attr(A["LAYOUT"] | 0x8000, b"".join(attr(i, struct.pack("I", 8)) for i in range(1, 6)))
err, _, ext = g.req(fam, CMD["START"], attr(A["ROLE"], struct.pack("I", 2)) + lay)
check(err == -errno.EINVAL and "offset" in ext, "START with 5 of 6 layout offsets refused ('%s')" % ext)
err, msgs, ext = g.req(fam, CMD["START"], attr(A["ROLE"], struct.pack("I", 1)) + devs)
check(err == 0 and msgs and u32(msgs[0][A["STATE"]]) == 1, "START host -> RECORDING ('%s')" % ext)
err, _, ext = g.req(fam, CMD["START"], attr(A["ROLE"], struct.pack("I", 1)))
check(err == -errno.EBUSY, "second START -> EBUSY ('%s')" % ext)
err, msgs, _ = g.req(fam, CMD["GET_HOOKS"], flags=NLM_F_DUMP)
hooks = {}
for m in msgs:
    h = parse_attrs(m[A["HOOK"]])
    hooks[h[A["HOOK_NAME"]].rstrip(b"\0").decode()] = (u32(h[A["HOOK_STATE"]]),
                                                      struct.unpack("i", h[A["HOOK_ERROR"]])[0])
print(hooks)
check(hooks.get("block_rq_issue", (0,))[0] == 1 and hooks.get("block_bio_queue", (0,))[0] == 1,
      "block hooks attached while recording")
check(hooks.get("nvmet_req_init", (9,))[0] == 0, "target hook not asked for: detached")
nvme_core = os.path.isdir("/sys/module/nvme_core")
check(hooks.get("nvme_setup_cmd", (9,))[0] == (1 if nvme_core else 2),
      "nvme_setup_cmd %s" % ("attached (nvme_core loaded)" if nvme_core else "waiting for nvme_core"))
# ADMIT by hand: the recording above named 3 devices, so it has a filter
err, msgs, ext = g.req(fam, CMD["ADMIT"], attr(A["DEVS"] | 0x8000, attr(A["DEV"], struct.pack("I", 7))))
got = []
if err == 0 and msgs:
    nest = msgs[0].get(A["DEVS"], b"")
    while len(nest) >= 8:
        l, t = struct.unpack_from("HH", nest)
        got.append(struct.unpack_from("I", nest, 4)[0])
        nest = nest[(l + 3) & ~3:]
check(err == 0 and got == [0, 1, 2, 7], "ADMIT one device -> the recording's 4 (%s, '%s')" % (got, ext))
err, _, ext = g.req(fam, CMD["ADMIT"])
check(err == -errno.EINVAL, "ADMIT without DEVS -> EINVAL (%d, '%s')" % (err, ext))
# LAYOUT by hand (ABI 6), on the host recording above.  nvme-tcp's group is
# NVMETRACE_L_TCP_QUEUE_REQUEST (7) .. _TCP_LAST (25), its identity 145; offsets 8 and a
# queue size (QUEUE_SIZE, the 9th) of 1024 are plausible.
tcp = b"".join(attr(7 + i, struct.pack("I", 1024 if i == 8 else 8)) for i in range(19))
err, _, ext = g.req(fam, CMD["LAYOUT"], attr(A["LAYOUT"] | 0x8000, tcp))
check(err == -errno.EINVAL and "identity" in ext, "LAYOUT without its BTF identity -> EINVAL ('%s')" % ext)
err, _, ext = g.req(fam, CMD["LAYOUT"], attr(A["LAYOUT"] | 0x8000, tcp + attr(145, struct.pack("I", 0x1234))))
check(err == -errno.ESTALE and "BTF of the module" in ext,
      "LAYOUT with an identity no module loaded since START has -> ESTALE (%d, '%s')" % (err, ext))
nvmet = b"".join(attr(i, struct.pack("I", 8)) for i in range(1, 7))
err, _, ext = g.req(fam, CMD["LAYOUT"], attr(A["LAYOUT"] | 0x8000, nvmet))
check(err == -errno.EINVAL and "START's only" in ext, "LAYOUT with nvmet's group -> EINVAL ('%s')" % ext)
# nvmet-tcp's group (64 .. 71, identity 146) is the target role's: not this recording's
tcpt = b"".join(attr(64 + i, struct.pack("I", 8)) for i in range(8)) + attr(146, struct.pack("I", 1))
err, _, ext = g.req(fam, CMD["LAYOUT"], attr(A["LAYOUT"] | 0x8000, tcpt))
check(err == -errno.EINVAL and "role" in ext, "LAYOUT of the target's transport on a host recording -> EINVAL ('%s')" % ext)
err, _, ext = g.req(fam, CMD["LAYOUT"])
check(err == -errno.EINVAL, "LAYOUT without LAYOUT -> EINVAL (%d, '%s')" % (err, ext))
devs = attr(A["DEVS"] | 0x8000, b"".join(attr(A["DEV"], struct.pack("I", i)) for i in range(65)))
err, _, ext = g.req(fam, CMD["START"], attr(A["ROLE"], struct.pack("I", 3)) + devs)
check(err == -errno.EINVAL and "too many" in ext, "START 65 devs -> EINVAL ('%s')" % ext)
# a module's BTF identity (NVMETRACE_L_BTF_NVME_TCP = 145) without its offsets
lay = attr(A["LAYOUT"] | 0x8000, attr(145, struct.pack("I", 0x1234)))
err, _, ext = g.req(fam, CMD["START"], attr(A["ROLE"], struct.pack("I", 1)) + lay)
check(err == -errno.EINVAL and "BTF identity" in ext,
      "START with an identity but no layout -> EINVAL ('%s')" % ext)
err, msgs, _ = g.req(fam, CMD["STOP"])
# the iomap group (NVMETRACE_L_DIO_SIMPLE_IOCB = 154, _BIO = 155, ABI 8): whole, and plausible
lay = attr(A["LAYOUT"] | 0x8000, attr(155, struct.pack("I", 64)))
err, _, ext = g.req(fam, CMD["START"], attr(A["ROLE"], struct.pack("I", 1)) + lay)
check(err == -errno.EINVAL and "all or nothing" in ext, "START with 1 of 2 iomap offsets refused ('%s')" % ext)
lay = attr(A["LAYOUT"] | 0x8000, attr(154, struct.pack("I", 64)) + attr(155, struct.pack("I", 64)))
err, _, ext = g.req(fam, CMD["START"], attr(A["ROLE"], struct.pack("I", 1)) + lay)
check(err == -errno.EINVAL and "iomap" in ext, "START with the kiocb inside the bio refused ('%s')" % ext)
lay = attr(A["LAYOUT"] | 0x8000, attr(154, struct.pack("I", 0)) + attr(155, struct.pack("I", 64)))
err, msgs, ext = g.req(fam, CMD["START"], attr(A["ROLE"], struct.pack("I", 1)) + lay)
check(err == 0 and msgs and u32(msgs[0][A["STATE"]]) == 1, "START host with the iomap group ('%s')" % ext)
err, msgs, _ = g.req(fam, CMD["STOP"])
check(err == 0 and msgs and u32(msgs[0][A["STATE"]]) == 0, "STOP -> IDLE")
err, _, ext = g.req(fam, CMD["LAYOUT"], attr(A["LAYOUT"] | 0x8000, tcp + attr(145, struct.pack("I", 1))))
check(err == -errno.ENOENT, "LAYOUT while idle -> ENOENT (%d, '%s')" % (err, ext))
err, msgs, _ = g.req(fam, CMD["GET_HOOKS"], flags=NLM_F_DUMP)
states = [u32(parse_attrs(m[A["HOOK"]])[A["HOOK_STATE"]]) for m in msgs]
check(err == 0 and len(msgs) >= 10 and set(states) == {0}, "after STOP every hook detached")
# the vmlinux group (NVMETRACE_L_AIO_KIOCB_RW = 152, _RES = 153): whole, and plausible
# (checked at START while idle)
lay = attr(A["LAYOUT"] | 0x8000, attr(152, struct.pack("I", 0)))
err, _, ext = g.req(fam, CMD["START"], attr(A["ROLE"], struct.pack("I", 1)) + lay)
check(err == -errno.EINVAL and "all or nothing" in ext, "START with 1 of 2 aio offsets refused ('%s')" % ext)
lay = attr(A["LAYOUT"] | 0x8000, attr(152, struct.pack("I", 0)) + attr(153, struct.pack("I", 8)))
err, _, ext = g.req(fam, CMD["START"], attr(A["ROLE"], struct.pack("I", 1)) + lay)
check(err == -errno.EINVAL and "aio" in ext, "START with ki_res inside the kiocb refused ('%s')" % ext)
lay = attr(A["LAYOUT"] | 0x8000, attr(152, struct.pack("I", 0)) + attr(153, struct.pack("I", 112)))
err, msgs, ext = g.req(fam, CMD["START"], attr(A["ROLE"], struct.pack("I", 1)) + lay)
check(err == 0 and msgs and u32(msgs[0][A["STATE"]]) == 1, "START host with the aio group ('%s')" % ext)
err, msgs, _ = g.req(fam, CMD["STOP"])
check(err == 0 and msgs and u32(msgs[0][A["STATE"]]) == 0, "STOP -> IDLE")

# unprivileged: drop CAP_NET_ADMIN in a child (setpriv from util-linux)
rc, out = sh("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
             "--inh-caps=-all", "--bounding-set=-all",
             sys.executable, "-c",
             "import socket,struct;s=socket.socket(16,3,16);s.setsockopt(270,11,1);"
             "b=struct.pack('BBH',1,1,0);s.send(struct.pack('IHHII',16+len(b),%d,5,1,0)+b);"
             "d=s.recv(4096);print(struct.unpack_from('i',d,16)[0])" % fam)
check(out.strip() == str(-errno.EPERM), "unprivileged GET_VERSION -> EPERM (%s)" % out)
# root with CAP_NET_ADMIN but not CAP_SYS_ADMIN: START is refused, and says what it needs
rc, out = sh("setpriv", "--bounding-set=-sys_admin", "--inh-caps=-sys_admin",
             sys.executable, "-c",
             "import socket,struct;s=socket.socket(16,3,16);s.setsockopt(270,11,1);"
             "b=struct.pack('BBH',3,1,0)+struct.pack('HHI',8,%d,1);"
             "s.send(struct.pack('IHHII',16+len(b),%d,5,1,0)+b);"
             "d=s.recv(4096);print(struct.unpack_from('i',d,16)[0],b'needs CAP_SYS_ADMIN' in d)"
             % (A["ROLE"], fam))
check(out.strip() == "%d True" % -errno.EPERM,
      "START without CAP_SYS_ADMIN -> EPERM, 'needs CAP_SYS_ADMIN' (%s)" % out)

# ---------------------------------------------------------------- mmap
stt = os.stat("/dev/nvmetrace")
check(oct(stt.st_mode & 0o777) == "0o600" and stt.st_uid == 0, "/dev/nvmetrace 0600 root")
fd = os.open("/dev/nvmetrace", os.O_RDWR)
P = mmap.PROT_READ | mmap.PROT_WRITE
maps = []
for cpu in range(nr):
    m = mmap.mmap(fd, msz, mmap.MAP_SHARED, P, offset=cpu * msz)
    magic, ver, cver, size, rsz, nrr, c, doff, ms = struct.unpack_from("IHHIIIIQQ", m, 0)
    check(magic == 0x4e565452 and ver == 2 and cver == 2 and size == 4096 and rsz == 48 and nrr == 64 and
          c == cpu and doff == 4096 and ms == msz, "ring %d control page" % cpu)
    maps.append(m)

def bad(what, length, off, flags=mmap.MAP_SHARED, prot=P):
    try:
        mmap.mmap(fd, length, flags, prot, offset=off)
        check(False, what + " refused")
    except OSError as e:
        check(e.errno == errno.EINVAL, "%s refused (%s)" % (what, e.strerror))
bad("short length", msz - 4096, 0)
bad("long length", 2 * msz, 0)
bad("offset inside a ring", msz, 4096)
bad("ring past nr_cpu_ids", msz, nr * msz)
bad("huge offset", msz, (1 << 62) // msz * msz)
bad("MAP_PRIVATE", msz, 0, flags=mmap.MAP_PRIVATE)
bad("PROT_EXEC", msz, 0, prot=P | mmap.PROT_EXEC)

# corrupt tail: harmless with no producer, must not crash anything
struct.pack_into("Q", maps[0], 128, (1 << 64) - 1)

# fork: VM_DONTCOPY -> the child has no mapping
pid = os.fork()
if pid == 0:
    maps[0][0]
    os._exit(0)
_, status = os.waitpid(pid, 0)
check(os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGSEGV,
      "forked child has no mapping (SIGSEGV)")

# unload while mapped: fd closed, mapping alive -> rmmod refused
os.close(fd)
g.s.close()
rc, out = sh("rmmod", "nvmetrace")
check(rc != 0, "rmmod refused while a ring is mapped (%s)" % out)
check(struct.unpack_from("I", maps[0], 0)[0] == 0x4e565452, "mapping still readable after close")
for m in maps:
    m.close()
rc, out = sh("rmmod", "nvmetrace")
check(rc == 0, "rmmod after munmap " + out)

print("RESULT: %d failure(s)" % fails)
sys.exit(1 if fails else 0)
