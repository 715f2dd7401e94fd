#!/bin/sh
test_description='process state survives gpuckpt | gpurestore: threads, FPU, signals, timers, ids'
. "$GCK_SRCDIR/lib.sh"

require_criu

STATEPROC=$GCK_TESTDIR/stateproc

# Each case of stateproc, and what its check says when PERTURB=1 has
# changed the state (- for a case that has no negative control).
cases='
threads		thread 2: name .changed.
fpu		[xy]mm5 differs
sigaction	signal 12: flags
sigpending	6 signals delivered, expected 7
sigaltstack	main: alternate stack
posixtimers	timer 1: interval
itimers		itimer 2: interval
timerfd		timerfd 1: interval
timerfdexpired	timerfd 0: interval 0 ns
cwd		cwd .*expected
umask		umask not 0027
rlimits		limit 0: 
pgrp		C ([0-9]*): process group
zombie		expected zombies
futex		thread 3 is not in futex
comm		name .other.
personality	personality 0x
nonewprivs	-
pdeathsig	parent death signal
dumpable	dumpable 1, expected 0
subreaper	child subreaper 0
thpdisable	THP not disabled
'

criu_loses='personality timerfdexpired'

started=
test_cleanup() {
	test -n "$started" && kill_tree $started >/dev/null 2>&1
}

# test_skip DESCRIPTION REASON...: a test that cannot run here, and why.
test_skip() {
	test_count=$((test_count + 1))
	_desc=$1
	shift
	echo "ok $test_count - $_desc # SKIP $*"
}

# state_start CASE [perturb]: starts stateproc CASE detached in a session
# of its own, in the directory $TRASH/CASE (CASE.perturbed, with
# PERTURB=1), and waits until it is ready.  Sets SDIR, SPID and SSTART
# (its start time).
state_start() {
	SDIR=$TRASH/$1${2:+.perturbed}
	rm -rf "$SDIR" &&
	mkdir "$SDIR" || return 1
	(PERTURB=${2:+1} setsid "$STATEPROC" "$1" "$SDIR" </dev/null \
	    >"$SDIR/out" 2>"$SDIR/err" &)
	if ! wait_for_line "$SDIR/ready" '^[0-9][0-9]*$' 10; then
		cat >&2 "$SDIR/err"
		return 1
	fi
	SPID=$(cat "$SDIR/ready")
	started="$started $SPID"
	SSTART=$(proc_field $SPID 22)
	proc_running $SPID
}

# state_roundtrip: gpuckpt -p $SPID | gpurestore; both succeed, and a
# new process runs in the place of the old one, at the PID gpurestore
# printed.
state_roundtrip() {
	{ "$GCKPT" -p $SPID 2>"$SDIR/ckpt.err"; echo $? >"$SDIR/ckpt.st"; } |
	    "$GCKRESTORE" >"$SDIR/restore.out" 2>"$SDIR/restore.err"
	_st=$?
	cat >&2 "$SDIR/ckpt.err" "$SDIR/restore.err"
	test $_st -eq 0 &&
	test "$(cat "$SDIR/ckpt.st")" = 0 &&
	test_must_be_empty "$SDIR/ckpt.err" &&
	test_must_be_empty "$SDIR/restore.err" &&
	echo $SPID >"$SDIR/expect" &&
	test_cmp "$SDIR/expect" "$SDIR/restore.out" &&
	proc_running $SPID &&
	test "$(proc_field $SPID 22)" != "$SSTART"
}

# criu_keeps CASE: whether plain criu dump and restore, without gpuckpt,
# keep the state of CASE (the process checks it as usual).
criu_keeps() {
	state_start $1 &&
	mkdir "$SDIR/img" &&
	CRIU_FAULT=130 "$CRIU" dump -t $SPID -D "$SDIR/img" -o dump.log &&
	wait_gone $SPID &&
	CRIU_FAULT=130 "$CRIU" restore -d -D "$SDIR/img" -o restore.log &&
	state_result &&
	test "$RESULT" = "ok $1"
}

# state_result: tells the process to check its state and waits for its
# verdict, in RESULT, and for it to exit.
state_result() {
	: >"$SDIR/go" &&
	wait_for_line "$SDIR/result" '^' 10 &&
	RESULT=$(cat "$SDIR/result") &&
	echo >&2 "result: $RESULT" &&
	wait_gone $SPID
}

ifs=$IFS
IFS='
'
for line in $cases; do
	IFS=$ifs
	case=${line%%	*}
	pattern=$(echo "$line" | sed 's/^[^	]*	*//')
	# What CRIU 4.2.1 loses, whatever runs it, skips where plain criu
	# loses it too: personality(2) flags (it reads the hexadecimal
	# /proc/PID/personality as a decimal number), and a periodic timerfd
	# whose expiration is unread (it restores the it_value of 0 that
	# /proc/PID/fdinfo shows, which disarms it).
	if expr " $criu_loses " : ".* $case " >/dev/null &&
	    ! criu_keeps $case 2>/dev/null; then
		kill_tree $SPID 2>/dev/null
		test_skip "$case: round trip" "plain criu dump and restore" \
		    "lose this state here too: $RESULT"
	else
		test_expect_success "$case: gpuckpt -p PID | gpurestore" '
			state_start $case &&
			state_roundtrip
		'
		test_expect_success "$case: the restored process finds its state" '
			state_result &&
			test "$RESULT" = "ok $case"
		'
	fi
	test "$pattern" = - && continue
	test_expect_success "$case: a changed state fails the check" '
		state_start $case perturb &&
		state_result &&
		case $RESULT in
		"FAIL $case: "*) ;;
		*)	false ;;
		esac &&
		expr "$RESULT" : "FAIL $case: .*$pattern" >/dev/null
	'
done

test_done
