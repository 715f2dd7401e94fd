#!/bin/sh
test_description='the receiver cache: what a host holds from earlier hand-overs is not sent again'
. "$GCK_SRCDIR/lib.sh"
. "$GCK_SRCDIR/hosts.sh"

test_expect_success 'two hosts, each an sshd in a PID namespace of its own' '
	start_hosts
'

test_expect_success 'the first hand-over to A sends the whole image; A keeps it' '
	start_tree mig -m 64 -r 10 &&
	ID=$WPID &&
	gsend A --cache "$TRASH/cacheA" -p $WPID >s1 2>err &&
	test_must_be_empty err &&
	test "$(stat s1 pid)" = $ID &&
	test "$(stat s1 cached)" = 0 &&
	test "$(stat s1 tries)" = 1 &&
	sent1=$(stat s1 sent) &&
	test $sent1 -gt $((32 << 20)) &&
	test "$(stat s1 bytes)" = $sent1 &&
	wait_gone $WPID &&
	there A $ID &&
	test "$(images cacheA)" = 1 &&
	for f in cacheA/*.gck; do "$GCKINSPECT" --verify "$f" || return 1; done
'

test_expect_success 'on to B, which has seen nothing: the whole image again' '
	h=$VHOST &&
	gsend B --cache "$TRASH/cacheB" -p $h >s2 2>err &&
	test_must_be_empty err &&
	test "$(stat s2 cached)" = 0 &&
	test $(stat s2 sent) -gt $((32 << 20)) &&
	wait_gone $h &&
	there B $ID &&
	test "$(images cacheB)" = 1 &&
	test "$(images cacheA)" = 1
'

test_expect_success 'a tenth rewritten, back to A: only what changed travels' '
	h=$VHOST &&
	! grep "^rewrote " "$WSTATUS" &&
	kill -USR2 $h &&
	wait_for_line "$WSTATUS" "^rewrote " 30 &&
	verify_workload $h &&
	gsend A -v --cache "$TRASH/cacheA" -p $h >s3 2>err &&
	tail -n 1 err >last &&
	test_grep "^gpusend: sent [0-9]* bytes of the image; [0-9]* bytes of memory were in its cache; process tree $h stopped for [0-9.]* s\$" last &&
	sent3=$(stat s3 sent) &&
	cached3=$(stat s3 cached) &&
	echo "first $sent1, now $sent3; $cached3 bytes cached" &&
	test $((sent3 * 4)) -lt $sent1 &&
	test $cached3 -gt $((48 << 20)) &&
	wait_gone $h &&
	there A $ID &&
	test "$(images cacheA)" = 2 &&
	for f in cacheA/*.gck; do
		"$GCKINSPECT" --verify --parent cacheA "$f" || return 1
	done
'

# refers DIR: the images of the cache DIR that refer to the cache.
refers() {
	for _f in "$1"/*.gck; do
		zstd -dcq "$_f" | tar -xOf - gpuckpt.json | python3 -c '
import json, sys
sys.exit(not json.load(sys.stdin).get("parent", {}).get("cache"))' &&
		    echo "$_f"
	done
	:
}

test_expect_success 'an image sent to a cache needs it: gpurestore says so' '
	refers cacheA >new &&
	test_line_count new 1 &&
	new=$(cat new) &&
	test_status 1 "$GCKRESTORE" "$new" >out 2>err &&
	test_line_count err 1 &&
	test_grep "refers to the cached image [0-9a-f]* of the host it was sent to: not found (give that host.s cache directory with --parent)" err &&
	"$GCKINSPECT" --verify --parent cacheA "$new"
'

test_expect_success 'a damaged chunk in the cache: dropped, and the tree sent again' '
	h=$VHOST &&
	old=$(ls cacheB/*.gck) &&
	python3 "$GCK_SRCDIR/cachedamage.py" "$old" cacheA >damaged &&
	test -s damaged &&
	gsend B -v --cache "$TRASH/cacheB" -p $h >s4 2>err &&
	cat err &&
	test "$(stat s4 tries)" = 2 &&
	test_grep "corrupt cached image" err &&
	test_grep "trying once more" err &&
	test "$(stat s4 cached)" = 0 &&
	wait_gone $h &&
	there B $ID &&
	test ! -e "$old" &&
	test "$(images cacheB)" = 1
'

test_expect_success 'two receivers share one cache, at once' '
	start_tree x -m 32 &&
	X=$WPID XS=$WSTATUS &&
	start_tree y -m 32 &&
	Y=$WPID YS=$WSTATUS &&
	{ gsend A --cache "$TRASH/shared" -p $X >sx 2>errx & } &&
	xsend=$! &&
	gsend B --cache "$TRASH/shared" -p $Y >sy 2>erry &&
	wait $xsend &&
	test_must_be_empty errx &&
	test_must_be_empty erry &&
	test "$(stat sx pid)" = $X &&
	test "$(stat sy pid)" = $Y &&
	WSTATUS=$XS && there A $X && XH=$VHOST &&
	WSTATUS=$YS && there B $Y &&
	test "$(images shared)" = 2 &&
	# (the one sent second refers to the first when that one was kept
	# before it began)
	for f in shared/*.gck; do
		"$GCKINSPECT" --verify --parent shared "$f" || return 1
	done &&
	WSTATUS=$XS &&
	gsend B --cache "$TRASH/shared" -p $XH >sx2 2>err &&
	test_must_be_empty err &&
	test $(stat sx2 cached) -gt $((24 << 20)) &&
	test $(($(stat sx2 sent) * 4)) -lt $(stat sx sent) &&
	wait_gone $XH &&
	there B $X &&
	test "$(images shared)" = 3
'

# kbytes DIR: the size of the images of the cache DIR, in KiB.
kbytes() {
	du -kc "$1"/*.gck 2>/dev/null | tail -n 1 | cut -f1
}

test_expect_success 'the cache keeps to its size, the least recently used evicted' '
	big=$(du -k shared/*.gck | sort -n | tail -n 1 | cut -f1) &&
	limit=$((big * 3 / 2)) &&
	ls shared/*.gck >before &&
	WSTATUS=$YS && use_host B && yh=$(ns_pid $Y) &&
	gsend A --cache "$TRASH/shared" --cache-size ${limit}K \
	    -p $yh >sy2 2>err &&
	test_must_be_empty err &&
	test $(stat sy2 cached) -gt $((24 << 20)) &&
	wait_gone $yh &&
	there A $Y &&
	{ ls shared/*.gck >after 2>/dev/null || :; } &&
	test "$(comm -23 before after | wc -l)" -ge 1 &&
	test $(kbytes shared) -le $limit &&
	# whatever is left stands with what it needs
	for f in $(cat after); do
		"$GCKINSPECT" --verify --parent shared "$f" || return 1
	done &&
	# The new image is kept, but for where what it needs does not fit:
	# the two trees are of one program, and the restore may take a
	# chunk they share (a page criu wrote the same in both) from the
	# images of the other, which must then stay too.
	new=$(comm -13 before after) &&
	if test -z "$new"; then
		echo "the new image was evicted: with what it needs, over the limit"
	else
		test "$(echo "$new" | wc -l)" = 1
	fi &&
	yh=$VHOST &&
	gsend B --cache "$TRASH/shared" --cache-size 4K -p $yh >sy3 2>err &&
	test_must_be_empty err &&
	{ test -z "$new" || test $(stat sy3 cached) -gt $((24 << 20)); } &&
	wait_gone $yh &&
	there B $Y &&
	test "$(images shared)" = 0
'

test_expect_success '--no-cache: nothing offered, nothing kept' '
	WSTATUS=$YS && use_host B && yh=$(ns_pid $Y) &&
	ls cacheA >before &&
	gsend A --no-cache -p $yh >sy4 2>err &&
	test_must_be_empty err &&
	test "$(stat sy4 cached)" = 0 &&
	wait_gone $yh &&
	there A $Y &&
	ls cacheA >after &&
	test_cmp before after
'

test_expect_success 'an image file sent twice to a host that keeps a cache: the second time, only what it lacks' '
	start_tree file -m 32 &&
	Z=$WPID &&
	"$GCKPT" -R -p $Z >z.gck &&
	ls cacheA >before &&
	gsend A --cache "$TRASH/cacheA" z.gck >f1 2>err &&
	test_must_be_empty err &&
	test "$(stat f1 pid)" = $Z &&
	test $(stat f1 sent) -gt $((24 << 20)) &&
	there A $Z &&
	kill_tree $VHOST &&
	ls cacheA >after &&
	test "$(comm -13 before after | wc -l)" = 1 &&
	gsend A -v --cache "$TRASH/cacheA" z.gck >f2 2>err &&
	test_grep "bytes of memory were in its cache\$" err &&
	echo "whole $(stat f1 sent), then $(stat f2 sent); $(stat f2 cached) cached" &&
	test $(stat f2 cached) -gt $((24 << 20)) &&
	test $(($(stat f2 sent) * 4)) -lt $(stat f1 sent) &&
	there A $Z &&
	kill_tree $VHOST &&
	"$GCKINSPECT" --verify z.gck
'

# One page here, one there: nearly every chunk changed, and a cache
# that offered only its chunks would have the tree sent again whole.
test_expect_success 'scattered pages rewritten, back to a host that holds the rest: its cache offers their pages, and the chunks go as patches' '
	start_tree pg -m 64 -p pages -r 5 &&
	P=$WPID &&
	gsend A --cache "$TRASH/cacheP" -p $P >p1 2>err &&
	test_must_be_empty err &&
	sentp=$(stat p1 sent) &&
	wait_gone $P &&
	there A $P &&
	h=$VHOST &&
	gsend B --cache "$TRASH/cacheQ" -p $h >p2 2>err &&
	test_must_be_empty err &&
	wait_gone $h &&
	there B $P &&
	h=$VHOST &&
	kill -USR2 $h &&
	wait_for_line "$WSTATUS" "^rewrote " 30 &&
	gsend A -v --cache "$TRASH/cacheP" -p $h >p3 2>err &&
	test_grep "^gpusend: remote .* offers the pages of [1-9][0-9]* of" err &&
	echo "first $sentp, back with 5% of the pages rewritten $(stat p3 sent)" &&
	test $(($(stat p3 sent) * 4)) -lt $sentp &&
	wait_gone $h &&
	there A $P &&
	kill_tree $VHOST
'

# liepages HOW: a gpurecv whose first PAGES frame lies, as HOW says
# (pages: a chunk of 300 pages; chunk: a chunk the cache does not hold)
cat >liepages <<\EOF
import os, struct, subprocess, sys, threading
how, argv = sys.argv[1], sys.argv[2:]
p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
def feed():
    while True:
        b = os.read(0, 65536)
        if not b:
            break
        p.stdin.write(b)
        p.stdin.flush()
    p.stdin.close()
threading.Thread(target=feed, daemon=True).start()
out, lied = sys.stdout.buffer, False
def read(n):
    b = b""
    while len(b) < n:
        c = p.stdout.read(n - len(b))
        if not c:
            sys.exit(p.wait())
        b += c
    return b
while True:
    h = read(16)
    body = read(struct.unpack(">I", h[4:8])[0])
    if h[1:2] == b"Q" and not lied:
        lied = True
        if how == "pages":
            body = body[:32] + struct.pack("<I", 300) + body[36:]
        else:
            body = bytes([body[0] ^ 0xff]) + body[1:]
    out.write(h + body)
    out.flush()
EOF

for _how in pages chunk; do
	test_expect_success "a cache that lies about its pages ($_how): refused in one line, the tree runs on here" '
		start_tree lie -m 16 &&
		L=$WPID &&
		test_status 1 gsend A --cache "$TRASH/cacheP" -p $L \
		    --remote-path "GCK_RUNDIR=$TRASH/run TMPDIR=$TRASH/rtmp /usr/bin/python3 $TRASH/liepages '$_how' $GCKRECV" \
		    >out 2>err &&
		test_line_count err 1 &&
		test_grep "^gpusend: remote 127.0.0.1 sent the pages of its cache wrong; process tree $L left running\$" err &&
		verify_workload $L &&
		kill_tree $L
	'
done

test_expect_success 'options checked' '
	test_status 2 "$GCKSEND" --cache "" -p 1 host 2>err &&
	test_grep "empty --cache" err &&
	test_status 2 "$GCKSEND" --cache-size 12Q -p 1 host 2>err &&
	test_grep "invalid --cache-size" err &&
	echo x >img &&
	test_status 2 "$GCKSEND" --no-cache img host:/tmp/x 2>err &&
	test_grep "are for a restore" err
'

test_expect_success 'nothing left but the caches' '
	test -z "$(ls -A "$TMPDIR")" &&
	test -z "$(ls -A rtmp)" &&
	for d in cacheA cacheB cacheP cacheQ shared; do
		ls -A $d | grep -v "^lock\$" | grep -v "^[0-9a-f]\{32\}\.gck\$" >extra
		test_must_be_empty extra || return 1
	done
'

test_done
