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
import copy, io, json, os, re, subprocess, sys, tarfile, time

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

test_done
