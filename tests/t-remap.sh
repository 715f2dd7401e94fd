#!/bin/sh
test_description='files the tree holds open by a name that is gone, another name of them left: criu links them back, gpuckpt makes them travel'
. "$GCK_SRCDIR/lib.sh"

require_criu
require_python

REMAP="python3 $GCK_SRCDIR/remap.py"

started=
test_cleanup() {
	for _d in $started; do
		touch "$_d/go" 2>/dev/null
	done
	for _p in $(cat "$TRASH"/*/ready 2>/dev/null); do
		kill_tree $_p >/dev/null 2>&1
	done
	:
}

# start_remap DIR CASE ARGS: runs 'remap.py CASE DIR ARGS' in a session
# of its own and waits until it is ready; sets P, its root, and START,
# its start time.
start_remap() {
	_d=$TRASH/$1
	_c=$2
	shift 2
	rm -rf "$_d"
	mkdir "$_d" || return 1
	started="$started $_d"
	(setsid $REMAP $_c "$_d" "$@" </dev/null >"$_d.out" 2>&1 &)
	wait_for_line "$_d/ready" . 30 || { cat >&2 "$_d.out"; return 1; }
	P=$(cat "$_d/ready")
	START=$(proc_field $P 22)
}

# result DIR WANT: the case of DIR ends, its result matching WANT.
result() {
	touch "$TRASH/$1/go" &&
	wait_for_line "$TRASH/$1/result" . 60 &&
	cat "$TRASH/$1/result" >&2 &&
	test_grep "$2" "$TRASH/$1/result"
}

# no_links DIR...: criu's links (link_remap.N) and ghosts (*.cr.N.ghost)
# are in none of DIR, nor in /dev/shm.
no_links() {
	_left=$(find /dev/shm "$@" -maxdepth 1 \( -name 'link_remap.*' -o \
	    -name '*.cr.*.ghost' \) 2>/dev/null)
	test -z "$_left" && return 0
	echo >&2 "left behind: $_left"
	return 1
}

test_expect_success 'multiprocessing with spawn: moved, its lock and counter shared as before' '
	start_remap spawn spawn 700 &&
	{ "$GCKPT" -p $P 2>ckpt.err; echo $? >ckpt.st; } | "$GCKRESTORE" >out 2>err &&
	cat ckpt.err err >&2 &&
	echo 0 >expect &&
	test_cmp expect ckpt.st &&
	test_must_be_empty err &&
	echo $P >expect &&
	test_cmp expect out &&
	proc_restored $P $START &&
	no_links spawn &&
	result spawn "^ok 2100\$" &&
	no_links spawn
'

test_expect_success 'a snapshot (-R) of it, the tree killed, restored from the snapshot' '
	start_remap spawn2 spawn 900 &&
	"$GCKPT" -R -p $P -o snap.gck 2>err &&
	test_must_be_empty err &&
	proc_unharmed $P $START &&
	no_links spawn2 &&
	kill_tree $P &&
	rm -f spawn2/result &&
	"$GCKRESTORE" snap.gck >out 2>err &&
	cat >&2 err &&
	test_grep "^[0-9][0-9]*\$" out &&
	# Its PIDs are free, unless the kernel gave one to a thread of
	# gpurestore meanwhile: then it goes into a PID namespace.
	if test -s err; then
		test_line_count err 1 &&
		test_grep "restoring the tree in a PID namespace of its own" err
	else
		proc_restored $P $START
	fi &&
	result spawn2 "^ok 2700\$" &&
	no_links spawn2
'

test_expect_success 'the image has the files as ghosts, and no link of criu' '
	"$GCKINSPECT" --files --json snap.gck >files.json &&
	python3 -c "
import json, sys
d = json.load(open(\"files.json\"))[\"descriptors\"]
sems = [f for f in d[\"files\"] if f[\"ghost\"] and f[\"path\"].startswith(\"/dev/shm/sem.\")]
assert sems, d[\"files\"]
links = [f for f in d[\"files\"] if \"link_remap\" in f[\"path\"]]
assert not links, links
"
'

test_expect_success 'a file whose other name the tree also holds: opened by that name, still one file' '
	start_remap linked linked &&
	"$GCKPT" -p $P -o linked.gck 2>err &&
	test_must_be_empty err &&
	no_links linked &&
	"$GCKINSPECT" --files --json linked.gck >files.json &&
	python3 -c "
import json
d = json.load(open(\"files.json\"))[\"descriptors\"]
paths = set(f[\"path\"] for f in d[\"files\"] if f[\"path\"].startswith(\"$TRASH/linked/\"))
assert paths == {\"$TRASH/linked/final\"}, paths
assert not any(f[\"ghost\"] for f in d[\"files\"]), d[\"files\"]
" &&
	"$GCKRESTORE" linked.gck >out 2>err &&
	test_must_be_empty err &&
	proc_restored $P $START &&
	result linked "^ok\$" &&
	no_links linked
'

test_expect_success 'one over the ghost limit: one line names the size and --ghost-limit, the tree unharmed, nothing left' '
	start_remap big big 2097152 &&
	test_status 1 "$GCKPT" -p $P -o big.gck >out 2>err &&
	cat >&2 err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpuckpt: .*$TRASH/big/first.*2097152 bytes .*--ghost-limit 2097152 or more; process tree $P left running\$" err &&
	test ! -e big.gck &&
	proc_unharmed $P $START &&
	no_links big &&
	test "$(ls big | tr "\n" " ")" = "final ready " &&
	test -z "$(ls -A "$TMPDIR")"
'

test_expect_success '--ghost-limit 4M: it travels in the image, its bytes intact' '
	"$GCKPT" --ghost-limit 4M -p $P -o big.gck 2>err &&
	test_must_be_empty err &&
	no_links big &&
	"$GCKRESTORE" big.gck >out 2>err &&
	test_must_be_empty err &&
	proc_restored $P $START &&
	result big "^ok\$" &&
	no_links big
'

test_expect_success 'a checkpoint that fails once the files are made ghosts: the tree runs on, nothing left' '
	start_remap spawn3 spawn 700 &&
	test_status 1 "$GCKPT" -p $P -o /dev/full >out 2>err &&
	cat >&2 err &&
	test_line_count err 1 &&
	proc_unharmed $P $START &&
	no_links spawn3 &&
	result spawn3 "^ok 2100\$"
'

test_done
