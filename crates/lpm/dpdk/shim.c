/*
 * Plain-function shim over DPDK 22.11's rte_lpm and rte_lpm6 for the
 * nexthop-lpm `dpdk` feature (benchmark and differential-test baseline).
 *
 * Several DPDK entry points (rte_lpm_lookup, rte_lpm_lookup_bulk_func,
 * rte_errno) are static inline functions or macros in the headers, so Rust
 * cannot link to them directly; this file compiles them into ordinary
 * symbols with DPDK's own cflags (pkg-config libdpdk).
 *
 * Conventions: functions returning int return 0 on success or a negative
 * errno value; constructors return NULL and store a positive errno value in
 * *err. Lookup outputs use 0xFFFFFFFF for "no route" (nexthop's NO_ROUTE).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lpm.h>
#include <rte_lpm6.h>
#include <rte_malloc.h>
#include <rte_memory.h>

#define NH_NO_ROUTE UINT32_MAX
/* Chunk of the bulk lookups: a compile-time constant, as rte_lpm.h asks
 * ("should be a compile time constant, and divisible by 8"), and the chunk
 * size of Bloomfwd's own lookup_batch. */
#define NH_CHUNK 32

/*
 * rte_eal_init with the caller's CPU affinity preserved: EAL pins the
 * calling thread to its main lcore (`-l 0` = CPU 0), which would silently
 * put every later thread of the process (benchmarks' 2-thread runs) on one
 * core. Returns 0 or a positive errno value (rte_errno).
 */
int nh_dpdk_eal_init(int argc, char **argv)
{
	cpu_set_t saved;
	int have_saved = pthread_getaffinity_np(pthread_self(), sizeof(saved),
						&saved) == 0;
	int rc = rte_eal_init(argc, argv);
	if (rc < 0)
		return rte_errno > 0 ? rte_errno : EINVAL;
	if (have_saved)
		(void)pthread_setaffinity_np(pthread_self(), sizeof(saved),
					     &saved);
	return 0;
}

/*
 * Bytes allocated from DPDK's malloc heaps, all sockets (the
 * heap_allocsz_bytes of rte_malloc_get_socket_stats, element headers
 * included). rte_lpm_create and rte_lpm6_create allocate all of a table
 * there (memzones come from the same heaps), so the difference across a
 * create is the table's memory.
 */
uint64_t nh_dpdk_heap_bytes(void)
{
	uint64_t total = 0;
	unsigned int n = rte_socket_count();
	for (unsigned int i = 0; i < n; i++) {
		struct rte_malloc_socket_stats st;
		int socket = rte_socket_id_by_idx(i);
		if (socket >= 0 && rte_malloc_get_socket_stats(socket, &st) == 0)
			total += st.heap_allocsz_bytes;
	}
	return total;
}

const char *nh_dpdk_strerror(int err)
{
	return rte_strerror(err);
}

/* ---------------------------------------------------------------- IPv4 */

struct rte_lpm *nh_lpm_create(const char *name, uint32_t max_rules,
			      uint32_t number_tbl8s, int *err)
{
	struct rte_lpm_config cfg = {
		.max_rules = max_rules,
		.number_tbl8s = number_tbl8s,
		.flags = 0,
	};
	struct rte_lpm *lpm = rte_lpm_create(name, SOCKET_ID_ANY, &cfg);
	if (lpm == NULL)
		*err = rte_errno > 0 ? rte_errno : ENOMEM;
	return lpm;
}

void nh_lpm_free(struct rte_lpm *lpm)
{
	rte_lpm_free(lpm);
}

int nh_lpm_add(struct rte_lpm *lpm, uint32_t ip, uint8_t depth,
	       uint32_t next_hop)
{
	return rte_lpm_add(lpm, ip, depth, next_hop);
}

int nh_lpm_delete(struct rte_lpm *lpm, uint32_t ip, uint8_t depth)
{
	return rte_lpm_delete(lpm, ip, depth);
}

/* 0 and *next_hop on a hit, -ENOENT on a miss. */
int nh_lpm_lookup(const struct rte_lpm *lpm, uint32_t ip, uint32_t *next_hop)
{
	return rte_lpm_lookup(lpm, ip, next_hop);
}

static inline size_t nh_lpm_finish(uint32_t *out, size_t n)
{
	size_t hits = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t e = out[i];
		int hit = (e & RTE_LPM_LOOKUP_SUCCESS) != 0;
		hits += (size_t)hit;
		out[i] = hit ? (e & 0x00FFFFFFu) : NH_NO_ROUTE;
	}
	return hits;
}

/*
 * rte_lpm_lookup_bulk over ips[0..n) in chunks of NH_CHUNK (constant size,
 * so the inline function's loops are unrolled), then the raw entries are
 * turned into next hops (NH_NO_ROUTE on a miss). Returns the hit count.
 */
size_t nh_lpm_lookup_bulk(const struct rte_lpm *lpm, const uint32_t *ips,
			  uint32_t *out, size_t n)
{
	size_t hits = 0, i = 0;
	for (; i + NH_CHUNK <= n; i += NH_CHUNK) {
		rte_lpm_lookup_bulk(lpm, ips + i, out + i, NH_CHUNK);
		hits += nh_lpm_finish(out + i, NH_CHUNK);
	}
	if (i < n) {
		rte_lpm_lookup_bulk(lpm, ips + i, out + i, (unsigned)(n - i));
		hits += nh_lpm_finish(out + i, n - i);
	}
	return hits;
}

/* ---------------------------------------------------------------- IPv6 */

struct rte_lpm6 *nh_lpm6_create(const char *name, uint32_t max_rules,
				uint32_t number_tbl8s, int *err)
{
	struct rte_lpm6_config cfg = {
		.max_rules = max_rules,
		.number_tbl8s = number_tbl8s,
		.flags = 0,
	};
	struct rte_lpm6 *lpm = rte_lpm6_create(name, SOCKET_ID_ANY, &cfg);
	if (lpm == NULL)
		*err = rte_errno > 0 ? rte_errno : ENOMEM;
	return lpm;
}

void nh_lpm6_free(struct rte_lpm6 *lpm)
{
	rte_lpm6_free(lpm);
}

int nh_lpm6_add(struct rte_lpm6 *lpm, const uint8_t ip[16], uint8_t depth,
		uint32_t next_hop)
{
	return rte_lpm6_add(lpm, ip, depth, next_hop);
}

int nh_lpm6_delete(struct rte_lpm6 *lpm, const uint8_t ip[16], uint8_t depth)
{
	return rte_lpm6_delete(lpm, ip, depth);
}

/* 0 and *next_hop on a hit, -ENOENT on a miss. */
int nh_lpm6_lookup(const struct rte_lpm6 *lpm, const uint8_t ip[16],
		   uint32_t *next_hop)
{
	return rte_lpm6_lookup(lpm, ip, next_hop);
}

/*
 * rte_lpm6_lookup_bulk_func over n addresses (16 bytes each, network
 * order); next_hops[i] is the next hop or -1 on a miss. Returns 0 or
 * -EINVAL.
 */
int nh_lpm6_lookup_bulk(const struct rte_lpm6 *lpm, uint8_t (*ips)[16],
			int32_t *next_hops, unsigned int n)
{
	return rte_lpm6_lookup_bulk_func(lpm, ips, next_hops, n);
}
