#!/usr/bin/env python3
"""sigimg.py -- signed images changed after signing, for t-sign.sh.

usage: sigimg.py manifest IMAGE OUT	the manifest changed (a process's
					comm), its digest made to match; the
					trailer and signature as signed
       sigimg.py resum IMAGE OUT	the same, the trailer made to match
					it too; the signature as it was
       sigimg.py splice IMAGE OTHER OUT	IMAGE with the signature of OTHER
       sigimg.py flip IMAGE OUT		a byte of the signature's key
					changed, its entry's digest matching

Each entry of an image of format 2 is a zstd frame of its own; the last
frame holds the trailer, the signature and the end of the archive, and a
footer names it (gpuckpt-image(5)).  Frames are rewritten with zstd(1),
entries with Python's tarfile, each with the SHA-256 record a reader
checks, so that what is refused is refused for the signature alone.
"""

import base64
import hashlib
import io
import json
import os
import struct
import subprocess
import sys
import tarfile
import tempfile

KEY = "SCHILY.xattr.gpuckpt.sha256"


def zstd(data, *opts):
    # From a file, so that the frame's header gives its size.
    with tempfile.NamedTemporaryFile() as f:
        f.write(data)
        f.flush()
        return subprocess.run(["zstd", "-q", "-c", "--check"] + list(opts) +
                              [f.name], stdout=subprocess.PIPE,
                              check=True).stdout


def unzstd(data):
    return subprocess.run(["zstd", "-q", "-d", "-c"], input=data,
                          stdout=subprocess.PIPE, check=True).stdout


def frames(img):
    """Each entry's frame, in order, and the last one, from the trailer
    the footer names."""
    magic, n, tag, at = struct.unpack("<II8sQ", img[-24:])
    assert magic == 0x184D2A5E and tag == b"gpuckpt\0"
    last = img[at:-24]
    t = members(unzstd(last))
    sums = json.loads(t[0][1])
    out = [img[e["at"]:e["at"] + e["zsize"]] for e in sums["entries"]]
    return out, last


def members(tar):
    """(name, data) of each member of a tar archive."""
    with tarfile.open(fileobj=io.BytesIO(tar), mode="r:") as tf:
        return [(m.name, tf.extractfile(m).read()) for m in tf]


def entry(name, data):
    """A tar of one entry, in pax format, with its digest."""
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w:", format=tarfile.PAX_FORMAT) as tf:
        ti = tarfile.TarInfo(name)
        ti.size = len(data)
        ti.mode = 0o600
        ti.pax_headers = {KEY: hashlib.sha256(data).hexdigest()}
        tf.addfile(ti, io.BytesIO(data))
    return b.getvalue()


def tail(sums, sig):
    """The last frame's tar: the trailer, the signature, the end."""
    body = strip_end(entry("gpuckpt.sums", sums))
    if sig is not None:
        body += strip_end(entry("gpuckpt.sig", sig))
    return body + bytes(1024)


def strip_end(t):
    """A one-entry tar without its end-of-archive blocks and padding."""
    with tarfile.open(fileobj=io.BytesIO(t), mode="r:") as tf:
        m = tf.next()
        end = m.offset_data + (m.size + 511) // 512 * 512
    return t[:end]


def build(fr, sums, sig):
    """An image of the frames fr, the trailer sums (its at and zsize made
    to match) and the signature sig."""
    at = 0
    for i, f in enumerate(fr):
        sums["entries"][i]["at"] = at
        sums["entries"][i]["zsize"] = len(f)
        at += len(f)
    text = json.dumps(sums, separators=(",", ":")).encode()
    return b"".join(fr) + zstd(tail(text, sig)) + footer(at), text


def footer(at):
    return struct.pack("<II8sQ", 0x184D2A5E, 16, b"gpuckpt\0", at)


def main():
    op, img = sys.argv[1], open(sys.argv[2], "rb").read()
    fr, last = frames(img)
    t = members(unzstd(last))
    sums_text, sig = t[0][1], t[1][1] if len(t) > 1 else None
    sums = json.loads(sums_text)
    if op in ("manifest", "resum"):
        m = json.loads(members(unzstd(fr[0]))[0][1])
        m["processes"][0]["comm"] = "evil"
        data = json.dumps(m, indent=2).encode()
        fr[0] = zstd(strip_end(entry("gpuckpt.json", data)))
        if op == "resum":
            sums["entries"][0]["sha256"] = hashlib.sha256(data).hexdigest()
            sums["entries"][0]["size"] = len(data)
            sums["bytes"] = sum(e["size"] for e in sums["entries"])
            out, _ = build(fr, sums, sig)
        else:
            # The trailer's bytes as signed, frames moved or not.
            out = b"".join(fr)
            at = len(out)
            out += zstd(tail(sums_text, sig)) + footer(at)
    elif op == "splice":
        other = open(sys.argv[3], "rb").read()
        _, olast = frames(other)
        osig = members(unzstd(olast))[1][1]
        out = b"".join(fr)
        at = len(out)
        out += zstd(tail(sums_text, osig)) + footer(at)
    elif op == "flip":
        lines = sig.split(b"\n")
        body = base64.b64decode(b"".join(lines[1:-2]))
        # a byte of the signature itself, which ends the blob
        pos = len(body) - 10
        body = body[:pos] + bytes([body[pos] ^ 1]) + body[pos + 1:]
        b64 = base64.b64encode(body)
        newsig = b"\n".join([lines[0]] + [b64[i:i + 70] for i in
                            range(0, len(b64), 70)] + lines[-2:])
        out = b"".join(fr)
        at = len(out)
        out += zstd(tail(sums_text, newsig)) + footer(at)
    else:
        sys.exit("unknown operation " + op)
    with open(sys.argv[-1], "wb") as f:
        f.write(out)


if __name__ == "__main__":
    main()
