#!/bin/sh
test_description='--stats and the progress line of gpuckpt, gpurestore, gpusend'
. "$GCK_SRCDIR/lib.sh"

require_criu
require_python
require_sshd
for _c in script unshare; do
	command -v $_c >/dev/null || test_skip_all "$_c not found"
done

GCKSEND=$GCK_BINDIR/send/gpusend
GCKRECV=$GCK_BINDIR/recv/gpurecv
RUNDIR=$TRASH/run
RPATH="GCK_RUNDIR=$RUNDIR TMPDIR=$TRASH/rtmp $GCKRECV"

sshd_pid=
started=
test_cleanup() {
	test -n "$started" && kill_tree $started >/dev/null 2>&1
	test -n "$sshd_pid" && kill_tree $sshd_pid >/dev/null 2>&1
	:
}

start() {
	start_workload "$@" || return 1
	started="$started $WPID"
}

gsend() {
	HOME=$TRASH/home "$GCKSEND" -P "$port" -i "$TRASH/userkey" \
	    -o IdentityAgent=none -o UserKnownHostsFile="$TRASH/known_hosts" \
	    --remote-path "$RPATH" "$@"
}

# now_ms: the monotonic time, in milliseconds.
now_ms() {
	python3 -c 'import time; print(int(time.monotonic() * 1000))'
}

# check_json FILE WALL_MS EXPR...: the last line of FILE is one JSON
# object, s, and each python EXPR holds of it; wall is WALL_MS.
check_json() {
	_f=$1 _w=$2
	shift 2
	tail -n 1 "$_f" >stats.json &&
	python3 - stats.json "$_w" "$@" <<-\EOF
	import json, sys
	s = json.load(open(sys.argv[1]))
	wall = int(sys.argv[2])
	assert isinstance(s, dict), s
	for e in sys.argv[3:]:
	    assert eval(e), (e, s)
	assert sum(s["stages_ms"].values()) <= s["total_ms"] + len(s["stages_ms"]), s
	assert s["total_ms"] <= wall, (s, wall)
	EOF
}

fsize() {
	stat -c %s "$1"
}

mkdir home rtmp store

test_expect_success 'gpuckpt --stats=json: memory read, the image written, the freeze' '
	start w -m 32 &&
	t0=$(now_ms) &&
	"$GCKPT" -R --stats=json -p $WPID -o A.gck >out 2>err &&
	t1=$(now_ms) &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	check_json err $((t1 - t0)) \
	    "s[\"memory_bytes\"] >= 32 << 20" \
	    "s[\"image_bytes\"] == $(fsize A.gck)" \
	    "s[\"unchanged_bytes\"] == 0" \
	    "0 <= s[\"zero_bytes\"] <= s[\"memory_bytes\"]" \
	    "0 < s[\"freeze_ms\"] <= s[\"total_ms\"]" \
	    "list(s[\"stages_ms\"]) == [\"check\", \"prepare\", \"rounds\", \"dump\", \"write\"]" &&
	verify_workload $WPID
'

test_expect_success 'gpuckpt --parent --stats=json: the memory the parent holds is skipped' '
	t0=$(now_ms) &&
	"$GCKPT" -R --parent=A.gck --stats=json -p $WPID -o B.gck 2>err &&
	t1=$(now_ms) &&
	test_line_count err 1 &&
	check_json err $((t1 - t0)) \
	    "s[\"unchanged_bytes\"] > 16 << 20" \
	    "s[\"unchanged_bytes\"] + s[\"zero_bytes\"] <= s[\"memory_bytes\"]" \
	    "s[\"image_bytes\"] == $(fsize B.gck)" \
	    "s[\"image_bytes\"] < s[\"memory_bytes\"] - s[\"unchanged_bytes\"] + (1 << 20)" &&
	test $(fsize B.gck) -lt $(fsize A.gck)
'

test_expect_success 'gpuckpt --stats: the text form names each field, the image on stdout' '
	"$GCKPT" -R --stats -p $WPID >C.gck 2>err &&
	for f in memory_bytes image_bytes unchanged_bytes zero_bytes \
	    freeze_ms total_ms stages_ms; do
		test_grep "^$f  *[0-9a-z]" err || return 1
	done &&
	test_grep "^image_bytes  *$(fsize C.gck) " err &&
	test_grep "^stages_ms  *check [0-9]*, prepare [0-9]*, rounds [0-9]*, dump [0-9]*, write [0-9]*\$" err &&
	test_line_count err 7 &&
	zstd -tq C.gck
'

test_expect_success 'no progress line when stderr is no terminal, nor with -q' '
	"$GCKPT" -R -p $WPID -o D.gck 2>err &&
	test_must_be_empty err &&
	"$GCKPT" -q -R -p $WPID -o D.gck 2>err &&
	test_must_be_empty err
'

test_expect_success 'gpuckpt on a terminal: a progress line, rewritten, then cleared' '
	script -qfec "\"$GCKPT\" -R -p $WPID -o E.gck" /dev/null </dev/null >ts &&
	test -s E.gck &&
	tr "\r" "\n" <ts >ts.lines &&
	test_grep "^gpuckpt: dumping " ts.lines &&
	test_grep "^gpuckpt: writing  *[0-9.]* [KMG]*i*B" ts.lines &&
	# the last thing written wipes the line and goes back to its start
	python3 -c "import sys; b = open(\"ts\", \"rb\").read(); assert b.endswith(b\"\\r\") and b.rstrip(b\"\\r\").endswith(b\" \"), b[-40:]"
'

test_expect_success 'gpuckpt -q on a terminal: nothing' '
	script -qfec "\"$GCKPT\" -q -R -p $WPID -o E.gck" /dev/null </dev/null >ts &&
	test -s E.gck &&
	test_must_be_empty ts
'

test_expect_success 'gpurestore --stats=json: the image read, the restore, the PID on stdout' '
	"$GCKPT" -k --stats=json -p $WPID -o K.gck 2>err &&
	test_line_count err 1 &&
	# no snapshot: the tree stopped until the image is whole, then killed
	check_json err 1000000000 \
	    "s[\"image_bytes\"] == $(fsize K.gck)" \
	    "list(s[\"stages_ms\"]) == [\"check\", \"prepare\", \"dump\", \"finish\", \"dispose\"]" \
	    "s[\"freeze_ms\"] >= s[\"stages_ms\"][\"dump\"] + s[\"stages_ms\"][\"finish\"] - 2" &&
	wait_gone $WPID &&
	t0=$(now_ms) &&
	"$GCKRESTORE" --stats=json K.gck >out 2>err &&
	t1=$(now_ms) &&
	echo $WPID >expect &&
	test_cmp expect out &&
	test_line_count err 1 &&
	check_json err $((t1 - t0)) \
	    "s[\"memory_bytes\"] >= 32 << 20" \
	    "s[\"image_bytes\"] == $(fsize K.gck)" \
	    "s[\"unchanged_bytes\"] == 0" \
	    "0 < s[\"restore_ms\"] <= s[\"total_ms\"]" \
	    "\"freeze_ms\" not in s and \"zero_bytes\" not in s" &&
	verify_workload $WPID
'

test_expect_success 'gpurestore --parent --stats: the text form, the bytes from the parent' '
	"$GCKPT" -k --parent=K.gck -p $WPID -o L.gck 2>err &&
	wait_gone $WPID &&
	"$GCKRESTORE" --parent=K.gck --stats L.gck >out 2>err &&
	echo $WPID >expect &&
	test_cmp expect out &&
	for f in memory_bytes image_bytes unchanged_bytes restore_ms \
	    total_ms stages_ms; do
		test_grep "^$f  *[0-9a-z]" err || return 1
	done &&
	test_line_count err 6 &&
	n=$(sed -n "s/^unchanged_bytes  *\([0-9]*\).*/\1/p" err) &&
	test $n -gt $((16 << 20)) &&
	verify_workload $WPID
'

test_expect_success 'gpurestore on a terminal: a progress line; -q: none' '
	"$GCKPT" -k -p $WPID -o M.gck 2>err &&
	wait_gone $WPID &&
	script -qfec "\"$GCKRESTORE\" M.gck" /dev/null </dev/null >ts &&
	tr "\r" "\n" <ts >ts.lines &&
	test_grep "^gpurestore: reading  *[0-9.]* [KMG]*i*B of [0-9.]* [KMG]iB" ts.lines &&
	test_grep "^$WPID" ts.lines &&
	verify_workload $WPID &&
	"$GCKPT" -k -p $WPID -o M.gck 2>err &&
	wait_gone $WPID &&
	script -qfec "\"$GCKRESTORE\" -q M.gck" /dev/null </dev/null >ts &&
	tr -d "\r" <ts >ts.lines &&
	echo $WPID >expect &&
	test_cmp expect ts.lines &&
	verify_workload $WPID
'

test_expect_success 'usage errors: --stats=yaml' '
	test_status 2 "$GCKPT" --stats=yaml -p 1 >out 2>err &&
	test_must_be_empty out &&
	test_grep "^gpuckpt: invalid --stats .yaml.: use text or json\$" err &&
	test_status 2 "$GCKRESTORE" --stats=yaml x.gck >out 2>err &&
	test_must_be_empty out &&
	test_grep "invalid --stats" err &&
	test_status 2 "$GCKSEND" --stats=yaml x.gck host >out 2>err &&
	test_must_be_empty out &&
	test_grep "invalid --stats" err &&
	test_status 2 "$GCKPT" --suspend --stats -p 1 >out 2>err &&
	test_grep "takes no.*--stats" err &&
	test_status 2 "$GCKRESTORE" --resume --stats -p 1 >out 2>err &&
	test_grep "no.*--stats" err
'

test_expect_success 'sshd in a PID namespace of its own' '
	ssh-keygen -q -t ed25519 -N "" -C gck-host -f hostkey &&
	ssh-keygen -q -t ed25519 -N "" -C gck-user -f userkey &&
	cp userkey.pub authorized_keys &&
	start_nssh &&
	echo "[127.0.0.1]:$port $(cat hostkey.pub)" >known_hosts
'

test_expect_success 'gpusend FILE host:path --stats=json: all of it sent, nothing on stdout' '
	t0=$(now_ms) &&
	gsend --stats=json M.gck root@127.0.0.1:$TRASH/store/ >out 2>err &&
	t1=$(now_ms) &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	cmp M.gck store/M.gck &&
	check_json err $((t1 - t0)) \
	    "s[\"image_bytes\"] == s[\"sent_bytes\"] == $(fsize M.gck)" \
	    "s[\"bytes\"] == s[\"sent\"] == $(fsize M.gck)" \
	    "s[\"stored\"].endswith(\"/M.gck\")" \
	    "list(s[\"stages_ms\"]) == [\"send\"]" \
	    "\"freeze_ms\" not in s and \"memory_bytes\" not in s"
'

test_expect_success 'gpusend -p --stats=json: the tree moved, its freeze, the PID on stdout' '
	t0=$(now_ms) &&
	gsend --stats=json -p $WPID root@127.0.0.1 >out 2>err &&
	t1=$(now_ms) &&
	echo $WPID >expect &&
	test_cmp expect out &&
	test_line_count err 1 &&
	wait_gone $WPID &&
	check_json err $((t1 - t0)) \
	    "s[\"memory_bytes\"] >= 32 << 20" \
	    "s[\"image_bytes\"] == s[\"sent_bytes\"] == s[\"bytes\"]" \
	    "0 < s[\"freeze_ms\"] == s[\"stopped_ms\"] <= s[\"total_ms\"]" \
	    "s[\"unchanged_bytes\"] + s[\"zero_bytes\"] <= s[\"memory_bytes\"]" \
	    "s[\"pid\"] == $WPID" &&
	VHOST=$(ns_pid $WPID) &&
	test -n "$VHOST" &&
	verify_workload $VHOST &&
	kill_tree $VHOST
'

test_expect_success 'gpusend --stats text, on a terminal a progress line, -q none' '
	script -qfec "HOME=$TRASH/home \"$GCKSEND\" -P $port -i $TRASH/userkey -o IdentityAgent=none -o UserKnownHostsFile=$TRASH/known_hosts --remote-path \"$RPATH\" --stats M.gck root@127.0.0.1:$TRASH/store/N.gck" /dev/null </dev/null >ts &&
	tr "\r" "\n" <ts >ts.lines &&
	test_grep "^gpusend: sending  *[0-9.]* [KMG]*i*B of [0-9.]* [KMG]iB" ts.lines &&
	test_grep "^sent_bytes  *$(fsize M.gck) " ts.lines &&
	test_grep "^image_bytes  *$(fsize M.gck) " ts.lines &&
	test_grep "^stages_ms  *send [0-9]*" ts.lines &&
	cmp M.gck store/N.gck &&
	script -qfec "HOME=$TRASH/home \"$GCKSEND\" -q -P $port -i $TRASH/userkey -o IdentityAgent=none -o UserKnownHostsFile=$TRASH/known_hosts --remote-path \"$RPATH\" M.gck root@127.0.0.1:$TRASH/store/O.gck" /dev/null </dev/null >ts &&
	test_must_be_empty ts &&
	cmp M.gck store/O.gck
'

test_done
