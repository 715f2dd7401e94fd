#!/bin/sh
test_description='checkpoint a process tree that lives in a PID namespace of its own'
. "$GCK_SRCDIR/lib.sh"

require_criu
require_python
# The gpusend case needs sshd (see start_sshd), which is not skipped.
test -n "$SSHD" || SSHD=$(PATH=$PATH:/usr/sbin:/usr/local/sbin command -v sshd)

started=
sshd_pid=
test_cleanup() {
	test -n "$started" && kill_tree $started >/dev/null 2>&1
	test -n "$sshd_pid" && kill_tree $sshd_pid >/dev/null 2>&1
	:
}

# ns_start NAME [setsid]: starts the workload in a new PID namespace
# with a /proc of its own, under ./reaper as the namespace's init and a
# shell that waits for it: in a session of its own with "setsid" (the
# default), else in the session of its parent, outside the namespace.
# Sets NSPROC (unshare), NSINIT (the init, as we see it), WPID and
# WCHILD (the workload and its child, as the namespace sees them), HPID
# and HCHILD (the same, as we see them) and WSTATUS.
ns_start() {
	WSTATUS=$TRASH/$1.status
	rm -f "$WSTATUS"
	unshare --pid --fork --mount-proc "$GCK_TESTDIR/reaper" sh -c \
	    "${2-setsid} '$WORKLOAD' -m 16 -f '$WSTATUS' \
	    </dev/null >/dev/null 2>&1 & wait" </dev/null >/dev/null 2>&1 &
	NSPROC=$!
	started="$started $NSPROC"
	wait_for_line "$WSTATUS" '^ready ' 60 || return 1
	WPID=$(sed -n 's/^ready pid=\([0-9]*\).*/\1/p' "$WSTATUS")
	WCHILD=$(sed -n 's/^ready .*child=\([0-9]*\).*/\1/p' "$WSTATUS")
	NSINIT=$(cat /proc/$NSPROC/task/*/children | awk '{ print $1 }')
	HPID=$(host_pid $NSINIT $WPID)
	HCHILD=$(host_pid $NSINIT $WCHILD)
	test -n "$WPID" && test -n "$WCHILD" && test -n "$NSINIT" &&
	    test -n "$HPID" && test -n "$HCHILD" && test "$HPID" != "$WPID"
}

# host_pid INIT PID: the PID here of the process under INIT that is PID
# in INIT's namespace.
host_pid() {
	for _h in $(proc_descendants $1); do
		test "$(awk '/^NSpid:/ { print $NF }' /proc/$_h/status \
		    2>/dev/null)" = "$2" && echo $_h && return 0
	done
	echo >&2 "no process $2 under $1"
	return 1
}

# ns_gone: the namespace has ended (its init is gone with the tree).
ns_gone() {
	wait_gone $HPID && wait_gone $HCHILD && wait_gone $NSINIT &&
	    wait_gone $NSPROC && wait $NSPROC 2>/dev/null
	return 0
}

# check_ns_image IMAGE ROOT CHILD: the manifest and CRIU's files name
# the processes by ROOT and CHILD, their PIDs in the namespace.
check_ns_image() {
	zstd -dc "$1" | tar tf - >names &&
	zstd -dc "$1" | tar xOf - gpuckpt.json >manifest.json &&
	grep "^criu/core-$2\.img\$" names >/dev/null &&
	grep "^criu/pagemap-$2\.img\$" names >/dev/null &&
	grep "^criu/core-$3\.img\$" names >/dev/null &&
	python3 - manifest.json "$2" "$3" <<-'EOF'
	import json, sys
	m = json.load(open(sys.argv[1]))
	root, child = int(sys.argv[2]), int(sys.argv[3])
	procs = {p["pid"]: p for p in m["processes"]}
	assert m["root_pid"] == root, m["root_pid"]
	assert sorted(procs) == sorted([root, child]), sorted(procs)
	assert procs[root]["sid"] == root and procs[root]["pgid"] == root, \
	    procs[root]
	assert procs[child]["ppid"] == root, procs[child]
	assert procs[child]["sid"] == root, procs[child]
	EOF
}

test_expect_success 'a tree in a PID namespace is checkpointed and goes on with -R' '
	ns_start a &&
	"$GCKPT" -p $HPID -R -o img1.gck 2>err &&
	test_must_be_empty err &&
	test -s img1.gck &&
	verify_workload $HPID &&
	proc_running $HCHILD
'

test_expect_success 'the image holds the PIDs the namespace gave the tree' '
	check_ns_image img1.gck $WPID $WCHILD &&
	"$GCKINSPECT" --verify img1.gck >/dev/null &&
	"$GCKINSPECT" img1.gck >show &&
	test_grep "^processes   2, threads 3, root $WPID\$" show &&
	test_grep "^$WPID  *[0-9]* " show &&
	test_grep "^  $WCHILD  *$WPID " show &&
	! grep "^ *$HPID " show
'

test_expect_success 'the namespace PIDs are said with -vv' '
	"$GCKPT" -vv -p $HPID -R -o img1v.gck 2>err &&
	test_grep "process tree $HPID is in a PID namespace of its own, as process $WPID; its init is process $NSINIT" err &&
	test_grep "dump -t $WPID " err &&
	verify_workload $HPID
'

test_expect_success 'by default the tree is killed once its image is written' '
	"$GCKPT" -p $HPID -o img2.gck 2>err &&
	test_must_be_empty err &&
	ns_gone &&
	check_ns_image img2.gck $WPID $WCHILD
'

test_expect_success 'the init of a PID namespace is refused and left running' '
	ns_start b &&
	test_status 1 "$GCKPT" -p $NSINIT -o init.gck 2>err &&
	echo "gpuckpt: cannot checkpoint pid $NSINIT: it is the init (pid 1) of its PID namespace, which criu dumps only with the whole namespace, and its root is this host'\''s: checkpoint a process under it (-p $(proc_descendants $NSINIT | head -n 1)); process tree $NSINIT left running" >expect &&
	test_cmp expect err &&
	test ! -e init.gck &&
	proc_running $NSINIT &&
	verify_workload $HPID
'

test_expect_success 'an output that cannot be created leaves the tree running' '
	test_status 1 "$GCKPT" -p $HPID -o nodir/img.gck 2>err &&
	test_grep "^gpuckpt: cannot create .*process tree $HPID left running\$" err &&
	test_line_count err 1 &&
	verify_workload $HPID
'

test_expect_success 'a write that fails while criu holds the tree leaves it running' '
	test_status 1 "$GCKPT" -p $HPID -o /dev/full 2>err &&
	echo "gpuckpt: cannot write image: No space left on device; process tree $HPID left running" >expect &&
	test_cmp expect err &&
	verify_workload $HPID &&
	proc_running $HCHILD
'

test_expect_success 'a criu that fails in the namespace after its dump: the tree runs on' '
	fake_criu fail-after &&
	test_status 1 env GCK_CRIU="$TRASH/fakecriu" \
	    "$GCKPT" -p $HPID -o failed.gck 2>err &&
	test_grep "criu dump of pid $HPID failed: .*injected failure; process tree $HPID left running\$" err &&
	test ! -e failed.gck &&
	verify_workload $HPID &&
	proc_running $HCHILD &&
	kill_tree $NSPROC
'

test_expect_success 'a tree in session 0 of its namespace is refused' '
	ns_start c "" &&
	test_status 1 "$GCKPT" -p $HPID -o s0.gck 2>err &&
	test_grep "cannot checkpoint pid $HPID: process $HPID (.workload.) is in session 0 (its session leader is outside this PID namespace), which CRIU cannot record (start the job with setsid); process tree $HPID left running\$" err &&
	verify_workload $HPID &&
	kill_tree $NSPROC
'

test_expect_success 'a PID namespace without a /proc of its own is refused' '
	rm -f nomount.status &&
	unshare --pid --fork "$GCK_TESTDIR/reaper" sh -c \
	    "setsid \"$WORKLOAD\" -m 16 -f \"$TRASH/nomount.status\" \
	    </dev/null >/dev/null 2>&1 & wait" </dev/null >/dev/null 2>&1 &
	NSPROC=$! &&
	started="$started $NSPROC" &&
	wait_for_line nomount.status "^ready " 60 &&
	NSINIT=$(cat /proc/$NSPROC/task/*/children | awk "{ print \$1 }") &&
	WPID=$(sed -n "s/^ready pid=\([0-9]*\).*/\1/p" nomount.status) &&
	HPID=$(host_pid $NSINIT $WPID) &&
	test_status 1 "$GCKPT" -p $HPID -o nomount.gck 2>err &&
	echo "gpuckpt: cannot checkpoint pid $HPID: its PID namespace has no /proc of its own in the tree'"'"'s mount namespace, where criu must run (start such a tree with '"'"'unshare --pid --fork --mount-proc'"'"'); process tree $HPID left running" >expect &&
	test_cmp expect err &&
	test ! -e nomount.gck &&
	verify_workload $HPID nomount.status &&
	kill_tree $NSPROC
'

# restored RPID: the tree restored as RPID here is the workload, in a
# PID namespace of its own under gpuckpt-init, with the PIDs it had in
# its namespace, and it goes on from where it was: its counter past
# $before.  Sets RINIT.
restored() {
	test "$(awk '/^NSpid:/ { print $NF }' /proc/$1/status)" = $WPID &&
	test "$(readlink /proc/$1/ns/pid)" != "$(readlink /proc/self/ns/pid)" &&
	RINIT=$(proc_field $1 4) &&
	test "$(cat /proc/$RINIT/comm)" = gpuckpt-init &&
	test "$(awk '/^NSpid:/ { print $NF }' /proc/$RINIT/status)" = 1 &&
	verify_workload $1 &&
	test $VCOUNTER -gt $before &&
	grep "^verify ok .* child=$WCHILD gap=[0-9]*\$" "$WSTATUS" >/dev/null
}

test_expect_success 'an image of a tree in a namespace is restored with --pidns, and goes on' '
	ns_start d &&
	verify_workload $HPID &&
	before=$VCOUNTER &&
	"$GCKPT" -p $HPID -o rt1.gck 2>err &&
	test_must_be_empty err &&
	ns_gone &&
	"$GCKRESTORE" --pidns rt1.gck >pid1 2>err &&
	test_must_be_empty err &&
	RPID=$(cat pid1) &&
	started="$started $RPID" &&
	restored $RPID &&
	before=$VCOUNTER
'

test_expect_success 'the init of a restored namespace is refused, its tree left running' '
	test_status 1 "$GCKPT" -p $RINIT -o init2.gck 2>err &&
	test_grep "^gpuckpt: cannot checkpoint pid $RINIT: it is the init (pid 1) of its PID namespace, .* (-p $RPID); process tree $RINIT left running\$" err &&
	test ! -e init2.gck &&
	proc_running $RINIT &&
	verify_workload $RPID
'

test_expect_success 'a tree restored with --pidns is checkpointed again, and restored again' '
	"$GCKPT" -p $RPID -o rt2.gck 2>err &&
	test_must_be_empty err &&
	wait_gone $RPID &&
	wait_gone $RINIT &&
	check_ns_image rt2.gck $WPID $WCHILD &&
	"$GCKRESTORE" --pidns rt2.gck >pid2 2>err &&
	test_must_be_empty err &&
	RPID=$(cat pid2) &&
	started="$started $RPID" &&
	restored $RPID &&
	kill_tree $RINIT
'

test_expect_success 'gpuckpt -p PID | gpurestore on this host: the source in its namespace is ended' '
	ns_start p &&
	verify_workload $HPID &&
	before=$VCOUNTER &&
	{ "$GCKPT" -p $HPID 2>ck.err; echo $? >ck.st; } |
	    "$GCKRESTORE" --pidns >pidp 2>err &&
	test "$(cat ck.st)" = 0 &&
	test_must_be_empty ck.err &&
	test_must_be_empty err &&
	ns_gone &&
	RPID=$(cat pidp) &&
	started="$started $RPID" &&
	restored $RPID &&
	kill_tree $RINIT
'

test_expect_success 'gpusend -p moves a tree in a namespace, here, into one of its own' '
	ssh-keygen -q -t ed25519 -N "" -C gck-host -f hostkey &&
	ssh-keygen -q -t ed25519 -N "" -C gck-user -f userkey &&
	cp userkey.pub authorized_keys &&
	start_sshd &&
	echo "[127.0.0.1]:$port $(cat hostkey.pub)" >known_hosts &&
	mkdir home rtmp &&
	ns_start e &&
	verify_workload $HPID &&
	before=$VCOUNTER &&
	HOME=$TRASH/home "$GCK_BINDIR/send/gpusend" -P "$port" \
	    -i "$TRASH/userkey" -o IdentityAgent=none \
	    -o UserKnownHostsFile="$TRASH/known_hosts" \
	    --remote-path "TMPDIR=$TRASH/rtmp $GCK_BINDIR/recv/gpurecv" \
	    -p $HPID root@127.0.0.1 >out 2>err &&
	test_must_be_empty err &&
	ns_gone &&
	RPID=$(cat out) &&
	started="$started $RPID" &&
	restored $RPID &&
	kill_tree $RINIT
'

test_done
