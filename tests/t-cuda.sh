#!/bin/sh
test_description='CUDA process trees: lock, checkpoint, CRIU, restore, remap, suspend'
. "$GCK_SRCDIR/lib.sh"

require_criu
require_python

# The engine runs against the stand-in driver in fakecuda/; the workload
# loads it as libcuda.so.1 and is, for it, a CUDA process.
. "$GCK_SRCDIR/cuda-lib.sh"

A=GPU-aaaaaaaa-1111-4000-8000-000000000001
B=GPU-bbbbbbbb-1111-4000-8000-000000000002
C=GPU-cccccccc-1111-4000-8000-000000000003
N=GPU-eeeeeeee-1111-4000-8000-000000000005
GIB=1073741824
H100='NVIDIA H100 80GB HBM3'
A100='NVIDIA A100-SXM4-40GB'

# host GPU...: this "host" has these GPUs (UUID[:NAME[:CC[:BYTES]]]).
host() {
	: >"$F/gpus.new"
	_bus=1
	for _g in "$@"; do
		_u=${_g%%:*}
		_rest=${_g#"$_u"}
		_rest=${_rest#:}
		_name=${_rest%%:*}
		_name=${_name:-$H100}
		_rest=${_rest#"${_rest%%:*}"}
		_rest=${_rest#:}
		_cc=${_rest%%:*}
		_cc=${_cc:-9.0}
		_rest=${_rest#"${_rest%%:*}"}
		_rest=${_rest#:}
		_bytes=${_rest:-$GIB}
		printf '%s %s %s 0000:%02x:00.0 %s\n' "$_u" "$_cc" "$_bytes" \
		    $_bus "$_name" >>"$F/gpus.new"
		_bus=$((_bus + 1))
	done
	mv "$F/gpus.new" "$F/gpus"
}

mkdir -p "$F/inject" "$F/delay" || exit 1
host $A $B "$C:$A100:8.0"

# logged ACTION PID...: the fake driver logged a successful ACTION for
# each PID (since the log was last cleared).
logged() {
	_a=$1
	shift
	for _p in "$@"; do
		grep "^$_a $_p .* CUDA_SUCCESS " "$F/log" >/dev/null && continue
		echo >&2 "no successful $_a of $_p in the log:"
		cat >&2 "$F/log"
		return 1
	done
}

# untouched ERR: one line on stderr, the tree is running, every process
# RUNNING on the GPU, verifying its device memory, nothing left behind.
untouched() {
	test_line_count "$1" 1 &&
	for _p in $WPIDS; do proc_running $_p || return 1; done &&
	states RUNNING &&
	verify_workload $WPID &&
	test -z "$(ls -A "$TMPDIR")" &&
	test -z "$(ls -A | grep "^img\\.gck")"
}

# nothing_restored ERR: one line, no process of the image, no files.
nothing_restored() {
	test_line_count "$1" 1 &&
	for _p in $WPIDS; do proc_gone $_p || return 1; done &&
	test -z "$(ls -A "$TMPDIR")"
}

# overlap ACTION PID...: the ACTION of all PIDs ran at the same time:
# the last to start started before the first to end ended.
overlap() {
	_a=$1
	shift
	for _p in "$@"; do
		grep "^$_a $_p .* CUDA_SUCCESS " "$F/log" | tail -n 1
	done | awk -v n=$# '
	{ if ($3 > s) s = $3; if (e == "" || $4 < e) e = $4; c++ }
	END { exit !(c == n && s < e) }' && return 0
	echo >&2 "$_a did not overlap:"
	cat >&2 "$F/log"
	return 1
}

test_expect_success 'a tree of CUDA processes is found and checkpointed' '
	cuda_start w1 -n 3 -m 8 -d 0,1 &&
	test $(echo $WPIDS | wc -w) -eq 3 &&
	verify_workload $WPID &&
	: >"$F/log" &&
	"$GCKPT" -v -p $WPID -o img.gck >out 2>err &&
	for p in $WPIDS; do wait_gone $p || exit 1; done &&
	logged lock $WPIDS &&
	logged checkpoint $WPIDS &&
	test -z "$(ls -A "$F/mem/$A")" &&
	test -z "$(ls -A "$F/mem/$B")" &&
	test_must_be_empty out
'

test_expect_success 'GPU lock and checkpoint come before the CRIU dump' '
	grep -n "" err >lines &&
	l=$(sed -n "s/:.*GPU lock: 3 processes$//p" lines) &&
	c=$(sed -n "s/:.*GPU checkpoint: 3 processes$//p" lines) &&
	d=$(sed -n "s/:.*dumping process tree.*//p" lines) &&
	test -n "$l" && test -n "$c" && test -n "$d" &&
	test $l -lt $c && test $c -lt $d &&
	for p in $WPIDS; do
		lk=$(awk -v p=$p "\$1 == \"lock\" && \$2 == p { print \$4 }" \
		    "$F/log") &&
		ck=$(awk -v p=$p "\$1 == \"checkpoint\" && \$2 == p { print \$3 }" \
		    "$F/log") &&
		test "$lk" -lt "$ck" || exit 1
	done
'

test_expect_success 'the manifest records the driver, the GPUs and each process' '
	zstd -qdc img.gck | tar -xO gpuckpt.json >manifest &&
	python3 - "$A" "$B" $WPIDS <<-\EOF
	import json, sys
	a, b, pids = sys.argv[1], sys.argv[2], [int(p) for p in sys.argv[3:]]
	c = json.load(open("manifest"))["cuda"]
	assert c["driver_version"] == 13000, c
	assert c["cuda_version"] == "13.0" and c["driver"] == "580.65.06", c
	assert c["nvml"] is True
	g = {x["uuid"]: x for x in c["gpus"]}
	assert sorted(g) == sorted([a, b]), g
	assert g[a]["index"] == 0 and g[b]["index"] == 1
	assert g[a]["name"] == "NVIDIA H100 80GB HBM3"
	assert g[a]["compute_capability"] == "9.0"
	assert g[a]["memory"] == 1073741824
	assert g[b]["pci_bus_id"] == "0000:02:00.0"
	# NVML minor numbers: the stand-in gives each GPU its ordinal
	assert g[a]["minor"] == 0 and g[b]["minor"] == 1, g
	procs = {p["pid"]: p for p in c["processes"]}
	assert sorted(procs) == sorted(pids), procs
	on = []
	for pid in pids:
	    use = procs[pid]["gpus"]
	    assert len(use) == 1, use
	    assert 8 << 20 <= use[0]["memory"] < 9 << 20, use
	    on.append(use[0]["uuid"])
	# the root on the first GPU of -d 0,1, its children one on each
	assert on[0] == a and sorted(on[1:]) == sorted([a, b]), on
	EOF
'

test_expect_success 'gpuinspect shows the GPUs and what each process holds' '
	test_status 0 "$GCKINSPECT" --json img.gck >doc &&
	test_status 0 "$GCKINSPECT" img.gck >summary &&
	python3 - "$A" "$B" $WPIDS <<-\EOF
	import json, re, sys
	a, b, pids = sys.argv[1], sys.argv[2], [int(p) for p in sys.argv[3:]]
	m = json.load(open("manifest"))
	d = json.load(open("doc"))
	c = d["cuda"]
	assert c["driver_version"] == 13000 and c["cuda_version"] == "13.0"
	assert c["driver"] == "580.65.06" and c["nvml"] is True
	assert c["gpus"] == m["cuda"]["gpus"]
	idx = {g["uuid"]: g["index"] for g in c["gpus"]}
	held = {p["pid"]: p["gpus"] for p in m["cuda"]["processes"]}
	total = 0
	for p in d["processes"]:
	    want = [{"uuid": g["uuid"], "memory": g["memory"],
	             "index": idx[g["uuid"]], "name": "NVIDIA H100 80GB HBM3",
	             "storage": "host"}
	            for g in held.get(p["pid"], [])]
	    assert p["gpus"] == want, (p["pid"], p["gpus"], want)
	    total += sum(g["memory"] for g in want)
	assert sorted(held) == sorted(pids)
	assert d["totals"]["gpu_memory"] == total > 0
	out = open("summary").read()
	assert "versions    criu %s, CUDA driver 580.65.06 (CUDA 13.0)\n" % \
	    m["criu"]["version"] in out, out
	for g in c["gpus"]:
	    assert re.search(r"^%d +%s +NVIDIA H100 80GB HBM3 +9.0 +1.0 GiB$" %
	        (g["index"], g["uuid"]), out, re.M), out
	for pid in pids:
	    mem = held[pid][0]["memory"]
	    assert re.search(r"^       pid %d \(\S+\): %.1f MiB, host memory$" %
	        (pid, mem / 1048576), out, re.M), (pid, out)
	    assert re.search(r"^ *%d .* %.1f MiB  \S" % (pid, mem / 1048576),
	        out, re.M), (pid, out)
	EOF
'

test_expect_success 'gpurestore restores and unlocks them, device memory intact' '
	: >"$F/log" &&
	"$GCKRESTORE" -v img.gck >out 2>err &&
	echo $WPID >expect &&
	test_cmp expect out &&
	logged restore $WPIDS &&
	logged unlock $WPIDS &&
	states RUNNING &&
	verify_workload $WPID &&
	c1=$VCOUNTER &&
	sleep 0.3 &&
	verify_workload $WPID &&
	test $VCOUNTER -gt $c1 &&
	grep "^verify ok" "$WSTATUS" | tail -n 1 | grep " devs=$WDEVS\$" &&
	test -z "$(ls -A "$TMPDIR")" &&
	rm img.gck
'

test_expect_success 'the steps run for all processes at once' '
	echo 600 >"$F/delay/checkpoint" &&
	echo 600 >"$F/delay/restore" &&
	: >"$F/log" &&
	"$GCKPT" -p $WPID -o img2.gck 2>err &&
	for p in $WPIDS; do wait_gone $p || exit 1; done &&
	"$GCKRESTORE" img2.gck >out &&
	rm -f "$F/delay/checkpoint" "$F/delay/restore" img2.gck &&
	overlap checkpoint $WPIDS &&
	overlap restore $WPIDS &&
	verify_workload $WPID
'

test_expect_success 'gpuckpt -p PID | gpurestore on one host moves them' '
	: >"$F/log" &&
	"$GCKPT" -p $WPID 2>ck.err | "$GCKRESTORE" >out 2>err &&
	test_must_be_empty ck.err &&
	test_must_be_empty err &&
	echo $WPID >expect &&
	test_cmp expect out &&
	logged checkpoint $WPIDS &&
	logged restore $WPIDS &&
	logged unlock $WPIDS &&
	states RUNNING &&
	verify_workload $WPID &&
	grep "^verify ok" "$WSTATUS" | tail -n 1 | grep " devs=$WDEVS\$" &&
	test -z "$(ls -A "$TMPDIR")"
'

test_expect_success 'a snapshot (-R) leaves them running on their GPUs' '
	: >"$F/log" &&
	"$GCKPT" -v -R -p $WPID -o snap.gck 2>err &&
	# locked and checkpointed only once the rounds are over, with the
	# tree stopped, and given back before the image is written
	awk "/^gpuckpt: pre-copy ended/ { r = NR } /^gpuckpt: GPU lock/ { l = NR }
	    /^gpuckpt: GPU checkpoint/ { c = NR } /^gpuckpt: dumping/ { d = NR }
	    / ran again after / { a = NR } /^gpuckpt: writing image\$/ { w = NR }
	    END { exit !(r && r < l && l < c && c < d && d < a && a < w) }" err &&
	logged checkpoint $WPIDS &&
	logged restore $WPIDS &&
	logged unlock $WPIDS &&
	states RUNNING &&
	verify_workload $WPID &&
	rm snap.gck
'

test_expect_success 'a lock timeout rolls back and names process and step' '
	victim=$(echo $WPIDS | cut -d" " -f2) &&
	echo hang >"$F/inject/lock.$victim" &&
	test_status 1 "$GCKPT" --lock-timeout 0.5 -p $WPID -o img.gck \
	    >out 2>err &&
	rm "$F/inject/lock.$victim" &&
	test_must_be_empty out &&
	test_grep "^gpuckpt: process $victim (.cudawork.): GPU lock failed: CUDA_ERROR_NOT_READY (its CUDA work did not finish within the 500 ms lock timeout); process tree $WPID left running\$" err &&
	untouched err
'

test_expect_success 'a checkpoint error rolls back the others' '
	victim=$(echo $WPIDS | cut -d" " -f3) &&
	echo CUDA_ERROR_INVALID_VALUE >"$F/inject/checkpoint.$victim" &&
	: >"$F/log" &&
	test_status 1 "$GCKPT" -p $WPID -o img.gck >out 2>err &&
	rm "$F/inject/checkpoint.$victim" &&
	test_grep "^gpuckpt: process $victim (.cudawork.): GPU checkpoint failed: CUDA_ERROR_INVALID_VALUE; process tree $WPID left running\$" err &&
	others=$(echo $WPIDS | cut -d" " -f1,2) &&
	logged checkpoint $others &&
	logged restore $others &&
	untouched err
'

test_expect_success 'a CRIU failure after the GPU checkpoint rolls back' '
	fake_criu fail-after &&
	: >"$F/log" &&
	test_status 1 env GCK_CRIU="$TRASH/fakecriu" \
	    "$GCKPT" -p $WPID -o img.gck >out 2>err &&
	test_grep "criu dump.*injected failure.*; process tree $WPID left running\$" err &&
	logged checkpoint $WPIDS &&
	logged restore $WPIDS &&
	logged unlock $WPIDS &&
	untouched err
'

test_expect_success 'a broken output pipe rolls back' '
	: >"$F/log" &&
	{ "$GCKPT" -c none -p $WPID 2>err; echo $? >status; } | head -c 1000 \
	    >/dev/null &&
	echo 1 >expect &&
	test_cmp expect status &&
	test_grep "left running\$" err &&
	logged restore $WPIDS &&
	untouched err
'

test_expect_success 'SIGTERM during the GPU checkpoint rolls back' '
	echo 1500 >"$F/delay/checkpoint" &&
	: >"$F/log" &&
	{ "$GCKPT" -p $WPID -o img.gck >out 2>err & } &&
	gpid=$! &&
	sleep 0.7 &&
	kill -TERM $gpid &&
	test_status 1 wait_child $gpid &&
	rm "$F/delay/checkpoint" &&
	test_grep "interrupted by SIGTERM; process tree $WPID left running\$" err &&
	untouched err
'

test_expect_success 'SIGKILL of gpuckpt: its guard brings the GPUs back' '
	echo 1500 >"$F/delay/checkpoint" &&
	: >"$F/log" &&
	{ "$GCKPT" -p $WPID -o img.gck >out 2>err & } &&
	gpid=$! &&
	sleep 0.7 &&
	kill -KILL $gpid &&
	wait $gpid;
	rm "$F/delay/checkpoint" &&
	i=0 &&
	until states RUNNING 2>/dev/null || test $i -gt 100; do
		i=$((i + 1))
		sleep 0.1
	done &&
	states RUNNING &&
	logged restore $WPIDS &&
	for p in $WPIDS; do proc_running $p || exit 1; done &&
	verify_workload $WPID &&
	test -z "$(ls -A | grep "^img\\.gck")"
'

test_expect_success 'a process the driver reports FAILED is reported' '
	victim=$(echo $WPIDS | cut -d" " -f2) &&
	echo "CUDA_ERROR_UNKNOWN FAILED" >"$F/inject/checkpoint.$victim" &&
	test_status 1 "$GCKPT" -p $WPID -o img.gck >out 2>err &&
	rm "$F/inject/checkpoint.$victim" &&
	test_line_count err 1 &&
	test_grep "^gpuckpt: process $victim (.cudawork.): GPU checkpoint failed: CUDA_ERROR_UNKNOWN; the driver reports the process FAILED; process tree $WPID left running, but process $victim .*FAILED" err &&
	test "$("$FAKECTL" state $victim)" = FAILED &&
	for p in $(echo $WPIDS | cut -d" " -f1,3); do
		test "$("$FAKECTL" state $p)" = RUNNING || exit 1
	done &&
	for p in $WPIDS; do proc_running $p || exit 1; done &&
	test -z "$(ls -A "$TMPDIR")" &&
	kill_tree $WPID
'

test_expect_success 'a stopped CUDA process is refused before it is touched' '
	cuda_start w2 -n 2 -m 4 &&
	child=$(echo $WPIDS | cut -d" " -f2) &&
	kill -STOP $child &&
	wait_stopped $child &&
	: >"$F/log" &&
	test_status 1 "$GCKPT" -p $WPID -o img.gck >out 2>err &&
	kill -CONT $child &&
	test_grep "CUDA process $child (.cudawork.) is stopped, and its CUDA restore thread must run (continue it with kill -CONT $child); process tree $WPID left running\$" err &&
	test_must_be_empty "$F/log" &&
	untouched err
'

test_expect_success 'no driver: a CUDA tree is refused untouched, naming r570' '
	test_status 1 env GPUCKPT_LIBCUDA=$TRASH/no-libcuda.so.1 \
	    "$GCKPT" -p $WPID -o img.gck >out 2>err &&
	test_grep "^gpuckpt: cannot checkpoint pid $WPID: process $WPID (.cudawork.) uses CUDA, but no CUDA driver could be loaded (.*no-libcuda.so.1.*); NVIDIA driver r570 or newer is needed; process tree $WPID left running\$" err &&
	untouched err
'

test_expect_success 'a driver older than r570 is refused untouched' '
	echo "12040 550.54.15" >"$F/driver" &&
	test_status 1 "$GCKPT" -p $WPID -o img.gck >out 2>err &&
	rm "$F/driver" &&
	test_grep "uses CUDA, but the CUDA driver (CUDA 12.4) lacks cuCheckpointProcess.*: checkpointing CUDA processes needs NVIDIA driver r570 (CUDA 12.8) or newer" err &&
	untouched err
'

test_expect_success 'a tree without CUDA needs no driver' '
	WORKLOAD=$PLAINWORK &&
	start_workload plain -m 4 &&
	started="$started $WPID" &&
	env GPUCKPT_LIBCUDA=$TRASH/no-libcuda.so.1 \
	    "$GCKPT" -p $WPID -o plain.gck &&
	wait_gone $WPID &&
	"$GCKINSPECT" --json plain.gck | grep "^  \"cuda\": null," &&
	env GPUCKPT_LIBCUDA=$TRASH/no-libcuda.so.1 \
	    "$GCKRESTORE" plain.gck >out &&
	verify_workload $WPID &&
	test_status 1 "$GCKRESTORE" --gpu-map 0=1 plain.gck >out 2>err &&
	test_grep "^gpurestore: a GPU map was given, but the image has no CUDA process\$" err &&
	kill_tree $WPID
'

# An image of two CUDA processes on GPU A, with A absent on restore.
test_expect_success 'an image whose GPU this host lacks goes to a GPU of its chip' '
	cuda_start w3 -n 2 -m 8 -d 0 &&
	"$GCKPT" -p $WPID -o gpuA.gck &&
	for p in $WPIDS; do wait_gone $p || exit 1; done &&
	host "$C:$A100:8.0" $N $B &&
	: >"$F/log" &&
	"$GCKRESTORE" gpuA.gck >out &&
	grep "^restore $WPID .* $A=$N" "$F/log" &&
	states RUNNING &&
	verify_workload $WPID &&
	grep "^verify ok" "$WSTATUS" | tail -n 1 | grep " devs=$N,$N\$" &&
	kill_tree $WPID
'

test_expect_success '--gpu-map puts it where it is told' '
	: >"$F/log" &&
	"$GCKRESTORE" --gpu-map 0=2 gpuA.gck >out &&
	verify_workload $WPID &&
	grep "^verify ok" "$WSTATUS" | tail -n 1 | grep " devs=$B,$B\$" &&
	kill_tree $WPID &&
	: >"$F/log" &&
	"$GCKRESTORE" --gpu-map $A=$N gpuA.gck >out &&
	verify_workload $WPID &&
	grep "^verify ok" "$WSTATUS" | tail -n 1 | grep " devs=$N,$N\$" &&
	kill_tree $WPID
'

# preflight_refused MESSAGE [gpurestore options]: refused from the
# manifest alone: nothing restored, nothing left, the driver never asked.
preflight_refused() {
	_msg=$1
	shift
	: >"$F/log" &&
	test_status 1 "$GCKRESTORE" "$@" gpuA.gck >out 2>err &&
	test_must_be_empty out &&
	test_grep "$_msg" err &&
	nothing_restored err &&
	test_must_be_empty "$F/log"
}

test_expect_success 'preflight: no GPU of the same chip' '
	host "$C:$A100:8.0" "$N:$H100:8.9" &&
	preflight_refused "^gpurestore: this host cannot take the image.s GPUs: no $H100 (compute capability 9.0) with 17 MiB free for $A\$"
'

test_expect_success 'preflight: not enough free memory' '
	host "$N:$H100:9.0:16777216" &&
	preflight_refused "^gpurestore: this host cannot take the image.s GPUs: no $H100 (compute capability 9.0) with 17 MiB free for $A\$" &&
	preflight_refused "^gpurestore: this host cannot take the image.s GPUs: $N has 16 MiB free, 17 MiB needed for $A\$" \
	    --gpu-map 0=0
'

test_expect_success 'preflight: a map onto another chip' '
	host "$C:$A100:8.0" $N &&
	preflight_refused "^gpurestore: this host cannot take the image.s GPUs: $A ($H100, 9.0) cannot go to $C, a $A100 (8.0)\$" \
	    --gpu-map 0=0
'

test_expect_success 'preflight: invalid and incomplete maps' '
	host $N $B &&
	preflight_refused "^gpurestore: GPU map: no GPU .7. on this host\$" \
	    --gpu-map 0=7 &&
	preflight_refused "^gpurestore: GPU map: no GPU .3. in the image\$" \
	    --gpu-map 3=0 &&
	preflight_refused "^gpurestore: invalid GPU map item .0:1.: use SRC=DST, each a GPU UUID or index\$" \
	    --gpu-map 0:1 &&
	preflight_refused "^gpurestore: invalid GPU map .0=1,.: use SRC=DST" \
	    --gpu-map 0=1,
'

test_expect_success 'preflight: remapping needs r580' '
	host $N $B &&
	echo "12080 570.86.10" >"$F/driver" &&
	preflight_refused "^gpurestore: cannot restore: GPU $A must be remapped (to $N), which needs NVIDIA driver r580 (CUDA 13.0) or newer; this driver is CUDA 12.8\$" &&
	rm "$F/driver"
'

test_expect_success 'preflight: no driver on this host' '
	: >"$F/log" &&
	test_status 1 env GPUCKPT_LIBCUDA=$TRASH/no-libcuda.so.1 \
	    "$GCKRESTORE" gpuA.gck >out 2>err &&
	test_grep "^gpurestore: cannot restore: the image.s process [0-9]* (.cudawork.) uses CUDA, but no CUDA driver could be loaded (.*no-libcuda.so.1.*); NVIDIA driver r570 or newer is needed\$" err &&
	nothing_restored err &&
	test_must_be_empty "$F/log"
'

test_expect_success 'a GPU restore that fails kills the restored tree' '
	host $A $B &&
	echo CUDA_ERROR_OUT_OF_MEMORY >"$F/inject/restore" &&
	test_status 1 "$GCKRESTORE" gpuA.gck >out 2>err &&
	rm "$F/inject/restore" &&
	test_must_be_empty out &&
	test_grep "^gpurestore: process [0-9]* (.cudawork.): GPU restore failed: CUDA_ERROR_OUT_OF_MEMORY.*; the restored process tree $WPID was killed\$" err &&
	nothing_restored err &&
	"$GCKRESTORE" gpuA.gck >out &&
	verify_workload $WPID &&
	kill_tree $WPID
'

test_expect_success '--suspend parks GPU memory; the tree runs on the CPU' '
	host $A $B &&
	cuda_start w4 -n 2 -m 8 -d 0 &&
	: >"$F/log" &&
	"$GCKPT" --suspend -p $WPID >out 2>err &&
	test_must_be_empty out &&
	test_must_be_empty err &&
	states CHECKPOINTED &&
	for p in $WPIDS; do test ! -e "$F/mem/$A/$p" || exit 1; done &&
	for p in $WPIDS; do proc_running $p || exit 1; done &&
	"$GCKRESTORE" --resume -p $WPID >out 2>err &&
	test_must_be_empty out &&
	test_must_be_empty err &&
	states RUNNING &&
	verify_workload $WPID &&
	grep "^verify ok" "$WSTATUS" | tail -n 1 | grep " devs=$A,$A\$"
'

test_expect_success '--resume --gpu-map moves it to another GPU' '
	"$GCKPT" --suspend -p $WPID &&
	"$GCKRESTORE" --resume --gpu-map $A=1 -p $WPID &&
	states RUNNING &&
	verify_workload $WPID &&
	grep "^verify ok" "$WSTATUS" | tail -n 1 | grep " devs=$B,$B\$"
'

test_expect_success 'suspend and resume refuse a process in the wrong state' '
	"$GCKPT" --suspend -p $WPID &&
	test_status 1 "$GCKPT" --suspend -p $WPID >out 2>err &&
	test_grep "^gpuckpt: cannot suspend process $WPID (.cudawork.): its CUDA state is CHECKPOINTED (suspended: bring it back with gpurestore --resume first)\$" err &&
	test_status 1 "$GCKPT" -p $WPID -o img.gck >out 2>err &&
	test_grep "cannot checkpoint process $WPID (.cudawork.): its CUDA state is CHECKPOINTED" err &&
	states CHECKPOINTED &&
	"$GCKRESTORE" --resume -p $WPID &&
	test_status 1 "$GCKRESTORE" --resume -p $WPID >out 2>err &&
	test_grep "^gpurestore: cannot resume process $WPID (.cudawork.): its CUDA state is RUNNING, it is not suspended\$" err &&
	states RUNNING &&
	verify_workload $WPID
'

test_expect_success 'resume unlocks a process left locked' '
	child=$(echo $WPIDS | cut -d" " -f2) &&
	"$FAKECTL" lock $child &&
	test "$("$FAKECTL" state $child)" = LOCKED &&
	: >"$F/log" &&
	"$GCKRESTORE" --resume -p $WPID &&
	logged unlock $child &&
	! grep "^restore " "$F/log" &&
	states RUNNING &&
	verify_workload $WPID
'

test_expect_success 'a suspend that fails leaves every process on its GPU' '
	child=$(echo $WPIDS | cut -d" " -f2) &&
	echo CUDA_ERROR_INVALID_VALUE >"$F/inject/checkpoint.$child" &&
	test_status 1 "$GCKPT" --suspend -p $WPID >out 2>err &&
	rm "$F/inject/checkpoint.$child" &&
	test_grep "^gpuckpt: process $child (.cudawork.): GPU checkpoint failed: CUDA_ERROR_INVALID_VALUE; process tree $WPID left running on its GPUs\$" err &&
	test_line_count err 1 &&
	states RUNNING &&
	verify_workload $WPID
'

test_expect_success 'suspend and resume refuse a tree without CUDA' '
	WORKLOAD=$PLAINWORK &&
	start_workload plain2 -m 4 &&
	started="$started $WPID" &&
	test_status 1 "$GCKPT" --suspend -p $WPID >out 2>err &&
	test_grep "^gpuckpt: cannot suspend pid $WPID: no process of its tree uses CUDA\$" err &&
	test_status 1 "$GCKRESTORE" --resume -p $WPID >out 2>err &&
	test_grep "^gpurestore: cannot resume pid $WPID: no process of its tree uses CUDA\$" err &&
	verify_workload $WPID &&
	kill_tree $WPID
'

# inner PID: the PID of PID in its own, innermost PID namespace.
inner() {
	awk '/^NSpid:/ { print $NF }' /proc/$1/status
}

# ns_restored PIDFILE: the tree gpurestore --pidns started, whose root
# as we see it is in PIDFILE, is the image's tree of $WPIDS in a PID
# namespace of its own, under our init: its processes there have the
# image's PIDs, the driver answers for them by their PIDs here, NVML
# names them by these, and the tree checks out.  Sets RPIDS, the PIDs
# here, root first.
ns_restored() {
	_r=$(cat "$1") &&
	test "$_r" != $WPID &&
	test "$(inner $_r)" = $WPID &&
	test "$(readlink /proc/$_r/ns/pid)" != "$(readlink /proc/self/ns/pid)" &&
	test "$(cat /proc/$(proc_field $_r 4)/comm)" = gpuckpt-init &&
	started="$started $_r" &&
	RPIDS="$_r $(proc_descendants $_r)" &&
	test $(echo $RPIDS | wc -w) -eq $(echo $WPIDS | wc -w) &&
	_w=" $(echo $WPIDS) " &&
	for _p in $RPIDS; do
		case $_w in
		*" $(inner $_p) "*) ;;
		*)	echo >&2 "process $_p is $(inner $_p) in there"
			return 1 ;;
		esac
		test "$("$FAKECTL" state $_p)" = RUNNING || return 1
	done &&
	"$FAKECTL" nvml >nvml.out &&
	for _p in $RPIDS; do
		grep "[=,]$_p:[0-9]" nvml.out >/dev/null || return 1
	done &&
	for _p in $WPIDS; do
		! grep "[=,]$_p:[0-9]" nvml.out || return 1
	done &&
	verify_workload $_r
}

# cuda_procs IMAGE: the CUDA processes the manifest of IMAGE records are
# $WPIDS, each on one GPU with its 8 MiB and the page of its counter.
cuda_procs() {
	zstd -qdc "$1" | tar -xO gpuckpt.json >manifest &&
	python3 - $WPIDS <<-\EOF
	import json, sys
	pids = sorted(int(p) for p in sys.argv[1:])
	m = json.load(open("manifest"))
	assert sorted(p["pid"] for p in m["processes"]) == pids, m["processes"]
	procs = m["cuda"]["processes"]
	assert sorted(p["pid"] for p in procs) == pids, procs
	for p in procs:
	    assert len(p["gpus"]) == 1, p
	    assert 8 << 20 <= p["gpus"][0]["memory"] < 9 << 20, p
	EOF
}

test_expect_success 'a CUDA tree restored with --pidns keeps its PIDs in a namespace' '
	host $A $B &&
	cuda_start w5 -n 3 -m 8 -d 0,1 &&
	"$GCKPT" -p $WPID -o ns1.gck &&
	for p in $WPIDS; do wait_gone $p || return 1; done &&
	: >"$F/log" &&
	"$GCKRESTORE" --pidns --pidfile ns1.pid ns1.gck >out 2>err &&
	test_must_be_empty err &&
	test "$(cat out)" = "$(cat ns1.pid)" &&
	logged restore $WPIDS &&
	logged unlock $WPIDS &&
	ns_restored ns1.pid &&
	grep "^verify ok" "$WSTATUS" | tail -n 1 | grep " devs=$WDEVS\$"
'

test_expect_success 'checkpointed there by its PID here, restored in a namespace on other GPUs' '
	r=$(cat ns1.pid) &&
	: >"$F/log" &&
	"$GCKPT" -p $r -o ns2.gck 2>err &&
	test_must_be_empty err &&
	for p in $RPIDS; do wait_gone $p || return 1; done &&
	logged lock $WPIDS &&
	logged checkpoint $WPIDS &&
	cuda_procs ns2.gck &&
	: >"$F/log" &&
	"$GCKRESTORE" --pidns --gpu-map 0=1,1=0 --pidfile ns2.pid ns2.gck \
	    >out 2>err &&
	test_must_be_empty err &&
	grep "^restore $WPID .* CUDA_SUCCESS .*$A=$B" "$F/log" &&
	logged unlock $WPIDS &&
	ns_restored ns2.pid &&
	swapped=$(echo $WDEVS | sed "s/$A/x/g; s/$B/$A/g; s/x/$B/g") &&
	test "$swapped" != "$WDEVS" &&
	grep "^verify ok" "$WSTATUS" | tail -n 1 | grep " devs=$swapped\$"
'

test_expect_success 'checkpointed there again, restored here with its own PIDs' '
	r=$(cat ns2.pid) &&
	"$GCKPT" -p $r -o ns3.gck 2>err &&
	test_must_be_empty err &&
	for p in $RPIDS; do wait_gone $p || return 1; done &&
	cuda_procs ns3.gck &&
	free=yes &&
	for p in $WPIDS; do test ! -d /proc/$p || free=; done &&
	"$GCKRESTORE" --pidfile ns3.pid ns3.gck >out 2>err &&
	if test -n "$free"; then
		test_must_be_empty err &&
		test "$(cat ns3.pid)" = $WPID &&
		test "$(readlink /proc/$WPID/ns/pid)" = "$(readlink /proc/self/ns/pid)" &&
		states RUNNING &&
		verify_workload $WPID
	else
		# Another process took one of its PIDs meanwhile.
		test_grep "in use on this host .*(--pidns)\$" err &&
		ns_restored ns3.pid
	fi &&
	grep "^verify ok" "$WSTATUS" | tail -n 1 | grep " devs=$swapped\$" &&
	kill_tree $(cat ns3.pid)
'

test_expect_success 'the new options are checked' '
	test_status 2 "$GCKPT" --suspend -o x -p 1 2>err &&
	test_grep "takes no -c, --format, -k, -o, --parent, -R, -s, --sign, --stats or --threads" err &&
	test_status 2 "$GCKPT" --lock-timeout x -p 1 2>err &&
	test_grep "invalid lock timeout .x." err &&
	test_status 2 "$GCKPT" --lock-timeout -1 -p 1 2>err &&
	test_status 2 "$GCKPT" --lock-timeout 3601 -p 1 2>err &&
	test_status 2 "$GCKRESTORE" --resume 2>err &&
	test_status 2 "$GCKRESTORE" --resume -p 1 img.gck 2>err &&
	test_status 2 "$GCKRESTORE" -p 1 img.gck 2>err &&
	"$GCKPT" --help >out && test_grep "\-\-suspend" out &&
	test_grep "\-\-lock-timeout" out &&
	"$GCKRESTORE" --help >out && test_grep "\-\-resume" out &&
	test_grep "\-\-gpu-map" out
'

test_done
