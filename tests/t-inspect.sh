#!/bin/sh
test_description='gpuinspect shows, verifies, diffs and extracts images'
. "$GCK_SRCDIR/lib.sh"

require_criu
require_python

started=
test_cleanup() {
	test -n "$started" && kill_tree $started >/dev/null 2>&1
	:
}

# CRIU images are decoded by tests/criuimg.py, independently of gpuckpt.

test_expect_success 'make images of a running tree: two snapshots, then a move' '
	start_workload w -m 16 &&
	started=$WPID &&
	test_status 0 "$GCKPT" -R -p $WPID -o a.gck &&
	verify_workload $WPID &&
	sleep 1 &&
	test_status 0 "$GCKPT" -R -c none -p $WPID -o b.tar &&
	verify_workload $WPID &&
	test_status 0 "$GCKPT" -p $WPID -o c.gck &&
	wait_gone $WPID &&
	zstd -qdc a.gck >a.tar &&
	zstd -qdc c.gck >c.tar &&
	tar -xOf c.tar gpuckpt.json >c.json
'

test_expect_success 'the summary gives the facts of the manifest' '
	test_status 0 "$GCKINSPECT" c.gck >out 2>err &&
	test_must_be_empty err &&
	python3 - $WPID $WCHILD <<-\EOF
	import json, os, re, sys
	pid, child = int(sys.argv[1]), int(sys.argv[2])
	m = json.load(open("c.json"))
	out = open("out").read().splitlines()
	def line(key):
	    l = [x for x in out if x.startswith(key + " ")]
	    assert len(l) == 1, (key, out)
	    return l[0][len(key):].strip()
	assert line("image") == "c.gck"
	assert line("id") == m["id"], line("id")
	assert line("created") == "%s by %s, format 3" % (m["created"],
	    m["tool"]), line("created")
	h = m["host"]
	assert line("source") == "%s: Linux %s %s" % (h["hostname"],
	    h["kernel"], h["arch"]), line("source")
	assert line("versions") == "criu %s, no CUDA" % m["criu"]["version"]
	assert line("options") == "zstd level 3, after the checkpoint: " \
	    "kill, part size 16.0 MiB, chunks 1.0 MiB", line("options")
	assert line("processes") == "2, threads %d, root %d" % (
	    sum(p["threads"] for p in m["processes"]), pid), line("processes")
	size = os.stat("c.gck").st_size
	data = sum(f["size"] for f in m["files"])
	r = re.fullmatch(r"[0-9.]+ MiB on disk, [0-9.]+ MiB of CRIU data "
	    r"\([0-9.]+ MiB memory pages\), ratio ([0-9]+\.[0-9][0-9])x",
	    line("size"))
	assert r and abs(float(r.group(1)) - data / size) <= 0.0051, \
	    line("size")
	rows = {}
	for x in out[out.index([x for x in out if x.startswith("PID ")][0]) +
	    1:]:
	    if x.strip():
	        f = x.split()
	        rows[int(f[0])] = (x, f)
	assert sorted(rows) == sorted(p["pid"] for p in m["processes"]), rows
	for p in m["processes"]:
	    x, f = rows[p["pid"]]
	    assert int(f[1]) == p["ppid"] and int(f[2]) == p["threads"], x
	    assert x.endswith("  " + " ".join(p["cmdline"])), x
	# the child is indented under its parent, which comes first
	assert rows[pid][0].startswith(str(pid))
	assert rows[child][0].startswith("  %d" % child), rows[child]
	assert out.index(rows[pid][0]) < out.index(rows[child][0])
	EOF
'

test_expect_success 'the JSON document gives the same facts' '
	test_status 0 "$GCKINSPECT" --json c.gck >c.doc 2>err &&
	test_must_be_empty err &&
	test_status 0 "$GCKINSPECT" -x cx c.gck &&
	python3 - <<-\EOF
	import json, os
	m = json.load(open("c.json"))
	d = json.load(open("c.doc"))
	assert d["schema"] == 2
	i = d["image"]
	size = os.stat("c.gck").st_size
	crius = [f for f in os.listdir("cx") if f != "gpuckpt.json"]
	data = sum(os.stat("cx/" + f).st_size for f in crius)
	pages = sum(os.stat("cx/" + f["name"]).st_size for f in m["files"]
	            if f["memory"])
	assert i["format"] == 3 and i["size"] == size, i
	assert i["data_size"] == data and i["file_count"] == len(crius), (i, data)
	assert i["memory_size"] == pages > 16 << 20, i
	assert abs(i["ratio"] - data / size) <= 0.0051, i
	assert i["ratio"] == round(i["ratio"], 2), i
	assert i["part_size"] == 16 << 20
	assert i["chunk_size"] == 1 << 20 and i["id"] == m["id"], i
	assert d["created"] == m["created"] and d["tool"] == m["tool"]
	for k in ("hostname", "kernel", "arch", "boot_id"):
	    assert d["host"][k] == m["host"][k], k
	assert d["criu"] == m["criu"], d["criu"]
	assert d["options"] == m["options"] and d["cuda"] is None
	assert d["root_pid"] == m["root_pid"]
	assert d["shell_job"] == m["shell_job"]
	assert len(d["processes"]) == len(m["processes"]) == 2
	t = d["totals"]
	for p, q in zip(d["processes"], m["processes"]):
	    for k in ("pid", "ppid", "pgid", "sid", "uid", "gid", "comm",
	              "cmdline", "cwd", "threads"):
	        assert p[k] == q[k], k
	    mm = q["memory"]
	    # the manifest's names, the manifest's values
	    assert p["memory"] == mm, p
	    assert p["gpus"] == []
	assert t["processes"] == 2
	assert t["threads"] == sum(p["threads"] for p in m["processes"])
	for k in ("vm_rss", "rss_anon", "rss_file", "rss_shmem"):
	    assert t[k] == sum(p["memory"][k] for p in m["processes"]), k
	assert t["gpu_memory"] == 0
	EOF
'

test_expect_success 'from a pipe the size on disk is unknown' '
	cat c.gck | "$GCKINSPECT" -j >pipe.doc &&
	"$GCKINSPECT" -j <c.gck >redir.doc &&
	python3 -c "
import json
p, r = json.load(open(\"pipe.doc\")), json.load(open(\"redir.doc\"))
assert p[\"image\"][\"size\"] is None and p[\"image\"][\"ratio\"] is None
assert r[\"image\"][\"size\"] > 0
" &&
	cat c.gck | "$GCKINSPECT" - >pipe.out &&
	test_grep "^image *(standard input)\$" pipe.out &&
	test_grep "^size *- on disk" pipe.out
'

test_expect_success '--verify accepts each image' '
	for i in a.gck b.tar c.gck c.tar; do
		test_status 0 "$GCKINSPECT" --verify $i >out 2>err &&
		test_must_be_empty err &&
		test_grep "^image ok: [0-9]* entries, [0-9]* bytes\$" out ||
		return 1
	done
'

# The offset in c.tar of the header of entry NAME, and of its data.
cat >where.py <<'EOF'
import sys, tarfile
for m in tarfile.open(sys.argv[1]).getmembers():
    if m.name == sys.argv[2]:
        print(m.offset, m.offset_data)
EOF

test_expect_success '--verify names the damaged part and where it is' '
	where=$(python3 where.py c.tar criu/pages-1.img.part00001) &&
	hdr=${where% *} && data=${where#* } &&
	test -n "$data" &&
	cp c.tar bad.tar &&
	printf "\\377" | dd of=bad.tar bs=1 seek=$((data + 100)) conv=notrunc \
	    status=none &&
	test_status 1 "$GCKINSPECT" --verify bad.tar >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	echo "gpuinspect: corrupt image: checksum mismatch in '"'"'pages-1.img'"'"' part 1 (entry at tar offset $hdr)" >expect &&
	test_cmp expect err
'

test_expect_success '--verify says where a stream was cut short' '
	where=$(python3 where.py c.tar criu/pages-1.img.part00001) &&
	data=${where#* } &&
	head -c $((data + 2048)) c.tar >cut.tar &&
	test_status 1 "$GCKINSPECT" --verify cut.tar >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpuinspect: image truncated after '"'"'pages-1.img'"'"' part 0: entry incomplete (tar offset [0-9]*)\$" err
'

# The line of the summary that says how much of the image was read.
cat >unverified <<'EOF'
verified    no: only the head, up to the memory, was read; check the rest with gpuinspect --verify
EOF

test_expect_success 'the summary says that it read only the head, and how to check the rest' '
	for i in a.gck b.tar c.gck; do
		test_status 0 "$GCKINSPECT" $i >out 2>err &&
		test_must_be_empty err &&
		sed -n 2p out >line &&
		test_cmp unverified line &&
		test "$(grep -c "^verified " out)" = 1 &&
		test_status 0 "$GCKINSPECT" --json $i >doc &&
		python3 -c "
import json
assert json.load(open(\"doc\"))[\"verified\"] is False" || return 1
	done
'

# summary_of IMAGE GOOD [same]: the summary of IMAGE, damaged beyond its
# head, is that of the undamaged GOOD but for its name and, unless
# "same" is given (the same size), its size; it says it was not
# verified.
summary_of() {
	test_status 0 "$GCKINSPECT" "$1" >damaged.out 2>err &&
	test_must_be_empty err &&
	test_status 0 "$GCKINSPECT" "$2" >good.out &&
	grep -vx "image *$1" damaged.out >damaged.rest &&
	grep -vx "image *$2" good.out >good.rest &&
	if test -z "$3"; then
		sed -i "/^size /d" damaged.rest good.rest
	fi &&
	test_cmp good.rest damaged.rest &&
	grep -x "verified .*" damaged.out >line &&
	test_cmp unverified line &&
	test_status 0 "$GCKINSPECT" -j "$1" >damaged.doc 2>err &&
	test_must_be_empty err &&
	test_status 0 "$GCKINSPECT" -j "$2" >good.doc &&
	python3 - "$3" <<-\EOF
	import json, sys
	a = json.load(open("good.doc"))
	b = json.load(open("damaged.doc"))
	assert a["verified"] is False and b["verified"] is False
	if not sys.argv[1]:
	    for d in (a, b):
	        del d["image"]["size"], d["image"]["ratio"]
	assert a == b, (a, b)
	EOF
}

test_expect_success 'the summary of an image cut short: its head, unverified, exit 0' '
	size=$(wc -c <c.gck) &&
	head -c $((size / 2)) c.gck >half.gck &&
	summary_of half.gck c.gck &&
	summary_of cut.tar c.tar &&
	cat half.gck | "$GCKINSPECT" >out 2>err &&
	test_must_be_empty err &&
	test_grep "^verified    no: " out
'

test_expect_success '--verify of an image cut short fails, with one line' '
	test_status 1 "$GCKINSPECT" --verify half.gck >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpuinspect: image truncated after '"'"'[a-z0-9-]*\.img'"'"'\( part [0-9]*\)*\(: entry incomplete\)\{0,1\} (tar offset [0-9]*)\$" err
'

test_expect_success 'the summary of an image with a flipped byte in its pages: unverified, exit 0' '
	where=$(python3 where.py b.tar criu/pages-1.img.part00001) &&
	hdr=${where% *} && data=${where#* } &&
	test -n "$data" &&
	cp b.tar flip.tar &&
	printf "\\377" | dd of=flip.tar bs=1 seek=$((data + 100)) \
	    conv=notrunc status=none &&
	! cmp -s b.tar flip.tar &&
	summary_of flip.tar b.tar same &&
	test_status 1 "$GCKINSPECT" --verify flip.tar >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	echo "gpuinspect: corrupt image: checksum mismatch in '"'"'pages-1.img'"'"' part 1 (entry at tar offset $hdr)" >expect &&
	test_cmp expect err
'

test_expect_success 'the summary of an image damaged in its head fails, with one line' '
	where=$(python3 where.py b.tar gpuckpt.json) &&
	hdr=${where% *} && data=${where#* } &&
	test -n "$data" &&
	cp b.tar head.tar &&
	# the first byte of the manifest, "{", becomes "["
	test "$(dd if=head.tar bs=1 skip=$data count=1 status=none)" = "{" &&
	printf "[" | dd of=head.tar bs=1 seek=$data conv=notrunc status=none &&
	echo "gpuinspect: corrupt image: checksum mismatch in '"'"'gpuckpt.json'"'"' (entry at tar offset $hdr)" >expect &&
	for opt in "" --json --verify; do
		test_status 1 "$GCKINSPECT" $opt head.tar >out 2>err &&
		test_must_be_empty out &&
		test_cmp expect err || return 1
	done
'

# refuses TOOL FILE MESSAGE: TOOL (gpuinspect or gpurestore) refuses
# FILE, read from the file and from standard input, with status 1,
# nothing on standard output and the one line "TOOL: MESSAGE".
refuses() {
	case $1 in
	gpuinspect)	_tool=$GCKINSPECT ;;
	gpurestore)	_tool=$GCKRESTORE ;;
	esac
	printf "%s: %s\n" "$1" "$3" >expect &&
	test_status 1 "$_tool" "$2" >out 2>err &&
	test_must_be_empty out &&
	test_cmp expect err &&
	test_status 1 "$_tool" <"$2" >out 2>err &&
	test_must_be_empty out &&
	test_cmp expect err
}

test_expect_success 'input that is not an image is not taken for one cut short' '
	printf "hello\\n" >hello &&
	seq 1000 >text && test "$(wc -c <text)" -gt 512 &&
	head -c 100000 /dev/urandom >random &&
	echo hi | zstd -q >hi.zst &&
	: >nothing &&
	notimg="not a gpuckpt image: no tar header for '"'"'gpuckpt.json'"'"' at the start" &&
	for t in gpuinspect gpurestore; do
		refuses $t hello "$notimg" &&
		refuses $t text "$notimg" &&
		refuses $t random "$notimg" &&
		refuses $t hi.zst "$notimg of the zstd stream" &&
		refuses $t nothing "empty input: no image" || return 1
	done
'

test_expect_success 'an image cut after 6 bytes is truncated, compressed or not' '
	head -c 6 c.gck >c6.gck &&
	head -c 6 b.tar >b6.tar &&
	for t in gpuinspect gpurestore; do
		refuses $t c6.gck "image truncated at the start (tar offset 0)" &&
		refuses $t b6.tar "image truncated at the start (tar offset 6)" ||
		return 1
	done
'

test_expect_success '--extract writes the files that stock tar extracts, parts joined' '
	python3 -c "import criuimg; criuimg.unpack(\"c.tar\", \"ct\")" &&
	(cd ct && ls) >want &&
	(cd cx && ls | grep -vx gpuckpt.json) >got &&
	test_cmp want got &&
	for f in $(cat want); do
		cmp ct/$f cx/$f || return 1
	done &&
	cmp c.json cx/gpuckpt.json &&
	test "$(stat -c %a cx)" = 700 &&
	test -z "$(ls -A "$TMPDIR")" &&
	test -z "$(ls -a | grep "^\\.gpuinspect")"
'

test_expect_success 'plain criu restores what --extract wrote' '
	cat c.json | python3 -c "
import json, sys
assert json.load(sys.stdin)[\"shell_job\"] is False" &&
	CRIU_FAULT=130 "$CRIU" restore -D cx -d -o restore.log -v2 \
	    >criu.out 2>&1 &&
	started="$started $WPID" &&
	verify_workload $WPID &&
	test "$(proc_field $WCHILD 4)" = $WPID
'

test_expect_success '--extract into a directory that is not empty does nothing' '
	mkdir full && echo keep >full/file &&
	test_status 1 "$GCKINSPECT" -x full c.gck >out 2>err &&
	test_must_be_empty out &&
	echo "gpuinspect: directory '"'"'full'"'"' is not empty" >expect &&
	test_cmp expect err &&
	test "$(ls -A full)" = file &&
	mkdir empty &&
	test_status 0 "$GCKINSPECT" -x empty a.gck &&
	test -f empty/gpuckpt.json && test -f empty/inventory.img
'

test_expect_success '--extract of a damaged image leaves nothing behind' '
	test_status 1 "$GCKINSPECT" -x badx bad.tar >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpuinspect: corrupt image: checksum mismatch" err &&
	test ! -e badx &&
	test -z "$(ls -a | grep "^\\.gpuinspect")" &&
	mkdir emptyb &&
	test_status 1 "$GCKINSPECT" -x emptyb cut.tar 2>err &&
	test_grep "^gpuinspect: image truncated" err &&
	test -d emptyb && test -z "$(ls -A emptyb)" &&
	test -z "$(ls -a | grep "^\\.gpuinspect")"
'

test_expect_success 'stock tar lists and extracts the compressed stream' '
	zstd -qdc c.gck | tar -t >list &&
	test "$(sed -n 1p list)" = gpuckpt.json &&
	test "$(sed -n \$p list)" = gpuckpt.sums &&
	mkdir st &&
	zstd -qdc c.gck | tar -x -C st &&
	cmp st/gpuckpt.json c.json &&
	test "$(cat st/criu/pages-1.img.part* | wc -c)" = \
	    "$(wc -c <cx/pages-1.img)"
'

test_expect_success '--diff of an image with itself: the same, silently' '
	test_status 0 "$GCKINSPECT" --diff a.gck a.gck >out 2>err &&
	test_must_be_empty out &&
	test_must_be_empty err &&
	test_status 0 "$GCKINSPECT" -d -j a.gck - <a.gck >same.doc &&
	python3 -c "
import json
d = json.load(open(\"same.doc\"))
assert d[\"schema\"] == 2 and d[\"differ\"] is False, d
assert d[\"processes\"] == {\"added\": [], \"removed\": [], \"changed\": []}
f = d[\"files\"]
assert f[\"changed\"] == f[\"added\"] == f[\"removed\"] == [], f
assert f[\"same\"] > 10, f
"
'

test_expect_success '--diff of two snapshots: the memory that changed, by page' '
	test_status 1 "$GCKINSPECT" --diff --json a.gck b.tar >ab.doc 2>err &&
	test_must_be_empty err &&
	python3 -c "import criuimg; criuimg.unpack(\"a.tar\", \"at\"); \
	    criuimg.unpack(\"b.tar\", \"bt\")" &&
	python3 - $WPID $WCHILD <<-\EOF
	import json, sys, criuimg
	d = json.load(open("ab.doc"))
	assert d["differ"] is True
	assert d["images"]["a"]["name"] == "a.gck"
	assert d["images"]["b"]["name"] == "b.tar"
	p = d["processes"]
	assert p["added"] == [] and p["removed"] == [], p
	ch = {x["pid"]: x for x in p["changed"]}
	seen = 0
	for pid in map(int, sys.argv[1:]):
	    total, per, sa, sb = criuimg.changed("at", "bt", pid)
	    if pid not in ch:
	        assert total == 0, (pid, total)
	        continue
	    x = ch[pid]
	    assert "cmdline" not in x and "threads" not in x, x
	    assert x["memory"] == {"a": sa, "b": sb, "changed": total}, \
	        (x["memory"], sa, sb, total)
	    got = {int(m["start"], 16): m["changed"] for m in x["mappings"]
	           if m["status"] == "changed"}
	    assert got == per, (got, per)
	    seen += total
	# the workload counts in its memory all the time
	assert seen > 0
	f = d["files"]
	assert "pages-1.img" in f["changed"], f
	EOF
'

test_expect_success '--diff prints what changed, for people' '
	test_status 1 "$GCKINSPECT" -d a.gck b.tar >out 2>err &&
	test_must_be_empty err &&
	test_grep "^--- a.gck: " out &&
	test_grep "^+++ b.tar: " out &&
	test_grep "^~ process $WPID (" out &&
	test_grep "^    memory: [0-9.]* [KMG]*i*B changed" out &&
	test_grep "^      changed    0x[0-9a-f]*-0x[0-9a-f]* r[w-][x-]p " out &&
	test_grep "^criu files: [0-9]* changed, 0 added, 0 removed" out &&
	# an anonymous mapping has no path, and no line ends in a blank
	test_grep "^      changed .* anon  *[0-9.]* [KMG]*i*B\$" out &&
	! grep " \$" out &&
	test_status 1 "$GCKINSPECT" -d -v a.gck b.tar >out 2>err &&
	! grep " \$" out
'

test_expect_success '--diff: processes that came and went' '
	(python3 -c "import os, sys; os.closerange(3, 1 << 16); \
	    os.execvp(sys.argv[1], sys.argv[1:])" setsid sh -c \
	    "sleep 1000 & echo \$! >kid1; sleep 1000 & echo \$! >kid2; echo \$\$ >sh.pid; wait" \
	    </dev/null >/dev/null 2>&1 &) &&
	wait_for_line kid2 . &&
	wait_for_line sh.pid . &&
	sh=$(cat sh.pid) && k1=$(cat kid1) && k2=$(cat kid2) &&
	started="$started $sh" &&
	test_status 0 "$GCKPT" -R -p $sh -o t1.gck &&
	kill $k2 &&
	wait_gone $k2 &&
	test_status 0 "$GCKPT" -R -p $sh -o t2.gck &&
	test_status 1 "$GCKINSPECT" -d -j t1.gck t2.gck >t12.doc &&
	test_status 1 "$GCKINSPECT" -d -j t2.gck t1.gck >t21.doc &&
	test_status 1 "$GCKINSPECT" -d t1.gck t2.gck >t12.out &&
	python3 - $sh $k1 $k2 <<-\EOF
	import json, sys
	sh, k1, k2 = map(int, sys.argv[1:])
	a, b = json.load(open("t12.doc")), json.load(open("t21.doc"))
	r = a["processes"]["removed"]
	assert [x["pid"] for x in r] == [k2] and a["processes"]["added"] == []
	assert r[0]["comm"] == "sleep" and r[0]["cmdline"] == ["sleep", "1000"]
	assert [x["pid"] for x in b["processes"]["added"]] == [k2]
	assert b["processes"]["removed"] == []
	assert a["images"]["a"]["processes"] == 3
	assert a["images"]["b"]["processes"] == 2
	assert "pstree.img" in a["files"]["changed"]
	assert "core-%d.img" % k2 in a["files"]["removed"]
	assert "core-%d.img" % k2 in b["files"]["added"]
	EOF
	test_grep "^- process $k2 (sleep): sleep 1000\$" t12.out &&
	test_grep "^--- t1.gck: .*, 3 processes\$" t12.out &&
	test_grep "^+++ t2.gck: .*, 2 processes\$" t12.out &&
	# the tree of the sleep alone
	test_status 0 "$GCKPT" -R -p $k1 -o t3.gck &&
	test_status 1 "$GCKINSPECT" -d t2.gck t3.gck >t23.out &&
	test_grep "^+++ t3.gck: .*, 1 process\$" t23.out
'

test_expect_success '--diff exits 2 on trouble, with one line' '
	test_status 2 "$GCKINSPECT" -d a.gck no-such.gck >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpuinspect: cannot open '"'"'no-such.gck'"'"'" err &&
	test_status 2 "$GCKINSPECT" -d a.gck bad.tar >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpuinspect: corrupt image: checksum mismatch in '"'"'pages-1.img'"'"' part 1" err &&
	test_status 2 "$GCKINSPECT" -d a.gck >out 2>err &&
	test_grep "^usage: gpuinspect " err &&
	test_status 2 "$GCKINSPECT" -d - - <a.gck >out 2>err &&
	test_grep "^gpuinspect: only one of the images can be standard input" err
'

test_expect_success '--extract keeps the holes of the memory pages' '
	start_workload z -F -m 32 -z 90 &&
	started="$started $WPID" &&
	test_status 0 "$GCKPT" -R -p $WPID -o z.gck &&
	test_status 0 "$GCKINSPECT" --extract=zx/ z.gck &&
	kill_tree $WPID &&
	size=$(cat zx/pages-*.img | wc -c) &&
	used=$(du -k -c zx/pages-*.img | sed -n "\$s/[^0-9].*//p") &&
	test $size -gt $((32 << 20)) &&
	test $used -lt $((size / 1024 / 4))
'

test_expect_success 'modes do not mix' '
	test_status 2 "$GCKINSPECT" -t -j a.gck 2>err &&
	test_grep "^usage: gpuinspect " err &&
	test_status 2 "$GCKINSPECT" -t -x dir a.gck 2>err &&
	test_grep "^usage: gpuinspect " err &&
	test_status 2 "$GCKINSPECT" a.gck b.tar 2>err &&
	test_grep "^usage: gpuinspect " err &&
	test ! -e dir
'

# What the processes have open: tests/fdtree.py sets it up in $FD.
FD=$TRASH/fd

# fd_start: starts fdtree.py, its environment holding a secret, in a
# session of its own; sets FPID, FCHILD and the descriptors' numbers
# (F_data, F_log, ...) from its ready file.
fd_start() {
	rm -rf "$FD" && mkdir -p "$FD/wd" &&
	head -c 5000 /dev/zero >"$FD/data" &&
	head -c 20 /dev/zero >"$FD/rw" &&
	(cd / && GCK_SECRET=s3cret-value setsid python3 \
	    "$GCK_SRCDIR/fdtree.py" "$FD" </dev/null >/dev/null 2>&1 &) &&
	wait_for_line "$FD/ready" "^pid=" 60 &&
	eval "$(sed 's/\([a-z]*\)=/F_\1=/g' "$FD/ready")" &&
	FPID=$F_pid FCHILD=$F_child &&
	started="$started $FPID"
}

test_expect_success 'an image of a tree with files, sockets and a pipe open' '
	fd_start &&
	test_status 0 "$GCKPT" -R -p $FPID -o fd-running.gck &&
	proc_running $FPID &&
	test_status 0 "$GCKINSPECT" --json fd-running.gck >fd.doc &&
	test_status 0 "$GCKINSPECT" --json --env fd-running.gck >fd-env.doc
'

test_expect_success 'the JSON document lists each descriptor as it was set up' '
	python3 - "$FD" $FPID $FCHILD $F_data $F_log $F_rw $F_listen $F_a \
	    $F_b $F_pw $F_pr <<-\EOF
	import json, sys
	d = sys.argv[1]
	pid, child, data, log, rw, listen, a, b, pw, pr = map(int, sys.argv[2:])
	x = json.load(open("fd.doc"))["descriptors"]
	procs = {p["pid"]: p for p in x["processes"]}
	assert sorted(procs) == sorted([pid, child]), procs.keys()
	for p in pid, child:
	    assert procs[p]["cwd"] == d + "/wd", procs[p]["cwd"]
	    assert procs[p]["root"] == "/", procs[p]["root"]
	fds = {f["fd"]: f for f in procs[pid]["fds"]}
	f = fds[data]
	assert (f["type"], f["path"], f["size"], f["pos"], f["mode"],
	    f["append"], f["ghost"]) == ("file", d + "/data", 5000, 1000, "r",
	    False, False), f
	f = fds[log]
	assert (f["type"], f["path"], f["pos"], f["mode"], f["append"]) == (
	    "file", d + "/log", 10, "w", True), f
	f = fds[rw]
	assert (f["path"], f["pos"], f["mode"], f["append"]) == (
	    d + "/rw", 7, "rw", False), f
	f = fds[listen]
	assert (f["type"], f["socket_type"], f["state"], f["address"],
	    f["abstract"], f["peer"]) == ("unix", "stream", "listening",
	    d + "/sock", False, None), f
	for me, other in (a, b), (b, a):
	    f = fds[me]
	    assert (f["type"], f["state"], f["address"], f["peer"]) == (
	        "unix", "connected", None, "%d:%d" % (pid, other)), f
	# the child has its own copies of the pair, each the peer of the other
	cf = {f["fd"]: f for f in procs[child]["fds"]}
	assert cf[a]["peer"] == "%d:%d" % (child, b), cf[a]
	f = fds[pw]
	assert (f["type"], f["mode"], f["peers"]) == ("pipe", "w",
	    ["%d:%d" % (child, pr)]), f
	assert cf[pr]["type"] == "pipe" and cf[pr]["mode"] == "r", cf[pr]
	assert pw not in cf and pr not in fds, (cf, fds)
	assert x["pipes"] == [{"pipe_id": f["pipe_id"], "ends": [
	    {"end": "%d:%d" % (pid, pw), "mode": "w"},
	    {"end": "%d:%d" % (child, pr), "mode": "r"}]}], x["pipes"]
	# stdin, stdout and stderr on /dev/null, and the three files, in each
	assert x["totals"]["files"] == 12 and x["totals"]["sockets"] == 6 and \
	    x["totals"]["pipes"] == 1, x["totals"]
	assert x["mount_namespace"]["own"] is False, x["mount_namespace"]
	files = {f["path"]: f for f in x["files"]}
	assert files[d + "/data"]["must_exist"] and \
	    files[d + "/data"]["same_size"], files[d + "/data"]
	assert files[d + "/wd"]["kind"] == "directory", files[d + "/wd"]
	assert any(f["mapped"] and f["path"].endswith("/libc.so.6")
	    for f in x["files"]), x["files"]
	EOF
'

test_expect_success 'the summary counts them; --files and --sockets list them' '
	test_status 0 "$GCKINSPECT" fd-running.gck >out 2>err &&
	test_must_be_empty err &&
	test_grep "^open        12 files, 6 sockets, 1 pipe; [0-9]* files mapped; mount namespace the host.s\$" out &&
	! grep "^PID  *FD MODE" out &&
	test_status 0 "$GCKINSPECT" --files fd-running.gck >files.out &&
	test_status 0 "$GCKINSPECT" --sockets fd-running.gck >sockets.out &&
	test_status 0 "$GCKINSPECT" -v fd-running.gck >v.out &&
	python3 - "$FD" $FPID $FCHILD $F_data $F_log $F_rw $F_listen $F_a \
	    $F_b $F_pw $F_pr <<-\EOF
	import re, sys
	d = sys.argv[1]
	pid, child, data, log, rw, listen, a, b, pw, pr = map(int, sys.argv[2:])
	def rows(name, head):
	    out = open(name).read().splitlines()
	    i = [n for n, l in enumerate(out) if re.match(head, l)]
	    assert len(i) == 1, (head, out)
	    r = []
	    for l in out[i[0] + 1:]:
	        if not l.strip():
	            break
	        r.append(l)
	    return r
	frow = re.compile(r"(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+"
	    r"(same size|exists|in image|-)\s+(.*)")
	files = [frow.fullmatch(l).groups() for l in rows("files.out",
	    "PID +FD +MODE ")]
	p = str(pid)
	for want in ((p, "cwd", "-", "-", "-", "exists", d + "/wd"),
	    (p, "rtd", "-", "-", "-", "exists", "/"),
	    (p, str(data), "r", "5000", "1000", "same size", d + "/data")):
	    assert want in files, (want, files)
	# a size is shown, and must be had, where criu recorded it
	rws = [f for f in files if f[:2] == (p, str(rw))]
	assert len(rws) == 1 and rws[0][2:5] in (("rw", "20", "7"),
	    ("rw", "-", "7")) and rws[0][5] == ("same size" if rws[0][3] ==
	    "20" else "exists") and rws[0][6] == d + "/rw", rws
	logs = [f for f in files if f[:2] == (p, str(log))]
	assert len(logs) == 1 and logs[0][2] == "wa" and logs[0][4] == "10" \
	    and logs[0][6] == d + "/log", logs
	assert any(f[1] == "mem" and f[6].endswith("/libc.so.6") and
	    f[5] == "same size" for f in files), files
	socks = [l.split() for l in rows("sockets.out", "PID +FD +FAMILY ")]
	for want in ([p, str(listen), "unix", "stream", "-", "listening", "-",
	    d + "/sock"], [p, str(a), "unix", "stream", "-", "connected",
	    "%d:%d" % (pid, b), "(unnamed)"], [str(child), str(b), "unix",
	    "stream", "-", "connected", "%d:%d" % (child, a), "(unnamed)"]):
	    assert want in socks, (want, socks)
	pipes = [l.split() for l in rows("sockets.out", "PIPE +ENDS")]
	assert [x[1:] for x in pipes] == [["%d:%d" % (pid, pw), "(w)",
	    "%d:%d" % (child, pr), "(r)"]], pipes
	v = open("v.out").read()
	assert open("files.out").read().split("\n\nPID ")[2] in v
	assert "\nPIPE " in v
	EOF
'

test_expect_success 'the environment is shown only with --env' '
	! grep s3cret-value fd.doc out files.out sockets.out v.out &&
	test_status 0 "$GCKINSPECT" --env fd-running.gck >env.out &&
	test_grep "^  GCK_SECRET=s3cret-value\$" env.out &&
	test "$(grep -c "^ENVIRONMENT of \\($FPID\\|$FCHILD\\)\$" env.out)" = 2 &&
	python3 - $FPID <<-\EOF
	import json, sys
	d = json.load(open("fd-env.doc"))
	p = [p for p in d["processes"] if p["pid"] == int(sys.argv[1])][0]
	assert "GCK_SECRET=s3cret-value" in p["environment"], p
	assert p["environment_cut"] is False
	assert all("environment" not in p
	    for p in json.load(open("fd.doc"))["processes"])
	EOF
'

test_expect_success '--check fails while the source holds the PIDs, naming them' '
	test_status 1 "$GCKINSPECT" --check fd-running.gck >out 2>err &&
	test_must_be_empty out &&
	test_grep "^gpuinspect: pid $FPID is in use on this host by the image.s source, process tree $FPID, still here: end it, or restore a copy beside it with gpurestore --pidns\$" err &&
	test_grep "^gpuinspect: pid $FCHILD is in use" err &&
	test_line_count err 2
'

test_expect_success '--check passes on the host the tree was checkpointed on' '
	test_status 0 "$GCKPT" -p $FPID -o fd.gck &&
	wait_gone $FPID && wait_gone $FCHILD &&
	test_status 0 "$GCKINSPECT" --check fd.gck >out 2>err &&
	test_must_be_empty out &&
	test_must_be_empty err &&
	test_status 0 "$GCKINSPECT" --check - <fd.gck >out 2>err &&
	test_must_be_empty err &&
	test_status 0 "$GCKINSPECT" --check --json fd.gck >doc &&
	python3 -c "
import json
d = json.load(open(\"doc\"))
assert d[\"ok\"] is True and d[\"findings\"] == [], d"
'

test_expect_success '--check names a file that is gone or has another size' '
	mv "$FD/data" "$FD/data.away" &&
	test_status 1 "$GCKINSPECT" --check fd.gck >out 2>err &&
	mv "$FD/data.away" "$FD/data" &&
	test_must_be_empty out &&
	echo "gpuinspect: file '\''$FD/data'\'' is missing here: No such file or directory" >expect &&
	test_cmp expect err &&
	echo >>"$FD/data" &&
	test_status 1 "$GCKINSPECT" --check fd.gck >out 2>err &&
	echo "gpuinspect: file '\''$FD/data'\'' is 5001 bytes here, 5000 in the image: criu restores only a file of the size it had" >expect &&
	test_cmp expect err &&
	test_status 1 "$GCKINSPECT" --check --json fd.gck >doc &&
	truncate -s 5000 "$FD/data" &&
	python3 -c "
import json
d = json.load(open(\"doc\"))
assert d[\"ok\"] is False, d
assert [(f[\"severity\"], f[\"what\"]) for f in d[\"findings\"]] == [
    (\"fail\", \"file\")], d" &&
	test_status 0 "$GCKINSPECT" --check fd.gck
'

test_expect_success '--check names a working directory that is gone' '
	mv "$FD/wd" "$FD/wd.away" &&
	test_status 1 "$GCKINSPECT" --check fd.gck >out 2>err &&
	mv "$FD/wd.away" "$FD/wd" &&
	for p in $FPID $FCHILD; do
		test_grep "^gpuinspect: working directory .$FD/wd. of process $p is missing here: No such file or directory\$" err || return 1
	done &&
	test_line_count err 2
'


test_expect_success '--check: a PID taken by another process is a note' '
	take_pid $FPID &&
	{
		"$GCKINSPECT" --check fd.gck >out 2>err
		echo $? >status
		kill $TAKER
		wait $TAKER 2>/dev/null
		true
	} &&
	test "$(cat status)" = 0 &&
	test_must_be_empty err &&
	echo "note: pid $FPID of the image is in use on this host (by '\''sleep'\''): gpurestore restores the tree in a PID namespace of its own, where it keeps its PIDs" >expect &&
	# (another test running beside this one may hold the child'\''s PID)
	grep -v "^note: pid $FCHILD of the image is in use on this host " out >mine &&
	test_cmp expect mine
'

# TCP and UDP sockets: tests/inettree.py sets them up in $IN.
IN=$TRASH/inet

# inet_start [ADDR]: starts inettree.py in a session of its own; sets
# I_pid and the descriptors' numbers and ports (I_listen, I_lport, ...)
# from its ready file.
inet_start() {
	rm -rf "$IN" && mkdir -p "$IN" &&
	(cd / && setsid python3 "$GCK_SRCDIR/inettree.py" "$IN" ${1:+"$1"} \
	    </dev/null >/dev/null 2>&1 &) &&
	wait_for_line "$IN/ready" "^pid=" 60 &&
	eval "$(sed 's/\([a-z0-9]*\)=/I_\1=/g' "$IN/ready")" &&
	started="$started $I_pid"
}

# holder PORT: a process of python3 that listens on 127.0.0.1:PORT
# (SO_REUSEADDR set, as servers have it) until killed; sets HOLDER to
# its PID, as it says itself.
holder() {
	rm -f "$TRASH/held" &&
	python3 -c "
import os, socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', int(sys.argv[1])))
s.listen(1)
open(sys.argv[2], 'w').write('held %d\n' % os.getpid())
time.sleep(600)" "$1" "$TRASH/held" </dev/null >/dev/null 2>&1 &
	wait_for_line "$TRASH/held" "^held [0-9]" 30 &&
	HOLDER=$(sed 's/held //' "$TRASH/held") &&
	started="$started $HOLDER"
}

test_expect_success 'an image of a tree with TCP and UDP sockets open' '
	inet_start &&
	test_status 0 "$GCKPT" -R --tcp-established -p $I_pid \
	    -o inet-running.gck &&
	proc_running $I_pid &&
	test_status 0 "$GCKINSPECT" --json inet-running.gck >inet.doc &&
	test_status 0 "$GCKINSPECT" --sockets inet-running.gck >inet.out
'

test_expect_success 'the JSON document gives each inet socket as it was set up' '
	python3 - "$IN/ready" <<-\EOF
	import json, sys
	r = dict(w.split("=") for w in open(sys.argv[1]).read().split())
	r = {k: int(v) for k, v in r.items()}
	pid = r["pid"]
	x = json.load(open("inet.doc"))["descriptors"]
	p = [p for p in x["processes"] if p["pid"] == pid][0]
	fds = {f["fd"]: f for f in p["fds"]}
	keys = ("type", "family", "socket_type", "protocol", "state",
	    "address", "peer_address", "peer")
	def has(fd, *want):
	    got = tuple(fds[fd].get(k, "absent") for k in keys)
	    assert got == want, (fd, got, want)
	lo = "127.0.0.1:%d"
	has(r["listen"], "inet", "inet", "stream", "tcp", "listening",
	    lo % r["lport"], None, None)
	has(r["client"], "inet", "inet", "stream", "tcp", "established",
	    lo % r["cport"], lo % r["lport"], "%d:%d" % (pid, r["server"]))
	has(r["server"], "inet", "inet", "stream", "tcp", "established",
	    lo % r["lport"], lo % r["cport"], "%d:%d" % (pid, r["client"]))
	has(r["udp"], "inet", "inet", "dgram", "udp", "unconnected",
	    lo % r["uport"], None, None)
	has(r["unbound"], "inet", "inet", "dgram", "udp", "unconnected",
	    None, None, None)
	n = 5
	if r["l6port"]:
	    has(r["listen6"], "inet", "inet6", "stream", "tcp", "listening",
	        "[::1]:%d" % r["l6port"], None, None)
	    n += 1
	# stdin, stdout and stderr on /dev/null; nothing else is open
	assert sorted(fds) == [0, 1, 2] + sorted(f for f in fds if f > 2) and \
	    len(fds) == 3 + n, sorted(fds)
	assert x["totals"]["sockets"] == n and x["totals"]["files"] == 3, \
	    x["totals"]
	EOF
'

test_expect_success 'the summary counts them; --sockets lists them' '
	n=5 && test "$I_l6port" = 0 || n=6 &&
	test_grep "^open        3 files, $n sockets, 0 pipes; " inet.out &&
	python3 - "$IN/ready" <<-\EOF
	import re, sys
	r = dict(w.split("=") for w in open(sys.argv[1]).read().split())
	pid = r["pid"]
	out = open("inet.out").read().splitlines()
	i = [n for n, l in enumerate(out) if re.match("PID +FD +FAMILY +TYPE "
	    "+PROTO +STATE +PEER +ADDRESS$", l)]
	assert len(i) == 1, out
	socks = []
	for l in out[i[0] + 1:]:
	    if not l.strip():
	        break
	    socks.append(l.split())
	lo = "127.0.0.1:"
	want = [[pid, r["listen"], "inet", "stream", "tcp", "listening", "-",
	    lo + r["lport"]],
	    [pid, r["client"], "inet", "stream", "tcp", "established",
	    pid + ":" + r["server"], lo + r["cport"], "->", lo + r["lport"]],
	    [pid, r["server"], "inet", "stream", "tcp", "established",
	    pid + ":" + r["client"], lo + r["lport"], "->", lo + r["cport"]],
	    [pid, r["udp"], "inet", "dgram", "udp", "unconnected", "-",
	    lo + r["uport"]],
	    [pid, r["unbound"], "inet", "dgram", "udp", "unconnected", "-",
	    "(unbound)"]]
	if r["l6port"] != "0":
	    want.append([pid, r["listen6"], "inet6", "stream", "tcp",
	        "listening", "-", "[::1]:" + r["l6port"]])
	assert socks == want, (socks, want)
	EOF
'

test_expect_success '--check: the ports that the source, still here, holds' '
	comm=$(cat /proc/$I_pid/comm) &&
	test_status 1 "$GCKINSPECT" --check inet-running.gck >out 2>err &&
	test_must_be_empty out &&
	src="which the image.s source, process $I_pid (.$comm.), still holds on this host" &&
	test_grep "^gpuinspect: pid $I_pid is in use on this host by the image.s source" err &&
	test_grep "^gpuinspect: the image.s process $I_pid listens on TCP 127.0.0.1:$I_lport, $src\$" err &&
	test_grep "^gpuinspect: the image.s process $I_pid is bound to UDP 127.0.0.1:$I_uport, $src\$" err &&
	n=3 &&
	if test "$I_l6port" != 0; then
		test_grep "^gpuinspect: the image.s process $I_pid listens on TCP \\[::1\\]:$I_l6port, $src\$" err &&
		n=4
	fi &&
	test_line_count err $n
'

test_expect_success '--check passes once the source is gone' '
	test_status 0 "$GCKPT" --tcp-established -p $I_pid -o inet.gck &&
	wait_gone $I_pid &&
	test_status 0 "$GCKINSPECT" --check inet.gck >out 2>err &&
	test_must_be_empty out &&
	test_must_be_empty err
'

test_expect_success '--check names the process that holds a listening port' '
	holder $I_lport &&
	comm=$(cat /proc/$HOLDER/comm) &&
	test_status 1 "$GCKINSPECT" --check inet.gck >out 2>err &&
	test_status 1 "$GCKINSPECT" --check --json inet.gck >doc &&
	test_must_be_empty out &&
	echo "gpuinspect: the image'\''s process $I_pid listens on TCP 127.0.0.1:$I_lport, which process $HOLDER ('\''$comm'\'') holds on this host" >expect &&
	test_cmp expect err &&
	python3 -c "
import json
d = json.load(open(\"doc\"))
assert d[\"ok\"] is False and [(f[\"severity\"], f[\"what\"])
    for f in d[\"findings\"]] == [(\"fail\", \"port\")], d"
'

test_expect_success 'gpurestore refuses it with one line, leaving nothing' '
	test_status 1 "$GCKRESTORE" <inet.gck >out 2>err &&
	test_must_be_empty out &&
	echo "gpurestore: cannot restore: the image'\''s process $I_pid listens on TCP 127.0.0.1:$I_lport, which process $HOLDER ('\''$(cat /proc/$HOLDER/comm)'\'') holds on this host" >expect &&
	test_cmp expect err &&
	proc_gone $I_pid &&
	test -z "$(ls -A "$TMPDIR")" &&
	test_status 1 "$GCKRESTORE" inet.gck >out 2>err &&
	test_cmp expect err &&
	proc_gone $I_pid &&
	test -z "$(ls -A "$TMPDIR")"
'

test_expect_success '--check passes once the holder is gone' '
	kill $HOLDER &&
	wait_gone $HOLDER &&
	test_status 0 "$GCKINSPECT" --check inet.gck >out 2>err &&
	test_must_be_empty out &&
	test_must_be_empty err
'

test_expect_success 'a move on this host: gpurestore checks the ports once the source has ended' '
	inet_start &&
	{ "$GCKPT" --tcp-established -p $I_pid 2>ck.err; echo $? >ck.st; } |
	    "$GCKRESTORE" >rs.out 2>rs.err &&
	test "$(cat ck.st)" = 0 &&
	test_must_be_empty ck.err &&
	test_must_be_empty rs.err &&
	echo $I_pid >expect &&
	test_cmp expect rs.out &&
	proc_running $I_pid &&
	python3 -c "
import socket, sys
socket.create_connection((\"127.0.0.1\", int(sys.argv[1])), 5).close()" \
	    $I_lport &&
	kill -KILL $I_pid &&
	wait_gone $I_pid
'

# In a network namespace of the test's own, with 192.0.2.10 on its
# loopback: a connection from that address to it, checkpointed, then the
# address removed.  ns.sh runs there and leaves what each command said
# in ns/.
test_expect_success 'a connection whose address this host lacks' '
	rm -rf ns && mkdir ns &&
	cat >ns.sh <<-EOF &&
	cd "$TRASH/ns" || exit 1
	ip link set lo up && ip addr add 192.0.2.10/32 dev lo || exit 3
	(cd / && setsid python3 "$GCK_SRCDIR/inettree.py" "$TRASH/ns" \
	    192.0.2.10 </dev/null >/dev/null 2>&1 &)
	i=0
	while ! test -e ready; do
		i=\$((i + 1))
		test \$i -lt 600 || exit 4
		sleep 0.1
	done
	pid=\$(sed "s/^pid=\([0-9]*\) .*/\1/" ready)
	echo \$pid >pid
	"$GCKPT" --tcp-established -p \$pid -o ns.gck 2>ckpt.err || exit 5
	while test -d /proc/\$pid; do sleep 0.1; done
	"$GCKINSPECT" --check ns.gck >check1.out 2>check1.err
	echo \$? >check1.st
	ip addr del 192.0.2.10/32 dev lo || exit 6
	"$GCKINSPECT" --check ns.gck >check2.out 2>check2.err
	echo \$? >check2.st
	"$GCKRESTORE" <ns.gck >rst.out 2>rst.err
	echo \$? >rst.st
	ls -A "\$TMPDIR" >tmp.ls
	EOF
	unshare --net "$GCK_TESTDIR/reaper" sh ns.sh &&
	pid=$(cat ns/pid) &&
	eval "$(sed "s/\\([a-z0-9]*\\)=/N_\\1=/g" ns/ready)" &&
	test "$(cat ns/check1.st)" = 0 &&
	test_must_be_empty ns/check1.out &&
	test_must_be_empty ns/check1.err &&
	test "$(cat ns/check2.st)" = 1 &&
	test_must_be_empty ns/check2.out &&
	c=192.0.2.10:$N_cport s=192.0.2.10:$N_lport &&
	for conn in "$c -> $s" "$s -> $c"; do
		echo "gpuinspect: process $pid'\''s TCP connection $conn needs the address 192.0.2.10, which this host lacks: restore with gpurestore --tcp-close to have it closed (its process sees the connection reset)" || return 1
	done >expect &&
	test_cmp expect ns/check2.err &&
	test "$(cat ns/rst.st)" = 1 &&
	test_must_be_empty ns/rst.out &&
	echo "gpurestore: cannot restore: process $pid'\''s TCP connection $c -> $s needs the address 192.0.2.10, which this host lacks: restore with --tcp-close to have it closed (its process sees the connection reset)" >expect &&
	test_cmp expect ns/rst.err &&
	test_must_be_empty ns/tmp.ls &&
	proc_gone $pid
'

# The GPUs: an image of a CUDA process, made and checked against the
# stand-in driver (tests/fakecuda), whose GPUs FAKECUDA_DIR/gpus lists.
A=GPU-aaaaaaaa-1111-4000-8000-000000000001
N=GPU-eeeeeeee-1111-4000-8000-000000000005
H100='NVIDIA H100 80GB HBM3'
A100='NVIDIA A100-SXM4-40GB'

# fake_gpus UUID:NAME:CC...: the GPUs "here", each of 1 GiB.
fake_gpus() {
	: >"$FAKECUDA_DIR/gpus.new"
	_bus=1
	for _g in "$@"; do
		_u=${_g%%:*} _r=${_g#*:}
		printf '%s %s 1073741824 0000:%02x:00.0 %s\n' "$_u" "${_r#*:}" \
		    $_bus "${_r%%:*}" >>"$FAKECUDA_DIR/gpus.new"
		_bus=$((_bus + 1))
	done
	mv "$FAKECUDA_DIR/gpus.new" "$FAKECUDA_DIR/gpus"
}

test_expect_success 'an image of a CUDA process, made with the stand-in driver' '
	FAKECUDA_DIR=$TRASH/fake &&
	GPUCKPT_LIBCUDA=$GCK_TESTDIR/fakecuda/libcuda.so.1 &&
	GPUCKPT_LIBNVML=$GCK_TESTDIR/fakecuda/libnvidia-ml.so.1 &&
	export FAKECUDA_DIR GPUCKPT_LIBCUDA GPUCKPT_LIBNVML &&
	mkdir -p "$FAKECUDA_DIR/inject" "$FAKECUDA_DIR/delay" &&
	fake_gpus "$A:$H100:9.0" &&
	plain=$WORKLOAD &&
	WORKLOAD=$GCK_TESTDIR/cudawork &&
	LD_LIBRARY_PATH=$GCK_TESTDIR/fakecuda start_workload cu -m 8 -d 0 &&
	WORKLOAD=$plain &&
	started="$started $WPID" &&
	test_status 0 "$GCKPT" -p $WPID -o cu.gck &&
	wait_gone $WPID &&
	test_status 0 "$GCKINSPECT" --check cu.gck >out 2>err &&
	test_must_be_empty out &&
	test_must_be_empty err
'

test_expect_success '--check: the image GPU is missing here' '
	fake_gpus "$N:$A100:8.0" &&
	test_status 1 "$GCKINSPECT" --check cu.gck >out 2>err &&
	test_must_be_empty out &&
	test_grep "^gpuinspect: this host cannot take the image.s GPUs: no $H100 (compute capability 9.0) with [0-9]* MiB free for $A\$" err &&
	test_line_count err 1 &&
	test_status 1 "$GCKINSPECT" --check --json cu.gck >doc &&
	python3 -c "
import json
d = json.load(open(\"doc\"))
assert d[\"ok\"] is False and [f[\"what\"] for f in d[\"findings\"]] == [
    \"gpu\"], d" &&
	fake_gpus &&
	test_status 1 "$GCKINSPECT" --check cu.gck 2>err &&
	test_grep "^gpuinspect: the image.s process [0-9]* (.cudawork.) uses CUDA, but cannot initialize the CUDA driver: CUDA_ERROR_NO_DEVICE\$" err
'

test_expect_success '--check: another GPU of the same chip is a note' '
	fake_gpus "$N:$H100:9.0" &&
	test_status 0 "$GCKINSPECT" --check cu.gck >out 2>err &&
	test_must_be_empty err &&
	echo "note: GPU $A ($H100) of the image is not here: gpurestore restores its processes'\'' state on $N" >expect &&
	test_cmp expect out
'

test_expect_success '--check: a driver older than the image.s' '
	fake_gpus "$A:$H100:9.0" &&
	echo "12080 570.86.10" >"$FAKECUDA_DIR/driver" &&
	test_status 1 "$GCKINSPECT" --check cu.gck >out 2>err &&
	fake_gpus "$N:$H100:9.0" &&
	test_status 1 "$GCKINSPECT" --check cu.gck 2>err2 &&
	rm "$FAKECUDA_DIR/driver" &&
	echo "gpuinspect: the CUDA driver here (CUDA 12.8) is older than the image'\''s (CUDA 13.0)" >expect &&
	test_cmp expect err &&
	test_grep "^gpuinspect: GPU $A of the image is not here: it must be remapped (to $N), which needs NVIDIA driver r580 (CUDA 13.0) or newer; this driver is CUDA 12.8\$" err2 &&
	test_status 1 env GPUCKPT_LIBCUDA=$TRASH/no-libcuda.so.1 \
	    "$GCKINSPECT" --check cu.gck 2>err &&
	test_grep "^gpuinspect: the image.s process [0-9]* (.cudawork.) uses CUDA, but no CUDA driver could be loaded" err
'

test_done
