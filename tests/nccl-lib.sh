# nccl-lib.sh -- the ranks of a stand-in NCCL job (tests/ncclwork),
# checked as they run.
#
#	. "$GCK_SRCDIR/lib.sh"
#	. "$GCK_SRCDIR/nccl-lib.sh"
#
# NSTATUS is the status file of the ranks' root, NPID that root.

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
