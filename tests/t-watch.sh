#!/bin/sh
test_description='gpuwatch: the GPU health events that call for action, from NVML'
. "$GCK_SRCDIR/lib.sh"

FAKECUDA_DIR=$TRASH/fake
GPUCKPT_LIBNVML=$GCK_TESTDIR/fakecuda/libnvidia-ml.so.1
export FAKECUDA_DIR GPUCKPT_LIBNVML
unset CUDA_VISIBLE_DEVICES
WATCH=$GCKWATCH
F=$FAKECUDA_DIR
A=GPU-11111111-2222-3333-4444-555555555555
B=GPU-22222222-2222-3333-4444-555555555555
mkdir -p "$F/events" || exit 1
cat >"$F/gpus" <<EOF
$A 9.0 1073741824 0000:01:00.0 NVIDIA H100 80GB HBM3
$B 9.0 1073741824 0000:02:00.0 NVIDIA H100 80GB HBM3
EOF

watcher=
test_cleanup() {
	test -z "$watcher" || pkill -P "$watcher" -x gpuwatch
	:
}

# start_watch ARGS...: gpuwatch ARGS in the background, out and err its
# output, once it watches (its "watching" lines); sets watcher.
start_watch() {
	rm -f out err rc
	( "$WATCH" "$@" >out 2>err; echo $? >rc ) &
	watcher=$!
	_i=0
	while ! grep -q "^gpuwatch: watching " err 2>/dev/null; do
		if test -e rc; then
			cat >&2 err
			return 1
		fi
		_i=$((_i + 1))
		test $_i -le 100 || return 1
		sleep 0.1
	done
}

# event UUID LINE: the stand-in NVML's event LINE on GPU UUID.
event() {
	_u=$1
	shift
	echo "$*" >>"$F/events/$_u"
}

# ended STATUS: gpuwatch exited with STATUS (within 10 s).
ended() {
	_i=0
	while ! test -s rc; do
		_i=$((_i + 1))
		test $_i -le 100 || { echo >&2 "gpuwatch still runs"; return 1; }
		sleep 0.1
	done
	watcher=
	test "$(cat rc)" = "$1" || { echo >&2 "exit $(cat rc), not $1"; cat >&2 err; return 1; }
}

# said LINE: gpuwatch printed LINE, and only it.
said() {
	echo "$1" >expect &&
	test_cmp expect out
}

test_expect_success 'it names the GPUs it watches: every one NVML shows' '
	start_watch -t 0.5 &&
	ended 3 &&
	printf "gpuwatch: watching %s\n" $A $B >expect &&
	echo "gpuwatch: no event in 500 ms" >>expect &&
	test_cmp expect err &&
	test_must_be_empty out
'

for ev in "xid 79|xid $B 79 fatal Xid 79: the GPU has fallen off the bus" \
    "xid 48|xid $B 48 fatal Xid 48: a double-bit ECC error" \
    "xid 95|xid $B 95 fatal Xid 95: an uncontained ECC error" \
    "xid 63|xid $B 63 degraded Xid 63: a row remapping or page retirement recorded" \
    "xid 74|xid $B 74 degraded Xid 74: an NVLink error" \
    "dbe|dbe $B 0 fatal a double-bit ECC error" \
    "retire|retire $B 0 degraded a page retirement or row remapping pending" \
    "retire-failed|retire $B 0 degraded a page retirement or row remapping failed" \
    "unavailable|lost $B 0 fatal the GPU is unavailable" \
    "poison-fatal|lost $B 0 fatal a fatal poison error"; do
	in=${ev%%|*}
	line=${ev#*|}
	test_expect_success "$in: one line, exit 0" "
		start_watch &&
		event $B $in &&
		ended 0 &&
		said '$line'
	"
done

test_expect_success 'clocks: a slowdown, with -e clocks; the reasons as data' '
	start_watch -e clocks &&
	event $A clock 0x1 &&
	event $A clock 0x48 &&
	ended 0 &&
	said "clocks $A 72 degraded clocks slowed down: hardware slowdown, hardware thermal slowdown"
'

test_expect_success 'passed over: an application Xid, single-bit ECC, a clock change, a slowdown not asked for' '
	start_watch -v &&
	event $A xid 13 &&
	event $A sbe &&
	event $A pstate &&
	event $A clock 0x8 &&
	event $A xid 31 &&
	event $A retire &&
	ended 0 &&
	said "retire $A 0 degraded a page retirement or row remapping pending" &&
	test_grep "Xid 13, not watched" err &&
	test_grep "Xid 31, not watched" err
'

test_expect_success '-x: the Xids named, any of them; -x all: every one' '
	start_watch -x 13,31 &&
	event $A xid 79 &&
	event $A xid 31 &&
	ended 0 &&
	said "xid $A 31 degraded Xid 31" &&
	start_watch -x all &&
	event $B xid 43 &&
	ended 0 &&
	said "xid $B 43 degraded Xid 43"
'

test_expect_success '-e: only the events named; a lost GPU always' '
	start_watch -e dbe &&
	event $A xid 79 &&
	event $A retire &&
	event $A dbe &&
	ended 0 &&
	said "dbe $A 0 fatal a double-bit ECC error"
'

test_expect_success '-i, by index and UUID: another GPU is not watched' '
	start_watch -i 1 &&
	printf "gpuwatch: watching %s\n" $B >expect &&
	test_cmp expect err &&
	event $A xid 79 &&
	event $B xid 92 &&
	ended 0 &&
	said "xid $B 92 degraded Xid 92: a high single-bit ECC error rate" &&
	start_watch -i $A &&
	event $B dbe &&
	event $A dbe &&
	ended 0 &&
	said "dbe $A 0 fatal a double-bit ECC error"
'

test_expect_success 'CUDA_VISIBLE_DEVICES: the GPUs watched without -i' '
	CUDA_VISIBLE_DEVICES=1 start_watch &&
	printf "gpuwatch: watching %s\n" $B >expect &&
	test_cmp expect err &&
	event $B dbe &&
	ended 0
'

test_expect_success 'an event written before it watched is not reported' '
	event $A dbe &&
	start_watch -t 1 &&
	ended 3 &&
	test_must_be_empty out
'

test_expect_success 'a GPU some events are unknown to: registered for the others' '
	echo 0x8 >"$F/events/supported" &&
	start_watch -v -e xid,retire &&
	test_grep "GPU $A cannot report events" err &&
	event $A xid 79 &&
	ended 0 &&
	said "xid $A 79 fatal Xid 79: the GPU has fallen off the bus" &&
	test_status 1 "$WATCH" -e dbe,retire >out 2>err &&
	echo "gpuwatch: GPU $A reports none of the events asked for" >expect &&
	test_cmp expect err &&
	rm "$F/events/supported"
'

test_expect_success 'SIGTERM: it stops waiting and dies of it, silently' '
	start_watch &&
	pkill -TERM -P $watcher -x gpuwatch &&
	ended 143 &&
	test_must_be_empty out &&
	printf "gpuwatch: watching %s\n" $A $B >expect &&
	test_cmp expect err
'

test_expect_success 'no NVML, or no such GPU: one line, exit 1' '
	GPUCKPT_LIBNVML=$TRASH/none.so test_status 1 "$WATCH" >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpuwatch: cannot load NVML ($TRASH/none.so): " err &&
	test_status 1 "$WATCH" -i 7 >out 2>err &&
	echo "gpuwatch: no GPU 7: Invalid Argument" >expect &&
	test_cmp expect err &&
	test_status 1 "$WATCH" -i MIG-3f2e >out 2>err &&
	echo "gpuwatch: MIG-3f2e: a MIG instance: name its GPU" >expect &&
	test_cmp expect err &&
	CUDA_VISIBLE_DEVICES= test_status 1 "$WATCH" >out 2>err &&
	echo "gpuwatch: no GPU to watch: CUDA_VISIBLE_DEVICES is empty" >expect &&
	test_cmp expect err
'

test_expect_success 'usage errors: exit 2' '
	test_status 2 "$WATCH" -e heat >out 2>err &&
	test_grep "^gpuwatch: unknown event .heat." err &&
	test_status 2 "$WATCH" -e lost >out 2>err &&
	test_status 2 "$WATCH" -e dbe -x 79 >out 2>err &&
	test_grep "^gpuwatch: --xids goes with the xid event\$" err &&
	test_status 2 "$WATCH" -x 0 >out 2>err &&
	test_status 2 "$WATCH" -x 79,,80 >out 2>err &&
	test_status 2 "$WATCH" -t soon >out 2>err &&
	test_status 2 "$WATCH" extra >out 2>err
'

# Last: the GPU stays lost for the rest of the script.
test_expect_success 'lost: the wait says the GPU is lost; which one is found' '
	start_watch &&
	event $B lost &&
	ended 0 &&
	said "lost $B 0 fatal the GPU is lost" &&
	test_status 1 "$WATCH" -i 1 >out 2>err &&
	echo "gpuwatch: GPU 1: its UUID: GPU is lost" >expect &&
	test_cmp expect err
'

test_done
