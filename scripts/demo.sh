#!/bin/bash
#
# demo.sh: checkpoint a running process and restore it, on this host.
#
# Starts a small counter (a bash loop that appends "tick N" to a log every
# half second) in its own session, checkpoints it with
# `gpuckpt -p PID | gpurestore', and shows that the restored process has
# the same PID and goes on counting from where it was stopped.
#
# Needs root, CRIU >= 4.2 and a built tree (./configure && make): the
# binaries are taken from src/ (or from $GCK_BINDIR).  Builds nothing.
#
set -eu
set -o pipefail

me=demo.sh

die() { printf '%s: error: %s\n' "$me" "$*" >&2; exit 1; }
step() { printf '\n==> %s\n' "$*"; }

# Processes killed here must be reaped by someone.  Run under tini as a
# subreaper, so that the detached counter, which is orphaned on purpose,
# is reaped when it is stopped instead of lingering as a zombie (and
# keeping its PID) where the system's PID 1 does not reap orphans.
if [ -z "${GCK_DEMO_REAPER:-}" ]; then
	if command -v tini >/dev/null 2>&1; then
		export GCK_DEMO_REAPER=tini
		exec tini -s -- "$0" "$@"
	fi
	export GCK_DEMO_REAPER=none
	printf '%s: warning: tini not found; stopped processes may stay zombies\n' \
	    "$me" >&2
fi

cd "$(dirname "$0")/.."
bindir=${GCK_BINDIR:-$PWD/src}
gpuckpt=$bindir/ckpt/gpuckpt
gpurestore=$bindir/restore/gpurestore

[ "$(id -u)" = 0 ] || die "run this as root (CRIU needs it)"
for b in "$gpuckpt" "$gpurestore"; do
	[ -x "$b" ] || die "$b not found: build first (autoreconf -fi && ./configure && make)"
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpuckpt-demo.XXXXXX")
log=$tmp/counter.log
pidfile=$tmp/counter.pid
pid=

# Kill the counter's session (the bash loop and its sleep), if it is ours.
stop_counter()
{
	local sid

	[ -n "$pid" ] || return 0
	sid=$(ps -o sid= -p "$pid" 2>/dev/null | tr -d ' ') || sid=
	if [ "$sid" = "$pid" ]; then
		pkill -KILL -s "$sid" || true
	fi
	# Wait until the subreaper has reaped it.
	for _ in $(seq 50); do
		[ -d "/proc/$pid" ] || break
		if [ "$GCK_DEMO_REAPER" = none ] &&
		    [ "$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)" = Z ]; then
			break
		fi
		sleep 0.1
	done
	pid=
}

cleanup()
{
	stop_counter
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# The number in the last line of the log.
last_tick()
{
	tail -n 1 "$log" 2>/dev/null | awk '{ print $2 + 0 }'
}

step "starting workload"
: >"$log"
cat >"$tmp/counter" <<'EOF'
echo $$ >"$1"
cd /
i=0
while :; do
	i=$((i + 1))
	echo "tick $i" >>"$2"
	sleep 0.5
done
EOF
# setsid -f: the counter runs in a session of its own, detached from this
# script's terminal, and its parent exits at once (tini adopts it).
setsid -f bash "$tmp/counter" "$pidfile" "$log" </dev/null >/dev/null 2>&1
for _ in $(seq 50); do
	[ -s "$pidfile" ] && break
	sleep 0.1
done
pid=$(cat "$pidfile" 2>/dev/null) || die "the counter did not start"
if [ -z "$pid" ] || [ ! -d "/proc/$pid" ]; then
	die "the counter did not start"
fi
echo "counter running as PID $pid, logging to $log"
sleep 2
ps -o pid,stat,etime,cmd -s "$pid"
tail -n 3 "$log"

step "$(basename "$gpuckpt") -p $pid | $(basename "$gpurestore")"
start=$(date +%s.%N)
restored=$("$gpuckpt" -p "$pid" | "$gpurestore") ||
    die "checkpoint/restore failed"
end=$(date +%s.%N)
restored=$(printf '%s\n' "$restored" | tail -n 1)
echo "gpurestore printed PID $restored ($(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }') s)"
case $restored in
'' | *[!0-9]*) die "gpurestore did not print a PID" ;;
esac
[ "$restored" = "$pid" ] ||
    die "restored PID $restored differs from the original PID $pid"
stopped_at=$(last_tick)
echo "checkpointed at tick $stopped_at"

step "restored process"
sleep 2
ps -o pid,stat,etime,cmd -p "$restored" || die "restored PID $restored is not running"
ps -o pid,ppid,sid,stat,cmd -s "$restored"
state=$(awk '{ print $3 }' "/proc/$restored/stat" 2>/dev/null) || state=
case $state in
S | R | D) ;;
*) die "restored PID $restored is not running (state '${state:-gone}')" ;;
esac

step "log after restore"
after=$(last_tick)
tail -n 4 "$log"
# Every line must read "tick N" with N its line number: a counter that
# started over would write "tick 1" again.
if ! awk '$1 != "tick" || $2 != NR { bad = 1; exit } END { exit bad }' "$log"; then
	die "the counter did not continue where it stopped (see $log)"
fi
[ "$after" -gt "$stopped_at" ] ||
    die "the counter does not advance after restore (still at tick $after)"
echo "ticks before checkpoint: 1..$stopped_at, after restore: up to $after, no restart"

step "stopping workload (session $restored)"
stop_counter
[ ! -d "/proc/$restored" ] || [ "$GCK_DEMO_REAPER" = none ] ||
    die "PID $restored is still there after SIGKILL"
echo "stopped"

step "demo ok"
