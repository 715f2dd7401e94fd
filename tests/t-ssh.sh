#!/bin/sh
test_description='gpuckpt | ssh host gpurestore through a real sshd'
. "$GCK_SRCDIR/lib.sh"

require_criu
require_sshd

sshd_pid=
started=
test_cleanup() {
	test -n "$started" && kill_tree $started >/dev/null 2>&1
	test -n "$sshd_pid" && kill_tree $sshd_pid >/dev/null 2>&1
	:
}

test_expect_success 'start sshd on 127.0.0.1' '
	ssh-keygen -q -t ed25519 -N "" -C gck-host -f hostkey &&
	ssh-keygen -q -t ed25519 -N "" -C gck-user -f userkey &&
	cp userkey.pub authorized_keys &&
	start_sshd &&
	echo "[127.0.0.1]:$port $(cat hostkey.pub)" >known_hosts
'

test_expect_success 'ssh reaches it, checking the host key' '
	remote echo hello >out &&
	echo hello >expect &&
	test_cmp expect out
'

test_expect_success 'start a workload' '
	start_workload ssh -m 64 &&
	started=$WPID &&
	WSTART=$(proc_field $WPID 22) &&
	verify_workload $WPID &&
	before=$VCOUNTER
'

test_expect_success 'gpuckpt -p PID | ssh host gpurestore' '
	mkdir rtmp &&
	{ "$GCKPT" -p $WPID 2>ckpt.err; echo $? >ckpt.st; } |
	    remote "TMPDIR=\"$TRASH/rtmp\" \"$GCKRESTORE\"" \
	    >out 2>err &&
	echo 0 >expect &&
	test_cmp expect ckpt.st &&
	test_line_count ckpt.err 1 &&
	test_grep "^gpuckpt: process tree $WPID left stopped: its image went to a pipe, and only the restoring end knows if it runs there; once it does, end it here with .kill -KILL $WPID $WCHILD., or resume it with .kill -CONT $WPID $WCHILD.\$" ckpt.err &&
	test_must_be_empty err &&
	echo $WPID >expect &&
	test_cmp expect out
'

test_expect_success 'the restored tree outlives the ssh session' '
	sleep 1 &&
	proc_running $WPID &&
	proc_running $WCHILD &&
	test "$(proc_field $WPID 22)" != "$WSTART" &&
	verify_workload $WPID &&
	test $VCOUNTER -gt $before &&
	test -z "$(ls -A rtmp)" &&
	test -z "$(ls -A "$TMPDIR")"
'

test_expect_success 'a refused image comes back as an error over ssh' '
	test_status 1 remote "\"$GCKRESTORE\"" </dev/null \
	    >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpurestore: empty input" err
'

test_expect_success 'stop sshd' '
	p=$sshd_pid &&
	sshd_pid= &&
	kill $p &&
	wait_child $p
	test ! -d /proc/$p
'

test_done
