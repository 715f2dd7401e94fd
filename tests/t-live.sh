#!/bin/sh
test_description='gpusend --live: pre-copy rounds while the tree runs, then a stop for what changed'
. "$GCK_SRCDIR/lib.sh"
. "$GCK_SRCDIR/hosts.sh"

# recvs HOST MODE: the PIDs of HOST's gpurecv in MODE (--to-cache,
# --restore), as this namespace sees them.
recvs() {
	eval "_sshd=\$sshd_$1"
	for _p in $(proc_descendants $_sshd); do
		tr '\0' ' ' <"/proc/$_p/cmdline" 2>/dev/null |
		    grep -q "gpurecv .*$2" && echo $_p
	done
	:
}

# cut HOST MODE: cuts the connection of HOST's gpurecv in MODE, as a
# network would: its sshd session goes.
cut() {
	_r=$(recvs $1 $2 | head -n 1)
	test -n "$_r" || return 1
	_p=$(ps -o ppid= -p $_r | tr -d " ")
	while test -n "$_p" && test "$_p" -gt 1 &&
	    test "$(cat /proc/$_p/comm)" != sshd; do
		_p=$(ps -o ppid= -p $_p | tr -d " ")
	done
	test -n "$_p" && test "$_p" -gt 1 && kill -9 $_p
}

# cut_soon HOST MODE: cuts it a second after HOST's gpurecv in MODE
# started (it waits up to 30 s for it).
cut_soon() {
	_i=0
	while test -z "$(recvs $1 $2)"; do
		_i=$((_i + 1))
		test $_i -lt 300 || return 1
		sleep 0.1
	done
	sleep 1
	cut $1 $2
}

# counter PID: the counter of the workload PID, as it answers a check.
counter() {
	verify_workload $1 && echo $VCOUNTER
}

test_expect_success 'two hosts, each an sshd in a PID namespace of its own' '
	start_hosts
'

# rlog: runs gpurecv, its messages appended to recv.log.
cat >rlog <<EOF
#!/bin/sh
exec "\$@" 2>>"$TRASH/recv.log"
EOF
chmod +x rlog

test_expect_success 'a tree that keeps rewriting 5% a second moves with --live: the rounds carry most of it' '
	start_tree live -m 64 -w 5 &&
	ID=$WPID &&
	c0=$(counter $WPID) &&
	R0=$RPATH &&
	RPATH="GCK_RUNDIR=$TRASH/run TMPDIR=$TRASH/rtmp $TRASH/rlog $GCKRECV" &&
	{ gsend A -v --live --cache "$TRASH/cacheA" -p $WPID >s1 2>err;
	  st=$?; RPATH=$R0; test $st = 0; } &&
	cat err recv.log &&
	rounds=$(stat s1 rounds) &&
	test $rounds -ge 1 && test $rounds -le 8 &&
	test $(stat s1 round_bytes) -gt $((48 << 20)) &&
	test $(stat s1 round_memory) -gt $((48 << 20)) &&
	test $(stat s1 cached) -gt $((32 << 20)) &&
	test $(($(stat s1 sent) * 2)) -lt $(stat s1 round_bytes) &&
	test_grep "^gpusend: round 1: [0-9]* bytes of memory read" err &&
	test_grep "pre-copy ended after $rounds round" err &&
	tail -n 1 err >last &&
	test_grep "; before it, $rounds pre-copy rounds\{0,1\} sent [0-9]* bytes (.*)\$" last &&
	wait_gone $WPID &&
	there A $ID &&
	test $VCOUNTER -gt $c0 &&
	test "$(images cacheA)" -ge 2 &&
	# The stop: taken in whole, then written in place from the cache
	# by the workers that read it there, or by the reader where they
	# decompressed it before criu was done: how much each writes
	# depends on how fast criu is, which a loaded host changes, so only
	# that all of it was written in place is checked.
	test_grep "gpurecv: taking the whole image in before restoring it" \
	    recv.log &&
	sed -n "s/^gpurecv: writing \([0-9]*\) bytes of memory in place, .*/\1/p" \
	    recv.log >inplace &&
	test $(wc -l <inplace) = 1 &&
	test $(cat inplace) -gt $((48 << 20)) &&
	sed -n "s/^gpurecv: memory written in place: \([0-9]*\) bytes by the decompressing workers, \([0-9]*\) by the reader\$/\1 \2/p" \
	    recv.log >byw &&
	read w r <byw &&
	test $((w + r)) = $(cat inplace)
'

# chunks DIR: the images of the cache DIR that hold chunks only.
chunks() {
	for _f in "$1"/*.gck; do
		zstd -dcq "$_f" | tar -xOf - gpuckpt.json | python3 -c '
import json, sys
sys.exit(json.load(sys.stdin).get("kind") != "chunks")' &&
		    echo "$_f"
	done
	:
}

test_expect_success 'a round is an image of chunks only: verified, shown, never restored' '
	chunks cacheA >rounds &&
	test "$(wc -l <rounds)" = "$(stat s1 rounds)" &&
	r1=$(head -n 1 rounds) &&
	# (a round after the first may be patches of the rounds before)
	for r in $(cat rounds); do
		"$GCKINSPECT" --verify --parent="$TRASH/cacheA" "$r" || return 1
	done &&
	"$GCKINSPECT" "$r1" >show &&
	test_grep "^kind  *chunks of memory only" show &&
	"$GCKINSPECT" --json "$r1" >json &&
	test "$(python3 -c "import json; print(json.load(open(\"json\"))[\"image\"][\"kind\"])")" = chunks &&
	test_status 1 "$GCKRESTORE" "$r1" >out 2>err &&
	test_line_count err 1 &&
	test_grep "holds only chunks of memory sent ahead of a live migration" err &&
	test -z "$(ls -A "$TMPDIR")"
'

test_expect_success 'the rounds are bounded: --max-rounds 1' '
	h=$VHOST &&
	gsend B --live --max-rounds 1 --cache "$TRASH/cacheB" -p $h >s2 2>err &&
	test "$(stat s2 rounds)" = 1 &&
	test "$(stat s2 rounds_ended)" = "--max-rounds" &&
	wait_gone $h &&
	there B $ID
'

test_expect_success 'back to A, which has the first migration: its first round sends only what changed' '
	h=$VHOST &&
	gsend A -v --live --cache "$TRASH/cacheA" -p $h >s3 2>err &&
	read=$(sed -n "s/^gpusend: round 1: \([0-9]*\) bytes of memory read, .*/\1/p" err) &&
	sent=$(sed -n "s/^gpusend: round 1: [0-9]* bytes of memory read, \([0-9]*\) of them sent .*/\1/p" err) &&
	echo "round 1 read $read, sent $sent" &&
	test $read -gt $((60 << 20)) &&
	test $sent -lt $read &&
	test $(stat s3 cached) -gt $((32 << 20)) &&
	wait_gone $h &&
	there A $ID
'

test_expect_success 'a damaged chunk in the cache, met in the stop: dropped, and the tree sent again' '
	start_tree still -m 32 &&
	DI=$WPID &&
	gsend B --live --cache "$TRASH/cacheB" -p $DI >s3a 2>err &&
	wait_gone $DI &&
	there B $DI &&
	D=$VHOST &&
	gsend A --live --cache "$TRASH/cacheA" -p $D >s3b 2>err &&
	wait_gone $D &&
	there A $DI &&
	D=$VHOST &&
	img= &&
	for f in cacheB/*.gck; do
		python3 "$GCK_SRCDIR/cachedamage.py" "$f" cacheA >damaged \
		    2>/dev/null && img=$f && break
	done &&
	test -n "$img" && test -s damaged &&
	gsend B -v --live --cache "$TRASH/cacheB" -p $D >s3c 2>err &&
	cat err &&
	test "$(stat s3c tries)" = 2 &&
	test_grep "corrupt cached image" err &&
	test_grep "trying once more" err &&
	wait_gone $D &&
	there B $DI &&
	test ! -e "$img"
'

test_expect_success 'a tree that writes faster than the link: pre-copy ends, and says so' '
	start_tree fast -m 16 -w 100 &&
	F=$WPID &&
	gsend B -v --live --bwlimit 8M --cache "$TRASH/cacheB" -p $F >s4 2>err &&
	cat err &&
	test "$(stat s4 rounds)" = 2 &&
	case $(stat s4 rounds_ended) in
	"memory changes faster than it is sent"|"rounds no longer shrink") ;;
	*) false ;;
	esac &&
	test_grep "pre-copy ended after 2 rounds: " err &&
	# what is left goes as a plain hand-over does, restored as it comes
	test_grep "^gpusend: the last round took [0-9.]* s to send, [0-9]*% of the memory: the stop is restored there as it comes" err &&
	! grep "gpurecv: taking the whole image in" err &&
	# --bwlimit 8M: no send faster than 8 MiB a second
	sed -n "s/^gpusend: sent \([0-9]*\) bytes in \([0-9.]*\) s .*/\1 \2/p" err >rates &&
	test_line_count rates 3 &&
	awk "{ if (\$1 / \$2 > 8 * 1048576 * 1.05) exit 1 }" rates &&
	wait_gone $F &&
	there B $F &&
	kill_tree $VHOST
'

test_expect_success 'the connection cut during pre-copy: the tree runs on here, untouched' '
	start_tree cut -m 32 -w 5 &&
	C=$WPID &&
	ls cacheA >before &&
	{ gsend A --live --bwlimit 4M --cache "$TRASH/cacheA" -p $C >s5 2>err5 & } &&
	sp=$! &&
	cut_soon A --to-cache &&
	test_status 1 wait $sp &&
	cat err5 &&
	test_grep "left running" err5 &&
	proc_running $C &&
	test "$(ps -o stat= -p $C | cut -c1)" != T &&
	verify_workload $C &&
	ls cacheA >after &&
	test_cmp before after
'

test_expect_success 'the connection cut during the last round: the tree runs on here' '
	{ gsend A -v --live --max-rounds 1 --bwlimit 4M --cache "$TRASH/cacheA" \
	    -p $C >s6 2>err6 & } &&
	sp=$! &&
	cut_soon A --restore &&
	test_status 1 wait $sp &&
	cat err6 &&
	test_grep "round 1: " err6 &&
	test_grep "left running\\|resumed" err6 &&
	proc_running $C &&
	verify_workload $C
'

test_expect_success 'a remote that keeps no cache: no rounds, the usual migration' '
	h=$C &&
	use_host A &&
	HOME=$TRASH/home "$GCKSEND" -P "$port" -i "$TRASH/userkey" \
	    -o IdentityAgent=none -o UserKnownHostsFile="$TRASH/known_hosts" \
	    --remote-path "GCK_CACHE=none $RPATH" --stats=json -v --live \
	    -p $h root@127.0.0.1 >out 2>err &&
	cat err &&
	echo $h >expect &&
	test_cmp expect out &&
	grep "^{" err >s7 &&
	test "$(stat s7 rounds)" = 0 &&
	test "$(stat s7 rounds_ended)" = "the remote keeps no cache" &&
	test_grep "no cache to keep the chunks in" err &&
	wait_gone $h &&
	there A $C
'

# A tree of CUDA processes, against the stand-in driver of fakecuda/ on
# every side (its state, kept by PID in files, is shared).
F=$TRASH/fake
CUDAENV="FAKECUDA_DIR=$F GPUCKPT_LIBCUDA=$GCK_TESTDIR/fakecuda/libcuda.so.1 GPUCKPT_LIBNVML=$GCK_TESTDIR/fakecuda/libnvidia-ml.so.1"

# csend HOST ARGS: gsend with the stand-in driver, here and there.
csend() (
	export $CUDAENV
	RPATH="$CUDAENV $RPATH"
	gsend "$@"
)

test_expect_success 'a CUDA tree moves with --live: its device memory travels in the stop' '
	mkdir -p "$F/inject" "$F/delay" &&
	printf "%s 9.0 1073741824 0000:%02x:00.0 NVIDIA H100 80GB HBM3\n" \
	    GPU-aaaaaaaa-1111-4000-8000-000000000001 1 >"$F/gpus" &&
	(
		export $CUDAENV
		WORKLOAD=$GCK_TESTDIR/cudawork
		LD_LIBRARY_PATH=$GCK_TESTDIR/fakecuda start_workload cuda -m 32 &&
		echo "$WPID $WSTATUS" >cuda.w
	) &&
	read G GS <cuda.w &&
	started="$started $G" &&
	WSTATUS=$GS &&
	csend A --live --cache "$TRASH/cacheA" -p $G >g1 &&
	cat g1 &&
	test $(stat g1 rounds) -ge 1 &&
	test $(stat g1 round_memory) -lt $((16 << 20)) &&
	test $(stat g1 sent) -gt $((32 << 20)) &&
	wait_gone $G &&
	there A $G
'

# Its device memory reaches host memory only at each checkpoint, in
# staging memory the driver maps anew, at other addresses each time: the
# chunks are cut where its contents say, so a cache finds them again.
test_expect_success 'a CUDA tree back on a host that had it: its device memory is not sent again' '
	h=$VHOST &&
	csend B --cache "$TRASH/cacheB" -p $h >g2 &&
	cat g2 &&
	test $(stat g2 sent) -gt $((32 << 20)) &&
	wait_gone $h &&
	there B $G &&
	h=$VHOST &&
	csend A --cache "$TRASH/cacheA" -p $h >g3 &&
	cat g3 &&
	test $(stat g3 cached) -gt $((28 << 20)) &&
	test $(($(stat g3 sent) * 8)) -lt $(stat g2 sent) &&
	wait_gone $h &&
	there A $G
'

test_expect_success 'options checked' '
	test_status 2 "$GCKSEND" --max-rounds 2 -p 1 host 2>err &&
	test_grep "is for --live" err &&
	test_status 2 "$GCKSEND" --live --no-cache -p 1 host 2>err &&
	test_grep "not with --no-cache" err &&
	test_status 2 "$GCKSEND" --live --max-rounds 0 -p 1 host 2>err &&
	test_status 2 "$GCKSEND" --bwlimit 10 -p 1 host 2>err &&
	test_grep "at least 4096" err &&
	echo x >img &&
	test_status 2 "$GCKSEND" --live img host 2>err &&
	test_grep "are for a live tree" err
'

test_expect_success 'pages written one here, one there: rounds and stop of patches, every page there' '
	start_tree scat -m 64 -p pages -w 5 &&
	ID=$WPID &&
	c0=$(counter $WPID) &&
	{ gsend B -v --live --cache "$TRASH/cacheB" -p $WPID >s8 2>err;
	  st=$?; test $st = 0; } &&
	rounds=$(stat s8 rounds) &&
	echo "rounds $rounds, round bytes $(stat s8 round_bytes), stop sent $(stat s8 sent)" &&
	# what the stop sent: a few pages, not the chunks that hold them
	test $(($(stat s8 sent) * 4)) -lt $(stat s8 round_bytes) &&
	wait_gone $WPID &&
	there B $ID &&
	test $VCOUNTER -gt $c0 &&
	chunks cacheB >list &&
	for f in $(cat list); do
		zstd -dcq "$f" | tar -xOf - gpuckpt.sums
	done | grep -q "\"patch\":true"
'

# A heap: objects of random sizes rewritten at random, a few bytes of a
# page here and there (and the page they share with the next changed
# with them); 2% a second of the bytes that hold data.
test_expect_success 'a heap rewritten as it moves: rounds and stop of patches, every object there' '
	start_tree heap -m 64 -p heap -w 2 &&
	ID=$WPID &&
	c0=$(counter $WPID) &&
	{ gsend B -v --live --cache "$TRASH/cacheB" -p $WPID >s10 2>err;
	  st=$?; test $st = 0; } &&
	echo "rounds $(stat s10 rounds), round bytes $(stat s10 round_bytes), stop sent $(stat s10 sent)" &&
	test $(stat s10 rounds) -ge 2 &&
	test $(($(stat s10 sent) * 2)) -lt $(stat s10 round_bytes) &&
	wait_gone $WPID &&
	there B $ID &&
	test $VCOUNTER -gt $c0 &&
	kill_tree $VHOST
'

# criu, run by gpusend once the rounds are done, has the workload rewrite
# pages first: they change after the last round read them, before the
# stop, and must arrive as they are.
test_expect_success 'pages rewritten between the last round and the stop arrive' '
	start_tree late -m 64 -p pages -r 3 &&
	ID=$WPID &&
	fake_criu rewrite-first &&
	{ GCK_CRIU=$TRASH/fakecriu gsend A --live --cache "$TRASH/cacheA" \
	    -p $WPID >s9 2>err; st=$?; test $st = 0; } &&
	test $(stat s9 rounds) -ge 1 &&
	NEWSUM=$(grep "^rewrote " "$WSTATUS" | tail -n 1 |
	    sed "s/^rewrote sum=\([0-9a-f]*\).*/\1/") &&
	wait_gone $WPID &&
	use_host A &&
	VHOST=$(ns_pid $ID) &&
	verify_now $VHOST
'

test_expect_success 'nothing left but the caches' '
	test -z "$(ls -A "$TMPDIR")" &&
	test -z "$(ls -A rtmp)" &&
	for d in cacheA cacheB; do
		ls -A $d | grep -v "^lock\$" | grep -v "^[0-9a-f]\{32\}\.gck\$" >extra
		test_must_be_empty extra || return 1
	done
'

test_done
