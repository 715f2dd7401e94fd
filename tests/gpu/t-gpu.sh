#!/bin/sh
test_description='checkpoint and restore a CUDA process on a real GPU'
. "$GCK_SRCDIR/lib.sh"

WORKLOAD=$GCK_TESTDIR/gpu/gpuwork

# Only the lack of a usable GPU skips this script, under CI=true as well
# (where test_skip_all fails): a host need not have a GPU.  A driver
# without the checkpoint API counts as no GPU.
skip_no_gpu() {
	echo "1..0 # SKIP no GPU ($1)"
	exit 0
}

test -e /dev/nvidiactl || skip_no_gpu "/dev/nvidiactl not found"
"$WORKLOAD" --probe >probe.out 2>probe.err
st=$?
case $st in
0)	;;
77)	skip_no_gpu "$(sed -n '1s/^gpuwork: //p' probe.err)" ;;
*)	cat >&2 probe.err
	echo "not ok 1 - gpuwork --probe exited $st"
	echo "1..1"
	exit 1 ;;
esac

# The checkpoint API needs driver r570 or newer.  Where the version
# cannot be found out the tests run, and a failure tells.
SMI=$(command -v nvidia-smi)
if test -n "$SMI"; then
	driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader |
	    sed -n '1{s/ //g;p;}')
elif test -r /proc/driver/nvidia/version; then
	driver=$(awk 'NR == 1 { for (i = 1; i <= NF; i++)
	    if ($i ~ /^[0-9]+\.[0-9]+(\.[0-9]+)?$/) { print $i; exit } }' \
	    /proc/driver/nvidia/version)
fi
case ${driver%%.*} in
''|*[!0-9]*)
	echo >&2 "cannot tell the NVIDIA driver version: running anyway" ;;
*)	test "${driver%%.*}" -ge 570 || skip_no_gpu \
	    "driver $driver has no checkpoint API: r570 or newer is needed" ;;
esac
echo >&2 "device: $(cat probe.out), driver ${driver:-unknown}"

require_criu

started=
test_cleanup() {
	test -n "$started" && kill_tree $started >/dev/null 2>&1
}

# Starts gpuwork and remembers it for the cleanup.  Sets WDEV, the UUID
# of the GPU it uses, besides what start_workload sets.
start() {
	start_workload "$@" || return 1
	started="$started $WPID"
	WSTART=$(proc_field $WPID 22)
	WDEV=$(sed -n 's/^ready .* devs=\([^ ]*\).*/\1/p' "$WSTATUS")
	test -n "$WDEV"
}

# gpu_pids: the PIDs that nvidia-smi lists as using a GPU.
gpu_pids() {
	nvidia-smi --query-compute-apps=pid --format=csv,noheader >smi.out &&
	tr -d ' ' <smi.out
}

# gpu_ok PID: PID passes two checks a second apart, each of its device
# memory, its device counter and its scratch buffer, on the GPU it
# started on; in that second the counter advances by at least 10 ticks
# of 10 ms.  Sets VCOUNTER to the counter of the first check.
gpu_ok() {
	proc_running $1 &&
	verify_workload $1 &&
	_c1=$VCOUNTER &&
	grep '^verify ' "$WSTATUS" | tail -n 1 >last.verify &&
	test_grep " devs=$WDEV\$" last.verify &&
	sleep 1 &&
	verify_workload $1 &&
	test $VCOUNTER -ge $((_c1 + 10)) &&
	VCOUNTER=$_c1
}

# restored_ok PID: PID is a restored copy, in a session of its own, of
# the gpuwork started last, and its GPU state checks out.
restored_ok() {
	proc_running $1 &&
	test "$(proc_field $1 22)" != "$WSTART" &&
	test "$(proc_field $1 6)" != "$(proc_field $$ 6)" &&
	gpu_ok $1
}

test_expect_success 'start gpuwork with 256 MiB of device memory' '
	start dev &&
	grep "^ready .* mib=256 " "$WSTATUS" &&
	test "$WDEV" = "$(sed "s/ .*//" probe.out)" &&
	verify_workload $WPID &&
	before=$VCOUNTER
'

test_expect_success 'nvidia-smi lists it' '
	test -z "$SMI" || { gpu_pids >pids && test_grep "^$WPID\$" pids; }
'

test_expect_success 'gpuckpt -p PID -o FILE' '
	test_status 0 "$GCKPT" -p $WPID -o img.gck >stdout 2>stderr &&
	test_must_be_empty stdout &&
	test_must_be_empty stderr &&
	test -s img.gck &&
	wait_gone $WPID
'

test_expect_success 'gpuinspect shows the CUDA state and the GPU' '
	test_status 0 "$GCKINSPECT" --json img.gck >inspect.json \
	    2>inspect.err &&
	test_must_be_empty inspect.err &&
	python3 - "$WDEV" $WPID <<-\EOF &&
	import json, sys
	dev, pid = sys.argv[1], int(sys.argv[2])
	d = json.load(open("inspect.json"))
	assert [g["uuid"] for g in d["cuda"]["gpus"]] == [dev], d["cuda"]
	p = [p for p in d["processes"] if p["pid"] == pid]
	assert len(p) == 1, d["processes"]
	g = p[0]["gpus"]
	assert [x["uuid"] for x in g] == [dev], g
	assert g[0]["memory"] >= 256 << 20, g
	EOF
	test_status 0 "$GCKINSPECT" img.gck >inspect.out 2>inspect.err &&
	test_must_be_empty inspect.err &&
	test_grep "$WDEV" inspect.out
'

test_expect_success 'gpuinspect --verify accepts the image' '
	test_status 0 "$GCKINSPECT" --verify img.gck >verify.out \
	    2>verify.err &&
	test_must_be_empty verify.err &&
	test_grep "^image ok: " verify.out
'

test_expect_success 'gpurestore FILE' '
	test_status 0 "$GCKRESTORE" img.gck >restore.out 2>restore.err &&
	test_must_be_empty restore.err &&
	echo $WPID >expect &&
	test_cmp expect restore.out
'

test_expect_success 'the restored process runs on with its GPU state' '
	restored_ok $WPID &&
	test $VCOUNTER -gt $before
'

test_expect_success 'gpuckpt --leave-running' '
	kill_tree $WPID &&
	start running -m 64 &&
	verify_workload $WPID &&
	before=$VCOUNTER &&
	test_status 0 "$GCKPT" --leave-running -p $WPID -o run.gck \
	    2>stderr &&
	test_must_be_empty stderr &&
	test "$(proc_field $WPID 22)" = "$WSTART" &&
	gpu_ok $WPID &&
	test $VCOUNTER -gt $before
'

test_expect_success 'the --leave-running image restores' '
	kill_tree $WPID &&
	test_status 0 "$GCKRESTORE" run.gck >restore.out 2>restore.err &&
	test_must_be_empty restore.err &&
	echo $WPID >expect &&
	test_cmp expect restore.out &&
	restored_ok $WPID
'

test_expect_success 'gpuckpt -p PID | gpurestore' '
	kill_tree $WPID &&
	start pipe -m 64 &&
	verify_workload $WPID &&
	before=$VCOUNTER &&
	{ "$GCKPT" -p $WPID 2>ckpt.err; echo $? >ckpt.st; } |
	    "$GCKRESTORE" >restore.out 2>restore.err
	st=$?
	cat ckpt.err restore.err
	test $st -eq 0 &&
	echo 0 >expect &&
	test_cmp expect ckpt.st &&
	test_must_be_empty ckpt.err &&
	test_must_be_empty restore.err &&
	echo $WPID >expect &&
	test_cmp expect restore.out &&
	restored_ok $WPID &&
	test $VCOUNTER -gt $before
'

test_expect_success 'gpuckpt --suspend takes the process off the GPU' '
	kill_tree $WPID &&
	start suspend -m 64 &&
	verify_workload $WPID &&
	before=$VCOUNTER &&
	test_status 0 "$GCKPT" --suspend -p $WPID >stdout 2>stderr &&
	test_must_be_empty stdout &&
	test_must_be_empty stderr &&
	sleep 1 &&
	proc_running $WPID &&
	test "$(proc_field $WPID 22)" = "$WSTART" &&
	if test -n "$SMI"; then
		gpu_pids >pids &&
		! grep -x $WPID pids
	fi
'

test_expect_success 'gpurestore --resume puts it back' '
	test_status 0 "$GCKRESTORE" --resume -p $WPID >stdout 2>stderr &&
	test_must_be_empty stderr &&
	test "$(proc_field $WPID 22)" = "$WSTART" &&
	gpu_ok $WPID &&
	test $VCOUNTER -gt $before &&
	if test -n "$SMI"; then
		gpu_pids >pids &&
		test_grep "^$WPID\$" pids
	fi
'

test_expect_success 'nothing left in TMPDIR' '
	kill_tree $WPID &&
	test -z "$(ls -A "$TMPDIR")"
'

test_done
