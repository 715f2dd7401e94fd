#!/bin/sh
test_description='a restore from an image file writes the private memory in place'
. "$GCK_SRCDIR/lib.sh"

require_criu
require_python

FILLWORK=$GCK_TESTDIR/fillwork
started=
test_cleanup() {
	test -n "$started" && kill_tree $started >/dev/null 2>&1
}

# fw_verify PID WHO: asks process PID, the workload's parent or child
# (WHO), to check its memory, and waits for its answer: "ok".
fw_verify() {
	ask_verify "$FSTATUS" "$1" "$2"
}

# fw_field NAME: a field of the workload's ready line.
fw_field() {
	sed -n "s/^ready.* $1=\\([0-9a-f]*\\).*/\\1/p" "$FSTATUS"
}

# shared_kb PID ADDR: the kB of the mapping at ADDR (hexadecimal) of
# PID that other processes map too.  (After a restore criu keeps them
# shared or not as it finds them: its prepare_cow_vmas() does not
# always find a child's mapping that its parent has too.)
shared_kb() {
	awk -v a="$2" '/^[0-9a-f]+-[0-9a-f]+ / { split($1, r, "-"); on = r[1] == a }
	    on && /^Shared_(Clean|Dirty):/ { s += $2 }
	    END { print s + 0 }' /proc/$1/smaps
}

# in_place FILE: the bytes gpurestore -v says it wrote in place, and
# those it gave criu, as "N M"; nothing if it says neither.
in_place() {
	sed -n 's/^gpurestore: writing \([0-9]*\) bytes of memory in place, \([0-9]*\) through criu$/\1 \2/p' "$1"
}

# gone_all: the workload's processes are gone, and TMPDIR is empty.
gone_all() {
	proc_gone $FPID && proc_gone $FCHILD &&
	test -z "$(ls -A "$TMPDIR")"
}

test_expect_success 'start the workload: a parent with threads, and a child' '
	FSTATUS=$TRASH/fw.status &&
	(setsid "$FILLWORK" -f "$FSTATUS" -d "$TRASH" </dev/null \
	    >/dev/null 2>&1 &) &&
	wait_for_line "$FSTATUS" "^ready " 60 &&
	FPID=$(fw_field pid) &&
	FCHILD=$(fw_field child) &&
	started=$FPID &&
	test "$(proc_field $FCHILD 4)" = $FPID &&
	fw_verify $FPID parent &&
	fw_verify $FCHILD child
'

test_expect_success 'stopped, with a signal pending, it is checkpointed to a file' '
	kill -STOP $FPID &&
	wait_stopped $FPID &&
	kill -USR2 $FPID &&
	test_status 0 "$GCKPT" -p $FPID -o fw.gck &&
	wait_gone $FPID &&
	wait_gone $FCHILD &&
	started=
'

test_expect_success 'gpurestore FILE writes most of the memory in place' '
	test_status 0 "$GCKRESTORE" -vv fw.gck >out 2>err &&
	echo $FPID >expect &&
	test_cmp expect out &&
	started=$FPID &&
	set -- $(in_place err) &&
	echo "in place: $1 bytes, through criu: $2" &&
	# P, H and Q at least; R, N, F, S (twice) and the stacks go
	# through criu
	test "$1" -ge $(((24 + 4 + 8) << 20)) &&
	test "$2" -ge $(((4 + 4 + 4) << 20)) &&
	test "$2" -lt "$1"
'

test_expect_success 'the pending signal ran on its signal stack, and all memory is as it was' '
	wait_for_line "$FSTATUS" "^usr2 " 30 &&
	test "$(grep "^usr2 " "$FSTATUS")" = "usr2 ok" &&
	fw_verify $FPID parent &&
	fw_verify $FCHILD child &&
	test "$(proc_field $FCHILD 4)" = $FPID
'

test_expect_success 'the memory the child inherited is left to criu, in both' '
	for p in $FPID $FCHILD; do
		test_grep "^gpurestore: process $p: 0x$(fw_field s)-0x[0-9a-f]* left to criu: it may share pages with another process\$" err ||
		return 1
	done
'

test_expect_success 'from a pipe, criu restores all of it, and the same' '
	kill_tree $FPID &&
	wait_gone $FCHILD &&
	started= &&
	cat fw.gck | "$GCKRESTORE" -v >out 2>err &&
	test_cmp expect out &&
	started=$FPID &&
	test -z "$(in_place err)" &&
	wait_for_line "$FSTATUS" "^usr2 .*" 30 &&
	test "$(grep -c "^usr2 ok" "$FSTATUS")" = 2 &&
	fw_verify $FPID parent &&
	fw_verify $FCHILD child
'

# chunks IMAGE PID ADDR MIB: the trailer's entries, as JSON, of the
# chunks of process PID of IMAGE, extracted in x, all of whose pages lie
# in the MIB MiB at ADDR (hexadecimal).
chunks() {
	python3 - "$@" <<-\EOF
	import criuimg, json, subprocess, sys
	img, pid, s, mib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3], 16), \
	    int(sys.argv[4])
	pages_id, at = criuimg.layout("x", pid)
	t = subprocess.run(["tar", "-xOf", "-", "gpuckpt.sums"],
	                   input=subprocess.run(["zstd", "-dc", img],
	                   capture_output=True, check=True).stdout,
	                   capture_output=True, check=True).stdout
	name, pos, out = "criu/pages-%d.img.part" % pages_id, 0, []
	for e in json.loads(t)["entries"]:
	    if not e["name"].startswith(name):
	        continue
	    addrs = at[pos // criuimg.PAGE:(pos + e["size"]) // criuimg.PAGE]
	    pos += e["size"]
	    if addrs and all(s <= a < s + (mib << 20) for a in addrs):
	        out.append(e)
	print(json.dumps(out))
	EOF
}

# damage IMAGE OUT CHUNKS: OUT is IMAGE with a byte in the middle of the
# frame of the last of CHUNKS (chunks' output) changed.
damage() {
	python3 - "$@" <<-\EOF
	import json, sys
	b = bytearray(open(sys.argv[1], "rb").read())
	e = json.loads(sys.argv[3])[-1]
	b[e["at"] + e["zsize"] // 2] ^= 0x55
	open(sys.argv[2], "wb").write(b)
	EOF
}

# swap IMAGE OUT WHAT CHUNKS: OUT is IMAGE with the trailer's entries of
# two of CHUNKS (chunks' output) swapped: their digests (WHAT "digest")
# or their digests, frames and sizes ("entry").
swap() {
	python3 - "$@" <<-\EOF
	import hashlib, json, struct, subprocess, sys
	src, dst, what, pick = sys.argv[1], sys.argv[2], sys.argv[3], \
	    json.loads(sys.argv[4])
	b = open(src, "rb").read()
	fs = struct.unpack_from("<Q", b, len(b) - 8)[0]
	frame = subprocess.run(["zstd", "-dc"], input=b[fs:len(b) - 24],
	                       capture_output=True, check=True).stdout
	tj = subprocess.run(["tar", "-xOf", "-", "gpuckpt.sums"], input=frame,
	                    capture_output=True, check=True).stdout
	t = json.loads(tj)
	keys = ["sha256"] + (["at", "zsize", "size"] if what == "entry" else [])
	names = [e["name"] for e in pick]
	mine = [e for e in t["entries"] if e["name"] in names]
	# (a swap keeps the trailer's length)
	pairs = [(x, y) for x in mine for y in mine if x is not y]
	assert pairs, "no two chunks to swap"
	x, y = pairs[0]
	for k in keys:
	    x[k], y[k] = y[k], x[k]
	nj = json.dumps(t, separators=(",", ":")).encode()
	assert len(nj) == len(tj)
	old = hashlib.sha256(tj).hexdigest().encode()
	new = hashlib.sha256(nj).hexdigest().encode()
	nf = frame.replace(tj, nj).replace(old, new)
	assert len(nf) == len(frame)
	open(dst + ".tar", "wb").write(nf)
	z = subprocess.run(["zstd", "-q", "-c", "--check", dst + ".tar"],
	                   capture_output=True, check=True).stdout
	open(dst, "wb").write(b[:fs] + z + b[len(b) - 24:])
	EOF
}

test_expect_success 'an image file whose footer names the trailer of another: refused before criu' '
	test_status 0 "$GCKPT" -R -p $FPID -o fw2.gck &&
	kill_tree $FPID &&
	wait_gone $FCHILD &&
	started= &&
	python3 - fw.gck fw2.gck mix.gck <<-\EOF &&
	# the image of fw.gck, followed by fw2.gck, whose trailer (and so
	# the footer at the end) says where its own frames are in the whole
	import hashlib, io, json, struct, subprocess, sys, tarfile
	a = open(sys.argv[1], "rb").read()[:-24]
	b = open(sys.argv[2], "rb").read()
	fs = struct.unpack("<Q", b[-8:])[0]
	t = json.loads(subprocess.run(["tar", "-xOf", "-", "gpuckpt.sums"],
	    input=subprocess.run(["zstd", "-dc"], input=b[fs:-24],
	    capture_output=True, check=True).stdout, capture_output=True,
	    check=True).stdout)
	for e in t["entries"]:
	    e["at"] += len(a)
	j = json.dumps(t, separators=(",", ":")).encode()
	out = io.BytesIO()
	with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as w:
	    ti = tarfile.TarInfo("gpuckpt.sums")
	    ti.size = len(j)
	    ti.pax_headers = {"SCHILY.xattr.gpuckpt.sha256":
	                      hashlib.sha256(j).hexdigest()}
	    w.addfile(ti, io.BytesIO(j))
	open(sys.argv[3] + ".tar", "wb").write(out.getvalue())
	z = subprocess.run(["zstd", "-q", "-c", "--check", sys.argv[3] + ".tar"],
	                   capture_output=True, check=True).stdout
	open(sys.argv[3], "wb").write(a + b[:fs] + z + b[-24:-8] +
	                              struct.pack("<Q", len(a) + fs))
	EOF
	test_status 1 "$GCKRESTORE" mix.gck >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpurestore: corrupt image: its footer names the trailer of another image\$" err &&
	gone_all
'

test_expect_success 'a chunk written in place damaged in the file: refused, the tree killed' '
	test_status 0 "$GCKINSPECT" --extract=x fw.gck &&
	damage fw.gck bad.gck "$(chunks fw.gck $FPID $(fw_field p) 24)" &&
	test_status 1 "$GCKRESTORE" bad.gck >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpurestore: corrupt image: .*; the restored process tree $FPID was killed\$" err &&
	gone_all
'

test_expect_success 'a chunk read ahead for criu damaged in the file: refused before criu' '
	damage fw.gck bad2.gck "$(chunks fw.gck $FPID $(fw_field r) 4)" &&
	test_status 1 "$GCKRESTORE" bad2.gck >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpurestore: corrupt image .bad2.gck.: bad frame at offset [0-9]*\$" err &&
	gone_all
'

test_expect_success 'a trailer that gives a chunk read ahead the digest of another: refused before criu' '
	swap fw.gck swapd.gck digest "$(chunks fw.gck $FPID $(fw_field r) 4)" &&
	test_status 1 "$GCKRESTORE" swapd.gck >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpurestore: corrupt image [0-9a-f]* (.swapd.gck.): its chunk at offset [0-9]* does not match its digest (sha256 [0-9a-f]*\\.\\.\\.)\$" err &&
	gone_all
'

test_expect_success 'a trailer that gives a chunk read ahead the frame of another: refused' '
	swap fw.gck swape.gck entry "$(chunks fw.gck $FPID $(fw_field r) 4)" &&
	test_status 1 "$GCKRESTORE" swape.gck >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpurestore: corrupt image: .pages-[0-9]*.img. part [0-9]* is not the chunk its trailer names; the restored process tree $FPID was killed\$" err &&
	gone_all
'

test_expect_success 'nothing left in TMPDIR' '
	test -z "$(ls -A "$TMPDIR")"
'

test_done
