#!/bin/sh
test_description='images streamed both ways: no staging copy, zero pages as holes'
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

# A script for elsewhere: restores standard input with gpurestore
# (its options $1), and has the restored workload check itself.
restore_there() {
	cat <<-EOF
	"$GCKRESTORE" $1 >rs.out 2>rs.err
	echo \$? >rs.st
	test "\$(cat rs.st)" = 0 || exit 0
	n=\$(grep -c '^verify ' "$WSTATUS")
	kill -USR1 \$(cat rs.out)
	i=0
	while test "\$(grep -c '^verify ' "$WSTATUS")" -le \$n &&
	    test \$i -lt 100; do
		i=\$((i + 1))
		sleep 0.1
	done
	EOF
}

# restored_there: the restore elsewhere succeeded, with the same root
# PID, and the restored workload found its memory, thread and child
# intact.
restored_there() {
	test "$(cat rs.st)" = 0 &&
	test "$(cat rs.out)" = "$WPID" &&
	grep "^verify ok sum=$WSUM .* child=$WCHILD gap=[0-9]*\$" "$WSTATUS" >/dev/null
}

# bytes DIR: the bytes held by the regular files under DIR.
bytes() {
	find "$1" -type f -printf '%s\n' 2>/dev/null |
	    awk '{ t += $1 } END { print t + 0 }'
}

# watch DIR OUT: until OUT.stop appears, writes the most bytes ever seen
# under DIR to OUT.
watch_dir() {
	_peak=0
	while ! test -e "$2.stop"; do
		_b=$(bytes "$1")
		test "$_b" -gt "$_peak" && _peak=$_b
		echo $_peak >"$2"
		sleep 0.02
	done
}

test_expect_success 'a 128 MiB tree, half of its pages zeros' '
	start big -m 128 -z 50 &&
	verify_workload $WPID
'

test_expect_success 'gpuckpt | gpurestore elsewhere: nothing staged on disk' '
	mkdir ck rs &&
	restore_there "-v" >there.sh &&
	{ watch_dir ck ck.peak & } && w1=$! &&
	{ watch_dir rs rs.peak & } && w2=$! &&
	TMPDIR=$TRASH/ck "$GCKPT" -v -p $WPID 2>ck.err |
	    TMPDIR=$TRASH/rs elsewhere "$(cat there.sh)" &&
	touch ck.peak.stop rs.peak.stop &&
	wait $w1 $w2 &&
	restored_there &&
	# handed over through a pipe: left stopped, for the user to end
	test "$(proc_field $WPID 3)" = T &&
	test_grep "^gpuckpt: process tree $WPID left stopped: its image went to a pipe" ck.err &&
	kill -KILL $WPID $WCHILD &&
	# criu logs only: not a page of the 128 MiB
	test "$(cat ck.peak)" -lt 1048576 &&
	test "$(cat rs.peak)" -lt 1048576 &&
	test -z "$(ls -A ck)" && test -z "$(ls -A rs)" &&
	test_grep "zero pages left as holes" ck.err &&
	! grep "reading the whole image" rs.err
'

# The zero pages of private anonymous memory are left out of the image
# (t-zeropages.sh); those of a private mapping of a file stay, as holes.
test_expect_success 'zero pages are holes, not data' '
	start zero -F -m 64 -z 90 &&
	"$GCKPT" -c none -p $WPID -o zero.tar 2>err &&
	test_must_be_empty err &&
	python3 - zero.tar $((64 << 20)) <<-\EOF
	import sys, tarfile
	path, mem = sys.argv[1], int(sys.argv[2])
	import os
	size = os.path.getsize(path)
	# 10% of the pages hold data: the image is not much more
	assert size < 0.12 * mem, "image %d bytes for %d of memory" % (size, mem)
	holes = 0
	with tarfile.open(path) as t:
	    for m in t.getmembers():
	        if m.name.startswith("criu/pages-"):
	            kept = sum(l for o, l in m.sparse) if m.sparse else m.size
	            holes += m.size - kept
	assert holes > 0.85 * mem, "only %d bytes of holes" % holes
	EOF
'

test_expect_success 'the image with holes verifies and restores' '
	"$GCKINSPECT" --verify zero.tar >out &&
	test_grep "^image ok" out &&
	restore_there "" >there.sh &&
	elsewhere "$(cat there.sh)" <zero.tar &&
	restored_there
'

test_expect_success 'stock tar extracts the holes as zeros' '
	mkdir x &&
	tar -C x -xf zero.tar &&
	cat x/criu/pages-1.img.part* >pages.img &&
	python3 - zero.tar pages.img <<-\EOF
	import json, os, sys, tarfile
	with tarfile.open(sys.argv[1]) as t:
	    man = json.load(t.extractfile("gpuckpt.json"))
	size = {f["name"]: f["size"] for f in man["files"]}["pages-1.img"]
	assert os.path.getsize(sys.argv[2]) == size
	data = open(sys.argv[2], "rb").read()
	zero = sum(1 for i in range(0, len(data), 4096)
	           if data[i:i + 4096].count(0) == 4096)
	assert zero * 4096 > 0.85 * (64 << 20), "%d zero pages" % zero
	EOF
'

test_expect_success 'every byte of a map of holes and its data is checked' '
	python3 - zero.tar >flips <<-\EOF &&
	import sys, tarfile
	with tarfile.open(sys.argv[1]) as t:
	    m = next(m for m in t.getmembers() if m.sparse)
	# pax header and its records, then the ustar header, then the map
	map_start = m.offset + 512 + 512 + 512
	data = m.offset_data
	print(map_start, map_start + 3, data - 1, data, data + 4097,
	      data + sum(l for o, l in m.sparse) - 1)
	EOF
	test "$(wc -w <flips)" = 6 &&
	for at in $(cat flips); do
		cp zero.tar bad.tar &&
		python3 -c "import sys; f = open(\"bad.tar\", \"r+b\")
f.seek(int(sys.argv[1])); b = f.read(1); f.seek(int(sys.argv[1]))
f.write(bytes([b[0] ^ 0x20]))" $at &&
		test_must_fail "$GCKINSPECT" --verify bad.tar >out 2>err &&
		test_line_count err 1 &&
		test_grep "^gpuinspect: .*\(corrupt\|truncated\)" err ||
		return 1
	done
'

test_expect_success 'a threaded tree: five snapshots in a row are consistent' '
	start threads -m 32 &&
	for i in 1 2 3 4 5; do
		"$GCKPT" -R -p $WPID -o snap$i.gck 2>err || return 1
		test_must_be_empty err || return 1
	done &&
	verify_workload $WPID &&
	kill_tree $WPID &&
	restore_there "" >there.sh &&
	elsewhere "$(cat there.sh)" <snap5.gck &&
	restored_there
'

test_expect_success 'a tree of four with shared memory, restored elsewhere' '
	cat >tree.py <<-\EOF &&
	import hashlib, mmap, os, sys, time
	# a parent and 3 children, each with 16 MiB of its own, and 4 MiB of
	# shared anonymous memory that all of them see; descriptors inherited
	# from the test harness are not part of the state under test
	os.closerange(3, 1024)
	d = sys.argv[1]
	shm = mmap.mmap(-1, 4 << 20, mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
	shm.write(os.urandom(4 << 20))
	want = hashlib.sha1(shm[:]).hexdigest()
	for i in range(3):
	    if os.fork() == 0:
	        mem = bytearray(os.urandom(16 << 20))
	        h = hashlib.sha1(mem).hexdigest()
	        while True:
	            if os.path.exists("%s/check.%d" % (d, i)):
	                ok = (hashlib.sha1(mem).hexdigest() == h and
	                      hashlib.sha1(shm[:]).hexdigest() == want)
	                with open("%s/res.%d" % (d, i), "w") as f:
	                    f.write("ok" if ok else "BAD")
	                os.unlink("%s/check.%d" % (d, i))
	            time.sleep(0.05)
	mem = bytearray(os.urandom(16 << 20))
	with open("%s/tree.pid" % d, "w") as f:
	    f.write(str(os.getpid()))
	while True:
	    time.sleep(0.05)
	EOF
	(setsid python3 tree.py "$TRASH" </dev/null >tree.out 2>&1 &) &&
	wait_for_line tree.pid . 30 &&
	tpid=$(cat tree.pid) &&
	started="$started $tpid" &&
	sleep 0.5 &&
	"$GCKPT" -p $tpid 2>ck.err |
	    elsewhere "\"$GCKRESTORE\" -v >rs.out 2>rs.err; echo \$? >rs.st
		touch check.0 check.1 check.2
		i=0
		while test \$i -lt 100 && ! test -s res.2; do
			i=\$((i + 1)); sleep 0.1
		done
		sleep 0.5" &&
	test "$(cat rs.st)" = 0 &&
	test "$(cat rs.out)" = "$tpid" &&
	test "$(cat res.0 res.1 res.2)" = okokok &&
	# the pages came in the order criu asked for them
	! grep "holding" rs.err
'

test_expect_success 'a restore failing elsewhere: the source runs on' '
	start fail -m 64 &&
	fake_criu fail-restore &&
	restore_there "" >there.sh &&
	{ "$GCKPT" -p $WPID 2>ck.err; echo $? >ck.st; } |
	    GCK_CRIU=$TRASH/fakecriu elsewhere "$(cat there.sh)" &&
	test "$(cat rs.st)" = 1 &&
	test_grep "injected failure" rs.err &&
	test "$(cat ck.st)" = 1 &&
	test_grep "left running\$" ck.err &&
	verify_workload $WPID
'

test_expect_success 'gpurestore killed mid-stream elsewhere: nothing restored, nothing left' '
	"$GCKPT" -R -p $WPID -o kill.gck 2>err &&
	test_must_be_empty err &&
	n=$(($(wc -c <kill.gck) / 2)) &&
	mkdir krs &&
	mkfifo kill.fifo &&
	cat >kill.sh <<-EOF &&
	TMPDIR="$TRASH/krs" "$GCKRESTORE" <"$TRASH/kill.fifo" \
	    >/dev/null 2>"$TRASH/kill.err" &
	p=\$!
	{ head -c $n "$TRASH/kill.gck"; sleep 3; } >"$TRASH/kill.fifo" &
	# half the image in: criu is restoring
	i=0
	while test \$i -lt 100 && ! pgrep -x criu >/dev/null; do
		i=\$((i + 1))
		sleep 0.05
	done
	sleep 0.5
	ls -A "$TRASH/krs" >"$TRASH/kill.before"
	kill -KILL \$p && echo killed >>"$TRASH/kill.before"
	sleep 2
	ps -e -o pid= | awk "\\\$1 == $WPID" >"$TRASH/kill.left"
	ls -A "$TRASH/krs" >>"$TRASH/kill.left"
	EOF
	elsewhere "$(cat kill.sh)" &&
	# it was killed with its work area there, and criu restoring
	test_grep "^gpuckpt\." kill.before &&
	test_grep "^killed\$" kill.before &&
	test_must_be_empty kill.left &&
	test -z "$(ls -A krs)" &&
	rm -f kill.gck kill.fifo &&
	verify_workload $WPID
'

test_expect_success 'piped on the same host, the image is read whole first' '
	start here -m 16 &&
	"$GCKPT" -p $WPID | "$GCKRESTORE" -v >out 2>err &&
	test_grep "still on this host, stopped: reading the whole image" err &&
	test "$(cat out)" = "$WPID" &&
	started="$started $WPID" &&
	verify_workload $WPID
'

test_expect_success 'nothing left in TMPDIR' '
	test -z "$(ls -A "$TMPDIR")"
'

test_done
