#!/bin/sh
test_description='the criu options --file-locks, --ext-unix-sk and --tcp-established'
. "$GCK_SRCDIR/lib.sh"

require_criu
require_sshd
for _c in unshare nsenter; do
	command -v $_c >/dev/null || test_skip_all "$_c not found"
done

CO=$GCK_TESTDIR/criuopts
GCKSEND=$GCK_BINDIR/send/gpusend
RPATH="GCK_RUNDIR=$TRASH/run TMPDIR=$TRASH/rtmp $GCK_BINDIR/recv/gpurecv"

started=
sshd_pid=
test_cleanup() {
	for _d in $started; do
		touch "$_d/go" "$_d/exit" 2>/dev/null
	done
	for _p in $(cat "$TRASH"/*/ready 2>/dev/null); do
		kill -KILL $_p 2>/dev/null
	done
	test -n "$sshd_pid" && kill_tree $sshd_pid >/dev/null 2>&1
	:
}

# start_co DIR CASE ARG: runs 'criuopts CASE ARG DIR' in a session of
# its own and waits until it is ready; sets P, its pid, and START, its
# start time.
start_co() {
	rm -rf "$TRASH/$1"
	mkdir "$TRASH/$1" || return 1
	started="$started $TRASH/$1"
	(setsid "$CO" "$2" "$3" "$TRASH/$1" </dev/null >"$TRASH/$1.out" \
	    2>&1 &)
	wait_for_line "$TRASH/$1/ready" . 10 || return 1
	P=$(cat "$TRASH/$1/ready")
	START=$(proc_field $P 22)
}

# go DIR CASE: lets the workload of DIR go on and checks what it says.
go() {
	touch "$TRASH/$1/go" &&
	wait_for_line "$TRASH/$1/result" . 10 &&
	echo "ok $2" >expect &&
	test_cmp expect "$TRASH/$1/result"
}

# refused ERR OPTION: a checkpoint failed with one line that names the
# option and says the tree was left running.
refused() {
	cat >&2 "$1"
	test_line_count "$1" 1 &&
	test_grep "only with --$2;" "$1" &&
	test_grep "; process tree $P left running\$" "$1"
}

# move ARGS: gpuckpt ARGS -p $P | gpurestore; both must succeed, and
# the restored root is $P.
move() {
	{ "$GCKPT" "$@" -p $P 2>ck.err; echo $? >ck.st; } |
	    "$GCKRESTORE" >rs.out 2>rs.err
	_st=$?
	cat >&2 ck.err rs.err
	test $_st -eq 0 && test "$(cat ck.st)" = 0 &&
	test_must_be_empty ck.err && test_must_be_empty rs.err &&
	echo $P >expect && test_cmp expect rs.out
}

for kind in flock posix; do
	test_expect_success "a $kind lock: without --file-locks, one line names it" "
		start_co $kind $kind '$TRASH/$kind.lock' &&
		test_status 1 '$CO' trylock $kind '$TRASH/$kind.lock' &&
		test_status 1 \"\$GCKPT\" -p \$P -o img.gck >out 2>err &&
		test_must_be_empty out &&
		refused err file-locks &&
		! test -e img.gck &&
		proc_unharmed \$P \$START &&
		test_status 1 '$CO' trylock $kind '$TRASH/$kind.lock'
	"

	test_expect_success "a $kind lock: --file-locks keeps it held, and it can be dropped" "
		move --file-locks &&
		proc_restored \$P \$START &&
		test_status 1 '$CO' trylock $kind '$TRASH/$kind.lock' >out &&
		if test $kind = posix; then
			echo \"held by \$P\" >expect && test_cmp expect out
		fi &&
		go $kind $kind &&
		test_status 0 '$CO' trylock $kind '$TRASH/$kind.lock' &&
		touch '$TRASH/$kind/exit' &&
		wait_gone \$P
	"
done

test_expect_success 'a datagram peer outside the tree' '
	start_co dpeer dgram-peer "$TRASH/dgram.sock" &&
	PEER=$P
'

test_expect_success 'a unix socket connected outside: without --ext-unix-sk, one line names it' '
	start_co dgram dgram "$TRASH/dgram.sock" &&
	wait_for_line dpeer/received "^before $P\$" 10 &&
	test_status 1 "$GCKPT" -p $P -o img.gck >out 2>err &&
	refused err ext-unix-sk &&
	proc_unharmed $P $START
'

test_expect_success 'a unix socket connected outside: --ext-unix-sk restores it, still connected' '
	move --ext-unix-sk &&
	proc_restored $P $START &&
	go dgram dgram &&
	wait_for_line dpeer/received "^after $P\$" 10 &&
	wait_gone $P
'

test_expect_success 'a unix stream socket connected outside is refused, and runs on' '
	start_co speer stream-peer "$TRASH/stream.sock" &&
	start_co stream stream "$TRASH/stream.sock" &&
	wait_for_line speer/received "^before $P\$" 10 &&
	test_status 1 "$GCKPT" -p $P -o img.gck >out 2>err &&
	refused err ext-unix-sk &&
	test_status 1 "$GCKPT" --ext-unix-sk -p $P -o img.gck >out 2>err &&
	cat >&2 err &&
	test_line_count err 1 &&
	test_grep "unix stream socket .* which criu cannot checkpoint (--ext-unix-sk takes datagram sockets only); process tree $P left running\$" err &&
	proc_unharmed $P $START &&
	go stream stream &&
	wait_for_line speer/received "^after $P\$" 10
'

test_expect_success 'an established TCP connection: without --tcp-established, one line names it' '
	start_co tpeer tcp-peer - &&
	wait_for_line tpeer/port . 10 &&
	start_co tcp tcp $(cat tpeer/port) &&
	wait_for_line tpeer/received "^before $P\$" 10 &&
	test_status 1 "$GCKPT" -p $P -o img.gck >out 2>err &&
	refused err tcp-established &&
	proc_unharmed $P $START
'

test_expect_success 'an established TCP connection: --tcp-established keeps it' '
	proc_unharmed $P $START &&
	START=$(proc_field $P 22) &&
	move --tcp-established &&
	proc_restored $P $START &&
	go tcp tcp &&
	wait_for_line tpeer/received "^after $P\$" 10
'

# A criu that says what it was asked to do.
cat >recordcriu <<EOF
#!/bin/sh
echo "\$*" >>"$TRASH/criu.argv"
exec "$CRIU" "\$@"
EOF
chmod +x recordcriu

# closed DIR PEERDIR PID: the connection of the tcp workload of DIR was
# restored closed: told to go on, its process (PID, as we see it) finds
# it shut (its send fails, SIGPIPE ends it) and its peer gets nothing.
closed() {
	touch "$TRASH/$1/go" &&
	wait_gone $3 &&
	! grep "^after " "$TRASH/$2/received" &&
	! grep "^ok " "$TRASH/$1/result" 2>/dev/null
}

test_expect_success 'an established TCP connection: gpurestore --tcp-close restores it closed' '
	start_co tpeer2 tcp-peer - &&
	wait_for_line tpeer2/port . 10 &&
	start_co tcp2 tcp $(cat tpeer2/port) &&
	wait_for_line tpeer2/received "^before $P\$" 10 &&
	"$GCKPT" --tcp-established -p $P -o tcp2.gck 2>err &&
	test_must_be_empty err &&
	wait_gone $P &&
	: >criu.argv &&
	GCK_CRIU=$TRASH/recordcriu "$GCKRESTORE" --tcp-close tcp2.gck >out 2>err &&
	test_must_be_empty err &&
	echo $P >expect &&
	test_cmp expect out &&
	grep "^restore " criu.argv >restore.argv &&
	test_grep " --tcp-close" restore.argv &&
	! grep -e "--tcp-established" restore.argv &&
	proc_restored $P $START &&
	closed tcp2 tpeer2 $P
'

test_expect_success 'gpuckpt --tcp-close: the connection ends with the source, and is restored closed' '
	start_co tpeer4 tcp-peer - &&
	wait_for_line tpeer4/port . 10 &&
	start_co tcp4 tcp $(cat tpeer4/port) &&
	wait_for_line tpeer4/received "^before $P\$" 10 &&
	test_status 2 "$GCKPT" --tcp-close --tcp-established -p $P -o tcp4.gck >out 2>err &&
	test_grep "^gpuckpt: --tcp-close and --tcp-established exclude each other\$" err &&
	proc_unharmed $P $START &&
	move --tcp-close &&
	proc_restored $P $START &&
	wait_for_line tpeer4/received "^end\$" 10 &&
	closed tcp4 tpeer4 $P
'

test_expect_success 'gpuckpt -R --tcp-close: the tree runs on with its connection; the image records the option' '
	start_co tpeer5 tcp-peer - &&
	wait_for_line tpeer5/port . 10 &&
	start_co tcp5 tcp $(cat tpeer5/port) &&
	wait_for_line tpeer5/received "^before $P\$" 10 &&
	"$GCKPT" -R --tcp-close -p $P -o tcp5.gck 2>err &&
	test_must_be_empty err &&
	proc_unharmed $P $START &&
	"$GCKINSPECT" --json tcp5.gck >show.json &&
	tr -d " \n" <show.json >show.flat &&
	test_grep "\"options\":\[\"tcp-close\"\]" show.flat &&
	go tcp5 tcp &&
	wait_for_line tpeer5/received "^after $P\$" 10
'

test_expect_success 'the options reach criu dump and criu restore, through the image' '
	start_workload w &&
	: >criu.argv &&
	GCK_CRIU=$TRASH/recordcriu "$GCKPT" --tcp-established --file-locks \
	    --ext-unix-sk -p $WPID -o img.gck 2>err &&
	test_must_be_empty err &&
	grep "^dump " criu.argv >dump.argv &&
	test_line_count dump.argv 1 &&
	test_grep " --leave-stopped .*--tcp-established --ext-unix-sk --file-locks" dump.argv &&
	"$GCKINSPECT" --json img.gck >show.json &&
	tr -d " \n" <show.json >show.flat &&
	test_grep "\"criu\":{\"version\":\"[0-9.]*\",\"options\":\[\"tcp-established\",\"ext-unix-sk\",\"file-locks\"\]}" show.flat &&
	"$GCKINSPECT" img.gck >show.txt &&
	test_grep "^criu        --tcp-established --ext-unix-sk --file-locks\$" show.txt &&
	GCK_CRIU=$TRASH/recordcriu "$GCKRESTORE" img.gck >out 2>err &&
	test_must_be_empty err &&
	grep "^restore " criu.argv >restore.argv &&
	test_line_count restore.argv 1 &&
	test_grep " --tcp-established --ext-unix-sk --file-locks" restore.argv &&
	verify_workload $WPID &&
	kill_tree $WPID
'

test_expect_success 'an image dumped without them is restored without them' '
	start_workload w2 &&
	: >criu.argv &&
	GCK_CRIU=$TRASH/recordcriu "$GCKPT" -p $WPID -o img2.gck &&
	GCK_CRIU=$TRASH/recordcriu "$GCKRESTORE" img2.gck >out &&
	! grep -e "--tcp-established\|--ext-unix-sk\|--file-locks" criu.argv &&
	"$GCKINSPECT" --json img2.gck >show.json &&
	tr -d " \n" <show.json >show.flat &&
	test_grep "\"criu\":{\"version\":\"[0-9.]*\",\"options\":\[\]}" show.flat &&
	verify_workload $WPID &&
	kill_tree $WPID
'

test_expect_success '--leave-running --tcp-established: criu lets the tree run on' '
	start_workload w3 &&
	verify_workload $WPID &&
	before=$VCOUNTER &&
	: >criu.argv &&
	GCK_CRIU=$TRASH/recordcriu "$GCKPT" --leave-running --tcp-established \
	    -p $WPID -o img3.gck &&
	test_grep "^dump .* --leave-running .*--tcp-established" criu.argv &&
	sleep 0.2 &&
	verify_workload $WPID &&
	test $VCOUNTER -gt $before &&
	kill_tree $WPID
'

# The hand-over restores the tree there while the source, stopped here,
# still holds its locks: a lock file both share would have the restore
# wait for ever.  There, in the mount namespace of sshd, the lock file is
# another file of the same name, as on another host.
test_expect_success 'sshd in a PID namespace of its own, with a lock file of its own' '
	ssh-keygen -q -t ed25519 -N "" -C gck-host -f hostkey &&
	ssh-keygen -q -t ed25519 -N "" -C gck-user -f userkey &&
	cp userkey.pub authorized_keys &&
	mkdir home rtmp locks &&
	: >locks/send.lock &&
	start_nssh &&
	echo "[127.0.0.1]:$port $(cat hostkey.pub)" >known_hosts &&
	nsenter -t $ns_init -m mount -t tmpfs tmpfs "$TRASH/locks" &&
	nsenter -t $ns_init -m touch "$TRASH/locks/send.lock"
'

gsend() {
	HOME=$TRASH/home "$GCKSEND" -P "$port" -i "$TRASH/userkey" \
	    -o IdentityAgent=none -o UserKnownHostsFile="$TRASH/known_hosts" \
	    --remote-path "$RPATH" "$@"
}

# there_trylock: criuopts trylock flock, on the lock file there.
there_trylock() {
	nsenter -t $ns_init -m "$CO" trylock flock "$TRASH/locks/send.lock"
}

test_expect_success 'gpusend -p without --file-locks: one line names it' '
	start_co slock flock "$TRASH/locks/send.lock" &&
	test_status 1 gsend -p $P root@127.0.0.1 >out 2>err &&
	test_must_be_empty out &&
	refused err file-locks &&
	test_grep "^gpusend: local: " err &&
	proc_unharmed $P $START &&
	test_status 1 "$CO" trylock flock "$TRASH/locks/send.lock"
'

test_expect_success 'gpusend --file-locks -p moves the tree, its lock held there' '
	test_status 0 there_trylock &&
	gsend --file-locks -p $P root@127.0.0.1 >out 2>err &&
	test_must_be_empty err &&
	echo $P >expect &&
	test_cmp expect out &&
	wait_gone $P &&
	test_status 0 "$CO" trylock flock "$TRASH/locks/send.lock" &&
	test_status 1 there_trylock &&
	go slock flock &&
	test_status 0 there_trylock &&
	touch slock/exit
'

test_expect_success 'gpusend --tcp-established --tcp-close: the connection is closed there' '
	start_co tpeer3 tcp-peer - &&
	wait_for_line tpeer3/port . 10 &&
	start_co tcp3 tcp $(cat tpeer3/port) &&
	wait_for_line tpeer3/received "^before $P\$" 10 &&
	gsend --tcp-established --tcp-close -p $P root@127.0.0.1 >out 2>err &&
	test_must_be_empty err &&
	echo $P >expect &&
	test_cmp expect out &&
	wait_gone $P &&
	THERE=$(ns_pid $P) &&
	test -n "$THERE" &&
	wait_for_line tpeer3/received "^end\$" 10 &&
	closed tcp3 tpeer3 $THERE
'

test_expect_success 'gpusend --tcp-close of a file to store: refused, for it is a restore option' '
	test_status 2 gsend --tcp-close tcp2.gck root@127.0.0.1:stored.gck >out 2>err &&
	test_must_be_empty out &&
	test_grep "^gpusend: --tcp-close is for a restore, not host:path\$" err
'

test_done
