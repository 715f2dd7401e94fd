#!/bin/bash
#
# bench.sh -- measure gpuckpt | gpurestore against the pipeline a user
# would otherwise type, on the same workloads, in one run.  Run it with
# `make bench' (see "Performance" in HACKING), as root.
#
# Variants (rows of each table):
#   baseline-pipe   criu dump -D A -t PID; tar -C A -cf - . | zstd |
#                   { mkdir B && zstd -d | tar -C B -xf - && criu restore -D B -d; }
#   baseline-ssh    the same, the second half through ssh to 127.0.0.1
#   gpuckpt-pipe    gpuckpt -k -p PID | gpurestore
#   gpuckpt-ssh     gpuckpt -k -p PID | ssh root@127.0.0.1 gpurestore
#   gpusend         gpusend -p PID root@127.0.0.1, when gpusend has -p:
#                   it migrates the live tree over ssh to gpurecv, which
#                   restores it there
#   gpusend-par     the same with --parallel 2
#   gpusend-live    gpusend --live: pre-copy rounds into the remote's
#                   cache (empty at the start) while the tree runs, then
#                   the stop for what changed (the "live" extra only)
# Between the two halves sits bench/bcount, which counts the bytes on the
# wire; gpusend opens its own connections, so for it bcount -r relays
# TCP to the sshd and counts the bytes both ways (the ssh protocol's
# framing and encryption included).  Each tool runs under /usr/bin/time
# for its peak RSS.
#
# The restoring side runs in a PID namespace of its own, as on another
# host, since the stopped source still holds its PIDs here: gpurestore
# of the gpuckpt-* variants through unshare, and for gpusend a second
# sshd of ours, started in one.
#
# Environment:
#   BENCH_REPEAT=N        repeats of each measurement (default 3; medians)
#   BENCH_WORKLOADS=...   a subset of "mixed zero90 random" (default all;
#                         empty: none)
#   BENCH_VARIANTS=...    a subset of the variants above (default all;
#                         empty: none, e.g. for the extras alone)
#   BENCH_EXTRAS=...      a subset of "none-vs-dump rss-flat restore-file
#                         incremental cache-again live snapshot storage"
#                         (default all);
#                         incremental: an image with --parent after the
#                         mixed workload rewrote 5% of its memory,
#                         against a full one; live: downtime of gpusend
#                         --live, gpusend and baseline-ssh on the mixed
#                         workload rewriting 0, 1 and 10% of its memory a
#                         second; snapshot: the pause of gpuckpt -R
#                         against criu dump --leave-running into a tmpfs,
#                         on the mixed workload rewriting 1% of its
#                         memory a second, and the snapshots of a series
#                         (gpuckpt --series), the largest and the 10th,
#                         against a full image
#                         storage: a checkpoint and restore of 4 GiB of
#                         device memory through the stand-in CUDA driver
#                         of the tests (its copies are memcpy: only the
#                         host side is measured), custom storage against
#                         --gpu-staging: the private memory of the
#                         process at the dump, the peak RSS of gpuckpt
#                         and gpurestore, CPU-seconds for each GiB, the
#                         restore from the file and (custom-stream) from
#                         a pipe, and (custom-local) gpuckpt | gpurestore
#                         on this host; then
#                         images of the restored process with --parent
#                         through custom storage, after it rewrote one
#                         page in 64 all over its device memory, and with
#                         nothing rewritten
#   BENCH_LIVE_RATES=...  those rates for "live" (default "0 1 10")
#   BENCH_PATTERNS=...    how the workload of incremental, live and
#                         snapshot writes (benchwork -p), each of them
#                         run for every one: a subset of "pages heap
#                         runs" (default all): single 4 KiB pages picked
#                         at random, malloc'ed objects of 16 to 4096
#                         bytes, or aligned 2 MiB runs.  The report gives
#                         each pattern's figures, pages and heap first;
#                         the goals are those of pages, and of runs as
#                         they were
#   BENCH_QUICK=1         smoke run: workloads 1/8 of their size, 1 repeat
#   BENCH_DIR=DIR         where to work and write results (default: the
#                         build directory's bench/)
#   BENCH_TIMEOUT=S       limit for each pipeline, in seconds (default 900)
#   BENCH_GPUSEND_ARGS    more options for gpusend (e.g. "-c zstd:1"),
#                         after those of the variant; default none
#   BENCH_KEEP=1          keep the work directory
#
# It prints PASS or MISS for each target, but exits 0 whatever the
# figures are: it exits 1 only when something broke (a run failed, or a
# restored workload did not verify).

set -u
export LC_ALL=C
# The baselines' criu runs as gpuckpt runs it: without hardware
# breakpoints, which some virtual machines never deliver (gck_criu_env()).
CRIU_FAULT=${CRIU_FAULT:-130}
export CRIU_FAULT

me=bench

die() { printf '%s: error: %s\n' "$me" "$*" >&2; exit 1; }
note() { printf '%s: %s\n' "$me" "$*" >&2; }

: "${GCK_BINDIR:?GCK_BINDIR is not set: run the benchmark through make bench}"
: "${BENCH_BINDIR:?BENCH_BINDIR is not set: run the benchmark through make bench}"

# Detached and restored processes must be reaped by someone: run the whole
# benchmark under the tests' subreaper, which also kills what is left.
if [ -z "${BENCH_REAPED:-}" ]; then
	[ -x "${BENCH_REAPER:-}" ] || die "BENCH_REAPER is not set or not executable"
	BENCH_REAPED=1 exec "$BENCH_REAPER" bash "$0" "$@"
fi

GPUCKPT=$GCK_BINDIR/ckpt/gpuckpt
GPURESTORE=$GCK_BINDIR/restore/gpurestore
GPUSEND=$GCK_BINDIR/send/gpusend
GPURECV=$GCK_BINDIR/recv/gpurecv
GPUINSPECT=$GCK_BINDIR/inspect/gpuinspect
BENCHWORK=$BENCH_BINDIR/benchwork
BCOUNT=$BENCH_BINDIR/bcount
DIRPEAK=$BENCH_BINDIR/dirpeak
TIME=/usr/bin/time
XPATH=$PATH:/usr/local/sbin:/usr/sbin:/sbin
[ -n "${CRIU:-}" ] || CRIU=$(PATH=$XPATH command -v criu)
[ -n "${SSHD:-}" ] || SSHD=$(PATH=$XPATH command -v sshd)

QUICK=${BENCH_QUICK:-0}
[ "$QUICK" = 0 ] && REPEAT=${BENCH_REPEAT:-3} || REPEAT=${BENCH_REPEAT:-1}
WORKLOADS=${BENCH_WORKLOADS-mixed zero90 random}
VARIANTS=${BENCH_VARIANTS-baseline-pipe baseline-ssh gpuckpt-pipe gpuckpt-ssh gpusend gpusend-par}
EXTRAS=${BENCH_EXTRAS-none-vs-dump rss-flat restore-file incremental cache-again live snapshot storage}
LIVE_RATES=${BENCH_LIVE_RATES:-"0 1 10"}	# percent of the memory rewritten a second
PATTERNS=${BENCH_PATTERNS:-"pages heap runs"}	# benchwork -p of the extras above
LIMIT=${BENCH_TIMEOUT:-900}
DIR=${BENCH_DIR:-$BENCH_BINDIR}
GPUSEND_ARGS=${BENCH_GPUSEND_ARGS:-}

# The size of a workload in MiB: full, or 1/8 in quick mode.
size()
{
	if [ "$QUICK" = 0 ]; then
		echo "$1"
	else
		echo $(($1 / 8))
	fi
}

# Workload NAME -> "KIND MiB".
workload_spec()
{
	case $1 in
	mixed)	echo "mixed $(size 2048)" ;;
	zero90)	echo "zero90 $(size 4096)" ;;
	random)	echo "random $(size 1024)" ;;
	rss-small) echo "mixed $(size 256)" ;;
	rss-large) echo "mixed $(size 4096)" ;;
	live[0-9]*) echo "mixed $(size 2048) ${1#live}" ;;
	*)	return 1 ;;
	esac
}

# rs_from VARIANT IMAGE COMMAND...: runs COMMAND on IMAGE, a file, or
# for custom-stream a pipe from cat(1).
rs_from()
{
	local v=$1 img=$2

	shift 2
	if [ "$v" = custom-stream ]; then
		cat "$img" | "$@"
	else
		"$@" "$img"
	fi
}

# storage_one VARIANT REP: 4 GiB of device memory (1/8 of it quick) of
# one cudawork process on the stand-in driver at CUDA 13.4, checkpointed
# to a file with (custom, custom-stream) or without (staging:
# --gpu-staging) custom storage, then restored from the file, or from a
# pipe (custom-stream); or (custom-local) gpuckpt | gpurestore here.  A criu in front of criu notes the process's
# private memory and CPU time when the dump starts.  Appends "storage
# VARIANT REP ok|FAIL MiB proc_anon_before_kB proc_anon_dump_kB
# proc_cpu_s ckpt_rss_kB ckpt_cpu_s rst_rss_kB rst_cpu_s image_B
# ckpt_anon_peak_kB rst_anon_peak_kB" to RAW.
storage_one()
{
	local v=$1 rep=$2 mib st=FAIL pid f b a pc0 pc1 line
	local fake=$R/fake.$v.$rep

	mib=$(size 4096)
	mkdir -p "$fake" || return
	printf 'GPU-aaaaaaaa-1111-4000-8000-000000000001 9.0 %s 0000:01:00.0 NVIDIA H100 80GB HBM3\n' \
	    $((mib * 2 * 1048576)) >"$fake/gpus"
	echo "13040 595.45.04" >"$fake/driver"
	cat >"$R/rsscriu" <<-EOF
	#!/bin/sh
	case " \$* " in
	*" dump "*)
		t=\$(echo " \$* " | sed -n 's/.* -t \([0-9]*\) .*/\1/p')
		echo "\$(awk '/^RssAnon:/ { print \$2 }' /proc/\$t/status) \$(awk '{ print \$14 + \$15 }' /proc/\$t/stat)" >"$R/rss.dump" ;;
	esac
	exec "$CRIU" "\$@"
	EOF
	chmod +x "$R/rsscriu"
	f=$R/cuda.status
	rm -f "$f" "$R/rss.dump" "$R/store.gck"
	(export FAKECUDA_DIR="$fake" LD_LIBRARY_PATH="$BENCH_TESTDIR/fakecuda"
	 setsid "$BENCH_TESTDIR/cudawork" -m "$mib" -f "$f" </dev/null \
	    >"$R/cuda.out" 2>&1 &)
	wait_line "$f" '^ready ' 600 || { note "cudawork did not start"; cat "$R/cuda.out" >&2; return; }
	pid=$(sed -n 's/^ready pid=\([0-9]*\).*/\1/p' "$f")
	live="$live $pid"
	b=$(awk '/^RssAnon:/ { print $2 }' /proc/$pid/status)
	pc0=$(awk '{ print $14 + $15 }' /proc/$pid/stat)
	# (the stand-in's calls wait 10 s by default: staging 4 GiB takes more)
	export FAKECUDA_DIR="$fake" GPUCKPT_LIBCUDA="$BENCH_TESTDIR/fakecuda/libcuda.so.1" \
	    GPUCKPT_LIBNVML="$BENCH_TESTDIR/fakecuda/libnvidia-ml.so.1" \
	    FAKECUDA_CALL_TIMEOUT_MS=$((LIMIT * 1000))
	echo - >"$R/ck.anon"
	echo - >"$R/rs.anon"
	if [ "$v" = custom-local ]; then
		storage_local "$pid" && st=ran
	elif { GCK_CRIU="$R/rsscriu" "$TIME" -f "%U %S %M" \
	    -o "$R/ck.time" "$GPUCKPT" $([ "$v" = staging ] && echo --gpu-staging) \
	    -p "$pid" -o "$R/store.gck" 2>"$R/ck.err" & } &&
	    { anon_peak gpuckpt "$R/ck.anon"; wait $!; } &&
	    wait_gone "$pid" 60 &&
	    { rs_from "$v" "$R/store.gck" "$TIME" -f "%U %S %M" -o "$R/rs.time" \
	    "$GPURESTORE" >/dev/null 2>"$R/rs.err" & } &&
	    { anon_peak gpurestore "$R/rs.anon"; wait $!; }; then
		st=ran
	else
		note "storage $v failed: $(cat "$R/ck.err" "$R/rs.err" 2>/dev/null | tail -n 2)"
	fi
	if [ "$st" = ran ]; then
		st=FAIL
		kill -USR1 "$pid"
		if wait_line "$f" '^verify ' 120 && grep -q '^verify ok' "$f"; then
			st=ok
		else
			note "storage $v: the restored process did not verify"
		fi
		[ "$st" = ok ] && [ "$v" = custom ] && storage_incr "$pid" "$rep" "$mib"
	fi
	set -- $(cat "$R/rss.dump" 2>/dev/null) - -
	a=$1 pc1=$2
	line="storage $v $rep $st $mib $b $a $(awk -v a="$pc1" -v b="$pc0" 'BEGIN {
	    if (a == "-") print "-"; else printf "%.2f", (a - b) / 100 }')"
	line="$line $(rss3_of "$R/ck.time") $(cpu_of "$R/ck.time")"
	line="$line $(rss3_of "$R/rs.time") $(cpu_of "$R/rs.time")"
	line="$line $(stat -c %s "$R/store.gck" 2>/dev/null || echo -)"
	line="$line $(cat "$R/ck.anon") $(cat "$R/rs.anon")"
	echo "$line" >>"$RAW"
	[ $st = ok ] || broke=1
	kill -KILL "$pid" 2>/dev/null
	wait_gone "$pid" 10
	unset FAKECUDA_DIR GPUCKPT_LIBCUDA GPUCKPT_LIBNVML FAKECUDA_CALL_TIMEOUT_MS
	rm -rf "$fake" "$R/store.gck"
}

# storage_local PID: gpuckpt -p PID | gpurestore on this host, each
# side timed, their peak private memory noted (ck.anon, rs.anon).
# gpurestore reads the whole image first, the source still here, then
# gives each GPU its memory from the extracted files.
storage_local()
{
	local pp ap r

	{ GCK_CRIU="$R/rsscriu" "$TIME" -f "%U %S %M" -o "$R/ck.time" \
	    "$GPUCKPT" -p "$1" 2>"$R/ck.err" |
	    "$TIME" -f "%U %S %M" -o "$R/rs.time" "$GPURESTORE" >/dev/null \
	    2>"$R/rs.err"; } &
	pp=$!
	anon_peak gpuckpt "$R/ck.anon" &
	ap=$!
	anon_peak gpurestore "$R/rs.anon"
	wait $ap
	wait $pp
	r=$?
	[ $r = 0 ] || note "storage custom-local failed: $(cat "$R/ck.err" "$R/rs.err" 2>/dev/null | tail -n 2)"
	return $r
}

# rewrote_after FILE N: waits (2 minutes at most) for cudawork's status
# FILE to say "rewrote" more than N times.
rewrote_after()
{
	local i=0

	while [ "$(grep -c '^rewrote ' "$1")" -le "$2" ]; do
		i=$((i + 1))
		[ $i -le 1200 ] || return 1
		sleep 0.1
	done
}

# storage_incr PID REP MIB: of the restored process PID, images with
# --parent of the full one ($R/store.gck), through custom storage: with
# nothing rewritten since, and after cudawork rewrote one page in 64 of
# its device memory all over it (SIGUSR2).  Appends "storage-incr REP
# ok|FAIL MIB full_B same_B same_cpu_s scattered_B scattered_cpu_s".
storage_incr()
{
	local pid=$1 rep=$2 mib=$3 st=FAIL f=$R/cuda.status n line

	line="storage-incr $rep"
	if "$TIME" -f "%U %S %M" -o "$R/si1.time" "$GPUCKPT" -R \
	    --parent "$R/store.gck" -p "$pid" -o "$R/same.gck" 2>"$R/si.err" &&
	    n=$(grep -c '^rewrote ' "$f"; :) && kill -USR2 "$pid" &&
	    rewrote_after "$f" "$n" &&
	    "$TIME" -f "%U %S %M" -o "$R/si2.time" "$GPUCKPT" -R \
	    --parent "$R/store.gck" -p "$pid" -o "$R/scat.gck" 2>"$R/si.err"; then
		st=ok
	else
		note "storage --parent failed: $(tail -n 2 "$R/si.err")"
	fi
	line="$line $st $mib $(stat -c %s "$R/store.gck" 2>/dev/null || echo -)"
	line="$line $(stat -c %s "$R/same.gck" 2>/dev/null || echo -) $(cpu_of "$R/si1.time")"
	line="$line $(stat -c %s "$R/scat.gck" 2>/dev/null || echo -) $(cpu_of "$R/si2.time")"
	echo "$line" >>"$RAW"
	rm -f "$R/same.gck" "$R/scat.gck"
}

# The storage figures, the staging baseline's beside custom storage's.
storage_report()
{
	local v mib b a pc cr cc rr rc img grow g16 ca ra

	grep -q '^storage ' "$RAW" || return 0
	say ""
	mib=$(size 4096)
	say "== device memory: $mib MiB of one process on the stand-in driver (memcpy copies: the host side only) =="
	for v in staging custom custom-stream custom-local; do
		set -- $(awk -v v="$v" '$1 == "storage" && $2 == v && $4 == "ok"' "$RAW" | head -n 1)
		if [ $# -lt 15 ]; then
			say "  $v: FAILED (see above)"
			continue
		fi
		b=$6 a=$7 pc=$8
		cr=$(awk -v v="$v" '$1 == "storage" && $2 == v && $4 == "ok" { print $9 }' "$RAW" | median)
		cc=$(awk -v v="$v" '$1 == "storage" && $2 == v && $4 == "ok" { print $10 }' "$RAW" | median)
		rr=$(awk -v v="$v" '$1 == "storage" && $2 == v && $4 == "ok" { print $11 }' "$RAW" | median)
		rc=$(awk -v v="$v" '$1 == "storage" && $2 == v && $4 == "ok" { print $12 }' "$RAW" | median)
		ca=$(awk -v v="$v" '$1 == "storage" && $2 == v && $4 == "ok" { print $14 }' "$RAW" | median)
		ra=$(awk -v v="$v" '$1 == "storage" && $2 == v && $4 == "ok" { print $15 }' "$RAW" | median)
		grow=$(( (a - b) / 1024 ))
		say "  $v: the process's private memory grew by $grow MiB by the dump; it spent $pc CPU-s ($(quot "$pc" "$(quot "$mib" 1024)" %.2f) a GiB)"
		say "  $v: gpuckpt $cc CPU-s ($(quot "$cc" "$(quot "$mib" 1024)" %.2f) a GiB), peak private memory $((ca / 1024)) MiB (peak RSS $((cr / 1024)) MiB, the stand-in's mapped device memory included)"
		say "  $v: gpurestore $rc CPU-s ($(quot "$rc" "$(quot "$mib" 1024)" %.2f) a GiB), peak private memory $((ra / 1024)) MiB (peak RSS $((rr / 1024)) MiB)"
		if [ "$v" = custom ]; then
			g16=$((mib * 1024 / 16))
			say "$(verdict "$(cmp_le "$grow" 8)")  custom storage: the process's private memory does not grow (goal: at most 8 MiB; it grew $grow MiB)"
			say "$(verdict "$(cmp_le "$ca" "$g16")")  custom storage: gpuckpt's peak private memory $((ca / 1024)) MiB (goal: under 1/16 of the device memory, $((g16 / 1024)) MiB)"
		fi
	done
	set -- $(awk '$1 == "storage-incr" && $3 == "ok"' "$RAW" | head -n 1)
	[ $# -ge 9 ] || return 0
	say "  custom, --parent of the full image ($(($5 / 1048576)) MiB), after one page in 64 rewritten all over: $(($8 / 1048576)) MiB ($(quot "$8" "$5" %.3f) of it), gpuckpt $9 CPU-s"
	say "  custom, --parent of the full image, nothing rewritten: $(($6 / 1048576)) MiB ($(quot "$6" "$5" %.3f) of it), gpuckpt $7 CPU-s"
}

# --- checks ----------------------------------------------------------

[ "$(id -u)" = 0 ] || die "run the benchmark as root"
for f in "$GPUCKPT" "$GPURESTORE" "$BENCHWORK" "$BCOUNT" "$DIRPEAK" "$TIME"; do
	[ -x "$f" ] || die "$f not found"
done
[ -n "$CRIU" ] && [ -x "$CRIU" ] || die "criu not found"
command -v zstd >/dev/null || die "zstd not found"
command -v tar >/dev/null || die "tar not found"
case $REPEAT in
''|*[!0-9]*|0) die "BENCH_REPEAT must be a positive number" ;;
esac
for w in $WORKLOADS; do
	workload_spec "$w" >/dev/null || die "unknown workload '$w' (mixed zero90 random)"
done
for v in $VARIANTS; do
	case $v in
	baseline-pipe|baseline-ssh|gpuckpt-pipe|gpuckpt-ssh|gpusend|gpusend-par) ;;
	*) die "unknown variant '$v'" ;;
	esac
done
for x in $EXTRAS; do
	case $x in
	none-vs-dump|rss-flat|restore-file|incremental|cache-again|live|snapshot|storage) ;;
	*) die "unknown extra '$x' (none-vs-dump rss-flat restore-file incremental cache-again live snapshot storage)" ;;
	esac
done
case " $EXTRAS " in
*" storage "*)
	[ -x "${BENCH_TESTDIR:-}/cudawork" ] &&
	    [ -e "$BENCH_TESTDIR/fakecuda/libcuda.so.1" ] ||
	    die "the stand-in CUDA driver of the tests is not built (BENCH_TESTDIR)" ;;
esac
for p in $PATTERNS; do
	case $p in
	pages|heap|runs) ;;
	*) die "unknown pattern '$p' (pages heap runs)" ;;
	esac
done

mkdir -p "$DIR" || die "cannot create $DIR"
R=$(mktemp -d "$DIR/run.XXXXXX") || die "cannot create a work directory in $DIR"
RESULTS=$DIR/results-$(date +%Y%m%d-%H%M%S).txt
RAW=$R/raw
: >"$RAW"
: >"$RESULTS"

# --- cleanup ---------------------------------------------------------

dest=		# the restoring side, in its namespace
live=		# workload PIDs that may still run
sshd_pid=
nsshd_pid=	# unshare, for the sshd in a PID namespace of its own
ns_init=	# that namespace's init (our reaper)
ns_id=
relay_pid=
sampler=
tmpfs_dir=
broke=0

cleanup()
{
	local p
	[ -n "$sampler" ] && kill "$sampler" 2>/dev/null
	[ -n "$relay_pid" ] && kill "$relay_pid" 2>/dev/null
	for p in $live; do
		kill -KILL "$p" 2>/dev/null
	done
	if [ -n "$sshd_pid" ]; then
		kill "$sshd_pid" 2>/dev/null
		wait "$sshd_pid" 2>/dev/null
	fi
	stop_nsshd
	if [ -n "$dest" ]; then
		# What is left in that namespace, our reaper kills.
		touch "$R/r/release" 2>/dev/null
		wait_gone "$dest" 5 || kill -KILL "$dest" 2>/dev/null
		wait "$dest" 2>/dev/null
	fi
	if [ -n "$tmpfs_dir" ]; then
		umount "$tmpfs_dir" 2>/dev/null || umount -l "$tmpfs_dir"
	fi
	cd /
	if [ -n "${BENCH_KEEP:-}" ]; then
		note "kept $R"
	else
		rm -rf "$R"
	fi
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
cd "$R" || exit 1

# --- small helpers ---------------------------------------------------

# cpu_of FILE: user + system seconds that /usr/bin/time -f "%U %S %M"
# wrote on the last line of FILE, or "-".
cpu_of()
{
	tail -n 1 "$1" 2>/dev/null | awk 'NF == 3 { printf "%.2f\n", $1 + $2; ok = 1 }
	    END { if (!ok) print "-" }'
}

# anon_peak NAME FILE: samples, every 10 ms, the private anonymous
# memory (RssAnon) of the oldest process called NAME (gpuckpt's guard is
# a younger one) until it is gone, and writes the most it saw, in kB, to
# FILE.  The stand-in driver maps "device memory" into the caller as a
# file, which RSS would count: on a GPU that is device memory, not the
# host's.
anon_peak()
{
	local c= m=0 v i=0
	while [ -z "$c" ] && [ $i -lt 500 ]; do
		c=$(pgrep -o -x "$1")
		i=$((i + 1))
		[ -n "$c" ] || sleep 0.01
	done
	while [ -n "$c" ] && [ -d /proc/$c ]; do
		v=$(awk '/^RssAnon:/ { print $2 }' /proc/$c/status 2>/dev/null)
		[ -n "$v" ] && [ "$v" -gt $m ] && m=$v
		sleep 0.01
	done
	echo $m >"$2"
}

# rss3_of FILE: the peak RSS in kB of that last line, or "-".
rss3_of()
{
	tail -n 1 "$1" 2>/dev/null | awk 'NF == 3 { print $3; ok = 1 }
	    END { if (!ok) print "-" }'
}

# Writes its arguments as one line to standard output and the results.
say()
{
	printf '%s\n' "$*"
	printf '%s\n' "$*" >>"$RESULTS"
}

now() { echo "$EPOCHREALTIME"; }

# elapsed T0 T1: seconds between two `now' values, 3 decimals.
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

# wait_line FILE PATTERN SECONDS
wait_line()
{
	local i=0
	while ! grep -e "$2" "$1" >/dev/null 2>&1; do
		i=$((i + 1))
		[ $i -gt $(($3 * 20)) ] && return 1
		sleep 0.05
	done
}

# wait_gone PID [SECONDS]: until PID has died and been reaped.
wait_gone()
{
	local i=0
	while [ -d "/proc/$1" ]; do
		i=$((i + 1))
		[ $i -gt $((${2:-30} * 100)) ] && return 1
		sleep 0.01
	done
}

# The peak RSS in kB that /usr/bin/time wrote to FILE, or "-".
rss_of()
{
	local v
	v=$(tail -n 1 "$1" 2>/dev/null)
	case $v in
	''|*[!0-9]*) echo - ;;
	*) echo "$v" ;;
	esac
}

max_of()
{
	local m=- v
	for v in "$@"; do
		[ "$v" = - ] && continue
		if [ "$m" = - ] || [ "$v" -gt "$m" ]; then
			m=$v
		fi
	done
	echo "$m"
}

# start_work KIND MiB [RPCT [WPCT [PATTERN]]]: starts a workload in its
# own session, stdio on files, orphaned to the subreaper; waits until it
# has filled its memory.  RPCT and WPCT are its -r and -w, PATTERN its
# -p (default runs).  Sets WPID, WSUM and WSTATUS.
start_work()
{
	WSTATUS=$R/work.$1.$2.status
	rm -f "$WSTATUS"
	(setsid "$BENCHWORK" -k "$1" -m "$2" -f "$WSTATUS" ${3:+-r "$3"} \
	    ${4:+-w "$4"} ${5:+-p "$5"} </dev/null >"$R/work.out" 2>&1 &)
	if ! wait_line "$WSTATUS" '^ready ' 600; then
		note "workload $1 $2 MiB did not start: $(cat "$WSTATUS" "$R/work.out" 2>/dev/null)"
		return 1
	fi
	WPID=$(sed -n 's/^ready pid=\([0-9]*\).*/\1/p' "$WSTATUS")
	WSUM=$(sed -n 's/^ready .*sum=\([0-9a-f]*\).*/\1/p' "$WSTATUS")
	live="$live $WPID"
}

# stop_work: kills the workload (source or restored) and waits for it.
stop_work()
{
	kill -KILL "$WPID" 2>/dev/null
	wait_gone "$WPID" 60 || note "workload $WPID does not go away"
	live=$(echo " $live " | sed "s/ $WPID / /")
}

# elsewhere D: starts, in the background, the restoring side of our
# pipelines as another host would run it: gpurestore in a PID namespace
# of its own, where the image's process IDs are free while the source
# still exists here.  It reads the FIFO D/in and, when done, writes
# D/st.restore (its exit status) and D/t.restored (the time); the
# namespace, and the restored workload in it, lasts until D/release
# appears.  Sets dest to the namespace's process.
elsewhere()
{
	mkfifo "$1/in" || return 1
	unshare --pid --fork --mount-proc "$BENCH_REAPER" bash -c '
		d=$1
		TMPDIR=$d/stage/b "$2" -f %M -o "$d/rss.restore" "$3" \
		    <"$d/in" >"$d/out" 2>>"$d/err"
		echo $? >"$d/st.tmp"
		echo "$EPOCHREALTIME" >"$d/t.restored"
		mv "$d/st.tmp" "$d/st.restore"
		while ! [ -e "$d/release" ]; do sleep 0.05; done
	' bench "$1" "$TIME" "$GPURESTORE" </dev/null >/dev/null 2>&1 &
	dest=$!
}

# elsewhere_done D: waits for the restoring side; its status.
elsewhere_done()
{
	wait_line "$1/st.restore" . "$LIMIT" || return 1
	cat "$1/st.restore"
}

# host_pid NSPID [NS]: the PID, in ours, of the restored workload that
# has NSPID in its own namespace (NS, as /proc/PID/ns/pid reads, when
# given).
host_pid()
{
	local h
	for h in $(awk -v want="$1" '$1 == "NSpid:" && NF == 3 && $3 == want {
		split(FILENAME, f, "/"); print f[3] }' \
	    /proc/[0-9]*/status 2>/dev/null); do
		if [ -z "${2:-}" ] ||
		    [ "$(readlink "/proc/$h/ns/pid" 2>/dev/null)" = "$2" ]; then
			echo "$h"
			return
		fi
	done
}

# downtime: waits until the restored workload has logged the gap it saw
# (restored=1) and prints the largest such gap in seconds.
downtime()
{
	wait_line "$WSTATUS" '^gap .* restored=1' 60 || return 1
	sleep 0.2
	awk '$1 == "gap" && $3 == "restored=1" { if ($2 > m) m = $2 }
	    END { printf "%.3f", m / 1000 }' "$WSTATUS"
}

# verify: asks the restored workload to check its memory.
verify()
{
	local n
	n=$(grep -c '^verify ' "$WSTATUS")
	kill -USR1 "$WPID" 2>/dev/null || return 1
	wait_line_count "$WSTATUS" '^verify ' $((n + 1)) 120 || return 1
	# one that keeps rewriting checked each run against its checksum
	if grep -q '^ready .* rewriting=[1-9]' "$WSTATUS"; then
		grep '^verify ' "$WSTATUS" | tail -n 1 | grep -q "^verify ok "
		return
	fi
	grep '^verify ' "$WSTATUS" | tail -n 1 | grep -q "^verify ok sum=$WSUM\$"
}

# rewrite_work: has the workload rewrite some of its memory (SIGUSR2)
# and takes the sum it then has.
rewrite_work()
{
	local n

	n=$(grep -c '^rewrote ' "$WSTATUS")
	kill -USR2 "$WPID"
	wait_line_count "$WSTATUS" '^rewrote ' $((n + 1)) 120 || return 1
	WSUM=$(grep '^rewrote ' "$WSTATUS" | tail -n 1 |
	    sed 's/^rewrote sum=\([0-9a-f]*\).*/\1/')
}

# wait_line_count FILE PATTERN N SECONDS
wait_line_count()
{
	local i=0
	while [ "$(grep -c -e "$2" "$1")" -lt "$3" ]; do
		i=$((i + 1))
		[ $i -gt $(($4 * 20)) ] && return 1
		sleep 0.05
	done
}

# --- a loopback sshd of our own --------------------------------------

# ssh_keys: our host and user keys, once; an empty home for gpusend (no
# keys, agent or known_hosts but those we give it).
ssh_keys()
{
	[ -n "$SSHD" ] && [ -x "$SSHD" ] || return 1
	command -v ssh >/dev/null && command -v ssh-keygen >/dev/null || return 1
	[ -e "$R/ssh/authorized_keys" ] && return 0
	mkdir -p "$R/ssh" "$R/home" /run/sshd
	ssh-keygen -q -t ed25519 -N "" -C gck-bench-host -f "$R/ssh/hostkey" &&
	ssh-keygen -q -t ed25519 -N "" -C gck-bench-user -f "$R/ssh/userkey" &&
	cp "$R/ssh/userkey.pub" "$R/ssh/authorized_keys"
}

# sshd_config NAME PORT: writes $R/ssh/NAME.config for PORT.
sshd_config()
{
	cat >"$R/ssh/$1.config" <<-EOF
	ListenAddress 127.0.0.1
	Port $2
	HostKey $R/ssh/hostkey
	AuthorizedKeysFile $R/ssh/authorized_keys
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
	# Newer sshd penalise a source whose sessions fail: not here.
	"$SSHD" -t -f "$R/ssh/$1.config" -o PerSourcePenalties=no \
	    2>/dev/null && echo "PerSourcePenalties no" >>"$R/ssh/$1.config"
}

# sshd_up NAME PID PORT: waits until the sshd that PID runs listens on
# PORT; fails when it died or did not in 10 s.
sshd_up()
{
	local i=0
	while [ $i -lt 100 ] && [ -d "/proc/$2" ] &&
	    [ "$(awk '{ print $3 }' "/proc/$2/stat" 2>/dev/null)" != Z ]; do
		if grep "Server listening on 127.0.0.1 port $3" \
		    "$R/ssh/$1.log" >/dev/null 2>&1; then
			echo "[127.0.0.1]:$3 $(cat "$R/ssh/hostkey.pub")" \
			    >>"$R/ssh/known_hosts"
			return 0
		fi
		i=$((i + 1))
		sleep 0.1
	done
	return 1
}

# free_port TRY: a port to try, 20000 to 59999.
free_port()
{
	awk -v s="$$$1" 'BEGIN { srand(s); print 20000 + int(rand() * 40000) }'
}

# Starts sshd on a free port of 127.0.0.1 with its own host and user
# keys; sets port and sshd_pid.  The system's sshd is not touched.
start_sshd()
{
	local try
	ssh_keys || return 1
	for try in 1 2 3 4 5 6 7 8 9 10; do
		port=$(free_port "$try")
		sshd_config sshd "$port"
		"$SSHD" -D -e -f "$R/ssh/sshd.config" 2>"$R/ssh/sshd.log" &
		sshd_pid=$!
		sshd_up sshd "$sshd_pid" "$port" && return 0
		kill "$sshd_pid" 2>/dev/null
		wait "$sshd_pid" 2>/dev/null
		sshd_pid=
	done
	return 1
}

# Starts, for gpusend, a second sshd in a PID namespace of its own (with
# the same keys): what gpurecv restores lives there, as on another host,
# while the stopped source still holds its PIDs here.  Sets nsport,
# nsshd_pid (unshare), ns_init (the namespace's init) and ns_id.
start_nsshd()
{
	local try
	ssh_keys || return 1
	command -v unshare >/dev/null || return 1
	for try in 11 12 13 14 15 16 17 18 19 20; do
		nsport=$(free_port "$try")
		[ "$nsport" = "${port:-}" ] && continue
		sshd_config nsshd "$nsport"
		unshare --pid --fork --kill-child --mount-proc "$BENCH_REAPER" \
		    "$SSHD" -D -e -f "$R/ssh/nsshd.config" \
		    </dev/null >/dev/null 2>"$R/ssh/nsshd.log" &
		nsshd_pid=$!
		if sshd_up nsshd "$nsshd_pid" "$nsport"; then
			ns_init=$(cat /proc/"$nsshd_pid"/task/*/children |
			    awk '{ print $1; exit }')
			ns_id=$(readlink "/proc/$ns_init/ns/pid")
			[ -n "$ns_id" ] && return 0
		fi
		stop_nsshd
	done
	return 1
}

# stop_nsshd: ends that namespace, and all in it, restored workloads too.
stop_nsshd()
{
	[ -n "$nsshd_pid" ] || return 0
	[ -n "$ns_init" ] && kill -KILL "$ns_init" 2>/dev/null
	kill -KILL "$nsshd_pid" 2>/dev/null
	wait "$nsshd_pid" 2>/dev/null
	nsshd_pid=
	ns_init=
}

# remote_at PORT COMMAND: runs COMMAND as root@127.0.0.1 through our sshd
# on PORT.
remote_at()
{
	local p=$1
	shift
	timeout "$LIMIT" ssh -F /dev/null -i "$R/ssh/userkey" \
	    -o IdentitiesOnly=yes -o UserKnownHostsFile="$R/ssh/known_hosts" \
	    -o GlobalKnownHostsFile=/dev/null -o StrictHostKeyChecking=yes \
	    -o BatchMode=yes -o LogLevel=ERROR -o ConnectTimeout=10 \
	    -p "$p" root@127.0.0.1 "$@"
}

# remote COMMAND: runs COMMAND as root@127.0.0.1 through our sshd.
remote()
{
	remote_at "$port" "$@"
}

# start_relay FILE: bcount -r in front of the namespace's sshd; sets
# rport and relay_pid.  stop_relay writes the bytes it relayed to FILE.
start_relay()
{
	local i=0
	rm -f "$1" "$1.port"
	"$BCOUNT" -r 0 "$nsport" "$1" 2>>"$R/relay.err" &
	relay_pid=$!
	while ! [ -s "$1.port" ]; do
		i=$((i + 1))
		if [ $i -gt 200 ] || ! [ -d "/proc/$relay_pid" ]; then
			stop_relay
			return 1
		fi
		sleep 0.05
	done
	rport=$(cat "$1.port")
}

stop_relay()
{
	[ -n "$relay_pid" ] || return 0
	kill "$relay_pid" 2>/dev/null
	wait "$relay_pid" 2>/dev/null
	relay_pid=
}

# Succeeds when gpusend can migrate a PID (its usage lists -p).
gpusend_works()
{
	[ -x "$GPUSEND" ] || return 1
	"$GPUSEND" --help 2>&1 | grep -Eq -- '(^|[[ ])-p( |$)'
}

# --- one run ---------------------------------------------------------

# run_one NAME VARIANT REP [PATTERN]: starts workload NAME, writing as
# PATTERN says (default runs), moves it with VARIANT, checks the restored
# process and appends one line to $RAW:
#   NAME VARIANT REP ok|FAIL downtime total wire rss_ckpt rss_restore
#   staging rss_dump rss_tar rss_zstd rss_unzstd rss_untar rss_crestore
#   PATTERN
run_one()
{
	local name=$1 v=$2 rep=$3 pat=${4:-runs} kind mib d A B t0 t1 st ok=ok
	local why= src label keep
	local dt=- total=- wire=- rc=- rr=- stage=-
	local r_dump=- r_tar=- r_zstd=- r_unzstd=- r_untar=- r_crestore=-
	local par= cache=--no-cache wrate

	set -- $(workload_spec "$name")
	kind=$1
	mib=$2
	wrate=${3:-}
	d=$R/r
	rm -rf "$d"
	mkdir -p "$d/stage"
	A=$d/stage/a	# source side: image dir, or gpuckpt's TMPDIR
	B=$d/stage/b	# restore side: image dir, or gpurestore's TMPDIR

	if ! start_work "$kind" "$mib" "" "$wrate" "$pat"; then
		broke=1
		echo "$name $v $rep FAIL - - - - - - - - - - - - $pat" >>"$RAW"
		return 1
	fi

	# Staging: every file under A and B, 20 samples a second.
	"$DIRPEAK" -i 50 -o "$d/staging" "$d/stage" &
	sampler=$!

	t0=$(now)
	case $v in
	baseline-*)
		# What a user types; criu dump kills the tree by default.
		mkdir -p "$A"
		timeout "$LIMIT" "$TIME" -f %M -o "$d/rss.dump" \
		    "$CRIU" dump -D "$A" -t "$WPID" 2>"$d/err" >/dev/null
		st=$?
		if [ $st -ne 0 ]; then
			ok=FAIL
			why="criu dump exited $st"
		else
			# The source is gone; its PID is free once reaped.
			wait_gone "$WPID" 30
		fi
	esac
	case $ok.$v in
	ok.baseline-pipe)
		timeout "$LIMIT" "$TIME" -f %M -o "$d/rss.tar" \
		    tar -C "$A" -cf - . |
		    "$TIME" -f %M -o "$d/rss.zstd" zstd |
		    "$BCOUNT" "$d/wire" |
		    timeout "$LIMIT" bash -c '
			mkdir "$1" &&
			"$3" -f %M -o "$2/rss.unzstd" zstd -d |
			"$3" -f %M -o "$2/rss.untar" tar -C "$1" -xf - &&
			"$3" -f %M -o "$2/rss.crestore" "$4" restore -D "$1" -d
		    ' bench "$B" "$d" "$TIME" "$CRIU" >/dev/null 2>>"$d/err"
		st="${PIPESTATUS[*]}"
		;;
	ok.baseline-ssh)
		timeout "$LIMIT" "$TIME" -f %M -o "$d/rss.tar" \
		    tar -C "$A" -cf - . |
		    "$TIME" -f %M -o "$d/rss.zstd" zstd |
		    "$BCOUNT" "$d/wire" |
		    remote "mkdir '$B' &&
			'$TIME' -f %M -o '$d/rss.unzstd' zstd -d |
			'$TIME' -f %M -o '$d/rss.untar' tar -C '$B' -xf - &&
			'$TIME' -f %M -o '$d/rss.crestore' '$CRIU' restore -D '$B' -d" \
		    >/dev/null 2>>"$d/err"
		st="${PIPESTATUS[*]}"
		;;
	ok.gpuckpt-pipe)
		# -k: a move, the source killed once its image is written,
		# as the baseline's criu dump does (after a pipe, gpuckpt
		# would leave it stopped for the restore to end).
		mkdir -p "$A" "$B"
		elsewhere "$d"
		TMPDIR=$A timeout "$LIMIT" "$TIME" -f %M -o "$d/rss.ckpt" \
		    "$GPUCKPT" -k -p "$WPID" 2>"$d/err" |
		    "$BCOUNT" "$d/wire" >"$d/in"
		st="${PIPESTATUS[*]} $(elsewhere_done "$d" || echo 1)"
		t1=$(cat "$d/t.restored" 2>/dev/null || now)
		;;
	ok.gpuckpt-ssh)
		mkdir -p "$A" "$B"
		elsewhere "$d"
		TMPDIR=$A timeout "$LIMIT" "$TIME" -f %M -o "$d/rss.ckpt" \
		    "$GPUCKPT" -k -p "$WPID" 2>"$d/err" |
		    "$BCOUNT" "$d/wire" |
		    remote "cat >'$d/in'" 2>>"$d/err"
		st="${PIPESTATUS[*]} $(elsewhere_done "$d" || echo 1)"
		t1=$(cat "$d/t.restored" 2>/dev/null || now)
		;;
	ok.gpusend*)
		# gpurecv restores in the namespace of our second sshd, with
		# its TMPDIR on B; each gpurecv (one a connection) appends
		# its peak RSS.
		mkdir -p "$A" "$B"
		[ $v = gpusend-par ] && par="--parallel 2"
		[ $v = gpusend-live ] && cache="--live --cache $d/cache"
		if start_relay "$d/wire"; then
			echo "[127.0.0.1]:$rport $(cat "$R/ssh/hostkey.pub")" \
			    >"$d/known_hosts"
			# shellcheck disable=SC2086
			HOME=$R/home TMPDIR=$A timeout "$LIMIT" "$TIME" -f %M \
			    -o "$d/rss.ckpt" "$GPUSEND" -P "$rport" \
			    -i "$R/ssh/userkey" -o IdentityAgent=none \
			    -o UserKnownHostsFile="$d/known_hosts" $par \
			    --remote-path "TMPDIR='$B' '$TIME' -a -f %M -o '$d/rss.restore' '$GPURECV'" \
			    $cache $GPUSEND_ARGS -p "$WPID" root@127.0.0.1 \
			    >"$d/out" 2>"$d/err"
			st=$?
			t1=$(now)
			stop_relay
		else
			ok=FAIL
			why="bcount -r did not start: $(cat "$R/relay.err")"
		fi
		;;
	esac
	case $v in gpuckpt-*|gpusend*) ;; *) t1=$(now) ;; esac
	kill "$sampler" 2>/dev/null
	wait "$sampler" 2>/dev/null
	sampler=

	if [ $ok = ok ]; then
		case " $st " in
		*" "[1-9]*)
			ok=FAIL
			why="exit statuses $st"
			;;
		esac
	fi
	if [ $ok = ok ]; then
		case $v in
		gpuckpt-*|gpusend*)
			if [ "$(cat "$d/out" 2>/dev/null)" != "$WPID" ]; then
				ok=FAIL
				case $v in
				gpusend*) why=gpusend ;;
				*) why=gpurestore ;;
				esac
				why="$why printed '$(cat "$d/out")', not $WPID"
			fi
		esac
	fi
	case $v in
	gpuckpt-*|gpusend*)
		# The restored workload lives in the namespace: find it.
		# The source is gone once that succeeded.
		src=$WPID
		case $v in
		gpusend*) WPID=$(host_pid "$src" "$ns_id") ;;
		*) WPID=$(host_pid "$src") ;;
		esac
		if [ -z "$WPID" ]; then
			WPID=$src
			if [ $ok = ok ]; then
				ok=FAIL
				why="the restored workload is not there"
			fi
		elif [ $ok = ok ] && wait_gone "$src" 5; then
			live=$(echo " $live " | sed "s/ $src / /")
		fi
		;;
	esac
	if [ $ok = ok ] && ! dt=$(downtime); then
		ok=FAIL
		dt=-
		why="the restored workload logged no gap"
	fi
	if [ $ok = ok ] && ! verify; then
		ok=FAIL
		why="the restored workload did not verify: $(grep '^verify' "$WSTATUS" | tail -n 1)"
	fi
	stop_work
	if [ -n "$dest" ]; then
		touch "$d/release"
		wait "$dest" 2>/dev/null
		dest=
	fi

	total=$(elapsed "$t0" "$t1")
	wire=$(head -n 1 "$d/wire" 2>/dev/null || echo -)
	stage=$(awk '{ print $1 }' "$d/staging" 2>/dev/null)
	[ -n "$stage" ] || stage=-
	case $v in
	baseline-*)
		r_dump=$(rss_of "$d/rss.dump")
		r_tar=$(rss_of "$d/rss.tar")
		r_zstd=$(rss_of "$d/rss.zstd")
		r_unzstd=$(rss_of "$d/rss.unzstd")
		r_untar=$(rss_of "$d/rss.untar")
		r_crestore=$(rss_of "$d/rss.crestore")
		rc=$(max_of "$r_dump" "$r_tar" "$r_zstd")
		rr=$(max_of "$r_unzstd" "$r_untar" "$r_crestore")
		;;
	gpusend*)
		rc=$(rss_of "$d/rss.ckpt")
		# the largest of the gpurecv processes (one a connection)
		rr=$(max_of $(grep -x '[0-9][0-9]*' "$d/rss.restore" 2>/dev/null))
		;;
	*)
		rc=$(rss_of "$d/rss.ckpt")
		rr=$(rss_of "$d/rss.restore")
		;;
	esac

	echo "$name $v $rep $ok $dt $total $wire $rc $rr $stage" \
	    "$r_dump $r_tar $r_zstd $r_unzstd $r_untar $r_crestore $pat" \
	    >>"$RAW"
	# the pattern is named where it is not the default
	label="$name ($mib MiB)" keep=$name.$v.$rep
	[ "$pat" = runs ] ||
	    { label="$name ($mib MiB, $pat)"; keep=$name.$pat.$v.$rep; }
	if [ $ok = ok ]; then
		note "$label $v #$rep: downtime $dt s, total $total s, wire $wire B, rss $rc/$rr kB, staging $stage B"
	else
		broke=1
		note "$label $v #$rep FAILED: $why"
		sed 's/^/    /' "$d/err" >&2 2>/dev/null
	fi
	# BENCH_KEEP: what each pipeline said, for a look at it after
	[ -n "${BENCH_KEEP:-}" ] && cp "$d/err" "$R/$keep.err" 2>/dev/null
	rm -rf "$d"
}

# --- gpuckpt --compress=none > /dev/null against criu dump to tmpfs --------

# none_vs_dump REP: one of each on the mixed workload; appends
#   none-vs-dump - REP ok|FAIL gpuckpt_s criudump_s image_bytes
none_vs_dump()
{
	local rep=$1 kind mib t0 t1 tn=- td=- img=- ok=ok d=$R/n

	set -- $(workload_spec mixed)
	kind=$1
	mib=$2
	rm -rf "$d"
	mkdir -p "$d/tmp"
	if start_work "$kind" "$mib"; then
		t0=$(now)
		if TMPDIR=$d/tmp timeout "$LIMIT" "$GPUCKPT" --compress=none \
		    -k -p "$WPID" >/dev/null 2>"$d/err"; then
			t1=$(now)
			tn=$(elapsed "$t0" "$t1")
		else
			ok=FAIL
			note "gpuckpt --compress=none failed: $(cat "$d/err")"
		fi
		stop_work
	else
		ok=FAIL
	fi

	if [ -z "$tmpfs_dir" ]; then
		mkdir -p "$R/tmpfs"
		# Room for the image: the memory, and some.
		if mount -t tmpfs -o size=$((mib + mib / 4 + 64))m gck-bench \
		    "$R/tmpfs"; then
			tmpfs_dir=$R/tmpfs
		else
			ok=FAIL
			note "cannot mount a tmpfs on $R/tmpfs"
		fi
	fi
	if [ -n "$tmpfs_dir" ] && start_work "$kind" "$mib"; then
		rm -rf "$tmpfs_dir/img"
		mkdir "$tmpfs_dir/img"
		t0=$(now)
		if timeout "$LIMIT" "$CRIU" dump -D "$tmpfs_dir/img" -t "$WPID" \
		    --leave-stopped >/dev/null 2>"$d/err"; then
			t1=$(now)
			td=$(elapsed "$t0" "$t1")
			img=$(du -sb "$tmpfs_dir/img" | awk '{ print $1 }')
		else
			ok=FAIL
			note "criu dump to tmpfs failed: $(cat "$d/err")"
		fi
		stop_work
		rm -rf "$tmpfs_dir/img"
	else
		ok=FAIL
	fi
	[ $ok = ok ] || broke=1
	note "none-vs-dump #$rep ($mib MiB): gpuckpt --compress=none $tn s, criu dump to tmpfs $td s"
	echo "none-vs-dump - $rep $ok $tn $td $img" >>"$RAW"
	rm -rf "$d"
}

# --- restore from a local file, and the CPU each side spends --------

# tmpfs_mount MIB: a tmpfs at $R/tmpfs with room for an image of MIB.
tmpfs_mount()
{
	[ -n "$tmpfs_dir" ] && return 0
	mkdir -p "$R/tmpfs"
	mount -t tmpfs -o size=$(($1 + $1 / 4 + 64))m gck-bench "$R/tmpfs" ||
	    return 1
	tmpfs_dir=$R/tmpfs
}

# timed NAME CMD...: runs CMD under time(1); appends "wall user sys" of
# it (and of the children it waited for) to $d/NAME.  Returns its status.
timed()
{
	local name=$1
	shift
	"$TIME" -f "%e %U %S" -o "$d/$name.t" "$@"
}

# restore_file REP: on the mixed workload, two images of the same tree
# taken with gpuckpt --threads 1 and 2, then its restore from the file by
# gpurestore --threads 1 and 2 (which writes the private memory in place
# itself), by gpurestore from a pipe (cat FILE |, where criu restores all
# of it), and by criu restore from a tmpfs directory holding the same
# dump (gpuinspect --extract of the image).  Appends
#   restore-file - REP ok|FAIL WHAT wall_s cpu_s
# for WHAT ckpt-1 ckpt-2 restore-1 restore-2 restore-pipe criu-tmpfs
# checks (the last: gpuinspect --verify of the image), and
#   restore-file - REP ok size image_bytes memory_bytes
restore_file()
{
	local rep=$1 kind mib t ok=ok d=$R/rf what w u s t0 t1

	set -- $(workload_spec mixed)
	kind=$1
	mib=$2
	rm -rf "$d"
	mkdir -p "$d/tmp"
	if ! tmpfs_mount "$mib" || ! start_work "$kind" "$mib"; then
		broke=1
		echo "restore-file - $rep FAIL" >>"$RAW"
		return
	fi
	for t in 1 2; do
		TMPDIR=$d/tmp timed "ckpt-$t" "$GPUCKPT" --threads "$t" -R \
		    -p "$WPID" -o "$d/img$t.gck" 2>>"$d/err" || ok=FAIL
	done
	stop_work
	rm -rf "$tmpfs_dir/img"
	"$GPUINSPECT" --extract "$tmpfs_dir/img" "$d/img2.gck" 2>>"$d/err" ||
	    ok=FAIL
	sync
	# The checks alone: decompression and digests, on every CPU, with
	# nothing restored.  No restore that makes them can take less.
	[ $ok = ok ] && { timed checks "$GPUINSPECT" --verify "$d/img2.gck" \
	    >/dev/null 2>>"$d/err" || ok=FAIL; }
	for what in restore-1 restore-2 restore-pipe criu-tmpfs; do
		[ $ok = ok ] || break
		case $what in
		restore-pipe)
			TMPDIR=$d/tmp timed "$what" sh -c 'cat "$1" |
			    "$2" --threads 2' sh "$d/img2.gck" "$GPURESTORE" \
			    >/dev/null 2>>"$d/err" || ok=FAIL
			;;
		restore-*)
			TMPDIR=$d/tmp timed "$what" "$GPURESTORE" \
			    --threads "${what#restore-}" "$d/img2.gck" \
			    >/dev/null 2>>"$d/err" || ok=FAIL
			;;
		criu-tmpfs)
			timed "$what" "$CRIU" restore -D "$tmpfs_dir/img" \
			    -d >/dev/null 2>>"$d/err" || ok=FAIL
			;;
		esac
		if [ $ok = ok ] && ! verify; then
			note "restore-file: $what did not verify"
			ok=FAIL
		fi
		stop_work
	done
	for what in ckpt-1 ckpt-2 restore-1 restore-2 restore-pipe criu-tmpfs \
	    checks; do
		[ -s "$d/$what.t" ] || continue
		read -r w u s <"$d/$what.t" || continue
		echo "restore-file - $rep $ok $what $w $(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.2f", u + s }')" >>"$RAW"
	done
	echo "restore-file - $rep $ok size $(stat -c %s "$d/img2.gck" 2>/dev/null || echo -) $((mib * 1048576))" >>"$RAW"
	[ $ok = ok ] || { broke=1; note "restore-file failed: $(tail -n 3 "$d/err")"; }
	rm -rf "$d" "$tmpfs_dir/img"
}

# rf_fig WHAT FIELD: the median of FIELD (5 wall, 6 cpu) of restore-file WHAT.
rf_fig()
{
	awk -v w="$1" -v f="$2" '$1 == "restore-file" && $4 == "ok" && $5 == w { print $f }' "$RAW" |
	    sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

# rf_report: the restore-from-file figures, ratios and the projection.
rf_report()
{
	local mib gb w1 w2 wp wc wk c1 c2 cp k1 k2 r

	grep -q '^restore-file .* ok ' "$RAW" || return 0
	set -- $(workload_spec mixed)
	mib=$2
	gb=$(awk -v m="$mib" 'BEGIN { printf "%.3f", m / 1024 }')
	w1=$(rf_fig restore-1 6); w2=$(rf_fig restore-2 6); wc=$(rf_fig criu-tmpfs 6)
	wp=$(rf_fig restore-pipe 6)
	c1=$(rf_fig restore-1 7); c2=$(rf_fig restore-2 7); cp=$(rf_fig restore-pipe 7)
	k1=$(rf_fig ckpt-1 7); k2=$(rf_fig ckpt-2 7)
	say ""
	say "== restore of the mixed $mib MiB image from a local file =="
	say "  gpurestore FILE --threads 1: ${w1}s (${c1} CPU-s), --threads 2: ${w2}s (${c2} CPU-s); criu restore -D tmpfs: ${wc}s"
	say "  cat FILE | gpurestore --threads 2 (criu restores all the memory): ${wp}s (${cp} CPU-s)"
	say "  gpuckpt --threads 1: $(rf_fig ckpt-1 6)s (${k1} CPU-s), --threads 2: $(rf_fig ckpt-2 6)s (${k2} CPU-s)"
	r=$(awk -v a="$w2" -v b="$wc" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }')
	say "$(verdict "$(cmp_le "$r" 1)")  gpurestore FILE / criu restore -D tmpfs: $r (goal: below 1)"
	wk=$(rf_fig checks 6)
	r=$(awk -v a="$wk" -v b="$wc" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }')
	say "      gpuinspect --verify (decompression and digests alone, every CPU): ${wk}s ($(rf_fig checks 7) CPU-s), $r x criu restore -D tmpfs (a floor for any restore that checks every digest, on this host)"
	r=$(awk -v a="$w2" -v b="$w1" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }')
	say "      gpurestore --threads 2 / --threads 1: $r"
	r=$(awk -v a="$w2" -v b="$wp" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }')
	say "      gpurestore FILE / cat FILE | gpurestore: $r (memory written in place / all through criu)"
	say "      CPU-seconds per GiB of memory: checkpoint $(awk -v c="$k2" -v g="$gb" 'BEGIN { if (c == "-") print "-"; else printf "%.2f", c / g }'), restore $(awk -v c="$c2" -v g="$gb" 'BEGIN { if (c == "-") print "-"; else printf "%.2f", c / g }') (criu's included)"
	say "      image $(awk '$1 == "restore-file" && $5 == "size" { print $6; exit }' "$RAW") B of $((mib * 1048576)) B of memory"
}

# --- an incremental image against a full one ---------------------------

# incremental REP PATTERN: on the mixed workload writing as PATTERN says,
# a full image A (gpuckpt -R), then, after the workload rewrote 5% of
# its memory, a full image F and an image I with --parent=A; I restores
# given A.  Appends
#   incremental PATTERN REP ok|FAIL full_bytes incr_bytes restore_s
#       rewritten_bytes
incremental()
{
	local rep=$1 pat=$2 kind mib ok=ok d=$R/inc n fb=- ib=- tr=- t0 t1
	local rb=-

	set -- $(workload_spec mixed)
	kind=$1
	mib=$2
	rm -rf "$d"
	mkdir -p "$d/tmp"
	if ! start_work "$kind" "$mib" "" "" "$pat"; then
		broke=1
		echo "incremental $pat $rep FAIL" >>"$RAW"
		return
	fi
	TMPDIR=$d/tmp "$GPUCKPT" -R -p "$WPID" -o "$d/a.gck" 2>>"$d/err" ||
	    ok=FAIL
	rewrite_work || ok=FAIL
	rb=$(sed -n 's/^rewrote .* bytes=\([0-9]*\).*/\1/p' "$WSTATUS" |
	    tail -n 1)
	[ -n "$rb" ] || rb=-
	[ $ok = ok ] && { TMPDIR=$d/tmp "$GPUCKPT" -R -p "$WPID" \
	    -o "$d/f.gck" 2>>"$d/err" || ok=FAIL; }
	[ $ok = ok ] && { TMPDIR=$d/tmp "$GPUCKPT" --parent="$d/a.gck" \
	    -p "$WPID" -o "$d/i.gck" 2>>"$d/err" || ok=FAIL; }
	wait_gone "$WPID" 60
	if [ $ok = ok ]; then
		fb=$(stat -c %s "$d/f.gck")
		ib=$(stat -c %s "$d/i.gck")
		t0=$(now)
		TMPDIR=$d/tmp "$GPURESTORE" --parent="$d/a.gck" "$d/i.gck" \
		    >/dev/null 2>>"$d/err" || ok=FAIL
		t1=$(now)
		tr=$(elapsed "$t0" "$t1")
		if [ $ok = ok ] && ! verify; then
			note "incremental: the restored workload did not verify"
			ok=FAIL
		fi
	fi
	stop_work
	[ $ok = ok ] || { broke=1; note "incremental ($pat) failed: $(tail -n 3 "$d/err")"; }
	note "incremental #$rep ($mib MiB, $pat): full $fb B, with --parent $ib B after $rb B were rewritten; its restore $tr s"
	echo "incremental $pat $rep $ok $fb $ib $tr $rb" >>"$RAW"
	rm -rf "$d"
}

# --- snapshots: the pause of gpuckpt -R, and a series -------------------

# pause_of CMD...: runs CMD while the workload runs, its output thrown
# away; prints the longest pause it saw meanwhile, in seconds (0.000
# when none went over 50 ms).  Returns CMD's status.
pause_of()
{
	local n st

	n=$(grep -c '^gap ' "$WSTATUS")
	"$@" >/dev/null
	st=$?
	sleep 0.2
	awk -v n="$n" '$1 == "gap" && ++k > n { if ($2 > m) m = $2 }
	    END { printf "%.3f", m / 1000 }' "$WSTATUS"
	return $st
}

# snapshot REP PATTERN: on the mixed workload rewriting 1% of its memory
# a second as PATTERN says, the pause of gpuckpt -R into a file and that
# of criu dump --leave-running into a tmpfs, taken in turns; then a
# series of 10 snapshots (gpuckpt --series --every=1), the first full,
# each of the others incremental over the one before.  Appends
#   snapshot PATTERN REP ok|FAIL gpuckpt_pause_s criu_pause_s full_B
#       tenth_B gpuckpt_total_s series_first_B largest_B largest_N
# where largest is the largest of the 2nd to the 10th, the Nth.
snapshot()
{
	local rep=$1 pat=$2 kind mib ok=ok d=$R/snap pg=- pc=- fb=- sb=- tb=-
	local tt=- t0 lb=- ln=-

	set -- $(workload_spec mixed)
	kind=$1
	mib=$2
	rm -rf "$d"
	mkdir -p "$d/tmp"
	if ! tmpfs_mount "$mib" || ! start_work "$kind" "$mib" "" 1 "$pat"; then
		broke=1
		echo "snapshot $pat $rep FAIL" >>"$RAW"
		return
	fi
	t0=$(now)
	pg=$(pause_of env TMPDIR="$d/tmp" timeout "$LIMIT" "$GPUCKPT" -R \
	    -p "$WPID" -o "$d/s1.gck" 2>>"$d/err") || ok=FAIL
	tt=$(elapsed "$t0" "$(now)")
	rm -rf "$tmpfs_dir/img"
	mkdir "$tmpfs_dir/img"
	pc=$(pause_of timeout "$LIMIT" "$CRIU" dump -D "$tmpfs_dir/img" \
	    -t "$WPID" --leave-running 2>>"$d/err") || ok=FAIL
	rm -rf "$tmpfs_dir/img"
	[ $ok = ok ] && fb=$(stat -c %s "$d/s1.gck")
	# the series keeps 10 (each a parent of the next), and its first
	# is full
	[ $ok = ok ] && { TMPDIR=$d/tmp timeout "$LIMIT" "$GPUCKPT" \
	    --series="$d/series" --every=1 --count=10 --keep=10 \
	    -p "$WPID" 2>>"$d/err" || ok=FAIL; }
	[ $ok = ok ] && set -- $(python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))["snapshots"]
assert len(s) == 10 and s[0]["full"] and not any(x["full"] for x in s[1:]), s
n = max(range(1, 10), key=lambda i: s[i]["size"])
print(s[0]["size"], s[-1]["size"], s[n]["size"], n + 1)' \
	    "$d/series/index.json" 2>>"$d/err") || ok=FAIL
	[ $ok = ok ] && sb=$1 tb=$2 lb=$3 ln=$4
	if [ $ok = ok ] && ! verify; then
		note "snapshot: the workload did not verify after its snapshots"
		ok=FAIL
	fi
	stop_work
	[ $ok = ok ] || { broke=1; note "snapshot ($pat) failed: $(tail -n 3 "$d/err")"; }
	note "snapshot #$rep ($mib MiB, $pat): pause gpuckpt -R $pg s (of $tt s), criu dump --leave-running to tmpfs $pc s; a full image $fb B; a series: first $sb B, tenth $tb B, largest after the first $lb B (snapshot $ln of 10)"
	echo "snapshot $pat $rep $ok $pg $pc $fb $tb $tt $sb $lb $ln" >>"$RAW"
	rm -rf "$d"
}

# --- a second hand-over to a host that kept the first -------------------

# again_send D N: gpusend --stats=json of the workload to the
# namespace's sshd, its gpurecv keeping its cache in D/cache; the JSON
# (on its standard error) in D/sN, the rest of what it said in D/err.
again_send()
{
	local st

	HOME=$R/home TMPDIR=$1/a "$GPUSEND" -P "$nsport" -i "$R/ssh/userkey" \
	    -o IdentityAgent=none -o UserKnownHostsFile="$1/known_hosts" \
	    --remote-path "TMPDIR='$1/b' '$GPURECV'" --cache "$1/cache" \
	    --stats=json $GPUSEND_ARGS -p "$WPID" root@127.0.0.1 \
	    >/dev/null 2>"$1/e$2"
	st=$?
	grep '^{' "$1/e$2" >"$1/s$2"
	grep -v '^{' "$1/e$2" >>"$1/err"
	return $st
}

# json_key FILE KEY
json_key()
{
	python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}

# cache_again REP: the mixed workload (rewriting 1% of its memory on
# SIGUSR2) moved by gpusend to the namespace's sshd, whose gpurecv keeps
# a cache; there it rewrites 1%, and is moved again, to the same host:
#   cache-again - REP ok|FAIL sent1 sent2 cached2 stopped1_ms stopped2_ms
#   down1_s down2_s
cache_again()
{
	local rep=$1 kind mib ok=ok d=$R/again n s1=- s2=- c2=- t1=- t2=-
	local g1=- g2=- nspid

	set -- $(workload_spec mixed)
	kind=$1
	mib=$2
	rm -rf "$d"
	mkdir -p "$d/a" "$d/b"
	if ! { [ -n "$nsshd_pid" ] || start_nsshd; } ||
	    ! start_work "$kind" "$mib" 1; then
		broke=1
		echo "cache-again - $rep FAIL" >>"$RAW"
		return
	fi
	echo "[127.0.0.1]:$nsport $(cat "$R/ssh/hostkey.pub")" >"$d/known_hosts"
	nspid=$WPID
	again_send "$d" 1 || ok=FAIL
	if [ $ok = ok ]; then
		wait_gone "$WPID" 60
		WPID=$(host_pid "$nspid" "$ns_id")
		g1=$(downtime) || ok=FAIL
	fi
	if [ $ok = ok ] && [ -n "$WPID" ]; then
		rewrite_work || ok=FAIL
		# the gaps of the second hand-over only
		sed -i 's/^gap \(.*\) restored=1$/gap \1 restored=first/' "$WSTATUS"
		[ $ok = ok ] && { again_send "$d" 2 || ok=FAIL; }
	else
		ok=FAIL
	fi
	if [ $ok = ok ]; then
		wait_gone "$WPID" 60
		# the tree's PIDs were its own there: a namespace of its own
		WPID=$(awk -v want="$nspid" '$1 == "NSpid:" && NF == 4 &&
		    $4 == want { split(FILENAME, f, "/"); print f[3]; exit }' \
		    /proc/[0-9]*/status 2>/dev/null)
		g2=$(downtime) || ok=FAIL
		if [ $ok = ok ] && ! verify; then
			note "cache-again: the restored workload did not verify"
			ok=FAIL
		fi
		s1=$(json_key "$d/s1" sent)
		s2=$(json_key "$d/s2" sent)
		c2=$(json_key "$d/s2" cached)
		t1=$(json_key "$d/s1" stopped_ms)
		t2=$(json_key "$d/s2" stopped_ms)
	fi
	[ -n "$WPID" ] && stop_work
	[ $ok = ok ] || { broke=1; note "cache-again failed: $(tail -n 3 "$d/err")"; }
	echo "cache-again - $rep $ok $s1 $s2 $c2 $t1 $t2 $g1 $g2" >>"$RAW"
	rm -rf "$d"
}

# again_report: the second hand-over against the first.
again_report()
{
	local l

	grep -q '^cache-again .* ok ' "$RAW" || return 0
	l=$(awk '$1 == "cache-again" && $4 == "ok" { print; exit }' "$RAW")
	set -- $l
	say ""
	say "== gpusend -p again to a host that kept the first image (1% rewritten) =="
	say "      bytes sent: first $5, second $6: $(awk -v a="$6" -v b="$5" 'BEGIN { printf "%.4f", a / b }')x; the cache held $7 B of memory"
	say "      downtime: first ${10} s, second ${11} s; stopped (gpusend --stats): $8 ms, $9 ms"
}

# in_order: the patterns of BENCH_PATTERNS, one a line, the worst first:
# pages, heap, runs.
in_order()
{
	local p
	for p in pages heap runs; do
		case " $PATTERNS " in *" $p "*) echo "$p" ;; esac
	done
}

# pattern_says PATTERN: how a workload of PATTERN writes.
pattern_says()
{
	case $1 in
	pages) echo "single 4 KiB pages picked at random" ;;
	heap) echo "malloc'ed objects of 16 to 4096 bytes picked at random" ;;
	*) echo "aligned 2 MiB runs" ;;
	esac
}

# goal PATTERN OK: the verdict of a goal of pages, or of one runs had
# before the patterns; heap has figures only, no goals.
goal()
{
	case $1 in
	heap) echo "    " ;;
	*) verdict "$2" ;;
	esac
}

# quot A B [FORMAT]: A / B, or "-" when either is missing or B is 0.
quot()
{
	awk -v a="$1" -v b="$2" -v f="${3:-%.3f}" 'BEGIN {
		if (a == "-" || b == "-" || a == "" || b == "" || b + 0 == 0)
			print "-"
		else
			printf f "\n", a / b }'
}

# live_report: gpusend --live against gpusend and the baseline over
# ssh, for each pattern and each rate of rewriting.
live_report()
{
	local p rate b g l wb wg wl ok r g1

	grep -q '^live' "$RAW" || return 0
	for p in $(in_order); do
		awk -v p="$p" '$1 ~ /^live/ && $17 == p { f = 1 }
		    END { exit !f }' "$RAW" || continue
		say ""
		say "== gpusend --live, gpusend and baseline-ssh: mixed $(size 2048) MiB rewriting some of its memory a second, in $(pattern_says "$p") (-p $p) =="
		for rate in $LIVE_RATES; do
			b=$(fig "live$rate" baseline-ssh 1 "$p")
			g=$(fig "live$rate" gpusend 1 "$p")
			l=$(fig "live$rate" gpusend-live 1 "$p")
			wb=$(fig "live$rate" baseline-ssh 2 "$p")
			wg=$(fig "live$rate" gpusend 2 "$p")
			wl=$(fig "live$rate" gpusend-live 2 "$p")
			r=$(quot "$l" "$b")
			ok=- g1=
			if [ "$rate" = 1 ] && [ "$p" != heap ]; then
				ok=$(cmp_le "$r" 0.1)
				g1=" (goal: --live at most 0.1x)"
			fi
			say "$(goal "$p" "$ok")  $p, $rate%/s: downtime --live $l s, gpusend $g s, baseline $b s: --live/baseline $r, gpusend/baseline $(quot "$g" "$b")$g1"
			say "      $p, $rate%/s: wire bytes: --live $wl, gpusend $wg, baseline $wb: $(quot "$wl" "$wb")x"
		done
	done
}

# inc_report: the incremental image against the full one, for each
# pattern.
inc_report()
{
	local p mib fb ib tr rb r g1 data

	grep -q '^incremental ' "$RAW" || return 0
	set -- $(workload_spec mixed)
	mib=$2
	say ""
	say "== an image with --parent after 5% of the pages were rewritten (pages, heap: of those that hold data; runs: of the memory): mixed $mib MiB =="
	for p in $(in_order); do
		set -- $(awk -v p="$p" '$1 == "incremental" && $2 == p &&
		    $4 == "ok" { print $5, $6, $7, $8; exit }' "$RAW")
		if [ $# -ne 4 ]; then
			grep -q "^incremental $p " "$RAW" &&
			    say "      $p: FAILED (see above)"
			continue
		fi
		fb=$1 ib=$2 tr=$3 rb=$4
		r=$(quot "$ib" "$fb" %.4f)
		g1=
		[ "$p" = heap ] || g1=" (goal: at most 0.08)"
		say "$(goal "$p" "$(cmp_le "$r" 0.08)")  $p: incremental $ib B / full $fb B: $r$g1"
		# pages and heap rewrite only what holds data: half of mixed
		data=
		[ "$p" = runs ] || data=", $(quot "$rb" $((mib * 524288))) of the half of it that holds data (the only part picked)"
		say "      $p: rewritten in $(pattern_says "$p"): $rb B, $(quot "$rb" $((mib * 1048576))) of the memory$data; the restore, given the parent: $tr s"
	done
}

# snap_report: the pause of a snapshot against criu's, and the series,
# for each pattern.
snap_report()
{
	local p pg pc r fb tb tt lb ln g1 ok

	grep -q '^snapshot ' "$RAW" || return 0
	for p in $(in_order); do
		set -- $(awk -v p="$p" '$1 == "snapshot" && $2 == p &&
		    $4 == "ok" { print $7, $8, $9, $11, $12; exit }' "$RAW")
		if [ $# -ne 5 ]; then
			grep -q "^snapshot $p " "$RAW" && {
				say ""
				say "== snapshots, $p: FAILED (see above) =="
			}
			continue
		fi
		fb=$1 tb=$2 tt=$3 lb=$4 ln=$5
		pg=$(awk -v p="$p" '$1 == "snapshot" && $2 == p && $4 == "ok" {
		    print $5 }' "$RAW" | median)
		pc=$(awk -v p="$p" '$1 == "snapshot" && $2 == p && $4 == "ok" {
		    print $6 }' "$RAW" | median)
		r=$(quot "$pg" "$pc")
		say ""
		say "== snapshots: mixed $(size 2048) MiB rewriting 1% of its memory a second, in $(pattern_says "$p") (-p $p) =="
		g1=
		[ "$p" = heap ] || g1=" (goal: at most 1.0)"
		say "$(goal "$p" "$(cmp_le "$r" 1.0)")  $p: pause of gpuckpt -R $pg s / criu dump --leave-running to tmpfs $pc s: $r$g1; gpuckpt -R took $tt s in all"
		# the series' goal is that of pages alone
		ok="    " g1=
		if [ "$p" = pages ]; then
			ok=$(verdict "$(cmp_le "$(quot "$lb" "$fb" %.4f)" 0.1)")
			g1=" (goal: each at most 0.1)"
		fi
		say "$ok  $p: a series of 10 (gpuckpt --series --every=1), each after the first incremental over the one before, against a full image (gpuckpt -R, $fb B): the largest, snapshot $ln, $lb B: $(quot "$lb" "$fb" %.4f); the 10th $tb B: $(quot "$tb" "$fb" %.4f)$g1"
	done
}

# --- the report --------------------------------------------------------

# report: the tables, from $RAW.
report()
{
	local w v mib

	say "gpuckpt benchmark, $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	say "host: $(uname -sr), $(nproc) CPUs, $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
	say "load average (1 5 15 min): $load0 at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end"
	say "criu: $("$CRIU" --version | sed -n 's/^Version: *//p'), zstd: $(zstd -V | sed 's/.*v\([0-9.]*\).*/\1/')"
	if [ "$QUICK" = 0 ]; then
		say "repeats: $REPEAT (figures are medians)"
	else
		say "repeats: $REPEAT (figures are medians); QUICK mode: workloads at 1/8 size"
	fi
	say ""
	say "downtime: the longest pause the workload saw (it reads the clock every 2 ms)"
	say "total: from the start of the checkpoint to the restored process running"
	say "wire: bytes between the two sides (gpusend: TCP payload both ways,"
	say "  ssh framing included); rss: peak RSS in MB of the"
	say "  checkpoint side / restore side (baseline: the largest of"
	say "  criu dump, tar, zstd / zstd -d, tar, criu restore; gpuckpt and"
	say "  gpurestore, gpusend and gpurecv: with the criu they run; gpurecv:"
	say "  the largest of its processes); staging: peak bytes of files"
	say "  in the image directories (baseline) or in the TMPDIRs (ours)"
	say "ratios: against baseline-pipe for *-pipe rows, baseline-ssh otherwise"

	for w in $WORKLOADS; do
		set -- $(workload_spec "$w")
		mib=$2
		say ""
		say "== $w: $1, $mib MiB =="
		awk -v w="$w" -f "$R/report.awk" "$RAW" | while IFS= read -r line; do
			say "$line"
		done
	done
}

cat >"$R/report.awk" <<'EOF'
# Input: the raw lines of run_one.  Prints the table of workload w (of
# its runs written as pattern p says, when p is given), or with figs=1
# the medians the targets need: variant downtime wire staging rss total.
function median(s,    a, n, i, j, t) {
	n = split(s, a, " ")
	if (n == 0)
		return "-"
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) {
			t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
		}
	if (n % 2)
		return a[(n + 1) / 2]
	return (a[n / 2] + a[n / 2 + 1]) / 2
}
function add(k, v) {
	if (v != "-")
		val[k] = val[k] " " v
}
function mb(x) {
	return x == "-" ? "-" : sprintf("%.1f", x / 1048576)
}
function kmb(x) {
	return x == "-" ? "-" : sprintf("%.0f", x / 1024)
}
function ratio(a, b) {
	return (a == "-" || b == "-" || b + 0 == 0) ? "-" : sprintf("%.2f", a / b)
}
$1 == w && (p == "" || $17 == p) {
	v = $2
	if (!(v in seen)) {
		seen[v] = 1
		order[++nv] = v
	}
	if ($4 != "ok") {
		fails[v]++
		next
	}
	runs[v]++
	for (i = 5; i <= 16; i++)
		add(v SUBSEP i, $i)
}
END {
	for (k = 1; k <= nv; k++) {
		v = order[k]
		for (i = 5; i <= 16; i++)
			m[v, i] = median(val[v SUBSEP i])
	}
	if (figs) {
		# only the figures the targets need, for the shell
		for (k = 1; k <= nv; k++) {
			v = order[k]
			print v, m[v, 5], m[v, 7], m[v, 10], m[v, 8] "/" m[v, 9], m[v, 6]
		}
		exit
	}
	printf "%-14s %4s %9s %8s %9s %14s %10s %7s %7s %7s\n", "variant",
	    "runs", "downtime", "total", "wire MB", "rss MB c/r", "staging",
	    "dt x", "total x", "wire x"
	for (k = 1; k <= nv; k++) {
		v = order[k]
		b = v ~ /pipe$/ ? "baseline-pipe" : "baseline-ssh"
		if (!(b in seen) || v == b) {
			rd = "-"; rt = "-"; rw = "-"
		} else {
			rd = ratio(m[v, 5], m[b, 5])
			rt = ratio(m[v, 6], m[b, 6])
			rw = ratio(m[v, 7], m[b, 7])
		}
		printf "%-14s %4s %8ss %7ss %9s %14s %10s %7s %7s %7s%s\n", v,
		    runs[v] + 0, m[v, 5], m[v, 6], mb(m[v, 7]),
		    kmb(m[v, 8]) "/" kmb(m[v, 9]), mb(m[v, 10]), rd, rt, rw,
		    fails[v] ? "  (" fails[v] " FAILED)" : ""
	}
	for (k = 1; k <= nv; k++) {
		v = order[k]
		if (v !~ /^baseline/ || m[v, 11] == "")
			continue
		printf "  %s rss MB: criu dump %s, tar %s, zstd %s | zstd -d %s, tar %s, criu restore %s\n",
		    v, kmb(m[v, 11]), kmb(m[v, 12]), kmb(m[v, 13]),
		    kmb(m[v, 14]), kmb(m[v, 15]), kmb(m[v, 16])
	}
}
EOF

# fig WORKLOAD VARIANT FIELD [PATTERN]: a median from the table of
# WORKLOAD (FIELD: 1 downtime, 2 wire, 3 staging, 4 rss c/r, 5 total),
# of its runs written as PATTERN says when given, or "-".
fig()
{
	awk -v w="$1" -v p="${4:-}" -v figs=1 -f "$R/report.awk" "$RAW" |
	    awk -v v="$2" -v f="$3" '$1 == v { print $(f + 1); found = 1 }
		END { if (!found) print "-" }'
}

# verdict OK-EXPRESSION-RESULT: PASS, MISS or "n/a".
verdict()
{
	case $1 in
	1) echo PASS ;;
	0) echo MISS ;;
	*) echo "n/a" ;;
	esac
}

# median: the median of the numbers on standard input, one a line, or -
# when there are none.
median()
{
	sort -g | awk '{ a[NR] = $1 }
	    END { if (NR == 0) print "-"; else if (NR % 2) print a[(NR + 1) / 2];
		else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

# cmp_le A B: 1 when A <= B, 0 when not, - when either is missing.
cmp_le()
{
	if [ "$1" = - ] || [ "$2" = - ] || [ -z "$1" ] || [ -z "$2" ]; then
		echo -
	else
		awk -v a="$1" -v b="$2" 'BEGIN { print (a + 0 <= b + 0) ? 1 : 0 }'
	fi
}

targets()
{
	local a b r ok w v mib all img

	say ""
	say "== targets =="

	# 1. downtime over ssh on the mixed workload.
	a=$(fig mixed gpuckpt-ssh 1)
	b=$(fig mixed baseline-ssh 1)
	r=$(awk -v a="$a" -v b="$b" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.3f", a / b }')
	say "$(verdict "$(cmp_le "$r" 0.25)")  downtime gpuckpt-ssh / baseline-ssh on mixed: $r (target <= 0.25)"

	# 2. bytes on the wire, every workload, pipe and ssh.
	all=
	for w in $WORKLOADS; do
		for v in pipe ssh; do
			a=$(fig "$w" "gpuckpt-$v" 2)
			b=$(fig "$w" "baseline-$v" 2)
			ok=$(cmp_le "$a" "$b")
			[ "$ok" = - ] && continue
			all="$all$ok"
			say "      wire $w gpuckpt-$v $a B, baseline-$v $b B"
		done
	done
	case $all in
	'') ok=- ;;
	*0*) ok=0 ;;
	*) ok=1 ;;
	esac
	say "$(verdict "$ok")  wire bytes <= baseline on every workload"

	# 3. staging: nothing on disk for ours.
	all=
	for w in $WORKLOADS; do
		for v in gpuckpt-pipe gpuckpt-ssh gpusend gpusend-par; do
			a=$(fig "$w" "$v" 3)
			[ "$a" = - ] && continue
			all="$all$(cmp_le "$a" 0)"
			say "      staging $w $v: $a B"
		done
	done
	case $all in
	'') ok=- ;;
	*0*) ok=0 ;;
	*) ok=1 ;;
	esac
	say "$(verdict "$ok")  staging bytes 0 for gpuckpt and gpurestore"

	# 4. image of the 90%-zero workload against its memory.
	set -- $(workload_spec zero90)
	mib=$2
	img=$(fig zero90 gpuckpt-pipe 2)
	[ "$img" = - ] && img=$(fig zero90 gpuckpt-ssh 2)
	r=$(awk -v a="$img" -v m="$mib" 'BEGIN { if (a == "-") print "-"; else printf "%.4f", a / (m * 1048576) }')
	say "$(verdict "$(cmp_le "$r" 0.11)")  zero90 image / memory: $r ($img B of $mib MiB; target <= 0.11)"

	# 5. gpuckpt --compress=none > /dev/null against criu dump to tmpfs.
	a=$(awk '$1 == "none-vs-dump" && $4 == "ok" { print $5 }' "$RAW" | median)
	b=$(awk '$1 == "none-vs-dump" && $4 == "ok" { print $6 }' "$RAW" | median)
	r=$(awk -v a="$a" -v b="$b" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.3f", a / b }')
	set -- $(workload_spec mixed)
	say "$(verdict "$(cmp_le "$r" 1.2)")  gpuckpt --compress=none >/dev/null $a s / criu dump to tmpfs $b s on mixed $2 MiB: $r (target <= 1.2)"

	# Peak RSS on a small and a large workload: should stay flat.
	if grep -q '^rss-' "$RAW"; then
		a=$(fig rss-small gpuckpt-pipe 4)
		b=$(fig rss-large gpuckpt-pipe 4)
		say "      peak RSS kB gpuckpt/gpurestore: $(workload_spec rss-small | awk '{ print $2 }') MiB $a," \
		    "$(workload_spec rss-large | awk '{ print $2 }') MiB $b (should stay flat)"
	fi

	# gpusend against what a user would type: gpuckpt | ssh gpurestore,
	# and the baseline over ssh.
	if gpusend_works; then
		for w in $WORKLOADS; do
			for v in gpusend gpusend-par; do
				case " $VARIANTS " in *" $v "*) ;; *) continue ;; esac
				say "      $v on $w: $(vs "$w" "$v" gpuckpt-ssh)"
				say "      $v on $w: $(vs "$w" "$v" baseline-ssh)"
			done
		done
	else
		say "      gpusend: skipped (it has no -p yet)"
	fi
}

# vs WORKLOAD A B: the downtime and total of A against those of B.
vs()
{
	local da db ta tb
	da=$(fig "$1" "$2" 1)
	db=$(fig "$1" "$3" 1)
	ta=$(fig "$1" "$2" 5)
	tb=$(fig "$1" "$3" 5)
	awk -v b="$3" -v da="$da" -v db="$db" -v ta="$ta" -v tb="$tb" '
	function r(x, y) {
		return (x == "-" || y == "-" || y + 0 == 0) ? "-" : sprintf("%.2f", x / y)
	}
	BEGIN {
		printf "downtime %ss / %s %ss = %s, total %ss / %ss = %s\n",
		    da, b, db, r(da, db), ta, tb, r(ta, tb)
	}'
}

# --- main ------------------------------------------------------------

case " $VARIANTS " in
*" gpusend"*)
	if ! gpusend_works; then
		note "gpusend has no -p yet: skipped"
		VARIANTS=$(echo " $VARIANTS " |
		    sed -e 's/ gpusend / /' -e 's/ gpusend-par / /')
	fi
esac
NEED=" $VARIANTS "
case " $EXTRAS " in
*" live "*)
	gpusend_works || die "the live extra needs gpusend -p"
	NEED="$NEED baseline-ssh gpusend "
esac
case $NEED in
*-ssh*)
	start_sshd || die "cannot start sshd on 127.0.0.1"
	remote true || die "ssh to our sshd on 127.0.0.1:$port fails"
	note "sshd on 127.0.0.1:$port"
esac
case $NEED in
*" gpusend"*)
	[ -x "$GPURECV" ] || die "$GPURECV not found"
	start_nsshd || die "cannot start sshd in a PID namespace on 127.0.0.1"
	remote_at "$nsport" true ||
	    die "ssh to our sshd on 127.0.0.1:$nsport fails"
	note "sshd in PID namespace $ns_id on 127.0.0.1:$nsport"
esac

load0=$(cut -d' ' -f1-3 /proc/loadavg)
start=$(now)
for w in $WORKLOADS; do
	for rep in $(seq 1 "$REPEAT"); do
		for v in $VARIANTS; do
			run_one "$w" "$v" "$rep"
		done
	done
done
for x in $EXTRAS; do
	case $x in
	none-vs-dump)
		for rep in $(seq 1 "$REPEAT"); do
			none_vs_dump "$rep"
		done
		;;
	rss-flat)
		run_one rss-small gpuckpt-pipe 1
		run_one rss-large gpuckpt-pipe 1
		;;
	restore-file)
		for rep in $(seq 1 "$REPEAT"); do
			restore_file "$rep"
		done
		;;
	incremental)
		for p in $PATTERNS; do
			incremental 1 "$p"
		done
		;;
	cache-again)
		cache_again 1
		;;
	snapshot)
		for p in $PATTERNS; do
			for rep in $(seq 1 "$REPEAT"); do
				snapshot "$rep" "$p"
			done
		done
		;;
	storage)
		for rep in $(seq 1 "$REPEAT"); do
			for v in staging custom custom-stream \
			    custom-local; do
				storage_one "$v" "$rep"
			done
		done
		;;
	live)
		for p in $PATTERNS; do
			for rate in $LIVE_RATES; do
				for rep in $(seq 1 "$REPEAT"); do
					for v in baseline-ssh gpusend \
					    gpusend-live; do
						run_one "live$rate" "$v" \
						    "$rep" "$p"
					done
				done
			done
		done
		;;
	esac
done

report
targets
rf_report
storage_report
inc_report
again_report
live_report
snap_report
say ""
say "raw runs (workload variant rep status downtime_s total_s wire_B rss_ckpt_kB rss_restore_kB staging_B; baseline: rss kB of criu dump tar zstd zstd-d tar criu-restore; last, the write pattern; of incremental and snapshot, the pattern is the second field):"
while IFS= read -r line; do
	say "  $line"
done <"$RAW"
say ""
say "bench took $(elapsed "$start" "$(now)") s; results in $RESULTS"
[ $broke = 0 ] || note "some runs FAILED: see above"
exit $broke
