#!/bin/sh
test_description='gpurestore --pidns and --wait: restore anywhere, stay with the job'
. "$GCK_SRCDIR/lib.sh"

require_root
require_criu

SIGREC=$GCK_TESTDIR/sigrec
started=
cgroups=
test_cleanup() {
	test -n "$started" && kill_tree $started >/dev/null 2>&1
	for _c in $cgroups; do
		rmdir "$_c" 2>/dev/null
	done
	:
}

# inner PID: the PID of PID in its own, innermost PID namespace.
inner() {
	awk '/^NSpid:/ { print $NF }' /proc/$1/status
}

# pidns PID: its PID namespace.
pidns() {
	readlink /proc/$1/ns/pid
}

# sigrec NAME: starts sigrec in a session of its own, its notes in
# NAME.log; sets SPID.
sigrec() {
	rm -f "$TRASH/$1.log" "$TRASH/$1.log.exit"
	(setsid "$SIGREC" "$TRASH/$1.log" </dev/null >/dev/null 2>&1 &)
	wait_for_line "$TRASH/$1.log" '^ready ' 30 || return 1
	SPID=$(sed -n 's/^ready pid=\([0-9]*\).*/\1/p' "$TRASH/$1.log")
	started="$started $SPID"
}

# restored_copy N PID: the copy restored from the Nth gpurestore
# (its pid file N.pid, its output N.out) runs in a namespace of its own
# in which it is PID, and checks out.
restored_copy() {
	_r=$(cat $1.pid) &&
	test "$(cat $1.out)" = "$_r" &&
	test "$_r" != $2 &&
	test "$(inner $_r)" = $2 &&
	test "$(pidns $_r)" != "$(pidns $$)" &&
	test "$(cat /proc/$(proc_field $_r 4)/comm)" = gpuckpt-init &&
	started="$started $_r" &&
	verify_workload $_r
}

test_expect_success 'a workload, checkpointed and left running' '
	start_workload wl -m 16 &&
	started="$started $WPID" &&
	"$GCKPT" -R -p $WPID -o wl.gck &&
	verify_workload $WPID
'

test_expect_success 'without --pidns, a running source is refused; the line names --pidns' '
	test_status 1 "$GCKRESTORE" wl.gck >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpurestore: pid $WPID is in use on this host by the image.s source, process tree $WPID, still running: .* a copy beside it with --pidns\$" err &&
	test -z "$(ls -A "$TMPDIR")"
'

test_expect_success 'one image restored three times at once, each in a namespace of its own' '
	for i in 1 2 3; do
		"$GCKRESTORE" --pidns --pidfile $i.pid wl.gck >$i.out 2>$i.err &
	done &&
	wait &&
	for i in 1 2 3; do
		test_must_be_empty $i.err &&
		restored_copy $i $WPID || return 1
	done &&
	test "$(pidns $(cat 1.pid))" != "$(pidns $(cat 2.pid))" &&
	test "$(pidns $(cat 2.pid))" != "$(pidns $(cat 3.pid))" &&
	verify_workload $WPID
'

test_expect_success 'the namespace ends with the tree in it' '
	r=$(cat 1.pid) &&
	init=$(proc_field $r 4) &&
	kill_tree $r &&
	wait_gone $init
'


test_expect_success 'a PID taken by another process: said, and restored in a namespace' '
	kill_tree $WPID &&
	take_pid $WPID &&
	"$GCKRESTORE" --pidfile 4.pid wl.gck >4.out 2>4.err &&
	test_line_count 4.err 1 &&
	test_grep "^gpurestore: pid $WPID of the image is in use on this host (by .[a-z]*.): restoring the tree in a PID namespace of its own, where it keeps its PIDs (--pidns)\$" 4.err &&
	restored_copy 4 $WPID
'

test_expect_success '--wait: exits with the status of the root' '
	sigrec st &&
	"$GCKPT" -p $SPID -o st.gck &&
	wait_gone $SPID &&
	{ "$GCKRESTORE" --wait --pidfile w.pid st.gck >w.out 2>w.err & } &&
	g=$! &&
	wait_for_line w.pid "^[0-9]" 30 &&
	r=$(cat w.pid) &&
	test $r = $SPID &&
	test "$(proc_field $r 4)" = $g &&
	echo 7 >"$TRASH/st.log.tmp" && mv "$TRASH/st.log.tmp" "$TRASH/st.log.exit" &&
	{ wait $g; echo $? >w.st; } &&
	{ cat w.err >&2; true; } &&
	test "$(cat w.st)" = 7 &&
	test_must_be_empty w.err &&
	test "$(cat w.out)" = $r
'

# wait_got N: waits up to 10 s for st.log to hold N "got" lines (an
# earlier test's would match a pattern of the signal's name).
wait_got() {
	_i=0
	while test "$(grep -c "^got " "$TRASH/st.log")" -lt $1; do
		_i=$((_i + 1))
		test $_i -lt 100 || return 1
		sleep 0.1
	done
}

# waitsig MODE: restores st.gck with --wait (MODE: --pidns, or empty),
# sends gpurestore SIGHUP, SIGINT, SIGUSR1 and SIGUSR2, which the root
# notes, then SIGTERM, which ends it; gpurestore must exit 143.
waitsig() {
	rm -f ws.pid "$TRASH/st.log.exit" &&
	n=$(grep -c "^got " "$TRASH/st.log"; true) &&
	{ "$GCKRESTORE" --wait $1 --pidfile ws.pid st.gck >ws.out 2>ws.err & } &&
	g=$! &&
	{ wait_for_line ws.pid "^[0-9]" 30 || { cat ws.err >&2; false; }; } &&
	r=$(cat ws.pid) &&
	started="$started $r" &&
	if test -n "$1"; then
		test "$(inner $r)" = $SPID &&
		test "$(cat /proc/$(proc_field $r 4)/comm)" = gpuckpt-init
	else
		test $r = $SPID &&
		test "$(proc_field $r 4)" = $g
	fi &&
	k=$n &&
	for s in HUP INT USR1 USR2; do
		kill -$s $g &&
		k=$((k + 1)) &&
		wait_got $k &&
		grep "^got " "$TRASH/st.log" | tail -n 1 | grep -q "^got $s" ||
		    return 1
	done &&
	test "$(grep -c "^got " "$TRASH/st.log")" = $((n + 4)) &&
	proc_running $g &&
	kill -TERM $g &&
	{ wait $g; echo $? >ws.st; } &&
	test "$(cat ws.st)" = 143 &&
	test_line_count ws.err 1 &&
	test_grep "^gpurestore: process $r was killed by signal 15 (Terminated)\$" ws.err &&
	wait_gone $r
}

test_expect_success '--wait passes HUP, INT, USR1, USR2 and TERM on; 128+15' '
	waitsig ""
'

test_expect_success '--wait --pidns: the same, through the namespace' '
	waitsig --pidns
'

# In a cgroup of the pids controller of its own.
cg=/sys/fs/cgroup/pids
test_expect_success 'the restored tree stays in the cgroup of gpurestore' '
	test -d $cg &&
	mkdir $cg/gck-a.$$ $cg/gck-b.$$ &&
	cgroups="$cg/gck-a.$$ $cg/gck-b.$$" &&
	rm -f "$TRASH/cg.log" &&
	sh -c "echo \$\$ >$cg/gck-a.$$/cgroup.procs &&
	    exec setsid \"$SIGREC\" \"$TRASH/cg.log\" </dev/null >/dev/null 2>&1" &
	wait_for_line "$TRASH/cg.log" "^ready " 30 &&
	c=$(sed -n "s/^ready pid=\([0-9]*\).*/\1/p" "$TRASH/cg.log") &&
	started="$started $c" &&
	grep -q ":pids:/gck-a.$$\$" /proc/$c/cgroup &&
	"$GCKPT" -p $c -o cg.gck &&
	wait_gone $c &&
	for ns in "" --pidns; do
		sh -c "echo \$\$ >$cg/gck-b.$$/cgroup.procs &&
		    exec \"$GCKRESTORE\" $ns --pidfile cg.pid cg.gck" &&
		r=$(cat cg.pid) &&
		started="$started $r" &&
		grep ":pids:" /proc/$r/cgroup &&
		grep -q ":pids:/gck-b.$$\$" /proc/$r/cgroup &&
		kill_tree $r || return 1
	done
'

test_expect_success 'nothing left in TMPDIR' '
	test -z "$(ls -A "$TMPDIR")"
'

test_done
