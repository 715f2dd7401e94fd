#!/bin/sh
test_description='gpurestore refuses damaged and hostile streams'
. "$GCK_SRCDIR/lib.sh"

require_criu
require_python

started=
test_cleanup() {
	test -n "$started" && kill_tree $started >/dev/null 2>&1
	:
}

# refused IMAGE [PATTERN]: gpurestore IMAGE (a file operand, or stdin
# when IMAGE is "<FILE") exits 1 with one line on stderr matching
# PATTERN, prints nothing, creates no process and leaves no files.
refused() {
	case $1 in
	"<"*)	"$GCKRESTORE" <"${1#<}" >out 2>err ;;
	*)	"$GCKRESTORE" "$1" >out 2>err ;;
	esac
	_st=$?
	_alive=
	for _p in $WPID $WCHILD; do
		if test -d /proc/$_p; then
			_alive="$_alive $_p"
		fi
	done
	if test -n "$_alive"; then
		echo >&2 "gpurestore created processes:$_alive"
		kill_tree $_alive >/dev/null 2>&1
	fi
	test -z "$_alive" &&
	test_status_is $_st 1 &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpurestore: ${2:-}" err &&
	test -z "$(ls -A "$TMPDIR")"
}

test_status_is() {
	test "$1" -eq "$2" && return 0
	echo >&2 "gpurestore exited $1, expected $2:"
	cat >&2 err
	return 1
}

# flip IN OFFSET OUT: OUT is IN with the byte at OFFSET inverted.
flip() {
	cp "$1" "$3" &&
	_b=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d " ") &&
	test -n "$_b" &&
	printf "\\$(printf %03o $((_b ^ 255)))" |
	    dd of="$3" bs=1 seek="$2" conv=notrunc status=none
}

# The offsets to damage.  For the zstd image any byte will do.  In the
# plain tar: header blocks, the digest records, entry data, and the zero
# padding after pax records, after entry data and at the end.
offsets() {
	python3 - "$@" <<'EOF'
import re, sys

kind, path = sys.argv[1], sys.argv[2]
buf = open(path, "rb").read()
n = len(buf)

def spread(lo, hi, k):
    return [lo + (hi - lo) * i // (k + 1) for i in range(1, k + 1)]

if kind == "zstd":
    off = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 16, 20, 32, 63]
    off += spread(64, n - 64, 11)
    off += [n - d for d in (64, 48, 32, 24, 16, 12, 8, 6, 5, 4, 3, 2, 1)]
    print(" ".join(str(o) for o in sorted(set(off))))
    sys.exit(0)

KEY = b"SCHILY.xattr.gpuckpt.xxh3="
entries = []		# (xhdr, xkey value offset, hdr, data, size, name)
pos, xhdr, xval = 0, None, None
while pos + 512 <= n:
    h = buf[pos:pos + 512]
    if h == bytes(512):
        break
    size = int(h[124:136].split(b"\0")[0].strip() or b"0", 8)
    typ = h[156:157]
    data = pos + 512
    if typ == b"x":
        xhdr = pos
        i = buf.find(KEY, data, data + size)
        xval = i + len(KEY) if i >= 0 else None
    elif typ == b"0" or typ == b"\0":
        if xhdr is not None:
            m = re.search(rb"\d+ size=(\d+)\n", buf[xhdr + 512:data])
            if m:
                size = int(m.group(1))
        entries.append((xhdr, xval, pos, data, size,
                        h[0:100].split(b"\0")[0].decode()))
        xhdr = xval = None
    pos = data + (size + 511) // 512 * 512
if len(entries) < 4:
    sys.exit("cannot find the entries of " + path)
first, inv, last = entries[0], entries[1], entries[-1]
pages = max(entries, key=lambda e: e[4])
end = last[3] + last[4]		# end of the trailer's data

if kind == "head":
    # where the manifest and its padding end: the second entry
    print(inv[0] if inv[0] is not None else inv[2])
    sys.exit(0)
if kind == "flip":
    off = [0, 1, 2, 10, 31, 63]
    for e in (first, inv, last):
        for hdr in (e[0], e[2]):
            if hdr is not None:
                off += [hdr + 124, hdr + 156, hdr + 345]
    for e in (first, inv, pages, last):
        if e[1] is not None:
            off += [e[1], e[1] + 15]
    for e in (first, inv, pages, last):
        off += [e[3], e[3] + e[4] // 2, e[3] + e[4] - 1]
    off += spread(pages[3], pages[3] + pages[4], 3)
    off += [end - d for d in (64, 32, 2)]
    for e in (first, inv, last):
        if e[4] % 512:
            off += [e[3] + e[4], e[3] + (e[4] + 511) // 512 * 512 - 1]
        if e[0] is not None:
            off += [e[2] - 1]
    off += [n - 1, n - 600, n - 1500]
else:
    off = [0, 1, 63, 100, 511, 512, 513, 1023, 1024]
    off += [e[0] if e[0] is not None else e[2] for e in entries[1:4]]
    off += [last[0] if last[0] is not None else last[2], last[2]]
    off += [first[3] + first[4] // 2, last[3], last[3] + last[4] // 2]
    off += spread(pages[3], pages[3] + pages[4], 10)
    off += [end - d for d in (64, 32, 16, 8, 4, 2, 1)]
print(" ".join(str(o) for o in sorted(set(off)) if 0 <= o < end))
EOF
}

# evil DIR: writes handcrafted hostile streams, built around the
# entries of good.tar, into DIR.
evil() {
	python3 - "$@" <<'EOF'
import copy, ctypes, io, json, os, re, struct, subprocess, sys, tarfile
import time

out = sys.argv[1]
good = tarfile.open("good.tar")
members = good.getmembers()
datas = [good.extractfile(m).read() for m in members]
DIGEST = "SCHILY.xattr.gpuckpt.xxh3"

def info(name, typ=tarfile.REGTYPE, size=0, **kw):
    t = tarfile.TarInfo(name)
    t.type, t.size, t.mode = typ, size, 0o600
    t.uid = t.gid = 0
    t.uname = t.gname = "root"
    t.mtime = int(time.time())
    t.pax_headers = {DIGEST: "0123456789abcdef"}
    for k, v in kw.items():
        setattr(t, k, v)
    return t

def entry(i, data=None):
    t = copy.copy(members[i])
    t.pax_headers = dict(members[i].pax_headers)
    d = datas[i] if data is None else data
    t.size = len(d)
    return t, d

def tar(entries, tail=b""):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for ti, d in entries:
            t.addfile(ti, io.BytesIO(d) if d is not None else None)
    return buf.getvalue() + tail

def save(name, b):
    with open(os.path.join(out, name), "wb") as f:
        f.write(b)

def zstd(name, b):
    r = subprocess.run(["zstd", "-q", "-c"], input=b, capture_output=True,
                       check=True)
    save(name, r.stdout)

manifest = entry(0)
last = len(members) - 1
crius = list(range(1, last))

for name, ti in (
        ("absolute", info("/tmp/gck-evil.img", size=4)),
        ("dotdot", info("criu/../../gck-evil.img", size=4)),
        ("symlink", info("criu/inventory.img", tarfile.SYMTYPE,
                         linkname="/etc/passwd")),
        ("hardlink", info("criu/inventory.img", tarfile.LNKTYPE,
                          linkname="gpuckpt.json")),
        ("chardev", info("criu/inventory.img", tarfile.CHRTYPE,
                         devmajor=1, devminor=3)),
        ("blockdev", info("criu/inventory.img", tarfile.BLKTYPE,
                          devmajor=7, devminor=0)),
        ("fifo", info("criu/inventory.img", tarfile.FIFOTYPE)),
        ("directory", info("criu", tarfile.DIRTYPE))):
    d = b"evil" if ti.isreg() else None
    save("unsafe-" + name + ".tar", tar([manifest, (ti, d)]))
    save("first-" + name + ".tar", tar([(ti, d)]))

# A header that declares 100 GiB, followed by a little data.
big = info("criu/pages-1.img", size=100 << 30)
head = tar([manifest])[:-1024]
head = head[:len(head) // 512 * 512]
while head.endswith(bytes(512)):
    head = head[:-512]
save("huge-declared.tar",
     head + big.tobuf(tarfile.PAX_FORMAT) + os.urandom(65536))
big = info("gpuckpt.json", size=100 << 30)
save("huge-manifest.tar", big.tobuf(tarfile.PAX_FORMAT) + os.urandom(65536))

# Real oversized entries that compress to almost nothing.
zstd("bomb-manifest.gck",
     tar([(info("gpuckpt.json", size=100 << 20), bytes(100 << 20))]))
zstd("bomb-entry.gck",
     tar([manifest, (info("criu/pages-1.img", size=100 << 20),
                     bytes(100 << 20))]))

# Well-formed tars that are not sound images.
save("after-trailer.tar",
     tar([entry(i) for i in range(len(members))] +
         [(info("criu/extra.img", size=4), b"evil")]))
save("no-trailer.tar", tar([entry(i) for i in range(last)]))
save("dropped.tar", tar([entry(i) for i in range(len(members))
                         if i != crius[-1]]))
order = [0, crius[1], crius[0]] + crius[2:] + [last]
save("reordered.tar", tar([entry(i) for i in order]))
save("duplicate.tar",
     tar([entry(i) for i in [0] + crius + [crius[-1], last]]))
save("duplicate-manifest.tar",
     tar([entry(i) for i in [0, 0] + crius + [last]]))
save("not-ours.tar", tar([(info("hello.txt", size=6), b"hello\n")]))
zstd("not-ours.gck", os.urandom(100000))

m = re.sub(rb'("format"\s*:\s*)1', rb"\g<1>2", datas[0], count=1)
if m == datas[0]:
    sys.exit("no format in the manifest")
save("format2.tar", tar([entry(0, m)] + [entry(i) for i in crius] +
                        [entry(last)]))
zstd("format2.gck", open(os.path.join(out, "format2.tar"), "rb").read())

# The same entries, rewritten by another tar writer: must restore.
save("rewritten.tar", tar([entry(i) for i in range(len(members))]))

# Digests as the image format defines them: XXH3 64-bit, seed 0.
xxh = ctypes.CDLL("libxxhash.so.0")
xxh.XXH3_64bits.restype = ctypes.c_uint64
xxh.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]

def xxh3(b):
    return "%016x" % xxh.XXH3_64bits(b, len(b))

def reg(name, data, typ=tarfile.REGTYPE):
    """An entry whose pax header holds the true digest of data."""
    t = info(name, typ, size=len(data) if typ == tarfile.REGTYPE else 0)
    t.pax_headers[DIGEST] = xxh3(data)
    return t, data if typ == tarfile.REGTYPE else None

def sparse(name, size, regions, stored, count=None):
    """A GNU sparse 1.0 entry: its map, then the regions stored."""
    m = "%d\n" % (len(regions) if count is None else count)
    m = (m + "".join("%d\n%d\n" % r for r in regions)).encode()
    m += bytes(-len(m) % 512)
    d = stored + b"".join(struct.pack("<QQ", o, n) for o, n in regions
                          if n > 0) + struct.pack("<Q", size)
    head, _, base = name.rpartition("/")
    t, _ = reg(head + "/GNUSparseFile.0/" + base, m + stored)
    t.pax_headers.update({
        DIGEST: xxh3(d), "GNU.sparse.major": "1", "GNU.sparse.minor": "0",
        "GNU.sparse.name": name, "GNU.sparse.realsize": str(size)})
    return t, m + stored

def lie(e, ustar=None, size=None):
    """Entry e with the size in its ustar header or pax record forged."""
    t, d = e
    t = copy.copy(t)
    t.pax_headers = dict(t.pax_headers)
    t.pax_headers["size"] = str(len(d)) if size is None else size
    b = t.tobuf(tarfile.PAX_FORMAT)
    if ustar is not None:
        h = bytearray(b[-512:])
        h[124:136] = b"%011o\0" % ustar
        h[148:156] = b" " * 8
        h[148:156] = b"%06o\0 " % sum(h)
        b = b[:-512] + bytes(h)
    return b + d + bytes(-len(d) % 512), t

def blob(ents, tail=b""):
    """A tar of entries (t, data) and of forged ones (bytes, t)."""
    b = b""
    for x, d in ents:
        if isinstance(x, bytes):
            b += x
        else:
            d = d or b""
            b += x.tobuf(tarfile.PAX_FORMAT) + d + bytes(-len(d) % 512)
    b += bytes(1024)
    return b + bytes(-len(b) % 10240) + tail

def trailer(ents):
    """The trailer that lists entries ents truly."""
    es = []
    for x, d in ents:
        t = d if isinstance(x, bytes) else x
        p = t.pax_headers
        size = p.get("GNU.sparse.realsize", p.get("size", t.size))
        es.append({"name": p.get("GNU.sparse.name", t.name),
                   "size": int(size) if str(size).isdigit() else t.size,
                   "xxh3": p.get(DIGEST)})
    return reg("gpuckpt.sums", json.dumps({
        "format": 1, "entries": es, "count": len(es),
        "bytes": sum(e["size"] for e in es)}).encode())

def image(body, head=None, after=(), tail=b""):
    """The manifest (or head), body and their trailer, then after."""
    ents = [head or manifest] + list(body)
    return blob(ents + [trailer(ents)] + list(after), tail)

def zc(b):
    return subprocess.run(["zstd", "-q", "-c"], input=b, capture_output=True,
                          check=True).stdout

body = [entry(i) for i in crius]
pname, pdata = members[crius[-1]].name, datas[crius[-1]]
psize = len(pdata)

# The builder itself: a sound image, and one with a sound entry with
# holes, both of which read back.
save("built.tar", image(body))
save("built-sparse.tar", image(body[:-1] + [sparse(
    pname, psize, [(0, 8192), (12288, psize - 12288)],
    pdata[:8192] + pdata[12288:])]))

# Deep and long names, after the manifest and as the first entry.
for name, path, typ in (
        ("deep-file", "criu/" + "a/" * 200 + "x.img", tarfile.REGTYPE),
        ("deep-dir", "criu/" + "d/" * 300, tarfile.DIRTYPE),
        ("long-name", "criu/" + "n" * 300 + ".img", tarfile.REGTYPE),
        ("longer-name", "criu/" + "n" * 5000 + ".img", tarfile.REGTYPE),
        ("long-path", "criu/" + ("p" * 250 + "/") * 20 + "x.img",
         tarfile.REGTYPE),
        ("control-name", "criu/in\nvent\r\x1b[2Jory.img", tarfile.REGTYPE)):
    e = reg(path, b"evil", typ)
    save(name + ".tar", image([e] + body))
    save("first-" + name + ".tar", blob([e]))

# Sizes: the ustar header and the pax record disagree, or the pax record
# is negative or out of range.
inv = body[0]
for name, kw in (
        ("ustar-size-larger", {"ustar": len(inv[1]) + 4096}),
        ("ustar-size-zero", {"ustar": 0}),
        ("pax-size-negative", {"size": "-1"}),
        ("pax-size-huge", {"size": str(1 << 62)}),
        ("pax-size-overflow", {"size": "9" * 30})):
    save(name + ".tar", image([lie(inv, **kw)] + body[1:]))
    zstd(name + ".gck", image([lie(inv, **kw)] + body[1:]))
    save("manifest-" + name + ".tar",
         image(body, head=lie(manifest, **kw)))

# Entries with holes whose maps are unsound.
for name, args in (
        ("sparse-beyond", (psize, [(0, 4096), (psize - 4096, 8192)],
                           pdata[:4096] + pdata[-4096:] + bytes(4096))),
        ("sparse-overlap", (psize, [(0, 8192), (4096, 8192)],
                            pdata[:8192] + pdata[4096:12288])),
        ("sparse-unordered", (psize, [(8192, 4096), (0, 4096)],
                              pdata[8192:12288] + pdata[:4096])),
        ("sparse-many", (400000, [(2 * i, 1) for i in range(200000)],
                         (pdata * 2)[:200000])),
        ("sparse-count", (psize, [(0, 4096)], pdata[:4096],
                          (1 << 64) - 1)),
        ("sparse-short", (psize, [(0, 4096)], pdata[:4096], 1000000))):
    e = sparse(pname, *args)
    save(name + ".tar", image(body[:-1] + [e]))
    zstd(name + ".gck", image(body[:-1] + [e]))

# The trailer twice; the trailer followed by something other than the
# end of the archive.
ents = [manifest] + body
sums = trailer(ents)
save("trailer-twice.tar", blob(ents + [sums, sums]))
junk = (b"not a tar header\n" * 32)[:512]
save("trailer-then-garbage.tar", blob(ents + [sums, (junk, None)]))
save("tail-garbage.tar", blob(ents + [sums], (junk * 2)[:1000]))
save("tail-garbage.gck", zc(blob(ents + [sums])) + b"garbage\n")
save("tail-frame.gck", zc(blob(ents + [sums])) + zc(b"garbage\n"))

# Sound images whose manifests are hostile to a reader that shows them:
# the most processes a manifest may list, in one long chain, and
# strings with control characters.
m = json.loads(datas[0])
m["root_pid"] = 1
m["processes"] = [{"pid": i, "ppid": i - 1, "comm": "p"}
                  for i in range(1, 65537)]
m["cuda"] = None
save("many-processes.tar",
     image(body, head=reg("gpuckpt.json", json.dumps(m).encode())))
m = json.loads(datas[0])
m["created"] = "2026-11-21T09:30:12Z\x1b[2J"
m["host"]["hostname"] = "host\r\nname"
for p in m["processes"]:
    p["comm"] = "ev\x1b]0;title\x07il\nline"
    p["cmdline"] = []
save("control-strings.tar",
     image(body, head=reg("gpuckpt.json", json.dumps(m).encode())))
EOF
}

test_expect_success 'make an image of a small workload' '
	start_workload src -m 8 &&
	started=$WPID &&
	test_status 0 "$GCKPT" -p $WPID -o good.gck &&
	wait_gone $WPID &&
	wait_gone $WCHILD &&
	zstd -dc good.gck >good.tar &&
	tar tf good.tar >list &&
	test "$(sed -n \$p list)" = gpuckpt.sums
'

test_expect_success 'find the offsets to damage' '
	offsets zstd good.gck >z.off &&
	offsets flip good.tar >flip.off &&
	offsets trunc good.tar >trunc.off &&
	test -s z.off && test -s flip.off && test -s trunc.off
'

for off in $(cat z.off 2>/dev/null); do
	test_expect_success "truncated zstd image: first $off bytes, piped" "
		head -c $off good.gck >bad &&
		refused '<bad' '$(test $off -ge 64 && echo '.*truncated')'
	"
done

for off in $(cat z.off 2>/dev/null); do
	test_expect_success "zstd image with byte $off flipped" "
		flip good.gck $off bad &&
		refused bad
	"
done

for off in $(cat trunc.off 2>/dev/null); do
	test_expect_success "truncated plain image: first $off bytes" "
		head -c $off good.tar >bad &&
		refused bad '$(test $off -ge 1024 && echo '.*truncated')'
	"
done

for off in $(cat flip.off 2>/dev/null); do
	test_expect_success "plain image with byte $off flipped, piped" "
		flip good.tar $off bad &&
		refused '<bad'
	"
done

# inspect MODE IMAGE: runs gpuinspect on IMAGE, a file in $TRASH or
# "|FILE" for FILE through a pipe, in MODE: verify, extract (into dir,
# which does not exist), extract-into (into dir, which exists and is
# empty), diff (good.gck with IMAGE), rdiff (IMAGE with good.gck), same
# (IMAGE with itself), show or json.  It runs in the empty directory
# work, in 1 GiB of memory (limit_memory), and is stopped after 30
# seconds (and killed 5 seconds later); out and err get its output, $_st
# its status.
inspect() {
	case $2 in
	"|"*)	_in=- ;;
	*)	_in=$TRASH/$2 ;;
	esac
	case $1 in
	verify)		set -- "$2" --verify "$_in" ;;
	extract)	set -- "$2" --extract=dir "$_in" ;;
	extract-into)	mkdir work/dir && set -- "$2" --extract=dir "$_in" ;;
	diff)		set -- "$2" --diff "$TRASH/good.gck" "$_in" ;;
	rdiff)		set -- "$2" --diff "$_in" "$TRASH/good.gck" ;;
	same)		set -- "$2" --diff "$_in" "$_in" ;;
	show)		set -- "$2" "$_in" ;;
	json)		set -- "$2" --json "$_in" ;;
	esac
	_img=$1
	shift
	(
		cd work && limit_memory 1024 || exit 99
		case $_img in
		"|"*)	cat "$TRASH/${_img#|}" |
			    timeout -k 5 30 "$GCKINSPECT" "$@" ;;
		*)	exec timeout -k 5 30 "$GCKINSPECT" "$@" ;;
		esac
	) >out 2>err
	_st=$?
}

# inspect_refuses MODE IMAGE: gpuinspect in MODE (see inspect) fails in
# an orderly way: status 1 (2 for a diff), nothing on stdout, one line
# on stderr that is not about memory, and no file left behind.
inspect_refuses() {
	inspect "$@"
	_want=1
	case $1 in
	*diff)	_want=2 ;;
	esac
	_why=
	if test $_st -ne $_want; then
		_why="$(status_words $_st), expected $_want"
	elif test -s out; then
		_why="wrote on stdout"
	elif test "$(wc -l <err)" -ne 1 || ! grep -q '^gpuinspect: ' err; then
		_why="did not write one line on stderr"
	elif grep -qi 'out of memory\|cannot allocate' err; then
		_why="ran out of memory"
	elif test "$1" = extract-into && ! test -d work/dir; then
		_why="removed the directory it was to extract into"
	elif test "$1" = extract-into && ! rmdir work/dir; then
		_why="left files in the directory it was to extract into"
	elif test -n "$(ls -A work)"; then
		_why="left files behind: $(ls -A work | head -n 3)"
	elif test -n "$(ls -A "$TMPDIR")"; then
		_why="left files in \$TMPDIR: $(ls -A "$TMPDIR" | head -n 3)"
	fi
	test -z "$_why" && return 0
	inspect_failed "$1 $2: $_why"
}

# status_words STATUS: what the exit status of a run of inspect says.
status_words() {
	case $1 in
	124)	echo "timed out" ;;
	137)	echo "timed out, then killed: it ignored SIGTERM" ;;
	*)	test "$1" -gt 128 &&
		    echo "killed by signal $(($1 - 128))" ||
		    echo "exited $1" ;;
	esac
}

# inspect_failed WHY: says why a run of gpuinspect failed and shows its
# output; clears work and $TMPDIR for the next.
inspect_failed() {
	echo >&2 "gpuinspect $1"
	echo >&2 "stdout:"
	head -c 1000 out | cat -v >&2
	echo >&2 "stderr:"
	head -c 1000 err | cat -v >&2
	rm -rf work "$TMPDIR" && mkdir work "$TMPDIR"
	return 1
}

# inspect_shows MODE IMAGE: gpuinspect's summary (MODE show or json) of
# IMAGE is that of the undamaged image, as good.MODE holds it.
inspect_shows() {
	inspect "$@"
	test $_st -eq 0 && test ! -s err && test_cmp good.$1 out &&
	    return 0
	inspect_failed "$1 $2: $(status_words $_st)"
}

# inspect_succeeds MODE IMAGE: gpuinspect in MODE (see inspect) exits 0
# in time, without a word on stderr.
inspect_succeeds() {
	inspect "$@"
	test $_st -eq 0 && test ! -s err && return 0
	inspect_failed "$1 $2: $(status_words $_st)"
}

# inspect_damaged zstd|tar: gpuinspect refuses bad, a damaged copy of
# good.gck or good.tar, in every mode that reads it whole, and in its
# summary whenever the damage reaches the head of the tar stream (the
# manifest and its padding, head.good): a summary that reads only the
# head gives that of the undamaged image otherwise.
inspect_damaged() {
	inspect_refuses verify bad &&
	inspect_refuses extract "|bad" &&
	inspect_refuses diff bad || return 1
	if test $1 = zstd; then
		zstd -dcq <bad 2>/dev/null
	else
		cat bad
	fi | head -c "$(wc -c <head.good)" >head.bad
	if cmp -s head.good head.bad; then
		inspect_shows json "|bad" && inspect_shows show "|bad"
	else
		inspect_refuses json "|bad" && inspect_refuses show "|bad"
	fi
}

# inspect_evil FILE: gpuinspect refuses FILE in every mode that reads it
# whole, and in its summary where the damage is in the head; otherwise
# the summary, which reads only the head, is that of the undamaged image.
inspect_evil() {
	for _m in verify extract extract-into diff rdiff; do
		inspect_refuses $_m "$1" || return 1
	done
	case ${1##*/} in
	first-*|huge-manifest.*|bomb-manifest.*|not-ours.*|format2.*|\
	    manifest-*)
		inspect_refuses show "$1" && inspect_refuses json "$1" ;;
	*)	inspect_shows json "|$1" ;;
	esac
}

# json_member FILE KEY: member KEY of the JSON object in FILE.
json_member() {
	python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}

# relay FILE COUNT: writes FILE on stdout, 64 KiB at a time, until the
# reader goes away; COUNT gets how many bytes it could write.
relay() {
	python3 - "$@" <<'EOF'
import os, sys

n = 0
with open(sys.argv[1], "rb") as f:
    try:
        while True:
            b = memoryview(f.read(65536))
            if not b:
                break
            while b:
                k = os.write(1, b)
                n += k
                b = b[k:]
    except BrokenPipeError:
        pass
with open(sys.argv[2], "w") as f:
    print(n, file=f)
EOF
}

# gpuinspect --verify IMAGE-MAKER OFFSETS: every damaged copy fails.
inspect_all() {
	_bad=
	for _o in $(cat "$2"); do
		case $1 in
		trunc-*) head -c $_o "${1#trunc-}" >bad ;;
		flip-*) flip "${1#flip-}" $_o bad ;;
		esac
		"$GCKINSPECT" --verify bad >/dev/null 2>&1
		test $? -eq 1 || _bad="$_bad $_o"
	done
	test -z "$_bad" && return 0
	echo >&2 "gpuinspect --verify did not exit 1 at offsets:$_bad"
	return 1
}

test_expect_success 'gpuinspect --verify rejects every damaged copy' '
	inspect_all trunc-good.gck z.off &&
	inspect_all flip-good.gck z.off &&
	inspect_all trunc-good.tar trunc.off &&
	inspect_all flip-good.tar flip.off
'

test_expect_success 'the head of the image, and its summaries' '
	mkdir work &&
	offsets head good.tar >head.off &&
	head -c "$(cat head.off)" good.tar >head.good &&
	test "$(wc -c <head.good)" -gt 1024 &&
	inspect json "|good.gck" &&
	test $_st -eq 0 && test_must_be_empty err &&
	mv out good.json &&
	test "$(json_member good.json root_pid)" = $WPID &&
	inspect show "|good.gck" &&
	test $_st -eq 0 && test_must_be_empty err &&
	mv out good.show &&
	inspect_shows json "|good.tar" &&
	inspect_shows show "|good.tar"
'

for off in $(cat z.off 2>/dev/null); do
	test_expect_success "gpuinspect: zstd image cut at $off bytes" "
		head -c $off good.gck >bad &&
		inspect_damaged zstd
	"
done

for off in $(cat z.off 2>/dev/null); do
	test_expect_success "gpuinspect: zstd image with byte $off flipped" "
		flip good.gck $off bad &&
		inspect_damaged zstd
	"
done

for off in $(cat trunc.off 2>/dev/null); do
	test_expect_success "gpuinspect: plain image cut at $off bytes" "
		head -c $off good.tar >bad &&
		inspect_damaged tar
	"
done

for off in $(cat flip.off 2>/dev/null); do
	test_expect_success "gpuinspect: plain image with byte $off flipped" "
		flip good.tar $off bad &&
		inspect_damaged tar
	"
done

test_expect_success 'make hostile streams' '
	mkdir evil &&
	evil evil
'

for kind in absolute dotdot symlink hardlink chardev blockdev fifo \
    directory; do
	test_expect_success "entry after the manifest: $kind" "
		refused evil/unsafe-$kind.tar 'unsafe entry'
	"
	test_expect_success "first entry: $kind" "
		refused evil/first-$kind.tar
	"
done

test_expect_success 'nothing was written outside the staging directory' '
	test ! -e /tmp/gck-evil.img &&
	test ! -e "$TRASH/../gck-evil.img" &&
	test ! -e "$TMPDIR/../gck-evil.img" &&
	test ! -e "$TRASH/gck-evil.img"
'

test_expect_success 'an entry that declares 100 GiB' '
	refused evil/huge-declared.tar ".*\\(too large\\|truncated\\)"
'

test_expect_success 'a manifest that declares 100 GiB' '
	refused evil/huge-manifest.tar ".*\\(too large\\|truncated\\)"
'

test_expect_success 'a 100 MiB manifest that compresses to nothing' '
	refused evil/bomb-manifest.gck ".*too large"
'

test_expect_success 'a 100 MiB entry that compresses to nothing' '
	refused evil/bomb-entry.gck ".*too large"
'

test_expect_success 'an entry after the trailer' '
	refused evil/after-trailer.tar
'

test_expect_success 'no trailer' '
	refused evil/no-trailer.tar ".*truncated"
'

test_expect_success 'an entry left out' '
	refused evil/dropped.tar
'

test_expect_success 'entries out of order' '
	refused evil/reordered.tar
'

test_expect_success 'an entry twice' '
	refused evil/duplicate.tar
'

test_expect_success 'the manifest twice' '
	refused evil/duplicate-manifest.tar
'

test_expect_success 'a tar that is not an image' '
	refused evil/not-ours.tar "not a gpuckpt image"
'

test_expect_success 'a zstd stream that is not an image' '
	refused "<evil/not-ours.gck" "not a gpuckpt image"
'

test_expect_success 'a newer format version' '
	refused evil/format2.tar \
	    "image format version 2 is newer than this version supports (1)"
'

test_expect_success 'a newer format version, compressed' '
	refused "<evil/format2.gck" "image format version 2 is newer"
'

for kind in deep-file deep-dir long-name longer-name long-path \
    control-name; do
	test_expect_success "entry after the manifest: $kind" "
		refused evil/$kind.tar 'unsafe entry'
	"
	test_expect_success "first entry: $kind" "
		refused evil/first-$kind.tar 'not a gpuckpt image'
	"
done

for kind in ustar-size-larger ustar-size-zero pax-size-negative \
    pax-size-huge pax-size-overflow; do
	test_expect_success "entry sizes: $kind" "
		refused evil/$kind.tar
	"
	test_expect_success "entry sizes: $kind, compressed" "
		refused '<evil/$kind.gck'
	"
	test_expect_success "manifest sizes: $kind" "
		refused evil/manifest-$kind.tar
	"
done

for kind in beyond overlap unordered many count short; do
	test_expect_success "map of holes: $kind" "
		refused evil/sparse-$kind.tar
	"
	test_expect_success "map of holes: $kind, compressed" "
		refused '<evil/sparse-$kind.gck'
	"
done

test_expect_success 'the trailer twice' '
	refused evil/trailer-twice.tar \
	    "corrupt image: entry .gpuckpt.sums. after the trailer"
'

test_expect_success 'a bad header after the trailer' '
	refused evil/trailer-then-garbage.tar
'

test_expect_success 'garbage after the end of the archive' '
	refused evil/tail-garbage.tar "corrupt image: data after the end"
'

test_expect_success 'garbage after the zstd frame' '
	refused "<evil/tail-garbage.gck" "corrupt image: data after the end"
'

test_expect_success 'a second zstd frame' '
	refused evil/tail-frame.gck "corrupt image: data after the end"
'

test_expect_success 'the streams built here read back when sound' '
	inspect_succeeds verify evil/built.tar &&
	inspect_succeeds same evil/built.tar &&
	test_must_be_empty out &&
	inspect_succeeds verify evil/built-sparse.tar
'

for f in $(ls evil 2>/dev/null); do
	case $f in
	rewritten.tar|built*.tar|many-processes.tar|control-strings.tar)
		continue ;;
	esac
	test_expect_success "gpuinspect refuses evil/$f" "
		inspect_evil evil/$f
	"
done

test_expect_success 'gpuinspect: a manifest of 65536 processes, in time' '
	inspect_succeeds json evil/many-processes.tar &&
	test "$(json_member out root_pid)" = 1 &&
	inspect_succeeds show evil/many-processes.tar &&
	test "$(sed "1,/^PID/d" out | wc -l)" -eq 65536 &&
	inspect_succeeds same evil/many-processes.tar &&
	test_must_be_empty out
'

test_expect_success 'gpuinspect shows no control characters of a manifest' '
	inspect_succeeds show evil/control-strings.tar &&
	if test "$(wc -l <out)" -ne "$(wc -l <good.show)" ||
	    LC_ALL=C tr -d "\n" <out | LC_ALL=C grep -q "[[:cntrl:]]"; then
		inspect_failed \
		    "show evil/control-strings.tar: control characters"
	fi
'

test_expect_success 'the image rewritten by another tar writer restores' '
	test_status 0 "$GCKRESTORE" evil/rewritten.tar >out &&
	echo $WPID >expect &&
	test_cmp expect out &&
	proc_running $WPID &&
	verify_workload $WPID &&
	kill_tree $WPID
'

test_expect_success 'the undamaged image restores' '
	test_status 0 "$GCKRESTORE" good.gck >out 2>err &&
	echo $WPID >expect &&
	test_cmp expect out &&
	test_must_be_empty err &&
	proc_running $WPID &&
	proc_running $WCHILD &&
	verify_workload $WPID &&
	test -z "$(ls -A "$TMPDIR")"
'

test_expect_success 'make a larger image' '
	start_workload big -m 64 &&
	started="$started $WPID" &&
	test_status 0 "$GCKPT" -p $WPID -o big.gck &&
	wait_gone $WPID &&
	wait_gone $WCHILD &&
	test "$(wc -c <big.gck)" -gt 16777216
'

test_expect_success 'the summary reads only the head of the image' '
	zstd -dc big.gck | tar xOf - gpuckpt.json >manifest &&
	test "$(json_member manifest root_pid)" = $WPID &&
	relay big.gck count | timeout -k 5 30 "$GCKINSPECT" --json >out 2>err &&
	test_must_be_empty err &&
	test "$(cat count)" -lt 1048576 &&
	test "$(json_member out root_pid)" = $WPID &&
	relay big.gck count | timeout -k 5 30 "$GCKINSPECT" >out 2>err &&
	test_must_be_empty err &&
	test "$(cat count)" -lt 1048576 &&
	grep "^processes .*, root $WPID" out
'

test_done
