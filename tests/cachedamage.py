#!/usr/bin/env python3
"""cachedamage.py IMAGE DIR: damages, in IMAGE (an image file of a
receiver's cache), the frame of a chunk of memory that IMAGE stores and
that the newest image of the cache DIR lists too, so that the next image
of the same tree refers to it.  Prints the chunk's name."""

import io
import json
import os
import struct
import subprocess
import sys
import tarfile

FOOTER = 24     # a skippable frame: magic, size, "gpuckpt\0", offset


def trailer(path):
    """The entries of the trailer of the image file path."""
    with open(path, "rb") as f:
        data = f.read()
    magic, size = struct.unpack("<II", data[-FOOTER:-FOOTER + 8])
    if magic != 0x184D2A5E or size != 16 or \
            data[-16:-8] != b"gpuckpt\0":
        sys.exit("cachedamage.py: %s: no footer" % path)
    (at,) = struct.unpack("<Q", data[-8:])
    tar = subprocess.run(["zstd", "-dcq"], input=data[at:-FOOTER],
                         stdout=subprocess.PIPE, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        m = t.next()
        return json.load(t.extractfile(m))["entries"]


def main():
    image, cache = sys.argv[1], sys.argv[2]
    imgs = [os.path.join(cache, n) for n in os.listdir(cache)
            if n.endswith(".gck")]
    newest = max(imgs, key=os.path.getmtime)
    listed = {e["sha256"] for e in trailer(newest)}
    for e in trailer(image):
        if e.get("ref") or not e["name"].startswith("criu/pages-") or \
                e["size"] != 1 << 20 or e["sha256"] not in listed:
            continue
        with open(image, "r+b") as f:
            f.seek(e["at"] + e["zsize"] // 2)
            b = f.read(1)
            f.seek(e["at"] + e["zsize"] // 2)
            f.write(bytes([b[0] ^ 0x55]))
        print(e["name"])
        return
    sys.exit("cachedamage.py: no chunk to damage in %s" % image)


main()
