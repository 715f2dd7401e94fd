#!/usr/bin/env python3
"""respclient.py ADDRFILE OUT KEY: a redis client of t-apps.sh.

Connects to the redis server whose address ADDRFILE holds ("HOST PORT"),
and keeps that one connection: it sends INCR KEY, waits for the reply and
appends "LOCALPORT VALUE" to OUT, again and again, 50 times a second.
When the server resets or closes the connection, it appends "reset WHY"
and connects again, to the address ADDRFILE holds then (the test rewrites
it when the server moves), trying 10 times a second.  It writes its PID
to OUT.pid once connected the first time, and runs until killed.
Plain RESP over a socket: it needs nothing but python3.
"""

import os
import socket
import sys
import time


def connect(addrfile):
    while True:
        try:
            with open(addrfile) as f:
                host, port = f.read().split()
            s = socket.create_connection((host, int(port)), timeout=5)
            s.settimeout(None)
            return s
        except (OSError, ValueError):
            time.sleep(0.1)


def reply(s, buf):
    """One RESP integer reply; returns (value, rest of buf)."""
    while b"\r\n" not in buf:
        data = s.recv(4096)
        if not data:
            raise ConnectionResetError("end of file")
        buf += data
    line, buf = buf.split(b"\r\n", 1)
    if not line.startswith(b":"):
        raise SystemExit("respclient: unexpected reply %r" % line)
    return int(line[1:]), buf


def main():
    addrfile, out, key = sys.argv[1:4]
    cmd = b"*2\r\n$4\r\nINCR\r\n$%d\r\n%s\r\n" % (len(key), key.encode())
    fd = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    s = connect(addrfile)
    with open(out + ".pid.tmp", "w") as f:
        f.write("%d\n" % os.getpid())
    os.rename(out + ".pid.tmp", out + ".pid")
    buf = b""
    while True:
        try:
            s.sendall(cmd)
            value, buf = reply(s, buf)
        except OSError as e:
            os.write(fd, b"reset %s\n" % type(e).__name__.encode())
            s.close()
            s = connect(addrfile)
            buf = b""
            continue
        os.write(fd, b"%d %d\n" % (s.getsockname()[1], value))
        time.sleep(0.02)


if __name__ == "__main__":
    main()
