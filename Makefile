# nvmetrace — top-level build.
#
#   make              the module (against KDIR) and the tool
#   make deps         install the Debian packages everything needs (apt)
#   make module       nvmetrace.ko against KDIR (default: the running kernel's build tree)
#   make tool         the nvmetrace tool (CMake, build/user/nvmetrace)
#   make demo         the main job on the embedded default: a Debian kernel under
#                     QEMU, an NVMe/TCP target and host, fio, nvmetrace recording, report
#   make check        every test (tests/run): unit, KUnit, DKMS for 6.1, 6.12, 7.2 and 7.3, every
#                     guest scenario on 6.1 and 6.12 and a core set on 7.2 and 7.3, the A/B
#                     test, and check-debug's scenarios on each debug kernel that is cached
#   make check-all    the same with every guest scenario on all four kernel lines
#   make check-debug  reliability scenarios on a KASAN/lockdep/kmemleak kernel built from
#                     Debian's 6.12 source (tests/check-debug; builds the kernel when absent)
#   make debug-kernel build that kernel into the cache (hours on 2 cores; once)
#   make check-kcsan  the same scenarios on a KCSAN (data-race detector) kernel of that source
#                     (tests/check-debug --kcsan; builds the kernel when absent)
#   make kcsan-kernel build that kernel into the cache (once)
#   make bench        overhead and speed benchmarks (ratios measured side by side):
#                     tools/bench (tracing overhead on 6.12 and 7.2, libaio and io_uring, QD 1
#                     and 32, beside ftrace and bpftrace), tools/bench-io (nvmetrace bench vs fio),
#                     then bench-record and bench-join, and the cost of SPDK's trace ring
#                     (tools/spdk trace-cost)
#   make bench-record recorder cost per record on this machine (tools/bench-record:
#                     callgrind instructions and ns per record; BASE=REV compares with REV)
#   make fuzz         the recording fuzzer, then the SPDK trace file fuzzer, 10 minutes each
#                     (FUZZ_SECONDS=N), ASan + UBSan (tests/fuzz-check; make check runs
#                     3000 mutants of each from a fixed seed)
#   make bench-join   join speed: report of 10 M synthetic host + target commands, one
#                     core (commands/s, records/s, peak memory)
#   make install      install the tool, its man pages ($(PREFIX)/share/man/man1) and the
#                     module (into the running kernel's tree)
#   make dkms-install register the module with DKMS
#   make spdk         build SPDK (nvmf_tgt, spdk_nvme_perf, trace tools) into the cache from
#                     SPDK_DIR or the v26.05 source beside the tree (tools/spdk; ~2 min)
#   make clean

VERSION := $(shell cat VERSION)
KDIR ?= /lib/modules/$(shell uname -r)/build
BUILD ?= $(CURDIR)/build
PREFIX ?= /usr/local
export NVMETRACE_BUILD := $(BUILD)

.PHONY: all deps module tool check check-all check-debug debug-kernel check-kcsan kcsan-kernel demo bench bench-record bench-join fuzz install dkms-install spdk clean

all: module tool

deps:
	tools/deps

module:
	@if [ ! -f "$(KDIR)/Makefile" ]; then \
		echo "make: no kernel build tree at $(KDIR)"; \
		echo "  install the headers (apt-get install linux-headers-$$(uname -r)) or pass KDIR=/path/to/build/tree"; \
		echo "  (tools/kernels headers 6.12 fetches a stock Debian one)"; \
		exit 1; fi
	tools/build-kmod $(KDIR)

tool:
	cmake -S user -B $(BUILD)/user -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(BUILD)/user -j$$(nproc)

check:
	tests/run

check-all:
	NVMETRACE_GUEST_MATRIX=full tests/run

check-debug:
	tests/check-debug

debug-kernel:
	tools/kbuild path debug612 >/dev/null 2>&1 || \
		tools/kbuild build --name debug612 --src debian:6.12 --debug

check-kcsan:
	tests/check-debug --kcsan

kcsan-kernel:
	tools/kbuild path kcsan612 >/dev/null 2>&1 || \
		tools/kbuild build --name kcsan612 --src debian:6.12 --config tools/kbuild.d/kcsan.config

demo:
	tools/demo

bench:
	tools/bench
	tools/bench-io
	tools/spdk trace-cost
	$(MAKE) bench-record
	$(MAKE) bench-join

bench-record:
	tools/bench-record $(if $(BASE),--base $(BASE))

# Release build of its own, so the figures are not a debug build's; files cached in
# $(BUILD)/bench-join (about 1 GB for 10 M commands a side)
bench-join:
	cmake -S user -B $(BUILD)/bench-tool -DCMAKE_BUILD_TYPE=Release -DNVMETRACE_BUILD_BENCHMARKS=ON
	cmake --build $(BUILD)/bench-tool --target join_bench -j$$(nproc)
	NVMETRACE_BENCH_DIR=$(BUILD)/bench-join taskset -c 0 $(BUILD)/bench-tool/bench/join_bench

fuzz:
	tests/fuzz-check $(or $(FUZZ_SECONDS),600)

spdk:
	tools/spdk build

install: tool
	install -D -m 0755 $(BUILD)/user/nvmetrace $(DESTDIR)$(PREFIX)/bin/nvmetrace
	cmake --build $(BUILD)/user --target man
	install -d $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 0644 $(BUILD)/user/man/*.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	$(MAKE) -C $(KDIR) M=$(CURDIR)/kmod modules_install

dkms-install:
	rm -rf /usr/src/nvmetrace-$(VERSION)
	mkdir -p /usr/src/nvmetrace-$(VERSION)
	cp -r VERSION dkms.conf kmod /usr/src/nvmetrace-$(VERSION)/
	dkms add -m nvmetrace -v $(VERSION)
	dkms build -m nvmetrace -v $(VERSION) && dkms install -m nvmetrace -v $(VERSION)

clean:
	rm -rf $(BUILD)
	$(MAKE) -C kmod clean 2>/dev/null || true
