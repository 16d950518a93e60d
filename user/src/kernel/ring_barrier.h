/*
 * ring_barrier.h: kmod/ring_core.h for user space.
 *
 * ring_core.h leaves its four ordering primitives and its clock to the
 * includer (the kernel maps them to smp_load_acquire() & co.).  Here they are GCC/Clang __atomic
 * builtins, which work on the plain __u64 fields of the shared control page
 * in both C and C++ and which ThreadSanitizer understands:
 *
 *   LOAD_ACQUIRE / STORE_RELEASE  pair across the two sides of the ring (see
 *                                 the protocol comment in ring_core.h);
 *   READ_ONCE / WRITE_ONCE        relaxed atomics: a single untorn access
 *                                 that orders nothing, like the kernel's.
 *
 * Include this header, never ring_core.h directly, so the primitives are
 * always defined first.  Plain C on purpose: it is also compiled alone as C11
 * by the ring_core_alone_c11 test.
 */
#ifndef NVMETRACE_RING_BARRIER_H
#define NVMETRACE_RING_BARRIER_H

#define NVMETRACE_LOAD_ACQUIRE(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define NVMETRACE_STORE_RELEASE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define NVMETRACE_READ_ONCE(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define NVMETRACE_WRITE_ONCE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
/* The producer's clock, read when a record is dropped; only tests produce
 * here, and they may define their own before including this header. */
#ifndef NVMETRACE_RING_NOW
#define NVMETRACE_RING_NOW() ((__u64)0)
#endif

#include "ring_core.h"

#endif /* NVMETRACE_RING_BARRIER_H */
