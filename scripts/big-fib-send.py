#!/usr/bin/env python3
"""Send every frame of a classic pcap file out of IFACE (AF_PACKET), paced
so the forwarder's receive ring never overflows: big-fib.sh's sender.
Usage: big-fib-send.py FILE.pcap IFACE"""
import socket
import struct
import sys
import time


def frames(path):
    with open(path, "rb") as f:
        head = f.read(24)
        magic = struct.unpack("<I", head[:4])[0]
        if magic not in (0xA1B2C3D4, 0xA1B23C4D):
            sys.exit(f"{path}: not a little-endian classic pcap file")
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                return
            incl = struct.unpack("<IIII", rec)[2]
            yield f.read(incl)


def main():
    path, iface = sys.argv[1], sys.argv[2]
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((iface, 0))
    sent = 0
    for fr in frames(path):
        s.send(fr)
        sent += 1
        if sent % 2000 == 0:
            time.sleep(0.005)
    print(f"sent {sent} frames on {iface}")


if __name__ == "__main__":
    main()
