#!/usr/bin/env python3
"""hostile.py -- hostile image streams for gpurestore and gpuinspect.

usage: hostile.py [options] good.gck good.tar

A deterministic generator builds a corpus of damaged and hostile streams
from two real images of the same process tree (one zstd-compressed, one
not, both of format 1) and, with --v2, from two of format 2 (a full one
and an incremental one made of it, restored with parent images, some of
them hostile too) and, with --signed, from a signed one (some streams
run with --allowed-signers), and a driver runs each stream through
gpurestore and gpuinspect, which must refuse every one of them cleanly:
the exit status their man pages give, nothing on standard output,
exactly one line on standard error with the program's prefix, no
process left behind, nothing written in the current directory, $TMPDIR
or at the paths the evil entries name, a peak RSS under a bound, and an
exit within a hang-detecting timeout.  (The signatures' bytes, like the
images', differ from run to run: ssh-keygen makes the keys.)  The
streams of the category "sockets" are sound to their last byte, but a
TCP or UDP socket that they add lies, or needs what this host lacks:
gpurestore refuses them so, gpuinspect --verify finds them intact, its
summary shows of the socket what its record supports, and --check fails
in the words of gpurestore.

The output is TAP-like, one line per category:
	ok<TAB>CATEGORY<TAB>N streams, M runs
	not ok<TAB>CATEGORY<TAB>N streams, M runs, K failed
and the failing runs are described on standard error.

Options:
	--bindir DIR	where gpurestore and gpuinspect are (GCK_BINDIR)
	--trash DIR	the test's scratch directory; evil paths point into it
	--pids P,...	the PIDs of the image's processes, which must not
			exist while or after a stream is refused
	--min N		fail unless the corpus has at least N streams
	--only TEXT	run only the streams whose name contains TEXT, or
			of category TEXT
	--write DIR	write the corpus into DIR (one file a stream, named by
			its number), list it on standard output and exit;
			with DIR "-", only list it
	--rss-kb N	peak RSS bound in KiB (default 262144)
	--timeout S	per-run hang detector in seconds (default 30)
	--jobs N	runs made at a time, beside the one gpurestore run
			that starts criu (default 3)
	--every N	one stream in N gets a run of one more gpuinspect
			mode, in turn (default 1: every stream)
	--runone PATH	tests/runone, built (default $GCK_TESTDIR/runone)
	--v2 A,B	two real compressed images of format 2 of one tree,
			A full, B made with --parent=A: frames, footers and
			parents made hostile from them (parent images are
			written into TRASH/parents)
	--signed S,KEY,ALLOWED
			with --v2: a signed image of format 2, the key that
			signed it, and an allowed_signers file that lists
			that key: what follows the trailer made hostile,
			and streams refused with --allowed-signers=ALLOWED
			(another key is made in TRASH)
	--port N	a port of 127.0.0.1 that a process of the test
			listens on: streams with a socket listening there
"""

import argparse
import base64
import collections
import ctypes
import errno
import functools
import glob
import hashlib
import json
import os
import random
import re
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time

import criuimg

RECORD = 10240
BLOCK = 512
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
DIGEST_KEY = "SCHILY.xattr.gpuckpt.xxh3"

# ---------------------------------------------------------------- hashes

_xxh = ctypes.CDLL("libxxhash.so.0")
_xxh.XXH3_64bits.restype = ctypes.c_uint64
_xxh.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]


def xxh3(b):
    return "%016x" % _xxh.XXH3_64bits(b, len(b))


# ----------------------------------------------------------- tar, by hand

def octal(n, width):
    """A ustar numeric field: width - 1 octal digits and a NUL."""
    return b"%0*o\0" % (width - 1, n)


def ustar(name, size=0, typ=b"0", linkname=b"", mode=0o600, devmajor=0,
          devminor=0, size_field=None, magic=b"ustar\x0000", prefix=b""):
    """A 512-byte ustar header with a correct checksum."""
    if isinstance(name, str):
        name = name.encode()
    if isinstance(linkname, str):
        linkname = linkname.encode()
    h = bytearray(BLOCK)
    h[0:100] = name[:100].ljust(100, b"\0")
    h[100:108] = octal(mode, 8)
    h[108:116] = octal(0, 8)
    h[116:124] = octal(0, 8)
    h[124:136] = size_field if size_field is not None else octal(size, 12)
    h[136:148] = octal(1700000000, 12)
    h[156:157] = typ
    h[157:257] = linkname[:100].ljust(100, b"\0")
    h[257:265] = magic
    h[265:297] = b"root".ljust(32, b"\0")
    h[297:329] = b"root".ljust(32, b"\0")
    h[329:337] = octal(devmajor, 8)
    h[337:345] = octal(devminor, 8)
    h[345:500] = prefix[:155].ljust(155, b"\0")
    return fix_checksum(h)


def fix_checksum(h):
    h = bytearray(h)
    h[148:156] = b" " * 8
    h[148:156] = b"%06o\0 " % sum(h)
    return bytes(h)


def pad(b):
    return b + bytes(-len(b) % BLOCK)


def record(key, value):
    """One pax record, "LEN KEY=VALUE\\n", LEN counting itself."""
    if isinstance(key, str):
        key = key.encode()
    if isinstance(value, str):
        value = value.encode()
    body = b" " + key + b"=" + value + b"\n"
    n = len(body) + 1
    while len(str(n).encode()) + len(body) != n:
        n += 1
    return str(n).encode() + body


def pax(records, name=b"PaxHeader/x", typ=b"x"):
    """A pax extended header: its ustar header and its records."""
    if isinstance(records, dict):
        records = b"".join(record(k, v) for k, v in records.items())
    return ustar(name, len(records), typ) + pad(records)


def entry(name, data, records=None, digest=None, typ=b"0", **kw):
    """A whole entry: pax header with a digest (that of data unless
    given; False for none), ustar header, data."""
    recs = dict(records or {})
    if digest is not False:
        recs[DIGEST_KEY] = digest if digest is not None else xxh3(data)
    n = name.encode() if isinstance(name, str) else name
    h = pax(recs, b"PaxHeader/" + n.split(b"/")[-1][:80]) if recs else b""
    size = len(data) if typ in (b"0", b"\0") else kw.pop("size", 0)
    return h + ustar(n, kw.pop("size", size), typ, **kw) + pad(data)


def finish(body):
    """The end of the archive: two zero blocks, a whole record."""
    b = body + bytes(2 * BLOCK)
    return b + bytes(-len(b) % RECORD)


# --------------------------------------------------------------- zstd

def zstd(b, *opts):
    return subprocess.run(["zstd", "-q", "-c"] + list(opts), input=b,
                          stdout=subprocess.PIPE, check=True).stdout


def zframe(blocks, window_log=20, checksum=b"\0\0\0\0", fcs=None):
    """A zstd frame by hand.  blocks: list of ("raw", bytes) or
    ("rle", byte, count), count <= 128 KiB.  checksum: the 4 bytes to
    append (false ones by default: a reader meets them last), or None
    for a frame without one."""
    fhd = 0
    if checksum is not None:
        fhd |= 0x04
    extra = b""
    if fcs is not None:
        fhd |= 0xc0			# 8-byte frame content size
        extra = struct.pack("<Q", fcs)
    out = [ZSTD_MAGIC + bytes([fhd, (window_log - 10) << 3]) + extra]
    for i, blk in enumerate(blocks):
        last = 1 if i == len(blocks) - 1 else 0
        if blk[0] == "raw":
            out.append(struct.pack("<I", last | len(blk[1]) << 3)[:3] +
                       blk[1])
        else:
            out.append(struct.pack("<I", last | 1 << 1 | blk[2] << 3)[:3] +
                       blk[1])
    if checksum is not None:
        out.append(checksum)
    return b"".join(out)


def raw_blocks(b):
    return [("raw", b[i:i + 65536]) for i in range(0, len(b), 65536)]


def rle_blocks(byte, count):
    """count bytes of byte, as RLE blocks of 128 KiB."""
    n, rest = divmod(count, 1 << 17)
    return [("rle", byte, 1 << 17)] * n + ([("rle", byte, rest)]
                                           if rest else [])


def zstd_layout(b):
    """The frame header length, the blocks (offset of header, type,
    content length) and the offset of the checksum of b's one frame."""
    fhd = b[4]
    single = fhd >> 5 & 1
    fcs = (0, 2, 4, 8)[fhd >> 6]
    if fcs == 0 and single:
        fcs = 1
    did = (0, 1, 2, 4)[fhd & 3]
    pos = 5 + (0 if single else 1) + did + fcs
    hlen, blocks = pos, []
    while True:
        h = int.from_bytes(b[pos:pos + 3], "little")
        last, typ, size = h & 1, h >> 1 & 3, h >> 3
        clen = 1 if typ == 1 else size
        blocks.append((pos, typ, clen))
        pos += 3 + clen
        if last:
            break
    return hlen, blocks, pos if fhd & 4 else None


# ---------------------------------------------------------- the real tar

class Entry:
    pass


def parse_tar(buf):
    """The entries of an image written by gpuckpt, with the offsets of
    their parts: pax header, its records, ustar header, data."""
    entries, pos = [], 0
    while pos + BLOCK <= len(buf):
        e = Entry()
        e.start = pos
        h = buf[pos:pos + BLOCK]
        if h == bytes(BLOCK):
            break
        e.pax = None
        e.recs = {}
        if h[156:157] == b"x":
            n = int(h[124:136].rstrip(b"\0 "), 8)
            e.pax = pos
            e.recs_at = pos + BLOCK
            e.recs_len = n
            text = buf[pos + BLOCK:pos + BLOCK + n]
            for m in re.finditer(rb"(\d+) ([^=]+)=", text):
                ln = int(m.group(1))
                v0 = m.end()
                v1 = m.start() + ln - 1
                e.recs[m.group(2).decode()] = (v0, text[v0:v1].decode())
            pos += BLOCK + (n + BLOCK - 1) // BLOCK * BLOCK
            h = buf[pos:pos + BLOCK]
        e.hdr = pos
        e.typ = h[156:157]
        e.stored = int(h[124:136].rstrip(b"\0 "), 8)
        e.data = pos + BLOCK
        e.end = e.data + (e.stored + BLOCK - 1) // BLOCK * BLOCK
        e.name = e.recs.get("GNU.sparse.name", (0, None))[1] or \
            h[0:100].split(b"\0")[0].decode()
        e.sparse = "GNU.sparse.name" in e.recs
        e.size = int(e.recs["GNU.sparse.realsize"][1]) if e.sparse \
            else e.stored
        # format 1's digest, or format 2's (SHA_KEY), or none
        e.digest = (e.recs.get(DIGEST_KEY) or
                    e.recs.get("SCHILY.xattr.gpuckpt.sha256", (0, None)))[1]
        e.raw = buf[e.start:e.end]
        entries.append(e)
        pos = e.end
    return entries, pos


# ------------------------------------------------------------- the corpus

class Stream:
    """One hostile stream: its category, name, bytes (or a function
    that makes them) and a pattern of what gpurestore must say."""

    def __init__(self, cat, name, data, expect=None, parents=None,
                 args=None, sk=None):
        self.cat, self.name, self._data = cat, name, data
        self.expect = expect
        self.parents = parents	# None, or the --parent images to give
        self.args = args or []	# more options, to both tools
        self.sk = sk		# a socket's stream: what gpuinspect says

    def data(self):
        if not callable(self._data):
            return self._data
        b = self._data()
        if len(b) <= 1 << 18:
            self._data = b	# small: compressed, costly to make again
        return b


class Corpus:
    def __init__(self, gck, tar, trash):
        self.gck, self.tar, self.trash = gck, tar, trash
        self.streams = []
        self.benign = []
        self.entries, self.tar_end = parse_tar(tar)
        es = self.entries
        if es[0].name != "gpuckpt.json" or es[-1].name != "gpuckpt.sums":
            sys.exit("hostile.py: %d entries, not an image" % len(es))
        self.manifest, self.sums = es[0], es[-1]
        self.crius = es[1:-1]
        self.parts = [e for e in es if ".part" in e.name]
        self.sparse = [e for e in es if e.sparse]
        if len(self.parts) < 2 or not self.sparse:
            sys.exit("hostile.py: the image needs parts and holes")
        self.head_len = es[1].start
        self.mjson = json.loads(tar[self.manifest.data:self.manifest.data +
                                    self.manifest.size])

    def add(self, cat, name, data, expect=None, parents=None, args=None,
            sk=None):
        self.streams.append(Stream(cat, name, data, expect, parents, args,
                                   sk))

    # A stream of the real entries (each the raw bytes of good.tar, or
    # bytes), with a trailer that lists them truly if sums is True.
    def image(self, ents, sums=True, tail=b""):
        body = b"".join(e if isinstance(e, bytes) else e.raw for e in ents)
        if sums is True:
            body += self.trailer(ents)
        elif sums:
            body += sums
        return finish(body) + tail

    def trailer(self, ents, fmt=1, mutate=None):
        listed = []
        for e in ents:
            if isinstance(e, bytes):
                e = parse_tar(pad(e) + bytes(1024))[0][0]
            listed.append({"name": e.name, "size": e.size,
                           "xxh3": e.digest})
        t = {"format": fmt, "entries": listed, "count": len(listed),
             "bytes": sum(x["size"] for x in listed)}
        if mutate:
            mutate(t)
        return entry("gpuckpt.sums", json.dumps(t).encode())

    def manifest_entry(self, text):
        return entry("gpuckpt.json", text)


def spread(lo, hi, k):
    """k offsets spread evenly inside [lo, hi)."""
    if hi <= lo:
        return []
    return sorted({lo + (hi - lo) * i // (k + 1) for i in range(1, k + 1)})


def flip(buf, off, mask=0xff):
    b = bytearray(buf)
    b[off] ^= mask
    return bytes(b)


def cut_expect(o, head):
    """What gpurestore says of an image cut after o bytes, when that
    is before head, where its head ends: however little of it is left,
    an image cut short, not something else.  (Cut later, it may have
    started criu, which may fail first.)"""
    if o == 0:
        return r"^gpurestore: empty input: no image$"
    if o < head:
        return r"^gpurestore: image truncated at the start[ :]"
    return None


def gen_truncations(c):
    tar, gck = c.tar, c.gck
    offs = {}
    mid = c.crius[len(c.crius) // 2]
    for e in c.entries:
        where = e.name.replace("criu/", "")
        if e not in (c.manifest, c.crius[0], mid, c.sums) and \
                not e.name.startswith("criu/pages-"):
            # The others: where their headers and data start.
            offs.setdefault(e.start, "pax header of %s" % where)
            offs.setdefault(e.data, "data of %s" % where)
            continue
        if e.pax is not None:
            for o, what in ((e.pax, "pax header"), (e.pax + 1, "pax header"),
                            (e.pax + 300, "pax header"),
                            (e.pax + 511, "pax header"),
                            (e.recs_at + e.recs_len // 2, "pax records"),
                            (e.recs_at + e.recs_len, "pax padding"),
                            (e.hdr - 1, "pax padding")):
                offs.setdefault(o, "%s of %s" % (what, where))
        for o, what in ((e.hdr, "header"), (e.hdr + 100, "header"),
                        (e.hdr + 256, "header"), (e.hdr + 511, "header"),
                        (e.data, "data"), (e.data + 1, "data"),
                        (e.data + e.stored // 2, "data"),
                        (e.data + e.stored - 1, "data"),
                        (e.data + e.stored, "data padding"),
                        (e.end - 1, "data padding")):
            offs.setdefault(o, "%s of %s" % (what, where))
        if e.sparse:
            for o in spread(e.data, e.data + e.stored, 3):
                offs.setdefault(o, "holes map or data of %s" % where)
    for o in (c.tar_end, c.tar_end + 1, c.tar_end + 511, c.tar_end + 512,
              c.tar_end + 1023, c.tar_end + 1024, len(tar) - 1,
              len(tar) - 2, len(tar) - 512, len(tar) - 5000):
        offs.setdefault(o, "end of archive")
    for o in (0, 1, 2, 3, 4, 5, 100, 257, 262):
        offs.setdefault(o, "first block")
    rnd = random.Random(7)
    for _ in range(16):
        o = rnd.randrange(len(tar))
        offs.setdefault(o, "random")
    for o, what in sorted(offs.items()):
        if 0 <= o < len(tar):
            c.add("truncate-tar", "tar cut at %d (%s)" % (o, what),
                  lambda o=o: c.tar[:o], cut_expect(o, c.head_len))
    # The compressed image: in its frame header, its blocks' headers and
    # contents, and its checksum.
    hlen, blocks, ck = zstd_layout(gck)
    offs = {}
    for o in range(0, hlen + 1):
        offs[o] = "frame header"
    for i, (at, typ, clen) in enumerate(blocks):
        if i < 6 or i > len(blocks) - 4 or i % 4 == 0:
            for o in (at, at + 1, at + 2, at + 3, at + 3 + clen // 2,
                      at + 3 + clen - 1):
                offs.setdefault(o, "block %d" % i)
    if ck is not None:
        for o in range(ck, ck + 4):
            offs[o] = "checksum"
    rnd = random.Random(8)
    for _ in range(20):
        offs.setdefault(rnd.randrange(len(gck)), "random")
    # Until its first block ends, the frame yields no tar byte at all.
    zhead = blocks[1][0] if len(blocks) > 1 else len(gck)
    for o, what in sorted(offs.items()):
        if 0 <= o < len(gck):
            c.add("truncate-zstd", "zstd cut at %d (%s)" % (o, what),
                  lambda o=o: c.gck[:o], cut_expect(o, zhead))


def gen_zstd_flips(c):
    gck = c.gck
    hlen, blocks, ck = zstd_layout(gck)
    # A flip of the window size that still decodes the same bytes
    # damages nothing: it is left out (and so is counted).
    plain = subprocess.run(["zstd", "-dcq"], input=gck,
                           stdout=subprocess.PIPE, check=True).stdout
    for o in range(hlen):
        for m in (0xff, 0x01, 0x80, 0x20):
            b = flip(gck, o, m)
            p = subprocess.run(["zstd", "-dcq"], input=b,
                               stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL)
            if p.returncode == 0 and p.stdout == plain:
                c.benign.append("zstd byte %d ^ %#x" % (o, m))
                continue
            c.add("flip-zstd-header", "zstd byte %d ^ %#x (frame header)"
                  % (o, m), lambda o=o, m=m: flip(c.gck, o, m))
    for i, (at, typ, clen) in enumerate(blocks):
        if not (i < 4 or i > len(blocks) - 3 or i % 5 == 0):
            continue
        for o, m in ((at, 0x01), (at, 0x02), (at, 0x04), (at + 1, 0xff),
                     (at + 2, 0x80)):
            c.add("flip-zstd-blocks", "zstd byte %d ^ %#x (header of "
                  "block %d)" % (o, m, i),
                  lambda o=o, m=m: flip(c.gck, o, m))
        for o in spread(at + 3, at + 3 + clen, 3):
            # A flip of a bit the decoder does not use, which decodes
            # the same bytes, damages nothing either.
            p = subprocess.run(["zstd", "-dcq"], input=flip(gck, o),
                               stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL)
            if p.returncode == 0 and p.stdout == plain:
                c.benign.append("zstd byte %d (in block %d)" % (o, i))
                continue
            c.add("flip-zstd-blocks", "zstd byte %d (in block %d)" % (o, i),
                  lambda o=o: flip(c.gck, o))
    if ck is None:
        sys.exit("hostile.py: the zstd image has no checksum")
    for o in range(ck, ck + 4):
        for m in (0xff, 0x01, 0x80):
            c.add("flip-zstd-checksum", "zstd byte %d ^ %#x (checksum)"
                  % (o, m), lambda o=o, m=m: flip(c.gck, o, m))


USTAR_FIELDS = (("name", 0), ("name", 50), ("name", 99), ("mode", 100),
                ("mode", 106), ("uid", 108), ("gid", 116), ("size", 124),
                ("size", 130), ("size", 134), ("size", 135), ("mtime", 136),
                ("chksum", 148), ("chksum", 149), ("chksum", 150),
                ("chksum", 151), ("chksum", 152), ("chksum", 153),
                ("chksum", 154), ("chksum", 155), ("typeflag", 156),
                ("linkname", 157), ("magic", 257), ("magic", 262),
                ("version", 263), ("version", 264), ("uname", 265),
                ("gname", 297), ("devmajor", 329), ("devminor", 337),
                ("prefix", 345), ("prefix", 499), ("pad", 500), ("pad", 511))


def gen_tar_flips(c):
    tar = c.tar
    es = c.entries
    kinds = (("manifest", c.manifest), ("inventory", c.crius[0]),
             ("criu file", c.crius[len(c.crius) // 2]),
             ("part with holes", c.sparse[0]), ("last part", c.parts[-1]),
             ("trailer", c.sums))

    def add(cat, o, what, m=0xff):
        c.add(cat, "tar byte %d ^ %#x (%s)" % (o, m, what),
              lambda: flip(c.tar, o, m))

    for k, (kind, e) in enumerate(kinds):
        for field, at in USTAR_FIELDS[k % 2::1 + (k in (1, 2, 4))]:
            add("flip-tar-header", e.hdr + at,
                "%s of the ustar header of the %s" % (field, kind))
        if e.pax is None:
            continue
        for field, at in USTAR_FIELDS[k % 4::4]:
            add("flip-pax", e.pax + at,
                "%s of the pax header of the %s" % (field, kind))
        rec = tar[e.recs_at:e.recs_at + e.recs_len]
        for i in sorted({0, 2, 3, 20, len(rec) - 2, len(rec) - 1}):
            add("flip-pax", e.recs_at + i,
                "pax records of the %s, byte %d" % (kind, i))
    for e in c.sparse:
        rec = tar[e.recs_at:e.recs_at + e.recs_len]
        for key in ("GNU.sparse.major", "GNU.sparse.minor",
                    "GNU.sparse.name", "GNU.sparse.realsize"):
            v0 = e.recs[key][0]
            k0 = rec.find(key.encode())
            add("flip-pax", e.recs_at + k0 + 4, "key %s of %s" %
                (key, e.name), 0x01)
            add("flip-pax", e.recs_at + v0, "value %s of %s" % (key, e.name),
                0x01)
            add("flip-pax", e.recs_at + k0 - 2,
                "length of %s of %s" % (key, e.name), 0x01)
    # The digest of every entry, where a reader meets it: the per-part
    # checksums.
    for e in es:
        v0 = e.recs[DIGEST_KEY][0]
        for i, m in ((0, 0x01), (15, 0x40)) if e.name.startswith(
                "criu/pages-") or e in (c.manifest, c.sums) else \
                (((len(e.name) * 7) % 16, 0x01),):
            add("flip-digest", e.recs_at + v0 + i,
                "digest of %s, digit %d" % (e.name, i), m)
    # The manifest's JSON.
    m = c.manifest
    for o in spread(m.data, m.data + m.size, 36) + [m.data, m.data + 1,
                                                     m.data + m.size - 1]:
        add("flip-manifest", o, "manifest JSON byte %d" % (o - m.data))
    for o in spread(m.data, m.data + m.size, 12):
        add("flip-manifest", o, "manifest JSON byte %d" % (o - m.data), 0x01)
    # CRIU image data: each file, its first, middle and last byte.
    for e in c.crius:
        if e.sparse or e.name.startswith("criu/pages-"):
            continue
        for o in sorted({e.data, e.data + e.stored // 2,
                         e.data + e.stored - 1}):
            add("flip-criu", o, "data of %s, byte %d" % (e.name,
                                                          o - e.data))
    # The pages: maps of holes, stored data, every part.
    for e in c.crius:
        if not e.name.startswith("criu/pages-"):
            continue
        offs = spread(e.data, e.data + e.stored, 8) + [
            e.data, e.data + e.stored - 1]
        if e.sparse:
            offs += [e.data + 1, e.data + 2, e.data + 3, e.data + 6,
                     e.data + 10]
        for o in sorted(set(offs)):
            add("flip-pages", o, "page data of %s, byte %d" %
                (e.name, o - e.data))
    # The trailer: its JSON.
    s = c.sums
    for o in spread(s.data, s.data + s.size, 30) + [s.data,
                                                    s.data + s.size - 1]:
        add("flip-trailer", o, "trailer JSON byte %d" % (o - s.data))
    # Padding: after pax records, after data, the end of the archive.
    for e in es[::3] + [c.sums, c.manifest]:
        if e.pax is not None:
            add("flip-padding", e.recs_at + e.recs_len,
                "padding after the pax records of %s" % e.name)
            add("flip-padding", e.hdr - 1,
                "last padding byte of the pax records of %s" % e.name)
        if e.stored % BLOCK:
            add("flip-padding", e.data + e.stored,
                "padding after the data of %s" % e.name)
            add("flip-padding", e.end - 1,
                "last padding byte after the data of %s" % e.name)
    for o in (c.tar_end, c.tar_end + 100, c.tar_end + 511, c.tar_end + 512,
              c.tar_end + 1023, c.tar_end + 1024, len(tar) - 1,
              (c.tar_end + len(tar)) // 2):
        if o < len(tar):
            add("flip-padding", o, "end of archive, byte %d" %
                (o - c.tar_end))


def gen_order(c):
    es = c.entries
    crius = c.crius
    names = [e.name.replace("criu/", "") for e in es]
    for i, e in enumerate(es):
        rest = es[:i] + es[i + 1:]
        c.add("order", "entry %s left out" % names[i],
              lambda rest=rest: c.image(rest, sums=False))
        if 0 < i < len(es) - 1:
            body = es[:i] + es[i + 1:-1]
            c.add("order", "entry %s left out, trailer made again" %
                  names[i], lambda body=body: c.image(body))
    for i, e in enumerate(es):
        ents = es[:i + 1] + [e] + es[i + 1:]
        c.add("order", "entry %s twice" % names[i],
              lambda ents=ents: c.image(ents, sums=False))
        if i < len(es) - 1:
            body = es[:i + 1] + [e] + es[i + 1:-1]
            c.add("order", "entry %s twice, trailer made again" % names[i],
                  lambda body=body: c.image(body))
    for i in range(len(es) - 1):
        ents = list(es)
        ents[i], ents[i + 1] = ents[i + 1], ents[i]
        c.add("order", "entries %s and %s swapped" % (names[i],
                                                        names[i + 1]),
              lambda ents=ents: c.image(ents, sums=False))
    # Swaps that break the rules of the order even with a true trailer:
    # inventory.img first, the memory last, parts in order.
    memory = [e for e in crius if e.name.startswith("criu/pages-")]
    other = [e for e in crius if e not in memory]
    for a, b in ((other[0], other[1]), (other[-1], memory[0]),
                 (memory[0], memory[1]), (memory[1], memory[2])):
        body = list(crius)
        ia, ib = body.index(a), body.index(b)
        body[ia], body[ib] = body[ib], body[ia]
        c.add("order", "entries %s and %s swapped, trailer made again" %
              (a.name, b.name), lambda body=body: c.image([c.manifest] +
                                                         body))
    body = other[:2] + memory + other[2:]
    c.add("order", "memory before the other files, trailer made again",
          lambda: c.image([c.manifest] + body))
    c.add("order", "entries reversed",
          lambda: c.image(es[::-1], sums=False))
    c.add("order", "trailer first", lambda: c.image([c.sums] + es[:-1],
                                                    sums=False))
    c.add("order", "manifest last", lambda: c.image(es[1:] + [c.manifest],
                                                    sums=False))
    c.add("order", "manifest after inventory",
          lambda: c.image([es[1], es[0]] + es[2:-1]))
    c.add("order", "trailer in the middle",
          lambda: c.image(es[:5] + [c.sums] + es[5:-1], sums=False))
    c.add("order", "the image twice", lambda: c.image(es + es, sums=False))
    c.add("order", "the image's entries twice, one trailer",
          lambda: c.image(es[:-1] + es[1:-1]))
    c.add("order", "the CRIU files only, trailer made again",
          lambda: c.image(crius))
    c.add("order", "the manifest alone, trailer made again",
          lambda: c.image([c.manifest]))
    c.add("order", "the manifest alone, no trailer",
          lambda: c.image([c.manifest], sums=False))
    # Parts: renamed, renumbered, with another file's name.
    p0, p1 = c.parts[0], c.parts[1]
    base = p0.name[:-len(".part00000")]
    for new0, new1, what in (
            (".part00001", ".part00000", "parts renumbered"),
            (".part00000", ".part00002", "a part number skipped"),
            (".part00001", ".part00002", "no part 0"),
            (".part00000", ".part00000", "part 0 twice"),
            ("", ".part00001", "part 0 without its suffix"),
            (".part00000", "", "last part without its suffix"),
            (".part0000", ".part0001", "four-digit part numbers"),
            (".part000000", ".part000001", "six-digit part numbers"),
            (".part-0001", ".part00001", "a negative part number"),
            (".part 0000", ".part00001", "a space in a part number"),
            (".part0000x", ".part00001", "a letter in a part number")):
        def mk(new0=new0, new1=new1):
            a = retag(c.tar, p0, base + new0)
            b = retag(c.tar, p1, base + new1)
            body = [e if e not in (p0, p1) else (a if e is p0 else b)
                    for e in es[:-1]]
            return c.image(body)
        c.add("order", what + ", trailer made again", mk)


def retag(tar, e, name):
    """Entry e, renamed name, with its digest kept: raw bytes."""
    recs = {}
    text = tar[e.recs_at:e.recs_at + e.recs_len]
    for m in re.finditer(rb"(\d+) ([^=]+)=", text):
        k = m.group(2).decode()
        v = text[m.end():m.start() + int(m.group(1)) - 1]
        recs[k] = v
    if e.sparse:
        recs["GNU.sparse.name"] = name.encode()
        tname = "criu/GNUSparseFile.0/" + name.split("/")[-1]
    else:
        tname = name
    h = ustar(tname, e.stored)
    return pax(b"".join(record(k, v) for k, v in recs.items()),
               b"criu/PaxHeader/" + name.split("/")[-1].encode()) + \
        h + tar[e.data:e.end]


def gen_evil(c):
    """Evil tar headers, each with a true digest, after the manifest
    (and as the first entry), with a trailer that lists them."""
    t = c.trash
    m = c.manifest
    es = c.entries
    evil_abs = "/tmp/gck-evil-%s"
    evil_trash = t + "/evil-%s"
    cases = []

    def ev(name, e, expect=None):
        cases.append((name, e, expect))

    d = b"evil\n"
    for tag, path in (
            ("abs-tmp", evil_abs % "abs"),
            ("abs-trash", evil_trash % "abs"),
            ("abs-criu", "/criu/inventory.img"),
            ("abs-dot", "/./tmp/gck-evil-absdot"),
            ("dotdot", "criu/../../../../../../../../tmp/gck-evil-dotdot"),
            ("dotdot-trash", "criu/" + "../" * 3 + "evil-dotdot"),
            ("dotdot-lead", "../gck-evil-lead"),
            ("dotdot-only", ".."),
            ("dotdot-tail", "criu/.."),
            ("dotdot-mid", "criu/../gpuckpt.json"),
            ("dot", "criu/./inventory.img"),
            ("dot-lead", "./gpuckpt.sums"),
            ("slashes", "criu//inventory.img"),
            ("trailing-slash", "criu/inventory.img/"),
            ("criu-dir", "criu/"),
            ("criu-bare", "criu"),
            ("nested", "criu/sub/inventory.img"),
            ("hidden", "criu/.hidden"),
            ("other-dir", "crio/inventory.img"),
            ("upper", "CRIU/inventory.img"),
            ("nul", "criu/inv\0entory.img"),
            ("newline", "criu/inv\nentory.img"),
            ("control", "criu/in\x1b[2Jv\r.img"),
            ("utf8", "criu/inv\u00e9ntory.img"),
            ("latin1", b"criu/inv\xe9ntory.img"),
            ("space", "criu/inventory .img"),
            ("backslash", "criu\\..\\..\\gck-evil-bs"),
            ("long-100", "criu/" + "n" * 95),
            ("long-255", "criu/" + "n" * 250),
            ("long-5000", "criu/" + "n" * 5000),
            ("long-100000", "criu/" + "n" * 100000),
            ("deep", "criu/" + "a/" * 2000 + "x.img"),
            ("long-abs", "/" + "p" * 250 + "/" + "q" * 4000)):
        if isinstance(path, str):
            path = path.encode("utf-8")
        # The name in a pax path record (ustar holds a benign one), and,
        # where it fits, in the ustar header alone.
        ev("pax path " + tag, pax({"path": path, DIGEST_KEY: xxh3(d)},
                                  b"PaxHeader/evil") +
           ustar("criu/evil.img", len(d)) + pad(d))
        if len(path) <= 100 and b"\0" not in path:
            ev("ustar name " + tag, entry(path, d))
        if len(path) <= 255 and b"/" in path[:155] and b"\0" not in path:
            cut = path[:155].rfind(b"/")
            if 0 < cut and len(path) - cut - 1 <= 100:
                ev("ustar prefix " + tag,
                   pax({DIGEST_KEY: xxh3(d)}) +
                   ustar(path[cut + 1:], len(d), prefix=path[:cut]) + pad(d))
    for tag, target in (("abs", evil_abs % "symlink"),
                        ("trash", evil_trash % "symlink"),
                        ("dotdot", "../../../../tmp/gck-evil-symlink"),
                        ("sibling", "inventory.img"),
                        ("etc", "/etc/passwd")):
        ev("symlink to " + tag, entry("criu/inventory.img", b"", typ=b"2",
                                      linkname=target))
        ev("hard link to " + tag, entry("criu/inventory.img", b"",
                                        typ=b"1", linkname=target))
        ev("pax linkpath symlink to " + tag,
           pax({"linkpath": target, DIGEST_KEY: xxh3(b"")}) +
           ustar("criu/inventory.img", 0, typ=b"2"))
    # A symlink, then a file written through it.
    ev("file through a symlink",
       entry("criu/x", b"", typ=b"2", linkname="/tmp") +
       entry("criu/x/gck-evil-through", d))
    ev("hard link with data", entry("criu/inventory.img", d, typ=b"1",
                                    linkname="gpuckpt.json", size=len(d)))
    for tag, typ, kw in (
            ("char device", b"3", {"devmajor": 1, "devminor": 3}),
            ("block device", b"4", {"devmajor": 7, "devminor": 0}),
            ("fifo", b"6", {}),
            ("directory", b"5", {}),
            ("contiguous file", b"7", {}),
            ("GNU dumpdir", b"D", {}),
            ("GNU volume label", b"V", {}),
            ("GNU multi-volume", b"M", {}),
            ("GNU old sparse", b"S", {}),
            ("Solaris ACL", b"A", {}),
            ("unknown type Z", b"Z", {}),
            ("type NUL byte 0x01", b"\x01", {})):
        ev(tag, entry("criu/inventory.img", b"", typ=typ, **kw))
        ev(tag + " named " + evil_abs % "dev",
           entry(evil_abs % typ.hex(), b"", typ=typ, **kw))
    # GNU long names and links, global headers, a pax header on its own.
    ln = (evil_abs % "longname").encode() + b"\0"
    ev("GNU long name", ustar("././@LongLink", len(ln), b"L") + pad(ln) +
       entry("criu/short.img", d))
    ln = b"criu/" + b"n" * 3000 + b"\0"
    ev("GNU long name 3000", ustar("././@LongLink", len(ln), b"L") +
       pad(ln) + entry("criu/short.img", d))
    ev("GNU long link", ustar("././@LongLink", len(ln), b"K") + pad(ln) +
       entry("criu/inventory.img", b"", typ=b"2", linkname="x"))
    ev("pax global header", pax({"path": evil_abs % "global"},
                                b"GlobalHead", b"g") + entry("criu/a.img", d))
    ev("two pax headers", pax({"path": evil_abs % "twopax"}) +
       entry("criu/a.img", d))
    ev("pax header then end", pax({DIGEST_KEY: xxh3(d)}))
    ev("pax record with no '='", pax(b"20 nothing-to-see\n" +
                                     record(DIGEST_KEY, xxh3(d))) +
       ustar("criu/a.img", len(d)) + pad(d))
    ev("pax record length too long", pax(b"99 path=/tmp/gck-evil-len\n" +
                                         record(DIGEST_KEY, xxh3(d))) +
       ustar("criu/a.img", len(d)) + pad(d))
    ev("pax record length zero", pax(b"0 path=x\n" +
                                     record(DIGEST_KEY, xxh3(d))) +
       ustar("criu/a.img", len(d)) + pad(d))
    ev("pax record length huge", pax(b"99999999999999999999 path=x\n") +
       ustar("criu/a.img", len(d)) + pad(d))
    ev("pax records not ended", pax(b"30 path=criu/a.img") +
       ustar("criu/a.img", len(d)) + pad(d))
    ev("pax digest twice, the second false",
       pax(record(DIGEST_KEY, xxh3(d)) + record(DIGEST_KEY, "0" * 16)) +
       ustar("criu/a.img", len(d)) + pad(d))
    ev("pax digest of 15 digits", entry("criu/a.img", d,
                                        digest=xxh3(d)[1:]))
    ev("pax digest of 17 digits", entry("criu/a.img", d,
                                        digest=xxh3(d) + "0"))
    ev("pax digest upper case", entry("criu/a.img", d,
                                      digest=xxh3(d).upper()))
    ev("pax digest with a sign", entry("criu/a.img", d,
                                       digest="-" + xxh3(d)[1:]))
    ev("pax digest with spaces", entry("criu/a.img", d,
                                       digest=" " + xxh3(d)[1:]))
    ev("pax digest 0x", entry("criu/a.img", d, digest="0x" + xxh3(d)[2:]))
    ev("no digest", entry("criu/a.img", d, digest=False))
    ev("no pax header", ustar("criu/a.img", len(d)) + pad(d))
    ev("pax extra xattr", pax({"SCHILY.xattr.security.capability": "x",
                               DIGEST_KEY: xxh3(d)}) +
       ustar("criu/a.img", len(d)) + pad(d))
    ev("pax uid huge", pax({"uid": "9" * 40, DIGEST_KEY: xxh3(d)}) +
       ustar("criu/a.img", len(d)) + pad(d))
    ev("pax mtime junk", pax({"mtime": "soon", DIGEST_KEY: xxh3(d)}) +
       ustar("criu/a.img", len(d)) + pad(d))
    # Sizes: huge, negative, disagreeing, in base 256.
    for tag, rec, field in (
            ("pax size 1 TiB", str(1 << 40), None),
            ("pax size 2^63-1", str((1 << 63) - 1), None),
            ("pax size 2^64", str(1 << 64), None),
            ("pax size negative", "-1", None),
            ("pax size empty", "", None),
            ("pax size hex", "0x10", None),
            ("pax size with junk", "5junk", None),
            ("pax size 30 digits", "9" * 30, None),
            ("ustar size 8 GiB-1", None, octal((8 << 30) - 1, 12)),
            ("ustar size all 7s", None, b"77777777777\0"),
            ("ustar size base 256 huge", None,
             b"\x80" + (1 << 50).to_bytes(11, "big")),
            ("ustar size base 256 negative", None, b"\xff" * 12),
            ("ustar size not octal", None, b"0000000009a\0"),
            ("ustar size spaces", None, b" " * 12),
            ("ustar size larger", None, octal(len(d) + 4096, 12)),
            ("ustar size smaller", None, octal(1, 12)),
            ("ustar size zero", None, octal(0, 12))):
        recs = {DIGEST_KEY: xxh3(d)}
        if rec is not None:
            recs["size"] = rec
        ev("%s, short data" % tag, pax(recs) +
           ustar("criu/pages-1.img", len(d), size_field=field) + pad(d))
    # GNU sparse tricks.
    for tag, recs, stored in (
            ("realsize 1 TiB", {"GNU.sparse.realsize": str(1 << 40)},
             b"1\n0\n5\n"),
            ("realsize negative", {"GNU.sparse.realsize": "-5"},
             b"1\n0\n5\n"),
            ("name absolute", {"GNU.sparse.name": evil_abs % "sparse"},
             b"1\n0\n5\n"),
            ("name dotdot", {"GNU.sparse.name":
                             "criu/../../gck-evil-sparse"}, b"1\n0\n5\n"),
            ("name of the trailer", {"GNU.sparse.name": "gpuckpt.sums"},
             b"1\n0\n5\n"),
            ("name empty", {"GNU.sparse.name": ""}, b"1\n0\n5\n"),
            ("map count 2^64-1", {}, b"18446744073709551615\n0\n5\n"),
            ("map count 2^40", {}, b"1099511627776\n0\n5\n"),
            ("map count zero", {}, b"0\n"),
            ("map offset beyond", {}, b"1\n99999999999\n5\n"),
            ("map length huge", {}, b"1\n0\n99999999999999\n"),
            ("map regions overlap", {}, b"2\n0\n5\n2\n5\n"),
            ("map regions out of order", {}, b"2\n4096\n5\n0\n5\n"),
            ("map not a number", {}, b"1\nzero\n5\n"),
            ("map negative", {}, b"1\n-4096\n5\n"),
            ("map unterminated", {}, b"1\n0\n5"),
            ("map lines missing", {}, b"3\n0\n5\n")):
        r = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0",
             "GNU.sparse.name": "criu/pages-1.img",
             "GNU.sparse.realsize": "8192"}
        r.update(recs)
        body = pad(stored) + d
        r[DIGEST_KEY] = xxh3(d + struct.pack("<QQQ", 0, 5, 8192))
        ev("GNU.sparse " + tag, pax(r) +
           ustar("criu/GNUSparseFile.0/pages-1.img", len(body)) + pad(body))
    for tag, recs in (
            ("sparse 0.0 offsets", {"GNU.sparse.size": "8192",
                                    "GNU.sparse.numblocks": "1",
                                    "GNU.sparse.offset": "0",
                                    "GNU.sparse.numbytes": "5"}),
            ("sparse 0.0 numblocks huge", {"GNU.sparse.size": "8192",
                                           "GNU.sparse.numblocks":
                                           "99999999999",
                                           "GNU.sparse.offset": "0",
                                           "GNU.sparse.numbytes": "5"}),
            ("sparse 0.1 map", {"GNU.sparse.size": "8192",
                                "GNU.sparse.numblocks": "1",
                                "GNU.sparse.map": "0,5"}),
            ("sparse 0.1 map huge", {"GNU.sparse.size": str(1 << 50),
                                     "GNU.sparse.numblocks": "2",
                                     "GNU.sparse.map":
                                     "0,5,%d,5" % ((1 << 50) - 5)}),
            ("sparse 0.1 map odd", {"GNU.sparse.size": "8192",
                                    "GNU.sparse.numblocks": "2",
                                    "GNU.sparse.map": "0,5,7"}),
            ("sparse major 2", {"GNU.sparse.major": "2",
                                "GNU.sparse.minor": "0",
                                "GNU.sparse.name": "criu/pages-1.img",
                                "GNU.sparse.realsize": "8192"}),
            ("sparse name on a plain entry", {"GNU.sparse.name":
                                              evil_abs % "sparsename"})):
        r = dict(recs)
        r[DIGEST_KEY] = xxh3(d)
        ev("GNU." + tag, pax(r) + ustar("criu/pages-1.img", len(d)) + pad(d))
    # Entries the trailer does not expect after a sound image.
    ev("zero-size entry", entry("criu/empty.img", b""))
    # Put each case after the manifest and the real CRIU files before
    # the pages, with a trailer listing what parsed; and as first entry.
    # Each after the manifest, or after the last CRIU file before the
    # memory, or among the memory (where criu already restores), with
    # a trailer that lists the real entries; some as the first entry.
    split = c.crius.index(c.parts[0])
    for k, (name, raw, expect) in enumerate(cases):
        if k % 3 == 0:
            c.add("evil-headers", name + ", after the manifest",
                  lambda raw=raw: finish(c.manifest.raw + raw +
                                         c.trailer([c.manifest])))
        else:
            at = split if k % 3 == 1 else split + 1
            c.add("evil-headers", name + (", before the memory"
                                          if k % 3 == 1 else
                                          ", among the memory"),
                  lambda raw=raw, at=at: finish(b"".join(
                      e.raw for e in es[:at + 1]) + raw + b"".join(
                      e.raw for e in es[at + 1:-1]) + c.trailer(es[:-1])))
        if k % 4 == 0:
            c.add("evil-headers", name + ", first",
                  lambda raw=raw: finish(raw + c.manifest.raw))
    # The manifest, the trailer with evil headers of their own.
    mt = c.tar[m.data:m.data + m.size]
    for tag, raw in (
            ("manifest as a symlink", entry("gpuckpt.json", b"", typ=b"2",
                                            linkname="/etc/passwd")),
            ("manifest as a directory", entry("gpuckpt.json", b"",
                                              typ=b"5")),
            ("manifest as a fifo", entry("gpuckpt.json", b"", typ=b"6")),
            ("manifest path absolute", pax({"path": "/gpuckpt.json",
                                            DIGEST_KEY: xxh3(mt)}) +
             ustar("gpuckpt.json", len(mt)) + pad(mt)),
            ("manifest as ./gpuckpt.json", entry("./gpuckpt.json", mt)),
            ("manifest with holes", pax({
                "GNU.sparse.major": "1", "GNU.sparse.minor": "0",
                "GNU.sparse.name": "gpuckpt.json",
                "GNU.sparse.realsize": str(len(mt)),
                DIGEST_KEY: xxh3(mt + struct.pack("<QQQ", 0, len(mt),
                                                  len(mt)))}) +
             ustar("GNUSparseFile.0/gpuckpt.json",
                   BLOCK + len(mt)) +
             pad(pad(b"1\n0\n%d\n" % len(mt)) + mt)),
            ("manifest size 1 TiB", pax({"size": str(1 << 40),
                                         DIGEST_KEY: xxh3(mt)}) +
             ustar("gpuckpt.json", len(mt)) + pad(mt)),
            ("manifest hard link", entry("gpuckpt.json", b"", typ=b"1",
                                         linkname="criu/inventory.img"))):
        c.add("evil-headers", tag, lambda raw=raw: c.image(
            [raw] + es[1:-1], sums=False))
    st = c.tar[c.sums.data:c.sums.data + c.sums.size]
    for tag, raw in (
            ("trailer as a symlink", entry("gpuckpt.sums", b"", typ=b"2",
                                           linkname="/etc/passwd")),
            ("trailer as a directory", entry("gpuckpt.sums", b"", typ=b"5")),
            ("trailer path absolute", pax({"path": "/gpuckpt.sums",
                                           DIGEST_KEY: xxh3(st)}) +
             ustar("gpuckpt.sums", len(st)) + pad(st)),
            ("trailer size 1 TiB", pax({"size": str(1 << 40),
                                        DIGEST_KEY: xxh3(st)}) +
             ustar("gpuckpt.sums", len(st)) + pad(st)),
            ("trailer hard link", entry("gpuckpt.sums", b"", typ=b"1",
                                        linkname="gpuckpt.json"))):
        c.add("evil-headers", tag, lambda raw=raw: c.image(es[:-1],
                                                          sums=raw))


def gen_bombs(c):
    """Small streams that expand to a lot, or declare a lot."""
    es = c.entries
    head = c.manifest.raw
    G = 1 << 30
    c.add("bombs", "4 GiB of zeros in a small zstd frame",
          zframe(rle_blocks(b"\0", 4 * G)))
    c.add("bombs", "4 GiB of 'A' in a small zstd frame",
          zframe(rle_blocks(b"A", 4 * G)))
    c.add("bombs", "the manifest, then 4 GiB of zeros",
          zframe(raw_blocks(head) + rle_blocks(b"\0", 4 * G)))
    c.add("bombs", "the manifest, then 4 GiB of 0xff",
          zframe(raw_blocks(head) + rle_blocks(b"\xff", 4 * G)))
    img = c.tar[:c.tar_end]
    c.add("bombs", "the whole image, then 4 GiB of zeros",
          zframe(raw_blocks(img) + rle_blocks(b"\0", 4 * G)))
    c.add("bombs", "the whole image, then 4 GiB of 'x'",
          zframe(raw_blocks(img) + rle_blocks(b"x", 4 * G)))
    c.add("bombs", "16 TiB declared as the frame's content size",
          zframe(raw_blocks(img), fcs=16 << 40))
    c.add("bombs", "a frame asking for a 2 GiB window",
          zframe(raw_blocks(img) + rle_blocks(b"\0", G), window_log=31))
    c.add("bombs", "a frame asking for a 1 GiB window",
          zframe(raw_blocks(img) + rle_blocks(b"\0", G), window_log=30))
    c.add("bombs", "a frame asking for a 128 MiB window, then 2 GiB",
          zframe(raw_blocks(head) + rle_blocks(b"\x01", 2 * G),
                 window_log=27))
    # Entries that declare the most the format allows, or far more,
    # and whose data is one byte repeated.
    for name, size, limit in (("gpuckpt.json", 16 << 20, True),
                              ("gpuckpt.json", 4 * G, False),
                              ("criu/inventory.img", 64 << 20, True),
                              ("criu/core-1.img", 4 * G, False),
                              ("criu/pages-1.img", 64 << 20, True),
                              ("criu/pages-1.img", 64 * G, False)):
        h = pax({DIGEST_KEY: "0123456789abcdef", "size": str(size)}) + \
            ustar(name, min(size, 8 * G - 1))
        lead = b"" if name == "gpuckpt.json" else head
        c.add("bombs", "%s declaring %d bytes, compressed to nothing%s" %
              (name, size, "" if limit else ", over the limit"),
              zframe(raw_blocks(lead + h) + rle_blocks(b" ", size + 2048)))
        c.add("bombs", "%s declaring %d bytes, with 64 KiB of data" %
              (name, size), finish(lead + h + b" " * 65536))
    c.add("bombs", "a 1 GiB pax header compressed to nothing",
          zframe(raw_blocks(head + ustar("PaxHeader/x", G, b"x")) +
                 rle_blocks(b"a", G + 4096)))
    c.add("bombs", "a 1 GiB GNU long name compressed to nothing",
          zframe(raw_blocks(head + ustar("././@LongLink", G, b"L")) +
                 rle_blocks(b"a", G + 4096)))
    c.add("bombs", "a 1 GiB pax header, 64 KiB of it",
          finish(head + ustar("PaxHeader/x", G, b"x") + b"9" * 65536))
    c.add("bombs", "a 16 MiB manifest of blanks with a true digest",
          lambda: zstd(finish(entry("gpuckpt.json", b" " * (16 << 20) +
                                    b"{}"))))
    c.add("bombs", "a manifest of 16 MiB of nested arrays",
          lambda: zstd(finish(entry("gpuckpt.json", b"[" * (8 << 20) +
                                    b"]" * (8 << 20)))))
    # A tree of holes: 64 MiB declared, one byte stored.
    r = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0",
         "GNU.sparse.name": "criu/pages-1.img",
         "GNU.sparse.realsize": str(64 << 20)}
    body = pad(b"1\n%d\n1\n" % ((64 << 20) - 1)) + b"x"
    r[DIGEST_KEY] = "0123456789abcdef"
    c.add("bombs", "a 64 MiB entry of holes with a false digest",
          finish(b"".join(e.raw for e in es[:-4]) + pax(r) +
                 ustar("criu/GNUSparseFile.0/pages-1.img", len(body)) +
                 pad(body)))
    # More entries than the format allows, each empty.
    empty = xxh3(b"")

    def many(n):
        e0 = pax({DIGEST_KEY: empty})
        h = bytearray(ustar("criu/f0000000.img", 0))
        chk = int(h[148:154], 8) - sum(b"0000000")
        parts = [head]
        for i in range(n):
            d = b"%07d" % i
            h[6:13] = d
            h[148:154] = b"%06o" % (chk + sum(d))
            parts.append(e0)
            parts.append(bytes(h))
        return zstd(finish(b"".join(parts)), "-1")
    c.add("bombs", "70000 empty CRIU files", lambda: many(70000))


def gen_tail(c):
    """What comes after the trailer, and streams that are no image."""
    es = c.entries
    img = finish(b"".join(e.raw for e in es))
    junk = (b"not a tar header\n" * 32)[:512]
    c.add("tail", "the trailer twice", lambda: finish(b"".join(
        e.raw for e in es) + c.sums.raw))
    c.add("tail", "a header of junk after the trailer", lambda: finish(
        b"".join(e.raw for e in es) + junk))
    c.add("tail", "an entry after the trailer", lambda: finish(b"".join(
        e.raw for e in es) + entry("criu/extra.img", b"evil\n")))
    # (Whole records of zeros after the end are a tar writer's padding,
    # which a reader takes.)
    for n in (1, 511, 512, 1000, 10240, 70000):
        c.add("tail", "%d bytes of junk after the end" % n,
              lambda n=n: img + (junk * (n // 512 + 1))[:n])
        if n % RECORD:
            c.add("tail", "%d zero bytes after the end" % n,
                  lambda n=n: img + bytes(n))
    z = zstd(img)
    c.add("tail", "junk after the zstd frame", z + b"garbage\n")
    c.add("tail", "a second zstd frame", z + zstd(b"garbage\n"))
    c.add("tail", "the zstd frame twice", z + z)
    c.add("tail", "a skippable frame after the zstd frame",
          z + b"\x50\x2a\x4d\x18" + struct.pack("<I", 4) + b"evil")
    c.add("tail", "a skippable frame before the zstd frame",
          b"\x50\x2a\x4d\x18" + struct.pack("<I", 4) + b"evil" + z)
    c.add("tail", "the image in two zstd frames",
          zstd(img[:len(img) // 2]) + zstd(img[len(img) // 2:]))
    c.add("tail", "a zstd frame without its checksum",
          zstd(img, "--no-check"))
    # Streams that are no image, which must not be taken for images cut
    # short or damaged.
    noimg = r"^gpurestore: not a gpuckpt image: "
    c.add("tail", "a tar that is not an image", finish(
        entry("hello.txt", b"hello\n")), noimg + "first entry is ")
    rnd = random.Random(9)
    for n in (1, 4, 100, 512, 1024, 100000):
        b = bytes(rnd.randrange(256) for _ in range(n))
        c.add("tail", "%d random bytes" % n, b,
              None if b[:1] in b"(P.g" else noimg)
        c.add("tail", "%d random bytes after the zstd magic" % n,
              ZSTD_MAGIC + bytes(rnd.randrange(256) for _ in range(n)))
    c.add("tail", "a zstd stream of random bytes", lambda: zstd(bytes(
        random.Random(10).randrange(256) for _ in range(100000))), noimg)
    c.add("tail", "a zstd stream of a text", zstd(b"hello\n"), noimg +
          "no tar header for 'gpuckpt.json' at the start of the zstd "
          "stream$")
    c.add("tail", "a text", b"hello\n", noimg +
          "no tar header for 'gpuckpt.json' at the start$")
    c.add("tail", "an empty zstd frame", zstd(b""),
          noimg + "the zstd stream is empty$")
    c.add("tail", "only the end-of-archive blocks", bytes(RECORD), noimg)


def gen_versions(c):
    """Manifests and trailers of other format versions, with true
    digests and a true trailer, so that only the version is wrong."""
    es = c.entries
    m = c.manifest
    text = c.tar[m.data:m.data + m.size].decode()
    if not re.search(r'"format"\s*:\s*1\b', text):
        sys.exit("hostile.py: no format 1 in the manifest")
    for tag, value in (("0", "0"), ("2", "2"), ("3", "3"), ("-1", "-1"),
                       ("1000", "1000"), ("2^31", str(1 << 31)),
                       ("2^63-1", str((1 << 63) - 1)),
                       ("2^64", str(1 << 64)), ("-2^63", str(-(1 << 63))),
                       ("\"1\"", '"1"'), ("\"2\"", '"2"'), ("1.0", "1.0"),
                       ("1e0", "1e0"), ("1.5", "1.5"), ("true", "true"),
                       ("false", "false"), ("null", "null"), ("[1]", "[1]"),
                       ("{}", '{"major": 1}'), ("\"\"", '""')):
        new = re.sub(r'("format"\s*:\s*)1\b', lambda mm: mm.group(1) + value,
                     text, count=1)
        for z in (False, True):
            def mk(new=new, z=z):
                me = entry("gpuckpt.json", new.encode())
                b = c.image([me] + es[1:-1])
                return zstd(b) if z else b
            c.add("versions", "manifest format %s%s" %
                  (tag, ", compressed" if z else ""), mk)
    for tag, new in (("missing", re.sub(r'"format"\s*:\s*1\s*,\s*', "",
                                        text, count=1)),
                     ("twice", re.sub(r'("format"\s*:\s*1\s*,)',
                                      r"\1 \1", text, count=1)),
                     ("twice, then 2", re.sub(r'("format"\s*:\s*1\s*,)',
                                              r'\1 "format": 2,', text,
                                              count=1)),
                     ("nested", re.sub(r'"format"\s*:\s*1\b',
                                       '"format": {"format": 1}', text,
                                       count=1)),
                     ("key in upper case", text.replace('"format"',
                                                        '"Format"', 1))):
        for z in (False, True):
            def mk(new=new, z=z):
                b = c.image([entry("gpuckpt.json", new.encode())] +
                            es[1:-1])
                return zstd(b) if z else b
            c.add("versions", "manifest format %s%s" %
                  (tag, ", compressed" if z else ""), mk)
    for tag, value in (("0", 0), ("2", 2), ("-1", -1), ("\"1\"", "1"),
                       ("1.0", 1.0), ("null", None), ("true", True),
                       ("missing", KeyError)):
        def mut(t, value=value):
            if value is KeyError:
                del t["format"]
            else:
                t["format"] = value
        for z in (False, True):
            def mk(mut=mut, z=z):
                b = c.image(es[:-1], sums=c.trailer(es[:-1], mutate=mut))
                return zstd(b) if z else b
            c.add("versions", "trailer format %s%s" %
                  (tag, ", compressed" if z else ""), mk)


# --------------------------------------------------------------- sockets
#
# Streams whose every digest and trailer are true, but whose CRIU records
# of a TCP or UDP socket lie, or ask for what this host cannot give: the
# image with one inet socket more, a file_entry of type INETSK carrying
# its inet_sk_entry in criu/files.img (packed here by hand, as criu packs
# it: proto2, repeated fields unpacked) and a descriptor, fd 200, that
# names it in the root's descriptor table (the fdinfo-N.img that its
# ids-PID.img names), so that gpurestore's check before criu restores,
# criu itself, and gpuinspect's summary and --check all meet it.  The
# manifest lists the two files at their new sizes.

FD_REG, FD_INETSK = 1, 4	# CRIU's fd_types
TCP_ESTABLISHED, TCP_LISTEN = 1, 10
SK_FD = 200
SK_NOADDR = "192.0.2.77"	# TEST-NET-1: no host's address
SK_MEMBERS = ("family", "socket_type", "protocol", "state", "address",
              "peer_address", "peer")


def pb_varint(v):
    b = bytearray()
    while True:
        c, v = v & 0x7f, v >> 7
        if not v:
            b.append(c)
            return bytes(b)
        b.append(c | 0x80)


def pb_int(field, v):
    return pb_varint(field << 3) + pb_varint(v)


def pb_len(field, b):
    return pb_varint(field << 3 | 2) + pb_varint(len(b)) + b


def criu_records(data):
    """A CRIU image's header (its two magics) and its records."""
    pos, recs = 8, []
    while pos < len(data):
        n, = struct.unpack_from("<I", data, pos)
        recs.append(data[pos + 4:pos + 4 + n])
        pos += 4 + n
    return data[:8], recs


def criu_image(head, recs):
    return head + b"".join(struct.pack("<I", len(r)) + r for r in recs)


def addr_words(a):
    """An address as criu keeps it, its bytes in 32-bit words of this
    host's order: a (IPv4 or IPv6) in words, or a list of words."""
    if not isinstance(a, str):
        return list(a)
    b = socket.inet_pton(socket.AF_INET6 if ":" in a else socket.AF_INET, a)
    return list(struct.unpack("<%dI" % (len(b) // 4), b))


def inet_sk(sid, ns_id, family=socket.AF_INET, typ=socket.SOCK_STREAM,
            proto=socket.IPPROTO_TCP, state=TCP_LISTEN, src="127.0.0.1",
            sport=40200, dst="0.0.0.0", dport=0, packed=False):
    """An inet_sk_entry, every required field there."""
    b = b"".join(pb_int(k, v) for k, v in (
        (1, sid), (2, 0x7e57 + sid), (3, family), (4, typ), (5, proto),
        (6, state), (7, sport), (8, dport), (9, os.O_RDWR),
        (10, 128 if state == TCP_LISTEN else 0)))
    for k, a in ((11, src), (12, dst)):
        ws = addr_words(a)
        if packed:
            b += pb_len(k, b"".join(pb_varint(w) for w in ws))
        else:
            b += b"".join(pb_int(k, w) for w in ws)
    fown = b"".join(pb_int(k, 0) for k in range(1, 6))
    opts = pb_int(1, 16384) + pb_int(2, 131072) + b"".join(
        pb_int(k, 0) for k in range(3, 7))
    b += pb_len(13, fown) + pb_len(14, opts)
    if family == socket.AF_INET6:
        b += pb_int(15, 0)
    return b + pb_int(18, ns_id)


def host_lacks(a):
    """Whether this host lacks IPv4 address a: a bind() to it says so."""
    with socket.socket() as s:
        try:
            s.bind((a, 0))
        except OSError as e:
            return e.errno == errno.EADDRNOTAVAIL
    return False


def gen_sockets(c, port):
    """The image with one inet socket more, on fd 200 of its root, whose
    record lies (refused as a corrupt image), or needs a port taken here
    (port: one that a process of the test listens on, at 127.0.0.1) or
    an address this host lacks, or is not there; gpuinspect's summary
    must say "unknown" of what a record cannot tell, and --check fail
    with the words of gpurestore's check."""
    es = c.entries
    root = c.mjson["root_pid"]
    by = {e.name: e for e in es}

    def data(e):
        return c.tar[e.data:e.data + e.size]
    fimg = by["criu/files.img"]
    ids = criuimg.fields(criu_records(data(by["criu/ids-%d.img" % root]))[1][0])
    files_id, netns = ids[2][0], ids[6][0]
    dimg = by["criu/fdinfo-%d.img" % files_id]
    fhead, frecs = criu_records(data(fimg))
    dhead, drecs = criu_records(data(dimg))
    files = [criuimg.fields(r) for r in frecs]
    sid = max(f[2][0] for f in files) + 1
    reg = min(f[2][0] for f in files if f[1][0] == FD_REG)
    text = c.tar[c.manifest.data:c.manifest.data + c.manifest.size]

    def stream(isk=None, fe=(), fd_type=FD_INETSK, fd_id=sid,
               options=None, z=False):
        """isk: the socket's record (fe: whole file_entries instead;
        neither: none), on a descriptor of fd_type naming fd_id."""
        def mk():
            rs = list(frecs)
            if isk is not None:
                rs.append(inet_fe(isk))
            rs += list(fe)
            fdata = criu_image(fhead, rs)
            ddata = criu_image(dhead, drecs + [
                pb_int(1, fd_id) + pb_int(2, 0) + pb_int(3, fd_type) +
                pb_int(4, SK_FD)])
            m = json.loads(text)
            for f in m["files"]:
                if "criu/" + f["name"] == fimg.name:
                    f["size"] = len(fdata)
                elif "criu/" + f["name"] == dimg.name:
                    f["size"] = len(ddata)
            if options is not None:
                m["criu"]["options"] = options
            new = {fimg.name: entry(fimg.name, fdata),
                   dimg.name: entry(dimg.name, ddata)}
            b = c.image([c.manifest_entry(json.dumps(m).encode())] +
                        [new.get(e.name, e) for e in c.crius])
            return zstd(b) if z else b
        mk.options = options or []
        return mk

    def inet_fe(isk, typ=FD_INETSK, field=4):
        return pb_int(1, typ) + pb_int(2, sid) + pb_len(field, isk)

    def members(family="inet", typ="stream", proto="tcp",
                state="listening", address="unknown",
                peer_address="unknown", peer=None, i=sid):
        """The descriptor, as gpuinspect --json must give it."""
        return dict(zip(SK_MEMBERS, (family, typ, proto, state, address,
                                     peer_address, peer)), fd=SK_FD, id=i,
                    type="inet")
    unknown = members("unknown", "unknown", "unknown", "unknown")

    def lie(what):
        return (r"^gpurestore: corrupt image: the inet socket of fd %d of "
                r"process %d records %s$" % (SK_FD, root, what),
                r"^gpuinspect: corrupt image: the inet socket of fd %d of "
                r"process %d records %s$" % (SK_FD, root, what))

    def lacks(i):
        m = r"corrupt image: fd %d of process %d is an inet socket \(id " \
            r"%d\) that 'files\.img' lacks$" % (SK_FD, root, i)
        return r"^gpurestore: " + m, r"^gpuinspect: " + m

    def taken(a):
        m = r"the image's process %d listens on TCP %s, which process " \
            r"\d+ \('python3[.0-9]*'\) holds on this host$" % (
                root, re.escape(a))
        return r"^gpurestore: cannot restore: " + m, r"^gpuinspect: " + m
    m = r"corrupt image: 'files\.img' lists file id %d twice$" % sid
    twice = r"^gpurestore: " + m, r"^gpuinspect: " + m
    sk = functools.partial(inet_sk, sid, netns)
    lo = addr_words("127.0.0.1")[0]
    cases = [
        ("a listening TCP socket on port 70000", stream(sk(sport=70000)),
         lie(r"a port above 65535 \(70000\)"), members()),
        ("a TCP connection to port 70000, dumped with --tcp-established",
         stream(sk(state=TCP_ESTABLISHED, sport=40201, dst="127.0.0.1",
                   dport=70000), options=["tcp-established"], z=True),
         lie(r"a port above 65535 \(70000\)"),
         members(state="established")),
        ("an IPv6 socket whose address has 1 word",
         stream(sk(family=socket.AF_INET6, src=[lo], dst="::")),
         lie(r"an address of 1 words for IPv6"), members("inet6")),
        ("an IPv6 connection whose peer's address has 1 word",
         stream(sk(family=socket.AF_INET6, state=TCP_ESTABLISHED,
                   src="::1", sport=40202, dst=[lo], dport=6379),
                options=["tcp-established"]),
         lie(r"an address of 1 words for IPv6"),
         members("inet6", state="established")),
        ("family 99", stream(sk(family=99), z=True),
         lie(r"an unknown family \(99\)"), members("unknown")),
        ("socket type 99", stream(sk(typ=99, sport=40203)),
         lie(r"an unknown type \(99\)"),
         members("inet", "unknown", "unknown", "unknown",
                 "127.0.0.1:40203", None)),
        ("protocol 99 for a stream socket",
         stream(sk(proto=99, sport=40204)),
         lie(r"an unknown protocol \(99\)"),
         members("inet", "stream", "unknown", "unknown",
                 "127.0.0.1:40204", None)),
        ("TCP state 99", stream(sk(state=99, sport=40205)),
         lie(r"an unknown state \(99\)"),
         members(state="unknown", address="127.0.0.1:40205",
                 peer_address=None)),
        ("a listening UDP socket",
         stream(sk(typ=socket.SOCK_DGRAM, proto=socket.IPPROTO_UDP,
                   sport=40206)),
         lie(r"a listening socket that is not TCP"),
         members("inet", "dgram", "udp", "unknown", "127.0.0.1:40206",
                 None)),
        ("an address of 5000 words", stream(sk(src=[lo] + [0] * 4999)),
         lie(r"an address of 5000 words for IPv4"), members()),
        ("an address of 1000000 words, packed",
         stream(sk(src=[lo] + [0] * 999999, packed=True), z=True),
         lie(r"an address of 1000000 words for IPv4"), members()),
        ("a descriptor naming an inet socket that files.img lacks",
         stream(), lacks(sid), unknown),
        ("a file_entry of type inet without its record",
         stream(fe=[pb_int(1, FD_INETSK) + pb_int(2, sid)]), lacks(sid),
         unknown),
        ("a descriptor of type inet naming a regular file",
         stream(fd_id=reg), lacks(reg),
         members("unknown", "unknown", "unknown", "unknown", i=reg)),
        # criu restore takes the last; gpurestore once checked the first,
        # and the tree was restored, listening on port 4464
        ("two inet sockets of one id, the last on port 70000",
         stream(fe=[inet_fe(sk(sport=40207)), inet_fe(sk(sport=70000))]),
         twice, None),
        # criu crashed on it; gpuinspect showed it as the socket
        ("a file_entry of type file carrying an inet socket's record",
         stream(fe=[inet_fe(sk(sport=40208), typ=FD_REG)]), lacks(sid),
         unknown),
        # gpuinspect --check said that a restore would work
        ("a descriptor of type file naming an inet socket",
         stream(sk(sport=40209), fd_type=FD_REG),
         (r"^gpurestore: criu restore failed: .*No file for fd %d\b" %
          SK_FD, r"^gpuinspect: corrupt image: fd %d of process %d is a "
          r"file \(id %d\) that 'files\.img' lacks$" % (SK_FD, root, sid)),
         dict(fd=SK_FD, id=sid, type="file")),
    ]
    if port:
        a = "127.0.0.1:%d" % port
        cases += [
            ("a listening socket on a port taken here",
             stream(sk(sport=port)), taken(a),
             members(address=a, peer_address=None)),
            ("an IPv4 socket whose addresses have 4 words (as CRIU 0.1 "
             "wrote), on a port taken here",
             stream(sk(sport=port, src=[lo, 0xdeadbeef, 1, 2],
                       dst=[0, 0xffffffff, 3, 4]), z=True), taken(a),
             members(address=a, peer_address=None))]
    if host_lacks(SK_NOADDR):
        m = r"process %d's TCP connection %s:41000 -> 198\.51\.100\.7:6379 " \
            r"needs the address %s, which this host lacks: restore with " \
            r"%%s--tcp-close to have it closed \(its process sees the " \
            r"connection reset\)$" % (root, re.escape(SK_NOADDR),
                                       re.escape(SK_NOADDR))
        cases.append((
            "a TCP connection from an address this host lacks, dumped "
            "with --tcp-established",
            stream(sk(state=TCP_ESTABLISHED, src=SK_NOADDR, sport=41000,
                      dst="198.51.100.7", dport=6379),
                   options=["tcp-established"]),
            (r"^gpurestore: cannot restore: " + m % "",
             r"^gpuinspect: " + m % "gpurestore "),
            members(state="established", address=SK_NOADDR + ":41000",
                    peer_address="198.51.100.7:6379", peer="external")))
    for name, mk, (expect, check), fd in cases:
        c.add("sockets", name, mk, expect, sk=dict(
            pid=root, fd=fd, check=check, options=mk.options,
            error=None if fd else check[len("^gpuinspect: "):]))


# ---------------------------------------------------- format 2, parents
#
# Two real images of format 2 of one tree: a full one, A, and B, taken
# with --parent=A, whose memory is mostly references to A's chunks.  The
# streams are made from them, and some are run with parent images given
# (--parent): A itself, or A made hostile.

SHA_KEY = "SCHILY.xattr.gpuckpt.sha256"
REF_KEY = "SCHILY.xattr.gpuckpt.ref"
FOOTER = struct.Struct("<II8sQ")


class V2:
    def __init__(self, a, b, trash, fmt=2):
        self.a, self.b = a, b
        self.pdir = os.path.join(trash, "parents")
        os.makedirs(self.pdir, exist_ok=True)
        self.ta = subprocess.run(["zstd", "-dcq"], input=a,
                                 stdout=subprocess.PIPE, check=True).stdout
        self.tb = subprocess.run(["zstd", "-dcq"], input=b,
                                 stdout=subprocess.PIPE, check=True).stdout
        self.sa, self.sb = self.sums(self.ta), self.sums(self.tb)
        self.ma = json.loads(self.member(self.ta, "gpuckpt.json"))
        self.mb = json.loads(self.member(self.tb, "gpuckpt.json"))
        if self.ma.get("format") != fmt or not self.mb.get("parent"):
            sys.exit("hostile.py: --v%d wants a full image of format %d "
                     "and one made with --parent of it" % (fmt, fmt))
        self.ta2 = None
        refs = [e for e in self.sb if e.get("ref")]
        kept = [e for e in self.sb if not e.get("ref") and
                e["name"].startswith("criu/pages-")]
        if not refs:
            sys.exit("hostile.py: the second --v2 image has no references")
        # the first reference of B to a chunk that A stores once: where A
        # stores the same bytes twice, a reader may take either, and a
        # damaged copy would go unseen, rightly
        once = [e for e in refs if sum(x["sha256"] == e["sha256"]
                                       for x in self.sa) == 1]
        self.ref = once[0] if once else refs[0]
        # the chunk of A it names
        self.aref = next(e for e in self.sa
                         if e["sha256"] == self.ref["sha256"])
        self.achunk = max((e for e in self.sa
                           if e["name"].startswith("criu/pages-")),
                          key=lambda e: e["size"])
        self.bchunk = kept[0] if kept else None

    @staticmethod
    def member(tar, name):
        import tarfile
        import io
        with tarfile.open(fileobj=io.BytesIO(tar)) as t:
            return t.extractfile(name).read()

    def sums(self, tar):
        return json.loads(self.member(tar, "gpuckpt.sums"))["entries"]

    def parent(self, name, data):
        """A parent image file, written once: its path."""
        p = os.path.join(self.pdir, name + ".gck")
        with open(p, "wb") as f:
            f.write(data)
        return p

    def rewrite(self, tar, change):
        """tar made again, with change(info, data) -> data applied to
        each entry (None: as it was), compressed as one frame."""
        import tarfile
        import io
        out = io.BytesIO()
        with tarfile.open(fileobj=io.BytesIO(tar)) as t, tarfile.open(
                fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as o:
            for x in t.getmembers():
                d = t.extractfile(x).read()
                y = tarfile.TarInfo(x.name)
                y.mode, y.mtime = 0o600, x.mtime
                y.uname = y.gname = "root"
                y.pax_headers = {k: v for k, v in x.pax_headers.items()
                                 if k.startswith("SCHILY.")}
                n = change(y, d)
                d = d if n is None else n
                y.size = len(d)
                o.addfile(y, io.BytesIO(d))
        return zstd(out.getvalue())


    def rewrite_list(self, tar, change):
        """tar made again from the list of its entries, (info, data)
        each, that change(list) gives, compressed as one frame."""
        import tarfile
        import io
        out = io.BytesIO()
        ents = []
        with tarfile.open(fileobj=io.BytesIO(tar)) as t:
            for x in t.getmembers():
                y = tarfile.TarInfo(x.name)
                y.mode, y.mtime = 0o600, x.mtime
                y.uname = y.gname = "root"
                y.pax_headers = {k: v for k, v in x.pax_headers.items()
                                 if k.startswith("SCHILY.")}
                ents.append((y, t.extractfile(x).read()))
        with tarfile.open(fileobj=out, mode="w",
                          format=tarfile.PAX_FORMAT) as o:
            for y, d in change(ents):
                y.size = len(d)
                o.addfile(y, io.BytesIO(d))
        return zstd(out.getvalue())

    def drop(self, tar, names):
        return self.rewrite_list(tar, lambda es: [e for e in es
                                                  if e[0].name not in names])

    def rename(self, tar, name, new):
        def ch(es):
            for y, d in es:
                if y.name == name:
                    y.name = new
            return es
        return self.rewrite_list(tar, ch)

    def move_before(self, tar, name, before, add_index=False):
        """Entry name moved before the first entry whose name before()
        says; or, with add_index, a part of a page index put before the
        trailer."""
        import tarfile

        def ch(es):
            if add_index:
                y = tarfile.TarInfo("gpuckpt.pages.part00000")
                y.mode, y.uname, y.gname = 0o600, "root", "root"
                d = bytes(16)
                y.pax_headers = {SHA_KEY: hashlib.sha256(d).hexdigest()}
                return es[:-1] + [(y, d)] + es[-1:]
            it = next(e for e in es if e[0].name == name)
            rest = [e for e in es if e is not it]
            i = next(k for k, e in enumerate(rest) if before(e[0].name))
            return rest[:i] + [it] + rest[i:]
        return self.rewrite_list(tar, ch)


def fcs_at(f):
    """Where a zstd frame's content size lies, and its width."""
    fd = f[4]
    return 5 + (0 if fd & 0x20 else 1) + (0, 1, 2, 4)[fd & 3], \
        (1, 2, 4, 8)[fd >> 6] if fd >> 6 or fd & 0x20 else 0


def gen_v2_frames(c, v):
    """Frames of a full image of format 2 that lie about their sizes, a
    bomb in a chunk, a chunk too large, cuts, a changed byte."""
    a, e = v.a, v.achunk
    at, zs = e["at"], e["zsize"]
    frame = a[at:at + zs]
    o, w = fcs_at(frame)
    if w not in (4, 8):
        sys.exit("hostile.py: the chunk's frame has no 4- or 8-byte size")
    real = int.from_bytes(frame[o:o + w], "little")

    def sized(n):
        return a[:at] + frame[:o] + n.to_bytes(w, "little") + \
            frame[o + w:] + a[at + zs:]
    lie = r"bytes its header says|larger than its content|corrupt image"
    for tag, n in (("less by a page", real - 4096), ("less by 1", real - 1),
                   ("0", 0), ("more by 1", real + 1),
                   ("more by a page", real + 4096),
                   ("1 GiB", 1 << 30)):
        c.add("v2-frames", "a chunk's frame says it holds %s" % tag,
              lambda n=n: sized(n), lie)
    c.add("v2-frames", "60 MiB of zeros as a frame in place of a chunk",
          lambda: a[:at] + zstd(bytes(60 << 20)) + a[at + zs:],
          r"corrupt image|bytes|truncated")
    c.add("v2-frames", "a bomb: a frame of 2 GiB of RLE blocks as a chunk",
          lambda: a[:at] + zframe(rle_blocks(b"\0", 2 << 30)) +
          a[at + zs:], r"corrupt image|bytes|truncated")

    def too_large(y, d):
        if y.name != e["name"]:
            return None
        big = (d * (2 * 1048576 // len(d) + 1))[:2 * 1048576]
        y.pax_headers[SHA_KEY] = hashlib.sha256(big).hexdigest()
        return big
    c.add("v2-frames", "a chunk of 2 MiB, its digest true",
          lambda: v.rewrite(v.ta, too_large),
          r"is a chunk of 2097152 bytes, more than 1048576")
    for k, cut in enumerate(spread(at + 1, at + zs, 4)):
        c.add("v2-frames", "cut inside a chunk's frame (%d)" % k,
              lambda cut=cut: a[:cut], r"image truncated")
    for k, x in enumerate(v.sa[1:8]):
        c.add("v2-frames", "cut before frame %d" % (k + 1),
              lambda x=x: a[:x["at"]], r"image truncated")

    def changed():
        raw = subprocess.run(["zstd", "-dcq"], input=frame,
                             stdout=subprocess.PIPE, check=True).stdout
        i = len(raw) - 4096
        raw = raw[:i] + bytes([raw[i] ^ 0xff]) + raw[i + 1:]
        return a[:at] + zstd(raw, "--stream-size=%d" % len(raw)) + \
            a[at + zs:]
    c.add("v2-frames", "a chunk's byte changed, its frame made whole again",
          changed, r"checksum mismatch")


def gen_v2_footer(c, v):
    """The footer that ends a compressed image of format 2: after it,
    naming another frame, one more of it, a skippable frame elsewhere."""
    a = v.a
    at = FOOTER.unpack(a[-24:])[3]
    first = v.sa[1]["at"]
    for tag, b in (
            ("a byte after the footer", a + b"x"),
            ("a second footer", a + a[-24:]),
            ("the footer names offset 0", a[:-8] + struct.pack("<Q", 0)),
            ("the footer names the frame before the trailer",
             a[:-8] + struct.pack("<Q", v.sa[-2]["at"])),
            ("the footer names an offset past the end",
             a[:-8] + struct.pack("<Q", len(a) + 4096)),
            ("the footer names 2^64-1",
             a[:-8] + struct.pack("<Q", (1 << 64) - 1)),
            ("the footer cut in half", a[:-12]),
            ("a skippable frame among the chunks",
             a[:first] + struct.pack("<II", 0x184D2A50, 4) + b"evil" +
             a[first:]),
            ("a skippable frame of 1 GiB said, 4 bytes held",
             a[:at] + struct.pack("<II", 0x184D2A50, 1 << 30) + b"evil" +
             a[at:])):
        c.add("v2-footer", tag, b)


def gen_v2_parents(c, v):
    """An incremental image and its parents: missing, wrong, damaged,
    in a cycle; references that no parent holds or that must not be."""
    a, b, ref = v.a, v.b, v.ref
    pa = v.parent("A", a)
    ida = v.ma["id"]
    need = r"needs its parent image %s" % ida
    c.add("parents", "no parent given", b, need, parents=[])
    c.add("parents", "the image itself given as its parent", b, need,
          parents=[v.parent("B", b)])
    c.add("parents", "a parent of format 1", b, r"parent",
          parents=[v.parent("format1", c.gck)])
    c.add("parents", "an uncompressed parent", b, r"parent",
          parents=[v.parent("plain", v.ta)])

    def damaged(e, mask=0x40):
        x = bytearray(a)
        x[e["at"] + e["zsize"] // 2] ^= mask
        return bytes(x)
    c.add("parents", "a byte of the parent's chunk changed", b,
          r"corrupt parent image", parents=[v.parent("Abad", damaged(
              v.aref))])
    tat = FOOTER.unpack(a[-24:])[3]
    t = {"at": tat, "zsize": len(a) - 24 - tat}
    c.add("parents", "a byte of the parent's trailer changed", b,
          r"corrupt parent image|parent",
          parents=[v.parent("Atrailer", damaged(t, 0x01))])
    for tag, x in (("cut in half", a[:len(a) // 2]),
                   ("without its footer", a[:-24]),
                   ("with its footer naming offset 0",
                    a[:-8] + struct.pack("<Q", 0)),
                   ("empty", b""),
                   ("a footer alone", a[-24:])):
        c.add("parents", "the parent " + tag, b, r"parent",
              parents=[v.parent("A-" + tag.replace(" ", "-"), x)])
    at, zs = v.aref["at"], v.aref["zsize"]
    c.add("parents", "a bomb in place of the parent's chunk", b,
          r"corrupt parent image|parent",
          parents=[v.parent("Abomb", a[:at] +
                            zframe(rle_blocks(b"\0", 2 << 30)) +
                            a[at + zs:])])

    def manifest(change):
        def mk():
            def ch(y, d):
                if y.name != "gpuckpt.json":
                    return None
                m = json.loads(d)
                change(m)
                d = json.dumps(m).encode()
                y.pax_headers[SHA_KEY] = hashlib.sha256(d).hexdigest()
                return d
            return v.rewrite(v.tb, ch)
        return mk
    c.add("parents", "a cycle: the chain names its parent twice",
          manifest(lambda m: m["parent"]["chain"].append(ida)),
          r"cycle|parent", parents=[pa])
    c.add("parents", "the chain names a parent the parent has not",
          manifest(lambda m: m["parent"]["chain"].append("0" * 32)),
          r"parent", parents=[pa])
    c.add("parents", "the chain does not start with the parent",
          manifest(lambda m: m["parent"].update(chain=["f" * 32])),
          r"parent", parents=[pa])
    c.add("parents", "the image names itself as its parent",
          manifest(lambda m: m["parent"].update(id=m["id"],
                                                chain=[m["id"]])),
          r"parent|cycle", parents=[pa])

    def ref_change(pick, fn, tar=None):
        def mk():
            done = []

            def ch(y, d):
                if done or not pick(y):
                    return None
                done.append(1)
                return fn(y, d)
            x = v.rewrite(v.tb if tar is None else tar, ch)
            assert done
            return x
        return mk

    def is_ref(y):
        return y.name == ref["name"]
    c.add("parents", "a reference to a chunk no parent stores",
          ref_change(is_ref, lambda y, d: y.pax_headers.update(
              {SHA_KEY: hashlib.sha256(b"none").hexdigest()})),
          r"none of its parent images stores", parents=[pa])
    c.add("parents", "a reference whose size is not the chunk's",
          ref_change(is_ref, lambda y, d: y.pax_headers.update(
              {REF_KEY: str(ref["size"] + 4096)})),
          r"corrupt", parents=[pa])
    c.add("parents", "a reference of size 0",
          ref_change(is_ref, lambda y, d: y.pax_headers.update(
              {REF_KEY: "0"})), r"bad reference", parents=[pa])
    c.add("parents", "a reference of 2^64 bytes",
          ref_change(is_ref, lambda y, d: y.pax_headers.update(
              {REF_KEY: str(1 << 64)})), r"corrupt", parents=[pa])

    def to_ref(y, d):
        y.pax_headers[REF_KEY] = str(len(d))
        return b""
    c.add("parents", "a reference in place of a file that is not memory",
          ref_change(lambda y: y.name == "criu/inventory.img", to_ref),
          r"reference where data must be", parents=[pa])
    c.add("parents", "a reference with data",
          ref_change(is_ref, lambda y, d: bytes(4096)),
          r"reference where data must be", parents=[pa])
    c.add("parents", "a reference in an image with no parent",
          ref_change(lambda y: y.name.startswith("criu/pages-"), to_ref,
                     v.ta), r"reference where data must be",
          parents=[pa])
    if v.bchunk:
        at, zs = v.bchunk["at"], v.bchunk["zsize"]
        c.add("parents", "a bomb in a chunk the image stores",
              b[:at] + zframe(rle_blocks(b"\0", 2 << 30)) + b[at + zs:],
              r"corrupt image|bytes|truncated", parents=[pa])


# ------------------------------------------------ format 3: patches, index
#
# Two real images of format 3 of one tree: a full one, A, and B, taken
# with --parent=A after the tree rewrote single pages here and there, so
# that B holds patches of A's chunks.  Each stream changes a patch or the
# page index of B, its digest made anew where the change is to what it
# covers, so that what refuses it is the reader's reading of the map or
# the index, and is run with A given as its parent.

PATCH_KEY = "SCHILY.xattr.gpuckpt.patch"


class V3(V2):
    def __init__(self, a, b, trash):
        V2.__init__(self, a, b, trash, fmt=3)
        self.patches = [e for e in self.sb if e.get("patch")]
        if not self.patches:
            sys.exit("hostile.py: the second --v3 image has no patches")


def patch_digest(data, pmap, size):
    return hashlib.sha256(data + pmap + struct.pack("<Q", size)).hexdigest()


def gen_v3_patches(c, v):
    """Patches whose maps lie (runs that overlap in a base or run past
    it, counts that do not add up, bases no parent holds, maps not in
    their one form), and page indexes that do not match the memory."""
    pa = v.parent("A3", v.a)
    first = v.patches[0]

    def change(fn, tar=None, pick=None):
        def mk():
            done = []

            def ch(y, d):
                if done or not (pick(y) if pick else
                                y.name == first["name"]):
                    return None
                done.append(1)
                return fn(y, d)
            x = v.rewrite(v.tb if tar is None else tar, ch)
            assert done
            return x
        return mk

    def with_map(text, data=b"", size=None):
        """The first patch with map text and data, its digest anew."""
        def fn(y, d):
            sz = int(y.pax_headers[REF_KEY]) if size is None else size
            y.pax_headers[PATCH_KEY] = text
            y.pax_headers[REF_KEY] = str(sz)
            y.pax_headers[SHA_KEY] = patch_digest(data, text.encode(), sz)
            return data
        return change(fn)

    # the first base of the first patch, and the chunk's pages
    def orig():
        import tarfile
        import io
        with tarfile.open(fileobj=io.BytesIO(v.tb)) as t:
            m = t.getmember(first["name"])
            return m.pax_headers[PATCH_KEY], int(m.pax_headers[REF_KEY])
    pmap, size = orig()
    n = size // 4096
    base = next(l for l in pmap.split("\n") if l.startswith("base "))
    bhex, bsize = base.split()[1], int(base.split()[2])
    bn = bsize // 4096
    k = min(n, bn)
    pad_z = "Z %d\n" % (n - k) if n > k else ""
    zero = bytes(4096)
    ok = "base %s %d\nB %d 0 0\n%s" % (bhex, bsize, k, pad_z)
    # sound as made: a patch of its base's first pages (and zeros)
    c.add("patches", "a patch made anew that is sound but for the trailer",
          with_map(ok), r"trailer does not match", parents=[pa])
    if k >= 2:
        c.add("patches", "runs that overlap in a base",
              with_map("base %s %d\nB %d 0 0\nB 1 0 0\n%s" %
                       (bhex, bsize, k - 1, pad_z)),
              r"overlap", parents=[pa])
        c.add("patches", "a map not in its one form: a run that goes on "
              "from the one before", with_map(
                  "base %s %d\nB 1 0 0\nB %d 0 1\n%s" %
                  (bhex, bsize, k - 1, pad_z)), r"one form", parents=[pa])
    c.add("patches", "a run past the end of its base",
          with_map("base %s %d\nB %d 0 1\n%s" % (bhex, bsize, k, pad_z)),
          r"past the end", parents=[pa])
    c.add("patches", "a run from a page 2^32 of its base",
          with_map("base %s %d\nB 1 0 4294967296\nZ %d\n" %
                   (bhex, bsize, n - 1)) if n > 1 else
          with_map("base %s %d\nB 1 0 4294967296\n" % (bhex, bsize)),
          r"unreadable", parents=[pa])
    c.add("patches", "a base no parent holds",
          with_map("base %s %d\nB %d 0 0\n%s" %
                   (hashlib.sha256(b"none").hexdigest(), bsize, k, pad_z)),
          r"no image of its chain stores", parents=[pa])
    c.add("patches", "a base of another size than the chunk it names",
          with_map("base %s %d\nB 1 0 0\n%s" % (bhex, bsize + 4096,
                                                   "Z %d\n" % (n - 1)
                                                   if n > 1 else "")),
          r"no image of its chain stores|corrupt", parents=[pa])
    c.add("patches", "runs of fewer pages than the chunk",
          with_map("base %s %d\nB 1 0 0\n" % (bhex, bsize), size=size +
                   4096), r"runs of 1 pages for a chunk|a chunk of",
          parents=[pa])
    c.add("patches", "runs of more pages than the chunk",
          with_map("base %s %d\nB %d 0 0\nZ %d\n" % (bhex, bsize, k,
                                                       n - k + 1)),
          r"more pages than the chunk", parents=[pa])
    c.add("patches", "more stored pages than it stores",
          with_map("base %s %d\nB 1 0 0\nS %d\n" % (bhex, bsize, n - 1),
                   zero) if n > 2 else with_map(
              "base %s %d\nS 1\n" % (bhex, bsize)),
          r"stored pages|not used|a chunk of|runs of", parents=[pa])
    c.add("patches", "stored pages the map does not give",
          with_map(ok, zero), r"stored pages|a chunk of", parents=[pa])
    c.add("patches", "a base named twice",
          with_map("base %s %d\nbase %s %d\nB %d 0 0\n%s" %
                   (bhex, bsize, bhex, bsize, k, pad_z)),
          r"named twice", parents=[pa])
    c.add("patches", "a base not used",
          with_map("base %s %d\nbase %s %d\nB %d 0 0\n%s" %
                   (bhex, bsize, "0" * 64, 4096, k, pad_z)),
          r"not used", parents=[pa])
    c.add("patches", "17 bases",
          with_map("".join("base %064x 4096\n" % i for i in range(17)) +
                   "Z %d\n" % n), r"more than 16 bases", parents=[pa])
    c.add("patches", "no base", with_map("Z %d\n" % n), r"no base",
          parents=[pa])
    c.add("patches", "a count with a leading zero",
          with_map("base %s %d\nB 0%d 0 0\n%s" % (bhex, bsize, k, pad_z)),
          r"one form", parents=[pa])
    c.add("patches", "a run of an unknown kind",
          with_map("base %s %d\nX %d\n" % (bhex, bsize, n)),
          r"unreadable", parents=[pa])
    c.add("patches", "a run of 0 pages",
          with_map("base %s %d\nB 0 0 0\nB %d 0 0\n%s" %
                   (bhex, bsize, k, pad_z)), r"of 0 pages", parents=[pa])
    c.add("patches", "a map of 17 KiB",
          with_map(ok + "#" * (17 << 10)), r"bad patch", parents=[pa])
    c.add("patches", "an empty map", with_map(""),
          r"bad patch|none of its parent", parents=[pa])

    def no_ref(y, d):
        del y.pax_headers[REF_KEY]
        return d
    c.add("patches", "a patch without the size of its chunk",
          change(no_ref), r"gives no size", parents=[pa])
    c.add("patches", "a patch with the size of another chunk",
          change(lambda y, d: y.pax_headers.update(
              {REF_KEY: str(size + 4096)})), r"corrupt", parents=[pa])
    c.add("patches", "a byte of a patch's map changed, its digest not",
          change(lambda y, d: y.pax_headers.update(
              {PATCH_KEY: y.pax_headers[PATCH_KEY].replace(
                  "B ", "Z ", 1)})), r"corrupt", parents=[pa])

    def to_patch(y, d):
        y.pax_headers[PATCH_KEY] = ok
        y.pax_headers[REF_KEY] = str(size)
        y.pax_headers[SHA_KEY] = patch_digest(b"", ok.encode(), size)
        return b""
    c.add("patches", "a patch in place of a file that is not memory",
          change(to_patch, pick=lambda y: y.name == "criu/inventory.img"),
          r"reference where data must be", parents=[pa])
    c.add("patches", "a patch in an image with no parent",
          change(to_patch, tar=v.ta, pick=lambda y: y.name.startswith(
              "criu/pages-")), r"reference where data must be",
          parents=[pa])

    # the page index
    idx = [e["name"] for e in v.sb if e["name"].startswith(
        "gpuckpt.pages.part")]
    c.add("patches", "the page index left out", v.drop(v.tb, idx),
          r"page index lists 0 pages", parents=[pa])
    c.add("patches", "the page index a digest short",
          change(lambda y, d: (y.pax_headers.update(
              {SHA_KEY: hashlib.sha256(d[:-16]).hexdigest()}), d[:-16])[1],
              pick=lambda y: y.name == idx[-1]),
          r"page index lists", parents=[pa])
    c.add("patches", "a page index of a byte more",
          change(lambda y, d: (y.pax_headers.update(
              {SHA_KEY: hashlib.sha256(d + b"x").hexdigest()}), d + b"x")[1],
              pick=lambda y: y.name == idx[-1]),
          r"page index part", parents=[pa])
    c.add("patches", "a page index part numbered 1 first",
          v.rename(v.tb, idx[0], "gpuckpt.pages.part00001"),
          r"out of order", parents=[pa])
    c.add("patches", "a page index part with a name of 4 digits",
          v.rename(v.tb, idx[0], "gpuckpt.pages.part0000"),
          r"unexpected name", parents=[pa])
    c.add("patches", "the page index before the memory",
          v.move_before(v.tb, idx[0], lambda n: n.startswith(
              "criu/pages-")), r"page index before", parents=[pa])
    if v.ta2 is not None:
        c.add("patches", "a page index in an image of format 2",
              v.move_before(v.ta2, None, None, add_index=True),
              r"unexpected name", parents=[])


# ------------------------------------------------------------ signatures
#
# A signed image of format 2 (gpuckpt --sign), whose last frame holds the
# trailer and, right after it, the signature, gpuckpt.sig: an SSHSIG of
# the trailer's bytes, armoured.  The streams change what follows the
# trailer, or how it is framed, keeping every frame before it and the
# trailer's bytes as they were signed.  Some are run with an
# allowed_signers file that lists the key that signed, some without.

SIG_NS = "gpuckpt-image"
SIG_BEGIN = b"-----BEGIN SSH SIGNATURE-----\n"
SIG_END = b"-----END SSH SIGNATURE-----\n"


def zsized(b):
    """A zstd frame of b that gives its size and has a checksum, as the
    writer of format 2 makes each frame."""
    return zstd(b, "--stream-size=%d" % len(b))


def footer(at):
    return FOOTER.pack(0x184D2A5E, 16, b"gpuckpt\0", at)


def armour(blob):
    """blob, armoured as ssh-keygen writes a signature."""
    b = base64.b64encode(blob)
    return SIG_BEGIN + b"".join(b[i:i + 70] + b"\n"
                                for i in range(0, len(b), 70)) + SIG_END


def unarmour(sig):
    return base64.b64decode(b"".join(sig.split(b"\n")[1:-2]))


class Signed:
    """A signed image (img), the key that signed it, an allowed_signers
    file that lists it, and another key (made in trash) that it does
    not list."""

    def __init__(self, img, key, allowed, trash):
        self.img, self.key, self.allowed = img, key, allowed
        magic, n, tag, self.at = FOOTER.unpack(img[-24:])
        if magic != 0x184D2A5E or tag != b"gpuckpt\0":
            sys.exit("hostile.py: --signed: the image has no footer")
        self.frames = img[:self.at]	# every frame before the last
        raw = subprocess.run(["zstd", "-dcq"], input=img[self.at:-24],
                             stdout=subprocess.PIPE, check=True).stdout
        es, end = parse_tar(raw)
        if [e.name for e in es] != ["gpuckpt.sums", "gpuckpt.sig"]:
            sys.exit("hostile.py: --signed wants a signed image of "
                     "format 2")
        t, g = es
        self.T, self.G = t.raw, g.raw
        self.end = raw[end:]		# the end-of-archive blocks
        self.text = raw[t.data:t.data + t.size]
        self.sig = raw[g.data:g.data + g.size]
        self.other = os.path.join(trash, "other-key")
        if not os.path.exists(self.other):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "",
                            "-C", "other", "-f", self.other], check=True)

    def sign(self, data, key=None, ns=SIG_NS):
        """An SSHSIG of data by key (the key that signed the image)."""
        return subprocess.run(["ssh-keygen", "-q", "-Y", "sign", "-n", ns,
                               "-f", key or self.key], input=data,
                              stdout=subprocess.PIPE, check=True).stdout

    def image(self, body, end=None, frames=None):
        """The image with body, then end (the end-of-archive blocks),
        as its last frame, and the footer naming it; or, with frames
        ([k, body, ...]), each body a frame of its own, end in the
        last, and the footer naming frame k of them."""
        end = self.end if end is None else end
        if frames is None:
            return self.frames + zsized(body + end) + footer(self.at)
        k, parts = frames[0], frames[1:]
        zs = [zsized(p) for p in parts[:-1]] + [zsized(parts[-1] + end)]
        return self.frames + b"".join(zs) + footer(
            self.at + sum(len(z) for z in zs[:k]))


def sig_entry(data, name="gpuckpt.sig", digest=True, records=None,
              typ=b"0", **kw):
    """The signature's entry: its data, with the digest of format 2 of
    it (or another digest; False for none)."""
    recs = dict(records or {})
    if digest is True:
        recs[SHA_KEY] = hashlib.sha256(data).hexdigest()
    elif digest:
        recs[SHA_KEY] = digest
    return entry(name, data, recs, digest=False, typ=typ, **kw)


def gen_v2_sig(c, v, s):
    """What follows the trailer of a signed image, how it is framed and
    what it is: each refused for what the stream holds, whether an
    allowed_signers file applies or not (with one, the end of the image
    is read first, by another reader).  And a signature in an image of
    format 1."""
    T, G, sig = s.T, s.G, s.sig
    policy = ["--allowed-signers=" + s.allowed]
    junk = (b"not a tar header\n" * 32)[:512]
    big = sig + b"\n" * (16385 - len(sig))
    half = len(sig) // 2
    flipped = sig[:half] + bytes([sig[half] ^ 0x01]) + sig[half + 1:]
    sha = hashlib.sha256(sig).hexdigest()
    evil = b"evil\n"
    after = r"entry '%s' after the trailer"
    notrailer = r"its footer names no trailer"
    nosig = r"what follows its trailer is no signature"
    unreadable = r"entry 'gpuckpt\.sig' unreadable"
    nosum = r"entry 'gpuckpt\.sig' has no checksum"
    # what each is, and what gpurestore says without allowed_signers
    # and with (None: whatever; criu may have started)
    for tag, mk, expect, pexpect in (
            ("the signature twice", lambda: s.image(T + G + G),
             after % r"gpuckpt\.sig", None),
            ("the signature before the trailer", lambda: s.image(G + T),
             r"'gpuckpt\.sig': unexpected name", notrailer),
            ("the signature before the trailer and after it",
             lambda: s.image(G + T + G), r"'gpuckpt\.sig': unexpected name",
             r"more than two entries"),
            ("a signature of 16 KiB and 1 byte, its digest true",
             lambda: s.image(T + sig_entry(big)), r"too large", nosig),
            ("a signature whose header says 4 GiB, 16 KiB held",
             lambda: s.image(T + sig_entry(big[:16384], size=1 << 32)),
             r"too large", r"too large"),
            ("the signature a reference to a chunk",
             lambda: s.image(T + sig_entry(b"", digest=sha, records={
                 REF_KEY: str(len(sig))})), r"signature is a reference",
             nosig),
            ("the signature a reference, its data there too",
             lambda: s.image(T + sig_entry(sig, records={
                 REF_KEY: str(len(sig))})), r"signature is a reference",
             nosig),
            ("a byte of the signature changed, its digest kept",
             lambda: s.image(T + sig_entry(flipped, digest=sha)),
             r"checksum mismatch in 'gpuckpt\.sig'", nosig),
            ("the signature without a digest",
             lambda: s.image(T + sig_entry(sig, digest=False)), nosum,
             unreadable),
            ("the signature with a digest of format 1",
             lambda: s.image(T + sig_entry(sig, digest=False, records={
                 DIGEST_KEY: xxh3(sig)})), nosum, unreadable),
            ("the signature with a digest of 63 digits",
             lambda: s.image(T + sig_entry(sig, digest=sha[:63])), nosum,
             unreadable),
            ("the signature a symbolic link",
             lambda: s.image(T + sig_entry(b"", typ=b"2",
                                           linkname="/etc/passwd")),
             r"symbolic link", unreadable),
            ("the signature a directory",
             lambda: s.image(T + sig_entry(b"", typ=b"5")), r"directory",
             unreadable),
            ("the signature a hard link to the trailer",
             lambda: s.image(T + sig_entry(b"", typ=b"1",
                                           linkname="gpuckpt.sums")),
             r"hard link", unreadable),
            ("the signature a fifo",
             lambda: s.image(T + sig_entry(b"", typ=b"6")), r"fifo",
             unreadable),
            ("the signature named ./gpuckpt.sig",
             lambda: s.image(T + sig_entry(sig, name="./gpuckpt.sig")),
             after % r"\./gpuckpt\.sig", nosig),
            ("the signature named gpuckpt.sig/x",
             lambda: s.image(T + sig_entry(sig, name="gpuckpt.sig/x")),
             after % r"gpuckpt\.sig/x", nosig),
            ("an entry after the signature",
             lambda: s.image(T + G + entry("criu/extra.img", evil, {
                 SHA_KEY: hashlib.sha256(evil).hexdigest()},
                 digest=False)), after % r"criu/extra\.img", r"more than two entries"),
            ("a header of junk after the signature",
             lambda: s.image(T + G + junk), None, None),
            ("the signature after the end of the archive",
             lambda: s.image(T + s.end + G), r"data after the end",
             r"is not signed"),
            ("the last frame ending inside the signature's data",
             lambda: s.image(T + G[:len(G) - 512 - 100], end=b""),
             r"truncated", r"unreadable entry after the first"),
            ("the signature in a frame of its own, the footer naming "
             "the trailer's", lambda: s.image(None, frames=[0, T, G]),
             r"the footer does not name the last frame", r"bad frame"),
            ("the signature in a frame of its own, the footer naming it",
             lambda: s.image(None, frames=[1, T, G]),
             r"the footer does not name the trailer's frame", notrailer),
            ("the end of the archive in a frame of its own",
             lambda: s.image(None, frames=[0, T + G, b""]),
             r"the footer does not name the last frame", r"bad frame")):
        c.add("v2-sig", tag, mk, expect)
        c.add("v2-sig-policy", tag, mk, pexpect, args=policy)
    # A signature in an image of format 1, after its trailer (criu may
    # have started when it is met, and failed first).
    es = c.entries
    v1 = finish(b"".join(e.raw for e in es) + entry("gpuckpt.sig", sig))
    c.add("v2-sig", "the signature in an image of format 1", v1)
    c.add("v2-sig", "the signature in an image of format 1, compressed",
          lambda: zstd(v1))
    c.add("v2-sig", "the signature, its digest of format 2, in an image "
          "of format 1", lambda: finish(b"".join(e.raw for e in es) +
                                         sig_entry(sig)))


def gen_v2_sig_policy(c, v, s):
    """Images that an allowed_signers file that lists the key of the
    signed image refuses: not signed, or not by it, or not of the
    trailer, or signatures that are no SSHSIG."""
    T = s.T
    policy = ["--allowed-signers=" + s.allowed]
    blob = unarmour(s.sig)

    def signed(sig):
        return lambda: s.image(T + sig_entry(sig))

    def blob_changed(fn):
        return signed(armour(fn(bytearray(blob))))

    def version(b):
        b[9] = 2
        return b

    def key_type(b):
        i = b.find(b"ssh-ed25519")
        b[i + 10] ^= 0x01
        return b

    def no_magic(b):
        b[0:6] = b"SSHSIH"
        return b

    def namespace_len(b):
        # the public key's string, then the namespace's length
        n = struct.unpack(">I", bytes(b[10:14]))[0]
        b[14 + n:18 + n] = struct.pack(">I", 0xfffffff0)
        return b

    notsigned = r"is not signed"
    nossh = r"not an SSH signature"
    for tag, data, expect in (
            ("an image not signed", v.a, notsigned),
            ("an image of format 1", c.gck, notsigned),
            ("an image of format 1, not compressed", c.tar, notsigned),
            ("an empty signature", signed(b""), nossh),
            ("a signature of one newline", signed(b"\n"), nossh),
            ("a signature of text", signed(b"signed, honest\n"), nossh),
            ("a signature of garbage base64",
             signed(SIG_BEGIN + b"!!!! not base64 at all ****\n" + SIG_END),
             nossh),
            ("a signature of base64 of 3 bytes", signed(armour(b"abc")),
             nossh),
            ("a signature of base64 of random bytes",
             signed(armour(bytes(random.Random(11).randrange(256)
                                 for _ in range(300)))), nossh),
            ("a signature without its last line",
             signed(s.sig[:s.sig.rindex(b"-----END")]), nossh),
            ("a signature without its first line",
             signed(s.sig[len(SIG_BEGIN):]), nossh),
            ("a signature whose base64 lost a character",
             signed(s.sig[:len(SIG_BEGIN) + 10] +
                    s.sig[len(SIG_BEGIN) + 11:]), nossh),
            ("a signature whose base64 ends in ===",
             signed(re.sub(rb"[A-Za-z0-9+/=]{4}\n-----END",
                           b"A===\n-----END", s.sig)), nossh),
            ("a signature whose last line shares the dashes of its first",
             signed(b"-----BEGIN SSH SIGNATURE-----END SSH SIGNATURE-----\n"),
             nossh),
            ("an SSHSIG cut short", blob_changed(lambda b: b[:40]), nossh),
            ("an SSHSIG of version 2", blob_changed(version), nossh),
            ("an SSHSIG whose magic is wrong", blob_changed(no_magic),
             nossh),
            ("an SSHSIG by a key of an unknown type",
             blob_changed(key_type), nossh),
            ("an SSHSIG whose namespace is 4 GiB long",
             blob_changed(namespace_len), nossh),
            ("an SSHSIG of another namespace, by the key allowed",
             lambda: s.image(T + sig_entry(s.sign(s.text, ns="git"))),
             r"namespace"),
            ("an SSHSIG of the trailer by a key not allowed",
             lambda: s.image(T + sig_entry(s.sign(s.text, s.other))),
             r"does not allow"),
            ("an SSHSIG of other bytes by the key allowed",
             lambda: s.image(T + sig_entry(s.sign(s.text + b" "))),
             r"does not match"),
            ("the trailer given a blank after it was signed, its digest "
             "true", lambda: s.image(entry("gpuckpt.sums", s.text + b" ", {
                 SHA_KEY: hashlib.sha256(s.text + b" ").hexdigest()},
                 digest=False) + s.G), r"does not match"),
            ("the signature of another image by the key allowed",
             lambda: s.image(T + sig_entry(s.sign(v.member(
                 v.ta, "gpuckpt.sums")))),
             r"does not match")):
        c.add("v2-sig-policy", tag, data, expect, args=policy)


# ----------------------------------------------------------------- driver
#
# Each run goes through runone (tests/runone.c): a child subreaper that
# runs the tool in a session of its own, kills it when the hang detector
# fires, and reports its status, the peak RSS of the run (the tool and
# every process of it that was reaped) and the processes it left.  Runs
# happen in lanes, each with its own directories, several at a time:
# only runs that start criu restore must be alone, as they restore the
# image's PIDs.  So each gpurestore run is first made with GCK_CRIU
# naming a stand-in that only marks the lane; a run that never started
# it is judged as it is (criu played no part in it), and one that did is
# made again later, alone, with the real criu.

CRIU_STANDIN = """#!/bin/sh
: >"$GCK_HOSTILE_MARK"
exit 1
"""


def rmpath(p):
    """Removes p, whatever it is."""
    if os.path.islink(p) or (os.path.exists(p) and not os.path.isdir(p)):
        os.unlink(p)
    elif os.path.isdir(p):
        shutil.rmtree(p, ignore_errors=True)


def listdir(d):
    try:
        return sorted(os.listdir(d))
    except FileNotFoundError:
        return []


def fresh_dir(d):
    """Makes d an empty directory."""
    if os.path.islink(d) or not os.path.isdir(d) or os.listdir(d):
        rmpath(d)
        os.mkdir(d)


class Lane:
    """Where one run at a time happens: its own directories.  Their
    names are short: criu's sockets live in the work directory under
    the lane's TMPDIR, and a socket's path has at most 107 bytes."""
    FILES = ["cwd", "err", "img", "mark", "out", "report", "t"]

    def __init__(self, top, name):
        self.dir = os.path.join(top, name)
        for f in self.FILES:
            setattr(self, f, os.path.join(self.dir, f))
        self.tmp = self.t
        for d in (self.dir, self.cwd, self.tmp):
            os.makedirs(d, exist_ok=True)


def run(lane, job, opts, standin=None):
    """Runs job in lane through runone; returns what happened (None if
    the run itself failed)."""
    data = job["data"]()
    if job["file"]:
        with open(lane.img, "wb") as f:
            f.write(data)
    if job.get("mkdir"):
        os.mkdir(os.path.join(lane.cwd, "dir"))
    env = dict(os.environ, TMPDIR=lane.tmp, LC_ALL="C")
    if standin:
        env.update(GCK_CRIU=standin, GCK_HOSTILE_MARK=lane.mark)
    argv = [lane.img if a is IMG else a for a in job["argv"]]
    res = {"status": None, "rss": None, "procs": [], "head": None,
           "since": boot_ticks()}
    if job["want"] == "good":
        res["head"] = head_of(data, opts)
    for f in (lane.report, lane.mark):
        if os.path.exists(f):
            os.unlink(f)
    with open(lane.out, "wb") as fo, open(lane.err, "wb") as fe:
        p = subprocess.Popen([opts.runone, "-t", str(opts.timeout), "-r",
                              lane.report, "--"] + argv,
                             stdin=subprocess.PIPE if job["pipe"] else
                             subprocess.DEVNULL, stdout=fo, stderr=fe,
                             cwd=lane.cwd, env=env)
        try:
            p.communicate(data if job["pipe"] else None,
                          timeout=opts.timeout + 30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            return None
    if p.returncode != 0:
        return None
    with open(lane.report) as f:
        for ln in f:
            k, _, v = ln.rstrip("\n").partition(" ")
            if k == "left":
                pid, _, comm = v.partition(" ")
                res["procs"].append((int(pid), comm))
            elif k == "elapsed":
                res[k] = float(v)
            elif k == "timeout":
                res[k] = True
            else:
                res[k] = int(v)
    res["criu"] = os.path.exists(lane.mark)
    # (whole, up to 1 MiB: a summary is compared with the undamaged one's)
    with open(lane.out, "rb") as f:
        res["out"] = f.read(1 << 20).decode("utf-8", "replace")
    with open(lane.err, "rb") as f:
        res["err"] = f.read(4096).decode("utf-8", "replace")
    return res


def tidy(lane):
    """Leaves the lane as a run must find it."""
    for f in listdir(lane.dir):
        if f not in ("cwd", "tmp"):
            rmpath(os.path.join(lane.dir, f))
    fresh_dir(lane.cwd)
    fresh_dir(lane.tmp)


def same_summary(mode, out, good):
    """Whether out is the summary good of the undamaged image.  What the
    processes have open is read from the CRIU images after the manifest:
    damage there may make it unknown, said so (the "open" line, or the
    descriptors null with descriptors_error), but never different."""
    if out == good:
        return True
    if mode == "show":
        a, b = out.split("\n"), good.split("\n")
        return len(a) == len(b) and all(
            x == y or (x.startswith("open        not known: ") and
                       y.startswith("open        ") and
                       not re.search(r"[\x00-\x1f\x7f]", x))
            for x, y in zip(a, b))
    try:
        a, b = json.loads(out), json.loads(good)
    except ValueError:
        return False
    if a.get("descriptors") is not None or \
            not isinstance(a.get("descriptors_error"), str):
        return False
    for d in (a, b):
        d.pop("descriptors", None)
        d.pop("descriptors_error", None)
    return a == b


def judge(lane, job, res, opts, good):
    """The failures of a finished run, in words (empty: refused as it
    should be)."""
    why = []
    tool = job["tool"]
    if res is None:
        tidy(lane)
        return ["the driver's runner failed or hung"]
    if res.get("timeout"):
        why.append("still running after %d s (hang)" % opts.timeout)
    if "signal" in res:
        why.append("killed by signal %d" % res["signal"])
    want = job["want"]
    lines = res["err"].split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if want == "good":
        head = res["head"]
        if head is None:
            want = 1
        elif res["status"] != 0 or res["err"] or not same_summary(
                job["mode"], res["out"], good[job["mode"], head]):
            why.append("exit %s, not the summary of the undamaged image" %
                       res["status"])
    if want in SK_WANTS:
        why += sk_judge(job, res, lines, good)
    elif want != "good":
        if res["status"] != want:
            why.append("exit %s, expected %d" % (res["status"], want))
        if res["out"]:
            why.append("wrote on stdout")
        if len(lines) != 1:
            why.append("%d lines on stderr" % len(lines))
        elif not lines[0].startswith(tool + ": "):
            why.append("stderr line without '%s: '" % tool)
        elif re.search(r"[\x00-\x1f\x7f]", lines[0]):
            why.append("control characters on stderr")
        elif re.search(r"out of memory|cannot allocate", lines[0], re.I):
            why.append("ran out of memory")
        if job.get("expect") and tool == "gpurestore" and lines and \
                not re.search(job["expect"], lines[0]):
            why.append("no '%s' in the message" % job["expect"])
    if res["rss"] is None:
        why.append("no peak RSS measured")
    elif res["rss"] > opts.rss_kb:
        why.append("peak RSS %d KiB over %d" % (res["rss"], opts.rss_kb))
    if res["procs"]:
        why.append("left processes: %s" % " ".join(
            "%d(%s)" % tuple(p) for p in res["procs"]))
    # Only gpurestore, starting criu, can make the image's processes;
    # a gpurestore run is never beside one that starts criu.
    alive = image_procs(opts.pids, res["since"])
    if alive and job["tool"] == "gpurestore":
        why.append("the image's pids exist: %s" % alive)
    mode = job["mode"]
    cwd = listdir(lane.cwd)
    if mode == "extract-into":
        if cwd != ["dir"]:
            why.append("the directory to extract into went: %s" % cwd)
        elif listdir(os.path.join(lane.cwd, "dir")):
            why.append("left files in the directory to extract into")
    elif cwd:
        why.append("left files in its directory: %s" % cwd[:3])
    if listdir(lane.tmp):
        why.append("left files in $TMPDIR: %s" % listdir(lane.tmp)[:3])
    other = [f for f in listdir(lane.dir) if f not in Lane.FILES]
    if other:
        why.append("left files beside its directory: %s" % other[:3])
    with opts.evil_lock:
        evil = glob.glob("/tmp/gck-evil*") + glob.glob(os.path.join(
            opts.trash, "evil-*")) + glob.glob(os.path.join(
                opts.trash, "..", "gck-evil*"))
        if evil:
            why.append("wrote at evil paths (this run, or one beside "
                       "it): %s" % evil[:3])
            for p in evil:
                rmpath(p)
    if why:
        why.append("stderr: %r" % res["err"][:300])
    tidy(lane)
    return why


SK_WANTS = ("intact", "sk-json", "sk-show", "sk-check")


def sk_judge(job, res, lines, good):
    """The failures of a run of gpuinspect on a socket's stream (see
    gen_sockets()), whose bytes are all sound: --verify says so, the
    summary shows the socket as its record supports, and no more, and
    the rest as the undamaged image has it, --check fails in so many
    words."""
    sk, want, out = job["sk"], job["want"], res["out"]
    why = []
    if want == "sk-check":
        if res["status"] != 1:
            why.append("exit %s, expected 1" % res["status"])
        if len(lines) != 1:
            why.append("%d lines on stderr" % len(lines))
        elif not re.search(sk["check"], lines[0]):
            why.append("no '%s' in the message" % sk["check"])
        other = [x for x in out.split("\n") if x and
                 not x.startswith("note: ")]
        if other:
            why.append("wrote on stdout other than notes: %r" % other[:2])
        return why
    if res["status"] != 0 or res["err"]:
        return ["exit %s, a word on stderr: not as an intact image" %
                res["status"]]
    if re.search(r"[\x00-\x09\x0b-\x1f\x7f]", out):
        why.append("control characters on stdout")
    if want == "intact":
        if not re.match(r"image ok: \d+ entries, \d+ bytes\n\Z", out):
            why.append("not 'image ok': %r" % out[:200])
        return why
    if want == "sk-json":
        return why + sk_json(sk, out, good["json", "tar"])
    return why + sk_show(sk, out, good["sockets", "tar"])


def sk_json(sk, out, good):
    """What gpuinspect --json says of a socket's stream, against the
    undamaged image's summary good."""
    try:
        a, b = json.loads(out), json.loads(good)
    except ValueError:
        return ["not JSON"]
    why = []
    if (a.get("criu") or {}).get("options") != sk["options"]:
        why.append("criu options %r, not %r" % (
            (a.get("criu") or {}).get("options"), sk["options"]))
    d, f = a.get("descriptors"), sk["fd"]
    if f is None:
        if d is not None or not re.search(
                sk["error"], str(a.get("descriptors_error"))):
            why.append("descriptors not unknown, or not for '%s'" %
                       sk["error"])
        return why
    if not isinstance(d, dict):
        return why + ["descriptors null: %r" % a.get("descriptors_error")]
    p = [x for x in d.get("processes") or [] if x.get("pid") == sk["pid"]]
    fds = p[0].get("fds") if p else None
    if not isinstance(fds, list):
        return why + ["no descriptors of process %d" % sk["pid"]]
    mine = [x for x in fds if x.get("fd") == SK_FD]
    if mine != [f]:
        why.append("fd %d is %s, not %s" % (SK_FD, json.dumps(mine),
                                             json.dumps(f)))
    fds[:] = [x for x in fds if x.get("fd") != SK_FD]
    g = b["descriptors"]
    g["totals"]["sockets" if f["type"] == "inet" else "files"] += 1
    if d != g:
        why.append("the other descriptors are not the undamaged image's")
    return why


def sk_show(sk, out, good):
    """What gpuinspect --sockets says of a socket's stream, against the
    undamaged image's summary good: fd 200's row, the "open" line that
    counts it, and the rest as good has it (but the image's name and
    size, and the criu options that the manifest gives)."""
    pid, f, why = str(sk["pid"]), sk["fd"], []
    a, b = out.split("\n"), good.split("\n")
    if f is None:
        # what the head tells, then that the tables are not known
        n = next((i for i, x in enumerate(b) if x.startswith("PID ") and
                  "FAMILY" in x), len(b))
        if a[n:n + 2] != ["SOCKETS", "not known: " + a[n + 1][11:]] or \
                not re.search(sk["error"], a[n + 1]):
            why.append("its tables are not 'not known' for '%s'" %
                       sk["error"])
        a, b = a[:n], b[:n]
    row = [x for x in a if x.split()[:2] == [pid, str(SK_FD)]]
    if f is not None and f["type"] == "inet":
        def dash(v):
            return v if isinstance(v, str) else "-"
        want = [pid, str(SK_FD), f["family"], dash(f["socket_type"]),
                dash(f["protocol"]), dash(f["state"]), dash(f["peer"]),
                f["address"] or "(unbound)"]
        if isinstance(f["peer_address"], str):
            want += ["->", f["peer_address"]]
        if [x.split() for x in row] != [want]:
            why.append("its row is %r, not %r" % (row, " ".join(want)))
    elif row:
        why.append("a row for fd %d: %r" % (SK_FD, row))
    crit = ["criu        --" + o for o in sk["options"]]
    if [x for x in a if x.startswith("criu ")] != crit:
        why.append("no line %r" % crit)
    op = [x for x in a if x.startswith("open ")]
    gop = [x for x in b if x.startswith("open ")]
    if f is None:
        if len(op) != 1 or not op[0].startswith("open        not known: ") \
                or not re.search(sk["error"], op[0]):
            why.append("open: %r, not 'not known' for '%s'" % (
                op, sk["error"]))
    else:
        r = r"^open +(\d+) files?, (\d+) sockets?, (.*)$"
        x = [re.match(r, y) for y in op[:1] + gop[:1]]
        if len(op) != 1 or len(gop) != 1 or None in x or [
                int(x[0].group(1)), int(x[0].group(2)), x[0].group(3)] != [
                int(x[1].group(1)) + (f["type"] == "file"),
                int(x[1].group(2)) + (f["type"] == "inet"),
                x[1].group(3)]:
            why.append("open: %r, the undamaged image's %r" % (op, gop))
    skip = ("image ", "size ", "criu ", "open ")
    if [x for x in a if x not in row and not x.startswith(skip)] != \
            [x for x in b if not x.startswith(skip)]:
        why.append("other lines than the undamaged image's")
    return why


IMG = object()		# in a job's argv: the lane's image file


def jobs_for(i, s, opts):
    """The runs of stream i: gpurestore from a pipe (and from the file
    for some), gpuinspect --verify (from the file or a pipe), and one
    more gpuinspect mode in turn."""
    R = os.path.join(opts.bindir, "restore", "gpurestore")
    I = os.path.join(opts.bindir, "inspect", "gpuinspect")
    out = []
    base = dict(stream=i, data=s.data, expect=s.expect, sk=s.sk)
    if s.sk is not None:
        # A socket's stream: gpurestore from a pipe and from the file;
        # gpuinspect's summary, in JSON and with --sockets, --check and
        # --verify (from the file or a pipe, in turn).
        pipe = bool(i % 2)
        src = dict(pipe=pipe, file=not pipe)
        at = [] if pipe else [IMG]
        return [dict(base, tool="gpurestore", mode="restore <pipe",
                     argv=[R], pipe=True, file=False, want=1),
                dict(base, tool="gpurestore", mode="restore FILE",
                     argv=[R, IMG], pipe=False, file=True, want=1),
                dict(base, tool="gpuinspect", mode="json", argv=[
                    I, "--json"] + at, want="sk-json", **src),
                dict(base, tool="gpuinspect", mode="sockets", argv=[
                    I, "--sockets"] + at, want="sk-show", **src),
                dict(base, tool="gpuinspect", mode="check", argv=[
                    I, "--check"] + at, want="sk-check", **src),
                dict(base, tool="gpuinspect", mode="verify", argv=[
                    I, "--verify"] + at, want="intact", **src)]
    if s.parents is not None or s.cat.startswith("v2-"):
        # Format 2: restore from a pipe and from the file, verify; with
        # the parents and the options the stream is given (the file
        # always with options: an allowed_signers file is read from the
        # end of a file, a pipe is first copied).
        par = ["--parent=" + p for p in s.parents or []] + s.args
        out.append(dict(base, tool="gpurestore", mode="restore <pipe",
                        argv=[R] + par, pipe=True, file=False, want=1))
        if i % 4 == 0 or s.args:
            out.append(dict(base, tool="gpurestore", mode="restore FILE",
                            argv=[R] + par + [IMG], pipe=False, file=True,
                            want=1))
        out.append(dict(base, tool="gpuinspect", mode="verify FILE",
                        argv=[I, "--verify"] + par + [IMG], pipe=False,
                        file=True, want=1))
        return out
    out.append(dict(base, tool="gpurestore", mode="restore <pipe",
                    argv=[R], pipe=True, file=False, want=1))
    if i % 8 == 0:
        out.append(dict(base, tool="gpurestore", mode="restore FILE",
                        argv=[R, IMG], pipe=False, file=True, want=1))
    if i % 2:
        out.append(dict(base, tool="gpuinspect", mode="verify <pipe",
                        argv=[I, "--verify"], pipe=True, file=False,
                        want=1))
    else:
        out.append(dict(base, tool="gpuinspect", mode="verify FILE",
                        argv=[I, "--verify", IMG], pipe=False, file=True,
                        want=1))
    if i % opts.every:
        return out
    k = i // opts.every % 6
    if k == 0:
        out.append(dict(base, tool="gpuinspect", mode="extract",
                        argv=[I, "--extract=dir", "-"], pipe=True,
                        file=False, want=1))
    elif k == 1:
        out.append(dict(base, tool="gpuinspect", mode="diff",
                        argv=[I, "--diff", opts.good_gck, IMG],
                        pipe=False, file=True, want=2))
    elif k == 2:
        out.append(dict(base, tool="gpuinspect", mode="rdiff",
                        argv=[I, "-d", "-", opts.good_gck], pipe=True,
                        file=False, want=2))
    elif k == 3:
        out.append(dict(base, tool="gpuinspect", mode="extract-into",
                        argv=[I, "-x", "dir", IMG], pipe=False, file=True,
                        want=1, mkdir=True))
    else:
        mode = "show" if k == 4 else "json"
        argv = [I] if k == 4 else [I, "--json"]
        out.append(dict(base, tool="gpuinspect", mode=mode, argv=argv,
                        pipe=True, file=False, want="good"))
    return out


class _ZBuf(ctypes.Structure):
    _fields_ = [("buf", ctypes.c_void_p), ("size", ctypes.c_size_t),
                ("pos", ctypes.c_size_t)]


_zstd = ctypes.CDLL("libzstd.so.1")
_zstd.ZSTD_createDStream.restype = ctypes.c_void_p
_zstd.ZSTD_freeDStream.argtypes = [ctypes.c_void_p]
_zstd.ZSTD_decompressStream.restype = ctypes.c_size_t
_zstd.ZSTD_decompressStream.argtypes = [ctypes.c_void_p,
                                        ctypes.POINTER(_ZBuf),
                                        ctypes.POINTER(_ZBuf)]
_zstd.ZSTD_isError.argtypes = [ctypes.c_size_t]


def unzstd_head(b, n):
    """The first n bytes (or fewer) that a streaming reader decodes from
    zstd stream b before it meets an error: 4 KiB at a time, as the
    decoder gives them, so that damage after them is never reached."""
    ds = _zstd.ZSTD_createDStream()
    src = ctypes.create_string_buffer(b, len(b))
    dst = ctypes.create_string_buffer(4096)
    zin = _ZBuf(ctypes.cast(src, ctypes.c_void_p), len(b), 0)
    out = bytearray()
    try:
        while len(out) < n:
            zout = _ZBuf(ctypes.cast(dst, ctypes.c_void_p), 4096, 0)
            pos = zin.pos
            r = _zstd.ZSTD_decompressStream(ds, ctypes.byref(zout),
                                            ctypes.byref(zin))
            if _zstd.ZSTD_isError(r):
                break
            out += dst.raw[:zout.pos]
            if zout.pos == 0 and zin.pos == pos:
                break		# no more without more input
    finally:
        _zstd.ZSTD_freeDStream(ds)
    return bytes(out[:n])


def head_of(b, opts):
    """Which undamaged image, "gck" or "tar", stream b begins with the
    head of: the manifest entry and its padding, up to the second entry
    (None: neither)."""
    if b[:4] == ZSTD_MAGIC and len(b) > 4 and not b[4] & 0x04:
        return None		# a frame without a checksum is refused
    if b[:4] == ZSTD_MAGIC:
        b = unzstd_head(b, max(len(h) for h in opts.heads.values()))
    for k, h in opts.heads.items():
        if b[:len(h)] == h:
            return k
    return None


def boot_ticks():
    """Now, in clock ticks since the boot, as /proc/PID/stat gives a
    process's start."""
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) *
               os.sysconf("SC_CLK_TCK"))


def image_procs(pids, since=0):
    """The processes that are one of the image's, here or in a PID
    namespace: by a PID of theirs (NSpid) and their name, started since
    the run began (in clock ticks since the boot).  Other tests run
    beside this one (make -j2 check), with workloads of the same name,
    and the PIDs wrap: a PID and a name alone say nothing."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/status" % d) as f:
                st = f.read()
            with open("/proc/%s/stat" % d) as f:
                start = int(f.read().rsplit(")", 1)[1].split()[19])
        except (OSError, IndexError, ValueError):
            continue
        if start < since - 1:
            continue
        name = re.search(r"^Name:\t(.*)$", st, re.M)
        nspid = re.search(r"^NSpid:\t(.*)$", st, re.M)
        if name is None or nspid is None:
            continue
        for p in nspid.group(1).split():
            want = pids.get(int(p), False)
            if want is None or want == name.group(1):
                found.append(int(d))
                break
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bindir")
    ap.add_argument("--trash", default=os.getcwd())
    ap.add_argument("--pids", default="")
    ap.add_argument("--min", type=int, default=0)
    ap.add_argument("--only")
    ap.add_argument("--write")
    ap.add_argument("--rss-kb", type=int, default=262144)
    ap.add_argument("--timeout", type=int, default=30)
    ap.add_argument("--slow", type=float, default=1.0)
    ap.add_argument("--jobs", type=int, default=3)
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--runone")
    ap.add_argument("--progress", action="store_true")
    ap.add_argument("--v2")
    ap.add_argument("--v3")
    ap.add_argument("--signed")
    ap.add_argument("--port", type=int)
    ap.add_argument("good_gck")
    ap.add_argument("good_tar")
    opts = ap.parse_args()
    opts.trash = os.path.abspath(opts.trash)
    if opts.runone is None:
        opts.runone = os.path.join(os.environ.get("GCK_TESTDIR", "."),
                                   "runone")
    opts.good_gck = os.path.abspath(opts.good_gck)
    # PID: the name it has (comm), None for any
    opts.pids = {int(p): None for p in opts.pids.split(",") if p}
    t0 = time.monotonic()
    with open(opts.good_gck, "rb") as f:
        gck = f.read()
    with open(opts.good_tar, "rb") as f:
        tar = f.read()
    c = Corpus(gck, tar, opts.trash)
    for p in c.mjson["processes"]:
        opts.pids[p["pid"]] = p["comm"][:15]
    for gen in (gen_truncations, gen_zstd_flips, gen_tar_flips, gen_order,
                gen_evil, gen_bombs, gen_tail, gen_versions):
        gen(c)
    gen_sockets(c, opts.port)
    if opts.v2:
        pa, pb = opts.v2.split(",")
        with open(pa, "rb") as fa, open(pb, "rb") as fb:
            v = V2(fa.read(), fb.read(), opts.trash)
        for p in v.ma["processes"]:
            opts.pids[p["pid"]] = p["comm"][:15]
        for gen in (gen_v2_frames, gen_v2_footer, gen_v2_parents):
            gen(c, v)
        if opts.v3:
            pa3, pb3 = opts.v3.split(",")
            with open(pa3, "rb") as fa, open(pb3, "rb") as fb:
                v3 = V3(fa.read(), fb.read(), opts.trash)
            v3.ta2 = v.ta
            gen_v3_patches(c, v3)
        if opts.signed:
            ps, key, allowed = opts.signed.split(",")
            with open(ps, "rb") as f:
                sg = Signed(f.read(), os.path.abspath(key),
                            os.path.abspath(allowed), opts.trash)
            gen_v2_sig(c, v, sg)
            gen_v2_sig_policy(c, v, sg)
    # Each stream must be what its category says, and distinct.
    seen, streams, dups = {}, [], 0
    for s in c.streams:
        b = s.data()
        if s.cat.startswith("truncate"):
            base = gck if s.cat == "truncate-zstd" else tar
            assert len(b) < len(base) and base.startswith(b), s.name
        if s.cat.startswith("flip"):
            base = gck if s.cat.startswith("flip-zstd") else tar
            assert len(b) == len(base) and b != base, s.name
            assert sum(x != y for x, y in zip(b, base)) == 1 if \
                len(b) < 1 << 16 else True, s.name
        # (the undamaged images are hostile only to an option)
        assert s.args or b not in (gck, tar), s.name
        h = hashlib.sha256(b + repr((s.parents, s.args)).encode()).digest()
        if h in seen:
            dups += 1
            continue
        seen[h] = s.name
        streams.append(s)
    cats = []
    for s in streams:
        if s.cat not in cats:
            cats.append(s.cat)
    opts.heads = {"tar": tar[:c.head_len]}
    p = subprocess.run(["zstd", "-dcq"], input=gck, stdout=subprocess.PIPE,
                       check=True)
    opts.heads["gck"] = p.stdout[:parse_tar(p.stdout)[0][1].start]
    print("# %d streams (%d duplicates dropped; %d flips left out, as they "
          "decode the same bytes: %s) made in %.1f s" %
          (len(streams), dups, len(c.benign), ", ".join(c.benign),
           time.monotonic() - t0), file=sys.stderr)
    if opts.write:
        if opts.write != "-":
            os.makedirs(opts.write, exist_ok=True)
        for i, s in enumerate(streams):
            if opts.only and opts.only != s.cat and \
                    opts.only not in s.name:
                continue
            if opts.write != "-":
                with open(os.path.join(opts.write, "%04d" % i), "wb") as f:
                    f.write(s.data())
            print("%04d\t%s\t%s" % (i, s.cat, s.name))
        return 0
    if len(streams) < opts.min:
        print("not ok\tcorpus\t%d streams, fewer than %d" %
              (len(streams), opts.min))
        return 1
    # The summaries of the undamaged image, as a pipe gives them.
    good = {}
    I = os.path.join(opts.bindir, "inspect", "gpuinspect")
    for mode, argv in (("show", [I]), ("json", [I, "--json"]),
                       ("sockets", [I, "--sockets"])):
        for k, img in (("gck", gck), ("tar", tar)):
            p = subprocess.run(argv, input=img, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, check=True)
            good[mode, k] = p.stdout.decode("utf-8", "replace")
            if p.stderr:
                sys.exit("hostile.py: gpuinspect: %s" % p.stderr)
    top = os.path.join(opts.trash, "l")
    os.makedirs(top, exist_ok=True)
    standin = os.path.join(top, "criu")
    with open(standin, "w") as f:
        f.write(CRIU_STANDIN)
    os.chmod(standin, 0o755)
    opts.evil_lock = threading.Lock()
    restores, inspects = [], []
    for i, s in enumerate(streams):
        if opts.only and opts.only != s.cat and \
                    opts.only not in s.name:
            continue
        for j in jobs_for(i, s, opts):
            (restores if j["tool"] == "gpurestore" else inspects).append(j)
    # The gpurestore runs first, so that the gpuinspect runs keep the
    # processors busy while those that started criu are made again.
    queue = collections.deque(restores + inspects)
    alone = []
    lock = threading.Lock()
    first = [len(restores)]
    first_done = threading.Event()
    if not restores:
        first_done.set()
    failed, runs = {}, {}
    t1 = time.monotonic()

    def record(job, why, res):
        s = streams[job["stream"]]
        with lock:
            runs[s.cat] = runs.get(s.cat, 0) + 1
            if opts.progress and sum(runs.values()) % 200 == 0:
                print("# %d runs, %.1f s" % (sum(runs.values()),
                                             time.monotonic() - t1),
                      file=sys.stderr)
            if res is not None and res["elapsed"] > opts.slow:
                print("# slow: %.2f s: %s: %s" % (
                    res["elapsed"], job["mode"], s.name), file=sys.stderr)
            if why:
                ln = "%s: %s: %s" % (job["mode"], s.name, "; ".join(why))
                failed.setdefault(s.cat, []).append(ln)
                print("# FAIL %s: %s" % (s.cat, ln), file=sys.stderr)

    def attempt(lane, job, standin=None):
        """Runs job; returns False if it started criu's stand-in."""
        try:
            res = run(lane, job, opts, standin)
            if standin and res is not None and res["criu"]:
                tidy(lane)
                return False
            record(job, judge(lane, job, res, opts, good), res)
        except Exception as e:		# noqa: B902
            record(job, ["the driver failed: %r" % e], None)
        return True

    def worker(lane):
        while True:
            with lock:
                if not queue:
                    return
                job = queue.popleft()
            if job["tool"] != "gpurestore":
                attempt(lane, job)
                continue
            if not attempt(lane, job, standin):
                with lock:
                    alone.append(job)
            with lock:
                first[0] -= 1
                if first[0] == 0:
                    first_done.set()

    def serial(lane):
        first_done.wait()
        t = time.monotonic()
        for job in alone:
            attempt(lane, job)
        print("# runs that started criu: from %.1f s to %.1f s" % (
            t - t1, time.monotonic() - t1), file=sys.stderr)

    threads = [threading.Thread(target=worker, args=(Lane(top, "r%d" % n),))
               for n in range(opts.jobs)]
    threads.append(threading.Thread(target=serial,
                                    args=(Lane(top, "a"),)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("# all runs done at %.1f s" % (time.monotonic() - t1),
          file=sys.stderr)
    ncat = {}
    for s in streams:
        if not opts.only or opts.only == s.cat or opts.only in s.name:
            ncat[s.cat] = ncat.get(s.cat, 0) + 1
    bad = 0
    for cat in cats:
        if cat not in ncat:
            continue
        f = failed.get(cat, [])
        print("%s\t%s\t%d streams, %d runs%s" % (
            "not ok" if f else "ok", cat, ncat[cat], runs.get(cat, 0),
            ", %d failed" % len(f) if f else ""))
        bad += len(f)
    print("# %d streams, %d runs (%d of gpurestore started criu, made "
          "alone) in %.1f s, %d failed" %
          (sum(ncat.values()), sum(runs.values()), len(alone),
           time.monotonic() - t1, bad), file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
