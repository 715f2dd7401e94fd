#!/bin/sh
test_description='file descriptors and memory mappings survive gpuckpt | gpurestore'
. "$GCK_SRCDIR/lib.sh"

# Each case of ./statefds sets up one kind of state, says "ready",
# waits for "go" and checks the state itself (see statefds.c).  Here
# every case goes through a real checkpoint and restore; and, as a
# negative control, runs again with PERTURB=1, which changes the state
# after "ready" with no checkpoint at all: its check must then fail.

require_criu
STATEFDS=$GCK_TESTDIR/statefds

started=
test_cleanup() {
	test -n "$started" && kill_tree $started >/dev/null 2>&1
}

# start_case CASE [perturbed]: starts "statefds CASE DIR" in a session
# of its own, DIR being $TRASH/CASE (or CASE-perturbed, with PERTURB=1),
# and waits until it is ready.  Sets SDIR, SPID and SSTART (its start
# time).
start_case() {
	SDIR=$TRASH/$1${2:+-$2}
	mkdir "$SDIR" || return 1
	(PERTURB=${2:+1} setsid "$STATEFDS" "$1" "$SDIR" </dev/null \
	    >"$SDIR.out" 2>"$SDIR.err" &)
	_i=0
	until test -s "$SDIR/ready"; do
		_i=$((_i + 1))
		if test $_i -gt 100; then
			echo >&2 "statefds $1 is not ready:"
			cat >&2 "$SDIR.err"
			return 1
		fi
		sleep 0.05
	done
	SPID=$(cat "$SDIR/ready")
	started="$started $SPID"
	SSTART=$(proc_field $SPID 22)
	test -n "$SSTART"
}

# finish_case: tells the case to check and waits for its result, then
# for it to exit; RESULT holds what it says.
finish_case() {
	: >"$SDIR/go"
	wait_for_line "$SDIR/result" . 10 || return 1
	RESULT=$(cat "$SDIR/result")
	echo >&2 "result: $RESULT"
	wait_gone $SPID
}

# checkpoint: gpuckpt -p $SPID | gpurestore; both exit 0, gpurestore
# prints $SPID and a new process (another start time) runs there.
checkpoint() {
	{ "$GCKPT" -p $SPID 2>ckpt.err; echo $? >ckpt.st; } |
	    "$GCKRESTORE" >restore.out 2>restore.err
	_st=$?
	cat >&2 ckpt.err restore.err
	test $_st -eq 0 &&
	test "$(cat ckpt.st)" = 0 &&
	echo $SPID >expect &&
	test_cmp expect restore.out &&
	proc_running $SPID &&
	test "$(proc_field $SPID 22)" != "$SSTART"
}

# limit CASE: what a case that CRIU itself cannot do (checked with plain
# criu dump/restore on the same kernel) shows: LIMIT_DUMP, what gpuckpt
# says when criu refuses the dump, or LIMIT_RESULT, the result of the
# restored case; and LIMIT_WHY, the reason it is skipped for.
limit() {
	LIMIT_DUMP=
	LIMIT_RESULT=
	LIMIT_WHY=
	case $1 in
	unix-inflight)
		LIMIT_DUMP='Non-empty write queue on an in-flight socket'
		LIMIT_WHY='criu refuses a unix connection not yet accepted that has data queued ("Non-empty write queue on an in-flight socket", criu/sk-unix.c)' ;;
	eventfd-semaphore)
		LIMIT_RESULT="FAIL $1: not a semaphore: *"
		LIMIT_WHY='criu restores an eventfd without EFD_SEMAPHORE (its image keeps the counter and the status flags only)' ;;
	esac
}

# run_case CASE: the case through gpuckpt | gpurestore must say "ok";
# where CRIU has a known limit and it shows, SKIP says why, and a
# refused dump must have left the process running and unharmed.
run_case() {
	limit $1
	start_case $1 || return 1
	if ! checkpoint; then
		test -n "$LIMIT_DUMP" && grep "$LIMIT_DUMP" ckpt.err >/dev/null ||
		    return 1
		test "$(cat ckpt.st)" = 1 &&
		test "$(proc_field $SPID 22)" = "$SSTART" &&
		proc_running $SPID &&
		finish_case &&
		test "$RESULT" = "ok $1" &&
		SKIP=$LIMIT_WHY
		return
	fi
	finish_case || return 1
	test "$RESULT" = "ok $1" && return 0
	test -n "$LIMIT_RESULT" || return 1
	case $RESULT in
	$LIMIT_RESULT)
		SKIP=$LIMIT_WHY ;;
	*)	return 1 ;;
	esac
}

for c in $("$STATEFDS" -l); do
	SKIP=
	test_expect_success "$c: restored, the state checks out" '
		run_case $c
	' >tap.out
	read -r line <tap.out
	case $SKIP,$line in
	?*,"ok "*)
		echo "$line # SKIP $SKIP" ;;
	*)	cat tap.out ;;
	esac
done

for c in $("$STATEFDS" -l); do
	test_expect_success "$c: a change without checkpoint is caught" '
		start_case $c perturbed &&
		finish_case &&
		case $RESULT in
		"FAIL $c: "*) ;;
		*)	false ;;
		esac
	'
done

test_done
