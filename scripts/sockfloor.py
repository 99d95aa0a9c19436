#!/usr/bin/env python3
# CPU cost of moving 8000-byte packets through one Unix stream socket,
# sender and receiver each in its own process, 8 packets per write, reads
# of 256 KiB: the copy floor of one hop.
import os, socket, sys, time, resource
N = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
SIZE = int(sys.argv[2]) if len(sys.argv) > 2 else 8000
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
pid = os.fork()
if pid == 0:
    a.close()
    buf = bytearray(262144)
    want = N * SIZE
    got = 0
    while got < want:
        n = b.recv_into(buf)
        if n == 0:
            break
        got += n
    os._exit(0)
b.close()
msg = [b'x' * SIZE] * 8
t0 = time.time()
for _ in range(N // 8):
    a.sendmsg(msg)
a.shutdown(socket.SHUT_WR)
os.waitpid(pid, 0)
dt = time.time() - t0
ru_s = resource.getrusage(resource.RUSAGE_SELF)
ru_c = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = ru_s.ru_utime + ru_s.ru_stime + ru_c.ru_utime + ru_c.ru_stime
print(f"{N} x {SIZE} B: {N/dt/1e3:.0f} k packets/s wall, {N*SIZE/dt/1e9:.2f} GB/s, CPU {cpu/N*1e6:.2f} us per packet (both sides)")
