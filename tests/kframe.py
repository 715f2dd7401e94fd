#!/usr/bin/env python3
#
# kframe.py drop | hold FILE SECONDS
#
# Passes gpurecv's frames from standard input to standard output, all but
# the one that says the tree runs ('K'): "drop" ends the stream there, as
# a connection lost at that moment would; "hold" makes FILE, to say it has
# come, and holds it back SECONDS before passing it on.
import struct
import sys
import time

mode = sys.argv[1]
i, o = sys.stdin.buffer, sys.stdout.buffer
while True:
    h = i.read(16)
    if len(h) < 16:
        sys.exit(0)
    d = i.read(struct.unpack(">I", h[4:8])[0])
    if h[1:2] == b"K":
        if mode == "drop":
            sys.exit(0)
        open(sys.argv[2], "w").close()
        time.sleep(float(sys.argv[3]))
    o.write(h + d)
    o.flush()
