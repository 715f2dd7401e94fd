"""criuimg.py -- CRIU images, decoded for the tests independently of
gpuckpt: just enough protobuf to read pagemaps, mappings and pages.
lib.sh puts this directory on PYTHONPATH."""
import os, re, struct

PAGE = 4096

def varint(b, i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7f) << s
        s += 7
        if c < 0x80:
            return v, i

def fields(b):
    f, i = {}, 0
    while i < len(b):
        k, i = varint(b, i)
        t = k & 7
        if t == 0:
            v, i = varint(b, i)
        elif t == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        elif t == 1:
            v, i = b[i:i + 8], i + 8
        elif t == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % t)
        f.setdefault(k >> 3, []).append(v)
    return f

def records(path):
    b = open(path, "rb").read()
    i, out = 8, []
    while i < len(b):
        n = struct.unpack_from("<I", b, i)[0]
        out.append(fields(b[i + 4:i + 4 + n]))
        i += 4 + n
    return out

def count(r):
    """the pages a pagemap entry lists: CRIU 4.2 counts them in field 5,
    older CRIU in field 2"""
    return r[5][0] if 5 in r else r[2][0]

def layout(d, pid):
    """the id of the pages file pagemap-PID.img names, and the address of
    each page of that file, in its order"""
    recs = records(os.path.join(d, "pagemap-%d.img" % pid))
    addrs = []
    for r in recs[1:]:
        if r.get(4, [4])[0] & 4:
            addrs += [r[1][0] + j * PAGE for j in range(count(r))]
    return recs[0][1][0], addrs

def pages(d, pid):
    """address -> page bytes, for the pages pagemap-PID.img lists"""
    recs = records(os.path.join(d, "pagemap-%d.img" % pid))
    data = open(os.path.join(d, "pages-%d.img" % recs[0][1][0]), "rb").read()
    out, off = {}, 0
    for r in recs[1:]:
        flags = r.get(4, [4])[0]
        if not flags & 4:
            continue
        for j in range(count(r)):
            out[r[1][0] + j * PAGE] = data[off:off + PAGE]
            off += PAGE
    assert off == len(data), (off, len(data))
    return out

def vmas(d, pid):
    mm = records(os.path.join(d, "mm-%d.img" % pid))[0]
    return [(fields(v)[1][0], fields(v)[2][0]) for v in mm.get(14, [])]

def changed(da, db, pid):
    """bytes that differ, in all and by mapping start (b's, else a's)"""
    pa, pb = pages(da, pid), pages(db, pid)
    va, vb = vmas(da, pid), vmas(db, pid)
    zero = bytes(PAGE)
    total, per = 0, {}
    for a in set(pa) | set(pb):
        if pa.get(a, zero) == pb.get(a, zero):
            continue
        total += PAGE
        for s, e in vb + va:
            if s <= a < e:
                per[s] = per.get(s, 0) + PAGE
                break
    return total, per, len(pa) * PAGE, len(pb) * PAGE

def unpack(tarpath, d):
    """the CRIU files of an uncompressed image, extracted by stock tar
    and their parts joined, into d"""
    import subprocess, tarfile
    raw = d + ".raw"
    os.makedirs(raw)
    subprocess.run(["tar", "-xf", tarpath, "-C", raw], check=True)
    os.makedirs(d)
    names = [m.name for m in tarfile.open(tarpath).getmembers()]
    for n in names:
        if not n.startswith("criu/"):
            continue
        base = re.sub(r"\.part[0-9]{5}$", "", n[5:])
        with open(os.path.join(d, base), "ab") as f:
            f.write(open(os.path.join(raw, n), "rb").read())
