#!/usr/bin/env python3
"""The offset between two machines' wall clocks over UDP, NTP's way (RFC 5905's on-wire calculation).

  clockprobe.py --serve PORT           answers every probe with its CLOCK_REALTIME (runs until killed)
  clockprobe.py HOST PORT [PROBES]     prints one JSON object: offset_ms (HOST's clock minus ours, from the probe
                                       with the shortest round trip), its error bound (half that round trip) and
                                       the number of answers

Each probe carries our send time t0; HOST answers with its receive time t1 (= its send time); we receive at t2.
offset = t1 - (t0 + t2) / 2, exact to within (t2 - t0) / 2. A probe without an answer within 1 s is lost.
"""
import json
import socket
import struct
import sys
import time

PROBE = struct.Struct("!d")
ANSWER = struct.Struct("!dd")


def fail(why):
    print(f"clockprobe: {why}", file=sys.stderr)
    sys.exit(2)


def serve(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", port))
    while True:
        data, peer = s.recvfrom(64)
        if len(data) == PROBE.size:
            s.sendto(ANSWER.pack(PROBE.unpack(data)[0], time.clock_gettime(time.CLOCK_REALTIME)), peer)


def probe(host, port, count):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(1.0)
    best = None
    answers = 0
    for _ in range(count):
        t0 = time.clock_gettime(time.CLOCK_REALTIME)
        s.sendto(PROBE.pack(t0), (host, port))
        try:
            data = s.recv(64)
        except socket.timeout:
            continue
        t2 = time.clock_gettime(time.CLOCK_REALTIME)
        if len(data) != ANSWER.size or ANSWER.unpack(data)[0] != t0:
            continue
        answers += 1
        t1 = ANSWER.unpack(data)[1]
        if best is None or t2 - t0 < best[1]:
            best = (t1 - (t0 + t2) / 2, t2 - t0)
        time.sleep(0.01)
    if best is None:
        fail(f"no answer from {host}:{port}")
    print(json.dumps({"offset_ms": best[0] * 1e3, "error_ms": best[1] / 2 * 1e3, "answers": answers}))


def main():
    a = sys.argv[1:]
    if len(a) == 2 and a[0] == "--serve" and a[1].isdigit():
        serve(int(a[1]))
    elif len(a) in (2, 3) and a[1].isdigit() and (len(a) == 2 or a[2].isdigit()):
        probe(a[0], int(a[1]), int(a[2]) if len(a) == 3 else 50)
    else:
        fail("bad arguments (expected --serve PORT, or HOST PORT [PROBES])")


if __name__ == "__main__":
    main()
