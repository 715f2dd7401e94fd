#!/bin/sh
test_description='device memory through the driver'"'"'s custom storage (CUDA 13.4)'
. "$GCK_SRCDIR/lib.sh"

require_criu
require_python

. "$GCK_SRCDIR/cuda-lib.sh"
A=GPU-aaaaaaaa-1111-4000-8000-000000000001
B=GPU-bbbbbbbb-1111-4000-8000-000000000002
GIB=1073741824
MIB=1048576

mkdir -p "$F/inject" "$F/delay" || exit 1
printf '%s 9.0 %s 0000:01:00.0 NVIDIA H100 80GB HBM3\n' $A $GIB >"$F/gpus"
printf '%s 9.0 %s 0000:02:00.0 NVIDIA H100 80GB HBM3\n' $B $GIB >>"$F/gpus"
# a driver of CUDA 13.4
drv134() { echo "13040 595.45.04" >"$F/driver"; }
drv130() { echo "13000 580.65.06" >"$F/driver"; }
drv134

# running_on: the tree runs on, RUNNING, its device memory as it was,
# its counters moving on, and nothing of ours is left behind.
running_on() {
	for _p in $WPIDS; do proc_running $_p || return 1; done &&
	states RUNNING &&
	verify_workload $WPID &&
	_c=$VCOUNTER &&
	sleep 0.3 &&
	verify_workload $WPID &&
	test $VCOUNTER -gt $_c &&
	grep "^verify ok" "$WSTATUS" | tail -n 1 | grep " devs=$WDEVS\$" &&
	test -z "$(ls -A "$TMPDIR")"
}

# given_ok: gpurestore -v (its err) gave every byte of device memory the
# manifest lists, checked, to the GPUs, the workers some of it, all of
# theirs from page-locked buffers, as the stand-in saw (copies).
given_ok() {
	sed -n "s/.*device memory given to the GPUs: \([0-9]*\) bytes by the decompressing workers (\([0-9]*\) from page-locked buffers), \([0-9]*\) by the reader\$/\1 \2 \3/p" err >given &&
	read _w _pin _r <given &&
	echo "workers $_w ($_pin pinned), reader $_r" &&
	awk '$1 == "htod" && $6 == "pinned" { n += $5 } END { print n + 0 }' copies >pinned &&
	test $(cat pinned) -eq $_pin &&
	test $_pin -eq $_w &&
	test $_w -gt 0 &&
	python3 -c 'import json; print(sum(f["size"] for f in json.load(open("manifest"))["files"] if f.get("cuda")))' >dev.bytes &&
	test $((_w + _r)) -eq $(cat dev.bytes)
}

# anon_kb PID: the private anonymous memory process PID has, in kB.
anon_kb() {
	awk '/^RssAnon:/ { print $2 }' /proc/$1/status
}

# dump_anon OP KB: each process's private memory at the dump (rss.log)
# against what it had before (rss.before, in the order of WPIDS), -OP
# (lt, ge) that and KB more.
dump_anon() {
	_op=$1
	_kb=$2
	set -- $(cat rss.before)
	for _p in $WPIDS; do
		_now=$(awk -v p=$_p '$1 == p { print $2 }' rss.log)
		echo "process $_p: RssAnon $1 kB before, $_now kB at the dump"
		test -n "$_now" && test $_now -$_op $(($1 + _kb)) || return 1
		shift
	done
}

# A criu that notes, before it dumps, the private anonymous memory of
# each process it is to dump (criu dump -t PID: the tree of PID), and,
# where keep-spool is, copies the spool of device memory as it is then.
cat >rsscriu <<EOF
#!/bin/sh
case " \$* " in
*" dump "*)
	test ! -e "$TRASH/keep-spool" || cp -R "$TMPDIR"/*.gpu "$TRASH/spool.dump"
	t=\$(echo " \$* " | sed -n 's/.* -t \([0-9]*\) .*/\1/p')
	for p in \$t \$(cat /proc/\$t/task/*/children 2>/dev/null); do
		echo "\$p \$(awk '/^RssAnon:/ { print \$2 }' /proc/\$p/status)"
	done >>"$TRASH/rss.log" ;;
esac
exec "$CRIU" "\$@"
EOF
chmod +x rsscriu

# manifest IMAGE: its manifest, into file manifest.
manifest() {
	zstd -qdc "$1" 2>/dev/null | tar -xO gpuckpt.json >manifest ||
	tar -xOf "$1" gpuckpt.json >manifest
}

test_expect_success 'checkpoint: device memory through custom storage, not the host memory of the process' '
	cuda_start w1 -n 2 -m 64 -d 0,1 &&
	for p in $WPIDS; do anon_kb $p; done >rss.before &&
	: >"$F/log" && : >rss.log && : >keep-spool &&
	GCK_CRIU="$TRASH/rsscriu" "$GCKPT" -v -p $WPID -o img.gck >out 2>err &&
	rm keep-spool &&
	for p in $WPIDS; do wait_gone $p || exit 1; done &&
	test_must_be_empty out &&
	for p in $WPIDS; do
		grep "^gpuckpt: process $p: device memory of 1 GPU through custom storage\$" err || exit 1
	done &&
	# each chunk as it was compressed during the copy, none again, in
	# segments of 16 MiB: 64 MiB and the page of the counter make 5
	test "$(grep -c "^gpuckpt: image: cuda-[0-9]*-0\.mem: 65 chunks as the spool compressed them, 0 referred to or patched, 0 from their data, in 5 segments\$" err)" = 2 &&
	# no process held more than 8 MiB more than before when criu came
	dump_anon lt 8192 &&
	test -z "$(ls -A "$TMPDIR")"
'

test_expect_success 'the manifest names the files of device memory, after criu'"'"'s' '
	manifest img.gck &&
	zstd -qdc img.gck | tar -t >list &&
	python3 - $WPIDS <<-\EOF
	import json, sys
	pids = [int(p) for p in sys.argv[1:]]
	m = json.load(open("manifest"))
	procs = {p["pid"]: p for p in m["cuda"]["processes"]}
	files = {f["name"]: f for f in m["files"]}
	for pid in pids:
	    cs = procs[pid]["custom_storage"]
	    assert len(cs) == 1, cs
	    f = cs[0]
	    assert f["file"] == "cuda-%d-0.mem" % pid, f
	    # 64 MiB and the page of the counter, in files of 16 MiB
	    assert 64 << 20 <= f["size"] < 65 << 20, f
	    assert f["segment"] == 16 << 20, f
	    segs = ["%s.%05d" % (f["file"], s) for s in range(5)]
	    for s, name in enumerate(segs):
	        assert files[name]["memory"] is True
	        assert files[name]["cuda"] is True
	        assert files[name]["size"] == min(16 << 20,
	                                          f["size"] - s * (16 << 20))
	    assert sum(files[n]["size"] for n in segs) == f["size"]
	    assert f["file"] not in files
	# the first segment of each GPU, then the second...: in the list
	# and in the image
	order = ["cuda-%d-0.mem.%05d" % (pid, s) for s in range(5)
	         for pid in pids]
	assert [f["name"] for f in m["files"] if f.get("cuda")] == order
	names = [l.strip() for l in open("list")]
	dev = []
	for n in names:
	    n = n[len("criu/"):].split(".part")[0]
	    if n.startswith("cuda-") and (not dev or dev[-1] != n):
	        dev.append(n)
	assert dev == order, dev
	crit = [i for i, n in enumerate(names) if n.startswith("criu/") and
	        not n.startswith("criu/cuda-")]
	dev = [i for i, n in enumerate(names) if n.startswith("criu/cuda-")]
	assert dev and max(crit) < min(dev), names
	# the processes'"'"' own pages hold none of it: far less than 64 MiB
	pages = sum(f["size"] for f in m["files"] if f["memory"] and
	            not f.get("cuda"))
	assert pages < 16 << 20, pages
	EOF
'

test_expect_success 'the image holds the very chunks the copy compressed into the spool, before criu ran' '
	ls spool.dump/*.mem.idx >idx &&
	test_line_count idx 2 &&
	python3 - img.gck spool.dump/*.mem <<-\EOF
	import struct, sys
	img = open(sys.argv[1], "rb").read()
	where = []
	for path in sys.argv[2:]:
	    spool = open(path, "rb").read()
	    # zstd frames, each the entry of a chunk, as the image has them
	    assert spool[:4] == b"\x28\xb5\x2f\xfd", path
	    # the index: a header, then each chunk'"'"'s record (its length,
	    # where its frame is, how long, whether raw, its digest) and its
	    # pages'"'"' digests (format 3)
	    idx = open(path + ".idx", "rb").read()
	    size, nchunks, fmt = struct.unpack_from("=QQi", idx, 8)
	    assert fmt == 3 and nchunks == 65, (fmt, nchunks)
	    off, frames = 40, []
	    for c in range(nchunks):
	        ln, at, zlen, raw = struct.unpack_from("=QQQQ", idx, off)
	        assert raw == 0
	        frames.append(spool[at:at + zlen])
	        off += 64 + 16 * (ln // 4096)
	    # each segment of 16 chunks, its frames one after the other
	    at = []
	    for s in range(0, nchunks, 16):
	        i = img.find(b"".join(frames[s:s + 16]))
	        assert i > 0, (path, s)
	        at.append(i)
	    where.append(at)
	# segment s of the first GPU before that of the second, and that
	# before segment s + 1 of the first
	a, b = sorted(where)
	for s in range(len(a)):
	    assert a[s] < b[s] and (s + 1 == len(a) or b[s] < a[s + 1]), where
	EOF
'

test_expect_success 'gpuinspect shows which way each process'"'"'s device memory went' '
	"$GCKINSPECT" img.gck >summary &&
	for p in $WPIDS; do
		grep "^       pid $p (cudawork): 64.0 MiB, custom storage\$" summary || exit 1
	done &&
	"$GCKINSPECT" --json img.gck >doc &&
	python3 -c "
import json
d = json.load(open(\"doc\"))
s = [g[\"storage\"] for p in d[\"processes\"] for g in p[\"gpus\"]]
assert s == [\"custom\", \"custom\"], s
"
'

test_expect_success 'restore from the file: back onto the GPUs through custom storage' '
	: >"$F/log" && : >"$F/copies" &&
	"$GCKRESTORE" -v img.gck >out 2>err &&
	mv "$F/copies" copies &&
	echo $WPID >expect &&
	test_cmp expect out &&
	test_grep "device memory of 2 GPUs of 2 processes through custom storage: each chunk to its GPU as it is decompressed\$" err &&
	! grep "process [0-9]*: device memory of 1 GPU through custom storage\$" err &&
	# every byte of both GPUs given, checked, by the workers or the reader
	manifest img.gck &&
	given_ok &&
	running_on
'

test_expect_success 'cat IMAGE | gpurestore: from a stream, each chunk to its GPU as the manifest places it' '
	"$GCKPT" -p $WPID -o img2.gck 2>err &&
	for p in $WPIDS; do wait_gone $p || exit 1; done &&
	manifest img2.gck &&
	# every GPU'"'"'s file in chunks of 1 MiB, the last the rest
	python3 - <<-\EOF &&
	import json
	m = json.load(open("manifest"))
	cs = [c for p in m["cuda"]["processes"] for c in p["custom_storage"]]
	assert len(cs) == 2 and all(c["chunk"] == 1 << 20 for c in cs), cs
	EOF
	zstd -qdc img2.gck >img2.tar &&
	python3 - <<-\EOF &&
	import re, tarfile
	sizes = {}
	for x in tarfile.open("img2.tar"):
	    m = re.match(r"criu/(cuda-[0-9]+-[0-9]+\.mem\.[0-9]{5})"
	                 r"(\.part([0-9]+))?$", x.name)
	    if m:
	        sizes.setdefault(m.group(1), []).append(x.size)
	# 2 GPUs of 5 segments: 4 of 16 chunks, the last a page
	assert len(sizes) == 10, sizes
	for f, s in sizes.items():
	    if f.endswith(".00004"):
	        assert s == [4096], (f, s)
	    else:
	        assert s == [1 << 20] * 16, (f, s)
	EOF
	rm img2.tar &&
	: >"$F/copies" &&
	cat img2.gck | "$GCKRESTORE" -v >out 2>err &&
	mv "$F/copies" copies &&
	test_cmp expect out &&
	test_grep "device memory of 2 GPUs of 2 processes through custom storage: each chunk to its GPU as it is decompressed\$" err &&
	given_ok &&
	# both GPUs fed as the stream comes, not one after the other: the
	# copies to the one and to the other alternate, a segment or so
	# at a time (one after the other would make 2 runs)
	awk "\$1 == \"htod\" { print \$2 }" copies | uniq | wc -l >runs &&
	echo "$(cat runs) runs of copies to one GPU" &&
	test $(cat runs) -ge 6 &&
	running_on
'

test_expect_success 'gpuckpt | gpurestore on one host: each GPU'"'"'s file to its GPU, all at once' '
	: >"$F/copies" &&
	"$GCKPT" -p $WPID 2>ck.err | "$GCKRESTORE" -v >out 2>pipe.err &&
	mv "$F/copies" pipe.copies &&
	test_must_be_empty ck.err &&
	test_cmp expect out &&
	# the image is read whole first, its source still here; then a
	# thread a GPU, from page-locked buffers, every byte of the GPUs
	# (of the sizes the image of the same tree gives)
	sed -n "s/.*device memory given to the GPUs from the extracted image: \([0-9]*\) bytes (\([0-9]*\) from page-locked buffers), 2 GPUs, 2 at once\$/\1 \2/p" pipe.err >given &&
	read _b _pin <given &&
	awk "\$1 == \"htod\" && \$6 == \"pinned\" { n += \$5 } END { print n + 0 }" pipe.copies >pinned &&
	test $(cat pinned) -eq $_pin &&
	test $_pin -eq $_b &&
	manifest img.gck &&
	python3 -c "import json; print(sum(f[\"size\"] for f in json.load(open(\"manifest\"))[\"files\"] if f.get(\"cuda\")))" >dev.bytes &&
	test $_b -eq $(cat dev.bytes) &&
	test $_b -gt 0 &&
	# both processes'"'"' GPUs given memory
	awk "\$1 == \"htod\" { print \$2, \$3 }" pipe.copies | sort -u >gpus &&
	test $(wc -l <gpus) -eq 2 &&
	running_on
'

test_expect_success 'the same, a copy to a GPU failing: the restored tree killed, the image kept, and it restores' '
	echo CUDA_ERROR_LAUNCH_FAILED >"$F/inject/htod" &&
	{ "$GCKPT" -p $WPID 2>ck.err; echo $? >ck.st; } |
	    "$GCKRESTORE" >rs.out 2>rs.err
	test $? = 1 &&
	rm "$F/inject/htod" &&
	test "$(cat ck.st)" = 0 &&
	test_must_be_empty ck.err &&
	test_must_be_empty rs.out &&
	test_line_count rs.err 1 &&
	test_grep "^gpurestore: cannot give process [0-9]* (.cudawork.) its memory of GPU 0 at offset [0-9]*: CUDA_ERROR_LAUNCH_FAILED; the restored process tree was killed, and its source had been ended: the image is kept in .$TMPDIR/gpuckpt\\.[A-Za-z0-9]*\\.gck. (restore it from there)\$" rs.err &&
	kept=$(sed -n "s/.*image is kept in .\\([^ ]*\\.gck\\). .*/\\1/p" rs.err) &&
	test -f "$kept" &&
	for p in $WPIDS; do wait_gone $p || return 1; done &&
	"$GCKRESTORE" "$kept" >out &&
	test_cmp expect out &&
	rm "$kept" &&
	running_on
'

test_expect_success 'a snapshot (-R) through custom storage leaves them running' '
	"$GCKPT" -R -p $WPID -o snap.gck 2>err &&
	test_must_be_empty err &&
	running_on &&
	manifest snap.gck &&
	grep -q custom_storage manifest
'

test_expect_success '--parent: the device memory that did not change is referred to' '
	"$GCKPT" -v -R --parent snap.gck -p $WPID -o incr.gck 2>err &&
	# of the chunks in the spool, those the parent has are referred to
	awk "/chunks as the spool compressed them/ { n++
		if (\$4 > 4 || \$11 < 60 || \$16 != 0) bad = 1 }
	    END { exit !(n == 2 && !bad) }" err &&
	full=$(wc -c <snap.gck) && incr=$(wc -c <incr.gck) &&
	echo "full $full, incremental $incr bytes" &&
	test $incr -lt $((full / 4)) &&
	running_on &&
	"$GCKPT" -p $WPID -o last.gck --parent snap.gck 2>err &&
	for p in $WPIDS; do wait_gone $p || exit 1; done &&
	"$GCKRESTORE" --parent snap.gck last.gck >out 2>err &&
	test_cmp expect out &&
	running_on &&
	rm -f incr.gck last.gck img2.gck
'

test_expect_success 'gpurestore --gpu-map: each GPU'"'"'s memory onto the GPU it is mapped to' '
	"$GCKPT" -p $WPID -o map.gck 2>err &&
	for p in $WPIDS; do wait_gone $p || exit 1; done &&
	"$GCKRESTORE" --gpu-map $A=$B,$B=$A map.gck >out 2>err &&
	test_cmp expect out &&
	WDEVS=$B,$A &&
	running_on &&
	"$GCKPT" -p $WPID -o map.gck 2>err &&
	for p in $WPIDS; do wait_gone $p || exit 1; done &&
	"$GCKRESTORE" --gpu-map $A=$B,$B=$A map.gck >out 2>err &&
	WDEVS=$A,$B &&
	running_on &&
	rm map.gck
'

test_expect_success 'a spool without room for the device memory: refused, the tree left running' '
	mkdir small &&
	mount -t tmpfs -o size=32m tmpfs small &&
	test_status 1 env TMPDIR="$TRASH/small" "$GCKPT" -p $WPID \
	    -o nospace.gck >out 2>err;
	st=$?
	rest=$(ls -A small)
	umount small
	test $st -eq 0 &&
	test_line_count err 1 &&
	test_grep "^gpuckpt: process [0-9]* (.cudawork.): GPU checkpoint through custom storage failed: the memory of its GPU 0: No space left on device (in the spool) (and 1 more); process tree $WPID left running\$" err &&
	test -z "$rest" &&
	test ! -e nospace.gck &&
	running_on
'

test_expect_success 'formats 1 and 2: device memory in parts, or in chunks without patches' '
	for f in 1 2; do
		"$GCKPT" --format $f -p $WPID -o f$f.gck 2>err &&
		test_must_be_empty err &&
		for p in $WPIDS; do wait_gone $p || exit 1; done &&
		manifest f$f.gck &&
		grep -q custom_storage manifest &&
		"$GCKRESTORE" f$f.gck >out 2>err &&
		test_cmp expect out &&
		running_on &&
		rm f$f.gck || return 1
	done
'

test_expect_success 'a damaged chunk of device memory is refused' '
	"$GCKPT" -c none -p $WPID -o raw.gck 2>err &&
	for p in $WPIDS; do wait_gone $p || exit 1; done &&
	python3 - <<-\EOF
	import re, tarfile
	t = tarfile.open("raw.gck")
	ms = t.getmembers()
	# a chunk halfway through: those before it reach the GPUs
	c = [x for x in ms if x.name.startswith("criu/cuda-")
	     and x.size > 8192]
	m = c[len(c) // 2]
	t.close()
	# where the damaged byte lies in the memory of its GPU
	file = re.match(r"criu/cuda-[0-9]+-[0-9]+\.mem", m.name).group(0)
	off = sum(x.size for x in ms[:ms.index(m)] if x.name == file or
	          x.name.startswith(file + "."))
	pid, gpu = re.match(r"criu/cuda-([0-9]+)-([0-9]+)", m.name).groups()
	open("damaged", "w").write("%s %s %d\n" % (pid, gpu, off + 4096))
	f = open("raw.gck", "r+b")
	f.seek(m.offset_data + 4096)
	b = f.read(1)
	f.seek(m.offset_data + 4096)
	f.write(bytes([b[0] ^ 0xff]))
	f.close()
	EOF
	read dpid dgpu doff <damaged &&
	# from the file (its trailer places the chunks), then from a stream
	# (its manifest does)
	for how in file stream; do
		: >"$F/copies" &&
		if test $how = file; then
			test_status 1 "$GCKRESTORE" raw.gck >out 2>err
		else
			cat raw.gck | test_status 1 "$GCKRESTORE" >out 2>err
		fi &&
		mv "$F/copies" copies &&
		test_line_count err 1 &&
		test_grep "^gpurestore: corrupt image: checksum mismatch in .*cuda-" err &&
		for p in $WPIDS; do proc_gone $p || return 1; done &&
		test -z "$(ls -A "$TMPDIR")" &&
		# the damaged chunk never reached its GPU, though others did
		grep "^htod " copies >htod &&
		awk -v p=$dpid -v g=$dgpu -v o=$doff "\$1 == \"htod\" && \$2 == p && \$3 == g && \$4 <= o && o < \$4 + \$5" copies >reached &&
		test_must_be_empty reached || return 1
	done &&
	rm raw.gck
'

test_expect_success 'the image restores once more after that' '
	"$GCKRESTORE" img.gck >out 2>err &&
	test_cmp expect out &&
	running_on
'

test_expect_success 'a stream whose manifest misplaces the chunks is refused, in one line' '
	"$GCKPT" -c none -p $WPID -o raw.gck 2>err &&
	for p in $WPIDS; do wait_gone $p || exit 1; done &&
	# chunks of 512 KiB, the manifest says, its digest made to match
	python3 - <<-\EOF &&
	import hashlib, re, tarfile
	t = tarfile.open("raw.gck")
	m = t.getmember("gpuckpt.json")
	t.close()
	b = bytearray(open("raw.gck", "rb").read())
	old = bytes(b[m.offset_data:m.offset_data + m.size])
	new, n = re.subn(rb"\"chunk\": *1048576", b"\"chunk\":  524288", old)
	assert n == 2 and len(new) == len(old), n
	b[m.offset_data:m.offset_data + m.size] = new
	h0 = hashlib.sha256(old).hexdigest().encode()
	h1 = hashlib.sha256(new).hexdigest().encode()
	i = b.index(h0)
	assert i < m.offset_data, i
	b[i:i + len(h0)] = h1
	open("lying.gck", "wb").write(b)
	EOF
	cat lying.gck | test_status 1 "$GCKRESTORE" >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpurestore: corrupt image: .cuda-$WPID-0\.mem\.00000. part 0 holds more than the 524288 bytes its manifest gives; the restored process tree $WPID was killed\$" err &&
	for p in $WPIDS; do proc_gone $p || exit 1; done &&
	test -z "$(ls -A "$TMPDIR")" &&
	"$GCKRESTORE" raw.gck >out 2>err &&
	test_cmp expect out &&
	running_on &&
	rm raw.gck lying.gck
'

test_expect_success 'a copy failing between the map and the complete call leaves them running' '
	echo CUDA_ERROR_ILLEGAL_ADDRESS >"$F/inject/dtoh" &&
	test_status 1 "$GCKPT" -p $WPID -o bad.gck >out 2>err &&
	rm "$F/inject/dtoh" &&
	test_line_count err 1 &&
	test_grep "^gpuckpt: process [0-9]* (.cudawork.): GPU checkpoint failed: CUDA_ERROR_ILLEGAL_ADDRESS.*; process tree $WPID left running\$" err &&
	test ! -e bad.gck &&
	running_on
'

test_expect_success 'a criu failure after the complete call: the memory comes back from the spool' '
	fake_criu fail-after &&
	: >"$F/log" &&
	test_status 1 env GCK_CRIU="$TRASH/fakecriu" \
	    "$GCKPT" -p $WPID -o bad.gck >out 2>err &&
	test_grep "criu dump.*injected failure.*; process tree $WPID left running\$" err &&
	test ! -e bad.gck &&
	running_on
'

test_expect_success 'with --parent: the chunks the parent has, kept uncompressed in the spool, come back too' '
	fake_criu fail-after &&
	cat >lscriu <<-EOF &&
	#!/bin/sh
	ls "$TMPDIR"/*.gpu >"$TRASH/spool.ls"
	exec "$TRASH/fakecriu" "\$@"
	EOF
	chmod +x lscriu &&
	test_status 1 env GCK_CRIU="$TRASH/lscriu" \
	    "$GCKPT" --parent img.gck -p $WPID -o bad.gck >out 2>err &&
	test_grep "criu dump.*injected failure.*; process tree $WPID left running\$" err &&
	test "$(grep -c "^[0-9]*-0\.mem\.raw\$" spool.ls)" = 2 &&
	test ! -e bad.gck &&
	running_on
'

test_expect_success 'SIGKILL of gpuckpt after the complete call: its guard brings them back from the spool' '
	# a criu that says it has started, then holds the dump there: the
	# processes are CHECKPOINTED by then, their memory in the spool
	cat >holdcriu <<-EOF &&
	#!/bin/sh
	case " \$* " in
	*" dump "*)
		echo \$\$ >"$TRASH/criu.started"
		exec sleep 60 ;;
	esac
	exec "$CRIU" "\$@"
	EOF
	chmod +x holdcriu &&
	rm -f criu.started &&
	{ env GCK_CRIU="$TRASH/holdcriu" "$GCKPT" -p $WPID -o bad.gck \
	    >out 2>err & } &&
	gpid=$! &&
	i=0 &&
	until test -s criu.started || test $i -gt 300; do
		i=$((i + 1))
		sleep 0.1
	done &&
	test -s criu.started &&
	states CHECKPOINTED &&
	test -n "$(ls "$TMPDIR"/*.gpu)" &&
	kill -KILL $gpid &&
	{ wait $gpid || :; } &&
	# then criu ends, without a dump: the guard takes over from there
	kill -KILL $(cat criu.started) &&
	i=0 &&
	until states RUNNING 2>/dev/null || test $i -gt 150; do
		i=$((i + 1))
		sleep 0.1
	done &&
	i=0 &&
	while test -n "$(ls -A "$TMPDIR")" && test $i -lt 100; do
		i=$((i + 1))
		sleep 0.1
	done &&
	running_on &&
	test ! -e bad.gck
'

test_expect_success 'a process the driver will not take that way goes through its host memory' '
	victim=$(echo $WPIDS | cut -d" " -f2) &&
	echo CUDA_ERROR_NOT_SUPPORTED >"$F/inject/storage.$victim" &&
	"$GCKPT" -v -p $WPID -o mixed.gck >out 2>err &&
	rm "$F/inject/storage.$victim" &&
	for p in $WPIDS; do wait_gone $p || exit 1; done &&
	test_grep "^gpuckpt: process $victim: the driver would not take custom storage (CUDA_ERROR_NOT_SUPPORTED): device memory through its host memory\$" err &&
	test_grep "^gpuckpt: process $WPID: device memory of 1 GPU through custom storage\$" err &&
	manifest mixed.gck &&
	python3 - $WPID $victim <<-\EOF
	import json, sys
	root, victim = int(sys.argv[1]), int(sys.argv[2])
	p = {x["pid"]: x for x in json.load(open("manifest"))["cuda"]["processes"]}
	assert "custom_storage" in p[root] and "custom_storage" not in p[victim]
	EOF
	"$GCKRESTORE" mixed.gck >out 2>err &&
	test_cmp expect out &&
	running_on &&
	rm mixed.gck
'

test_expect_success '--gpu-staging: through the host memory of the processes' '
	for p in $WPIDS; do anon_kb $p; done >rss.before &&
	: >rss.log &&
	GCK_CRIU="$TRASH/rsscriu" "$GCKPT" --gpu-staging -p $WPID \
	    -o staged.gck 2>err &&
	test_must_be_empty err &&
	for p in $WPIDS; do wait_gone $p || exit 1; done &&
	# the driver staged each one'"'"'s 64 MiB in its host memory
	dump_anon ge 65536 &&
	manifest staged.gck &&
	! grep -q custom_storage manifest &&
	"$GCKRESTORE" staged.gck >out 2>err &&
	test_cmp expect out &&
	running_on
'

test_expect_success 'a driver without custom storage: the checkpoint goes through host memory' '
	drv130 &&
	test "$("$FAKECTL" driver | grep -o "storage=[a-z]*")" = storage=no &&
	"$GCKPT" -v -p $WPID -o old.gck 2>err &&
	for p in $WPIDS; do wait_gone $p || exit 1; done &&
	! grep "custom storage" err &&
	manifest old.gck &&
	! grep -q custom_storage manifest &&
	"$GCKRESTORE" old.gck >out 2>err &&
	test_cmp expect out &&
	running_on &&
	rm old.gck
'

test_expect_success 'an image of custom storage on a driver without it: refused before anything runs' '
	"$GCKPT" -p $WPID --gpu-staging -o keep.gck 2>err &&
	for p in $WPIDS; do wait_gone $p || exit 1; done &&
	test_status 1 "$GCKRESTORE" img.gck >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpurestore: cannot restore: the device memory of process $WPID (.cudawork.) went through custom storage, which needs CUDA 13.4 (driver API 13040) or newer; this driver is CUDA 13.0$" err &&
	for p in $WPIDS; do proc_gone $p || exit 1; done &&
	test -z "$(ls -A "$TMPDIR")" &&
	drv134 &&
	"$GCKRESTORE" keep.gck >out 2>err &&
	test_cmp expect out &&
	running_on
'

test_expect_success '--suspend parks device memory in files of ours, not the processes'"'"' host memory' '
	for p in $WPIDS; do anon_kb $p; done >rss.before &&
	"$GCKPT" -v --suspend -p $WPID >out 2>err &&
	test_must_be_empty out &&
	states CHECKPOINTED &&
	for p in $WPIDS; do test ! -e "$F/mem/$A/$p" && test ! -e "$F/mem/$B/$p" || exit 1; done &&
	start=$(awk "{ print \$22 }" /proc/$WPID/stat) &&
	park="$TMPDIR/gpuckpt-parked.$WPID.$start" &&
	test_grep "device memory of 2 processes parked in .$park.\$" err &&
	for p in $WPIDS; do
		s=$(stat -c %s "$park/$p-0.mem") &&
		test $s -ge $((64 * MIB)) || exit 1
	done &&
	set -- $(cat rss.before) &&
	for p in $WPIDS; do
		now=$(anon_kb $p) &&
		echo "process $p: RssAnon $1 kB before, $now kB suspended" &&
		test $now -lt $(($1 + 8192)) || exit 1
		shift
	done &&
	"$GCKRESTORE" --resume --gpu-map $A=$B,$B=$A -p $WPID >out 2>err &&
	test_must_be_empty err &&
	test ! -e "$park" &&
	states RUNNING &&
	verify_workload $WPID &&
	grep "^verify ok" "$WSTATUS" | tail -n 1 | grep " devs=$B,$A\$" &&
	"$GCKPT" --suspend -p $WPID &&
	"$GCKRESTORE" --resume --gpu-map $B=$A,$A=$B -p $WPID &&
	WDEVS=$A,$B &&
	running_on
'

test_expect_success 'a suspend that fails after the parking leaves them on their GPUs, nothing parked' '
	child=$(echo $WPIDS | cut -d" " -f2) &&
	echo CUDA_ERROR_ILLEGAL_ADDRESS >"$F/inject/dtoh" &&
	test_status 1 "$GCKPT" --suspend -p $WPID >out 2>err &&
	rm "$F/inject/dtoh" &&
	test_line_count err 1 &&
	test_grep "GPU checkpoint failed: CUDA_ERROR_ILLEGAL_ADDRESS.*left running on its GPUs\$" err &&
	running_on
'

test_expect_success '--suspend --gpu-staging: through the host memory, nothing parked' '
	"$GCKPT" --suspend --gpu-staging -p $WPID &&
	states CHECKPOINTED &&
	test -z "$(ls -A "$TMPDIR")" &&
	"$GCKRESTORE" --resume -p $WPID &&
	running_on
'

# (late: the older images no longer hold the memory the tree has)
test_expect_success '--parent after one page in 64 rewritten all over: patches of the parent'"'"'s chunks' '
	"$GCKPT" -R -p $WPID -o base.gck 2>err &&
	test_must_be_empty err &&
	n=$(grep -c "^rewrote " "$WSTATUS"; :) &&
	kill -USR2 $WPID &&
	i=0 && while test "$(grep -c "^rewrote " "$WSTATUS")" -le $n; do
		i=$((i + 1)) && test $i -lt 100 && sleep 0.1 || return 1
	done &&
	"$GCKPT" -v --parent base.gck -p $WPID -o scat.gck 2>err &&
	for p in $WPIDS; do wait_gone $p || exit 1; done &&
	# every chunk of the root'"'"'s a patch (or a reference), none whole
	# but its last, the page of its counter alone, which changed
	grep "^gpuckpt: image: cuda-$WPID-0\.mem: 1 chunks as the spool compressed them, 64 referred to or patched, 0 from their data, in 5 segments\$" err &&
	full=$(wc -c <base.gck) && incr=$(wc -c <scat.gck) &&
	echo "full $full, incremental $incr bytes" &&
	test $incr -lt $((full / 8)) &&
	"$GCKRESTORE" --parent base.gck scat.gck >out 2>err &&
	test_cmp expect out &&
	running_on &&
	rm -f base.gck scat.gck
'

# (last: the memory of the tree is lost with it)
test_expect_success 'a spool damaged before the rollback: never given to the GPU, said' '
	cat >dmgcriu <<-EOF &&
	#!/bin/sh
	case " \$* " in
	*" dump "*)
		"$CRIU" "\$@" || exit
		for f in "$TMPDIR"/*.gpu/*.mem; do
			printf XXXXXXXX | dd of="\$f" bs=1 seek=65536 conv=notrunc 2>/dev/null
		done
		echo "Error (criu/cr-dump.c:2184): injected failure" >&2
		exit 1 ;;
	esac
	exec "$CRIU" "\$@"
	EOF
	chmod +x dmgcriu &&
	test_status 1 env GCK_CRIU="$TRASH/dmgcriu" \
	    "$GCKPT" -p $WPID -o bad.gck >out 2>err &&
	test_line_count err 1 &&
	test_grep "^gpuckpt: criu dump of pid $WPID failed: injected failure; process tree $WPID left running, but process [0-9]* (.cudawork.): GPU restore through custom storage failed: the spool.s copy of the memory of its GPU 0 is damaged (it does not match its digest), and was not given to the GPU" err &&
	test ! -e bad.gck &&
	for p in $WPIDS; do proc_running $p || exit 1; done &&
	"$FAKECTL" state $WPID >state &&
	echo CHECKPOINTED >want &&
	test_cmp want state
'

test_expect_success 'a GPU the process holds nothing on: an empty file, given back from a file and from a stream' '
	cuda_start w3 -n 1 -m 8 -d 0 -e 1 &&
	echo $WPID >expect &&
	for how in file stream; do
		"$GCKPT" -p $WPID -o empty.gck 2>err &&
		test_must_be_empty err &&
		wait_gone $WPID &&
		manifest empty.gck &&
		python3 - $WPID <<-\EOF &&
		import json, sys
		pid = int(sys.argv[1])
		m = json.load(open("manifest"))
		cs = {p["pid"]: p for p in m["cuda"]["processes"]}[pid]
		cs = cs["custom_storage"]
		assert [c["file"] for c in cs] == ["cuda-%d-%d.mem" % (pid, k)
		                                   for k in (0, 1)], cs
		assert cs[0]["size"] >= 8 << 20 and cs[1]["size"] == 0, cs
		files = {f["name"]: f for f in m["files"]}
		# less than 16 MiB: one segment; an empty one
		for k in (0, 1):
		    name = "cuda-%d-%d.mem.%05d" % (pid, k, 0)
		    assert files[name]["size"] == cs[k]["size"], name
		    assert "cuda-%d-%d.mem.00001" % (pid, k) not in files
		EOF
		if test $how = file; then
			"$GCKRESTORE" -v empty.gck >out 2>err
		else
			cat empty.gck | "$GCKRESTORE" -v >out 2>err
		fi &&
		test_cmp expect out &&
		test_grep "device memory of 2 GPUs of 1 process through custom storage: each chunk to its GPU as it is decompressed\$" err &&
		running_on || return 1
	done &&
	rm empty.gck
'

test_done
