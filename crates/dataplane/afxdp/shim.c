/*
 * Plain-function shim over libxdp's AF_XDP socket API (xsk.h, libxdp 1.3)
 * for nexthop-dataplane's `afxdp` feature.
 *
 * The ring operations of xsk.h (reserve, submit, peek, release, the
 * descriptor accessors, needs_wakeup) are static inline functions, so Rust
 * cannot link to them; this file compiles them into a few batch-sized
 * calls. One `nh_xsk` owns a UMEM (an anonymous mapping of
 * rx_frames + tx_frames chunks), its fill and completion rings, and one
 * socket bound to one queue of one interface with its rx and tx rings.
 *
 * Chunk ownership (the invariant the Rust side relies on):
 *   - chunks [0, rx_frames) are receive chunks: each is either in the fill
 *     ring, in the rx ring, or peeked by the caller (between
 *     nh_xsk_rx_peek and nh_xsk_rx_release); the fill ring has room for
 *     all of them, so giving peeked chunks back never fails;
 *   - chunks [rx_frames, rx_frames + tx_frames) are transmit chunks: each
 *     is either free (owned by the caller), in the tx ring, in flight in
 *     the kernel, or in the completion ring; the tx and completion rings
 *     have room for all of them.
 * The receive functions touch only the fill and rx rings and the transmit
 * functions only the tx and completion rings, so one thread may receive
 * while another sends.
 *
 * Conventions: functions returning int return 0 or a positive errno value.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <linux/if_xdp.h>
#include <xdp/libxdp.h>
#include <xdp/xsk.h>

/* How the XDP program is attached (nh_xsk_config.mode). */
#define NH_MODE_AUTO 0   /* native (driver) mode, else generic (SKB) mode */
#define NH_MODE_SKB 1
#define NH_MODE_NATIVE 2
#define NH_MODE_TX_ONLY 3 /* reported only: no rx ring, no program */

struct nh_xsk_config {
    uint32_t queue;
    uint32_t frame_size; /* power of two, 2048..page size */
    uint32_t rx_frames;  /* power of two, or 0: a transmit-only socket */
    uint32_t tx_frames;  /* power of two, >= 1 */
    uint32_t mode;       /* NH_MODE_AUTO, NH_MODE_SKB or NH_MODE_NATIVE */
};

struct nh_xsk {
    struct xsk_ring_prod fill;
    struct xsk_ring_cons comp;
    struct xsk_ring_cons rx;
    struct xsk_ring_prod tx;
    struct xsk_umem *umem;
    struct xsk_socket *xsk;
    void *area;
    size_t area_len;
    uint32_t frame_size;
    uint32_t rx_frames;
    uint32_t rx_idx; /* first peeked rx descriptor */
    uint32_t rx_peeked;
};

/* libbpf and libxdp print their own warnings on stderr by default; the
 * errors are returned to the caller instead, so keep them quiet. */
static int quiet_xdp(enum libxdp_print_level level, const char *fmt, va_list ap)
{
    (void)level;
    (void)fmt;
    (void)ap;
    return 0;
}

static int err_out(char *err, size_t errlen, int e, const char *fmt, const char *arg)
{
    if (err && errlen) {
        char what[160];
        snprintf(what, sizeof what, fmt, arg);
        snprintf(err, errlen, "%s: %s", what, strerror(e));
    }
    return e;
}

void nh_xsk_close(struct nh_xsk *s)
{
    if (!s)
        return;
    if (s->xsk)
        xsk_socket__delete(s->xsk);
    if (s->umem)
        xsk_umem__delete(s->umem);
    if (s->area && s->area != MAP_FAILED)
        munmap(s->area, s->area_len);
    free(s);
}

static int try_socket(struct nh_xsk *s, const char *ifname, const struct nh_xsk_config *cfg,
                      uint32_t mode)
{
    struct xsk_socket_config sc;
    memset(&sc, 0, sizeof sc);
    sc.rx_size = cfg->rx_frames ? cfg->rx_frames : XSK_RING_CONS__DEFAULT_NUM_DESCS;
    sc.tx_size = cfg->tx_frames;
    sc.bind_flags = XDP_USE_NEED_WAKEUP;
    if (cfg->rx_frames == 0) {
        sc.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD;
    } else if (mode == NH_MODE_SKB) {
        sc.xdp_flags = XDP_FLAGS_SKB_MODE;
        sc.bind_flags |= XDP_COPY;
    } else {
        sc.xdp_flags = XDP_FLAGS_DRV_MODE;
    }
    int r = xsk_socket__create(&s->xsk, ifname, cfg->queue, s->umem,
                               cfg->rx_frames ? &s->rx : NULL, &s->tx, &sc);
    if (r) {
        s->xsk = NULL;
        return -r;
    }
    return 0;
}

/*
 * Open an AF_XDP socket on queue cfg->queue of ifname. On success *out is
 * the socket and *mode_used the attach mode (NH_MODE_SKB, NH_MODE_NATIVE or
 * NH_MODE_TX_ONLY); on failure err holds "step: reason".
 */
int nh_xsk_open(const char *ifname, const struct nh_xsk_config *cfg, struct nh_xsk **out,
                uint32_t *mode_used, char *err, size_t errlen)
{
    libxdp_set_print(quiet_xdp);
    libbpf_set_print(NULL);
    *out = NULL;
    struct nh_xsk *s = calloc(1, sizeof *s);
    if (!s)
        return err_out(err, errlen, ENOMEM, "%s", "allocating the socket state");
    s->frame_size = cfg->frame_size;
    s->rx_frames = cfg->rx_frames;
    uint64_t frames = (uint64_t)cfg->rx_frames + cfg->tx_frames;
    s->area_len = (size_t)(frames * cfg->frame_size);
    s->area = mmap(NULL, s->area_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (s->area == MAP_FAILED) {
        int e = errno;
        nh_xsk_close(s);
        return err_out(err, errlen, e, "%s", "mapping the UMEM");
    }
    struct xsk_umem_config uc = {
        /* Room for every receive chunk (and a minimal ring when none). */
        .fill_size = cfg->rx_frames ? cfg->rx_frames : 64,
        .comp_size = cfg->tx_frames,
        .frame_size = cfg->frame_size,
        .frame_headroom = 0,
        .flags = 0,
    };
    int r = xsk_umem__create(&s->umem, s->area, s->area_len, &s->fill, &s->comp, &uc);
    if (r) {
        s->umem = NULL;
        nh_xsk_close(s);
        return err_out(err, errlen, -r, "registering the UMEM on %s", ifname);
    }
    uint32_t mode = cfg->rx_frames == 0 ? NH_MODE_TX_ONLY : cfg->mode;
    if (mode == NH_MODE_AUTO) {
        r = try_socket(s, ifname, cfg, NH_MODE_NATIVE);
        mode = NH_MODE_NATIVE;
        if (r) {
            r = try_socket(s, ifname, cfg, NH_MODE_SKB);
            mode = NH_MODE_SKB;
        }
    } else {
        r = try_socket(s, ifname, cfg, mode);
    }
    if (r) {
        nh_xsk_close(s);
        if (err && errlen) {
            char what[96];
            snprintf(what, sizeof what, "binding queue %u of %s", cfg->queue, ifname);
            return err_out(err, errlen, r, "%s", what);
        }
        return r;
    }
    /* Every receive chunk starts in the fill ring. */
    if (cfg->rx_frames) {
        uint32_t idx = 0;
        if (xsk_ring_prod__reserve(&s->fill, cfg->rx_frames, &idx) != cfg->rx_frames) {
            nh_xsk_close(s);
            return err_out(err, errlen, ENOSPC, "%s", "filling the fill ring");
        }
        for (uint32_t i = 0; i < cfg->rx_frames; i++)
            *xsk_ring_prod__fill_addr(&s->fill, idx + i) = (uint64_t)i * cfg->frame_size;
        xsk_ring_prod__submit(&s->fill, cfg->rx_frames);
    }
    *mode_used = mode;
    *out = s;
    return 0;
}

int nh_xsk_fd(const struct nh_xsk *s)
{
    return xsk_socket__fd(s->xsk);
}

void *nh_xsk_area(const struct nh_xsk *s)
{
    return s->area;
}

/*
 * Peek up to max received frames: their offsets in the UMEM and lengths.
 * They stay the caller's until nh_xsk_rx_release. Peeking again before
 * releasing returns 0.
 */
uint32_t nh_xsk_rx_peek(struct nh_xsk *s, uint32_t max, uint64_t *addr, uint32_t *len)
{
    if (s->rx_frames == 0 || s->rx_peeked)
        return 0;
    uint32_t idx = 0;
    uint32_t n = xsk_ring_cons__peek(&s->rx, max, &idx);
    for (uint32_t i = 0; i < n; i++) {
        const struct xdp_desc *d = xsk_ring_cons__rx_desc(&s->rx, idx + i);
        addr[i] = xsk_umem__add_offset_to_addr(d->addr);
        len[i] = d->len;
    }
    s->rx_idx = idx;
    s->rx_peeked = n;
    return n;
}

/*
 * Give the peeked frames back: release them from the rx ring and put their
 * chunks in the fill ring (always room, see the invariant above), waking
 * the driver when it asks. Returns 0, or ENOSPC if the invariant was broken
 * (the chunks are then lost to the ring, not reused).
 */
int nh_xsk_rx_release(struct nh_xsk *s)
{
    uint32_t n = s->rx_peeked;
    if (n == 0)
        return 0;
    uint32_t fidx = 0;
    int ret = 0;
    if (xsk_ring_prod__reserve(&s->fill, n, &fidx) == n) {
        uint64_t mask = ~((uint64_t)s->frame_size - 1);
        for (uint32_t i = 0; i < n; i++) {
            const struct xdp_desc *d = xsk_ring_cons__rx_desc(&s->rx, s->rx_idx + i);
            *xsk_ring_prod__fill_addr(&s->fill, fidx + i) =
                xsk_umem__extract_addr(d->addr) & mask;
        }
        xsk_ring_prod__submit(&s->fill, n);
    } else {
        ret = ENOSPC;
    }
    xsk_ring_cons__release(&s->rx, n);
    s->rx_peeked = 0;
    if (xsk_ring_prod__needs_wakeup(&s->fill))
        recvfrom(xsk_socket__fd(s->xsk), NULL, 0, MSG_DONTWAIT, NULL, NULL);
    return ret;
}

/* Take up to max completed transmit chunks (their UMEM offsets). */
uint32_t nh_xsk_tx_reclaim(struct nh_xsk *s, uint64_t *addr, uint32_t max)
{
    uint32_t idx = 0;
    uint32_t n = xsk_ring_cons__peek(&s->comp, max, &idx);
    for (uint32_t i = 0; i < n; i++)
        addr[i] = *xsk_ring_cons__comp_addr(&s->comp, idx + i);
    if (n)
        xsk_ring_cons__release(&s->comp, n);
    return n;
}

/* Queue n frames (chunk offsets and lengths) on the tx ring: all or none. */
uint32_t nh_xsk_tx_submit(struct nh_xsk *s, const uint64_t *addr, const uint32_t *len, uint32_t n)
{
    uint32_t idx = 0;
    if (n == 0 || xsk_ring_prod__reserve(&s->tx, n, &idx) != n)
        return 0;
    for (uint32_t i = 0; i < n; i++) {
        struct xdp_desc *d = xsk_ring_prod__tx_desc(&s->tx, idx + i);
        d->addr = addr[i];
        d->len = len[i];
        d->options = 0;
    }
    xsk_ring_prod__submit(&s->tx, n);
    return n;
}

/* Descriptors on the tx ring that the kernel has not taken yet. */
uint32_t nh_xsk_tx_pending(const struct nh_xsk *s)
{
    uint32_t cons = __atomic_load_n(s->tx.consumer, __ATOMIC_ACQUIRE);
    return s->tx.cached_prod - cons;
}

/* Ask the kernel to send what is on the tx ring: 0 or errno (EAGAIN: some
 * are left, call again; EBUSY: one frame was dropped by the device). */
int nh_xsk_tx_kick(struct nh_xsk *s)
{
    if (sendto(xsk_socket__fd(s->xsk), NULL, 0, MSG_DONTWAIT, NULL, 0) < 0)
        return errno;
    return 0;
}

/* The socket's XDP_STATISTICS: rx_dropped, rx_invalid_descs,
 * tx_invalid_descs, rx_ring_full, rx_fill_ring_empty_descs,
 * tx_ring_empty_descs (zeros where the kernel lacks a field). */
int nh_xsk_stats(const struct nh_xsk *s, uint64_t out[6])
{
    struct xdp_statistics st;
    memset(&st, 0, sizeof st);
    socklen_t len = sizeof st;
    if (getsockopt(xsk_socket__fd(s->xsk), SOL_XDP, XDP_STATISTICS, &st, &len) < 0)
        return errno;
    out[0] = st.rx_dropped;
    out[1] = st.rx_invalid_descs;
    out[2] = st.tx_invalid_descs;
    out[3] = st.rx_ring_full;
    out[4] = st.rx_fill_ring_empty_descs;
    out[5] = st.tx_ring_empty_descs;
    return 0;
}
