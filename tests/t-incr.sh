#!/bin/sh
test_description='incremental images: gpuckpt --parent, gpurestore --parent, gpuinspect --flatten'
. "$GCK_SRCDIR/lib.sh"

require_criu
require_python

started=
test_cleanup() {
	test -n "$started" && kill_tree $started >/dev/null 2>&1
}

start() {
	start_workload "$@" || return 1
	started="$started $WPID"
}

# image_id IMAGE: the id in its manifest.
image_id() {
	zstd -dc "$1" 2>/dev/null | tar -xOf - gpuckpt.json |
	    python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])'
}

# sums IMAGE: its trailer, as JSON.
sums() {
	zstd -dc "$1" 2>/dev/null | tar -xOf - gpuckpt.sums
}

fsize() {
	stat -c %s "$1"
}

test_expect_success 'image A: the whole workload' '
	start w -m 128 -r 5 &&
	NEWSUM=$WSUM &&
	verify_now $WPID &&
	test_status 0 "$GCKPT" -R -p $WPID -o A.gck 2>err &&
	test_must_be_empty err &&
	A=$(image_id A.gck) &&
	test ${#A} -eq 32
'

test_expect_success 'the footer names the trailer frame; zstd -dc skips it' '
	python3 - A.gck <<-\EOF
	import struct, sys
	b = open(sys.argv[1], "rb").read()
	magic, n, tag, at = struct.unpack("<II8sQ", b[-24:])
	assert magic == 0x184D2A5E and n == 16 and tag == b"gpuckpt\0", b[-24:]
	assert b[at:at + 4] == b"\x28\xb5\x2f\xfd", at
	EOF
	zstd -dc A.gck | tar -tf - >list &&
	test_grep "^gpuckpt.sums\$" list
'

test_expect_success 'image B --parent=A after 5% of the memory changed: < 0.1 of A' '
	rewrite && B1SUM=$NEWSUM &&
	test_status 0 "$GCKPT" -R --parent=A.gck -p $WPID -o B.gck \
	    2>err &&
	test_must_be_empty err &&
	B=$(image_id B.gck) &&
	a=$(fsize A.gck) && b=$(fsize B.gck) &&
	echo "A $a bytes, B $b bytes" &&
	test $((b * 10)) -lt $a &&
	zstd -dc B.gck | tar -xOf - gpuckpt.json >B.json &&
	python3 - B.json "$A" <<-\EOF
	import json, sys
	m = json.load(open(sys.argv[1]))
	p = m["parent"]
	assert p == {"id": sys.argv[2], "chain": [sys.argv[2]]}, p
	EOF
	sums B.gck >B.sums &&
	python3 - B.sums <<-\EOF
	import json, sys
	t = json.load(open(sys.argv[1]))
	refs = [e for e in t["entries"] if e.get("ref")]
	assert refs and all(e["name"].startswith("criu/pages-") for e in refs)
	assert t["bytes"] == sum(e["size"] for e in t["entries"])
	EOF
'

test_expect_success 'image C --parent=B: a chain of two' '
	rewrite && CSUM=$NEWSUM &&
	test_status 0 "$GCKPT" -k --parent=B.gck -p $WPID -o C.gck 2>err &&
	test_must_be_empty err &&
	wait_gone $WPID &&
	C=$(image_id C.gck) &&
	zstd -dc C.gck | tar -xOf - gpuckpt.json >C.json &&
	python3 - C.json "$B" "$A" <<-\EOF
	import json, sys
	p = json.load(open(sys.argv[1]))["parent"]
	assert p == {"id": sys.argv[2], "chain": sys.argv[2:4]}, p
	EOF
'

test_expect_success 'zstd -dc C | tar -t lists it' '
	zstd -dc C.gck | tar -tvf - >list &&
	test_grep "gpuckpt.json" list &&
	test_grep "criu/pages-" list &&
	test_grep "gpuckpt.sums" list
'

test_expect_success 'restore of C without its parents: refused before anything' '
	test_status 1 "$GCKRESTORE" C.gck >out 2>err &&
	test_must_be_empty out &&
	echo "gpurestore: image $C needs its parent image $B: not found (give it with --parent)" >expect &&
	test_cmp expect err &&
	proc_gone $WPID &&
	test -z "$(ls -A "$TMPDIR")"
'

test_expect_success 'restore of B with another image named as its parent' '
	test_status 1 "$GCKRESTORE" --parent=C.gck B.gck >out 2>err &&
	test_must_be_empty out &&
	echo "gpurestore: image $B needs its parent image $A: not found (give it with --parent)" >expect &&
	test_cmp expect err &&
	proc_gone $WPID &&
	test -z "$(ls -A "$TMPDIR")"
'

test_expect_success 'restore of C with only B: A is named' '
	test_status 1 "$GCKRESTORE" --parent=B.gck C.gck >out 2>err &&
	echo "gpurestore: image $C needs its parent image $A: not found (give it with --parent)" >expect &&
	test_cmp expect err &&
	test -z "$(ls -A "$TMPDIR")"
'

test_expect_success 'restore of C given A and B: memory and counter go on' '
	test_status 0 "$GCKRESTORE" --parent=A.gck --parent=B.gck C.gck \
	    >out 2>err &&
	test_must_be_empty err &&
	echo $WPID >expect &&
	test_cmp expect out &&
	NEWSUM=$CSUM &&
	verify_now $WPID &&
	before=$VCOUNTER &&
	sleep 0.3 &&
	verify_now $WPID &&
	test $VCOUNTER -gt $before &&
	test -z "$(ls -A "$TMPDIR")"
'

test_expect_success 'restore of C from a directory of images, read from a pipe' '
	kill_tree $WPID &&
	mkdir chain && cp A.gck B.gck chain/ &&
	cat C.gck | test_status 0 "$GCKRESTORE" -vv --parent=chain >out 2>err &&
	NEWSUM=$CSUM &&
	verify_now $WPID &&
	# the decompressing workers read chunks of the parents ahead
	sed -n "s/^gpurestore: \([0-9]*\) bytes read from parent images, \([0-9]*\) of them ahead, by the decompressing workers\$/\1 \2/p" \
	    err >ahead &&
	test_line_count ahead 1 &&
	read all ahead <ahead &&
	echo "from the parents: $all bytes, $ahead of them ahead" &&
	test $all -gt $((32 << 20)) &&
	test $ahead -gt 0 && test $ahead -le $all
'

test_expect_success 'a damaged chunk of A that B refers to: refused, nothing left' '
	kill_tree $WPID &&
	cp A.gck Abad.gck &&
	sums B.gck >B.sums && sums A.gck >A.sums &&
	python3 - Abad.gck A.sums B.sums <<-\EOF
	import json, sys
	a = json.load(open(sys.argv[2]))["entries"]
	b = json.load(open(sys.argv[3]))["entries"]
	want = {e["sha256"] for e in b if e.get("ref")}
	# a chunk A stores once: of one stored twice, a reader may take the
	# good copy, rightly
	once = [e for e in a if sum(x["sha256"] == e["sha256"] for x in a) == 1]
	e = next(e for e in once if e["sha256"] in want and e["zsize"] > 100)
	with open(sys.argv[1], "r+b") as f:
	    f.seek(e["at"] + e["zsize"] // 2)
	    c = f.read(1)
	    f.seek(e["at"] + e["zsize"] // 2)
	    f.write(bytes([c[0] ^ 0x40]))
	EOF
	test_status 1 "$GCKRESTORE" --parent=Abad.gck B.gck >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "corrupt parent image" err &&
	proc_gone $WPID &&
	test -z "$(ls -A "$TMPDIR")"
'

test_expect_success 'a chain with a cycle is refused' '
	python3 - C.gck cyc.gck "$C" <<-\EOF
	import io, json, sys, tarfile
	src, dst, cid = sys.argv[1:4]
	import subprocess
	raw = subprocess.run(["zstd", "-dc", src], capture_output=True).stdout
	t = tarfile.open(fileobj=io.BytesIO(raw))
	m = json.loads(t.extractfile("gpuckpt.json").read())
	m["parent"]["chain"].append(m["parent"]["id"])
	data = json.dumps(m).encode()
	out = io.BytesIO()
	o = tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT)
	ti = tarfile.TarInfo("gpuckpt.json")
	ti.size = len(data)
	ti.mode = 0o600
	import hashlib
	ti.pax_headers = {"SCHILY.xattr.gpuckpt.sha256":
	    hashlib.sha256(data).hexdigest()}
	o.addfile(ti, io.BytesIO(data))
	o.close()
	open(dst, "wb").write(out.getvalue())
	EOF
	test_status 1 "$GCKRESTORE" --parent=A.gck --parent=B.gck cyc.gck \
	    >out 2>err &&
	echo "gpurestore: corrupt image $C: its chain of parents has a cycle" >expect &&
	test_cmp expect err &&
	test -z "$(ls -A "$TMPDIR")"
'

# evil IN OUT WHAT: a copy of image IN, made hostile in one way.
evil() {
	python3 - "$@" <<-\EOF
	import hashlib, io, json, struct, subprocess, sys, tarfile
	src, dst, what = sys.argv[1:4]
	b = open(src, "rb").read()
	def zc(raw):
	    return subprocess.run(["zstd", "-q", "-c"], input=raw,
	                          capture_output=True, check=True).stdout
	def rewrite(pick, change):
	    raw = subprocess.run(["zstd", "-dc"], input=b, capture_output=True,
	                         check=True).stdout
	    t = tarfile.open(fileobj=io.BytesIO(raw))
	    out = io.BytesIO()
	    o = tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT)
	    done = False
	    for x in t.getmembers():
	        d = t.extractfile(x).read()
	        y = tarfile.TarInfo(x.name)
	        y.mode, y.mtime, y.uname, y.gname = 0o600, x.mtime, "root", "root"
	        y.pax_headers = {k: v for k, v in x.pax_headers.items()
	                         if k.startswith("SCHILY.")}
	        if not done and pick(x):
	            d = change(y, d)
	            done = True
	        y.size = len(d)
	        o.addfile(y, io.BytesIO(d))
	    o.close()
	    assert done
	    return zc(out.getvalue())
	def as_ref(size):
	    def change(y, d):
	        y.pax_headers["SCHILY.xattr.gpuckpt.ref"] = str(size(d))
	        return b""
	    return change
	at = struct.unpack("<Q", b[-8:])[0]
	if what == "after-footer":
	    b = b + b"x"
	elif what == "footer-elsewhere":
	    b = b[:-8] + struct.pack("<Q", 0)
	elif what == "stray-skippable":
	    first = json.loads(subprocess.run(["sh", "-c", "zstd -dc | tar xOf - gpuckpt.sums"],
	                       input=b, capture_output=True).stdout)["entries"][1]["at"]
	    b = b[:first] + struct.pack("<II", 0x184D2A50, 4) + b"evil" + b[first:]
	elif what == "ref-not-memory":
	    b = rewrite(lambda x: x.name == "criu/inventory.img",
	                as_ref(lambda d: len(d)))
	elif what == "ref-in-full-image":
	    b = rewrite(lambda x: x.name.startswith("criu/pages-"),
	                as_ref(lambda d: len(d)))
	elif what == "ref-size-zero":
	    b = rewrite(lambda x: x.name.startswith("criu/pages-"),
	                as_ref(lambda d: 0))
	open(dst, "wb").write(b)
	EOF
}

test_expect_success 'hostile: footers, stray frames and references out of place' '
	test_status 0 "$GCKINSPECT" --verify A.gck >out 2>err &&
	for w in after-footer footer-elsewhere stray-skippable \
	    ref-not-memory ref-in-full-image ref-size-zero; do
		case $w in
		ref-not-memory|ref-size-zero) in=B.gck ;;
		*) in=A.gck ;;
		esac &&
		evil $in evil-$w.gck $w &&
		test_status 1 "$GCKINSPECT" --verify --parent=A.gck \
		    evil-$w.gck >out 2>err &&
		test_must_be_empty out &&
		test_line_count err 1 &&
		test_status 1 "$GCKRESTORE" --parent=A.gck evil-$w.gck \
		    >out 2>err &&
		test_must_be_empty out &&
		test_line_count err 1 &&
		test -z "$(ls -A "$TMPDIR")" &&
		cp err evil-$w.err || { echo "$w: $(cat err)"; return 1; }
	done &&
	test_grep "reference where data must be" evil-ref-not-memory.err &&
	test_grep "reference where data must be" evil-ref-in-full-image.err &&
	test_grep "has a bad reference" evil-ref-size-zero.err &&
	test_grep "data after the footer" evil-after-footer.err &&
	test_grep "footer does not name the last frame" \
	    evil-footer-elsewhere.err &&
	test_grep "data after the end of the compressed stream" \
	    evil-stray-skippable.err
'

test_expect_success 'gpuinspect shows the parent and how much is new' '
	test_status 0 "$GCKINSPECT" C.gck >show 2>err &&
	test_must_be_empty err &&
	test_grep "^parent      $B (a chain of 2)\$" show &&
	test_grep "^new         .* stored, .* in its parents\$" show &&
	test_status 0 "$GCKINSPECT" --json C.gck >show.json &&
	sums C.gck >C.sums &&
	python3 - show.json C.sums "$B" "$A" <<-\EOF
	import json, sys
	img = json.load(open(sys.argv[1]))["image"]
	t = json.load(open(sys.argv[2]))
	assert img["parent"] == sys.argv[3], img
	assert img["chain"] == sys.argv[3:5], img
	ref = sum(e["size"] for e in t["entries"] if e.get("ref"))
	assert img["referenced_bytes"] == ref > 0, img
	assert img["stored_bytes"] + ref == t["bytes"], img
	assert img["referenced_bytes"] > 10 * img["stored_bytes"], img
	EOF
	"$GCKINSPECT" --json A.gck >showA.json &&
	python3 - showA.json <<-\EOF
	import json, sys
	img = json.load(open(sys.argv[1]))["image"]
	assert img["parent"] is None and img["chain"] == [], img
	assert img["referenced_bytes"] == 0 < img["stored_bytes"], img
	EOF
'

test_expect_success 'gpuinspect --verify --parent checks every reference' '
	test_status 0 "$GCKINSPECT" --verify --parent=A.gck --parent=B.gck \
	    C.gck >out 2>err &&
	test_must_be_empty err &&
	test_grep "^image ok: .* read from its parents\$" out &&
	test_status 1 "$GCKINSPECT" --verify C.gck >out 2>err &&
	echo "gpuinspect: image $C needs its parent image $B: not found (give it with --parent)" >expect &&
	test_cmp expect err &&
	test_status 1 "$GCKINSPECT" --verify --parent=Abad.gck B.gck \
	    >out 2>err &&
	test_line_count err 1 &&
	test_grep "^gpuinspect: corrupt parent image" err
'

test_expect_success 'gpuinspect --flatten: C made whole, restored with no parent' '
	test_status 0 "$GCKINSPECT" --flatten=flat.gck --parent=chain \
	    C.gck >out 2>err &&
	test_must_be_empty out &&
	test_must_be_empty err &&
	test "$(image_id flat.gck)" = "$C" &&
	zstd -dc flat.gck | tar -xOf - gpuckpt.json >flat.json &&
	! grep "\"parent\"" flat.json &&
	sums flat.gck >flat.sums &&
	! grep "\"ref\"" flat.sums &&
	zstd -dc flat.gck | tar -tf - >list &&
	test_grep "^criu/pages-" list &&
	test_status 0 "$GCKINSPECT" --verify flat.gck >out &&
	test_status 0 "$GCKRESTORE" flat.gck >out 2>err &&
	test_must_be_empty err &&
	NEWSUM=$CSUM &&
	verify_now $WPID &&
	kill_tree $WPID
'

test_expect_success 'a failed --flatten leaves no file' '
	test_status 1 "$GCKINSPECT" --flatten=none.gck --parent=B.gck \
	    C.gck 2>err &&
	test_grep "needs its parent image $A" err &&
	test -z "$(ls none.gck* 2>/dev/null)"
'

test_done
