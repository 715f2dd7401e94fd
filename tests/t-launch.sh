#!/bin/sh
test_description='gpuckpt --launch: a command under a job file of its own'
. "$GCK_SRCDIR/lib.sh"

. "$GCK_SRCDIR/cuda-lib.sh"

mkdir -p "$F" || exit 1
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

test_done
