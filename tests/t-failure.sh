#!/bin/sh
test_description='a failed checkpoint leaves the process tree running'
. "$GCK_SRCDIR/lib.sh"

require_criu
require_python

started=
mnt=$TRASH/mnt
test_cleanup() {
	test -n "$started" && kill_tree $started >/dev/null 2>&1
	mountpoint -q "$mnt" 2>/dev/null && umount "$mnt"
	:
}

start() {
	start_workload "$@" || return 1
	started="$started $WPID"
	WSTART=$(proc_field $WPID 22)
}

# nothing_lost ERRFILE MESSAGE: gpuckpt said MESSAGE in one line, and the
# workload is the same process as before, running (not stopped), with its
# state intact; no staging files are left.
nothing_lost() {
	test_line_count "$1" 1 &&
	test_grep "^gpuckpt: .*$2" "$1" &&
	test_grep "; process tree $WPID left running\$" "$1" &&
	test "$(proc_field $WPID 22)" = "$WSTART" &&
	proc_running $WPID &&
	proc_running $WCHILD &&
	verify_workload $WPID &&
	test -z "$(ls -A "$TMPDIR")"
}

# tmpdir_is empty|full: waits up to 10 s for TMPDIR to be so; fails if
# it does not become so.
tmpdir_is() {
	_i=0
	while :; do
		_l=$(ls -A "$TMPDIR")
		case $1 in
		empty)	test -z "$_l" && return 0 ;;
		full)	test -n "$_l" && return 0 ;;
		esac
		_i=$((_i + 1))
		if test $_i -gt 100; then
			echo >&2 "TMPDIR is not $1 after 10 s: $_l"
			return 1
		fi
		sleep 0.1
	done
}

# streaming PID: waits until PID blocks writing to a pipe.
streaming() {
	_i=0
	while :; do
		case $(cat /proc/$1/wchan 2>/dev/null) in
		*pipe_write*)	return 0 ;;
		esac
		test -d /proc/$1 || { echo >&2 "process $1 is gone"; return 1; }
		_i=$((_i + 1))
		if test $_i -gt 600; then
			echo >&2 "process $1 never blocked on the pipe"
			return 1
		fi
		sleep 0.1
	done
}

test_expect_success 'start a 300 MiB workload' '
	start big -m 300 &&
	verify_workload $WPID
'

test_expect_success 'EPIPE: the reader exits after 1000 bytes' '
	{ "$GCKPT" -p $WPID 2>err; echo $? >st; } | head -c 1000 >/dev/null &&
	echo 1 >expect &&
	test_cmp expect st &&
	nothing_lost err "Broken pipe"
'

test_expect_success 'EPIPE: the reader reads nothing' '
	{ "$GCKPT" -p $WPID 2>err; echo $? >st; } | true &&
	echo 1 >expect &&
	test_cmp expect st &&
	nothing_lost err "Broken pipe"
'

test_expect_success 'ENOSPC on stdout (/dev/full)' '
	test_status 1 "$GCKPT" -p $WPID >/dev/full 2>err &&
	nothing_lost err "No space left on device"
'

test_expect_success 'ENOSPC on a full file system' '
	mkdir "$mnt" &&
	mount -t tmpfs -o size=1m tmpfs "$mnt" &&
	echo old >"$mnt/old.gck" &&
	test_status 1 "$GCKPT" -p $WPID -o "$mnt/img.gck" >out 2>err &&
	test_must_be_empty out &&
	nothing_lost err "No space left on device" &&
	echo old.gck >expect &&
	ls -A "$mnt" >actual &&
	test_cmp expect actual
'

test_expect_success 'ENOSPC does not clobber an existing output file' '
	test_status 1 "$GCKPT" -p $WPID -o "$mnt/old.gck" >out 2>err &&
	nothing_lost err "No space left on device" &&
	echo old >expect &&
	test_cmp expect "$mnt/old.gck" &&
	echo old.gck >expect &&
	ls -A "$mnt" >actual &&
	test_cmp expect actual &&
	umount "$mnt"
'

for sig in INT TERM HUP; do
	test_expect_success "SIG$sig while the image is streamed" '
		rm -f fifo err &&
		mkfifo fifo &&
		{ sleep 600 <fifo & } &&
		rpid=$! &&
		{ env --default-signal=INT,TERM,HUP \
		    "$GCKPT" -p $WPID -c none >fifo 2>err & } &&
		gpid=$! &&
		streaming $gpid
		ok=$?
		kill -s '$sig' $gpid
		wait_child $gpid
		st=$?
		kill $rpid
		wait $rpid
		test $ok -eq 0 &&
		test $st -eq 1 &&
		nothing_lost err "interrupted by SIG'$sig'"
	'
done

# wait_running PID: waits up to 10 s for PID to run again: neither
# stopped nor held by criu (state t).
wait_running() {
	_i=0
	while case $(proc_field $1 3) in T|t) true ;; *) false ;; esac &&
	    test $_i -lt 100; do
		_i=$((_i + 1))
		sleep 0.1
	done
	proc_running $1
}

test_expect_success 'SIGKILL to gpuckpt while the tree is stopped' '
	rm -f err &&
	{ "$GCKPT" -p $WPID -c none -o part.gck 2>err & } &&
	gpid=$! &&
	i=0 &&
	while ! ls part.gck.tmp.* >/dev/null 2>&1 && test $i -lt 100; do
		i=$((i + 1))
		sleep 0.1
	done &&
	i=0 &&
	while test -z "$(find . -name "part.gck.tmp.*" -size +1M)" &&
	    test $i -lt 300; do
		i=$((i + 1))
		sleep 0.1
	done &&
	case $(proc_field $WPID 3) in T|t) ;; *) false ;; esac &&
	kill -KILL $gpid
	wait_child $gpid
	st=$?
	test $st -eq 137 &&
	wait_running $WPID &&
	test "$(proc_field $WPID 22)" = "$WSTART" &&
	proc_running $WCHILD &&
	verify_workload $WPID &&
	tmpdir_is empty &&
	test -z "$(ls -A | grep "^part\\.gck")"
'

# strace holds back the return of the first mkdir, gpuckpt's (or
# gpurestore's) work directory, for 3 s: killed then, with the directory
# made, the tool leaves it to its guard, which already knows its name.
test_expect_success 'SIGKILL to gpuckpt as it makes its work directory' '
	command -v strace >/dev/null || { echo >&2 "strace not found"; false; } &&
	test -z "$(ls -A "$TMPDIR")" &&
	{ strace -o /dev/null -e trace=mkdir \
	    -e inject=mkdir:delay_exit=3000000:when=1 \
	    "$GCKPT" -p $WPID -o early.gck 2>err & } &&
	spid=$! &&
	tmpdir_is full &&
	gpid=$(cat /proc/$spid/task/*/children) &&
	test -n "$gpid" &&
	kill -KILL $gpid
	wait_child $spid
	tmpdir_is empty &&
	test -z "$(ls -A | grep "^early\.gck")" &&
	proc_running $WPID &&
	verify_workload $WPID
'

test_expect_success 'SIGKILL to gpurestore as it makes its work directory' '
	"$GCKPT" -R -p $WPID -o snap.gck 2>err &&
	test_must_be_empty err &&
	{ strace -o /dev/null -f -e trace=mkdir \
	    -e inject=mkdir:delay_exit=3000000:when=1 \
	    "$GCKRESTORE" snap.gck >out 2>err & } &&
	spid=$! &&
	tmpdir_is full &&
	rpid=$(cat /proc/$spid/task/*/children) &&
	test -n "$rpid" &&
	kill -KILL $rpid
	wait_child $spid
	tmpdir_is empty &&
	rm snap.gck &&
	proc_running $WPID &&
	verify_workload $WPID
'

# strace holds back gpuckpt's removals (unlinkat) for 3 s each: they
# come once the image is complete and the tree killed, as it removes
# its work directory.  Killed then, gpuckpt leaves that to its guard.
test_expect_success 'SIGKILL to gpuckpt as it removes its work directory' '
	command -v strace >/dev/null || { echo >&2 "strace not found"; false; } &&
	kill_tree $WPID &&
	start workdir -m 16 &&
	test -z "$(ls -A "$TMPDIR")" &&
	{ strace -o /dev/null -e trace=unlinkat \
	    -e inject=unlinkat:delay_enter=3000000 \
	    "$GCKPT" -p $WPID -c none -o workdir.gck 2>err & } &&
	spid=$! &&
	wait_gone $WPID &&
	test -e workdir.gck &&
	sleep 0.5 &&
	gpid=$(cat /proc/$spid/task/*/children) &&
	test -n "$gpid" &&
	test -n "$(ls -A "$TMPDIR")" &&
	kill -KILL $gpid
	wait_child $spid
	tmpdir_is empty &&
	"$GCKRESTORE" workdir.gck >out 2>rerr &&
	test_must_be_empty rerr &&
	verify_workload $WPID
'

# strace holds back the return of gpuckpt's rename for 5 s: it is killed
# once the file has its name, before it has killed the tree.  The image
# is complete: the guard must kill the tree, not resume it beside an
# image that would restore it a second time.
test_expect_success 'SIGKILL to gpuckpt once the file has its name' '
	command -v strace >/dev/null || { echo >&2 "strace not found"; false; } &&
	kill_tree $WPID &&
	start renamed -m 16 &&
	rm -f err &&
	{ strace -o /dev/null \
	    -e inject=rename,renameat,renameat2:delay_exit=5000000 \
	    "$GCKPT" -p $WPID -c none -o renamed.gck 2>err & } &&
	spid=$! &&
	i=0 &&
	while ! test -e renamed.gck && test $i -lt 300; do
		i=$((i + 1))
		sleep 0.1
	done &&
	gpid=$(cat /proc/$spid/task/*/children) &&
	test -n "$gpid" &&
	kill -KILL $gpid
	wait_child $spid
	test -e renamed.gck &&
	wait_gone $WPID &&
	wait_gone $WCHILD &&
	test -z "$(ls -A | grep "^renamed\.gck\.tmp")" &&
	"$GCKRESTORE" renamed.gck >out 2>rerr &&
	test_must_be_empty rerr &&
	echo $WPID >expect &&
	test_cmp expect out &&
	verify_workload $WPID &&
	kill_tree $WPID &&
	start big2 -m 300 &&
	verify_workload $WPID
'

test_expect_success 'criu dump fails before touching the tree' '
	fake_criu fail-before &&
	test_status 1 env GCK_CRIU="$TRASH/fakecriu" \
	    "$GCKPT" -p $WPID -o img.gck >out 2>err &&
	test_must_be_empty out &&
	nothing_lost err "criu dump" &&
	test_grep "injected failure" err &&
	test -z "$(ls -A | grep "^img\\.gck")"
'

test_expect_success 'criu dump fails after stopping the tree' '
	fake_criu fail-after &&
	test_status 1 env GCK_CRIU="$TRASH/fakecriu" \
	    "$GCKPT" -p $WPID -o img.gck >out 2>err &&
	test_must_be_empty out &&
	nothing_lost err "criu dump" &&
	test -z "$(ls -A | grep "^img\\.gck")"
'

test_expect_success 'SIGTERM while criu dump runs, with -o' '
	fake_criu slow &&
	{ GCK_CRIU=$TRASH/fakecriu \
	    "$GCKPT" -p $WPID -o img.gck >out 2>err & } &&
	gpid=$! &&
	i=0 &&
	while test "$(proc_field $WPID 3)" != T && test $i -lt 300; do
		i=$((i + 1))
		sleep 0.1
	done &&
	sleep 0.5 &&
	kill -TERM $gpid
	wait_child $gpid
	st=$?
	test $st -eq 1 &&
	test_must_be_empty out &&
	nothing_lost err "interrupted by SIGTERM" &&
	test -z "$(ls -A | grep "^img\\.gck")"
'

test_expect_success 'criu cannot be run' '
	test_status 1 env GCK_CRIU="$TRASH/no-such-criu" \
	    "$GCKPT" -p $WPID -o img.gck >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test "$(proc_field $WPID 22)" = "$WSTART" &&
	proc_running $WPID &&
	verify_workload $WPID &&
	test -z "$(ls -A | grep "^img\\.gck")" &&
	test -z "$(ls -A "$TMPDIR")"
'

test_expect_success 'an image of a criu newer than the one here: one line, nothing restored; gpuinspect --check says so' '
	"$GCKPT" -R -p $WPID -o newer.gck 2>err &&
	test_must_be_empty err &&
	cat >oldcriu <<-EOF &&
	#!/bin/sh
	case "\$1" in
	--version) printf "Version: 4.1.1\n" ;;
	*) echo >&2 "Error (criu/cr-restore.c:1): not to be run"; exit 1 ;;
	esac
	EOF
	chmod +x oldcriu &&
	v=$("$GCKINSPECT" --json newer.gck | python3 -c "import json, sys; print(json.load(sys.stdin)[\"criu\"][\"version\"])") &&
	mm=$(echo "$v" | cut -d. -f1,2) &&
	test_status 1 env GCK_CRIU="$TRASH/oldcriu" "$GCKRESTORE" newer.gck \
	    >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpurestore: the image was dumped by criu $v, which this host.s criu 4.1.1 cannot restore (criu reads the images of its own version and older): install CRIU $mm or newer\$" err &&
	test_status 1 env GCK_CRIU="$TRASH/oldcriu" "$GCKINSPECT" --check \
	    newer.gck >out 2>err &&
	test_grep "^gpuinspect: the image was dumped by criu $v, which this host.s criu 4.1.1 cannot restore (criu reads the images of its own version and older): install CRIU $mm or newer\$" err &&
	test "$(proc_field $WPID 22)" = "$WSTART" &&
	proc_running $WPID &&
	test -z "$(ls -A "$TMPDIR")"
'

test_expect_success 'a TCP connection without --tcp-established: one line names it, the tree unharmed' '
	kill_tree $WPID &&
	(setsid python3 -c "
import os, socket, sys, time
l = socket.socket()
l.bind((\"127.0.0.1\", 0))
l.listen(1)
c = socket.create_connection(l.getsockname())
a, _ = l.accept()
with open(\"tcp.pid.tmp\", \"w\") as f:
    f.write(\"%d\\n\" % os.getpid())
os.rename(\"tcp.pid.tmp\", \"tcp.pid\")
while True:
    time.sleep(1)
" </dev/null >/dev/null 2>&1 &) &&
	wait_for_line tcp.pid "^[0-9]" &&
	WPID=$(cat tcp.pid) &&
	started="$started $WPID" &&
	WSTART=$(proc_field $WPID 22) &&
	test_status 1 "$GCKPT" -p $WPID -o img.gck >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpuckpt: criu dump of pid $WPID failed: a process of the tree has an established TCP connection, which criu checkpoints only with --tcp-established; process tree $WPID left running\$" err &&
	test "$(proc_field $WPID 22)" = "$WSTART" &&
	proc_running $WPID &&
	test -z "$(ls -A | grep "^img\\.gck")" &&
	test -z "$(ls -A "$TMPDIR")"
'

test_expect_success 'without gpuckpt-hook, the tree is not touched' '
	test_status 1 env GCK_LIBEXEC_DIR="$TRASH/nowhere" "$GCKPT" -p $WPID \
	    -o img.gck >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpuckpt: cannot find .$TRASH/nowhere/gpuckpt-hook., which criu runs after the dump: No such file" err &&
	test "$(proc_field $WPID 22)" = "$WSTART" &&
	proc_running $WPID &&
	test -z "$(ls -A | grep "^img\\.gck")" &&
	test -z "$(ls -A "$TMPDIR")"
'

test_expect_success 'a process that does not exist' '
	kill_tree $WPID &&
	test_status 1 "$GCKPT" -p $WPID -o img.gck >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpuckpt: .*no such process" err &&
	test -z "$(ls -A | grep "^img\\.gck")" &&
	test -z "$(ls -A "$TMPDIR")"
'

test_done
