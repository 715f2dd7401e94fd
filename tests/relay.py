#!/usr/bin/env python3
"""relay.py -- a TCP relay that breaks connections on purpose.

usage: relay.py PORTFILE TARGETPORT [MODE [N [QUIET]]]

Listens on a free port of 127.0.0.1, writes it to PORTFILE, and relays
every connection to 127.0.0.1:TARGETPORT.  The bytes sent towards the
target (client to server), over all connections, are counted; their
total is written to PORTFILE.count as they go.  MODE says what happens
once N of them have been relayed:

  count     nothing: the connections are relayed whole (the default)
  cut       both ends of every open connection are closed at once
  freeze    nothing more is relayed either way; the connections stay open
  quiet     once N have gone, the client has been quiet for QUIET seconds
            (default 1) and then says something more: that is not
            relayed, and every open connection is closed

A connection made after a cut is relayed whole, as if the network had
come back.  The relay runs until it is killed.
"""

import os
import socket
import sys
import threading
import time

lock = threading.Lock()
total = 0
last = None		# when the client last said something
broken = False
conns = []


def save():
    tmp = countfile + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % total)
    os.replace(tmp, countfile)


def close_all():
    for c in conns:
        for s in c:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                s.close()
            except OSError:
                pass
    del conns[:]


def upstream(cli, srv, pair):
    """Client to server: counted, and where the relay breaks."""
    global total, last, broken
    while True:
        try:
            data = cli.recv(65536)
        except OSError:
            data = b""
        if not data:
            break
        with lock:
            if pair not in conns:
                return	# cut
            now = time.monotonic()
            frozen = False
            if not broken and mode == "quiet" and total >= limit and \
                    last is not None and now - last >= quiet:
                broken = True
                close_all()
                return
            if not broken and mode in ("cut", "freeze") and \
                    total + len(data) >= limit:
                data = data[:limit - total]
                broken = True
                frozen = mode == "freeze"
                cut = mode == "cut"
            else:
                cut = False
            last = now
            total += len(data)
            save()
            if frozen:
                pair.append("frozen")
        try:
            if data:
                srv.sendall(data)
        except OSError:
            break
        if cut:
            with lock:
                close_all()
            return
        if "frozen" in pair:
            # Black hole: read and drop whatever comes, forever.
            while True:
                try:
                    if not cli.recv(65536):
                        return
                except OSError:
                    return
    with lock:
        try:
            srv.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def downstream(cli, srv, pair):
    """Server to client."""
    while True:
        try:
            data = srv.recv(65536)
        except OSError:
            data = b""
        if not data:
            break
        if "frozen" in pair:
            continue
        try:
            cli.sendall(data)
        except OSError:
            break
    try:
        cli.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def serve(cli):
    try:
        srv = socket.create_connection(("127.0.0.1", target))
    except OSError:
        cli.close()
        return
    pair = [cli, srv]
    with lock:
        conns.append(pair)
    for fn in (upstream, downstream):
        threading.Thread(target=fn, args=(cli, srv, pair),
                         daemon=True).start()


portfile = sys.argv[1]
countfile = portfile + ".count"
target = int(sys.argv[2])
mode = sys.argv[3] if len(sys.argv) > 3 else "count"
limit = int(sys.argv[4]) if len(sys.argv) > 4 else 0
quiet = float(sys.argv[5]) if len(sys.argv) > 5 else 1.0
if mode not in ("count", "cut", "freeze", "quiet"):
    sys.exit("relay.py: unknown mode '%s'" % mode)

ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", 0))
ls.listen(16)
save()
with open(portfile + ".tmp", "w") as f:
    f.write("%d\n" % ls.getsockname()[1])
os.replace(portfile + ".tmp", portfile)
while True:
    c, _ = ls.accept()
    serve(c)
