#!/bin/sh
test_description='gpuckpt-slurm under a real Slurm: checkpointed, requeued, restored'
. "$GCK_SRCDIR/lib.sh"
. "$GCK_SRCDIR/slurm-lib.sh"

require_criu
require_slurm

GCKSLURM=$GCK_TOPBUILDDIR/src/slurm/gpuckpt-slurm
COUNTER=$GCK_TESTDIR/counter
GPUCKPT=$GCKPT
GPURESTORE=$GCKRESTORE
GPUINSPECT=$GCKINSPECT
GPUWATCH=$GCKWATCH
export GPUCKPT GPURESTORE GPUINSPECT GPUWATCH
test -x "$GCKSLURM" || test_skip_all "$GCKSLURM not built"

test_cleanup() {
	stop_slurm
}

# For a failed test: the node's state and reason, the jobs, what runs
# under the reaper, and the end of both daemons' logs.
test_failed_hook() {
	sinfo -R 2>&1
	scontrol -o show node 2>&1
	squeue -t all -o "%i %j %T %r %S" 2>&1
	ps -o pid,ppid,stat,comm,args -p "$(proc_descendants "$GCK_REAPER" |
	    tr "\n" , | sed "s/,\$//")" 2>&1
	tail -n 40 "$TRASH/slurm/slurmctld.log" "$TRASH/slurm/slurmd.log" 2>&1
}

# job NAME [COMMANDS]: writes NAME.sh, a batch script that runs
# COMMANDS, then the counter under gpuckpt-slurm with the image in
# ckpt/NAME; the counter's options are taken from NAME.args.
job() {
	cat >"$1.sh" <<-EOF
	#!/bin/sh
	${2:-:}
	exec "$GCKSLURM" -d "$TRASH/ckpt/$1" -- "$COUNTER" \$(cat "$TRASH/$1.args")
	EOF
	chmod +x "$1.sh"
}

# submit NAME COUNTER-OPTIONS [SBATCH-OPTIONS]: submits NAME.sh, writing
# to NAME.out, and sets JOB.
submit() {
	_n=$1
	echo "$2" >"$_n.args"
	shift 2
	sbatch_job --requeue --open-mode=append -J "$_n" -o "$TRASH/$_n.out" \
	    -D "$TRASH" "$@" "$TRASH/$_n.sh"
}

# counted NAME N: NAME.out has one start and the steps 1 to N, each once
# and in order, then done N: the counter went on from where it was
# checkpointed, its memory intact at every step.
counted() {
	test "$(grep -c '^start ' "$1.out")" -eq 1 &&
	! grep '^FAIL' "$1.out" &&
	grep '^step ' "$1.out" | awk '{ print $2 }' >steps &&
	seq 1 "$2" >expect &&
	test_cmp expect steps &&
	test "$(grep -c '^done ' "$1.out")" -eq 1 &&
	test_grep "^done $2 " "$1.out"
}

# sacct_end JOB STATE EXIT: sacct, reading the job completion log (-c),
# says that JOB ended in STATE with exit code EXIT, after one record
# (PENDING) for each time it was requeued.
sacct_end() {
	sacct -c -n -P -j "$1" -o JobID,State,ExitCode >sacct.out &&
	_r=$(job_field "$1" Restarts) &&
	: >sacct.expect &&
	while test "$_r" -gt 0; do
		echo "$1|PENDING|0:0" >>sacct.expect
		_r=$((_r - 1))
	done &&
	echo "$1|$2|$3:0" >>sacct.expect &&
	test_cmp sacct.expect sacct.out
}

# sample FILE: from now on, a line every 0.2 s into steps.log: the
# time (seconds) and how many steps FILE shows.  Sets sampler.
sample() {
	( while :; do
		echo "$(date -u +%s) $(grep -c "^step " "$1")"
		sleep 0.2
	done >steps.log ) &
	sampler=$!
}

# wait_snapshots DIR N: until the series in DIR lists N snapshots or
# more (up to 60 s).
wait_snapshots() {
	_i=0
	while test "$(snapshots "$1" | wc -l)" -lt "$2"; do
		_i=$((_i + 1))
		test $_i -le 600 || return 1
		sleep 0.1
	done
}

# snapshots DIR: the names the series in DIR lists, oldest first.
snapshots() {
	grep -o '"name": *"[^"]*"' "$1/index.json" 2>/dev/null |
	    sed 's/.*"\([^"]*\)"$/\1/'
}

test_expect_success 'a Slurm cluster of one node starts on loopback' '
	start_slurm &&
	mkdir ckpt
'

test_expect_success 'USR1 to the batch shell: checkpointed, requeued, restored' '
	job pre &&
	submit pre "-n 200 -t 100 -x 7" &&
	wait_job_state $JOB RUNNING &&
	wait_for_line pre.out "^step 10 " 30 &&
	scancel --signal=USR1 --batch $JOB &&
	wait_for_line pre.out "checkpointed to .*; requeueing it" 60 &&
	test -s ckpt/pre/image.gck &&
	wait_job_state $JOB FAILED 90 &&
	test "$(job_field $JOB Restarts)" = 1 &&
	test "$(job_field $JOB ExitCode)" = 7:0 &&
	sacct_end $JOB FAILED 7 &&
	counted pre 200 &&
	test_grep "^gpuckpt-slurm: restart 1 of job $JOB: restoring $TRASH/ckpt/pre/image.gck\$" pre.out &&
	# the job failed: its last image is kept
	test -s ckpt/pre/image.gck
'

test_expect_success 'preempted by a job of a higher partition: checkpointed, requeued, restored' '
	job pmt &&
	submit pmt "-n 200 -t 100 -x 5" --signal=B:USR1@10 &&
	low=$JOB &&
	wait_job_state $low RUNNING &&
	wait_for_line pmt.out "^step 10 " 30 &&
	sbatch_job -p urgent -c 2 -J urgent -o "$TRASH/urgent.out" -D "$TRASH" \
	    --wrap "echo urgent ran; sleep 2" &&
	wait_for_line pmt.out "^gpuckpt-slurm: SIGUSR1: checkpointing process" 60 &&
	wait_for_line pmt.out "checkpointed to .*; requeueing it" 60 &&
	wait_job_state $JOB COMPLETED 60 &&
	test_grep "^urgent ran\$" urgent.out &&
	wait_job_state $low FAILED 120 &&
	test "$(job_field $low Restarts)" = 1 &&
	sacct_end $low FAILED 5 &&
	counted pmt 200
'

# The stand-in CUDA driver, with two GPUs, for a GPU job: Slurm's first
# GPU is A, its second B.
CUDAWORK=$GCK_TESTDIR/cudawork
F=$TRASH/fake
A=GPU-aaaaaaaa-1111-4000-8000-000000000001
B=GPU-bbbbbbbb-1111-4000-8000-000000000002
mkdir -p "$F/events" &&
printf '%s 9.0 1073741824 0000:01:00.0 NVIDIA H100 80GB HBM3\n' $A >"$F/gpus" &&
printf '%s 9.0 1073741824 0000:02:00.0 NVIDIA H100 80GB HBM3\n' $B >>"$F/gpus" ||
    exit 1
CUDAENV=FAKECUDA_DIR=$F,LD_LIBRARY_PATH=$GCK_TESTDIR/fakecuda
CUDAENV=$CUDAENV,GPUCKPT_LIBCUDA=$GCK_TESTDIR/fakecuda/libcuda.so.1
CUDAENV=$CUDAENV,GPUCKPT_LIBNVML=$GCK_TESTDIR/fakecuda/libnvidia-ml.so.1

# here_pid PID NAME: the PID here of the process NAME that is PID in a PID
# namespace of its own.
here_pid() {
	for _s in /proc/[0-9]*/status; do
		awk -v p="$1" -v n="$2" '
		    $1 == "Name:" { name = $2 }
		    $1 == "NSpid:" && NF > 2 && $NF == p && name == n { print $2 }
		' "$_s" 2>/dev/null
	done
}

test_expect_success 'a GPU job is restored onto the GPU Slurm gives it next' '
	cat >gpu.sh <<-EOF &&
	#!/bin/sh
	echo "CUDA_VISIBLE_DEVICES=\$CUDA_VISIBLE_DEVICES SLURM_JOB_GPUS=\$SLURM_JOB_GPUS"
	exec "$GCKSLURM" -d "$TRASH/ckpt/gpu" -- "$CUDAWORK" -m 8 -f "$TRASH/gpu.status"
	EOF
	chmod +x gpu.sh &&
	sbatch_job --requeue --open-mode=append -J gpu -o "$TRASH/gpu.out" \
	    -D "$TRASH" --gres=gpu:1 --export=ALL,$CUDAENV "$TRASH/gpu.sh" &&
	g=$JOB &&
	wait_for_line gpu.status "^ready " 30 &&
	test_grep "^ready .* devs=$A\$" gpu.status &&
	inner=$(sed -n "s/^ready pid=\([0-9]*\).*/\1/p" gpu.status) &&
	scancel --signal=USR1 --batch $g &&
	wait_for_line gpu.out "checkpointed to .*; requeueing it" 60 &&
	# a job that takes the first GPU before this one starts again
	sbatch_job -J hold -o /dev/null --gres=gpu:1 --wrap "sleep 300" &&
	hold=$JOB &&
	wait_job_state $hold RUNNING 30 &&
	wait_for_line gpu.out "^gpuckpt-slurm: restart 1 " 60 &&
	wait_for_line gpu.out "^gpuckpt-slurm: GPUs: $A=1\$" 10 &&
	grep "^CUDA_VISIBLE_DEVICES=" gpu.out >cvd &&
	printf "CUDA_VISIBLE_DEVICES=%s SLURM_JOB_GPUS=%s\n" 0 0 1 1 >expect &&
	test_cmp expect cvd &&
	wait_job_state $g RUNNING 30 &&
	_i=0 &&
	while r=$(here_pid $inner cudawork) && test -z "$r" && test $_i -lt 100
	do
		sleep 0.1
		_i=$((_i + 1))
	done &&
	test -n "$r" &&
	verify_workload $r gpu.status &&
	test_grep "^verify ok .* devs=$B\$" gpu.status &&
	kill -TERM $r &&
	wait_job_state $g FAILED 30 &&
	test "$(job_field $g ExitCode)" = 143:0 &&
	sacct_end $g FAILED 143 &&
	scancel $hold &&
	wait_job_state $hold CANCELLED 30
'

test_expect_success 'a restored job is checkpointed and requeued again' '
	job two &&
	submit two "-n 150 -t 100" &&
	wait_for_line two.out "^step 10 " 30 &&
	scancel --signal=USR1 --batch $JOB &&
	wait_for_line two.out "^gpuckpt-slurm: restart 1 " 60 &&
	wait_job_state $JOB RUNNING 30 &&
	_n=$(grep -c "^step " two.out) &&
	wait_for_line two.out "^step $((_n + 10)) " 30 &&
	scancel --signal=USR1 --batch $JOB &&
	wait_job_state $JOB COMPLETED 90 &&
	test "$(job_field $JOB Restarts)" = 2 &&
	sacct_end $JOB COMPLETED 0 &&
	test "$(grep -c "checkpointed to .*; requeueing it" two.out)" -eq 2 &&
	counted two 150 &&
	! test -e ckpt/two
'

test_expect_success 'the time limit warns: checkpointed, requeued, finished on the next run' '
	job lim &&
	# slurmctld looks at time limits every 30 seconds: the warning comes
	# 5 to 35 seconds into each run, while the counter (50 s) still runs
	submit lim "-n 500 -t 100" --time=1:00 --signal=B:USR1@55 &&
	wait_job_state $JOB COMPLETED 240 &&
	test "$(job_field $JOB ExitCode)" = 0:0 &&
	test "$(job_field $JOB Restarts)" -ge 1 &&
	sacct_end $JOB COMPLETED 0 &&
	counted lim 500 &&
	test_grep "^gpuckpt-slurm: SIGUSR1: checkpointing process" lim.out &&
	# it ended well: the image is gone, and its directory
	! test -e ckpt/lim
'

test_expect_success 'a damaged image fails the job, kept, with one line' '
	job bad "test \"\$SLURM_RESTART_COUNT\" = 1 &&
	    printf garbage | dd of=$TRASH/ckpt/bad/image.gck bs=1 seek=4000 conv=notrunc 2>/dev/null" &&
	submit bad "-n 600 -t 100" &&
	wait_for_line bad.out "^step 5 " 30 &&
	scancel --signal=USR1 --batch $JOB &&
	wait_job_state $JOB FAILED 60 &&
	test "$(job_field $JOB ExitCode)" = 1:0 &&
	sacct_end $JOB FAILED 1 &&
	test -s ckpt/bad/image.gck &&
	grep "^gpuckpt-slurm: cannot" bad.out >errline &&
	test_line_count errline 1 &&
	test_grep "^gpuckpt-slurm: cannot restore $TRASH/ckpt/bad/image.gck (kept): " errline &&
	test "$(grep -c "^start " bad.out)" -eq 1 &&
	! test_grep "^done" bad.out
'

test_expect_success 'a checkpoint that fails leaves the job running' '
	cat >failckpt <<-\EOF &&
	#!/bin/sh
	echo "gpuckpt: injected failure" >&2
	exit 1
	EOF
	chmod +x failckpt &&
	job nock &&
	submit nock "-n 60 -t 100 -x 3" --export=ALL,GPUCKPT=$TRASH/failckpt &&
	wait_for_line nock.out "^step 5 " 30 &&
	scancel --signal=USR1 --batch $JOB &&
	wait_job_state $JOB FAILED 60 &&
	test "$(job_field $JOB ExitCode)" = 3:0 &&
	test "$(job_field $JOB Restarts)" = 0 &&
	grep "^gpuckpt-slurm: checkpoint" nock.out >errline &&
	test_line_count errline 1 &&
	test_grep "^gpuckpt-slurm: checkpoint failed, the job goes on: injected failure\$" errline &&
	counted nock 60 &&
	! test -e ckpt/nock/image.gck
'

test_expect_success 'a cancelled job is not checkpointed' '
	job can &&
	submit can "-n 600 -t 100" &&
	wait_for_line can.out "^step 5 " 30 &&
	scancel $JOB &&
	wait_job_state $JOB CANCELLED 30 &&
	test "$(job_field $JOB Restarts)" = 0 &&
	test_grep "^gpuckpt-slurm: SIGTERM: job $JOB is ending (COMPLETING): no checkpoint\$" can.out &&
	! grep "checkpointing" can.out &&
	! test -e ckpt/can/image.gck
'

test_expect_success '--every: the node fails, the job comes back from its newest sound snapshot' '
	cat >per.sh <<-EOF &&
	#!/bin/sh
	exec "$GCKSLURM" -d "$TRASH/ckpt/per" --every 1 --keep 4 -- "$COUNTER" -n 400 -t 100
	EOF
	chmod +x per.sh &&
	submit per "" &&
	wait_job_state $JOB RUNNING &&
	sample per.out &&
	wait_snapshots ckpt/per/series 3 &&
	crash_node &&
	kill $sampler &&
	test "$(job_field $JOB JobState)" = PENDING &&
	test "$(job_field $JOB Restarts)" = 1 &&
	snapshots ckpt/per/series >listed &&
	_last=$(tail -n 1 listed) &&
	_prev=$(tail -n 2 listed | head -n 1) &&
	# the newest, damaged: cut in half, as a crash of its storage may;
	# and one left half-written, under the name a snapshot has until it
	# is complete
	_sz=$(stat -c %s ckpt/per/series/$_last) &&
	truncate -s $((_sz / 2)) ckpt/per/series/$_last &&
	_half=$(printf %06d $(($(wc -l <listed) + 1)))-20261202T000000Z.gck.tmp.crash &&
	head -c 5000 ckpt/per/series/$_prev >ckpt/per/series/$_half &&
	revive_node &&
	wait_for_line per.out "^gpurestore: restored snapshot " 120 &&
	# it goes on snapshotting
	_i=0 &&
	while ! snapshots ckpt/per/series | grep -q "^00000[4-9]-"; do
		_i=$((_i + 1)) && test $_i -le 300 || return 1
		sleep 0.1
	done &&
	! test -e ckpt/per/series/$_half &&
	wait_job_state $JOB COMPLETED 120 &&
	test "$(job_field $JOB ExitCode)" = 0:0 &&
	test_grep "^gpuckpt-slurm: restart 1 of job $JOB: restoring the newest sound snapshot of $TRASH/ckpt/per/series\$" per.out &&
	grep "^gpurestore: skipping " per.out >skipped &&
	test_line_count skipped 1 &&
	test_grep "^gpurestore: skipping snapshot .$TRASH/ckpt/per/series/$_last.: image truncated" skipped &&
	test_grep "^gpurestore: restored snapshot .$TRASH/ckpt/per/series/$_prev., taken " per.out &&
	! grep "^FAIL" per.out &&
	# no snapshot failed, nor said anything when the job ended
	! grep "^gpuckpt: " per.out &&
	test "$(grep -c "^start " per.out)" -eq 1 &&
	test "$(grep -c "^done 400 " per.out)" -eq 1 &&
	# the steps: 1 to K before the crash; after it, from the step of the
	# snapshot on, S + 1 to 400, the same sum at each step run twice, and
	# S no earlier than what the counter had reached before the
	# snapshot began (steps.log, sampled each 0.2 s)
	_t=$(sed -n "s/^gpurestore: restored snapshot .*, taken //p" per.out) &&
	_t=$(date -u -d "$_t" +%s) &&
	L=$(awk -v t=$_t "\$1 < t { n = \$2 } END { print n + 0 }" steps.log) &&
	awk -v low=$L "
		/^gpuckpt-slurm: restart 1 / { after = 1; next }
		\$1 != \"step\" { next }
		!after { if (\$2 != ++k) { print \"before: step \" \$2; bad = 1 }; sum[\$2] = \$3; next }
		!first { first = \$2; n = first - 1
			if (first < 2 || first > k + 1 || first - 1 < low) { print \"restored at step \" first \", K \" k \", low \" low; bad = 1 } }
		{ if (\$2 != ++n) { print \"after: step \" \$2; bad = 1 }
		  if ((\$2 in sum) && sum[\$2] != \$3) { print \"sum at step \" \$2; bad = 1 } }
		END { if (n != 400 || !first) { print \"ended at \" n; bad = 1 }; exit bad }" per.out &&
	# sacct: the run the node failure ended, then the one that completed
	sacct -c -n -P -j $JOB -o JobID,State,ExitCode >sacct.out &&
	printf "%s\n" "$JOB|NODE_FAIL|0:0" "$JOB|COMPLETED|0:0" >sacct.expect &&
	test_cmp sacct.expect sacct.out &&
	# it ended well: the series is gone, and its directory
	! test -e ckpt/per
'

test_expect_success '--every: a snapshot that fails is one line, the loop and the job go on; USR1 still checkpoints and requeues' '
	cat >flaky <<-EOF &&
	#!/bin/sh
	# gpuckpt, but its first two --series runs fail
	n=\$(cat "$TRASH/flaky.n" 2>/dev/null || echo 0)
	case " \$* " in
	*" --series "*)
		echo \$((n + 1)) >"$TRASH/flaky.n"
		if test \$n -lt 2; then
			echo "gpuckpt: injected failure \$((n + 1))" >&2
			exit 1
		fi
	esac
	exec "$GCKPT" "\$@"
	EOF
	chmod +x flaky &&
	cat >fl.sh <<-EOF &&
	#!/bin/sh
	exec "$GCKSLURM" -d "$TRASH/ckpt/fl" --every=1 --keep=2 -- "$COUNTER" -n 200 -t 100
	EOF
	chmod +x fl.sh &&
	submit fl "" --export=ALL,GPUCKPT=$TRASH/flaky &&
	wait_job_state $JOB RUNNING &&
	wait_snapshots ckpt/fl/series 1 &&
	scancel --signal=USR1 --batch $JOB &&
	wait_for_line fl.out "checkpointed to .*; requeueing it" 60 &&
	wait_job_state $JOB COMPLETED 120 &&
	test "$(job_field $JOB Restarts)" = 1 &&
	sacct_end $JOB COMPLETED 0 &&
	grep "^gpuckpt: " fl.out >failed &&
	printf "gpuckpt: injected failure %s\n" 1 2 >expect &&
	test_cmp expect failed &&
	# the image of the warning is newer than the series: it restores
	test_grep "^gpuckpt-slurm: restart 1 of job $JOB: restoring $TRASH/ckpt/fl/image.gck\$" fl.out &&
	counted fl 200 &&
	! test -e ckpt/fl
'

test_expect_success '--every: gpuckpt --series DIR/series --now, from outside the job, has one taken now' '
	cat >req.sh <<-EOF &&
	#!/bin/sh
	exec "$GCKSLURM" -d "$TRASH/ckpt/req" --every=3600 -- "$COUNTER" -n 150 -t 100
	EOF
	chmod +x req.sh &&
	submit req "" &&
	wait_job_state $JOB RUNNING &&
	wait_snapshots ckpt/req/series 1 &&
	test_status 0 "$GCKPT" --series=ckpt/req/series --now >out 2>err &&
	test_must_be_empty err &&
	snapshots ckpt/req/series >listed &&
	test_line_count listed 2 &&
	echo "ckpt/req/series/$(tail -n 1 listed)" >expect &&
	test_cmp expect out &&
	wait_job_state $JOB COMPLETED 60 &&
	counted req 150 &&
	! grep "^gpuckpt: " req.out
'

# gpujob NAME GPUCKPT-SLURM-OPTIONS: NAME.sh, a batch script that runs
# cudawork on a GPU under gpuckpt-slurm OPTIONS, the image in ckpt/NAME,
# its status in NAME.status; submits it with the stand-in driver, the
# driver's calls given EXTRA (VAR=VALUE,...) more, and sets JOB.
gpujob() {
	cat >"$1.sh" <<-EOF &&
	#!/bin/sh
	exec "$GCKSLURM" -d "$TRASH/ckpt/$1" $2 -- "$CUDAWORK" -m 8 -f "$TRASH/$1.status"
	EOF
	chmod +x "$1.sh" &&
	sbatch_job --requeue --open-mode=append -J "$1" -o "$TRASH/$1.out" \
	    -D "$TRASH" --gres=gpu:1 --export=ALL,$CUDAENV${3:+,$3} \
	    "$TRASH/$1.sh"
}

# drained REASON: the node is drained (up to 30 s), for REASON.
drained() {
	_i=0
	while test "$(sinfo -h -n "$slurm_node" -o %T)" != drained; do
		_i=$((_i + 1))
		test $_i -le 300 || { sinfo >&2; return 1; }
		sleep 0.1
	done
	scontrol -o show node "$slurm_node" >node.out &&
	test_grep "Reason=$1" node.out
}

# restored_gpujob NAME JOB INNER: the requeued GPU job NAME (JOB) runs
# again, cudawork restored (INNER its PID within its namespace), its
# device memory intact; then it is ended, and Slurm and sacct say so.
restored_gpujob() {
	wait_job_state $2 RUNNING 60 &&
	_i=0 &&
	while r=$(here_pid $3 cudawork) && test -z "$r" && test $_i -lt 100
	do
		sleep 0.1
		_i=$((_i + 1))
	done &&
	test -n "$r" &&
	_i=0 &&
	while ! proc_running $r >/dev/null && test $_i -lt 100; do
		sleep 0.1
		_i=$((_i + 1))
	done &&
	verify_workload $r $1.status &&
	kill -TERM $r &&
	wait_job_state $2 FAILED 30 &&
	test "$(job_field $2 ExitCode)" = 143:0 &&
	sacct_end $2 FAILED 143
}

test_expect_success '--watch: a row remapping pending: a snapshot at once, the node drained, the job requeued and restored from it' '
	gpujob wr --watch &&
	g=$JOB &&
	wait_for_line wr.status "^ready " 30 &&
	inner=$(sed -n "s/^ready pid=\([0-9]*\).*/\1/p" wr.status) &&
	wait_for_line wr.out "^gpuwatch: watching $A\$" 30 &&
	echo retire >>"$F/events/$A" &&
	wait_for_line wr.out "checkpointed to .*; requeueing it" 60 &&
	test_grep "^gpuckpt-slurm: GPU $A of node $slurm_node: a page retirement or row remapping pending (retire, degraded)\$" wr.out &&
	test_grep "^gpuckpt-slurm: node $slurm_node drained\$" wr.out &&
	test -s ckpt/wr/image.gck &&
	drained "gpuckpt-slurm: $A: a page retirement or row remapping pending" &&
	test "$(job_field $g JobState)" = PENDING &&
	# its GPU seen to, the node goes back into service
	scontrol update NodeName="$slurm_node" State=RESUME &&
	wait_for_line wr.out "^gpuckpt-slurm: restart 1 of job $g: restoring $TRASH/ckpt/wr/image.gck\$" 60 &&
	restored_gpujob wr $g $inner &&
	! grep "snapshot failed" wr.out
'

test_expect_success '--watch, a node its user cannot drain: the requeued job is kept off it' '
	cat >scontrol-user <<-EOF &&
	#!/bin/sh
	# scontrol as a user who may not change nodes
	case "\$*" in
	*NodeName=*) echo "slurm_update error: Access/permission denied" >&2; exit 1 ;;
	esac
	exec scontrol "\$@"
	EOF
	chmod +x scontrol-user &&
	gpujob wn --watch SCONTROL=$TRASH/scontrol-user &&
	g=$JOB &&
	wait_for_line wn.status "^ready " 30 &&
	inner=$(sed -n "s/^ready pid=\([0-9]*\).*/\1/p" wn.status) &&
	wait_for_line wn.out "^gpuwatch: watching $A\$" 30 &&
	echo "xid 92" >>"$F/events/$A" &&
	wait_for_line wn.out "^gpuckpt-slurm: job $g kept off node $slurm_node (ExcNodeList=$slurm_node)\$" 60 &&
	test_grep "^gpuckpt-slurm: node $slurm_node not drained: slurm_update error: Access/permission denied\$" wn.out &&
	test_grep "^gpuckpt-slurm: job $g checkpointed to .*; requeueing it\$" wn.out &&
	test "$(sinfo -h -n $slurm_node -o %T)" != drained &&
	test "$(job_field $g ExcNodeList)" = "$slurm_node" &&
	sleep 8 &&
	test "$(job_field $g JobState)" = PENDING &&
	scontrol update JobId=$g ExcNodeList= &&
	wait_for_line wn.out "^gpuckpt-slurm: restart 1 of job $g: restoring " 60 &&
	restored_gpujob wn $g $inner
'

# kill_leftover_guards: once the requeued job has left the node (it is
# drained), kills the gpuckpt processes it left under the reaper, the
# guards of snapshots stuck in the driver, until five looks in a row, a
# fifth of a second apart, find none: one reparented as its gpuckpt died
# may be missed by a look.
kill_leftover_guards() {
	_q=0
	while test $_q -lt 5; do
		_q=$((_q + 1))
		for _p in $(proc_descendants "$GCK_REAPER"); do
			test "$(cat /proc/$_p/comm 2>/dev/null)" = gpuckpt || continue
			# not one already dead, waiting for the reaper
			case $(proc_field $_p 3) in
			Z|'') continue ;;
			esac
			kill -KILL $_p 2>/dev/null
			_q=0
		done
		sleep 0.2
	done
}

test_expect_success '--watch: Xid 79 and a driver that no longer answers: bounded by --watch-timeout, requeued, restored from the newest periodic snapshot' '
	gpujob wx "--every 1 --watch --on-fatal=snapshot,drain,requeue --watch-timeout=3" \
	    FAKECUDA_CALL_TIMEOUT_MS=600000 &&
	g=$JOB &&
	wait_for_line wx.status "^ready " 30 &&
	inner=$(sed -n "s/^ready pid=\([0-9]*\).*/\1/p" wx.status) &&
	wait_for_line wx.out "^gpuwatch: watching $A\$" 30 &&
	wait_snapshots ckpt/wx/series 2 &&
	# the GPU falls off the bus: its driver hangs in every checkpoint,
	# the one of the snapshot now under way too (its lock is done)
	mkdir -p "$F/inject" &&
	_n=$(grep -c "^lock $inner " "$F/log") &&
	echo hang >"$F/inject/checkpoint" &&
	_i=0 &&
	while test "$(grep -c "^lock $inner " "$F/log")" -le $_n; do
		_i=$((_i + 1)) && test $_i -le 100 || return 1
		sleep 0.1
	done &&
	sleep 0.5 &&
	t0=$(date +%s) &&
	echo "xid 79" >>"$F/events/$A" &&
	wait_for_line wx.out "^gpuckpt-slurm: requeueing job $g: it restarts from its newest snapshot\$" 60 &&
	t1=$(date +%s) &&
	rm "$F/inject/checkpoint" &&
	test $((t1 - t0)) -le 30 &&
	test_grep "^gpuckpt-slurm: GPU $A of node $slurm_node: Xid 79: the GPU has fallen off the bus (xid, fatal)\$" wx.out &&
	test_grep "^gpuckpt-slurm: the snapshot under way did not stop in 3 s: killed\$" wx.out &&
	test_grep "^gpuckpt-slurm: snapshot failed: not done in 3 s (--watch-timeout)\$" wx.out &&
	! test -e ckpt/wx/image.gck &&
	drained "gpuckpt-slurm: $A: Xid 79: the GPU has fallen off the bus" &&
	# the tree it was, not checkpointed, ended with the job: it does not
	# run on beside the copy restored from the snapshot
	wait_gone $inner &&
	# What the hang leaves, waiting on the stand-in driver for a process
	# that is gone: the guard of the snapshot killed.  A new node has
	# none; here the stand-in, which names a process by its PID in its
	# namespace, would take the restored one for it.
	kill_leftover_guards &&
	scontrol update NodeName="$slurm_node" State=RESUME &&
	wait_for_line wx.out "^gpurestore: restored snapshot " 60 &&
	restored_gpujob wx $g $inner
'

test_expect_success '--watch: a fatal event by default: no snapshot, requeued to start anew when there is nothing to restart from' '
	gpujob wf --watch &&
	g=$JOB &&
	wait_for_line wf.status "^ready " 30 &&
	first=$(sed -n "s/^ready pid=\([0-9]*\).*/\1/p" wf.status) &&
	wait_for_line wf.out "^gpuwatch: watching $A\$" 30 &&
	echo dbe >>"$F/events/$A" &&
	wait_for_line wf.out "^gpuckpt-slurm: requeueing job $g: nothing to restart it from, it starts anew\$" 60 &&
	! grep "checkpointing" wf.out &&
	drained "gpuckpt-slurm: $A: a double-bit ECC error" &&
	wait_gone $first &&
	scontrol update NodeName="$slurm_node" State=RESUME &&
	wait_for_line wf.out "^gpuckpt-slurm: restart 1 of job $g: no image in " 60 &&
	wait_job_state $g RUNNING 60 &&
	scancel $g &&
	wait_job_state $g CANCELLED 30
'

# in_croot: a counter runs in croot, pivoted: its / is croot's mount.
in_croot() {
	for _p in $(pgrep -x counter); do
		awk '$5 == "/" { print $4 }' /proc/$_p/mountinfo 2>/dev/null |
		    grep -q "/croot\$" && return 0
	done
	echo >&2 "no counter runs in croot"
	return 1
}

# A command in a container of its own, as enroot start (or Apptainer,
# or a Slurm container plugin) runs one: ctr ROOT COMMAND... runs
# COMMAND in a mount namespace of its own, pivoted into ROOT, a busybox
# root file system with the counter and its libraries, its data bound
# from here at /data; its output the job's, a file of this host's.
test_expect_success 'a command in a container (a wrapper standing for enroot): checkpointed, requeued, restored in its root' '
	command -v busybox >/dev/null &&
	_r=$TRASH/croot &&
	mkdir -p "$_r/bin" "$_r/proc" "$_r/data" "$TRASH/cdata" &&
	cp "$(command -v busybox)" "$_r/bin/busybox" &&
	for _a in sh mount umount; do ln -s busybox "$_r/bin/$_a" || return 1; done &&
	cp "$COUNTER" "$_r/bin/counter" &&
	for _l in $(ldd "$COUNTER" | sed -n "s/.* \(\/[^ ]*\) (.*/\1/p;s/^[ 	]*\(\/[^ ]*\) (.*/\1/p"); do
		mkdir -p "$_r${_l%/*}" && cp -L "$_l" "$_r$_l" || return 1
	done &&
	cat >ctr <<-\EOF &&
	#!/bin/sh
	r=$1
	shift
	exec unshare -m sh -c "mount --bind \"\$0\" \"\$0\" && mount --bind \"$TRASH/cdata\" \"\$0/data\" && cd \"\$0\" && mkdir -p old && pivot_root . old && mount -t proc proc /proc && umount -l /old && exec \"\$@\"" "$r" "$@"
	EOF
	sed -i "s|\\\$TRASH|$TRASH|" ctr && chmod +x ctr &&
	cat >ctr.sh <<-EOF &&
	#!/bin/sh
	exec "$GCKSLURM" -d "$TRASH/ckpt/ctr" --root="$_r" --mount-map=/data="$TRASH/cdata" -- "$TRASH/ctr" "$_r" /bin/counter \$(cat "$TRASH/ctr.args")
	EOF
	chmod +x ctr.sh &&
	submit ctr "-n 200 -t 100 -x 7" &&
	wait_job_state $JOB RUNNING &&
	wait_for_line ctr.out "^step 10 " 30 &&
	in_croot &&
	scancel --signal=USR1 --batch $JOB &&
	wait_for_line ctr.out "checkpointed to .*; requeueing it" 60 &&
	"$GCKINSPECT" ckpt/ctr/image.gck >show &&
	test_grep "^root        $_r (a mount namespace of its own)\$" show &&
	test_grep "^mount       /data from $TRASH/cdata (" show &&
	wait_for_line ctr.out "^gpuckpt-slurm: restart 1 of job $JOB: restoring " 60 &&
	_s=$(grep -c "^step " ctr.out) &&
	wait_for_line ctr.out "^step $((_s + 5)) " 30 &&
	in_croot &&
	wait_job_state $JOB FAILED 90 &&
	test "$(job_field $JOB Restarts)" = 1 &&
	counted ctr 200
'

test_expect_success 'gpuckpt-slurm refuses --keep without --every, a count that is not one, a relative --root' '
	export SLURM_JOB_ID=1 &&
	test_status 2 "$GCKSLURM" --keep 3 -- true 2>err &&
	test_grep "^gpuckpt-slurm: --keep and --full-every go with --every\$" err &&
	test_status 2 "$GCKSLURM" --every 0 -- true 2>err &&
	test_grep "^gpuckpt-slurm: --every takes a positive integer, not .0.\$" err &&
	test_status 2 "$GCKSLURM" --every=x -- true 2>err &&
	test_grep "^gpuckpt-slurm: --every takes a positive integer, not .x.\$" err &&
	test_status 2 "$GCKSLURM" --every 2>err &&
	test_grep "^gpuckpt-slurm: --every needs a value\$" err &&
	test_status 2 "$GCKSLURM" --bogus -- true 2>err &&
	test_grep "^gpuckpt-slurm: unknown option --bogus\$" err &&
	test_status 2 "$GCKSLURM" -kz -- true 2>err &&
	test_grep "^gpuckpt-slurm: unknown option -z\$" err &&
	test_status 2 "$GCKSLURM" --on-event=drain -- true 2>err &&
	test_grep "^gpuckpt-slurm: --watch-events, --watch-xids, --watch-timeout, --on-event and --on-fatal go with --watch\$" err &&
	test_status 2 "$GCKSLURM" --watch --on-fatal=reboot -- true 2>err &&
	test_grep "^gpuckpt-slurm: --on-fatal takes a list of snapshot, drain and requeue, or none, not .reboot.\$" err &&
	test_status 2 "$GCKSLURM" --watch --watch-timeout=0 -- true 2>err &&
	test_grep "^gpuckpt-slurm: --watch-timeout takes a positive integer, not .0.\$" err &&
	test_status 2 "$GCKSLURM" --watch --watch-color=red -- true 2>err &&
	test_grep "^gpuckpt-slurm: unknown option --watch-color\$" err &&
	test_status 2 "$GCKSLURM" --root=ct -- true 2>err &&
	test_grep "^gpuckpt-slurm: --root takes an absolute path, not .ct.\$" err &&
	test_status 2 "$GCKSLURM" --mount-map /data -- true 2>err &&
	test_grep "^gpuckpt-slurm: --mount-map takes AT=SOURCE, both absolute paths, not ./data.\$" err &&
	unset SLURM_JOB_ID
'

test_expect_success '--watch with no NVML, or no GPU: one line, and the job runs on unwatched' '
	export SLURM_JOB_ID=1 &&
	env CUDA_VISIBLE_DEVICES=0 GPUCKPT_LIBNVML=$TRASH/none.so \
	    "$GCKSLURM" -d "$TRASH/ckpt/nonvml" --watch -- sh -c "
		# until gpuckpt-slurm has seen gpuwatch fail (20 s at most)
		i=0
		while ! grep -q \"no longer watched\" \"$TRASH/err\" &&
		    test \$i -lt 200; do
			i=\$((i + 1)); sleep 0.1
		done
		exit 3" >out 2>err
	test $? -eq 3 &&
	test_grep "^gpuwatch: cannot load NVML ($TRASH/none.so): " err &&
	test_grep "^gpuckpt-slurm: --watch: gpuwatch exited 1, the job.s GPUs are no longer watched\$" err &&
	test_line_count err 2 &&
	env -u CUDA_VISIBLE_DEVICES -u SLURM_JOB_GPUS \
	    "$GCKSLURM" -d "$TRASH/ckpt/nogpu" --watch -- true >out 2>err &&
	echo "gpuckpt-slurm: --watch: job 1 was given no GPU: none is watched" >expect &&
	test_cmp expect err &&
	unset SLURM_JOB_ID
'

test_expect_success '--launch: a job of two CUDA processes, under a job file, checkpointed as one, requeued, restored' '
	echo "13010 590.44.01" >"$F/driver" &&
	cat >launch.sh <<-EOF &&
	#!/bin/sh
	exec "$GCKSLURM" -d "$TRASH/ckpt/launch" --launch -- "$CUDAWORK" -n 2 -m 8 -f "$TRASH/launch.status"
	EOF
	chmod +x launch.sh &&
	sbatch_job --requeue --open-mode=append -J launch -o "$TRASH/launch.out" \
	    -D "$TRASH" --gres=gpu:1 --export=ALL,$CUDAENV "$TRASH/launch.sh" &&
	j=$JOB &&
	wait_for_line launch.status "^ready " 30 &&
	inner=$(sed -n "s/^ready pid=\([0-9]*\).*/\1/p" launch.status) &&
	tr "\0" "\n" </proc/$inner/environ >env &&
	test_grep "^CUDA_CHECKPOINT_JOB_FILE=/proc/$inner/fd/[0-9]*\$" env &&
	scancel --signal=USR1 --batch $j &&
	wait_for_line launch.out "checkpointed to .*; requeueing it" 60 &&
	"$GCKINSPECT" "$TRASH/ckpt/launch/image.gck" >out &&
	test_grep "^job         its CUDA processes one job (gpuckpt --launch), its file descriptor [0-9]* of process $inner\$" out &&
	restored_gpujob launch $j $inner &&
	rm -f "$F/driver"
'

test_done
