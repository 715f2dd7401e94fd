#!/bin/bash
#
# run: what this host allows of gpuckpt's GPU path, every GPU test it
# allows, and the figures (the ./run of a bundle made by `make
# gpu-bundle'; HACKING, "A GPU host").
#
# usage: run [-fkn] [-a api] [-r release] [-o report] [-s "MiB ..."]
#            [-t "test ..."] [-w dir]
#   -o FILE   the report, also printed as it goes (default gpu-report.txt)
#   -f        use the stand-in driver of the bundle (fake/), as the tests
#             of a build tree do, on a host without a GPU
#   -a API    with -f: the stand-in's driver API version (default 13000;
#             13040, CUDA 13.4, has custom storage)
#   -r REL    with -f: the stand-in's driver release (default 580.65.06,
#             595.45.04 with -a; from 610 it checkpoints CUDA IPC in a job)
#   -n        say what the host allows, and run no test
#   -t LIST   the tests to run, of: health t-gpu steps storage suspend
#             roundtrip tree job ipc torch (default all)
#   -s LIST   the device memory of the figures, in MiB
#             (default "1024 4096 16384"; with -f "64 256")
#   -w DIR    where the images go (default a new directory in $TMPDIR
#             or /var/tmp); removed at the end unless -k
#   -k        keep it
#
# Run as root.  Each test prints one line: pass, fail or skip, its name,
# and why where it did not pass.  Exits 0 when none failed, 1 when one
# did, 2 on a usage error.
set -u

B=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
# Under the bundle's subreaper: restored trees are reparented to it, not
# to a PID 1 that may never reap them.
if [ -z "${GCK_RUN_REAPER:-}" ]; then
	GCK_RUN_REAPER=1 exec "$B/work/reaper" "$0" "$@"
fi
report=gpu-report.txt fake='' sizes='' work='' keep='' tests='' probe=''
fakeapi=13000 fakerel=
ALL="health t-gpu steps storage suspend roundtrip tree job ipc torch"
usage() {
	echo "usage: run [-fkn] [-a api] [-r release] [-o report] [-s \"MiB ...\"] [-t \"test ...\"] [-w dir]" >&2
	exit 2
}
while getopts a:fkno:r:s:t:w: o; do
	case $o in
	a) case $OPTARG in ''|*[!0-9]*) usage ;; esac; fakeapi=$OPTARG ;;
	r) case $OPTARG in ''|*[!0-9.]*) usage ;; esac; fakerel=$OPTARG ;;
	f) fake=1 ;;
	k) keep=1 ;;
	n) probe=1 ;;
	o) report=$OPTARG ;;
	s) sizes=$OPTARG ;;
	t) tests=$OPTARG ;;
	w) work=$OPTARG ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
[ $# -eq 0 ] || usage
for t in $tests; do
	case " $ALL " in *" $t "*) ;; *) echo "run: no test '$t' (tests: $ALL)" >&2; exit 2 ;; esac
done
: "${tests:=$ALL}"
case $sizes in *[!0-9\ ]*) echo "run: sizes are MiB: '$sizes'" >&2; exit 2 ;; esac
if [ -z "$sizes" ]; then
	if [ -n "$fake" ]; then sizes="64 256"; else sizes="1024 4096 16384"; fi
fi

: >"$report" || exit 2
report=$(readlink -f "$report")
if [ -z "$work" ]; then
	work=$(mktemp -d "${TMPDIR:-/var/tmp}/gpuckpt-run.XXXXXX") || exit 2
else
	mkdir -p "$work" || exit 2
	work=$(cd "$work" && pwd)
fi
started='' npass=0 nfail=0 nskip=0 figures='' begun=$(date +%s)
cleanup() {
	for p in $started; do kill -9 "$p" 2>/dev/null; done
	[ -n "$keep" ] || rm -rf "$work"
}
trap cleanup EXIT

say() { printf '%s\n' "$*" | tee -a "$report"; }
result() {
	local r=$1 name=$2
	shift 2
	case $r in
	pass) npass=$((npass + 1)); say "pass  $name" ;;
	fail) nfail=$((nfail + 1)); say "fail  $name: $*" ;;
	skip) nskip=$((nskip + 1)); say "skip  $name: $*" ;;
	esac
}
figure() { figures="$figures$*"$'\n'; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }'; }
gbs() { awk -v m="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.2f", m * 1048576 / 1e9 / s; else print "-" }'; }

BIN=$B/bin
export GCK_CRIU=$B/sbin/criu
export PATH=$BIN:$B/sbin:$PATH
FAKECTL=$B/work/fakectl
WORKLD=
if [ -n "$fake" ]; then
	export FAKECUDA_DIR=$work/fakecuda FAKECUDA_CALL_TIMEOUT_MS=60000
	export GPUCKPT_LIBCUDA=$B/fake/libcuda.so.1
	export GPUCKPT_LIBNVML=$B/fake/libnvidia-ml.so.1
	mkdir -p "$FAKECUDA_DIR"
	if [ "$fakeapi" != 13000 ] || [ -n "$fakerel" ]; then
		[ "$fakeapi" = 13000 ] || : "${fakerel:=595.45.04}"
		echo "$fakeapi ${fakerel:-580.65.06}" >"$FAKECUDA_DIR/driver"
	fi
	echo "GPU-6a0f1c2e-0d5b-4c1e-9a7e-3b2f5d8c9e01 9.0 150000000000 0000:01:00.0 stand-in GPU" \
	    >"$FAKECUDA_DIR/gpus"
	WORKLD=$B/fake	# for the workloads only, which load libcuda.so.1
fi

# --- what the host allows ---
say "gpuckpt GPU validation: $(head -n 1 "$B/VERSION")"
say "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
say "host: $(uname -srm), $(nproc) CPUs, $(awk '/^MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)"
[ -n "$fake" ] && say "driver: the stand-in of the tests (-f)"
release=
if [ -z "$fake" ] && command -v nvidia-smi >/dev/null; then
	nvidia-smi --query-gpu=index,name,uuid,memory.total,driver_version \
	    --format=csv,noheader >"$work/smi" 2>&1
	release=$(awk -F', ' 'NR == 1 { print $5 }' "$work/smi")
	say "driver: $release (nvidia-smi); GPUs:"
	sed 's/^/  /' "$work/smi" | tee -a "$report"
fi
if "$FAKECTL" nvml >"$work/nvml" 2>&1; then
	[ -n "$release" ] || release=$(sed -n '1s/^driver //p' "$work/nvml")
	if [ -n "$fake" ] || ! command -v nvidia-smi >/dev/null; then
		say "driver: $release (NVML); GPUs:"
		sed -n '2,$s/^/  /p' "$work/nvml" | tee -a "$report"
	fi
else
	say "NVML: $(tail -n 1 "$work/nvml")"
fi
api=0 ckapi=no
if "$FAKECTL" driver >"$work/driver" 2>&1; then
	api=$(sed -n 's/^api=\([0-9]*\) .*/\1/p' "$work/driver")
	ckapi=$(sed -n 's/.* checkpoint=\([a-z]*\).*/\1/p' "$work/driver")
	say "CUDA driver API: $api"
else
	say "CUDA driver: $(tail -n 1 "$work/driver")"
fi
major=${release%%.*}
case $major in ''|*[!0-9]*) major=0 ;; esac
yn() { if [ "$1" -ge "$2" ]; then echo yes; else echo no; fi; }
say "checkpoint API: $ckapi; remap (r580): $(yn "$major" 580); job file (r590): $(yn "$major" 590); custom storage (API 13040): $(yn "$api" 13040)"
if "$GCK_CRIU" check >"$work/criu.check" 2>&1; then
	criu_ok=1
	say "criu: works here ($("$GCK_CRIU" --version | sed -n 's/^Version: //p'))"
else
	criu_ok=
	say "criu: cannot work here: $(grep -v '^$' "$work/criu.check" | tail -n 1)"
fi

# Every library a file of the bundle needs is in it, but glibc's and the
# driver's.
missing=
nelf=0
for f in "$B"/bin/* "$B"/libexec/* "$B"/sbin/* "$B"/work/* "$B"/lib/* \
    "$B"/fake/*; do
	head -c 4 "$f" 2>/dev/null | grep -q 'ELF' || continue
	nelf=$((nelf + 1))
	while read -r name path; do
		case $name in
		linux-vdso.so*|ld-linux*|libc.so.*|libm.so.*|libpthread.so.*|\
		libdl.so.*|librt.so.*|libresolv.so.*|libutil.so.*|libmvec.so.*|\
		libcuda.so*|libnvidia-*) continue ;;
		esac
		case $path in "$B"/*) continue ;; esac
		missing="$missing ${f#"$B"/}:$name($path)"
	done < <(ldd "$f" 2>/dev/null |
	    awk '$2 == "=>" { print $1, ($3 == "not" ? "missing" : $3) }')
done
if [ -z "$missing" ]; then
	result pass "bundle: $nelf programs and libraries, every library they need found in it"
else
	result fail "bundle" "libraries found outside it or not at all:$missing"
fi
[ "$ckapi" = yes ] || say "(no checkpoint API: the tests of the driver's steps skip)"
say ""

# --- helpers ---
# start NAME ARGS...: cudawork ARGS in a session of its own, its status
# file $work/NAME.status; sets WPID, WST.  With LAUNCH=1, under a job
# file of its own (gpuckpt --launch).
start() {
	WST=$work/$1.status
	shift
	rm -f "$WST"
	LD_LIBRARY_PATH=$WORKLD setsid ${LAUNCH:+gpuckpt --launch} \
	    "$B/work/cudawork" -f "$WST" "$@" </dev/null >/dev/null 2>"$WST.err" &
	WPID=$!
	disown $WPID
	started="$started $WPID"
	local i=0
	while ! grep -q '^ready ' "$WST" 2>/dev/null; do
		i=$((i + 1))
		if ! kill -0 "$WPID" 2>/dev/null || [ $i -gt 1200 ]; then
			WHY="cudawork did not start: $(cat "$WST" "$WST.err" 2>/dev/null | tail -n 2 | tr '\n' ' ')"
			return 1
		fi
		sleep 0.1
	done
}
# check PID: its next verify line says ok (within 120 s); sets WHY.
check() {
	local n i=0
	n=$(grep -c '^verify ' "$WST" 2>/dev/null)
	kill -USR1 "$1" 2>/dev/null || { WHY="process $1 is gone"; return 1; }
	while [ "$(grep -c '^verify ' "$WST" 2>/dev/null)" -le "$n" ]; do
		i=$((i + 1))
		[ $i -le 1200 ] || { WHY="no answer to SIGUSR1 from $1"; return 1; }
		sleep 0.1
	done
	grep '^verify ' "$WST" | tail -n 1 | grep -q '^verify ok' && return 0
	WHY=$(grep '^verify ' "$WST" | tail -n 1)
	return 1
}
stop() { kill -9 "$1" 2>/dev/null; local i=0; while [ -d /proc/$1 ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done; }
# timed CMD...: runs it, its output in $work/out; sets T (seconds).
timed() { local t0; t0=$(now); "$@" >"$work/out" 2>&1; local st=$?; T=$(since "$t0"); return $st; }

# --- the tests ---

# t-gpu.sh, the test script of a build tree, on the bundle's programs.
tgpu() {
	local d=$work/tgpu line n=0
	if [ ! -x "$B/work/gpuwork" ]; then
		result skip "t-gpu.sh" "no gpuwork in the bundle (no nvcc where it was made)"
		return
	fi
	if [ -z "$criu_ok" ]; then result skip "t-gpu.sh" "criu cannot work here"; return; fi
	mkdir -p "$d/bin/ckpt" "$d/bin/restore" "$d/bin/inspect" "$d/bin/send" \
	    "$d/bin/recv" "$d/tests/gpu"
	for p in ckpt/gpuckpt restore/gpurestore inspect/gpuinspect \
	    send/gpusend recv/gpurecv; do
		ln -s "$BIN/${p#*/}" "$d/bin/$p"
	done
	ln -s "$B/work/gpuwork" "$d/tests/gpu/gpuwork"
	ln -s "$B/work/reaper" "$d/tests/reaper"
	GCK_BINDIR=$d/bin GCK_TESTDIR=$d/tests GCK_SRCDIR=$B/tests \
	    timeout 600 "$B/work/reaper" sh "$B/tests/gpu/t-gpu.sh" \
	    >"$d/tap" 2>"$d/err"
	while IFS= read -r line; do
		case $line in
		"ok "*)	n=$((n + 1)); result pass "t-gpu.sh: ${line#ok * - }" ;;
		"not ok "*) n=$((n + 1)); result fail "t-gpu.sh: ${line#not ok * - }" "see the log" ;;
		"1..0 # SKIP"*) n=$((n + 1)); result skip "t-gpu.sh" "${line#1..0 # SKIP }" ;;
		esac
	done <"$d/tap"
	if [ $n -eq 0 ]; then
		result fail "t-gpu.sh" "no result: $(tail -n 2 "$d/err" | tr '\n' ' ')"
	fi
	grep -q '^not ok' "$d/tap" && { echo "--- t-gpu.sh"; cat "$d/tap" "$d/err"; } >>"$report"
}

# The driver's own steps on MiB of device memory: lock, checkpoint,
# restore, unlock, then the memory checked.  No criu.
steps() {
	local m=$1 name="driver steps, $1 MiB" tl tc tr tu
	if [ "$ckapi" != yes ]; then
		result skip "$name" "the driver has no checkpoint API"; return
	fi
	start steps$m -m "$m" || { result fail "$name" "$WHY"; return; }
	if "$FAKECTL" -t lock $WPID 60000 >"$work/o1" 2>&1 &&
	    "$FAKECTL" -t checkpoint $WPID >"$work/o2" 2>&1 &&
	    [ "$("$FAKECTL" state $WPID)" = CHECKPOINTED ] &&
	    "$FAKECTL" -t restore $WPID >"$work/o3" 2>&1 &&
	    "$FAKECTL" -t unlock $WPID >"$work/o4" 2>&1 &&
	    check $WPID; then
		tl=$(sed -n 's/^time //p' "$work/o1")
		tc=$(sed -n 's/^time //p' "$work/o2")
		tr=$(sed -n 's/^time //p' "$work/o3")
		tu=$(sed -n 's/^time //p' "$work/o4")
		result pass "$name: lock, checkpoint, restore, unlock; memory checked"
		figure "$(printf '%-30s lock %.3f s, checkpoint %.3f s (%s GB/s), restore %.3f s (%s GB/s), unlock %.3f s' \
		    "driver steps, $m MiB:" "$tl" "$tc" "$(gbs "$m" "$tc")" "$tr" "$(gbs "$m" "$tr")" "$tu")"
	else
		result fail "$name" "$(cat "$work"/o[1-4] 2>/dev/null | grep -v '^time' | tail -n 1) ${WHY:-}"
	fi
	stop $WPID
}

# Custom storage (driver API 13040, CUDA 13.4) on MiB of device memory:
# the driver's custom checkpoint and restore through fakectl, timed; a
# custom checkpoint abandoned by an unlock from another process, which
# the rollback of gpuckpt takes to leave the process running with its
# memory; and gpuckpt | gpurestore through it.
storage() {
	local m=$1 name="custom storage, $1 MiB" tc tr i
	if [ "$ckapi" != yes ]; then
		result skip "$name" "the driver has no checkpoint API"; return
	fi
	if [ "$api" -lt 13040 ]; then
		result skip "$name" "the driver has no custom storage (its API is $api; CUDA 13.4, 13040, is needed)"; return
	fi
	start stor$m -m "$m" || { result fail "$name" "$WHY"; return; }
	if "$FAKECTL" lock $WPID 60000 >"$work/o1" 2>&1 &&
	    "$FAKECTL" -t checkpoint-storage $WPID "$work/stor" >"$work/o2" 2>&1 &&
	    [ "$("$FAKECTL" state $WPID)" = CHECKPOINTED ] &&
	    "$FAKECTL" -t restore-storage $WPID "$work/stor" >"$work/o3" 2>&1 &&
	    "$FAKECTL" unlock $WPID >"$work/o4" 2>&1 &&
	    check $WPID; then
		tc=$(sed -n 's/^time //p' "$work/o2")
		tr=$(sed -n 's/^time //p' "$work/o3")
		result pass "$name: the driver's custom checkpoint and restore; memory checked"
		figure "$(printf '%-30s checkpoint %.3f s (%s GB/s), restore %.3f s (%s GB/s), copies through one pinned buffer' \
		    "custom storage, $m MiB:" "$tc" "$(gbs "$m" "$tc")" "$tr" "$(gbs "$m" "$tr")")"
	else
		result fail "$name" "$(cat "$work"/o[1-4] 2>/dev/null | grep -v '^time' | tail -n 1) ${WHY:-}"
		stop $WPID
		return
	fi
	rm -f "$work"/stor.*
	# abandoned: copied, then unlocked before the complete call
	name="custom storage, $m MiB, abandoned by an unlock"
	if "$FAKECTL" lock $WPID 60000 >"$work/o1" 2>&1; then
		"$FAKECTL" -w checkpoint-storage $WPID "$work/stor" >"$work/o2" 2>&1 &
		i=0
		while [ ! -s "$work/o2" ] && [ $i -lt 600 ]; do i=$((i + 1)); sleep 0.1; done
		if "$FAKECTL" unlock $WPID >"$work/o4" 2>&1 &&
		    [ "$("$FAKECTL" state $WPID)" = RUNNING ] && check $WPID; then
			result pass "$name: the process runs on with its memory"
		else
			result fail "$name" "$(tail -n 1 "$work/o4") state $("$FAKECTL" state $WPID 2>&1) ${WHY:-} (gpuckpt's rollback of a failed copy relies on this)"
		fi
		touch "$work/stor.go"
		wait
	else
		result fail "$name" "$(tail -n 1 "$work/o1")"
	fi
	rm -f "$work"/stor.*
	name="gpuckpt | gpurestore through custom storage, $m MiB"
	if [ -z "$criu_ok" ]; then result skip "$name" "criu cannot work here"; stop $WPID; return; fi
	local t0 out
	t0=$(now)
	(cd "$work" && gpuckpt -v -p $WPID 2>"$work/ckpt.err" |
	    gpurestore -v >"$work/restore.out" 2>"$work/restore.err")
	T=$(since "$t0")
	out=$(cat "$work/restore.out")
	# (its source on this host, the image is read whole first, then
	# given to the GPU from page-locked buffers)
	if [ "$out" = "$WPID" ] && grep -q "device memory of .* through custom storage" "$work/ckpt.err" &&
	    grep -q "device memory given to the GPUs from the extracted image: [1-9][0-9]* bytes ([1-9][0-9]* from page-locked buffers)" "$work/restore.err" &&
	    check $WPID; then
		result pass "$name: memory checked on the GPU after"
		figure "$(printf '%-30s %.3f s (%s GB/s of device memory)' \
		    "round trip, custom, $m MiB:" "$T" "$(gbs "$m" "$T")")"
	else
		result fail "$name" "$(cat "$work/ckpt.err" "$work/restore.err" | tail -n 2 | tr '\n' ' ') ${WHY:-}"
	fi
	stop $WPID
}

# gpuckpt --suspend and gpurestore --resume of MiB.  No criu.
suspres() {
	local m=$1 name="--suspend/--resume, $1 MiB" ts
	if [ "$ckapi" != yes ]; then
		result skip "$name" "the driver has no checkpoint API"; return
	fi
	start susp$m -m "$m" || { result fail "$name" "$WHY"; return; }
	if timed gpuckpt --suspend -p $WPID && ts=$T &&
	    [ "$("$FAKECTL" state $WPID)" = CHECKPOINTED ] &&
	    timed gpurestore --resume -p $WPID && check $WPID; then
		result pass "$name: memory checked after"
		figure "$(printf '%-30s suspend %.3f s (%s GB/s), resume %.3f s (%s GB/s)' \
		    "--suspend/--resume, $m MiB:" "$ts" "$(gbs "$m" "$ts")" "$T" "$(gbs "$m" "$T")")"
	else
		result fail "$name" "$(tail -n 1 "$work/out") ${WHY:-}"
	fi
	stop $WPID
}

# gpuckpt -p PID | gpurestore of a tree of NPROC processes of MiB each.
roundtrip() {
	local m=$1 np=$2 name out
	name="gpuckpt | gpurestore, $np process$([ "$np" -gt 1 ] && echo es) of $m MiB"
	if [ -z "$criu_ok" ]; then result skip "$name" "criu cannot work here"; return; fi
	if [ "$ckapi" != yes ]; then
		result skip "$name" "the driver has no checkpoint API"; return
	fi
	start rt$np.$m -m "$m" -n "$np" || { result fail "$name" "$WHY"; return; }
	check $WPID || { result fail "$name" "before: $WHY"; stop $WPID; return; }
	local t0
	t0=$(now)
	(cd "$work" && gpuckpt -p $WPID 2>"$work/ckpt.err" |
	    gpurestore >"$work/restore.out" 2>"$work/restore.err")
	T=$(since "$t0")
	out=$(cat "$work/restore.out")
	if [ "$out" = "$WPID" ] && check $WPID; then
		result pass "$name: memory checked on the GPU after"
		figure "$(printf '%-30s %.3f s (%s GB/s of device memory)' \
		    "round trip, $np x $m MiB:" "$T" "$(gbs $((m * np)) "$T")")"
	else
		result fail "$name" "$(cat "$work/ckpt.err" "$work/restore.err" | tail -n 2 | tr '\n' ' ') ${WHY:-}"
	fi
	stop $WPID
}

# A job of two processes under a job file of its own (gpuckpt --launch,
# driver r590): gpuckpt -p PID | gpurestore, the driver told of the job
# and given its processes one at a time.
# gate NAME MAJOR WHAT: whether criu works, the driver has the checkpoint
# API and is r MAJOR or newer; else NAME is skipped, for the driver with
# WHAT, and it returns 1.
gate() {
	if [ -z "$criu_ok" ]; then result skip "$1" "criu cannot work here"; return 1; fi
	if [ "$ckapi" != yes ]; then
		result skip "$1" "the driver has no checkpoint API"; return 1
	fi
	if [ "$major" -lt "$2" ]; then
		result skip "$1" "the driver (${release:-release unknown}) $3: r$2 is needed"; return 1
	fi
}
job() {
	local name="gpuckpt --launch: a job of 2 processes of 256 MiB, gpuckpt | gpurestore" out
	gate "$name" 590 "has no job files" || return
	LAUNCH=1 start job -m 256 -n 2 || { result fail "$name" "$WHY"; return; }
	if ! tr '\0' '\n' </proc/$WPID/environ |
	    grep -q "^CUDA_CHECKPOINT_JOB_FILE=/proc/$WPID/fd/"; then
		result fail "$name" "cudawork is not under a job file"; stop $WPID; return
	fi
	check $WPID || { result fail "$name" "before: $WHY"; stop $WPID; return; }
	(cd "$work" && gpuckpt -v -p $WPID 2>"$work/ckpt.err" |
	    gpurestore >"$work/restore.out" 2>"$work/restore.err")
	out=$(cat "$work/restore.out")
	if ! grep -q ": a job: its file is descriptor [0-9]* of process $WPID; its processes one at a time$" "$work/ckpt.err"; then
		result fail "$name" "gpuckpt did not take it as a job: $(tail -n 1 "$work/ckpt.err")"
	elif [ "$out" = "$WPID" ] && check $WPID; then
		result pass "$name: taken as one job, memory checked on the GPU after"
	else
		result fail "$name" "$(cat "$work/ckpt.err" "$work/restore.err" | tail -n 2 | tr '\n' ' ') ${WHY:-}"
	fi
	stop $WPID
}

# CUDA IPC (r610): cudawork -i, a root and a child sharing a page of
# device memory both ways.  Outside a job gpuckpt must refuse it and
# leave it running; in a job (--launch) it must go through gpuckpt |
# gpurestore and be shared still.  shared: the last check says so.
shared() {
	grep '^verify ' "$WST" | tail -n 1 | grep -q ' ipc=1$' && return 0
	WHY="not shared: $(grep '^verify ' "$WST" | tail -n 1)"
	return 1
}
ipc() {
	local name="CUDA IPC, 2 processes of 64 MiB sharing device memory" out
	gate "$name" 610 "checkpoints no CUDA IPC" || return
	start ipc1 -m 64 -n 2 -i || { result fail "$name, not a job" "$WHY"; return; }
	if ! check $WPID || ! shared; then
		result fail "$name, not a job" "before: $WHY"; stop $WPID; return
	fi
	if (cd "$work" && gpuckpt -p $WPID -o "$work/ipc1.gck" 2>"$work/ipc1.err"); then
		result fail "$name, not a job" "gpuckpt took it, though it is no job"
	elif ! check $WPID || ! shared; then
		result fail "$name, not a job" "refused ($(tail -n 1 "$work/ipc1.err")), but after: $WHY"
	else
		result pass "$name, not a job: refused, running and shared on: $(tail -n 1 "$work/ipc1.err")"
	fi
	stop $WPID
	rm -f "$work/ipc1.gck"
	LAUNCH=1 start ipc2 -m 64 -n 2 -i || { result fail "$name, a job" "$WHY"; return; }
	if ! check $WPID || ! shared; then
		result fail "$name, a job" "before: $WHY"; stop $WPID; return
	fi
	(cd "$work" && gpuckpt -v -p $WPID 2>"$work/ipc2.err" |
	    gpurestore >"$work/ipc2.out" 2>"$work/ipc2.rerr")
	out=$(cat "$work/ipc2.out")
	if [ "$out" = "$WPID" ] && check $WPID && shared; then
		result pass "$name, a job (--launch), gpuckpt | gpurestore: memory checked, shared still"
	else
		result fail "$name, a job" "$(cat "$work/ipc2.err" "$work/ipc2.rerr" | tail -n 2 | tr '\n' ' ') ${WHY:-}"
	fi
	stop $WPID
}

# gpuwatch registers every GPU for NVML's health events and waits 2 s:
# none should come (exit 3); an event that does is a GPU in trouble.
health() {
	local name="gpuwatch: NVML's health events, every GPU registered" st n
	timed gpuwatch -v -t 2
	st=$?
	n=$(grep -c '^gpuwatch: watching ' "$work/out")
	case $st in
	3)	result pass "$name ($n GPU$([ "$n" -eq 1 ] || echo s))"
		grep 'cannot report' "$work/out" | sed 's/^/  /' | tee -a "$report" ;;
	0)	result fail "$name" "an event came: $(grep -v '^gpuwatch: ' "$work/out" | head -n 1)" ;;
	*)	result fail "$name" "$(tail -n 1 "$work/out")" ;;
	esac
}

# A PyTorch training run checkpointed mid-run, restored, its final
# weights against an uninterrupted run's.
torchrun() {
	local name="PyTorch training, checkpointed mid-run" py dev ref got pid
	local st=$work/train
	py=$(command -v python3) || { result skip "$name" "no python3"; return; }
	if [ -z "$criu_ok" ]; then result skip "$name" "criu cannot work here"; return; fi
	if ! "$py" -c 'import torch' 2>/dev/null; then
		result skip "$name" "$py has no torch"; return
	fi
	if [ -n "$fake" ]; then
		dev=cpu	# the stand-in driver is not one torch can use
	elif "$py" -c 'import torch, sys; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
		dev=cuda
	else
		result skip "$name" "torch sees no GPU"; return
	fi
	name="$name ($dev)"
	export CUBLAS_WORKSPACE_CONFIG=:4096:8
	trainer() {
		rm -f "$1"
		setsid "$py" "$B/work/train.py" --device $dev --steps 300 \
		    --status "$1" </dev/null >/dev/null 2>"$1.err" &
		pid=$!
		disown $pid
		started="$started $pid"
	}
	# waitfor FILE REGEX SECONDS
	waitfor() {
		local i=0
		while ! grep -Eq "$2" "$1" 2>/dev/null; do
			i=$((i + 1)); [ $i -le $(($3 * 10)) ] || return 1; sleep 0.1
		done
	}
	trainer "$st.ref"
	if ! waitfor "$st.ref" '^done ' 300; then
		result fail "$name" "the uninterrupted run did not finish: $(tail -n 1 "$st.ref.err")"
		return
	fi
	ref=$(sed -n 's/^done .*sha256=//p' "$st.ref")
	trainer "$st.cut"
	if ! waitfor "$st.cut" '^step 100 ' 300; then
		result fail "$name" "no step 100: $(tail -n 1 "$st.cut.err")"; stop $pid; return
	fi
	if ! timed gpuckpt -p $pid -o "$work/train.gck"; then
		result fail "$name" "gpuckpt: $(tail -n 1 "$work/out")"; stop $pid; return
	fi
	local tc=$T at
	at=$(grep -c '^step ' "$st.cut")
	[ -d /proc/$pid ] && { result fail "$name" "the process runs on after gpuckpt"; stop $pid; return; }
	if ! timed gpurestore "$work/train.gck"; then
		result fail "$name" "gpurestore: $(tail -n 1 "$work/out")"; return
	fi
	local tr=$T
	if ! waitfor "$st.cut" '^done ' 300; then
		result fail "$name" "the restored run did not finish"; stop $pid; return
	fi
	got=$(sed -n 's/^done .*sha256=//p' "$st.cut")
	if [ -n "$ref" ] && [ "$got" = "$ref" ]; then
		result pass "$name: stopped after step $at, restored, final weights equal to an uninterrupted run's"
		figure "$(printf '%-30s checkpoint %.3f s, image %s MiB, restore %.3f s' \
		    "PyTorch ($dev):" "$tc" "$(($(stat -c %s "$work/train.gck") >> 20))" "$tr")"
	else
		result fail "$name" "final weights $got, uninterrupted $ref"
	fi
}

if [ -n "$probe" ]; then
	say "(-n: no test run)"
	[ $nfail -eq 0 ]
	exit
fi
want() { case " $tests " in *" $1 "*) return 0 ;; esac; return 1; }
want health && health
want t-gpu && tgpu
if want steps; then for m in $sizes; do steps "$m"; done; fi
if want storage; then for m in $sizes; do storage "$m"; done; fi
if want suspend; then for m in $sizes; do suspres "$m"; done; fi
# shellcheck disable=SC2086
set -- $sizes
want roundtrip && roundtrip "${1:-64}" 1
want tree && roundtrip 256 2
want job && job
want ipc && ipc
want torch && torchrun

say ""
say "figures:"
printf '%s' "$figures" | sed 's/^/  /' | tee -a "$report"
say ""
say "$npass passed, $nfail failed, $nskip skipped, in $(($(date +%s) - begun)) s"
[ $nfail -eq 0 ]
