#!/bin/sh
test_description='the stand-in CUDA driver and NVML that the tests run on'
. "$GCK_SRCDIR/lib.sh"

FAKECUDA_DIR=$TRASH/fake
LD_LIBRARY_PATH=$GCK_TESTDIR/fakecuda
GPUCKPT_LIBCUDA=$GCK_TESTDIR/fakecuda/libcuda.so.1
GPUCKPT_LIBNVML=$GCK_TESTDIR/fakecuda/libnvidia-ml.so.1
export FAKECUDA_DIR LD_LIBRARY_PATH GPUCKPT_LIBCUDA GPUCKPT_LIBNVML
unset FAKECUDA_CALL_TIMEOUT_MS
WORKLOAD=$GCK_TESTDIR/cudawork
FAKECTL=$GCK_TESTDIR/fakecuda/fakectl
F=$FAKECUDA_DIR

# Two GPUs of one chip, one of another; D, of the first chip but small,
# comes later.
A=GPU-11111111-2222-3333-4444-555555555555
B=GPU-22222222-2222-3333-4444-555555555555
C=GPU-33333333-2222-3333-4444-555555555555
D=GPU-44444444-2222-3333-4444-555555555555
X=GPU-55555555-2222-3333-4444-555555555555	# never in gpus
H100='NVIDIA H100 80GB HBM3'
A100='NVIDIA A100-SXM4-40GB'
GIB=1073741824
MEM16=16781312		# 16 MiB and the page of the counter
mkdir "$F" || exit 1
cat >"$F/gpus" <<EOF
$A 9.0 $GIB 0000:01:00.0 NVIDIA H100 80GB HBM3
$B 9.0 $GIB 0000:02:00.0 NVIDIA H100 80GB HBM3
# a comment
$C 8.0 $GIB 0000:03:00.0 NVIDIA A100-SXM4-40GB
EOF

started=
test_cleanup() {
	test -n "$started" && kill_tree $started >/dev/null 2>&1
	:
}

start() {
	start_workload "$@" || return 1
	started="$started $WPID"
}

# counter UUID PID: the device counter of a workload started with -m 16,
# read from its memory file, where it follows the 16 MiB buffer.
counter() {
	od -An -tu8 -j 16777216 -N 8 "$F/mem/$1/$2" | tr -d ' '
}

# fails ERROR ACTION PID [ARGS]: fakectl fails with ERROR and says so.
fails() {
	_err=$1
	shift
	test_status 1 "$FAKECTL" "$@" >out 2>err &&
	test_must_be_empty out &&
	echo "fakectl: $1 $2: $_err" >expect &&
	test_cmp expect err
}

# ok ACTION PID [ARGS]: fakectl succeeds and prints nothing.
ok() {
	test_status 0 "$FAKECTL" "$@" >out 2>err &&
	test_must_be_empty out &&
	test_must_be_empty err
}

state_is() {
	echo "$2" >expect &&
	"$FAKECTL" state "$1" >actual &&
	test_cmp expect actual
}

# gpu_line UUID: what NVML says of that GPU.
gpu_line() {
	"$FAKECTL" nvml >nvml.out &&
	grep " $1 " nvml.out
}

# no_fd_into_fake PID: the process holds no descriptor into $F.
no_fd_into_fake() {
	! ls -l /proc/$1/fd | grep -F "$F"
}

# inner STATUS: the last field of NSpid in a /proc status file: the PID
# of that task in its own PID namespace.
inner() {
	awk '/^NSpid:/ { print $NF }' "$1" 2>/dev/null
}

# visible LIST NAME [cudawork options]: start, with
# CUDA_VISIBLE_DEVICES=LIST.
visible() {
	CUDA_VISIBLE_DEVICES=$1
	export CUDA_VISIBLE_DEVICES
	shift
	start "$@"
	_st=$?
	unset CUDA_VISIBLE_DEVICES
	return $_st
}

# devices LIST: the devices fakectl sees with CUDA_VISIBLE_DEVICES=LIST.
devices() {
	env CUDA_VISIBLE_DEVICES="$1" "$FAKECTL" devices
}

# last_verify STATUS: the last verify line of a workload.
last_verify() {
	grep "^verify " "$1" | tail -n 1
}

# log_has PATTERN: a line of the log matches.
log_has() {
	test_grep "$1" "$F/log"
}

# The lines of the log for PID and ACTION.
log_count() {
	grep -c "^$2 $1 " "$F/log"
}

test_expect_success 'fakectl: usage errors exit 2' '
	test_status 2 "$FAKECTL" >out 2>err &&
	test_must_be_empty out &&
	test_grep "^usage: fakectl" err &&
	test_status 2 "$FAKECTL" lock pid 2>err &&
	test_status 2 "$FAKECTL" frob 1 2>err &&
	test_status 2 "$FAKECTL" restore 1 $A 2>err &&
	test_status 2 "$FAKECTL" restore 1 $A=GPU-1 2>err &&
	test_status 2 "$FAKECTL" state 1 2 2>err &&
	test_status 2 "$FAKECTL" checkpoint-storage 1 2>err &&
	test_status 2 "$FAKECTL" restore-storage 1 2>err &&
	test_status 2 "$FAKECTL" -x lock 1 2>err &&
	test_status 2 "$FAKECTL" checkpoint-storage 1 f $A=$B 2>err
'

test_expect_success 'without FAKECUDA_DIR there is no device' '
	test_status 1 env -u FAKECUDA_DIR "$FAKECTL" state 1 >out 2>err &&
	test_must_be_empty out &&
	echo "fakectl: state 1: CUDA_ERROR_NO_DEVICE" >expect &&
	test_cmp expect err &&
	test_status 1 env -u FAKECUDA_DIR "$WORKLOAD" -f nodev.status &&
	test_grep "^error pid [0-9]*: cuInit: CUDA_ERROR_NO_DEVICE\$" \
	    nodev.status
'

test_expect_success 'a process without CUDA: CUDA_ERROR_NOT_INITIALIZED' '
	fails CUDA_ERROR_NOT_INITIALIZED state $$ &&
	fails CUDA_ERROR_NOT_INITIALIZED lock $$ &&
	fails CUDA_ERROR_NOT_INITIALIZED tid $$
'

test_expect_success 'cudawork on a GPU that is not there' '
	test_status 1 "$WORKLOAD" -d 7 -f nogpu.status &&
	test_grep "^error pid [0-9]*: cuDeviceGet 7: CUDA_ERROR_INVALID_DEVICE\$" \
	    nogpu.status
'

test_expect_success 'NVML lists the GPUs and the default driver' '
	"$FAKECTL" nvml >actual &&
	cat >expect <<-EOF &&
	driver 580.65.06
	0 $A total=$GIB free=$GIB used=0 procs=- NVIDIA H100 80GB HBM3
	1 $B total=$GIB free=$GIB used=0 procs=- NVIDIA H100 80GB HBM3
	2 $C total=$GIB free=$GIB used=0 procs=- NVIDIA A100-SXM4-40GB
	EOF
	test_cmp expect actual
'

test_expect_success 'start a CUDA process on GPU 0' '
	start w1 -m 16 &&
	W1=$WPID &&
	W1STATUS=$WSTATUS &&
	test_grep "^ready pid=$W1 sum=[0-9a-f]\{16\} child=0 mib=16 nproc=1 devs=$A\$" \
	    $W1STATUS &&
	state_is $W1 RUNNING &&
	test "$(stat -c %s "$F/mem/$A/$W1")" = $MEM16 &&
	tid=$("$FAKECTL" tid $W1) &&
	test "$tid" = "$(cat "$F/proc/$W1/tid")" &&
	test "$tid" != $W1 &&
	echo cuda-restore >expect &&
	test_cmp expect /proc/$W1/task/$tid/comm &&
	grep -F "$F/mem/$A/$W1" /proc/$W1/maps &&
	no_fd_into_fake $W1
'

test_expect_success 'NVML sees its memory' '
	gpu_line $A >actual &&
	echo "0 $A total=$GIB free=$((GIB - MEM16)) used=$MEM16 procs=$W1:$MEM16 NVIDIA H100 80GB HBM3" >expect &&
	test_cmp expect actual
'

test_expect_success 'the device counter moves while the process runs' '
	c1=$(counter $A $W1) &&
	sleep 0.3 &&
	c2=$(counter $A $W1) &&
	test "$c2" -gt "$c1" &&
	verify_workload $W1 $W1STATUS &&
	test_grep "^verify ok .* child=0 devs=$A\$" $W1STATUS
'

test_expect_success 'lock: LOCKED, and the counter stops' '
	ok lock $W1 &&
	state_is $W1 LOCKED &&
	c1=$(counter $A $W1) &&
	sleep 0.3 &&
	c2=$(counter $A $W1) &&
	test "$c1" = "$c2" &&
	echo $c2 >locked.counter
'

test_expect_success 'LOCKED: lock and restore are refused' '
	fails CUDA_ERROR_ILLEGAL_STATE lock $W1 &&
	fails CUDA_ERROR_ILLEGAL_STATE restore $W1 &&
	state_is $W1 LOCKED
'

test_expect_success 'checkpoint: CHECKPOINTED, and the GPU memory is free' '
	ok checkpoint $W1 &&
	state_is $W1 CHECKPOINTED &&
	test ! -e "$F/mem/$A/$W1" &&
	! grep -F "$F/" /proc/$W1/maps &&
	no_fd_into_fake $W1 &&
	gpu_line $A >actual &&
	echo "0 $A total=$GIB free=$GIB used=0 procs=- NVIDIA H100 80GB HBM3" >expect &&
	test_cmp expect actual
'

test_expect_success 'CHECKPOINTED: lock, checkpoint and unlock are refused' '
	fails CUDA_ERROR_ILLEGAL_STATE lock $W1 &&
	fails CUDA_ERROR_ILLEGAL_STATE checkpoint $W1 &&
	fails CUDA_ERROR_ILLEGAL_STATE unlock $W1 &&
	state_is $W1 CHECKPOINTED
'

test_expect_success 'restore onto a GPU of another chip: INVALID_DEVICE' '
	fails CUDA_ERROR_INVALID_DEVICE restore $W1 $A=$C &&
	state_is $W1 CHECKPOINTED &&
	test ! -e "$F/mem/$C/$W1"
'

test_expect_success 'restore onto a GPU that is not there: INVALID_DEVICE' '
	fails CUDA_ERROR_INVALID_DEVICE restore $W1 $A=$D &&
	state_is $W1 CHECKPOINTED
'

test_expect_success 'restore with pairs that miss its GPU: INVALID_VALUE' '
	fails CUDA_ERROR_INVALID_VALUE restore $W1 $B=$A &&
	state_is $W1 CHECKPOINTED
'

test_expect_success 'restore onto a GPU too small: OUT_OF_MEMORY' '
	echo "$D 9.0 8388608 0000:04:00.0 NVIDIA H100 80GB HBM3" >>"$F/gpus" &&
	fails CUDA_ERROR_OUT_OF_MEMORY restore $W1 $A=$D &&
	state_is $W1 CHECKPOINTED &&
	test ! -e "$F/mem/$D/$W1" &&
	test ! -e "$F/mem/$A/$W1"
'

test_expect_success 'restore onto another GPU of the same chip' '
	ok restore $W1 $C=$A $A=$B &&
	state_is $W1 LOCKED &&
	test ! -e "$F/mem/$A/$W1" &&
	test "$(stat -c %s "$F/mem/$B/$W1")" = $MEM16 &&
	test "$(counter $B $W1)" = "$(cat locked.counter)" &&
	gpu_line $B >actual &&
	test_grep " used=$MEM16 procs=$W1:$MEM16 " actual
'

test_expect_success 'unlock: the process goes on with its memory, on GPU 1' '
	ok unlock $W1 &&
	state_is $W1 RUNNING &&
	verify_workload $W1 $W1STATUS &&
	test_grep "^verify ok .* devs=$B\$" $W1STATUS &&
	test "$VCOUNTER" -gt "$(cat locked.counter)" &&
	c1=$(counter $B $W1) &&
	sleep 0.2 &&
	test "$(counter $B $W1)" -gt "$c1"
'

test_expect_success 'restore without pairs keeps the GPU' '
	ok lock $W1 &&
	ok checkpoint $W1 &&
	test ! -e "$F/mem/$B/$W1" &&
	ok restore $W1 &&
	test -e "$F/mem/$B/$W1" &&
	ok unlock $W1 &&
	verify_workload $W1 $W1STATUS &&
	test_grep "^verify ok .* devs=$B\$" $W1STATUS
'

test_expect_success 'the log: each action, its times, result and state' '
	log_has "^lock $W1 [0-9]* [0-9]* CUDA_SUCCESS LOCKED\$" &&
	log_has "^lock $W1 [0-9]* [0-9]* CUDA_ERROR_ILLEGAL_STATE LOCKED\$" &&
	log_has "^checkpoint $W1 [0-9]* [0-9]* CUDA_SUCCESS CHECKPOINTED\$" &&
	log_has "^restore $W1 [0-9]* [0-9]* CUDA_ERROR_INVALID_DEVICE CHECKPOINTED $A=$C\$" &&
	log_has "^restore $W1 [0-9]* [0-9]* CUDA_ERROR_OUT_OF_MEMORY CHECKPOINTED $A=$D\$" &&
	log_has "^restore $W1 [0-9]* [0-9]* CUDA_SUCCESS LOCKED $C=$A $A=$B\$" &&
	log_has "^restore $W1 [0-9]* [0-9]* CUDA_SUCCESS LOCKED\$" &&
	log_has "^unlock $W1 [0-9]* [0-9]* CUDA_SUCCESS RUNNING\$" &&
	test "$(log_count $W1 lock)" -eq 4 &&
	test "$(log_count $W1 restore)" -eq 7 &&
	awk "\$3 > \$4 || NF < 6 { bad = 1 } END { exit bad }" "$F/log"
'

test_expect_success 'a stopped process cannot be locked: TIMEOUT' '
	n=$(log_count $W1 lock) &&
	kill -STOP $W1 &&
	wait_stopped $W1 &&
	FAKECUDA_CALL_TIMEOUT_MS=300 fails CUDA_ERROR_TIMEOUT lock $W1 &&
	state_is $W1 RUNNING &&
	kill -CONT $W1 &&
	sleep 0.2 &&
	state_is $W1 RUNNING &&
	test "$(log_count $W1 lock)" -eq $n &&
	verify_workload $W1 $W1STATUS
'

test_expect_success 'an injected hang: NOT_READY after the timeout' '
	mkdir "$F/inject" &&
	echo hang >"$F/inject/lock.$W1" &&
	fails CUDA_ERROR_NOT_READY lock $W1 200 &&
	rm "$F/inject/lock.$W1" &&
	state_is $W1 RUNNING &&
	tail -n 1 "$F/log" >last &&
	test_grep "^lock $W1 [0-9]* [0-9]* CUDA_ERROR_NOT_READY RUNNING\$" last &&
	awk "{ exit !(\$4 - \$3 >= 200000000) }" last &&
	verify_workload $W1 $W1STATUS
'

test_expect_success 'an injected error leaves the state as it was' '
	echo CUDA_ERROR_OUT_OF_MEMORY >"$F/inject/checkpoint" &&
	ok lock $W1 &&
	fails CUDA_ERROR_OUT_OF_MEMORY checkpoint $W1 &&
	state_is $W1 LOCKED &&
	test -e "$F/mem/$B/$W1" &&
	rm "$F/inject/checkpoint" &&
	ok checkpoint $W1 &&
	ok restore $W1 &&
	ok unlock $W1 &&
	verify_workload $W1 $W1STATUS
'

test_expect_success 'an injected FAILED is final' '
	start w2 -m 16 -d 2 &&
	W2=$WPID &&
	W2STATUS=$WSTATUS &&
	test -e "$F/mem/$C/$W2" &&
	echo "CUDA_ERROR_UNKNOWN FAILED" >"$F/inject/lock.$W2" &&
	fails CUDA_ERROR_UNKNOWN lock $W2 &&
	rm "$F/inject/lock.$W2" &&
	state_is $W2 FAILED &&
	fails CUDA_ERROR_ILLEGAL_STATE lock $W2 &&
	fails CUDA_ERROR_ILLEGAL_STATE unlock $W2 &&
	state_is $W2 FAILED &&
	test_must_fail verify_workload $W2 $W2STATUS &&
	test_grep "^verify FAIL pid $W2: cuMemcpy[DH]to[DH]: CUDA_ERROR_UNKNOWN\$" \
	    $W2STATUS &&
	state_is $W1 RUNNING &&
	kill_tree $W2
'

test_expect_success 'a tree of three processes on two GPUs' '
	start tree -n 3 -m 16 -d 0,1 &&
	T=$WPID &&
	TSTATUS=$WSTATUS &&
	TCHILD=$WCHILD &&
	test_grep "^ready pid=$T .* child=$TCHILD mib=16 nproc=3 devs=$A,$B,$A\$" \
	    $TSTATUS &&
	tree=$(echo $T $(proc_descendants $T)) &&
	test $(echo $tree | wc -w) -eq 3 &&
	for p in $tree; do state_is $p RUNNING || return 1; done &&
	gpu_line $A >actual &&
	test_grep " used=$((2 * MEM16)) procs=[0-9]*:$MEM16,[0-9]*:$MEM16 " \
	    actual &&
	gpu_line $B >actual &&
	test_grep " procs=\\($W1:$MEM16,$TCHILD:$MEM16\\|$TCHILD:$MEM16,$W1:$MEM16\\) " \
	    actual &&
	verify_workload $T $TSTATUS &&
	test_grep "^verify ok .* child=$TCHILD devs=$A,$B,$A\$" $TSTATUS
'

test_expect_success 'the tree is locked in parallel, one process at a time each' '
	mkdir "$F/delay" &&
	echo 500 >"$F/delay/lock" &&
	for p in $tree; do
		{ "$FAKECTL" lock $p; echo $? >lock.$p; } &
	done &&
	wait &&
	rm "$F/delay/lock" &&
	for p in $tree; do
		echo 0 >expect &&
		test_cmp expect lock.$p &&
		state_is $p LOCKED || return 1
	done &&
	for p in $tree; do
		grep "^lock $p [0-9]* [0-9]* CUDA_SUCCESS LOCKED\$" "$F/log" ||
		return 1
	done >locks &&
	test_line_count locks 3 &&
	awk "{ if (\$3 > s) s = \$3; if (e == 0 || \$4 < e) e = \$4;
	    if (\$4 - \$3 < 500000000) short = 1 }
	    END { exit short || s >= e }" locks
'

test_expect_success 'the tree moves across GPUs: each GPU onto the other' '
	for p in $tree; do ok checkpoint $p || return 1; done &&
	gpu_line $A >actual &&
	test_grep " used=0 procs=- " actual &&
	for p in $tree; do ok restore $p $A=$B $B=$A || return 1; done &&
	for p in $tree; do ok unlock $p || return 1; done &&
	verify_workload $T $TSTATUS &&
	test_grep "^verify ok .* child=$TCHILD devs=$B,$A,$B\$" $TSTATUS
'

test_expect_success 'driver 12040: no checkpoint API' '
	echo "12040 550.54.15" >"$F/driver" &&
	fails CUDA_ERROR_NOT_FOUND state $W1 &&
	fails CUDA_ERROR_NOT_FOUND lock $W1 &&
	"$FAKECTL" nvml >nvml.out &&
	test_grep "^driver 550.54.15\$" nvml.out
'

test_expect_success 'driver 12080: no restore onto other GPUs' '
	echo "12080 570.86.10" >"$F/driver" &&
	ok lock $W1 &&
	ok checkpoint $W1 &&
	fails CUDA_ERROR_NOT_SUPPORTED restore $W1 $B=$A &&
	state_is $W1 CHECKPOINTED &&
	ok restore $W1 &&
	ok unlock $W1 &&
	rm "$F/driver" &&
	verify_workload $W1 $W1STATUS
'

test_expect_success 'a process that is gone: NOT_INITIALIZED, its GPU free' '
	kill_tree $W1 &&
	fails CUDA_ERROR_NOT_INITIALIZED state $W1 &&
	test -e "$F/mem/$B/$W1" &&
	gpu_line $B >actual &&
	! grep "[=,]$W1:" actual
'

test_expect_success 'fakectl and a cudawork that exits leave nothing in proc/' '
	ls "$F/proc" | sort >actual &&
	echo $W1 $W2 $tree | tr " " "\n" | sort >expect &&
	test_cmp expect actual
'

# CUDA_VISIBLE_DEVICES, as a batch scheduler sets it: a process sees
# the GPUs it names, numbered from 0 in its order; NVML sees them all.
test_expect_success 'without CUDA_VISIBLE_DEVICES every GPU is a device' '
	"$FAKECTL" devices >actual &&
	cat >expect <<-EOF &&
	0 $A $H100
	1 $B $H100
	2 $C $A100
	3 $D $H100
	EOF
	test_cmp expect actual
'

test_expect_success 'CUDA_VISIBLE_DEVICES=1: device 0 is the second GPU' '
	devices 1 >actual &&
	echo "0 $B $H100" >expect &&
	test_cmp expect actual &&
	visible 1 v1 -m 4 &&
	V1=$WPID &&
	V1STATUS=$WSTATUS &&
	test_grep "^ready pid=$V1 .* nproc=1 devs=$B\$" $V1STATUS &&
	test -e "$F/mem/$B/$V1" &&
	test ! -e "$F/mem/$A/$V1" &&
	verify_workload $V1 $V1STATUS &&
	last_verify $V1STATUS >last &&
	test_grep "^verify ok .* devs=$B\$" last &&
	test_status 1 env CUDA_VISIBLE_DEVICES=1 "$WORKLOAD" -d 1 \
	    -f one.status &&
	test_grep "^error pid [0-9]*: cuDeviceGet 1: CUDA_ERROR_INVALID_DEVICE\$" \
	    one.status
'

test_expect_success 'NVML and the checkpoint API ignore CUDA_VISIBLE_DEVICES' '
	env CUDA_VISIBLE_DEVICES=2 "$FAKECTL" nvml >actual &&
	test_line_count actual 5 &&
	grep "^1 $B .*[=,]$V1:[0-9]" actual &&
	env CUDA_VISIBLE_DEVICES=2 "$FAKECTL" state $V1 >actual &&
	echo RUNNING >expect &&
	test_cmp expect actual
'

test_expect_success 'CUDA_VISIBLE_DEVICES names a GPU by its UUID, or its start' '
	devices $C >actual &&
	echo "0 $C $A100" >expect &&
	test_cmp expect actual &&
	devices " GPU-44 ,GPU-11111111-2222-3333-4444-555555555555" >actual &&
	printf "0 %s %s\n1 %s %s\n" $D "$H100" $A "$H100" >expect &&
	test_cmp expect actual &&
	visible $C v2 -m 4 &&
	V2=$WPID &&
	test_grep "^ready pid=$V2 .* devs=$C\$" $WSTATUS &&
	test -e "$F/mem/$C/$V2" &&
	verify_workload $V2 &&
	last_verify $WSTATUS >last &&
	test_grep "^verify ok .* devs=$C\$" last &&
	kill_tree $V2
'

test_expect_success 'CUDA_VISIBLE_DEVICES=1,0: device 0 is GPU 1, device 1 GPU 0' '
	devices 1,0 >actual &&
	printf "0 %s %s\n1 %s %s\n" $B "$H100" $A "$H100" >expect &&
	test_cmp expect actual &&
	visible 1,0 swap -n 2 -m 4 -d 0,1 &&
	S=$WPID &&
	SSTATUS=$WSTATUS &&
	SCHILD=$WCHILD &&
	test_grep "^ready pid=$S .* child=$SCHILD mib=4 nproc=2 devs=$B,$A\$" \
	    $SSTATUS &&
	test -e "$F/mem/$B/$S" &&
	test -e "$F/mem/$A/$SCHILD" &&
	verify_workload $S $SSTATUS &&
	last_verify $SSTATUS >last &&
	test_grep "^verify ok .* child=$SCHILD devs=$B,$A\$" last
'

test_expect_success 'the list ends at an entry that names no GPU' '
	devices "2, 7,0" >actual &&
	echo "0 $C $A100" >expect &&
	test_cmp expect actual &&
	devices "3,1,-1,0" >actual &&
	printf "0 %s %s\n1 %s %s\n" $D "$H100" $B "$H100" >expect &&
	test_cmp expect actual &&
	devices "0,GPU-,1" >actual &&
	echo "0 $A $H100" >expect &&
	test_cmp expect actual
'

test_expect_success 'no GPU named, or one named twice: CUDA_ERROR_NO_DEVICE' '
	echo "fakectl: devices: CUDA_ERROR_NO_DEVICE" >expect &&
	for l in "" " " 7 x -1 ,1 GPU- GPU-9 $X MIG-1 1,1 "2,0,2" "1,$B" \
	    "GPU-3,2"; do
		test_status 1 env CUDA_VISIBLE_DEVICES="$l" "$FAKECTL" devices \
		    >out 2>err &&
		test_must_be_empty out &&
		test_cmp expect err || return 1
	done &&
	test_status 1 env CUDA_VISIBLE_DEVICES=0,0 "$WORKLOAD" -f dup.status &&
	test_grep "^error pid [0-9]*: cuInit: CUDA_ERROR_NO_DEVICE\$" dup.status
'

test_expect_success 'a restore with pairs moves the devices with the contexts' '
	for p in $S $SCHILD; do
		ok lock $p && ok checkpoint $p || return 1
	done &&
	ok restore $SCHILD $A=$D &&
	test -e "$F/mem/$D/$SCHILD" &&
	fails CUDA_ERROR_INVALID_VALUE restore $S $B=$A &&
	state_is $S CHECKPOINTED &&
	test ! -e "$F/mem/$A/$S" &&
	fails CUDA_ERROR_INVALID_DEVICE restore $S $B=$A $A=$X &&
	state_is $S CHECKPOINTED &&
	test ! -e "$F/mem/$A/$S" &&
	ok restore $S $B=$A $A=$B &&
	test -e "$F/mem/$A/$S" &&
	for p in $S $SCHILD; do ok unlock $p || return 1; done &&
	verify_workload $S $SSTATUS &&
	last_verify $SSTATUS >last &&
	test_grep "^verify ok .* child=$SCHILD devs=$A,$D\$" last
'

# Custom storage (driver API 13040): the caller copies the device memory
# out and in itself, and the process keeps no copy of it.

# rss_anon PID: the anonymous memory of a process, in kB.
rss_anon() {
	awk '/^RssAnon:/ { print $2 }' /proc/$1/status
}

# counter_in FILE: the counter of a -m 16 workload in a copy of its
# memory file.
counter_in() {
	od -An -tu8 -j 16777216 -N 8 "$1" | tr -d ' '
}

test_expect_success 'driver 13000: no custom storage, storage_out refused' '
	"$FAKECTL" driver >actual &&
	echo "api=13000 checkpoint=yes storage=no" >expect &&
	test_cmp expect actual &&
	start cs -m 16 &&
	CS=$WPID &&
	CSSTATUS=$WSTATUS &&
	ok lock $CS &&
	fails CUDA_ERROR_INVALID_VALUE checkpoint-storage $CS dump &&
	state_is $CS LOCKED &&
	test -e "$F/mem/$A/$CS" &&
	test ! -e dump.0 &&
	! grep "^checkpoint-storage $CS " "$F/log" &&
	anon=$(rss_anon $CS) &&
	ok checkpoint $CS &&
	test "$(rss_anon $CS)" -ge $((anon + 16384)) &&
	fails CUDA_ERROR_INVALID_VALUE restore-storage $CS dump &&
	state_is $CS CHECKPOINTED &&
	ok restore $CS &&
	ok unlock $CS &&
	verify_workload $CS $CSSTATUS
'

test_expect_success 'driver 13040: custom storage' '
	echo "13040 595.45.04" >"$F/driver" &&
	"$FAKECTL" driver >actual &&
	echo "api=13040 checkpoint=yes storage=yes" >expect &&
	test_cmp expect actual
'

test_expect_success 'a custom checkpoint copies the memory out, none stays in the process' '
	ok lock $CS &&
	cp "$F/mem/$A/$CS" mem.locked &&
	lc=$(counter_in mem.locked) &&
	ls "$F/proc" >proc.before &&
	ls "$F/mem/$A" | grep -vx $CS >mem.before &&
	anon=$(rss_anon $CS) &&
	"$FAKECTL" checkpoint-storage $CS dump >out 2>err &&
	test_must_be_empty err &&
	echo "0 $MEM16" >expect &&
	test_cmp expect out &&
	cmp mem.locked dump.0 &&
	state_is $CS CHECKPOINTED &&
	test "$(rss_anon $CS)" -lt $((anon + 4096)) &&
	test ! -e "$F/mem/$A/$CS" &&
	test ! -e "$F/proc/$CS/storage" &&
	! grep -F "$F/" /proc/$CS/maps &&
	no_fd_into_fake $CS &&
	ls "$F/proc" >proc.after &&
	test_cmp proc.before proc.after &&
	ls "$F/mem/$A" >mem.after &&
	test_cmp mem.before mem.after &&
	gpu_line $A >actual &&
	! grep "[=,]$CS:" actual &&
	log_has "^checkpoint-storage $CS [0-9]* [0-9]* CUDA_SUCCESS LOCKED\$" &&
	log_has "^complete $CS [0-9]* [0-9]* CUDA_SUCCESS CHECKPOINTED\$"
'

test_expect_success 'checkpointed to custom storage: a staged restore is refused' '
	fails CUDA_ERROR_INVALID_VALUE restore $CS &&
	state_is $CS CHECKPOINTED &&
	test ! -e "$F/mem/$A/$CS" &&
	fails CUDA_ERROR_ILLEGAL_STATE checkpoint-storage $CS again &&
	fails CUDA_ERROR_ILLEGAL_STATE unlock $CS &&
	state_is $CS CHECKPOINTED
'

test_expect_success 'a custom restore refuses what a restore refuses' '
	fails CUDA_ERROR_INVALID_DEVICE restore-storage $CS dump $A=$C &&
	fails CUDA_ERROR_OUT_OF_MEMORY restore-storage $CS dump $A=$D &&
	fails CUDA_ERROR_INVALID_VALUE restore-storage $CS dump $B=$A &&
	state_is $CS CHECKPOINTED &&
	test ! -e "$F/mem/$A/$CS" &&
	test ! -e "$F/mem/$C/$CS" &&
	test ! -e "$F/mem/$D/$CS" &&
	test ! -e "$F/proc/$CS/storage"
'

test_expect_success 'a custom restore brings the bytes back, onto another GPU' '
	"$FAKECTL" restore-storage $CS dump $A=$B >out 2>err &&
	test_must_be_empty err &&
	echo "0 $MEM16" >expect &&
	test_cmp expect out &&
	state_is $CS LOCKED &&
	cmp mem.locked "$F/mem/$B/$CS" &&
	test ! -e "$F/mem/$A/$CS" &&
	test ! -e "$F/proc/$CS/storage" &&
	log_has "^restore-storage $CS [0-9]* [0-9]* CUDA_SUCCESS CHECKPOINTED $A=$B\$" &&
	log_has "^complete $CS [0-9]* [0-9]* CUDA_SUCCESS LOCKED\$" &&
	ok unlock $CS &&
	state_is $CS RUNNING &&
	verify_workload $CS $CSSTATUS &&
	last_verify $CSSTATUS >last &&
	test_grep "^verify ok .* devs=$B\$" last &&
	test "$VCOUNTER" -gt "$lc" &&
	c1=$(counter $B $CS) &&
	sleep 0.2 &&
	test "$(counter $B $CS)" -gt "$c1"
'

test_expect_success 'the driver refuses bad streams, ranges and spent handles' '
	ok lock $CS &&
	"$FAKECTL" -x checkpoint-storage $CS dump >out 2>err &&
	test_must_be_empty err &&
	cat >expect.ckpt <<-EOF &&
	complete-null CUDA_ERROR_INVALID_HANDLE
	bad-stream CUDA_ERROR_INVALID_HANDLE
	dtoh-past-end CUDA_ERROR_INVALID_VALUE
	htod-read-only CUDA_ERROR_INVALID_VALUE
	0 $MEM16
	complete-again CUDA_ERROR_INVALID_HANDLE
	sync-ended CUDA_ERROR_INVALID_HANDLE
	dtoh-ended CUDA_ERROR_INVALID_HANDLE
	EOF
	test_cmp expect.ckpt out &&
	state_is $CS CHECKPOINTED &&
	"$FAKECTL" -x restore-storage $CS dump >out 2>err &&
	test_must_be_empty err &&
	sed s/htod-read-only/htod-past-end/ expect.ckpt >expect.restore &&
	test_cmp expect.restore out &&
	state_is $CS LOCKED &&
	ok unlock $CS &&
	verify_workload $CS $CSSTATUS
'

test_expect_success 'an injected storage error: nothing changes, a staged checkpoint still works' '
	echo CUDA_ERROR_NOT_SUPPORTED >"$F/inject/storage" &&
	ok lock $CS &&
	fails CUDA_ERROR_NOT_SUPPORTED checkpoint-storage $CS dump &&
	rm "$F/inject/storage" &&
	state_is $CS LOCKED &&
	test -e "$F/mem/$B/$CS" &&
	test ! -e "$F/proc/$CS/storage" &&
	log_has "^checkpoint-storage $CS [0-9]* [0-9]* CUDA_ERROR_NOT_SUPPORTED LOCKED\$" &&
	ok checkpoint $CS &&
	state_is $CS CHECKPOINTED &&
	fails CUDA_ERROR_INVALID_VALUE restore-storage $CS dump &&
	state_is $CS CHECKPOINTED &&
	test ! -e "$F/mem/$B/$CS" &&
	ok restore $CS &&
	ok unlock $CS &&
	verify_workload $CS $CSSTATUS
'

test_expect_success 'a failed copy out, then unlock: the process goes on with its memory' '
	echo CUDA_ERROR_LAUNCH_FAILED >"$F/inject/dtoh" &&
	ok lock $CS &&
	c1=$(counter $B $CS) &&
	fails CUDA_ERROR_LAUNCH_FAILED checkpoint-storage $CS dump &&
	rm "$F/inject/dtoh" &&
	state_is $CS LOCKED &&
	test -e "$F/proc/$CS/storage" &&
	test "$(stat -c %s "$F/mem/$B/$CS")" = $MEM16 &&
	ok unlock $CS &&
	state_is $CS RUNNING &&
	test ! -e "$F/proc/$CS/storage" &&
	verify_workload $CS $CSSTATUS &&
	test "$VCOUNTER" -gt "$c1"
'

test_expect_success 'an injected complete error: the process stays LOCKED with its memory' '
	echo CUDA_ERROR_UNKNOWN >"$F/inject/complete" &&
	ok lock $CS &&
	test_status 1 "$FAKECTL" checkpoint-storage $CS dump >out 2>err &&
	rm "$F/inject/complete" &&
	echo "fakectl: checkpoint-storage $CS: CUDA_ERROR_UNKNOWN" >expect &&
	test_cmp expect err &&
	log_has "^complete $CS [0-9]* [0-9]* CUDA_ERROR_UNKNOWN LOCKED\$" &&
	state_is $CS LOCKED &&
	test -e "$F/mem/$B/$CS" &&
	test ! -e "$F/proc/$CS/storage" &&
	ok unlock $CS &&
	verify_workload $CS $CSSTATUS
'

test_expect_success 'a complete after an unlock from elsewhere fails, changes nothing' '
	ok lock $CS || return 1
	rm -f dump.go
	"$FAKECTL" -w checkpoint-storage $CS dump >out 2>err &
	wpid=$!
	wait_for_line out "^0 $MEM16\$" 30 &&
	ok unlock $CS &&
	state_is $CS RUNNING &&
	test ! -e "$F/proc/$CS/storage" &&
	touch dump.go &&
	test_status 1 wait $wpid &&
	echo "fakectl: checkpoint-storage $CS: CUDA_ERROR_ILLEGAL_STATE" >expect &&
	test_cmp expect err &&
	log_has "^complete $CS [0-9]* [0-9]* CUDA_ERROR_ILLEGAL_STATE RUNNING\$" &&
	state_is $CS RUNNING &&
	test "$(stat -c %s "$F/mem/$B/$CS")" = $MEM16 &&
	verify_workload $CS $CSSTATUS
'

test_expect_success 'a failed copy in; a new custom restore starts over' '
	ok lock $CS &&
	cp "$F/mem/$B/$CS" mem.locked &&
	"$FAKECTL" checkpoint-storage $CS dump >out &&
	echo CUDA_ERROR_LAUNCH_FAILED >"$F/inject/htod" &&
	fails CUDA_ERROR_LAUNCH_FAILED restore-storage $CS dump $B=$A &&
	rm "$F/inject/htod" &&
	state_is $CS CHECKPOINTED &&
	test -e "$F/proc/$CS/storage" &&
	test -e "$F/mem/$A/$CS" &&
	"$FAKECTL" restore-storage $CS dump >out &&
	test ! -e "$F/mem/$A/$CS" &&
	cmp mem.locked "$F/mem/$B/$CS" &&
	state_is $CS LOCKED &&
	ok unlock $CS &&
	verify_workload $CS $CSSTATUS &&
	last_verify $CSSTATUS >last &&
	test_grep "^verify ok .* devs=$B\$" last &&
	rm "$F/driver" &&
	kill_tree $CS
'

# NCCL jobs: the ranks of ncclwork on the stand-in libnccl.so.2
# (fakenccl/), which share their buffers through CUDA IPC and wait for
# each other's flags inside the driver (cuStreamWaitValue32()).
NCCLWORK=$GCK_TESTDIR/ncclwork

# nccl_start NAME [ncclwork options]: the ranks of a job meeting in
# $TRASH/nccl.NAME; sets NPID (the root), NRANKS (every rank's PID, the
# root first), NR0 and NR1 (ranks 0 and 1) and NSTATUS.
nccl_start() {
	NSTATUS=$TRASH/$1.status
	FAKENCCL_DIR=$TRASH/nccl.$1
	shift
	rm -f "$NSTATUS"
	mkdir -p "$FAKENCCL_DIR" || return 1
	(FAKENCCL_DIR=$FAKENCCL_DIR \
	    LD_LIBRARY_PATH=$GCK_TESTDIR/fakecuda:$GCK_TESTDIR/fakenccl \
	    setsid "$NCCLWORK" -f "$NSTATUS" "$@" </dev/null >/dev/null 2>&1 &)
	wait_for_line "$NSTATUS" '^ready ' 60 || return 1
	NPID=$(sed -n 's/^ready pid=\([0-9]*\) .*/\1/p' "$NSTATUS")
	NRANKS=$(sed -n 's/^ready .* ranks=\([0-9,]*\) .*/\1/p' "$NSTATUS" |
	    tr , " ")
	test -n "$NPID" && test -n "$NRANKS" || return 1
	set -- $NRANKS
	NR0=$1
	NR1=${2:-}
	started="$started $NPID"
}

# nccl_verify: the root has every rank checked; sets NSTEP, its step.
nccl_verify() {
	ask_answer "$NSTATUS" '^verify ' $NPID || return 1
	case $_line in
	"verify ok step="*" ranks="*) ;;
	*)	echo >&2 "ncclwork $NPID: $_line"
		return 1 ;;
	esac
	NSTEP=$(echo "$_line" | sed 's/^verify ok step=\([0-9]*\) .*/\1/')
}

# nccl_past N: the root has checked a step past N, within 10 s; sets
# NSTEP.
nccl_past() {
	_i=0
	while nccl_verify; do
		test "$NSTEP" -gt "$1" && return 0
		_i=$((_i + 1))
		if test $_i -gt 50; then
			echo >&2 "ncclwork $NPID stays at step $NSTEP"
			return 1
		fi
		sleep 0.2
	done
	return 1
}

# nccl_ok: no rank of the job has failed.
nccl_ok() {
	if grep "^error " "$NSTATUS" >&2; then
		return 1
	fi
}

test_expect_success 'ncclwork: two ranks sum their steps through the stand-in NCCL' '
	nccl_start n1 -n 2 &&
	test $(echo $NRANKS | wc -w) -eq 2 &&
	test_grep "^ready pid=$NPID ranks=$NPID,$NR1 nranks=2 nccl=22907\$" \
	    $NSTATUS &&
	test "$(proc_descendants $NPID)" = $NR1 &&
	state_is $NR0 RUNNING &&
	state_is $NR1 RUNNING &&
	test -s "$F/mem/$A/$NR0" &&
	test -s "$F/mem/$B/$NR1" &&
	ls "$FAKENCCL_DIR"/*/ >files &&
	printf "up.0.0\nup.0.1\n" >expect &&
	test_cmp expect files &&
	ls "$F/ipc" | grep -c "^\\($NR0\\|$NR1\\)-" >count &&
	echo 2 >expect &&
	test_cmp expect count &&
	nccl_verify &&
	test_grep "^verify ok step=$NSTEP ranks=2\$" $NSTATUS &&
	s1=$NSTEP &&
	sleep 0.3 &&
	nccl_verify &&
	test $NSTEP -gt $s1 &&
	nccl_ok
'

test_expect_success 'a rank of it is not locked outside a job: it shares memory through IPC' '
	fails CUDA_ERROR_NOT_SUPPORTED lock $NR1 &&
	fails CUDA_ERROR_NOT_SUPPORTED lock $NR0 &&
	state_is $NR0 RUNNING &&
	state_is $NR1 RUNNING &&
	nccl_past $NSTEP &&
	nccl_ok &&
	kill_tree $NPID
'

test_expect_success 'ncclwork -c 5: communicators taken down and rebuilt, the sums right' '
	nccl_start n2 -n 3 -c 5 &&
	wait_for_line $NSTATUS "^restored rank=2 pid=[0-9]* step=20\$" 30 &&
	for r in 0 1 2; do
		for k in 5 10 15 20; do
			test_grep "^prepared rank=$r pid=[0-9]* step=$k\$" \
			    $NSTATUS &&
			test_grep "^restored rank=$r pid=[0-9]* step=$k\$" \
			    $NSTATUS || return 1
		done
	done &&
	nccl_past 20 &&
	test_grep "^verify ok step=$NSTEP ranks=3\$" $NSTATUS &&
	nccl_ok &&
	ls "$FAKENCCL_DIR"/*/ >files &&
	! grep "^up\\.0\\." files &&
	for r in 0 1 2; do
		test $(grep -c "\\.$r\$" files) -ge 1 &&
		test $(grep -c "\\.$r\$" files) -le 2 || return 1
	done &&
	kill_tree $NPID
'

# A rank that waits inside a collective for a peer that is locked cannot
# be locked: its call is in progress until the peer writes its flag.
test_expect_success 'a rank waiting in a collective for a locked peer: NOT_READY, then it goes on' '
	echo "13010 610.10.01" >"$F/driver" &&
	: >"$TRASH/nccl.job" &&
	CUDA_CHECKPOINT_JOB_FILE=$TRASH/nccl.job &&
	export CUDA_CHECKPOINT_JOB_FILE &&
	nccl_start n3 -n 2 -d 3000 &&
	nccl_verify &&
	s1=$NSTEP &&
	ok lock $NR1 2000 &&
	state_is $NR1 LOCKED &&
	sleep 0.2 &&
	fails CUDA_ERROR_NOT_READY lock $NR0 500 &&
	tail -n 1 "$F/log" >last &&
	test_grep "^lock $NR0 [0-9]* [0-9]* CUDA_ERROR_NOT_READY RUNNING\$" last &&
	awk "{ exit !(\$4 - \$3 >= 500000000) }" last &&
	state_is $NR0 RUNNING &&
	state_is $NR1 LOCKED &&
	ok unlock $NR1 &&
	nccl_past $s1 &&
	nccl_ok &&
	kill_tree $NPID
'
unset CUDA_CHECKPOINT_JOB_FILE
rm -f "$F/driver"

test_expect_success 'after ncclCheckpointPrepare no IPC is left: the ranks are locked outside a job' '
	nccl_start n4 -n 2 -c 5 -h 3000 &&
	wait_for_line $NSTATUS "^prepared rank=0 pid=$NR0 step=5\$" 30 &&
	wait_for_line $NSTATUS "^prepared rank=1 pid=$NR1 step=5\$" 30 &&
	! ls "$F/ipc" | grep "^\\($NR0\\|$NR1\\)-" &&
	ok lock $NR0 &&
	ok lock $NR1 &&
	state_is $NR0 LOCKED &&
	state_is $NR1 LOCKED &&
	ok unlock $NR1 &&
	ok unlock $NR0 &&
	wait_for_line $NSTATUS "^restored rank=1 pid=$NR1 step=5\$" 30 &&
	nccl_past 5 &&
	nccl_ok &&
	kill_tree $NPID
'

# A CUDA process in a PID namespace of its own keeps its files under its
# PID there; from here it is driven, and NVML names it, by its PID here.
if test "$(id -u)" -eq 0 || test "$CI" = true; then
	test_expect_success 'a CUDA process in a PID namespace, driven by its PID here' '
		rm -f "$TRASH/ns.status" &&
		unshare --pid --fork --mount-proc "$GCK_TESTDIR/reaper" sh -c \
		    "setsid \"$WORKLOAD\" -m 16 -d 2 -f \"$TRASH/ns.status\" \
		    </dev/null >/dev/null 2>&1 & wait" </dev/null >/dev/null 2>&1 &
		nsproc=$! &&
		started="$started $nsproc" &&
		wait_for_line "$TRASH/ns.status" "^ready " 60 &&
		NW=$(sed -n "s/^ready pid=\([0-9]*\).*/\1/p" "$TRASH/ns.status") &&
		NH= &&
		for p in $(proc_descendants $nsproc); do
			test "$(inner /proc/$p/status)" = "$NW" && NH=$p
		done &&
		test -n "$NH" &&
		test "$NH" != "$NW" &&
		test "$(readlink /proc/$NH/ns/pid)" != "$(readlink /proc/self/ns/pid)" &&
		test -e "$F/mem/$C/$NW" &&
		test ! -e "$F/mem/$C/$NH" &&
		state_is $NH RUNNING &&
		tid=$("$FAKECTL" tid $NH) &&
		test "$(inner /proc/$NH/task/$tid/status)" = "$(cat "$F/proc/$NW/tid")" &&
		test "$tid" != "$(cat "$F/proc/$NW/tid")" &&
		echo cuda-restore >expect &&
		test_cmp expect /proc/$NH/task/$tid/comm &&
		gpu_line $C >actual &&
		echo "2 $C total=$GIB free=$((GIB - MEM16)) used=$MEM16 procs=$NH:$MEM16 NVIDIA A100-SXM4-40GB" >expect &&
		test_cmp expect actual
	'

	test_expect_success 'lock, checkpoint, restore and unlock it by that PID' '
		ok lock $NH &&
		state_is $NH LOCKED &&
		c1=$(counter $C $NW) &&
		sleep 0.3 &&
		test "$(counter $C $NW)" = "$c1" &&
		ok checkpoint $NH &&
		state_is $NH CHECKPOINTED &&
		test ! -e "$F/mem/$C/$NW" &&
		gpu_line $C >actual &&
		test_grep " used=0 procs=- " actual &&
		ok restore $NH &&
		state_is $NH LOCKED &&
		test "$(counter $C $NW)" = "$c1" &&
		gpu_line $C >actual &&
		test_grep " used=$MEM16 procs=$NH:$MEM16 " actual &&
		ok unlock $NH &&
		state_is $NH RUNNING &&
		verify_workload $NH "$TRASH/ns.status" &&
		test "$VCOUNTER" -gt "$c1" &&
		for a in lock checkpoint restore unlock; do
			log_has "^$a $NW [0-9]* [0-9]* CUDA_SUCCESS " || return 1
		done &&
		! grep "^[a-z]* $NH " "$F/log" &&
		kill_tree $nsproc &&
		gpu_line $C >actual &&
		test_grep " used=0 procs=- " actual
	'
else
	for _t in 'a CUDA process in a PID namespace, driven by its PID here' \
	    'lock, checkpoint, restore and unlock it by that PID'; do
		test_count=$((test_count + 1))
		echo "ok $test_count - $_t # SKIP no root"
	done
fi

# A CUDA process checkpointed by the driver is an ordinary process for
# CRIU; after a CRIU restore its restore thread goes on.
CRIU=${GCK_CRIU:-$(PATH=$PATH:/usr/local/sbin:/usr/sbin:/sbin \
    command -v criu)}
if test "$(id -u)" -eq 0 && test -n "$CRIU" || test "$CI" = true; then
	test_expect_success 'CRIU dumps and restores a checkpointed process' '
		start w3 -m 16 -d 1 &&
		W3=$WPID &&
		ok lock $W3 &&
		ok checkpoint $W3 &&
		mkdir img &&
		CRIU_FAULT=130 "$CRIU" dump -t $W3 -D img -o dump.log &&
		wait_gone $W3 &&
		fails CUDA_ERROR_NOT_INITIALIZED state $W3 &&
		CRIU_FAULT=130 "$CRIU" restore -d -D img -o restore.log &&
		state_is $W3 CHECKPOINTED &&
		ok restore $W3 $B=$A &&
		ok unlock $W3 &&
		verify_workload $W3 &&
		test_grep "^verify ok .* devs=$A\$" $WSTATUS
	'

	# Whether a process was checkpointed to custom storage lives in
	# its memory: a new caller restores its image from storage.
	test_expect_success 'CRIU dumps a process checkpointed to custom storage' '
		echo "13040 595.45.04" >"$F/driver" &&
		start w4 -m 16 -d 1 &&
		W4=$WPID &&
		ok lock $W4 &&
		cp "$F/mem/$B/$W4" w4.locked &&
		"$FAKECTL" checkpoint-storage $W4 w4dump >out &&
		mkdir img4 &&
		CRIU_FAULT=130 "$CRIU" dump -t $W4 -D img4 -o dump.log &&
		wait_gone $W4 &&
		CRIU_FAULT=130 "$CRIU" restore -d -D img4 -o restore.log &&
		state_is $W4 CHECKPOINTED &&
		fails CUDA_ERROR_INVALID_VALUE restore $W4 $B=$A &&
		"$FAKECTL" restore-storage $W4 w4dump $B=$A >out &&
		cmp w4.locked "$F/mem/$A/$W4" &&
		ok unlock $W4 &&
		rm "$F/driver" &&
		verify_workload $W4 &&
		test_grep "^verify ok .* devs=$A\$" $WSTATUS &&
		kill_tree $W4
	'

	# Our tools see every GPU, whatever CUDA_VISIBLE_DEVICES says; the
	# process keeps the GPUs it sees, and its device 0 moves with it.
	test_expect_success 'CUDA_VISIBLE_DEVICES=0, checkpointed, restored onto GPU 1' '
		visible 0 v3 -m 4 &&
		V3=$WPID &&
		V3STATUS=$WSTATUS &&
		test_grep "^ready pid=$V3 .* devs=$A\$" $V3STATUS &&
		env CUDA_VISIBLE_DEVICES=2 "$GCKPT" -p $V3 -o v3.gck 2>err &&
		test_must_be_empty err &&
		wait_gone $V3 &&
		: >"$F/log" &&
		env CUDA_VISIBLE_DEVICES=2 "$GCKRESTORE" --gpu-map 0=1 \
		    --pidfile v3.pid v3.gck >out 2>err &&
		test_must_be_empty err &&
		R3=$(cat v3.pid) &&
		started="$started $R3" &&
		log_has "^restore $V3 [0-9]* [0-9]* CUDA_SUCCESS LOCKED $A=$B\$" &&
		state_is $R3 RUNNING &&
		test -e "$F/mem/$B/$V3" &&
		test ! -e "$F/mem/$A/$V3" &&
		verify_workload $R3 $V3STATUS &&
		last_verify $V3STATUS >last &&
		test_grep "^verify ok .* devs=$B\$" last &&
		kill_tree $R3
	'

	# An NCCL job taken down by ncclCheckpointPrepare() holds no CUDA
	# IPC: locked, checkpointed and dumped outside a job; once restored
	# and unlocked its ranks rebuild their communicator and go on.
	test_expect_success 'CRIU dumps an NCCL job that ncclCheckpointPrepare took down' '
		nccl_start n5 -n 2 -c 5 -h 3000 &&
		wait_for_line $NSTATUS "^prepared rank=0 pid=$NR0 step=5\$" 30 &&
		wait_for_line $NSTATUS "^prepared rank=1 pid=$NR1 step=5\$" 30 &&
		ok lock $NR0 &&
		ok lock $NR1 &&
		ok checkpoint $NR0 &&
		ok checkpoint $NR1 &&
		mkdir img5 &&
		CRIU_FAULT=130 "$CRIU" dump -t $NPID -D img5 -o dump.log &&
		wait_gone $NR0 &&
		wait_gone $NR1 &&
		CRIU_FAULT=130 "$CRIU" restore -d -D img5 -o restore.log &&
		state_is $NR0 CHECKPOINTED &&
		state_is $NR1 CHECKPOINTED &&
		ok restore $NR0 &&
		ok restore $NR1 &&
		ok unlock $NR0 &&
		ok unlock $NR1 &&
		wait_for_line $NSTATUS "^restored rank=1 pid=$NR1 step=5\$" 30 &&
		nccl_past 5 &&
		nccl_ok &&
		kill_tree $NPID
	'
else
	for _t in 'CRIU dumps and restores a checkpointed process' \
	    'CRIU dumps a process checkpointed to custom storage' \
	    'CUDA_VISIBLE_DEVICES=0, checkpointed, restored onto GPU 1' \
	    'CRIU dumps an NCCL job that ncclCheckpointPrepare took down'; do
		test_count=$((test_count + 1))
		echo "ok $test_count - $_t # SKIP no root or no criu"
	done
fi

test_done
