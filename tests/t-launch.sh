#!/bin/sh
test_description='gpuckpt --launch: a command under a job file of its own'
. "$GCK_SRCDIR/lib.sh"

. "$GCK_SRCDIR/cuda-lib.sh"

require_criu

mkdir -p "$F/delay" || exit 1
printf 'GPU-aaaaaaaa-1111-4000-8000-000000000001 9.0 1073741824 0000:01:00.0 NVIDIA H100 80GB HBM3\n' >"$F/gpus"

test_expect_success 'the command runs in place, the job file a memfd named by its PID' '
	echo "13010 590.44.01" >"$F/driver" &&
	test_status 0 "$GCKPT" --launch sh -c "
	    echo \$\$ \$CUDA_CHECKPOINT_JOB_FILE
	    readlink \$CUDA_CHECKPOINT_JOB_FILE" >out 2>err &&
	test_must_be_empty err &&
	read pid file <out &&
	case $file in /proc/$pid/fd/[0-9]*) ;; *) echo >&2 "$file"; false ;; esac &&
	sed -n 2p out >link &&
	test_grep "^/memfd:cuda-checkpoint-job" link
'

test_expect_success 'a child that closed it finds it still through its root, while that lives' '
	test_status 0 "$GCKPT" --launch sh -c "
	    fd=\${CUDA_CHECKPOINT_JOB_FILE##*/}
	    sh -c \"eval exec \$fd\\\\<\\\\&-; ls /proc/self/fd/\$fd 2>/dev/null;
	        readlink \\\$CUDA_CHECKPOINT_JOB_FILE\"" >out 2>err &&
	test_line_count out 1 &&
	test_grep "^/memfd:cuda-checkpoint-job" out
'

test_expect_success 'options after the command are its own; its exit status is gpuckpt'"'"'s' '
	test_status 3 "$GCKPT" --launch sh -c "echo \"\$1\"; exit 3" sh -p 1 \
	    >out 2>err &&
	echo "-p" >expect &&
	test_cmp expect out
'

test_expect_success 'a driver older than r590: one line, nothing run' '
	echo "13000 580.65.06" >"$F/driver" &&
	test_status 1 "$GCKPT" --launch sh -c "echo ran" >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpuckpt: cannot launch .sh.: a job file needs NVIDIA driver r590 (CUDA 13.1) or newer; this driver is CUDA 13.0$" err
'

test_expect_success 'no CUDA driver at all: one line, nothing run' '
	echo "13010 590.44.01" >"$F/driver" &&
	(GPUCKPT_LIBCUDA=$TRASH/none.so &&
	    test_status 1 "$GCKPT" --launch sh -c "echo ran") >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpuckpt: cannot launch .sh.: a job file needs NVIDIA driver r590 (CUDA 13.1) or newer: no CUDA driver could be loaded" err
'

test_expect_success 'a command that is not there, or cannot run: 127, 126, one line' '
	test_status 127 "$GCKPT" --launch ./no-such-command >out 2>err &&
	test_line_count err 1 &&
	test_grep "^gpuckpt: cannot run .\./no-such-command.: No such file or directory$" err &&
	: >notexec &&
	chmod 644 notexec &&
	test_status 126 "$GCKPT" --launch ./notexec >out 2>err &&
	test_line_count err 1 &&
	test_grep "^gpuckpt: cannot run .\./notexec.: Permission denied$" err
'

test_expect_success 'usage: --launch with no command, or with options of a checkpoint' '
	test_status 2 "$GCKPT" --launch >out 2>err &&
	test_grep "^gpuckpt: --launch: no command given$" err &&
	test_status 2 "$GCKPT" -p 1 --launch true >out 2>err &&
	test_grep "^gpuckpt: --launch takes no other option but -v" err
'

# A job: cudawork started by gpuckpt --launch, in place of it.
printf '#!/bin/sh\nexec "%s" --launch "%s" "$@"\n' "$GCKPT" "$CUDAWORK" \
    >"$TRASH/launchwork" && chmod +x "$TRASH/launchwork" || exit 1
job_start() {
	_cw=$CUDAWORK
	CUDAWORK=$TRASH/launchwork
	cuda_start "$@"
	_st=$?
	CUDAWORK=$_cw
	return $_st
}

# serial ACTION PID...: one successful ACTION of each in the log, no two
# of them at once.
serial() {
	_a=$1
	shift
	for _p in "$@"; do
		grep "^$_a $_p .* CUDA_SUCCESS " "$F/log" | tail -n 1
	done | sort -k3,3n | awk -v n=$# '
	{ if (c > 0 && $3 < e) bad = 1; e = $4; c++ }
	END { exit !(c == n && !bad) }' && return 0
	echo >&2 "no $_a of each, one after the other:"
	cat >&2 "$F/log"
	return 1
}

test_expect_success 'a job of two CUDA processes is checkpointed one process at a time' '
	echo "13040 595.10.01" >"$F/driver" &&
	job_start j1 -n 2 -m 4 &&
	test $(echo $WPIDS | wc -w) -eq 2 &&
	test "$(tr "\0" "\n" </proc/$WCHILD/environ |
	    sed -n "s/^CUDA_CHECKPOINT_JOB_FILE=//p")" = "$(tr "\0" "\n" \
	    </proc/$WPID/environ | sed -n "s/^CUDA_CHECKPOINT_JOB_FILE=//p")" &&
	fd=$(tr "\0" "\n" </proc/$WPID/environ |
	    sed -n "s|^CUDA_CHECKPOINT_JOB_FILE=/proc/$WPID/fd/||p") &&
	test -n "$fd" &&
	verify_workload $WPID &&
	echo 300 >"$F/delay/lock" &&
	echo 300 >"$F/delay/checkpoint" &&
	: >"$F/log" &&
	"$GCKPT" -v -p $WPID -o img.gck >out 2>err &&
	for p in $WPIDS; do wait_gone $p || return 1; done &&
	test_grep "a job: its file is descriptor $fd of process $WPID; its processes one at a time" err &&
	serial lock $WPIDS &&
	serial checkpoint $WPIDS &&
	! grep -q "storage" "$F/log"
'

test_expect_success 'gpuinspect: the image is of a job, its file where' '
	test_status 0 "$GCKINSPECT" img.gck >out 2>err &&
	test_grep "^job         its CUDA processes one job (gpuckpt --launch), its file descriptor $fd of process $WPID\$" out &&
	test_status 0 "$GCKINSPECT" --json img.gck >out 2>err &&
	python3 -c "
import json, sys
c = json.load(open(\"out\"))[\"cuda\"]
sys.exit(c[\"job\"] != {\"holder\": $WPID, \"fd\": $fd})"
'

test_expect_success 'gpurestore names the job to the driver and restores it one at a time' '
	echo 300 >"$F/delay/restore" &&
	echo 300 >"$F/delay/unlock" &&
	: >"$F/log" &&
	"$GCKRESTORE" -v img.gck >out 2>err &&
	echo $WPID >expect &&
	test_cmp expect out &&
	serial restore $WPIDS &&
	serial unlock $WPIDS &&
	states RUNNING &&
	readlink /proc/$WPID/fd/$fd >link &&
	test_grep "^/memfd:cuda-checkpoint-job" link &&
	verify_workload $WPID
'

test_expect_success 'the stand-in driver refuses a caller that does not name the job' '
	rm -f "$F/delay/lock" "$F/delay/checkpoint" "$F/delay/restore" \
	    "$F/delay/unlock" &&
	test_status 1 "$FAKECTL" lock $WPID >out 2>err &&
	test_grep "CUDA_ERROR_INVALID_VALUE" err &&
	states RUNNING
'

test_expect_success 'gpuckpt --suspend, gpurestore --resume: one at a time too' '
	echo 200 >"$F/delay/checkpoint" &&
	echo 200 >"$F/delay/restore" &&
	: >"$F/log" &&
	test_status 0 "$GCKPT" --suspend -p $WPID >out 2>err &&
	serial checkpoint $WPIDS &&
	states CHECKPOINTED &&
	test_status 0 "$GCKRESTORE" --resume -p $WPID >out 2>err &&
	serial restore $WPIDS &&
	states RUNNING &&
	verify_workload $WPID &&
	rm -f "$F/delay/checkpoint" "$F/delay/restore"
'

# job_checkpoint ROOT IMAGE: gpuckpt -v of the job at ROOT into IMAGE,
# each checkpoint of the stand-in 300 ms long, its log emptied first; the
# processes WPIDS gone after, and gpuckpt took a job, its file descriptor
# $fd of process $WPID, one process at a time.
job_checkpoint() {
	echo 300 >"$F/delay/checkpoint" &&
	: >"$F/log" &&
	"$GCKPT" -v -p $1 -o "$2" 2>err &&
	for _p in $WPIDS; do wait_gone $_p || return 1; done &&
	test_grep "a job: its file is descriptor $fd of process $WPID; its processes one at a time" err
}

# restored_ns IMAGE: the job restored from IMAGE in a PID namespace of its
# own, running, its memory checked; WPID and WPIDS its PIDs here.
restored_ns() {
	"$GCKRESTORE" --pidns "$1" >out 2>err &&
	WPID=$(cat out) &&
	WPIDS="$WPID $(proc_descendants $WPID)" &&
	states RUNNING &&
	verify_workload $WPID
}

test_expect_success 'a job restored in a PID namespace of its own is checkpointed and restored again' '
	# (the stand-in logs a process by its PID in its namespace)
	keys=$WPIDS &&
	"$GCKPT" -p $WPID -o img3.gck 2>err &&
	for p in $WPIDS; do wait_gone $p || return 1; done &&
	"$GCKRESTORE" --pidns img3.gck >out 2>err &&
	root=$(cat out) &&
	test "$root" != $WPID &&
	WPIDS="$root $(proc_descendants $root)" &&
	test $(echo $WPIDS | wc -w) -eq 2 &&
	states RUNNING &&
	verify_workload $root &&
	job_checkpoint $root img4.gck &&
	serial checkpoint $keys &&
	"$GCKINSPECT" img4.gck >out &&
	test_grep "^job .* its file descriptor $fd of process $WPID\$" out &&
	rm -f "$F/delay/checkpoint" &&
	restored_ns img4.gck
'

test_expect_success 'a job'"'"'s image, a driver older than r590 here: one line, nothing restored' '
	"$GCKPT" -p $WPID -o img5.gck 2>err &&
	for p in $WPIDS; do wait_gone $p || return 1; done &&
	echo "13000 580.65.06" >"$F/driver" &&
	: >"$F/log" &&
	test_status 1 "$GCKRESTORE" img5.gck >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpurestore: cannot restore: the image.s CUDA processes are one job (gpuckpt --launch), which needs NVIDIA driver r590 (CUDA 13.1) or newer; this driver is CUDA 13.0\$" err &&
	test_must_be_empty "$F/log" &&
	for p in $WPIDS; do proc_gone $p || return 1; done &&
	test_status 1 "$GCKINSPECT" --check img5.gck >out 2>err &&
	test_grep "the image.s CUDA processes are one job (gpuckpt --launch), which needs NVIDIA driver r590 (CUDA 13.1) or newer; the CUDA driver here is CUDA 13.0" err &&
	echo "13040 595.10.01" >"$F/driver" &&
	restored_ns img5.gck
'

test_expect_success 'a job whose file each process names as its own (/proc/self/fd/N), another memfd: taken as one too' '
	kill_tree $WPID &&
	started= &&
	cat >"$TRASH/selfwork" <<-EOF &&
	#!/bin/sh
	exec python3 -c "
	import os, sys
	fd = os.memfd_create(\"nvidia-job\", 0)
	os.environ[\"CUDA_CHECKPOINT_JOB_FILE\"] = \"/proc/self/fd/%d\" % fd
	os.execv(sys.argv[1], sys.argv[1:])" "$CUDAWORK" "\$@"
	EOF
	chmod +x "$TRASH/selfwork" &&
	_cw=$CUDAWORK &&
	CUDAWORK=$TRASH/selfwork &&
	cuda_start j3 -n 2 -m 4 &&
	CUDAWORK=$_cw &&
	fd=$(tr "\0" "\n" </proc/$WPID/environ |
	    sed -n "s|^CUDA_CHECKPOINT_JOB_FILE=/proc/self/fd/||p") &&
	test -n "$fd" &&
	job_checkpoint $WPID img6.gck &&
	serial checkpoint $WPIDS &&
	rm -f "$F/delay/checkpoint" &&
	: >"$F/log" &&
	"$GCKRESTORE" img6.gck >out 2>err &&
	serial restore $WPIDS &&
	states RUNNING &&
	verify_workload $WPID
'

test_expect_success 'part of a job, without the process that holds its file: refused, left running' '
	kill_tree $WPID &&
	started= &&
	cat >"$TRASH/holdwork" <<-EOF &&
	#!/bin/sh
	"$CUDAWORK" "\$@" &
	wait
	EOF
	chmod +x "$TRASH/holdwork" &&
	printf "#!/bin/sh\nexec \"%s\" --launch \"%s\" \"\$@\"\n" "$GCKPT" \
	    "$TRASH/holdwork" >"$TRASH/launchwork" &&
	job_start j2 -n 1 -m 4 &&
	holder=$(cat /proc/$WPID/stat | cut -d" " -f4) &&
	: >"$F/log" &&
	test_status 1 "$GCKPT" -p $WPID -o img2.gck >out 2>err &&
	test_line_count err 1 &&
	test_grep "^gpuckpt: cannot checkpoint pid $WPID: process $WPID is of a job whose file ./proc/$holder/fd/[0-9]*. is not one that a process of the tree holds (start the job with gpuckpt --launch, and take the whole tree it starts)" err &&
	test_must_be_empty "$F/log" &&
	test ! -e img2.gck &&
	states RUNNING &&
	verify_workload $WPID &&
	kill_tree $holder
'

# Jobs whose processes share device memory through CUDA IPC (cudawork
# -i): ipc_verified ROOT checks the tree, and that the root's word went
# through the shared page to its child and the child's back.
printf '#!/bin/sh\nexec "%s" --launch "%s" "$@"\n' "$GCKPT" "$CUDAWORK" \
    >"$TRASH/launchwork" || exit 1
ipc_verified() {
	verify_workload $1 || return 1
	case $_line in
	*" ipc=1") ;;
	*)	echo >&2 "not shared: $_line"; return 1 ;;
	esac
}
# ipc_refused IMAGE WHY: gpuckpt of the tree at WPID into IMAGE fails in
# one line, the lock refused for WHY (a regex); the driver did nothing,
# no image, the tree running and sharing on.
ipc_refused() {
	: >"$F/log" &&
	test_status 1 "$GCKPT" -p $WPID -o "$1" >out 2>err &&
	test_line_count err 1 &&
	test_grep "^gpuckpt: .*process [0-9]* (.cudawork.): GPU lock failed: CUDA_ERROR_NOT_SUPPORTED (a process that shares device memory through CUDA IPC is checkpointed only $2)" err &&
	grep -q "^lock " "$F/log" &&
	! grep -q "^[a-z-]* .* CUDA_SUCCESS " "$F/log" &&
	test ! -e "$1" &&
	states RUNNING &&
	ipc_verified $WPID
}

test_expect_success 'a job that shares device memory through CUDA IPC, r610: checkpointed, restored, shared still' '
	started= &&
	echo "13040 610.10.01" >"$F/driver" &&
	job_start j4 -i -n 2 -m 4 &&
	ipc_verified $WPID &&
	test -n "$(ls "$F/ipc")" &&
	fd=$(tr "\0" "\n" </proc/$WPID/environ |
	    sed -n "s|^CUDA_CHECKPOINT_JOB_FILE=/proc/$WPID/fd/||p") &&
	job_checkpoint $WPID img7.gck &&
	serial lock $WPIDS &&
	serial checkpoint $WPIDS &&
	! grep -q "storage" "$F/log" &&
	rm -f "$F/delay/checkpoint" &&
	: >"$F/log" &&
	"$GCKRESTORE" img7.gck >out 2>err &&
	serial restore $WPIDS &&
	states RUNNING &&
	ipc_verified $WPID
'

test_expect_success 'the job restored onto another GPU (--gpu-map): shared still, where its memory is now' '
	G1=GPU-aaaaaaaa-1111-4000-8000-000000000001 &&
	G2=GPU-aaaaaaaa-1111-4000-8000-000000000002 &&
	printf "$G2 9.0 1073741824 0000:02:00.0 NVIDIA H100 80GB HBM3\n" \
	    >>"$F/gpus" &&
	job_checkpoint $WPID img7b.gck &&
	rm -f "$F/delay/checkpoint" &&
	"$GCKRESTORE" --gpu-map $G1=$G2 img7b.gck >out 2>err &&
	states RUNNING &&
	ipc_verified $WPID &&
	case $_line in *" devs=$G2,$G2 "*) ;; *) echo >&2 "$_line"; false ;; esac &&
	grep "^$G2 " "$F/ipc/$WPID-"* &&
	test -s "$F/mem/$G2/$WPID" &&
	test ! -e "$F/mem/$G1/$WPID"
'

test_expect_success 'the same tree not started as a job: refused in one line naming --launch and r610, nothing locked' '
	kill_tree $WPID &&
	started= &&
	cuda_start j5 -i -n 2 -m 4 &&
	ipc_verified $WPID &&
	ipc_refused img8.gck "in a job started with gpuckpt --launch, on NVIDIA driver r610 or newer"
'

test_expect_success 'a job of that kind on a driver before r610: refused, naming r610 and the driver' '
	kill_tree $WPID &&
	started= &&
	echo "13040 595.10.01" >"$F/driver" &&
	job_start j6 -i -n 2 -m 4 &&
	ipc_verified $WPID &&
	ipc_refused img9.gck "on NVIDIA driver r610 or newer; this driver is 595\.10\.01"
'

test_done
