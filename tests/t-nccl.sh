#!/bin/sh
test_description='NCCL jobs: ranks quiesced through libgpuckpt-nccl.so before the lock'
. "$GCK_SRCDIR/lib.sh"

. "$GCK_SRCDIR/cuda-lib.sh"
. "$GCK_SRCDIR/nccl-lib.sh"

require_criu

NCCLWORK=$GCK_TESTDIR/ncclwork
HOOK=$GCK_BINDIR/nccl/libgpuckpt-nccl.so
FAKENCCL_DIR=$TRASH/nccl
# Where a rebuild meets, as a restore's fresh key-value store would be
# named to the contrib shim (fresh_kvs).
NCCL_CHECKPOINT_KVS_PATH=$TRASH/kvs
export FAKENCCL_DIR NCCL_CHECKPOINT_KVS_PATH
kvs_n=0
fresh_kvs() {
	kvs_n=$((kvs_n + 1))
	echo "$TRASH/kvs.$kvs_n" >"$NCCL_CHECKPOINT_KVS_PATH"
}
fresh_kvs
mkdir -p "$F/delay" "$F/inject" "$FAKENCCL_DIR" || exit 1
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
	fresh_kvs &&
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
	fresh_kvs &&
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

# bg NAME COMMAND...: COMMAND in the background, its output in NAME.out
# and NAME.err, its exit status in NAME.rc once done (bg_wait NAME).
bg() {
	_n=$1
	shift
	rm -f "$_n.rc"
	("$@" >"$_n.out" 2>"$_n.err"; echo $? >"$_n.rc") &
}

# bg_wait NAME STATUS: waits for it, which must have exited STATUS.
bg_wait() {
	wait
	echo "$2" >"$1.expect" &&
	test_cmp "$1.expect" "$1.rc"
}

# Two hosts of one job, a tree each: ranks 0 and 1 in tree a, 2 and 3
# in tree b, one communicator of 4 (the stand-in's ranks meet in the
# same directory, as a job's hosts would over their network).
# cut_start NAME [ncclwork options]: sets APID and BPID, their roots,
# and ARANKS, BRANKS.
cut_start() {
	CUT=$1
	shift
	rm -f "$TRASH/$CUT.a.status" "$TRASH/$CUT.b.status" "$TRASH/$CUT.id"
	for _t in a b; do
		_base=0
		test $_t = b && _base=2
		(LD_LIBRARY_PATH=$GCK_TESTDIR/fakecuda:$GCK_TESTDIR/fakenccl \
		    LD_PRELOAD=$HOOK setsid "$NCCLWORK" -N 4 -R $_base \
		    -u "$TRASH/$CUT.id" -f "$TRASH/$CUT.$_t.status" "$@" \
		    </dev/null >/dev/null 2>&1 &)
	done
	wait_for_line "$TRASH/$CUT.a.status" '^ready ' 60 &&
	wait_for_line "$TRASH/$CUT.b.status" '^ready ' 60 || return 1
	APID=$(sed -n 's/^ready pid=\([0-9]*\).*/\1/p' "$TRASH/$CUT.a.status")
	BPID=$(sed -n 's/^ready pid=\([0-9]*\).*/\1/p' "$TRASH/$CUT.b.status")
	ARANKS=$(sed -n 's/^ready .* ranks=\([0-9,]*\).*/\1/p' \
	    "$TRASH/$CUT.a.status" | tr , ' ')
	BRANKS=$(sed -n 's/^ready .* ranks=\([0-9,]*\).*/\1/p' \
	    "$TRASH/$CUT.b.status" | tr , ' ')
	test -n "$APID" && test -n "$BPID" || return 1
	started="$started $APID $BPID"
	WPIDS="$ARANKS $BRANKS"
}

# cut_moves: both trees go on.
cut_moves() {
	NSTATUS=$TRASH/$CUT.a.status NPID=$APID nccl_moves 20 &&
	NSTATUS=$TRASH/$CUT.b.status NPID=$BPID nccl_moves 20
}

# Rank 0, of host a, sleeps before each step: host b's ranks wait for it
# inside a collective that a has not begun.  Cut at a's count alone, a
# would tear down with b's ranks waiting for it, and b would never
# park: the cut is at the largest count of both hosts.
test_expect_success 'one cut across two hosts: every rank quiesces first, both images, the job runs on' '
	kill_tree $NPID &&
	rm -f "$F/driver" &&
	cut_start two -D 0 -d 1500 &&
	cut_moves &&
	: >"$F/log" &&
	bg b "$GCKPT" -v --lock-timeout 1 --cut "$TRASH/cut1" --cut-size 2 \
	    --cut-name b -R -p $BPID -o b.gck &&
	test_status 0 "$GCKPT" -v --lock-timeout 1 --cut "$TRASH/cut1" \
	    --cut-size 2 --cut-name a -R -p $APID -o a.gck >out 2>err &&
	bg_wait b 0 &&
	test_grep "quiescing 2 NCCL ranks here, as a of the cut" err &&
	test_grep "quiescing 2 NCCL ranks here, as b of the cut" b.err &&
	test -s a.gck && test -s b.gck &&
	for p in $WPIDS; do
		grep -q "^lock $p .* CUDA_SUCCESS " "$F/log" || return 1
	done &&
	ls "$TRASH/cut1" >files &&
	printf "a.committed\na.dumped\na.held\na.parked\na.prepared\nb.committed\nb.dumped\nb.held\nb.parked\nb.prepared\n" >expect &&
	test_cmp expect files &&
	states RUNNING &&
	cut_moves
'

test_expect_success 'both restored at once: the ranks of both rebuild together and go on' '
	kill_tree $APID $BPID &&
	fresh_kvs &&
	bg rb "$GCKRESTORE" -v b.gck &&
	test_status 0 "$GCKRESTORE" -v a.gck >out 2>err &&
	bg_wait rb 0 &&
	states RUNNING &&
	cut_moves
'

test_expect_success 'a host that fails rolls both back: nothing killed, no image' '
	set -- $BRANKS &&
	echo CUDA_ERROR_UNKNOWN >"$F/inject/lock.$2" &&
	: >"$F/log" &&
	bg fb "$GCKPT" --cut "$TRASH/cut2" --cut-size 2 --cut-name b -k \
	    -p $BPID -o b2.gck &&
	test_status 1 "$GCKPT" --cut "$TRASH/cut2" --cut-size 2 \
	    --cut-name a -k -p $APID -o a2.gck >out 2>err &&
	bg_wait fb 1 &&
	rm -f "$F/inject/lock.$2" &&
	test_line_count err 1 &&
	test_grep "^gpuckpt: b of the cut failed: .*CUDA_ERROR_UNKNOWN.*; process tree $APID left running$" err &&
	test_grep "CUDA_ERROR_UNKNOWN.*; process tree $BPID left running$" fb.err &&
	! test -e a2.gck && ! test -e b2.gck &&
	proc_running $APID && proc_running $BPID &&
	states RUNNING &&
	cut_moves
'

test_expect_success 'a host that does not come: the other gives up, nothing stopped' '
	: >"$F/log" &&
	test_status 1 "$GCKPT" --nccl-timeout 2 --cut "$TRASH/cut3" \
	    --cut-size 2 --cut-name a -p $APID -o a3.gck >out 2>err &&
	test_line_count err 1 &&
	test_grep "^gpuckpt: only 1 of the 2 hosts of the cut in .* reached .held. in time; process tree $APID left running$" err &&
	! test -e a3.gck &&
	no_lock $WPIDS &&
	cut_moves
'

test_expect_success 'a host of the cut with no rank meets the others all the same' '
	kill_tree $APID $BPID &&
	nccl_start lone -d 100 &&
	rm -f lone.pid &&
	(setsid sh -c "echo \$\$ >lone.pid; exec sleep 300" </dev/null \
	    >/dev/null 2>&1 &) &&
	wait_for_line lone.pid "^[0-9]" 10 &&
	spid=$(cat lone.pid) &&
	started="$started $spid" &&
	bg lb "$GCKPT" -v --cut "$TRASH/cut4" --cut-size 2 --cut-name b -R \
	    -p $spid -o lb.gck &&
	test_status 0 "$GCKPT" -v --cut "$TRASH/cut4" --cut-size 2 \
	    --cut-name a -R -p $NPID -o la.gck >out 2>err &&
	bg_wait lb 0 &&
	test_grep "quiescing 2 NCCL ranks here, as a of the cut" err &&
	test_grep "quiescing 0 NCCL ranks here, as b of the cut" lb.err &&
	test -s la.gck && test -s lb.gck &&
	test -e "$TRASH/cut4/b.committed" &&
	nccl_moves &&
	kill_tree $spid
'

test_expect_success 'usage: --cut goes with --cut-size, and writes a file' '
	test_status 2 "$GCKPT" --cut d -p 1 -o x 2>err &&
	test_grep "goes with --cut-size" err &&
	test_status 2 "$GCKPT" --cut-size 2 -p 1 -o x 2>err &&
	test_status 2 "$GCKPT" --cut d --cut-size 2 -p 1 2>err &&
	test_grep "writes one image to a file" err &&
	test_status 2 "$GCKPT" --cut d --cut-size 1 -p 1 -o x 2>err
'

test_expect_success 'usage: --nccl-timeout takes 1 to 3600 seconds' '
	test_status 2 "$GCKPT" --nccl-timeout 0 -p 1 2>err &&
	test_status 2 "$GCKPT" --nccl-timeout x -p 1 2>err &&
	test_status 2 "$GCKPT" --nccl-timeout 3601 -p 1 2>err
'

test_done
