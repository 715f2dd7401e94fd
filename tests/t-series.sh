#!/bin/sh
test_description='snapshot series: gpuckpt --series, gpurestore DIR, gpuinspect DIR'
. "$GCK_SRCDIR/lib.sh"

require_criu
require_python

started=
bg=
test_cleanup() {
	test -n "$bg" && kill -KILL $bg >/dev/null 2>&1
	test -n "$started" && kill_tree $started >/dev/null 2>&1
}

# snap SEQ: the file name of snapshot SEQ of S (one, or nothing).
snap() {
	ls S | grep "^$(printf %06d "$1")-[0-9]\{8\}T[0-9]\{6\}Z\.gck\$"
}

# listed: the sequence number of the newest snapshot S lists.
listed() {
	grep -o '"name": *"[0-9]*' S/index.json | tail -n 1 |
	    sed 's/.*"0*\([0-9]\)/\1/'
}

# wait_listed N: until the newest S lists is after N (up to 60 s).
wait_listed() {
	_i=0
	while test "$(listed)" -le "$1"; do
		_i=$((_i + 1)); test $_i -lt 600 || return 1; sleep 0.1
	done
}

# every_bg DIR PID: gpuckpt --series=DIR --every=3600 -p PID in the
# background, its errors in bg.err; sets bg.
every_bg() {
	"$GCKPT" --series="$1" --every=3600 -p "$2" 2>bg.err &
	bg=$!
}

# now_bg: gpuckpt --series=S --now in the background, its output in
# out1 and err1, its status in st1; sets p1.
now_bg() {
	{ "$GCKPT" --series=S --now >out1 2>err1; echo $? >st1; } &
	p1=$!
}

# index_check: the index of S lists what S holds, each file of the size
# listed (but the file $DAMAGED), every parent listed; prints
# "SEQ full|PARENTSEQ" a line each.
index_check() {
	python3 - S "${DAMAGED:-}" <<-\EOF
	import json, os, re, sys
	d = sys.argv[1]
	x = json.load(open(os.path.join(d, "index.json")))
	assert x["version"] == 1, x
	names = [s["name"] for s in x["snapshots"]]
	imgs = sorted(f for f in os.listdir(d) if f.endswith(".gck"))
	assert names == imgs, (names, imgs)
	extra = set(os.listdir(d)) - set(imgs) - {"index.json", ".lock"}
	assert not extra, extra
	for s in x["snapshots"]:
	    assert re.fullmatch(r"\d{6}-\d{8}T\d{6}Z\.gck", s["name"]), s
	    assert s["name"] == sys.argv[2] or \
	        os.path.getsize(os.path.join(d, s["name"])) == s["size"], s
	    assert len(s["id"]) == 32 and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", s["time"]), s
	    assert s["full"] == (s["parent"] is None), s
	    assert s["parent"] is None or s["parent"] in names, s
	    print(int(s["name"][:6]), "full" if s["full"] else int(s["parent"][:6]))
	EOF
}

test_expect_success 'a workload' '
	start_workload w -m 8 &&
	started=$WPID &&
	verify_workload $WPID
'

test_expect_success '--every=1 --count=6 --full-every=3 --keep=3: six snapshots, three kept' '
	test_status 0 "$GCKPT" -v --series=S --every=1 --count=6 \
	    --full-every=3 --keep=3 -p $WPID >out 2>err &&
	test_must_be_empty out &&
	proc_running $WPID &&
	index_check >got &&
	printf "%s\n" "4 full" "5 4" "6 5" >expect &&
	test_cmp expect got &&
	sed -n "s|^gpuckpt: snapshot .S/\([0-9]*\)-.*, \(.*\)|\1 \2|p" err |
	    sed "s/incremental over \([0-9]*\)-.*/\1/" >got &&
	printf "%s\n" "000001 full" "000002 000001" "000003 000002" \
	    "000004 full" "000005 000004" "000006 000005" >expect &&
	test_cmp expect got &&
	grep -c "^gpuckpt: removing snapshot .S/00000[123]-" err >n &&
	echo 3 >expect && test_cmp expect n
'

test_expect_success 'retention keeps the chains the newest need' '
	verify_workload $WPID &&
	test_status 0 "$GCKPT" --series=S --keep=2 -p $WPID 2>err &&
	test_must_be_empty err &&
	index_check >got &&
	printf "%s\n" "4 full" "5 4" "6 5" "7 6" >expect &&
	test_cmp expect got &&
	test_status 0 "$GCKPT" --series=S --keep=1 --full-every=1 -p $WPID \
	    2>err &&
	test_must_be_empty err &&
	index_check >got &&
	echo "8 full" >expect &&
	test_cmp expect got &&
	test_status 0 "$GCKPT" --series=S --keep=2 -p $WPID 2>err &&
	index_check >got &&
	printf "%s\n" "8 full" "9 8" >expect &&
	test_cmp expect got
'

test_expect_success 'gpuinspect DIR lists the series, the newest marked' '
	test_status 0 "$GCKINSPECT" S >out 2>err &&
	test_must_be_empty err &&
	s8=$(snap 8) && s9=$(snap 9) &&
	test_grep "^series S: 2 snapshots\$" out &&
	test_grep "^  $s8  .*  full  " out &&
	test_grep "^\* $s9  .*  incremental  .*  parent $s8\$" out &&
	test_line_count out 4
'

test_expect_success 'gpuinspect --json DIR' '
	test_status 0 "$GCKINSPECT" --json S >out 2>err &&
	test_must_be_empty err &&
	python3 - out "$(snap 8)" "$(snap 9)" <<-\EOF
	import json, sys
	d = json.load(open(sys.argv[1]))
	a, b = sys.argv[2:4]
	assert d["newest"] == b and d["damaged"] == 0, d
	s = d["snapshots"]
	assert [x["name"] for x in s] == [a, b], s
	assert s[0]["full"] and s[0]["parent"] is None and s[0]["chain"] == 1
	assert not s[1]["full"] and s[1]["parent"] == a and s[1]["chain"] == 2
	assert all(x["ok"] and x["size"] > 0 for x in s), s
	EOF
'

test_expect_success 'gpuinspect --verify DIR: every snapshot ok' '
	test_status 0 "$GCKINSPECT" --verify S >out 2>err &&
	test_must_be_empty err &&
	printf "%s\n" "$(snap 8): ok" "$(snap 9): ok" \
	    "2 snapshots, 0 damaged" >expect &&
	test_cmp expect out
'

test_expect_success 'gpurestore DIR: the newest, and the workload goes on' '
	verify_workload $WPID && before=$VCOUNTER &&
	test_status 0 "$GCKPT" --series=S -p $WPID 2>err &&
	test_must_be_empty err &&
	s10=$(snap 10) && test -n "$s10" &&
	kill_tree $WPID &&
	test_status 0 "$GCKRESTORE" S >out 2>err &&
	echo $WPID >expect &&
	test_cmp expect out &&
	test_grep "^gpurestore: restored snapshot .S/$s10., taken " err &&
	test_line_count err 1 &&
	verify_workload $WPID &&
	echo "counter $VCOUNTER, $before before the snapshot" &&
	test $VCOUNTER -ge $before
'

# The workload is killed right before each restore, so that its PID is
# still free then, whatever the tests beside this one start meanwhile.
test_expect_success 'a byte of the newest changed: skipped, the one before restored' '
	s9=$(snap 9) && s10=$(snap 10) &&
	cp S/$s10 keep10 &&
	python3 - S/$s10 <<-\EOF &&
	import os, sys
	p = sys.argv[1]
	f = open(p, "r+b")
	f.seek(os.path.getsize(p) // 2)
	b = f.read(1)
	f.seek(-1, 1)
	f.write(bytes([b[0] ^ 0xff]))
	EOF
	test_status 1 "$GCKINSPECT" --verify S >out 2>err &&
	test_grep "^$s10: damaged: " out &&
	test_grep "^$s9: ok\$" out &&
	test_grep "^3 snapshots, 1 damaged\$" out &&
	kill_tree $WPID &&
	test_status 0 "$GCKRESTORE" S >out 2>err &&
	echo $WPID >expect &&
	test_cmp expect out &&
	test_grep "^gpurestore: skipping snapshot .S/$s10.: " err &&
	test_grep "^gpurestore: restored snapshot .S/$s9., taken " err &&
	test_line_count err 2 &&
	verify_workload $WPID
'

test_expect_success 'the newest cut in half: skipped as truncated' '
	s9=$(snap 9) && s10=$(snap 10) &&
	cp keep10 S/$s10 &&
	truncate -s $(($(stat -c %s keep10) / 2)) S/$s10 &&
	test_status 0 "$GCKINSPECT" S >out 2>err &&
	test_grep "^  $s10  .*  not sound: image truncated: " out &&
	test_grep "^\* $s9 " out &&
	kill_tree $WPID &&
	test_status 0 "$GCKRESTORE" S >out 2>err &&
	test_grep "^gpurestore: skipping snapshot .S/$s10.: image truncated: [0-9]* bytes of the [0-9]* the index lists\$" err &&
	test_grep "^gpurestore: restored snapshot .S/$s9., taken " err &&
	test_line_count err 2 &&
	verify_workload $WPID
'

test_expect_success 'no sound snapshot: one line, exit 1, nothing restored' '
	kill_tree $WPID &&
	mkdir bad && cp S/index.json bad/ &&
	test_status 1 "$GCKRESTORE" bad >out 2>err &&
	test_must_be_empty out &&
	test_grep "^gpurestore: skipping snapshot .bad/$(snap 10).: " err &&
	test_grep "^gpurestore: series .bad. holds no snapshot that can be restored\$" err &&
	test_line_count err 4 &&
	proc_gone $WPID
'

test_expect_success 'the next snapshot goes over the damaged one: a full one' '
	test_status 0 "$GCKRESTORE" S >out 2>err &&
	test_status 0 "$GCKPT" -v --series=S -p $WPID 2>err &&
	test_grep "^gpuckpt: snapshot .S/$(snap 10). cannot be a parent, a full snapshot is taken: " err &&
	DAMAGED=$(snap 10) index_check >got &&
	tail -n 1 got >last &&
	echo "11 full" >expect &&
	test_cmp expect last &&
	cp keep10 S/$(snap 10)
'

test_expect_success 'gpuckpt killed while it writes: the snapshot is never listed, then removed' '
	cp S/index.json index.before &&
	fake_criu slow &&
	{ GCK_CRIU=$TRASH/fakecriu "$GCKPT" --series=S --full-every=1 \
	    -p $WPID 2>err & } &&
	bg=$! &&
	wait_for_tmp=0 &&
	while ! ls S | grep -q "\.gck\.tmp\."; do
		wait_for_tmp=$((wait_for_tmp + 1))
		test $wait_for_tmp -lt 300 || return 1
		sleep 0.02
	done &&
	# criu has dumped, and sleeps: the image is not complete.
	sleep 1 &&
	kill -KILL $bg && wait $bg; bg= &&
	cmp index.before S/index.json &&
	# Its guard resumes the tree, then removes the partial file.
	_i=0 &&
	while ls S | grep -q "\.gck\.tmp\."; do
		_i=$((_i + 1)); test $_i -lt 300 || return 1; sleep 0.1
	done &&
	_i=0 &&
	while ! proc_running $WPID 2>/dev/null; do
		_i=$((_i + 1)); test $_i -lt 100 || return 1; sleep 0.1
	done &&
	verify_workload $WPID &&
	cmp index.before S/index.json &&
	: >S/000012-20261128T000000Z.gck.tmp.AbCdEf012345 &&
	: >S/index.json.tmp.AbCdEf012345 &&
	: >S/000013-20261128T000000Z.gck &&
	test_status 0 "$GCKPT" --series=S -p $WPID 2>err &&
	test_must_be_empty err &&
	! ls S | grep "\.tmp\." &&
	index_check >got &&
	tail -n 1 got >last &&
	grep "^12 " last
'

test_expect_success 'a second gpuckpt on a series being written: exit 1, says who' '
	"$GCKPT" --series=S --every=1 -p $WPID 2>bg.err &
	bg=$! &&
	wait_listed "$(listed)" &&
	test_status 1 "$GCKPT" --series=S -p $WPID >out 2>err &&
	test_must_be_empty out &&
	echo "gpuckpt: series '"'"'S'"'"' is being written by process $bg (it holds '"'"'S/.lock'"'"')" >expect &&
	test_cmp expect err &&
	kill -TERM $bg &&
	test_status 0 wait_child $bg && bg= &&
	cat >&2 bg.err &&
	test_grep "^gpuckpt: stopped by Terminated: [0-9]* snapshots* taken into .S., process tree $WPID left running\$" bg.err &&
	proc_running $WPID &&
	index_check >/dev/null &&
	! ls S | grep "\.tmp\."
'

test_expect_success '--every: failed snapshots said, the fifth in a row gives up' '
	fake_criu fail-before &&
	GCK_CRIU=$TRASH/fakecriu test_status 1 "$GCKPT" --series=F \
	    --every=0.1 -p $WPID >out 2>err &&
	test_must_be_empty out &&
	grep -c "^gpuckpt: .*injected failure" err >n &&
	echo 5 >expect && test_cmp expect n &&
	tail -n 1 err >last &&
	echo "gpuckpt: giving up after 5 failed snapshots in a row" >expect &&
	test_cmp expect last &&
	test_line_count err 6 &&
	proc_running $WPID &&
	verify_workload $WPID &&
	test -z "$(ls F)"
'

test_expect_success 'images with no index are kept, and numbered after' '
	mkdir N &&
	cp S/$(snap 12) N/000007-20261128T000000Z.gck &&
	test_status 0 "$GCKPT" --series=N -p $WPID 2>err &&
	test_must_be_empty err &&
	ls N >got &&
	test_grep "^000007-20261128T000000Z\.gck\$" got &&
	test_grep "^000008-[0-9]\{8\}T[0-9]\{6\}Z\.gck\$" got &&
	python3 - N/index.json <<-\EOF
	import json, sys
	s = json.load(open(sys.argv[1]))["snapshots"]
	assert len(s) == 1 and s[0]["name"].startswith("000008-"), s
	assert s[0]["full"] and s[0]["parent"] is None, s
	EOF
'

test_expect_success '--now: the gpuckpt --every that writes the series takes one at once, and says which' '
	"$GCKPT" --series=S --every=3600 -p $WPID 2>bg.err &
	bg=$! &&
	n=$(listed) &&
	wait_listed $n &&
	n=$((n + 1)) &&
	# the next would come in an hour
	test_status 0 "$GCKPT" --series=S --now >out 2>err &&
	test_must_be_empty err &&
	test "$(listed)" -eq $((n + 1)) &&
	python3 -c "import json; print(\"S/\" + json.load(open(\"S/index.json\"))[\"snapshots\"][-1][\"name\"])" >expect &&
	test_cmp expect out &&
	# two at once, each answered, by one snapshot or two
	now_bg &&
	test_status 0 "$GCKPT" --series=S --now >out2 2>err2 &&
	wait $p1 &&
	echo 0 >expect && test_cmp expect st1 &&
	test_must_be_empty err1 && test_must_be_empty err2 &&
	test -s "$(cat out1)" && test -s "$(cat out2)" &&
	test "$(listed)" -ge $((n + 2)) &&
	! ls -A S | grep "^\.now\." &&
	kill -TERM $bg &&
	test_status 0 wait_child $bg && bg= &&
	proc_running $WPID &&
	verify_workload $WPID &&
	index_check >/dev/null
'

test_expect_success '--now with nothing writing the series, or with other options: one line' '
	test_status 1 "$GCKPT" --series=S --now >out 2>err &&
	test_must_be_empty out &&
	echo "gpuckpt: nothing writes the series in '"'"'S'"'"': no gpuckpt --series holds its lock" >expect &&
	test_cmp expect err &&
	test_status 1 "$GCKPT" --series=nosuch --now >out 2>err &&
	echo "gpuckpt: nothing writes the series in '"'"'nosuch'"'"': it has no lock file" >expect &&
	test_cmp expect err &&
	test_status 2 "$GCKPT" --series=S --now -p $WPID 2>err &&
	test_grep "^gpuckpt: --series DIR --now takes no other option but -q and -v" err &&
	test_status 2 "$GCKPT" --series=S --now --every=5 2>err &&
	test_grep "^gpuckpt: --series DIR --now takes no other option" err &&
	test_status 2 "$GCKPT" --now 2>err &&
	test_grep "^gpuckpt: --now is for --series DIR" err &&
	! ls -A S | grep "^\.now\."
'

test_expect_success '--every ends once the tree is gone: exit 0, said' '
	"$GCKPT" --series=S --every=1 -p $WPID 2>bg.err &
	bg=$! &&
	wait_listed "$(listed)" &&
	kill_tree $WPID &&
	test_status 0 wait_child $bg 60 && bg= &&
	cat >&2 bg.err &&
	test_grep "^gpuckpt: process tree $WPID is gone: [0-9]* snapshots* taken into .S.\$" bg.err &&
	index_check >/dev/null
'

test_expect_success '--every: a root that exited, a zombie not yet reaped, is gone too: exit 0, one line' '
	(setsid sh -c "\"$WORKLOAD\" -f \"$TRASH/z.status\" -m 4 & exec sleep 120" </dev/null >/dev/null 2>&1 &) &&
	wait_for_line z.status "^ready " 30 &&
	zp=$(sed -n "s/^ready pid=\([0-9]*\).*/\1/p" z.status) &&
	zparent=$(proc_field $zp 4) || return 1
	"$GCKPT" --series=Z --every=1 -p $zp 2>bg.err &
	bg=$! &&
	_i=0 &&
	until test -s Z/index.json; do
		_i=$((_i + 1)); test $_i -lt 600 || return 1; sleep 0.1
	done &&
	kill -KILL $zp &&
	_i=0 &&
	until test "$(proc_field $zp 3)" = Z; do
		_i=$((_i + 1)); test $_i -lt 100 || return 1; sleep 0.1
	done &&
	test_status 0 wait_child $bg 60 && bg= &&
	cat >&2 bg.err &&
	test_grep "^gpuckpt: process tree $zp is gone: [0-9]* snapshots* taken into .Z.\$" bg.err &&
	test_line_count bg.err 1 &&
	kill -KILL $zparent
'

test_expect_success '--now: the snapshot taken for it fails: exit 1, says why' '
	start_workload w2 -m 4 &&
	w2=$WPID &&
	started="$started $w2" &&
	every_bg S2 $w2 &&
	_i=0 &&
	until test -s S2/index.json; do
		_i=$((_i + 1)); test $_i -lt 600 || return 1; sleep 0.1
	done &&
	kill_tree $w2 &&
	test_status 1 "$GCKPT" --series=S2 --now >out 2>err &&
	test_must_be_empty out &&
	test_grep "^gpuckpt: the snapshot of .S2. taken for the request failed: " err &&
	test_line_count err 1 &&
	test_status 0 wait_child $bg 60 && bg= &&
	! ls -A S2 | grep "^\.now\."
'

test_done
