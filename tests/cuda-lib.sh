# cuda-lib.sh -- trees of CUDA processes on the stand-in driver, for the
# tests of the GPU engine.
#
#	. "$GCK_SRCDIR/lib.sh"
#	. "$GCK_SRCDIR/cuda-lib.sh"
#
# Points the tools at the stand-in driver in fakecuda/ (its state in
# $TRASH/fake, $F for short), which cudawork, the workload, loads as
# libcuda.so.1: for it, a CUDA process.  cuda_start starts a tree of
# them; states checks their CUDA state.

FAKECUDA_DIR=$TRASH/fake
GPUCKPT_LIBCUDA=$GCK_TESTDIR/fakecuda/libcuda.so.1
GPUCKPT_LIBNVML=$GCK_TESTDIR/fakecuda/libnvidia-ml.so.1
FAKECUDA_CALL_TIMEOUT_MS=20000
export FAKECUDA_DIR GPUCKPT_LIBCUDA GPUCKPT_LIBNVML FAKECUDA_CALL_TIMEOUT_MS
FAKECTL=$GCK_TESTDIR/fakecuda/fakectl
CUDAWORK=$GCK_TESTDIR/cudawork
PLAINWORK=$WORKLOAD
F=$FAKECUDA_DIR

started=
test_cleanup() {
	test -n "$started" && kill_tree $started >/dev/null 2>&1
	:
}

# cuda_start NAME [cudawork options]: a tree of CUDA processes.  Sets
# WPIDS (the root first) and WDEVS (the GPU of each, as cudawork says),
# besides what start_workload sets.
cuda_start() {
	WORKLOAD=$CUDAWORK
	LD_LIBRARY_PATH=$GCK_TESTDIR/fakecuda
	export LD_LIBRARY_PATH
	start_workload "$@"
	_st=$?
	unset LD_LIBRARY_PATH
	WORKLOAD=$PLAINWORK
	test $_st -eq 0 || return 1
	started="$started $WPID"
	WPIDS="$WPID $(proc_descendants $WPID)"
	WDEVS=$(sed -n 's/^ready .*devs=\([^ ]*\).*/\1/p' "$WSTATUS")
}

# states STATE: every process of the tree is in this CUDA state.
states() {
	for _p in $WPIDS; do
		_s=$("$FAKECTL" state $_p) || return 1
		if test "$_s" != "$1"; then
			echo >&2 "process $_p is $_s, not $1"
			return 1
		fi
	done
}
