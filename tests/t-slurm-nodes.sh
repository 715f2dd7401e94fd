#!/bin/sh
test_description='gpuckpt-slurm, a job of two nodes under a real Slurm: one cut across them'
. "$GCK_SRCDIR/lib.sh"
. "$GCK_SRCDIR/cuda-lib.sh"
. "$GCK_SRCDIR/nccl-lib.sh"
. "$GCK_SRCDIR/slurm-lib.sh"

require_criu
require_slurm

GCKSLURM=$GCK_TOPBUILDDIR/src/slurm/gpuckpt-slurm
NCCLWORK=$GCK_TESTDIR/ncclwork
HOOK=$GCK_BINDIR/nccl/libgpuckpt-nccl.so
GPUCKPT=$GCKPT
GPURESTORE=$GCKRESTORE
GPUINSPECT=$GCKINSPECT
export GPUCKPT GPURESTORE GPUINSPECT
test -x "$GCKSLURM" || test_skip_all "$GCKSLURM not built"
FAKENCCL_DIR=$TRASH/nccl
# The file that names where a rebuild meets: the job's batch script
# names a fresh one each run.
NCCL_CHECKPOINT_KVS_PATH=$TRASH/kvs
export FAKENCCL_DIR NCCL_CHECKPOINT_KVS_PATH
mkdir -p "$F/inject" "$FAKENCCL_DIR" || exit 1
printf 'GPU-aaaaaaaa-1111-4000-8000-000000000001 9.0 1073741824 0000:01:00.0 NVIDIA H100 80GB HBM3\n' >"$F/gpus"

test_cleanup() {
	stop_slurm
}

test_failed_hook() {
	sinfo 2>&1
	squeue -t all -o "%i %j %T %r %N" 2>&1
	ps -o pid,ppid,stat,comm,args -p "$(proc_descendants "$GCK_REAPER" |
	    tr "\n" , | sed "s/,\$//")" 2>&1
	cat "$TRASH"/job.out 2>&1
	tail -n 30 "$TRASH/slurm/slurmctld.log" "$TRASH"/slurm/slurmd.*.log 2>&1
}

# The job: one communicator of four ranks, two a node (ncclwork -N 4,
# ranks 2 * SLURM_NODEID and on), under gpuckpt-slurm; node I's status
# in job.I.status.  Rank 0 is slow (-D 0 -d 300): the ranks of the other
# node wait for it inside each collective.
cat >rank.sh <<EOF || exit 1
#!/bin/sh
LD_LIBRARY_PATH=$GCK_TESTDIR/fakecuda:$GCK_TESTDIR/fakenccl LD_PRELOAD=$HOOK \\
    exec "$NCCLWORK" -N 4 -R \$((SLURM_NODEID * 2)) -u "$TRASH/job.id" \\
    -D 0 -d 300 -f "$TRASH/job.\$SLURM_NODEID.status"
EOF
cat >job.sh <<EOF || exit 1
#!/bin/sh
echo "$TRASH/kvs.\$SLURM_RESTART_COUNT" >"$NCCL_CHECKPOINT_KVS_PATH"
exec "$GCKSLURM" -d "$TRASH/ckpt" -- "$TRASH/rank.sh"
EOF
chmod +x rank.sh job.sh || exit 1
D=$TRASH/ckpt

# root I: the root of node I's tree, as gpuckpt-slurm wrote it (up to 30 s).
root() {
	wait_for_line "$D/node.$1.pid" "^[0-9]" 30 >/dev/null && cat "$D/node.$1.pid"
}

# moves I: node I's ranks go on, their sums right; sets NSTEP.
moves() {
	NSTATUS=$TRASH/job.$1.status
	NPID=$(root $1) || return 1
	nccl_moves 20
}

# ranks I: the PIDs of node I's ranks, as its root said when ready.
ranks() {
	sed -n 's/^ready .* ranks=\([0-9,]*\).*/\1/p' "$TRASH/job.$1.status" |
	    tail -n 1 | tr , ' '
}

test_expect_success 'a Slurm cluster of two nodes starts on loopback' '
	start_slurm_nodes 2 &&
	sinfo -h -N -p gck -o "%N %T" >out &&
	printf "gck1 idle\ngck2 idle\n" >expect &&
	test_cmp expect out
'

test_expect_success 'a job of two nodes: the command runs once a node, its ranks one job' '
	sbatch_job --requeue --open-mode=append -N 2 -J job \
	    -o "$TRASH/job.out" -D "$TRASH" --export=ALL "$TRASH/job.sh" &&
	wait_job_state $JOB RUNNING &&
	wait_for_line job.0.status "^ready " 60 &&
	wait_for_line job.1.status "^ready " 60 &&
	a=$(root 0) && b=$(root 1) &&
	tr "\0" "\n" </proc/$a/environ >env.0 &&
	tr "\0" "\n" </proc/$b/environ >env.1 &&
	test_grep "^SLURMD_NODENAME=gck1\$" env.0 &&
	test_grep "^SLURMD_NODENAME=gck2\$" env.1 &&
	moves 0 && moves 1
'

test_expect_success 'a node whose checkpoint fails rolls both back: the job goes on, no cut kept' '
	set -- $(ranks 1) &&
	echo CUDA_ERROR_UNKNOWN >"$F/inject/lock.$2" &&
	scancel --signal=USR1 --batch $JOB &&
	wait_for_line job.out "checkpoint failed, the job goes on" 60 &&
	rm -f "$F/inject/lock.$2" &&
	test_grep "^gpuckpt-slurm: checkpoint failed, the job goes on: node gck2: .*CUDA_ERROR_UNKNOWN" job.out &&
	! ls -d "$D"/cut.* 2>/dev/null &&
	! test -e "$D/current" &&
	test "$(job_field $JOB JobState)" = RUNNING &&
	test "$(root 0)" = "$a" && test "$(root 1)" = "$b" &&
	WPIDS="$(ranks 0) $(ranks 1)" && states RUNNING &&
	moves 0 && moves 1
'

test_expect_success 'USR1 to the batch shell: every node'\''s ranks quiesce, one cut, requeued' '
	: >"$F/log" &&
	moves 0 && s0=$NSTEP &&
	scancel --signal=USR1 --batch $JOB &&
	wait_for_line job.out "checkpointed to .*; requeueing it" 60 &&
	test_grep "^gpuckpt-slurm: job $JOB checkpointed to $D/cut.0.2; requeueing it\$" job.out &&
	echo cut.0.2 >expect &&
	test_cmp expect "$D/current" &&
	test -s "$D/cut.0.2/image.0.gck" && test -s "$D/cut.0.2/image.1.gck" &&
	for p in $(ranks 0) $(ranks 1); do
		grep -q "^lock $p .* CUDA_SUCCESS " "$F/log" || return 1
	done &&
	for i in 0 1; do
		"$GCKINSPECT" "$D/cut.0.2/image.$i.gck" >out &&
		test_grep "^nccl        2 NCCL ranks, quiesced" out || return 1
	done
'

test_expect_success 'the requeued job restores both nodes: the ranks rebuild together and go on from the cut' '
	wait_for_line job.out "restart 1 of job $JOB: restoring $D/cut.0.2 on 2 nodes\$" 90 &&
	wait_job_state $JOB RUNNING 30 &&
	test "$(job_field $JOB Restarts)" = 1 &&
	moves 0 && test "$NSTEP" -ge "$s0" &&
	moves 1 && test "$NSTEP" -ge "$s0" &&
	test "$(root 0)" != "$a" &&
	test "$(grep -c "^ready " job.0.status)" -eq 1 &&
	test "$(grep -c "^ready " job.1.status)" -eq 1 &&
	! grep "^error " job.0.status job.1.status &&
	test_grep "node gck1: restart 1 of job $JOB: restoring $D/cut.0.2/image.0.gck\$" job.out &&
	test_grep "node gck2: restart 1 of job $JOB: restoring $D/cut.0.2/image.1.gck\$" job.out
'

test_expect_success 'checkpointed again, from the restored job: the newer cut replaces the older' '
	scancel --signal=USR1 --batch $JOB &&
	wait_for_line job.out "job $JOB checkpointed to $D/cut.1.1; requeueing it" 60 &&
	echo cut.1.1 >expect &&
	test_cmp expect "$D/current" &&
	ls -d "$D"/cut.* >out &&
	echo "$D/cut.1.1" >expect &&
	test_cmp expect out &&
	wait_for_line job.out "restart 2 of job $JOB: restoring $D/cut.1.1 on 2 nodes\$" 90 &&
	moves 0 && moves 1
'

# The ranks keep their PIDs within the namespace of their restore: the
# stand-in driver fails the restore of node gck2's second rank.
test_expect_success 'a node whose restore fails ends every node: the job fails, its cut kept, one line' '
	set -- $(ranks 1) &&
	scancel --signal=USR1 --batch $JOB &&
	wait_for_line job.out "job $JOB checkpointed to $D/cut.2.1; requeueing it" 60 &&
	echo CUDA_ERROR_UNKNOWN >"$F/inject/restore.$2" &&
	wait_job_state $JOB FAILED 90 &&
	rm -f "$F/inject/restore.$2" &&
	test "$(job_field $JOB Restarts)" = 3 &&
	grep "^gpuckpt-slurm: node gck2: cannot restore" job.out >out &&
	test_line_count out 1 &&
	test_grep "^gpuckpt-slurm: node gck2: cannot restore $D/cut.2.1/image.1.gck (kept): .*CUDA_ERROR_UNKNOWN" out &&
	test -s "$D/cut.2.1/image.0.gck" && test -s "$D/cut.2.1/image.1.gck" &&
	for p in $(proc_descendants "$GCK_REAPER"); do
		if test "$(cat /proc/$p/comm 2>/dev/null)" = ncclwork; then
			echo >&2 "rank $p runs on"
			return 1
		fi
	done
'

# gpuckpt-slurm run as a job of two nodes would run it, with an srun
# that only says it was run.
cat >srun <<EOF || exit 1
#!/bin/sh
echo "\$@" >>"$TRASH/srun.ran"
EOF
chmod +x srun || exit 1

test_expect_success 'restore refused with one line, before any node runs, when the cut is not of this many nodes' '
	mkdir -p refuse/cut.0.1 &&
	echo cut.0.1 >refuse/current &&
	cp "$D/cut.2.1/image.0.gck" refuse/cut.0.1/ &&
	rm -f srun.ran &&
	test_status 1 env SLURM_JOB_ID=7 SLURM_NNODES=2 SLURM_RESTART_COUNT=1 \
	    SRUN=$TRASH/srun "$GCKSLURM" -d "$TRASH/refuse" -- true >out 2>err &&
	echo "gpuckpt-slurm: cannot restore $TRASH/refuse/cut.0.1 (kept): it holds images of 1 nodes, job 7 has 2" >expect &&
	test_cmp expect err &&
	! test -e srun.ran &&
	head -c 100000 "$D/cut.2.1/image.1.gck" >refuse/cut.0.1/image.1.gck &&
	test_status 1 env SLURM_JOB_ID=7 SLURM_NNODES=2 SLURM_RESTART_COUNT=1 \
	    SRUN=$TRASH/srun "$GCKSLURM" -d "$TRASH/refuse" -- true >out 2>err &&
	test_line_count err 1 &&
	test_grep "^gpuckpt-slurm: cannot restore $TRASH/refuse/cut.0.1/image.1.gck (kept): " err &&
	! test -e srun.ran &&
	test -e refuse/cut.0.1/image.0.gck
'

test_expect_success 'a job of two nodes: --every and --watch refused with one line' '
	test_status 1 env SLURM_JOB_ID=7 SLURM_NNODES=2 SRUN=$TRASH/srun \
	    "$GCKSLURM" -d "$TRASH/ev" --every 10 -- true >out 2>err &&
	echo "gpuckpt-slurm: --every and --watch are for a job of one node; job 7 has 2 (SLURM_NNODES)" >expect &&
	test_cmp expect err &&
	! test -e srun.ran
'

test_done
