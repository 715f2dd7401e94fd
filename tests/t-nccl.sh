#!/bin/sh
test_description='NCCL jobs: ranks quiesced through libgpuckpt-nccl.so before the lock'
. "$GCK_SRCDIR/lib.sh"

. "$GCK_SRCDIR/cuda-lib.sh"

require_criu

NCCLWORK=$GCK_TESTDIR/ncclwork
HOOK=$GCK_BINDIR/nccl/libgpuckpt-nccl.so
FAKENCCL_DIR=$TRASH/nccl
export FAKENCCL_DIR
mkdir -p "$F/delay" "$FAKENCCL_DIR" || exit 1
printf 'GPU-aaaaaaaa-1111-4000-8000-000000000001 9.0 1073741824 0000:01:00.0 NVIDIA H100 80GB HBM3\n' >"$F/gpus"

# nccl_start NAME [ncclwork options]: an NCCL job of ranks, preloaded
# with $PRELOAD (none if empty), started by $LAUNCH (none if empty).
# Sets NPID (the root, rank 0) and NRANKS (every rank, the root first).
PRELOAD=
LAUNCH=
nccl_start() {
	NSTATUS=$TRASH/$1.status
	shift
	rm -f "$NSTATUS"
	(LD_LIBRARY_PATH=$GCK_TESTDIR/fakecuda:$GCK_TESTDIR/fakenccl \
	    LD_PRELOAD=$PRELOAD \
	    setsid $LAUNCH "$NCCLWORK" -f "$NSTATUS" "$@" \
	    </dev/null >/dev/null 2>&1 &)
	wait_for_line "$NSTATUS" '^ready ' 60 || return 1
	NPID=$(sed -n 's/^ready pid=\([0-9]*\).*/\1/p' "$NSTATUS")
	NRANKS=$(sed -n 's/^ready .* ranks=\([0-9,]*\).*/\1/p' "$NSTATUS" |
	    tr , ' ')
	test -n "$NPID" && test -n "$NRANKS" || return 1
	started="$started $NPID"
	WPIDS=$NRANKS
}

# nccl_step: the root's last step checked, every rank's sums right so
# far and every rank within one step of it; sets NSTEP.
nccl_step() {
	ask_answer "$NSTATUS" '^verify ' $NPID || return 1
	case $_line in
	"verify ok step="*) ;;
	*)	echo >&2 "job $NPID: $_line"; return 1 ;;
	esac
	if grep '^error ' "$NSTATUS" >&2; then
		return 1
	fi
	NSTEP=$(echo "$_line" | sed 's/^verify ok step=\([0-9]*\).*/\1/')
}

# nccl_moves [SECONDS]: the job goes on, within SECONDS (default 10).
nccl_moves() {
	nccl_step || return 1
	_from=$NSTEP
	_i=0
	while :; do
		sleep 0.2
		nccl_step || return 1
		test "$NSTEP" -gt "$_from" && return 0
		_i=$((_i + 1))
		if test $_i -gt $((${1:-10} * 5)); then
			echo >&2 "job $NPID stays at step $NSTEP"
			return 1
		fi
	done
}

# locked PID...: the stand-in's log has no lock of these that succeeded.
no_lock() {
	for _p in "$@"; do
		if grep "^lock $_p .* CUDA_SUCCESS " "$F/log" >&2; then
			echo >&2 "process $_p was locked"
			return 1
		fi
	done
}

test_expect_success 'the stand-in job runs, its sums right' '
	PRELOAD=$HOOK &&
	nccl_start job -d 200 &&
	set -- $NRANKS && test $# -eq 2 &&
	nccl_moves &&
	grep -q "libgpuckpt-nccl.so" /proc/$NPID/maps
'

test_expect_success 'quiesced, checkpointed and let run on (-R): its collectives go on' '
	: >"$F/log" &&
	nccl_step && before=$NSTEP &&
	test_status 0 "$GCKPT" -v -R -p $NPID -o img.gck >out 2>err &&
	test_grep "quiescing 2 NCCL ranks" err &&
	states RUNNING &&
	nccl_moves &&
	for p in $NRANKS; do
		grep -q "^lock $p .* CUDA_SUCCESS " "$F/log" || return 1
	done
'

test_expect_success 'gpuinspect: the image says its ranks were quiesced' '
	test_status 0 "$GCKINSPECT" img.gck >out 2>err &&
	test_grep "^nccl        2 NCCL ranks, quiesced" out &&
	test_status 0 "$GCKINSPECT" --json img.gck >out 2>err &&
	python3 -c "
import json, sys
c = json.load(open(\"out\"))[\"cuda\"]
sys.exit(c[\"nccl\"] != {\"ranks\": 2})"
'

test_expect_success 'restored, the ranks rebuild their communicators and go on' '
	kill_tree $NPID &&
	: >"$F/log" &&
	test_status 0 "$GCKRESTORE" -v img.gck >out 2>err &&
	echo $NPID >expect &&
	test_cmp expect out &&
	test_grep "2 NCCL ranks rebuilding" err &&
	states RUNNING &&
	nccl_moves &&
	test "$NSTEP" -ge "$before" || {
		echo >&2 "the restored job is at step $NSTEP, before $before"
		false
	}
'

test_expect_success 'the restored job checkpointed again, killed (-k)' '
	nccl_moves &&
	test_status 0 "$GCKPT" -k -p $NPID -o img2.gck >out 2>err &&
	wait_gone $NPID &&
	test_status 0 "$GCKRESTORE" img2.gck >out 2>err &&
	nccl_moves
'

test_expect_success 'a rank waiting for its peer in a collective: the peer runs to the cut, both are locked' '
	kill_tree $NPID &&
	nccl_start peer -D 0 -d 1500 &&
	: >"$F/log" &&
	test_status 0 "$GCKPT" -R --lock-timeout 1 -p $NPID -o img2b.gck \
	    >out 2>err &&
	test_must_be_empty err &&
	for p in $NRANKS; do
		grep -q "^lock $p .* CUDA_SUCCESS " "$F/log" || return 1
	done &&
	! grep "^lock .* CUDA_ERROR" "$F/log" &&
	states RUNNING &&
	nccl_moves
'

test_expect_success '--suspend: the ranks quiesce, their GPUs freed; --resume: they rebuild' '
	set -- $NRANKS &&
	: >"$F/log" &&
	test_status 0 "$GCKPT" --suspend -p $NPID >out 2>err &&
	states CHECKPOINTED &&
	grep -q "^checkpoint $2 .* CUDA_SUCCESS " "$F/log" &&
	test_status 0 "$GCKRESTORE" --resume -p $NPID >out 2>err &&
	states RUNNING &&
	nccl_moves
'

test_expect_success 'ranks that cannot park in time are let go: nothing stopped' '
	kill_tree $NPID &&
	nccl_start slow -d 8000 &&
	: >"$F/log" &&
	test_status 1 "$GCKPT" --nccl-timeout 1 -p $NPID -o img3.gck \
	    >out 2>err &&
	test_line_count err 1 &&
	test_grep "^gpuckpt: NCCL ranks did not quiesce within 1 s: rank [0-9]* stayed at operation [0-9]* of [0-9]* .*; process tree $NPID left running$" err &&
	! test -e img3.gck &&
	no_lock $NRANKS &&
	states RUNNING &&
	nccl_moves 20
'

test_expect_success 'gpuckpt killed while the ranks are held: they run on' '
	(exec "$GCKPT" --nccl-timeout 60 -p $NPID -o img4.gck \
	    >out 2>err & echo $! >ckpid) &&
	sleep 1 &&
	kill -9 $(cat ckpid) &&
	no_lock $NRANKS &&
	nccl_moves 20 &&
	states RUNNING
'

test_expect_success 'a communicator with ranks outside the tree: refused, the job runs on' '
	kill_tree $NPID &&
	nccl_start part -d 100 &&
	set -- $NRANKS &&
	: >"$F/log" &&
	test_status 1 "$GCKPT" -p $2 -o img5.gck >out 2>err &&
	test_line_count err 1 &&
	test_grep "^gpuckpt: NCCL rank $2 is in a communicator of 2 ranks, 1 of them here: the others are outside the tree; process tree $2 left running$" err &&
	no_lock $NRANKS &&
	nccl_moves
'

test_expect_success 'without the preload: the rank waiting for its locked peer cannot be locked; the job runs on' '
	kill_tree $NPID &&
	echo "13010 610.10.01" >"$F/driver" &&
	PRELOAD= LAUNCH="$GCKPT --launch" &&
	nccl_start bare -D 0 -d 3000 &&
	PRELOAD=$HOOK LAUNCH= &&
	! grep -q "libgpuckpt-nccl.so" /proc/$NPID/maps &&
	test_status 1 "$GCKPT" --lock-timeout 1 -p $NPID -o img6.gck \
	    >out 2>err &&
	test_line_count err 1 &&
	test_grep "CUDA_ERROR_NOT_READY (its CUDA work did not finish within the 1000 ms lock timeout: an NCCL collective waiting for a rank locked already? For the ranks to quiesce first, preload libgpuckpt-nccl.so, see gpuckpt(1)).*; process tree $NPID left running$" err &&
	! test -e img6.gck &&
	states RUNNING &&
	nccl_moves 20
'

test_expect_success 'usage: --nccl-timeout takes 1 to 3600 seconds' '
	test_status 2 "$GCKPT" --nccl-timeout 0 -p 1 2>err &&
	test_status 2 "$GCKPT" --nccl-timeout x -p 1 2>err &&
	test_status 2 "$GCKPT" --nccl-timeout 3601 -p 1 2>err
'

test_done
