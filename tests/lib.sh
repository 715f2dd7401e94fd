# lib.sh -- a small TAP test library for the gpuckpt shell tests.
#
#	test_description='what this script covers'
#	. "$GCK_SRCDIR/lib.sh"
#	test_expect_success 'description' 'commands && more commands'
#	test_done
#
# Each script runs in its own scratch directory under the build tree
# ($TRASH, also $TMPDIR), removed when it exits.  Set GCK_KEEP=1 to keep it.
# Under bash the commands of each test are traced into the test's log.

: "${GCK_BINDIR:?GCK_BINDIR is not set: run the tests through make check}"
: "${GCK_TESTDIR:?GCK_TESTDIR is not set: run the tests through make check}"
GCKPT=$GCK_BINDIR/ckpt/gpuckpt
GCKRESTORE=$GCK_BINDIR/restore/gpurestore
GCKINSPECT=$GCK_BINDIR/inspect/gpuinspect
GCKWATCH=$GCK_BINDIR/watch/gpuwatch
WORKLOAD=$GCK_TESTDIR/workload
# The tests' own python modules (criuimg.py).
PYTHONPATH=$GCK_SRCDIR${PYTHONPATH:+:$PYTHONPATH}
export PYTHONPATH
# The subreaper the script runs under (tests/reaper): what the script
# starts, and what it restores, descends from it.
GCK_REAPER=${GCK_REAPER:-$PPID}
test_count=0
test_failed=0
echo >&2 "${0##*/}: ${test_description:-}"

TRASH=$(mktemp -d "$GCK_TESTDIR/trash.XXXXXX") || exit 1
TMPDIR=$TRASH/tmp
export TMPDIR
# The stand-in CUDA driver heeds CUDA_VISIBLE_DEVICES as the real one
# does: the workloads see every GPU unless a test says otherwise.
unset CUDA_VISIBLE_DEVICES
mkdir "$TMPDIR" || exit 1
test_cleanup() { :; }	# a script may redefine it
trap 'test_cleanup; cd /; test -n "$GCK_KEEP" || rm -rf "$TRASH"' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
cd "$TRASH" || exit 1

# Under bash, trace into the log without touching what a test redirects.
if test -n "$BASH_VERSION"; then
	exec 4>&2
	BASH_XTRACEFD=4
fi

# Runs the commands of a test: a 'return' among them ends the test, not
# test_expect_success, which then says whether it passed.
test_eval_() {
	eval "$1"
}

test_expect_success() {
	test_count=$((test_count + 1))
	echo >&2 "expecting success of $test_count - $1"
	: >"$TRASH/.test-start"
	{
		test -n "$BASH_VERSION" && set -x
		test_eval_ "$2"
		_r=$?
		{ set +x; } 2>/dev/null
	} >&2
	if test $_r -eq 0; then
		echo "ok $test_count - $1"
	else
		test_failed=$((test_failed + 1))
		echo "not ok $test_count - $1"
		printf '%s\n' "$2" | sed 's/^/#	/'
		test_show_ >&2
	fi
}

# test_show_: into the log, what a failed test's commands wrote to the
# files its checks read ("err", "out" in the trash directory), where it
# wrote them: a message sent there is otherwise lost with the trash.
test_show_() {
	for _f in err out; do
		test -f "$TRASH/$_f" && test "$TRASH/$_f" -nt "$TRASH/.test-start" ||
		    continue
		echo "--- $_f, as the failed test left it:"
		head -c 4096 "$TRASH/$_f"
		echo "---"
	done
	# a suite's own account of what it runs on (t-slurm.sh: the nodes,
	# the jobs, the daemons' logs)
	if command -v test_failed_hook >/dev/null 2>&1; then
		echo "--- test_failed_hook:"
		test_failed_hook
		echo "---"
	fi
}

# san_benign: drops from $GCK_SANDIR the files that hold only
# LeakSanitizer's note that it could not read a thread's registers: the
# thread went while it scanned (a process killed as it exited), which is
# no finding.  sancheck.sh does the same.
san_benign() {
	for _f in "$GCK_SANDIR"/*; do
		test -f "$_f" || continue
		grep -qv '^==[0-9]*==Unable to get registers from thread [0-9]*\.$' \
		    "$_f" || rm -f "$_f"
	done
}

test_done() {
	# configure --enable-sanitizers: see sancheck.sh.
	test -n "${GCK_SANDIR:-}" && san_benign
	if test -n "${GCK_SANDIR:-}" && test -n "$(ls -A "$GCK_SANDIR")"; then
		test_count=$((test_count + 1))
		test_failed=$((test_failed + 1))
		echo "not ok $test_count - no sanitizer reports"
		ls "$GCK_SANDIR" | sed "s|^|#	$GCK_SANDIR/|"
	fi
	echo "1..$test_count"
	test "$test_failed" -eq 0
	exit
}

# Skips the whole script, or fails it where CI=true: CI provides CRIU,
# root and sshd, so a missing one there is a broken setup, not a skip.
test_skip_all() {
	if test "$CI" = true; then
		echo "not ok 1 - $1 (required when CI=true)"
		echo "1..1"
		exit 1
	fi
	echo "1..0 # SKIP $1"
	exit 0
}

# Succeeds if the command fails in an orderly way: status 1..125.
test_must_fail() {
	"$@"
	_st=$?
	if test $_st -eq 0; then
		echo >&2 "test_must_fail: '$*' succeeded"
		return 1
	elif test $_st -gt 125; then
		echo >&2 "test_must_fail: '$*' died with status $_st"
		return 1
	fi
	return 0
}

# test_status N command...: the command exits with status N.
test_status() {
	_want=$1
	shift
	"$@"
	_st=$?
	test $_st -eq "$_want" && return 0
	echo >&2 "'$*' exited $_st, expected $_want"
	return 1
}

test_cmp() {
	diff -u "$1" "$2"
}

test_must_be_empty() {
	test ! -s "$1" && return 0
	echo >&2 "'$1' is not empty:"
	cat >&2 "$1"
	return 1
}

# test_line_count FILE N: FILE has exactly N lines.
test_line_count() {
	_n=$(wc -l <"$1")
	test "$_n" -eq "$2" && return 0
	echo >&2 "'$1' has $_n lines, expected $2:"
	cat >&2 "$1"
	return 1
}

# test_grep PATTERN FILE: like grep -e, but shows FILE when it fails.
test_grep() {
	grep -e "$1" "$2" >/dev/null && return 0
	echo >&2 "no '$1' in '$2':"
	cat >&2 "$2"
	return 1
}

require_root() {
	test "$(id -u)" -eq 0 || test_skip_all "not running as root"
}

require_criu() {
	require_root
	CRIU=${GCK_CRIU:-$(PATH=$PATH:/usr/local/sbin:/usr/sbin:/sbin \
	    command -v criu)}
	test -n "$CRIU" && test -x "$CRIU" || test_skip_all "criu not found"
}

# limit_memory MiB: bounds the memory of what this shell runs next:
# ulimit -v, or under configure --enable-sanitizers, where ASan's shadow
# memory needs terabytes of address space, ASan's bounds on what malloc
# gives (a NULL past them: allocator_may_return_null is set).
limit_memory() {
	if test -n "${GCK_SANDIR:-}"; then
		ASAN_OPTIONS="$ASAN_OPTIONS:soft_rss_limit_mb=$1"
		ASAN_OPTIONS="$ASAN_OPTIONS:max_allocation_size_mb=$1"
		export ASAN_OPTIONS
	else
		ulimit -v $(($1 * 1024))
	fi
}

# fake_criu HOW: writes ./fakecriu, which runs the real criu ($CRIU, see
# require_criu) and, for a dump, misbehaves as HOW says: fail-before,
# fail-after (criu dumped and left the tree stopped) or slow; or, with
# fail-restore, fails every restore; or, with rewrite-first, has the
# workload $WPID (of $WSTATUS, as fake_criu is called) rewrite what its
# -r says before each dump, after any pre-copy round.
fake_criu() {
	cat >fakecriu <<-EOF
	#!/bin/sh
	case " \$* " in
	*" restore "*)
		case $1 in
		fail-restore)
			echo "Error (criu/cr-restore.c:1): injected failure" >&2
			exit 1 ;;
		esac ;;
	*" dump "*)
		case $1 in
		fail-before)
			echo "Error (criu/cr-dump.c:2184): injected failure" >&2
			exit 1 ;;
		fail-after)
			"$CRIU" "\$@" || exit
			echo "Error (criu/cr-dump.c:2184): injected failure" >&2
			exit 1 ;;
		slow)
			"$CRIU" "\$@" || exit
			exec sleep 10 ;;
		rewrite-first)
			# the workload $WPID rewrites (-r) before the dump
			n=\$(grep -c "^rewrote " "$WSTATUS")
			kill -USR2 $WPID
			i=0
			while test "\$(grep -c "^rewrote " "$WSTATUS")" -le \$n &&
			    test \$i -lt 100; do
				i=\$((i + 1)); sleep 0.1
			done ;;
		esac ;;
	esac
	exec "$CRIU" "\$@"
	EOF
	chmod +x fakecriu
}

# require_sshd: OpenSSH's sshd, ssh and ssh-keygen, or the test is
# skipped (which CI does not take for a pass).
require_sshd() {
	test -n "$SSHD" ||
	    SSHD=$(PATH=$PATH:/usr/sbin:/usr/local/sbin command -v sshd)
	test -n "$SSHD" && test -x "$SSHD" || test_skip_all "sshd not found"
	command -v ssh >/dev/null && command -v ssh-keygen >/dev/null ||
	    test_skip_all "ssh or ssh-keygen not found"
}

# start_sshd [COMMAND...]: starts sshd (run by COMMAND, if given, e.g.
# unshare) on a free port of 127.0.0.1 (or of $SSHD_ADDR), with the host key
# $TRASH/hostkey and the keys of $TRASH/authorized_keys; sets port and
# sshd_pid (that of COMMAND).  The system's sshd is not touched.  Its
# sessions have GCK_CACHE=$TRASH/rcache: gpurecv's cache is the
# script's.
start_sshd() {
	_addr=${SSHD_ADDR:-127.0.0.1}
	mkdir -p /run/sshd || return 1
	for _try in 1 2 3 4 5 6 7 8 9 10; do
		port=$(awk -v s="$$$_try" \
		    'BEGIN { srand(s); print 20000 + int(rand() * 40000) }')
		cat >"$TRASH/sshd_config" <<-EOF
		ListenAddress $_addr
		Port $port
		HostKey $TRASH/hostkey
		AuthorizedKeysFile $TRASH/authorized_keys
		PermitRootLogin prohibit-password
		PubkeyAuthentication yes
		PasswordAuthentication no
		KbdInteractiveAuthentication no
		UsePAM no
		StrictModes no
		MaxStartups 100
		MaxSessions 100
		PidFile none
		EOF
		# gpurecv keeps what it restores in a cache of this
		# script's own; the sessions' programs report as the tests'
		# do (sancheck.sh).
		_env="GCK_CACHE=$TRASH/rcache"
		if test -n "${GCK_SANDIR:-}"; then
			_env="$_env ASAN_OPTIONS=$ASAN_OPTIONS"
			_env="$_env UBSAN_OPTIONS=$UBSAN_OPTIONS"
		fi
		echo "SetEnv $_env" >>"$TRASH/sshd_config"
		# Newer sshd penalise a source whose sessions fail: not here.
		"$SSHD" -t -f "$TRASH/sshd_config" -o PerSourcePenalties=no \
		    2>/dev/null &&
		    echo "PerSourcePenalties no" >>"$TRASH/sshd_config"
		"$@" "$SSHD" -D -e -f "$TRASH/sshd_config" 2>"$TRASH/sshd.log" &
		sshd_pid=$!
		_i=0
		while test $_i -lt 100 && test -d /proc/$sshd_pid &&
		    test "$(proc_field $sshd_pid 3)" != Z; do
			if grep "Server listening on $_addr port $port" \
			    "$TRASH/sshd.log" >/dev/null; then
				return 0
			fi
			_i=$((_i + 1))
			sleep 0.1
		done
		cat >&2 "$TRASH/sshd.log"
		kill $sshd_pid 2>/dev/null
		wait $sshd_pid
		sshd_pid=
	done
	return 1
}

# start_nssh: sshd in a PID namespace of its own: what it restores
# lives there, as on another host, while the source's stopped tree still
# holds its PIDs here.  Sets port, sshd_pid (unshare) and ns_init (the
# namespace's init, our reaper), ns_id and ns_depth.
start_nssh() {
	start_sshd unshare --pid --fork --mount-proc "$GCK_TESTDIR/reaper" ||
	    return 1
	_i=0
	while test -z "$(cat /proc/$sshd_pid/task/*/children)"; do
		_i=$((_i + 1))
		test $_i -lt 100 || return 1
		sleep 0.05
	done
	ns_init=$(awk '{ print $1 }' /proc/$sshd_pid/task/*/children)
	ns_id=$(readlink /proc/$ns_init/ns/pid)
	ns_depth=$(awk '/^NSpid:/ { print NF - 1 }' /proc/self/status)
}

# ns_pid PID: the PID here of the process that is PID in the sshd's
# namespace; nothing if there is none.
ns_pid() {
	grep -H '^NSpid:' /proc/[0-9]*/status 2>/dev/null |
	    awk -v d="$ns_depth" -v p="$1" 'NF == d + 2 && $NF == p {
		sub(/^\/proc\//, ""); sub(/\/.*/, ""); print }' |
	    while read _h; do
		test "$(readlink /proc/$_h/ns/pid 2>/dev/null)" = "$ns_id" &&
		    echo $_h
	    done
}

# remote_kh KNOWN_HOSTS COMMAND: runs COMMAND as root@127.0.0.1 through
# the sshd of start_sshd ($port), with OpenSSH's ssh, which checks the
# host key against KNOWN_HOSTS, logging in with $TRASH/userkey.
remote_kh() {
	_kh=$1
	shift
	timeout 300 ssh -F /dev/null -i "$TRASH/userkey" -o IdentitiesOnly=yes \
	    -o IdentityAgent=none -o UserKnownHostsFile="$_kh" \
	    -o GlobalKnownHostsFile=/dev/null \
	    -o StrictHostKeyChecking=yes -o BatchMode=yes -o LogLevel=ERROR \
	    -o ConnectTimeout=10 -p "$port" root@127.0.0.1 "$@"
}

# remote COMMAND: the same, with $TRASH/known_hosts.
remote() {
	remote_kh "$TRASH/known_hosts" "$@"
}

# elsewhere SCRIPT: runs the shell commands of SCRIPT in a PID namespace
# of their own, as on another host: there the image's process IDs are
# free while its source still exists here.  Everything in it dies when
# SCRIPT ends.
elsewhere() {
	unshare --pid --fork --mount-proc "$GCK_TESTDIR/reaper" sh -c "$1"
}

require_python() {
	command -v python3 >/dev/null || test_skip_all "python3 not found"
}

# wait_for_line FILE PATTERN [SECONDS]
wait_for_line() {
	_i=0
	while ! grep -e "$2" "$1" >/dev/null 2>&1; do
		_i=$((_i + 1))
		if test $_i -gt $((${3:-30} * 10)); then
			echo >&2 "timed out waiting for '$2' in '$1'"
			return 1
		fi
		sleep 0.1
	done
}

# proc_field PID N: field N of /proc/PID/stat (3 state, 4 ppid, 6 sid).
proc_field() {
	sed 's/.*) //' "/proc/$1/stat" 2>/dev/null |
	    awk -v n="$2" '{ print $(n - 2) }'
}

# The process exists, is not a zombie and is not stopped.
proc_running() {
	_s=$(proc_field "$1" 3)
	case $_s in
	R|S|D)	return 0 ;;
	esac
	echo >&2 "process $1 is not running (state '$_s')"
	return 1
}

proc_gone() {
	test ! -d "/proc/$1" && return 0
	echo >&2 "process $1 exists (state '$(proc_field "$1" 3)')"
	return 1
}

# proc_unharmed PID START: PID runs, the process that started at START
# (field 22 of /proc/PID/stat); proc_restored PID START: PID runs, a
# process other than that one (a restore of it, with its PID).
proc_unharmed() {
	proc_running $1 && test "$(proc_field $1 22)" = "$2"
}
proc_restored() {
	proc_running $1 || return 1
	test "$(proc_field $1 22)" != "$2" && return 0
	echo >&2 "process $1 is the one that started at $2: not restored"
	return 1
}

# wait_stopped PID: waits up to 10 seconds for PID to be stopped (as a
# SIGSTOP just sent lands only once the process is next scheduled).
wait_stopped() {
	_i=0
	while test "$(proc_field "$1" 3)" != T && test $_i -lt 100; do
		_i=$((_i + 1))
		sleep 0.1
	done
	test "$(proc_field "$1" 3)" = T
}

# wait_gone PID: waits up to 10 seconds for PID to disappear.
wait_gone() {
	_i=0
	while test -d "/proc/$1" && test $_i -lt 100; do
		_i=$((_i + 1))
		sleep 0.1
	done
	proc_gone "$1"
}

# script_reap EMU PID: script(1), EMU, stops itself each time its child
# stops, and reaps that child only once continued; as a stop can be told
# it again after its continuation, continue it until PID is gone (10 s).
script_reap() {
	_i=0
	while test -d "/proc/$2" && test $_i -lt 100; do
		kill -CONT "$1" 2>/dev/null
		_i=$((_i + 1))
		sleep 0.1
	done
	proc_gone "$2"
}

# wait_child PID [SECONDS]: waits for the background job PID, killing it
# if it has not exited within SECONDS (default 30); returns its status.
wait_child() {
	_i=0
	while test -d "/proc/$1" && test "$(proc_field "$1" 3)" != Z; do
		_i=$((_i + 1))
		if test $_i -gt $((${2:-30} * 10)); then
			echo >&2 "process $1 did not exit: killing it"
			kill -KILL "$1"
			break
		fi
		sleep 0.1
	done
	wait "$1"
}

# start_workload NAME [workload options]: starts a workload in its own
# session, reparented to the test's subreaper, and waits until it is
# ready.  Sets WPID, WSUM, WCHILD and WSTATUS (its status file).
start_workload() {
	WSTATUS=$TRASH/$1.status
	shift
	rm -f "$WSTATUS"
	(setsid "$WORKLOAD" -f "$WSTATUS" "$@" </dev/null >/dev/null 2>&1 &)
	wait_for_line "$WSTATUS" '^ready ' 60 || return 1
	WPID=$(sed -n 's/^ready pid=\([0-9]*\).*/\1/p' "$WSTATUS")
	WSUM=$(sed -n 's/^ready .*sum=\([0-9a-f]*\).*/\1/p' "$WSTATUS")
	WCHILD=$(sed -n 's/^ready .*child=\([0-9]*\).*/\1/p' "$WSTATUS")
	test -n "$WPID" && test -n "$WSUM" && test -n "$WCHILD"
}

# rewrite: has the workload rewrite what its -r says (SIGUSR2); sets
# NEWSUM, the sum it holds then.
rewrite() {
	_n=$(grep -c '^rewrote ' "$WSTATUS")
	kill -USR2 $WPID || return 1
	_i=0
	while test "$(grep -c '^rewrote ' "$WSTATUS")" -le "$_n"; do
		_i=$((_i + 1))
		test $_i -le 100 || return 1
		sleep 0.1
	done
	NEWSUM=$(grep '^rewrote ' "$WSTATUS" | tail -n 1 |
	    sed 's/^rewrote sum=\([0-9a-f]*\).*/\1/')
	test -n "$NEWSUM"
}

# verify_now PID: the workload checks itself against the sum it holds
# now, NEWSUM; sets VCOUNTER.
verify_now() {
	_n=$(grep -c '^verify ' "$WSTATUS")
	kill -USR1 $1 || return 1
	_i=0
	while test "$(grep -c '^verify ' "$WSTATUS")" -le "$_n"; do
		_i=$((_i + 1))
		test $_i -le 100 || return 1
		sleep 0.1
	done
	_line=$(grep '^verify ' "$WSTATUS" | tail -n 1)
	case $_line in
	"verify ok sum=$NEWSUM "*) ;;
	*)	echo >&2 "workload $1: $_line (expected sum $NEWSUM)"
		return 1 ;;
	esac
	VCOUNTER=$(echo "$_line" | sed 's/.* counter=\([0-9]*\).*/\1/')
}

# ask_answer FILE PATTERN PID: sends SIGUSR1 to PID, which answers with
# a line of FILE that PATTERN matches, and waits up to 10 s for a new one;
# sets _line to it.
ask_answer() {
	_n=$(grep -c "$2" "$1")
	proc_running "$3" || return 1
	kill -USR1 "$3" || return 1
	_i=0
	while test "$(grep -c "$2" "$1")" -le "$_n"; do
		_i=$((_i + 1))
		if test $_i -gt 100; then
			echo >&2 "process $3 did not answer"
			return 1
		fi
		sleep 0.1
	done
	_line=$(grep "$2" "$1" | tail -n 1)
}

# verify_workload PID [STATUSFILE]: asks the workload to check itself.
# Sets VCOUNTER and VTHREAD from its answer.
verify_workload() {
	_f=${2:-$WSTATUS}
	ask_answer "$_f" '^verify ' "$1" || return 1
	# the sum it was ready with, or that of its last rewrite (-r)
	_sum=$(sed -n 's/^ready .*sum=\([0-9a-f]*\).*/\1/p
	    s/^rewrote sum=\([0-9a-f]*\).*/\1/p' "$_f" | tail -n 1)
	# one that keeps rewriting (-w) checked each run against its sum
	grep -q '^ready .* rewriting=' "$_f" && _sum='*'
	case $_line in
	"verify ok sum="$_sum" "*) ;;
	*)	echo >&2 "workload $1: $_line (its sum $_sum)"
		return 1 ;;
	esac
	VCOUNTER=$(echo "$_line" | sed 's/.* counter=\([0-9]*\).*/\1/')
	VTHREAD=$(echo "$_line" | sed 's/.* thread=\([0-9]*\).*/\1/')
}

# proc_descendants PID: the PIDs of all descendants of PID.
proc_descendants() {
	cat /proc/[0-9]*/stat 2>/dev/null | awk -v root="$1" '
	{ pid = $1; sub(/.*\) /, ""); parent[pid] = $2 }
	END {
		n = 1; q[1] = root
		for (i = 1; i <= n; i++)
			for (p in parent)
				if (parent[p] == q[i]) { q[++n] = p; print p }
	}'
}

# ask_verify FILE PID WHO: asks process PID, which says who it is by WHO
# in the lines it appends to FILE, to check its memory (SIGUSR1), and
# waits for its answer there: "verify WHO ok".
ask_verify() {
	ask_answer "$1" "^verify $3 " "$2" || return 1
	test "$_line" = "verify $3 ok" && return 0
	echo >&2 "process $2: $_line"
	return 1
}

# kill_tree PID...: SIGKILLs each PID and its descendants and waits
# until they are gone (reaped by us or by the subreaper).  Only what
# descends from our subreaper is ours: a PID given that has gone since
# may have been taken by another test's process (PIDs wrap at 32768).
kill_tree() {
	_all=
	_ours=" $(proc_descendants "$GCK_REAPER" | tr '\n' ' ') "
	for _p in "$@"; do
		case $_ours in
		*" $_p "*) ;;
		*) continue ;;
		esac
		_all="$_all $_p $(proc_descendants "$_p")"
	done
	kill -KILL $_all 2>/dev/null
	for _p in $_all; do
		wait "$_p" 2>/dev/null
	done
	for _p in $_all; do
		wait_gone "$_p" || return 1
	done
}

# man_longopts PAGE: the long options of the option list of a manual
# page: the heads of its .It items (.It Fl \-name, or the lines of an
# .It Xo ... .Xc head), not the options of other programs it cites.
man_longopts() {
	awk '
	/^\.It Xo/ { xo = 1; next }
	xo && /^\.Xc/ { xo = 0; next }
	/^\.It / || xo {
		s = $0
		while (match(s, /Fl \\-[A-Za-z0-9][A-Za-z0-9-]*/)) {
			print "--" substr(s, RSTART + 5, RLENGTH - 5)
			s = substr(s, RSTART + RLENGTH)
		}
	}' "$1" | sort -u
}

# take_pid PID: starts a sleep that has PID (the kernel hands out the
# PID after the one written to ns_last_pid, if no other process takes it
# first, so it tries again); sets TAKER, which is added to started.
take_pid() {
	_n=0
	while test $_n -lt 100; do
		echo $(($1 - 1)) >/proc/sys/kernel/ns_last_pid || return 1
		sleep 1000 </dev/null >/dev/null 2>&1 &
		TAKER=$!
		test "$TAKER" = "$1" && { started="$started $TAKER"; return 0; }
		# SIGKILL: a child not yet in sleep is this shell, with its
		# traps, and on SIGTERM would run our EXIT trap (the trash
		# directory removed under the test).
		kill -9 $TAKER
		wait $TAKER 2>/dev/null
		_n=$((_n + 1))
	done
	echo >&2 "could not start a process with pid $1"
	return 1
}
