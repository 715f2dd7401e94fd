#!/bin/bash
#
# stress.sh -- randomized fault injection into checkpoints and
# migrations.  Run it with `make stress' (see "Stress" in HACKING), as
# root, with criu and sshd.
#
# Each run starts a fresh tests/workload tree (its size, share of zero
# pages and the compression drawn at random), injects exactly one fault
# into moving it, and then checks the invariant: the tree runs, intact
# (verify_workload: memory, file offset, thread and child), either at the
# source or, for a move that completed, at the destination -- never
# neither, never both -- with the exit statuses the man pages promise.
# The scenarios, taken in turn:
#
#   1 ckpt-killed   gpuckpt -p PID (into a pipe to gpurestore, or -o FILE
#                   then gpurestore FILE) killed with SIGKILL, SIGINT or
#                   SIGTERM at a random moment
#   2 send-killed   gpusend -p PID host, the same
#   3 cut           the pipe of gpuckpt | gpurestore cut at a random byte
#                   (head -c N), or gpusend's ssh connection (relay.py)
#   4 disk-full     gpuckpt -o onto a tmpfs smaller than the image
#   5 recv-killed   gpurecv, or the criu restore it runs, killed at a
#                   random moment during a gpusend -p
#   6 pid-taken     a process holds one of the tree's PIDs in the
#                   destination's PID namespace before gpusend -p: the
#                   tree goes into a PID namespace of its own there
#
# Where the tree is: gpusend's destination is an sshd of ours in a PID
# namespace of its own (start_nssh), so a tree restored there is the one
# whose PID in that namespace is the workload's; gpuckpt | gpurestore
# restores on this host, where the restored tree has the workload's PID
# with another start time (/proc/PID/stat) than the original.  The source
# must be running (state R, S or D): a tree left stopped is neither.  When
# gpusend leaves it stopped (exit 3, or killed with SIGKILL after the
# go-ahead), the hand-over is settled as gpusend(1) says: gpurecv
# --outcome ID (the id taken from the arguments gpurecv was given) and
# SIGKILL for the stopped source if the tree runs there, SIGCONT if it
# does not; for "unknown", whether it runs there is looked at.
#
# Between runs everything is killed, and no process may be left but the
# sshd's (the whole harness runs under tests/reaper), no work file in
# either TMPDIR, no tmpfs mounted.
#
# Environment:
#   STRESS_RUNS=N     number of runs (default 200)
#   STRESS_SEED=S     seed of the random choices (default: drawn, printed)
#   STRESS_ONLY=N,M   replay only these runs of the seed's sequence
#   STRESS_KEEP=1     keep the work directory
# Exits 1 on any violation, naming the seed and the runs to replay.

set -u
export LC_ALL=C

: "${GCK_BINDIR:?GCK_BINDIR is not set: run the stress test through make stress}"
: "${GCK_TESTDIR:?GCK_TESTDIR is not set: run the stress test through make stress}"
: "${GCK_SRCDIR:?GCK_SRCDIR is not set: run the stress test through make stress}"

# Detached and restored processes are reaped by the subreaper, which also
# kills whatever would be left.
if test -z "${STRESS_REAPED:-}"; then
	test -x "$GCK_TESTDIR/reaper" || {
		echo >&2 "stress: $GCK_TESTDIR/reaper is missing"
		exit 1
	}
	STRESS_REAPED=1 exec "$GCK_TESTDIR/reaper" bash "$0" "$@"
fi
REAPER=$PPID

GCK_KEEP=${GCK_KEEP:-}
test_description='stress: one random fault per run, the tree never lost nor doubled'
# shellcheck source=../lib.sh
. "$GCK_SRCDIR/lib.sh"
test -n "${STRESS_KEEP:-}" && GCK_KEEP=1

die() { echo >&2 "stress: $*"; exit 1; }

test -n "${STRESS_TRACE:-}" && { exec 5>>"$GCK_TESTDIR/stress.trace"; BASH_XTRACEFD=5; set -x; }
test "$(id -u)" -eq 0 || die "must run as root"
CRIU=${GCK_CRIU:-$(PATH=$PATH:/usr/local/sbin:/usr/sbin:/sbin command -v criu)}
test -n "$CRIU" || die "criu not found"
test -n "${SSHD:-}" ||
    SSHD=$(PATH=$PATH:/usr/sbin:/usr/local/sbin command -v sshd)
test -n "$SSHD" || die "sshd not found"
for c in ssh ssh-keygen unshare nsenter python3 mount umount head; do
	command -v $c >/dev/null || die "$c not found"
done

GCKSEND=$GCK_BINDIR/send/gpusend
GCKRECV=$GCK_BINDIR/recv/gpurecv
RELAY=$GCK_SRCDIR/relay.py
RUNS=${STRESS_RUNS:-200}
case $RUNS in ''|*[!0-9]*) die "STRESS_RUNS must be a number" ;; esac
SEED=${STRESS_SEED:-$(( $(od -An -N4 -tu4 /dev/urandom) % 1000000000 ))}
case $SEED in ''|*[!0-9]*) die "STRESS_SEED must be a number" ;; esac
ONLY=,${STRESS_ONLY:-},
NSCEN=6
SCEN_NAMES=(- ckpt-killed send-killed cut disk-full recv-killed pid-taken)
LOG=$GCK_TESTDIR/stress.log
RUNDIR=$TRASH/rundir	# gpurecv's records
TO=20			# gpusend --timeout

exec 3>&1		# the console; runs write their details to $LOG
: >"$LOG"
exec 2>>"$LOG"		# and so does everything else (bash's job notices)
die() { echo "stress: $*" >&3; echo >&2 "stress: $*"; exit 1; }
say() { printf '%s\n' "$*" >&3; printf '%s\n' "$*" >>"$LOG"; }
log() { printf '%s\n' "$*" >>"$LOG"; }

# ---------------------------------------------------------------- helpers

# rnd N: R = a random number from 0 to N-1 (30 bits of $RANDOM).
rnd() { R=$(( ((RANDOM << 15) | RANDOM) % $1 )); }
# pick WORD...: P = one of the words.
pick() { rnd $#; shift $R; P=$1; }
msleep() {
	sleep "$(printf '%d.%03d' $(( $1 / 1000 )) $(( $1 % 1000 )))"
}
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
starttime() { proc_field "$1" 22; }

# others: "pid ppid state comm" of the processes under the subreaper
# and the sshd, but the harness's own and the sshd's base processes.
others() {
	cat /proc/[0-9]*/stat 2>/dev/null | awk -v r1="$REAPER" \
	    -v r2="$sshd_pid" -v me="$$" -v base="$sshd_pid $ns_init $sshd_main" '
	{
		pid = $1; c = $0
		sub(/^[0-9]+ \(/, "", c); sub(/\) [A-Za-z] .*$/, "", c)
		r = $0; sub(/.*\) /, "", r); split(r, f, " ")
		par[pid] = f[2]; st[pid] = f[1]; comm[pid] = c
	}
	END {
		split(base, b, " "); for (i in b) skip[b[i]] = 1
		n = 2; q[1] = r1; q[2] = r2
		for (i = 1; i <= n; i++)
			for (p in par)
				if (par[p] == q[i] && p != me && p != r2) {
					q[++n] = p
					if (!(p in skip))
						print p, par[p], st[p], comm[p]
				}
	}'
}

# transient: the processes of others but those that are meant to stay
# (the trees, the init of a namespace a tree went into, the occupier);
# sets LEFT.
transient() {
	_keep=" $WPID $WCHILD $(ns_pid $WPID) $(ns_pid $WCHILD) $occ "
	_n=$(nested_pid $WPID)
	test -n "$_n" &&
	    _keep="$_keep $_n $(nested_pid $WCHILD) $(proc_field $_n 4) "
	LEFT=$(others | while read -r _p _pp _s _c; do
		case $_keep in *" $_p "*) continue ;; esac
		echo "$_p($_c,$_s,ppid $_pp)"
	done)
	test -z "$LEFT"
}

# quiesce SECONDS: waits for the tools, their guards, criu and gpurecv to
# be gone.
# One that takes over 3 s is logged, with what still ran at 3 s.
quiesce() {
	_q0=$(now_ms)
	_end=$(( _q0 + $1 * 1000 ))
	_slow=
	while ! transient; do
		_now=$(now_ms)
		test -z "$_slow" && test $_now -ge $(( _q0 + 3000 )) &&
		    _slow=$LEFT
		if test $_now -ge $_end; then
			log "quiesce: not done after $1 s; at 3 s: $_slow"
			return 1
		fi
		sleep 0.05
	done
	test -z "$_slow" ||
	    log "quiesce: took $(( $(now_ms) - _q0 )) ms; at 3 s: $_slow"
}

# wait_bounded PID SECONDS: waits for our background job PID; kills it
# (a hang) after SECONDS.  ST is its status.
wait_bounded() {
	_end=$(( $(now_ms) + $2 * 1000 ))
	HUNG=
	while test -d /proc/$1 && test "$(proc_field $1 3)" != Z; do
		if test "$(now_ms)" -ge $_end; then
			HUNG="$HUNG $1"
			kill -KILL $1 2>/dev/null
			break
		fi
		sleep 0.02
	done
	wait $1 2>/dev/null
	ST=$?
}

# ns_find COMM PATTERN: the PIDs here of the processes of the sshd's
# namespace named COMM whose command line matches PATTERN, and whose
# parent is not named COMM.
ns_find() {
	for _f in /proc/[0-9]*/comm; do
		read -r _c 2>/dev/null <"$_f" || continue
		test "$_c" = "$1" || continue
		_p=${_f#/proc/}; _p=${_p%/comm}
		test "$(readlink /proc/$_p/ns/pid 2>/dev/null)" = "$ns_id" ||
		    continue
		# not a fork of the same program: gpurecv's guard
		read -r _c 2>/dev/null <"/proc/$(proc_field $_p 4)/comm" &&
		    test "$_c" = "$1" && continue
		tr '\0' ' ' </proc/$_p/cmdline 2>/dev/null | grep -q -e "$2" &&
		    echo $_p
	done
}

remote() {
	timeout 60 ssh -F /dev/null -i "$TRASH/userkey" -o IdentitiesOnly=yes \
	    -o IdentityAgent=none -o UserKnownHostsFile="$TRASH/known_hosts" \
	    -o GlobalKnownHostsFile=/dev/null \
	    -o StrictHostKeyChecking=yes -o BatchMode=yes -o LogLevel=ERROR \
	    -o ConnectTimeout=10 -p "$port" root@127.0.0.1 "$@"
}

# gsend ARGS: starts gpusend to our sshd ($SPORT: its port, or a
# relay's), with gpurecv through the wrapper that notes its arguments in
# $D/recv.args ($WRAP, or recvwrap), in the background: SPID is gpusend
# itself.
gsend() {
	HOME=$TRASH/home "$GCKSEND" -P "$SPORT" \
	    -o UserKnownHostsFile="$TRASH/known_hosts" \
	    -i "$TRASH/userkey" -o IdentityAgent=none --timeout $TO \
	    --remote-path "$TRASH/${WRAP:-recvwrap} $D" "$@" \
	    >"$D/send.out" 2>"$D/send.err" &
	SPID=$!
}

start_relay() {
	rm -f "$D/relay.port" "$D/relay.port.count"
	python3 "$RELAY" "$D/relay.port" "$port" "$@" 2>"$D/relay.err" &
	relay_pid=$!
	_i=0
	while ! test -s "$D/relay.port"; do
		_i=$((_i + 1))
		test $_i -lt 200 && test -d /proc/$relay_pid || return 1
		sleep 0.05
	done
	SPORT=$(cat "$D/relay.port")
	echo "[127.0.0.1]:$SPORT $(cat "$TRASH/hostkey.pub")" \
	    >>"$TRASH/known_hosts"
}

stop_relay() {
	test -n "$relay_pid" || return 0
	kill $relay_pid 2>/dev/null
	wait $relay_pid 2>/dev/null
	relay_pid=
	RELAYED=$(cat "$D/relay.port.count" 2>/dev/null)
}

# ------------------------------------------------------- the tree's state

# src_state: running, stopped (T) or gone (no process with the
# source's PID and start time); the child as well.
src_state() {
	_s=gone
	if test "$(starttime $WPID)" = "$SRCSTART"; then
		case $(proc_field $WPID 3) in
		R|S|D)	_s=running ;;
		T|t)	_s=stopped ;;
		*)	_s=gone ;;
		esac
	fi
	echo $_s
}

src_stopped_any() {
	for _p in $WPID $WCHILD; do
		case $(proc_field $_p 3) in T|t) return 0 ;; esac
	done
	return 1
}

# src_ok: the source tree runs here, intact.
src_ok() {
	test "$(starttime $WPID)" = "$SRCSTART" &&
	test "$(starttime $WCHILD)" = "$CHILDSTART" &&
	proc_running $WPID && proc_running $WCHILD &&
	verify_workload $WPID &&
	test "$VCOUNTER" -ge "$BASECOUNT"
}

# dst_pids: the root and child of a restored tree, as PIDs here: in the
# sshd's namespace, or on this host with another start time.
# nested_pid PID: the PID here of the process that is PID in a PID
# namespace nested in the sshd's: where gpurecv restores the tree when
# one of its PIDs is taken there.
nested_pid() {
	grep -H '^NSpid:' /proc/[0-9]*/status 2>/dev/null |
	    awk -v d="$ns_depth" -v p="$1" 'NF == d + 3 && $NF == p {
		sub(/^\/proc\//, ""); sub(/\/.*/, ""); print }'
}

dst_pids() {
	if test "$WHERE" = ns; then
		DROOT=$(ns_pid $WPID)
		DCHILD=$(ns_pid $WCHILD)
		test -n "$occ" && test "$DROOT" = "$occ" && DROOT=
		test -n "$occ" && test "$DCHILD" = "$occ" && DCHILD=
		test -n "$DROOT" || DROOT=$(nested_pid $WPID)
		test -n "$DCHILD" || DCHILD=$(nested_pid $WCHILD)
	else
		DROOT= DCHILD=
		_t=$(starttime $WPID)
		test -n "$_t" && test "$_t" != "$SRCSTART" && DROOT=$WPID
		_t=$(starttime $WCHILD)
		test -n "$_t" && test "$_t" != "$CHILDSTART" && DCHILD=$WCHILD
	fi
	# Not the process that holds the PID there.
	test -n "$occ" && test "$DROOT" = "$occ" && DROOT=
	test -n "$occ" && test "$DCHILD" = "$occ" && DCHILD=
	return 0
}

# dst_ok: the restored tree runs there, intact, its child the same.
dst_ok() {
	dst_pids
	test -n "$DROOT" && test -n "$DCHILD" &&
	proc_running $DROOT && proc_running $DCHILD &&
	verify_workload $DROOT &&
	grep '^verify ' "$WSTATUS" | tail -n 1 | grep -q " child=$WCHILD gap=[0-9]*\$"
}

# ------------------------------------------------------------ a run's end

VIOL=
violation() {
	VIOL="${VIOL:+$VIOL; }$*"
}

# settle_doubt: gpusend left the source stopped: ask gpurecv --outcome
# what became of the hand-over and do as gpusend(1) says.  Sets HOW.
# As its EXAMPLES do it: to every process of the tree, here a process
# group of its own.
settle_kill() { kill -KILL -- -$WPID; }
settle_cont() { kill -CONT -- -$WPID; }
SETTLE_KILL=settle_kill SETTLE_CONT=settle_cont
settle_doubt() {
	_id=$(sed -n 's/.*--id \([0-9a-f]\{32\}\).*/\1/p' "$D/recv.args" |
	    head -n 1)
	if test -z "$_id"; then
		violation "source left stopped, and no hand-over id to ask"
		HOW=doubt-noid
		return
	fi
	_ans=$(remote "$TRASH/recvwrap $D --outcome $_id" 2>>"$LOG")
	log "gpurecv --outcome $_id: $_ans"
	case $_ans in
	"running "*)
		HOW=doubt-running
		test "${_ans#running }" = "$WPID" ||
		    violation "--outcome says '$_ans', not pid $WPID"
		$SETTLE_KILL ;;
	failed)
		HOW=doubt-failed
		$SETTLE_CONT ;;
	unknown)
		# gpusend(1): then look there before doing either.
		HOW=doubt-unknown
		dst_pids
		if test -n "$DROOT"; then
			$SETTLE_KILL
		else
			$SETTLE_CONT
		fi ;;
	*)
		HOW=doubt-noanswer
		violation "gpurecv --outcome answered '$_ans'" ;;
	esac
	# The source is killed or continued: wait for it to be so.
	_i=0
	while src_stopped_any && test $_i -lt 100; do
		_i=$((_i + 1))
		sleep 0.05
	done
}

# settle_local: a source that a pipe left stopped, for its restore to
# end, with a restore that failed before it did, is resumed, as the
# messages say (gpurestore: "...; nothing restored: its source, process
# tree N, is left stopped on this host"; gpuckpt: "process tree N left
# stopped: its image went to a pipe, ... resume it with 'kill -CONT
# ...'").  Any other stopped source is a violation.
settle_local() {
	if grep -q "; nothing restored: its source, process tree $WPID, is left stopped on this host\$" \
	    "$D/rest.err" 2>/dev/null ||
	    grep -q "^gpuckpt: process tree $WPID left stopped: its image went to " \
	    "$D/ckpt.err" 2>/dev/null; then
		HOW=left-stopped
		kill -CONT $WPID $WCHILD
		_i=0
		while src_stopped_any && test $_i -lt 100; do
			_i=$((_i + 1))
			sleep 0.05
		done
	else
		violation "source left stopped"
	fi
}

# judge: waits for the dust to settle, then finds where the tree runs:
# OUTCOME source or dest; adds a violation otherwise.
judge() {
	quiesce 45 || violation "still running after 45 s: $LEFT"
	HOW=
	if src_stopped_any; then
		case $WHERE in
		ns)	settle_doubt ;;
		*)	settle_local ;;
		esac
	fi
	local at_src=0 at_dst=0
	src_ok 2>>"$LOG" && at_src=1
	dst_ok 2>>"$LOG" && at_dst=1
	case $at_src$at_dst in
	10)	OUTCOME=source ;;
	01)	OUTCOME=dest ;;
	11)	OUTCOME=BOTH
		violation "the tree runs at the source AND at the destination" ;;
	00)	OUTCOME=NEITHER
		violation "the tree runs neither at the source ($(src_state)) nor at the destination" ;;
	esac
	# Not running is not enough: the loser must be gone, all of it.
	if test $OUTCOME = dest; then
		test "$(src_state)" = gone ||
		    violation "destination runs, but the source is $(src_state)"
		test "$(starttime $WCHILD)" != "$CHILDSTART" ||
		    violation "destination runs, but the source's child is $(proc_field $WCHILD 3)"
	fi
	if test $OUTCOME = source; then
		dst_pids
		test -z "$DROOT$DCHILD" ||
		    violation "source runs, and something is left there: $DROOT($(proc_field "$DROOT" 3)) $DCHILD($(proc_field "$DCHILD" 3))"
	fi
	test -n "$HOW" && OUTCOME=$HOW/$OUTCOME
	return 0
}

# one_line FILE ROOTPID: FILE is one line ending in "; process tree PID
# left running" (a failure that resumed the source).
left_running_line() {
	test "$(wc -l <"$1")" -eq 1 &&
	grep -q "; process tree $2 left running\$" "$1"
}

# expect_tool NAME STATUS: what a tool's status must be for OUTCOME.
# SIG is the signal the run sent it, if any.
check_send() {
	case $OUTCOME in
	*/dest|dest)
		case $ST in
		0)	test "$(cat "$D/send.out")" = "${SEND_PID:-$WPID}" ||
			    violation "gpusend exited 0 but printed '$(cat "$D/send.out")'" ;;
		3|137)	;;
		*)	violation "the tree moved, but gpusend exited $ST" ;;
		esac ;;
	*/source|source)
		case $ST in
		1)	left_running_line "$D/send.err" $WPID ||
			    violation "gpusend exited 1 without one line saying the tree was left running" ;;
		3|137)	;;
		*)	violation "the tree stayed, but gpusend exited $ST" ;;
		esac
		test -s "$D/send.out" &&
		    violation "gpusend failed but printed '$(cat "$D/send.out")'" ;;
	esac
	case $ST in
	3)	case $OUTCOME in doubt-*) ;; *)
		violation "gpusend exited 3 but left the source $(src_state)" ;;
		esac
		grep -q "hand-over in doubt: .*; process tree $WPID left stopped\$" \
		    "$D/send.err" ||
		    violation "gpusend exited 3 without its in-doubt line" ;;
	137)	test "$SIG" = KILL ||
		    violation "gpusend died of SIGKILL, not sent by us" ;;
	esac
}

# The local scenarios: gpuckpt (CST), gpurestore (RST, - if not run).
check_local() {
	case $OUTCOME in
	dest)
		test "$RST" = 0 ||
		    violation "the tree was restored, but gpurestore exited $RST"
		test "$(cat "$D/rest.out" 2>/dev/null)" = "$WPID" ||
		    violation "gpurestore printed '$(cat "$D/rest.out" 2>/dev/null)', not $WPID"
		case $CST in
		0)	;;
		13[07]|143)	;;	# killed once the image was whole
		*)	violation "the tree moved, but gpuckpt exited $CST" ;;
		esac ;;
	source)
		case $CST in
		0)	violation "gpuckpt exited 0, but the tree is still here" ;;
		1)	left_running_line "$D/ckpt.err" $WPID ||
			    violation "gpuckpt exited 1 without one line saying the tree was left running" ;;
		13[07]|143|141)	;;
		*)	violation "gpuckpt exited $CST" ;;
		esac
		case $RST in
		-|[1-9]*) ;;
		*)	violation "the tree stayed, but gpurestore exited $RST" ;;
		esac ;;
	esac
	case $CST in
	13[07]|143)
		test "$SIG" = "$(kill -l $((CST - 128)))" ||
		    violation "gpuckpt died of signal $((CST - 128)), not sent by us" ;;
	esac
}

# leftovers: nothing in either TMPDIR, no temporary image beside the
# output.
leftovers() {
	_l=$(cd "$D" && ls -A tmp rtmp 2>/dev/null | grep -v ':$' | grep .)
	test -z "$_l" || violation "work files left: $(echo $_l)"
	if test -d "$D/out"; then
		_l=$(ls -A "$D/out" | grep -v '^img\.gck$')
		test -z "$_l" || violation "left beside the image: $(echo $_l)"
	fi
}

# cleanup_run: kills everything of the run, checks nothing is left.
cleanup_run() {
	stop_relay
	_k="$WPID $WCHILD $(ns_pid $WPID) $(ns_pid $WCHILD) $occ"
	_k="$_k $(nested_pid $WPID) $(nested_pid $WCHILD)"
	kill -CONT $_k 2>/dev/null
	kill -KILL $_k 2>/dev/null
	_i=0
	while test -n "$(others)" && test $_i -lt 200; do
		_i=$((_i + 1))
		sleep 0.05
	done
	_l=$(others)
	if test -n "$_l"; then
		violation "stray processes: $(echo "$_l" | tr '\n' ';')"
		echo "$_l" | while read -r _p _r; do kill -KILL $_p; done
		sleep 0.5
	fi
	if test -n "$MNT"; then
		umount "$MNT" || violation "cannot unmount $MNT"
		MNT=
	fi
	# Records of failed hand-overs are kept for --outcome, on purpose;
	# the socket of a gpurecv killed while it waited for its extra
	# connections stays until a later gpurecv finds it stale.
	_l=$(ls -A "$RUNDIR" 2>/dev/null | grep -v '\.rec$')
	if test -n "$SOCK_OK" && test -n "$_l"; then
		log "left by the killed gpurecv: $(echo $_l)"
		_l=$(echo "$_l" | grep -v '\.sock$')
		rm -f "$RUNDIR"/*.sock
	fi
	test -z "$_l" || violation "left in the run directory: $(echo $_l)"
	rm -f "$RUNDIR"/*.rec
	cd "$TRASH" || exit 1
	test -n "${STRESS_KEEP:-}" || rm -rf "$D"
}

# ------------------------------------------------------------- scenarios

# est MS32: how long an operation that takes MS32 on 32 MiB takes on $MIB.
est() { echo $(( $1 * (40 + 60 * MIB / 32) / 100 )); }

# delay MS32 PERCENT: DELAY, a random moment (ms) in the first PERCENT %
# of an operation that takes MS32 on 32 MiB; DELAYS says it, with the
# share drawn (which a replay draws again).
delay() {
	rnd 1000
	DELAY=$(( $(est $1) * $2 * R / 100000 ))
	DELAYS="${DELAY}ms($((R / 10)).$((R % 10))%)"
}

# probe: the size of this tree's image with these options, from a
# snapshot (gpuckpt -R) that lets it run on.
probe() {
	"$GCKPT" -R -c $COMP -p $WPID -o "$D/probe.gck" 2>>"$LOG" ||
	    return 1
	SIZE=$(stat -c %s "$D/probe.gck")
	rm -f "$D/probe.gck"
	verify_workload $WPID 2>>"$LOG"
}

# local_pipe PRODUCER_ARGS...: gpuckpt | [cutter] | gpurestore through
# fifos; CPID the gpuckpt.
start_local_pipe() {
	mkfifo "$D/p1" || return 1
	"$GCKRESTORE" <"$D/p1" >"$D/rest.out" 2>"$D/rest.err" &
	RPID=$!
	if test -n "${CUT:-}"; then
		mkfifo "$D/p0" || return 1
		head -c $CUT <"$D/p0" >"$D/p1" &
		HPID=$!
		"$GCKPT" -c $COMP -p $WPID >"$D/p0" 2>"$D/ckpt.err" &
	else
		"$GCKPT" -c $COMP -p $WPID >"$D/p1" 2>"$D/ckpt.err" &
	fi
	CPID=$!
}

finish_local_pipe() {
	wait_bounded $CPID 120; CST=$ST
	test -n "$HUNG" && violation "gpuckpt hung"
	if test -n "${HPID:-}"; then
		wait_bounded $HPID 30
		HPID=
	fi
	wait_bounded $RPID 120; RST=$ST
	test -n "$HUNG" && violation "gpurestore hung"
}

sc_ckpt_killed() {
	pick pipe file; MODE=$P
	pick KILL INT TERM; SIG=$P
	delay $T_LOCAL 125
	PARAMS="$PARAMS mode=$MODE sig=$SIG after=$DELAYS"
	say "$PARAMS"
	WHERE=local RST=-
	if test $MODE = pipe; then
		start_local_pipe || return
		msleep $DELAY
		kill -$SIG $CPID 2>/dev/null
		finish_local_pipe
	else
		mkdir "$D/out"
		"$GCKPT" -c $COMP -p $WPID -o "$D/out/img.gck" \
		    >/dev/null 2>"$D/ckpt.err" &
		CPID=$!
		msleep $DELAY
		kill -$SIG $CPID 2>/dev/null
		wait_bounded $CPID 120; CST=$ST
		test -n "$HUNG" && violation "gpuckpt hung"
		quiesce 45
		if test -e "$D/out/img.gck"; then
			# A whole image: the tree must go there.
			wait_bounded_restore_file
		fi
	fi
	judge
	check_local
	if test $MODE = file && test $OUTCOME = source &&
	    test -e "$D/out/img.gck"; then
		violation "gpuckpt left a whole image, and the tree running"
	fi
	leftovers
}

wait_bounded_restore_file() {
	"$GCKRESTORE" "$D/out/img.gck" >"$D/rest.out" 2>"$D/rest.err" &
	wait_bounded $! 120; RST=$ST
	test -n "$HUNG" && violation "gpurestore hung"
}

sc_send_killed() {
	pick KILL INT TERM; SIG=$P
	pick 1 1 2; PAR=$P
	# A third of the time, at the go-ahead: gpurecv's answer that the
	# tree runs is held back a second (recvhold), and gpusend is
	# signalled meanwhile, in the window where, killed, it leaves the
	# source stopped.
	pick time time go; AT=$P
	delay $T_SEND 100
	if test $AT = go; then
		PARAMS="$PARAMS parallel=$PAR sig=$SIG at=go-ahead"
	else
		PARAMS="$PARAMS parallel=$PAR sig=$SIG after=$DELAYS"
	fi
	say "$PARAMS"
	WHERE=ns SPORT=$port
	test $AT = go && WRAP=recvhold
	gsend -c $COMP --parallel $PAR -p $WPID root@127.0.0.1
	WRAP=
	if test $AT = go; then
		while test -d /proc/$SPID && test "$(proc_field $SPID 3)" != Z &&
		    ! test -e "$D/k.held"; do
			sleep 0.01
		done
	else
		msleep $DELAY
	fi
	kill -$SIG $SPID 2>/dev/null
	wait_bounded $SPID 120
	test -n "$HUNG" && violation "gpusend hung"
	judge
	check_send
	leftovers
}

sc_cut() {
	CUTN=$(( CUTN + 1 ))
	if test $((CUTN % 2)) = 1; then
		probe || { violation "the probe checkpoint failed"; return; }
		# Anywhere, the end included: a cut within what the pipes
		# buffer after gpuckpt's last write comes after gpuckpt has
		# succeeded and left the source stopped for its restore,
		# which then fails on the truncated image and leaves it
		# stopped, to be resumed as both say (settle_local).  One
		# time in five the cut falls in the last 256 KiB.
		rnd 5
		if test $R = 0 && test $SIZE -gt 262144; then
			rnd 262144; CUT=$(( SIZE - 262144 + R ))
		else
			rnd $SIZE; CUT=$R
		fi
		PARAMS="$PARAMS pipe cut=$CUT of $SIZE"
		say "$PARAMS"
		WHERE=local
		start_local_pipe || return
		finish_local_pipe
		CUT=
		judge
		check_local
	else
		probe || { violation "the probe checkpoint failed"; return; }
		pick 1 1 2; PAR=$P
		# ssh's framing adds a little; aim near the end at times,
		# where READY, GO and RUNNING cross.
		_tot=$(( SIZE + SIZE / 64 + 40000 ))
		rnd 5
		if test $R = 0; then
			rnd 131072; CUT=$(( _tot - 98304 + R ))
		else
			rnd $_tot; CUT=$R
		fi
		PARAMS="$PARAMS ssh parallel=$PAR cut=$CUT of ~$_tot"
		say "$PARAMS"
		WHERE=ns
		start_relay cut $CUT || { violation "no relay"; return; }
		gsend -c $COMP --parallel $PAR -p $WPID root@127.0.0.1
		wait_bounded $SPID 120
		test -n "$HUNG" && violation "gpusend hung"
		stop_relay
		log "relayed $RELAYED bytes"
		SIG=
		judge
		check_send
	fi
	leftovers
}

sc_disk_full() {
	probe || { violation "the probe checkpoint failed"; return; }
	rnd $(( SIZE * 95 / 100 / 1024 - 16 )); KB=$(( R + 16 ))
	PARAMS="$PARAMS tmpfs=${KB}k image=$SIZE"
	say "$PARAMS"
	WHERE=local RST=- SIG=
	mkdir "$D/out"
	mount -t tmpfs -o size=${KB}k tmpfs "$D/out" ||
	    { violation "cannot mount a tmpfs"; return; }
	MNT=$D/out
	"$GCKPT" -c $COMP -p $WPID -o "$D/out/img.gck" >/dev/null \
	    2>"$D/ckpt.err" &
	wait_bounded $! 120; CST=$ST
	test -n "$HUNG" && violation "gpuckpt hung"
	quiesce 45
	test -e "$D/out/img.gck" && wait_bounded_restore_file
	judge
	check_local
	if test $OUTCOME = source; then
		test -e "$D/out/img.gck" &&
		    violation "gpuckpt left a whole image, and the tree running"
		grep -q -i "no space" "$D/ckpt.err" ||
		    violation "gpuckpt's message does not say the disk is full"
	fi
	leftovers
}

sc_recv_killed() {
	pick gpurecv gpurecv criu; TARGET=$P
	if test $TARGET = criu; then SIG=KILL; else pick KILL TERM; SIG=$P; fi
	pick 1 1 2; PAR=$P
	delay $T_SEND 70
	PARAMS="$PARAMS target=$TARGET sig=$SIG parallel=$PAR after=$DELAYS"
	say "$PARAMS"
	WHERE=ns SPORT=$port
	gsend -c $COMP --parallel $PAR -p $WPID root@127.0.0.1
	msleep $DELAY
	KILLED=
	while test -z "$KILLED" && test -d /proc/$SPID &&
	    test "$(proc_field $SPID 3)" != Z; do
		if test $TARGET = criu; then
			_t=$(ns_find criu ' restore ')
		else
			_t=$(ns_find gpurecv ' --restore ')
		fi
		if test -n "$_t"; then
			kill -$SIG $_t 2>/dev/null && KILLED=$_t
		else
			sleep 0.01
		fi
	done
	log "killed: ${KILLED:-nothing (gpusend was done)}"
	test -n "$KILLED" && test $TARGET = gpurecv && test $SIG = KILL &&
	    SOCK_OK=1
	SIG=
	wait_bounded $SPID 120
	test -n "$HUNG" && violation "gpusend hung"
	judge
	check_send
	test -n "$KILLED" || OUTCOME="$OUTCOME(late)"
	leftovers
}

sc_pid_taken() {
	pick root root child; WHICH=$P
	test $WHICH = root && TAKEN=$WPID || TAKEN=$WCHILD
	PARAMS="$PARAMS taken=$WHICH($TAKEN)"
	say "$PARAMS"
	WHERE=ns SPORT=$port SIG=
	# ns_last_pid of the namespace: its next fork gets TAKEN.
	for _try in 1 2 3 4 5; do
		nsenter -t $ns_init -p -m sh -c "echo $((TAKEN - 1)) \
		    >/proc/sys/kernel/ns_last_pid; \
		    sleep 600 </dev/null >/dev/null 2>&1 3>&- 4>&- &"
		occ=$(ns_pid $TAKEN)
		test -n "$occ" && break
		sleep 0.1
	done
	if test -z "$occ"; then
		violation "could not take pid $TAKEN there"
		return
	fi
	gsend -c $COMP -p $WPID root@127.0.0.1
	wait_bounded $SPID 120
	test -n "$HUNG" && violation "gpusend hung"
	judge
	# It went into a PID namespace of its own there, where it keeps
	# its PIDs: gpusend prints its root as gpurecv sees it.
	dst_pids
	SEND_PID=
	test -n "$DROOT" && SEND_PID=$(awk '/^NSpid:/ { print $(NF - 1) }' \
	    /proc/$DROOT/status 2>/dev/null)
	check_send
	SEND_PID=
	test "$OUTCOME" = dest ||
	    violation "the tree did not move, though pid $TAKEN there is only taken"
	test -n "$DROOT" && test "$(readlink /proc/$DROOT/ns/pid)" != "$ns_id" ||
	    violation "the tree moved, but not into a PID namespace of its own"
	test "$(ns_pid $TAKEN)" = "$occ" && proc_running $occ 2>>"$LOG" ||
	    violation "the process holding pid $TAKEN there was harmed"
	leftovers
}

# -------------------------------------------------------------- the runs

run_one() {
	N=$1
	RANDOM=$(( (SEED * 7919 + N * 104729) % 2147483647 ))
	SC=$(( (N - 1) % NSCEN + 1 ))
	D=$TRASH/r$N
	rm -rf "$D"
	mkdir -p "$D/tmp" "$D/rtmp" || exit 1
	cd "$D" || exit 1
	export TMPDIR=$D/tmp
	VIOL= OUTCOME=? HOW= occ= MNT= relay_pid= WPID= WCHILD= HPID= CUT=
	CST=- RST=- ST=- SIG= SOCK_OK= WRAP=
	pick 4 8 16 32 48; MIB=$P
	pick 0 30 90; ZP=$P
	pick none zstd:1 zstd:3; COMP=$P
	PARAMS="run $N/$RUNS: scenario $SC (${SCEN_NAMES[$SC]}) mib=$MIB zero=$ZP% c=$COMP"
	log "======== $PARAMS"
	_r0=$(now_ms)
	if ! start_workload "r$N/w" -m $MIB -z $ZP 2>>"$LOG"; then
		say "$PARAMS"
		violation "the workload did not start"
	else
		SRCSTART=$(starttime $WPID)
		CHILDSTART=$(starttime $WCHILD)
		verify_workload $WPID 2>>"$LOG" ||
		    violation "the workload does not verify before the run"
		BASECOUNT=${VCOUNTER:-0}
		case $SC in
		1) sc_ckpt_killed ;;
		2) sc_send_killed ;;
		3) sc_cut ;;
		4) sc_disk_full ;;
		5) sc_recv_killed ;;
		6) sc_pid_taken ;;
		esac
	fi
	for _f in ckpt.err rest.err rest.out send.err send.out recv.args; do
		test -s "$D/$_f" && sed "s/^/  $_f: /" "$D/$_f" >>"$LOG"
	done
	cleanup_run
	log "  took $(( $(now_ms) - _r0 )) ms"
	_res="-> $OUTCOME"
	test "$CST" != - && _res="$_res gpuckpt=$CST"
	test "$RST" != - && _res="$_res gpurestore=$RST"
	case $SC in 2|5|6) _res="$_res gpusend=$ST" ;;
	3) test $((CUTN % 2)) = 0 && _res="$_res gpusend=$ST" ;; esac
	if test -n "$VIOL"; then
		say "  $_res VIOLATION: $VIOL"
		FAILED="$FAILED $N"
		COUNT["$SC ${SCEN_NAMES[$SC]} VIOLATION"]=$(( ${COUNT["$SC ${SCEN_NAMES[$SC]} VIOLATION"]:-0} + 1 ))
	else
		say "  $_res"
		COUNT["$SC ${SCEN_NAMES[$SC]} $OUTCOME"]=$(( ${COUNT["$SC ${SCEN_NAMES[$SC]} $OUTCOME"]:-0} + 1 ))
	fi
}

test_cleanup() {
	test -n "${relay_pid:-}" && kill $relay_pid 2>/dev/null
	test -n "${MNT:-}" && umount "$MNT" 2>/dev/null
	test -n "${sshd_pid:-}" && kill_tree $sshd_pid >/dev/null 2>&1
	:
}

# A clean move, to time: T (ms).
calibrate() {
	D=$TRASH/cal
	mkdir -p "$D/tmp" "$D/rtmp"
	export TMPDIR=$D/tmp
	MIB=32 SIG= occ= WHERE=local MNT= relay_pid=
	start_workload cal/w -m 32 2>>"$LOG" || die "the workload did not start"
	SRCSTART=$(starttime $WPID) CHILDSTART=$(starttime $WCHILD)
	COMP=zstd:1
	_t0=$(now_ms)
	start_local_pipe || die "cannot make fifos"
	finish_local_pipe
	T_LOCAL=$(( $(now_ms) - _t0 ))
	test "$CST $RST" = "0 0" && dst_ok 2>>"$LOG" ||
	    die "a clean gpuckpt | gpurestore failed: see $LOG"
	kill_tree $WPID
	start_workload cal/w2 -m 32 2>>"$LOG" || die "the workload did not start"
	WHERE=ns SPORT=$port
	_t0=$(now_ms)
	gsend -c zstd:1 -p $WPID root@127.0.0.1
	wait_bounded $SPID 120
	T_SEND=$(( $(now_ms) - _t0 ))
	test $ST = 0 && dst_ok 2>>"$LOG" ||
	    die "a clean gpusend failed ($ST): $(cat "$D/send.err")"
	kill_tree $(ns_pid $WPID)
	cd "$TRASH" && rm -rf "$D"
	rm -f "$RUNDIR"/*.rec
}

cd "$TRASH" || exit 1
mkdir home || exit 1
ssh-keygen -q -t ed25519 -N "" -C gck-host -f hostkey &&
ssh-keygen -q -t ed25519 -N "" -C gck-user -f userkey &&
cp userkey.pub authorized_keys || die "ssh-keygen failed"
sshd_pid= ns_init= sshd_main=
start_nssh 3>&- || die "cannot start sshd: $(cat "$TRASH/sshd.log")"
sshd_main=$(cat /proc/$ns_init/task/*/children)
echo "[127.0.0.1]:$port $(cat hostkey.pub)" >known_hosts
remote true || die "cannot log in to our sshd"
cat >recvwrap <<EOF
#!/bin/sh
# gpurecv, its arguments noted in the run's directory (\$1)
d=\$1
shift
printf '%s\n' "\$*" >>"\$d/recv.args"
GCK_RUNDIR=$RUNDIR TMPDIR=\$d/rtmp exec "$GCKRECV" "\$@"
EOF
chmod +x recvwrap
# recvhold: the same, gpurecv's answers passing through kframe.py, which
# holds back the one that says the tree runs for a second, and says
# when it came in the file given.
cat >recvhold <<EOF
#!/bin/sh
d=\$1
shift
printf '%s\n' "\$*" >>"\$d/recv.args"
export GCK_RUNDIR=$RUNDIR TMPDIR=\$d/rtmp
case " \$* " in
*" --restore "*) ;;
*)	exec "$GCKRECV" "\$@" ;;
esac
rm -f "\$d/k.fifo"
mkfifo "\$d/k.fifo" || exit 1
exec 3<&0
"$GCKRECV" "\$@" <&3 3<&- >"\$d/k.fifo" &
exec 3<&-
python3 "$GCK_SRCDIR/kframe.py" hold "\$d/k.held" 1 <"\$d/k.fifo"
EOF
chmod +x recvhold

declare -A COUNT
FAILED=
CUTN=0
NRUN=0
t_start=$(now_ms)
say "stress: seed $SEED, $RUNS runs (replay: make stress STRESS_SEED=$SEED STRESS_RUNS=$RUNS); details in $LOG"
calibrate
say "stress: a clean 32 MiB gpuckpt | gpurestore takes ${T_LOCAL} ms, gpusend ${T_SEND} ms"
for N in $(seq 1 "$RUNS"); do
	# The cut scenario alternates between its two forms.
	if test "$ONLY" != ,, && case $ONLY in *,$N,*) false ;; *) true ;; esac; then
		test $(( (N - 1) % NSCEN + 1 )) = 3 && CUTN=$((CUTN + 1))
		continue
	fi
	run_one $N
	NRUN=$((NRUN + 1))
done
t_end=$(now_ms)

say ""
say "stress: counts per scenario and outcome"
for k in "${!COUNT[@]}"; do
	printf '  %-40s %4d\n' "$k" "${COUNT[$k]}"
done | sort -n | tee -a "$LOG" >&3
say "stress: $NRUN runs in $(( (t_end - t_start) / 1000 )) s"
if test -n "$FAILED"; then
	say "stress: VIOLATIONS in runs:$FAILED"
	say "stress: replay with: make stress STRESS_SEED=$SEED STRESS_RUNS=$RUNS STRESS_ONLY=$(echo $FAILED | tr ' ' ,)"
	exit 1
fi
say "stress: no violation"
exit 0
