#!/usr/bin/env python3
"""Regenerates the seed corpora of the fuzz targets, corpus/TARGET/.

usage: mkcorpus.py BUILDDIR [OUTDIR]

BUILDDIR is a configured build directory where `make` and then
`make fuzz FUZZ_SECONDS=0` have run: gpuckpt and gpuinspect are under
its src/, mkimage (an image writer) under its fuzz-build/.  Run as root,
with criu, zstd and ssh-keygen: it checkpoints a tiny static program
(leaving it running, then killing it) into three images,
--compress=none, zstd and one with --parent over the zstd one, and takes
the CRIU files apart with gpuinspect -x; and tests/inettree.py, a python
process with TCP and UDP sockets open, whose CRIU files are fuzz_criu's
seed "inet".  The other seeds are made from
those: small images with parts and holes, manifests, CRIU file sets for
fuzz_criu, the frames of a send for fuzz_frame and fuzz_recv, the parent
damaged and signed for fuzz_parent (whose child, the incremental image,
goes beside OUTDIR as child.gck), images signed with throwaway keys and
signatures alone for fuzz_sig.
OUTDIR defaults to corpus/ beside this script.  Files named found-*
there are left alone: inputs that long runs of the targets found, chosen
with libFuzzer's -merge=1 against these seeds.
"""
import base64
import hashlib
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

# A tiny program with 64 pages of its own, one of which it rewrites on
# SIGUSR1: the incremental image over it holds a patch.
TINY = r"""
#include <signal.h>
#include <unistd.h>
static char buf[64 * 4096];
static volatile sig_atomic_t again;
static void on_usr1(int s) { (void)s; again = 1; }
int main(void)
{
	unsigned i;

	for (i = 0; i < sizeof buf; i++)
		buf[i] = (char)(i * 7 + i / 4096);
	signal(SIGUSR1, on_usr1);
	for (;;) {
		pause();
		if (again)
			for (again = 0, i = 0; i < 4096; i++)
				buf[17 * 4096 + i] ^= (char)(i | 1);
	}
}
"""

# fuzz_criu's names, by selector (fuzz_criu.c): the low three bits, and
# bit 5 for the second eight.
PAGEMAP1, PAGES1, MM1, FILES, PAGEMAP2, PAGES2, MM2, SHMEM7 = range(8)
PSTREE, IDS1, IDS2, FDINFO1, FDINFO2, INVENTORY, FS1, REMAP = \
    (n | 1 << 5 for n in range(8))
IN_A, IN_B = 1 << 3, 1 << 4


def put(out, target, name, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def small_image(mkimage, work, level, fmt=1, key=None):
    """A small image with the library's writer: a few small files, a
    pages file with a hole, and one in parts; signed with key, if
    given."""
    m = os.path.join(work, "m.json")
    with open(m, "w") as f:
        json.dump({"format": fmt, "root_pid": 7, "part_size": 4096,
                   "processes": [{"pid": 7, "comm": "seed"}]}, f)
    small = os.path.join(work, "small")
    with open(small, "wb") as f:
        f.write(bytes(range(256)) * 2)
    pg = os.path.join(work, "pg")
    with open(pg, "wb") as f:
        f.write(b"\x5a" * 4096 + bytes(4096) + b"\xa5" * 4096)
    out = os.path.join(work, "small-%d-%d%s.gck" % (level, fmt,
                                                    "-signed" if key else ""))
    subprocess.run([mkimage] + (["-s", key] if key else []) +
                   [out, str(level), "4096", m,
                    "inventory.img", small, "core-7.img@", small,
                    "pages-1.img=", pg, "pages-2.img@", pg], check=True)
    with open(out, "rb") as f:
        return f.read()


def checkpoint(bindir, work):
    src = os.path.join(work, "tiny.c")
    exe = os.path.join(work, "tiny")
    with open(src, "w") as f:
        f.write(TINY)
    subprocess.run(["cc", "-static", "-Os", "-o", exe, src], check=True)
    p = subprocess.Popen([exe], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True, cwd=work)
    time.sleep(0.3)
    imgs = {}
    try:
        for c in ("none", "zstd:19"):
            out = os.path.join(work, c.split(":")[0] + ".gck")
            subprocess.run([os.path.join(bindir, "ckpt", "gpuckpt"), "-R",
                            "-c", c, "-o", out, "-p", str(p.pid)], check=True)
            with open(out, "rb") as f:
                imgs[c.split(":")[0]] = f.read()
        # and an incremental image over the zstd one, a page rewritten
        p.send_signal(signal.SIGUSR1)
        time.sleep(0.3)
        out = os.path.join(work, "incr.gck")
        subprocess.run([os.path.join(bindir, "ckpt", "gpuckpt"), "-R",
                        "-c", "zstd:19", "--parent",
                        os.path.join(work, "zstd.gck"), "-o", out,
                        "-p", str(p.pid)], check=True)
        with open(out, "rb") as f:
            imgs["incr"] = f.read()
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    x = os.path.join(work, "x")
    subprocess.run([os.path.join(bindir, "inspect", "gpuinspect"), "-x", x,
                    os.path.join(work, "none.gck")], check=True)
    files = {}
    for n in os.listdir(x):
        with open(os.path.join(x, n), "rb") as f:
            files[n] = f.read()
    return imgs, files, p.pid


def inet_seed(bindir, work, out):
    """fuzz_criu's seed "inet": the files.img, fdinfo and inventory of
    tests/inettree.py checkpointed with --tcp-established (TCP listening
    on IPv4 and IPv6, a connection both ends of which it holds, UDP bound
    and not), as the files of process 1: pstree.img and ids-1.img made
    here to name them, in image a and b."""
    d = os.path.join(work, "inet")
    os.mkdir(d)
    tree = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        os.pardir, "inettree.py")
    p = subprocess.Popen([sys.executable, tree, d], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True, cwd="/")
    try:
        while not os.path.exists(os.path.join(d, "ready")):
            time.sleep(0.1)
        img = os.path.join(work, "inet.gck")
        subprocess.run([os.path.join(bindir, "ckpt", "gpuckpt"), "-R",
                        "--tcp-established", "-c", "none", "-o", img,
                        "-p", str(p.pid)], check=True)
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    x = os.path.join(work, "inet.x")
    subprocess.run([os.path.join(bindir, "inspect", "gpuinspect"), "-x", x,
                    img], check=True)
    files = {}
    for n in os.listdir(x):
        with open(os.path.join(x, n), "rb") as f:
            files[n] = f.read()
    # the descriptor table that ids-PID.img names (files_id, field 2)
    ids, pos = records(files["ids-%d.img" % p.pid])[0], 0
    while pos < len(ids):
        k, pos = unvarint(ids, pos)
        v, pos = unvarint(ids, pos)
        if k >> 3 == 2:
            fdinfo = files["fdinfo-%d.img" % v]
    both = IN_A | IN_B
    pstree = varint(1 << 3) + varint(1)
    ids1 = varint(2 << 3) + varint(1)
    put(out, "criu", "inet", criu_input([
        (INVENTORY | both, files["inventory.img"]),
        (FILES | both, files["files.img"]),
        (PSTREE | both, struct.pack("<III", 0x54564319, 0x50273030,
                                    len(pstree)) + pstree),
        (IDS1 | both, struct.pack("<III", 0x54564319, 0x54432030,
                                  len(ids1)) + ids1),
        (FDINFO1 | both, fdinfo)]))


def frame(t, seq, data=b""):
    return b"G" + t.encode() + b"\0\0" + struct.pack(">IQ", len(data), seq) + data


def jframe(t, seq, obj):
    return frame(t, seq, json.dumps(obj, separators=(",", ":")).encode())


def wire(img, offset=0, chunk=4096, end=True):
    w = jframe("O", 0, {"offset": offset})
    seq = 0
    for i in range(offset, len(img), chunk):
        w += frame("D", seq, img[i:i + chunk])
        seq += 1
    if end:
        w += jframe("E", seq, {"bytes": len(img)})
    return w


def criu_input(files):
    out = b""
    for sel, data in files:
        out += bytes([sel]) + struct.pack("<H", len(data)) + data
    return out


def varint(v):
    b = b""
    while True:
        c = v & 0x7f
        v >>= 7
        if v == 0:
            return b + bytes([c])
        b += bytes([c | 0x80])


def unvarint(b, p):
    v = s = 0
    while True:
        c = b[p]
        p += 1
        v |= (c & 0x7f) << s
        s += 7
        if c < 0x80:
            return v, p


def records(img):
    """The records of a CRIU image, after its two magic numbers."""
    pos, out = 8, []
    while pos < len(img):
        (n,) = struct.unpack("<I", img[pos:pos + 4])
        out.append(img[pos + 4:pos + 4 + n])
        pos += 4 + n
    return out


def small_pagemap(pm, pages, keep=3, most=2):
    """The dump's pagemap cut to its first entries of at most two pages
    each, and as many pages: a seed small enough to mutate quickly."""
    recs = records(pm)
    out, total = pm[:8] + struct.pack("<I", len(recs[0])) + recs[0], 0
    for rec in recs[1:keep + 1]:
        p, f = 0, {}
        while p < len(rec):
            k, p = unvarint(rec, p)
            f[k >> 3], p = unvarint(rec, p)
        # CRIU 4.2 counts the pages in field 5, older CRIU in field 2.
        n = 5 if 5 in f else 2
        f[n] = min(f[n], most)
        total += f[n]
        r = b"".join(varint(k << 3) + varint(v) for k, v in sorted(f.items()))
        out += struct.pack("<I", len(r)) + r
    return out, pages[:total * 4096]


def with_trailer(img, work, edit, raw=False):
    """img, a compressed image of format 2, with the JSON of its trailer
    changed by edit (which may not make it longer: it is padded to its
    length with blanks, so that its tar entry keeps its size) and its
    trailer frame compressed again (or stored raw), where the footer
    names it."""
    (at,) = struct.unpack("<Q", img[-8:])
    tar = unzstd(work, img[at:-24])
    start = tar.index(b'{"format"')
    t, end = json.JSONDecoder().raw_decode(tar[start:].decode())
    edit(t)
    new = json.dumps(t, separators=(",", ":")).encode()
    assert len(new) <= end
    tar = tar[:start] + new.ljust(end) + tar[start + end:]
    if raw:
        return img[:at] + zraw(tar) + img[-24:]
    path = os.path.join(work, "trailer.tar")
    with open(path, "wb") as f:
        f.write(tar)
    frame = subprocess.run(["zstd", "-q", "-19", "-c", path], check=True,
                           stdout=subprocess.PIPE).stdout
    return img[:at] + frame + img[-24:]


def zraw(data):
    """data as one zstd frame of raw blocks: what the fuzzer changes in
    it is what the reader gets."""
    f = b"\x28\xb5\x2f\xfd\xe0" + struct.pack("<Q", len(data))
    pos = 0
    while True:
        n = min(len(data) - pos, 1 << 17)
        last = int(pos + n == len(data))
        f += struct.pack("<I", n << 3 | last)[:3] + data[pos:pos + n]
        pos += n
        if last:
            return f


def unzstd(work, frame):
    zf = os.path.join(work, "frame.zst")
    with open(zf, "wb") as f:
        f.write(frame)
    return subprocess.run(["zstd", "-q", "-dc", zf], check=True,
                          stdout=subprocess.PIPE).stdout


def raw_frames(img, work):
    """img with the frames of its manifest, its CRIU files and its
    trailer stored raw (those of its pages left as they are), the
    trailer and the footer saying where each now is."""
    (at,) = struct.unpack("<Q", img[-8:])
    tar = unzstd(work, img[at:-24])
    start = tar.index(b'{"format"')
    t, end = json.JSONDecoder().raw_decode(tar[start:].decode())
    body, pos = b"", 0
    for e in t["entries"]:
        frame = img[e["at"]:e["at"] + e["zsize"]]
        assert e["at"] == pos
        pos += e["zsize"]
        if "pages-" not in e["name"]:
            frame = zraw(unzstd(work, frame))
        e["at"], e["zsize"] = len(body), len(frame)
        body += frame
    assert pos == at
    # The trailer, of another length in the room its last block had.
    new = json.dumps(t, separators=(",", ":")).encode()
    assert len(new) <= (end + 511) // 512 * 512
    hdr = start - 512
    assert tar[hdr:hdr + 12] == b"gpuckpt.sums"
    h = bytearray(tar[hdr:start])
    h[124:136] = b"%011o\0" % len(new)
    h[148:156] = b" " * 8
    h[148:156] = b"%06o\0 " % sum(h)
    old = hashlib.sha256(tar[start:start + end]).hexdigest().encode()
    tar = (tar[:hdr].replace(old, hashlib.sha256(new).hexdigest().encode()) +
           bytes(h) + new.ljust((end + 511) // 512 * 512, b"\0") +
           tar[start + (end + 511) // 512 * 512:])
    footer = img[-24:-8] + struct.pack("<Q", len(body))
    return body + zraw(tar) + footer


def parent_seeds(out, work, img):
    """The seeds of fuzz_parent: the parent image, as it is and with
    raw frames, its footer cut or naming the wrong place, its trailer
    frame damaged, its trailer pointing chunks at the wrong frame or at
    part of their own.  libFuzzer keeps a seed only for what it reaches
    that the others do not: the last two have raw frames, so that what
    the fuzzer changes in them reaches the tar and JSON parsers."""
    (at,) = struct.unpack("<Q", img[-8:])
    raw = raw_frames(img, work)
    put(out, "parent", "zstd.gck", img)
    put(out, "parent", "raw.gck", raw)
    put(out, "parent", "footer-cut.gck", img[:-24])
    put(out, "parent", "footer-at0.gck", img[:-8] + struct.pack("<Q", 0))
    put(out, "parent", "footer-at1.gck",
        img[:-8] + struct.pack("<Q", at + 1))
    bad = bytearray(img)
    bad[at + (len(img) - 24 - at) // 2] ^= 0x55
    put(out, "parent", "trailer-bad.gck", bytes(bad))

    def pages(t):
        return [e for e in t["entries"] if "pages-" in e["name"]]

    def at_manifest(t):
        for e in pages(t):
            e["at"], e["zsize"] = 0, t["entries"][0]["zsize"]

    def zsize_short(t):
        for e in pages(t):
            e["zsize"] //= 10

    put(out, "parent", "trailer-at.gck",
        with_trailer(raw, work, at_manifest, True))
    put(out, "parent", "trailer-zsize.gck",
        with_trailer(raw, work, zsize_short, True))


def keygen(work, name, typ):
    """A throwaway key of type typ, made with ssh-keygen: its path."""
    k = os.path.join(work, name)
    subprocess.run(["ssh-keygen", "-q", "-t", typ, "-N", "", "-C", name,
                    "-f", k], check=True)
    return k


def sign(key, data, ns=b"gpuckpt-image"):
    """An SSHSIG of data by key, armoured, as gpuckpt --sign makes."""
    return subprocess.run(["ssh-keygen", "-q", "-Y", "sign", "-n", ns,
                           "-f", key], input=data, check=True,
                          stdout=subprocess.PIPE).stdout


def sig_entry(data):
    """The tar entry gpuckpt.sig of data, with its SHA-256, without the
    end of the archive."""
    body = b" SCHILY.xattr.gpuckpt.sha256=%s\n" % \
        hashlib.sha256(data).hexdigest().encode()
    n = len(body) + 1
    while len(b"%d" % n) + len(body) != n:
        n += 1
    rec = b"%d" % n + body

    def hdr(name, size, typ):
        h = bytearray(512)
        h[0:len(name)] = name
        h[100:108] = b"0000600\0"
        h[108:116] = h[116:124] = b"0000000\0"
        h[124:136] = b"%011o\0" % size
        h[136:148] = b"%011o\0" % 1700000000
        h[156:157] = typ
        h[257:265] = b"ustar\x0000"
        h[148:156] = b" " * 8
        h[148:156] = b"%06o\0 " % sum(h)
        return bytes(h)

    def padded(b):
        return b + bytes(-len(b) % 512)
    return hdr(b"PaxHeader/gpuckpt.sig", len(rec), b"x") + padded(rec) + \
        hdr(b"gpuckpt.sig", len(data), b"0") + padded(data)


def signed(img, work, key, raw=False):
    """img, a compressed image of format 2, signed with key: the
    signature entry after its trailer, in the last frame (compressed
    again, or stored raw), where the footer names it."""
    (at,) = struct.unpack("<Q", img[-8:])
    tar = unzstd(work, img[at:-24])
    start = tar.index(b'{"format"')
    t, end = json.JSONDecoder().raw_decode(tar[start:].decode())
    text = tar[start:start + end]
    body = tar[:start + (end + 511) // 512 * 512]
    assert not any(tar[len(body):])
    tar = body + sig_entry(sign(key, text)) + bytes(1024)
    if raw:
        return img[:at] + zraw(tar) + img[-24:]
    path = os.path.join(work, "signed.tar")
    with open(path, "wb") as f:
        f.write(tar)
    frame = subprocess.run(["zstd", "-q", "-19", "-c", path], check=True,
                           stdout=subprocess.PIPE).stdout
    return img[:at] + frame + img[-24:]


def sig_seeds(out, work, mkimage, parent):
    """The seeds with signatures (gpuckpt --sign): small images signed,
    for fuzz_stream; the parent of child.gck signed, for fuzz_parent;
    SSHSIGs by keys of each type, of the namespace of images or not, for
    fuzz_sig (first byte 0: the armoured text; 1: the binary that
    fuzz_sig armours)."""
    keys = {t: keygen(work, "key-" + t, t) for t in ("ed25519", "ecdsa",
                                                     "rsa")}
    k = keys["ed25519"]
    z = small_image(mkimage, work, 3, 2, k)
    put(out, "stream", "small-v2-signed-zstd.gck", z)
    # (only a compressed image is signed: the same, decompressed)
    put(out, "stream", "small-v2-signed-none.gck", unzstd(work, z))
    put(out, "parent", "signed.gck", signed(parent, work, k))
    put(out, "parent", "signed-raw.gck", signed(parent, work, k, True))
    text = b'{"format":2,"entries":[],"count":0,"bytes":0}'
    for t, key in keys.items():
        sig = sign(key, text)
        put(out, "sig", t, b"\0" + sig)
        put(out, "sig", t + "-bin",
            b"\1" + base64.b64decode(b"".join(sig.split(b"\n")[1:-2])))
    put(out, "sig", "git", b"\0" + sign(k, text, b"git"))


def overflow():
    """A manifest whose numbers add up beyond 64 bits (fixed in gpumap.c
    and inspect.c)."""
    big = (1 << 63) - 1
    u = "GPU-11111111-2222-3333-4444-555555555555"
    use = [{"uuid": u, "memory": big}]
    return {"format": 1, "root_pid": 1,
            "processes": [{"pid": p, "threads": big,
                           "memory": {"vm_rss": big, "rss_anon": big}}
                          for p in (1, 2)],
            "files": [{"name": n, "size": big, "memory": True}
                      for n in ("pages-1.img", "pages-2.img")],
            "cuda": {"driver_version": 580000,
                     "gpus": [{"index": 0, "uuid": u, "name": "H",
                               "compute_capability": "9.0", "memory": 100,
                               "pci_bus_id": "0:1"}],
                     "processes": [{"pid": p, "comm": "c", "gpus": use}
                                   for p in (1, 2)]}}


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    bindir = os.path.join(sys.argv[1], "src")
    mkimage = os.path.join(sys.argv[1], "fuzz-build", "mkimage")
    out = sys.argv[2] if len(sys.argv) == 3 else \
        os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
    work = tempfile.mkdtemp(prefix="gck-mkcorpus.")
    try:
        make(bindir, mkimage, work, out)
    finally:
        shutil.rmtree(work)


def make(bindir, mkimage, work, out):
    imgs, files, pid = checkpoint(bindir, work)
    # found-*: inputs that long fuzzing runs found, kept as they are.
    for t in ("stream", "manifest", "criu", "frame", "recv", "parent",
              "fill", "sig"):
        d = os.path.join(out, t)
        for n in os.listdir(d) if os.path.isdir(d) else ():
            if not n.startswith("found-"):
                os.remove(os.path.join(d, n))

    # fuzz_stream: the two images, whole, and two small ones.
    put(out, "stream", "none.gck", imgs["none"])
    put(out, "stream", "zstd.gck", imgs["zstd"])
    tiny = {lv: small_image(mkimage, work, lv) for lv in (0, 3)}
    put(out, "stream", "small-none.gck", tiny[0])
    put(out, "stream", "small-zstd.gck", tiny[3])
    # format 2: a frame for each entry, SHA-256 digests
    put(out, "stream", "small-v2-none.gck", small_image(mkimage, work, 0, 2))
    put(out, "stream", "small-v2-zstd.gck", small_image(mkimage, work, 3, 2))
    # an incremental image: references, and no parent to read them from
    put(out, "stream", "incr.gck", imgs["incr"])

    # fuzz_parent: the parent of child.gck, whole and damaged.
    with open(os.path.join(out, os.pardir, "child.gck"), "wb") as f:
        f.write(imgs["incr"])
    parent_seeds(out, work, imgs["zstd"])

    # Signatures: signed images, and signatures alone for fuzz_sig.
    sig_seeds(out, work, mkimage, imgs["zstd"])

    # fuzz_fill: an image file, and an incremental one without its
    # parent.
    put(out, "fill", "zstd.gck", imgs["zstd"])
    put(out, "fill", "incr.gck", imgs["incr"])

    # fuzz_manifest: the real one, a small one, one with GPUs.
    m = json.loads(files["gpuckpt.json"])
    put(out, "manifest", "real.json", files["gpuckpt.json"])
    small = {"format": 1, "root_pid": 4242, "shell_job": True,
             "processes": [{"pid": 4242, "comm": "a"}, {"pid": 4243}],
             "files": [{"name": "pages-1.img", "size": 8192, "memory": True},
                       {"name": "mm-1.img", "size": 10}]}
    put(out, "manifest", "small.json", json.dumps(small).encode())
    gpu = dict(m)
    uuids = ["GPU-11111111-2222-3333-4444-555555555555",
             "GPU-66666666-7777-8888-9999-aaaaaaaaaaaa"]
    gpu["cuda"] = {
        "driver_version": 580000, "cuda_version": "13.0",
        "gpus": [{"index": i, "uuid": u, "name": "NVIDIA H100",
                  "compute_capability": "9.0", "memory": 85899345920,
                  "pci_bus_id": "00000000:0%d:00.0" % i}
                 for i, u in enumerate(uuids)],
        "processes": [{"pid": m["root_pid"], "comm": "tiny",
                       "gpus": [{"uuid": uuids[0], "memory": 1 << 30},
                                {"uuid": uuids[1], "memory": None}]}]}
    put(out, "manifest", "cuda.json", json.dumps(gpu, indent=1).encode())
    put(out, "manifest", "overflow.json", json.dumps(overflow()).encode())

    # fuzz_criu: the dump's pagemap, pages, mm and files, as process 1.
    pm, pages = small_pagemap(files["pagemap-%d.img" % pid],
                              files["pages-1.img"])
    mm = files["mm-%d.img" % pid]
    changed = bytearray(pages)
    changed[100] ^= 0xff
    put(out, "criu", "same", criu_input([
        (PAGEMAP1 | IN_A | IN_B, pm), (PAGES1 | IN_A | IN_B, pages),
        (MM1 | IN_A | IN_B, mm), (FILES | IN_A | IN_B, files["files.img"])]))
    put(out, "criu", "changed", criu_input([
        (PAGEMAP1 | IN_A | IN_B, pm), (PAGES1 | IN_A, pages),
        (PAGES1 | IN_B, bytes(changed)), (MM1 | IN_A, mm),
        (FILES | IN_A | IN_B, files["files.img"])]))
    put(out, "criu", "added", criu_input([
        (PAGEMAP2 | IN_B, pm), (MM2 | IN_B, mm), (PAGES1 | IN_A | IN_B, pages),
        (SHMEM7 | IN_A, pm)]))
    inet_seed(bindir, work, out)

    # fuzz_frame: a whole send of the small image, and the other words.
    z = imgs["zstd"]
    put(out, "frame", "send", wire(z[:2048], chunk=512))
    put(out, "frame", "words", jframe("A", 3, {"error": "gave up"}) +
        frame("G", 0) + frame("B", 0) + jframe("R", 0, {"pid": 4242}) +
        jframe("H", 0, {"proto": 1, "version": "0.1.0", "host": "h",
                        "partial": {"size": 10, "xxh3": "0" * 32}}))

    # fuzz_recv: flag byte (bit 0: resume, then the partial), the wire.
    put(out, "recv", "store", b"\0" + wire(z))
    put(out, "recv", "store-none", b"\0" + wire(tiny[0], chunk=8192))
    put(out, "recv", "resume", b"\1" + struct.pack("<H", 4096) + z[:4096] +
        wire(z, offset=4096))
    put(out, "recv", "abort", b"\0" + jframe("O", 0, {"offset": 0}) +
        frame("D", 0, z[:4096]) + jframe("A", 1, {"error": "stopped"}))


if __name__ == "__main__":
    main()
