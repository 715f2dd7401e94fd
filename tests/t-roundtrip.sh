#!/bin/sh
test_description='checkpoint and restore real process trees with CRIU'
. "$GCK_SRCDIR/lib.sh"

require_criu
require_python

started=
test_cleanup() {
	test -n "$started" && kill_tree $started >/dev/null 2>&1
}

# Starts a workload and remembers it for the cleanup.
start() {
	start_workload "$@" || return 1
	started="$started $WPID"
	WSTART=$(proc_field $WPID 22)
}

# restored_ok PID: PID is a restored copy of the workload that was
# started last: it runs, is a new process, sits in a session of its own
# and its memory, file offset, pipe child and thread check out.
restored_ok() {
	proc_running $1 &&
	proc_running $WCHILD &&
	test "$(proc_field $1 22)" != "$WSTART" &&
	test "$(proc_field $1 6)" != "$(proc_field $$ 6)" &&
	verify_workload $1 &&
	grep "^verify ok .* child=$WCHILD gap=[0-9]*\$" "$WSTATUS" >/dev/null
}

# check_image IMAGE.tar PID AFTER [SHELLJOB]: the uncompressed image
# follows the format: entry order, splitting, per-entry digests, entry
# metadata, manifest and trailer.
check_image() {
	/usr/bin/python3 - "$@" <<'EOF'
import hashlib, json, re, struct, sys, tarfile
import xxhash

path, pid, after = sys.argv[1], int(sys.argv[2]), sys.argv[3]
shell_job = len(sys.argv) > 4 and sys.argv[4] == "shell-job"
PART = 16 * 1024 * 1024
CHUNK = 1024 * 1024
bad = []

# An entry's SHA-256, as gpuckpt-image(5) says: of its bytes; with holes,
# of the bytes stored, then each region's offset and length and the
# whole size, each as a 64-bit little-endian number.
def digest(t, m):
    data = t.extractfile(m).read()
    if not m.sparse:
        return hashlib.sha256(data).hexdigest()
    h = hashlib.sha256()
    regs = [(o, n) for o, n in m.sparse if n > 0]
    for o, n in regs:
        h.update(data[o:o + n])
    for o, n in regs:
        h.update(struct.pack("<QQ", o, n))
    h.update(struct.pack("<Q", m.size))
    return h.hexdigest()

def check(cond, what):
    if not cond:
        bad.append(what)

# Each page's XXH3-128, as the page index lists it (format 3), of the
# entries of memory, holes as zeros.
def page_digests(t, m):
    data = t.extractfile(m).read()
    return b"".join(xxhash.xxh3_128(data[o:o + 4096]).digest()
                    for o in range(0, len(data), 4096))

with tarfile.open(path, "r:") as t:
    members = t.getmembers()
    data = {m.name: t.extractfile(m).read()
            for m in members if m.name in ("gpuckpt.json", "gpuckpt.sums")}
    sha = {m.name: digest(t, m) for m in members}
    pidx = b"".join(t.extractfile(m).read() for m in members
                    if m.name.startswith("gpuckpt.pages.part"))
    pdig = b"".join(page_digests(t, m) for m in members
                    if m.name.startswith("criu/pages-"))
# The page index: after the CRIU files, in parts of at most 2^20 digests,
# one for each page of memory, in order.
inames = [m.name for m in members if m.name.startswith("gpuckpt.pages.")]
check(inames == ["gpuckpt.pages.part%05d" % i for i in range(len(inames))],
      "page index parts %r" % inames)
check(len(inames) > 0, "no page index")
check(pidx == pdig, "the page index (%d bytes) is not the pages' digests "
      "(%d bytes)" % (len(pidx), len(pdig)))
index_members = [m for m in members if m.name in inames]
members = [m for m in members if m.name not in inames]
names = [m.name for m in members]
check(len(names) >= 4, "too few entries: %r" % names)
check(names[0] == "gpuckpt.json", "first entry %r" % names[0])
check(names[1] == "criu/inventory.img", "second entry %r" % names[1])
check(names[-1] == "gpuckpt.sums", "last entry %r" % names[-1])
check(len(set(names)) == len(names), "duplicate entry names")
for m in members:
    check(m.isreg(), "%s: not a regular file" % m.name)
    check(m.mode == 0o600, "%s: mode %o" % (m.name, m.mode))
    check(m.uid == 0 and m.gid == 0, "%s: uid/gid" % m.name)
    check(m.uname == "root" and m.gname == "root", "%s: uname/gname" % m.name)
    d = m.pax_headers.get("SCHILY.xattr.gpuckpt.sha256", "")
    check(d == sha[m.name], "%s: sha256 record %r, content %s" %
          (m.name, d, sha[m.name]))

crius = names[1:-1]
check(all(n.startswith("criu/") for n in crius), "entry outside criu/")
base = [re.sub(r"\.part[0-9]{5}$", "", n[5:]) for n in crius]
pages = [b for b in base[1:] if b.startswith("pages-")]
others = [b for b in base[1:] if not b.startswith("pages-")]
pagemaps = [b for b in others if b.startswith("pagemap-")]
rest = [b for b in others if not b.startswith("pagemap-")]
check(base[1:] == others + pages, "pages-*.img are not last")
check(len(pagemaps) > 0, "no pagemap-*.img")
check(len(pages) > 0, "no pages-*.img")
sizes = {}
for m in members[1:-1]:
    lim = CHUNK if m.name.startswith("criu/pages-") else PART
    check(m.size <= lim, "%s: %d bytes > %d" % (m.name, m.size, lim))
    r = re.fullmatch(r"criu/(.*)\.part([0-9]{5})", m.name)
    if r:
        sizes.setdefault(r.group(1), []).append((int(r.group(2)), m.size))
for b, parts in sizes.items():
    check([p[0] for p in parts] == list(range(len(parts))),
          "%s: parts not numbered 0..n" % b)
    # (a task's pages are cut where its address space crosses a chunk)
    check(b.startswith("pages-") or sum(p[1] for p in parts) > PART,
          "%s: split but small" % b)
    check(b not in base or base.count(b) == len(parts),
          "%s: both whole and split" % b)
for b in set(base):
    if b not in sizes:
        check(base.count(b) == 1, "%s: duplicate" % b)
check(len(sizes) > 0, "nothing was split into parts")

man = json.loads(data["gpuckpt.json"])
# The manifest lists every CRIU file with its size, in the order criu
# wrote them; the stream holds exactly those.
listed = {f["name"]: f["size"] for f in man.get("files", [])}
check(len(listed) == len(man.get("files", [])), "a file listed twice")
total = {}
for m in members[1:-1]:
    b = re.sub(r"\.part[0-9]{5}$", "", m.name[5:])
    total[b] = total.get(b, 0) + m.size
check(total == listed, "stream files %r != manifest files %r" %
      (sorted(total.items()), sorted(listed.items())))
wrote = [f["name"] for f in man.get("files", [])]
check([b for b in dict.fromkeys(base) if b.startswith("pages-")] ==
      [n for n in wrote if n.startswith("pages-")],
      "pages files not in the order criu wrote them")
check(man.get("format") == 3, "manifest format %r" % man.get("format"))
check(man.get("chunk_size") == CHUNK, "chunk_size %r" % man.get("chunk_size"))
check(re.fullmatch(r"[0-9a-f]{32}", str(man.get("id"))), "id %r" %
      man.get("id"))
check(man.get("tool") == "gpuckpt 0.1.0", "manifest tool %r" % man.get("tool"))
check(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z",
                   str(man.get("created"))), "created %r" % man.get("created"))
check(man.get("root_pid") == pid, "root_pid %r" % man.get("root_pid"))
check(man.get("shell_job") is shell_job, "shell_job %r" % man.get("shell_job"))
check("cuda" in man and man["cuda"] is None, "cuda %r" % man.get("cuda"))
check(man.get("part_size") == PART, "part_size %r" % man.get("part_size"))
host = man.get("host", {})
for k in ("hostname", "kernel", "arch", "cpu_flags"):
    check(k in host, "host.%s missing" % k)
check(isinstance(host.get("cpu_flags"), list), "host.cpu_flags not a list")
check(isinstance(man.get("criu", {}).get("version"), str), "criu.version")
opts = man.get("options", {})
check(opts.get("after") == after, "options.after %r" % opts.get("after"))
procs = {p.get("pid"): p for p in man.get("processes", [])}
check(pid in procs, "root pid not in processes")
check(len(procs) >= 2, "the child is missing from processes")
for p in procs.values():
    for k in ("pid", "ppid", "pgid", "sid", "uid", "gid", "comm", "cmdline",
              "cwd", "threads", "memory"):
        check(k in p, "process %s: no %s" % (p.get("pid"), k))
    check(isinstance(p.get("cmdline"), list), "cmdline not a list")
    for k in ("vm_size", "vm_rss", "rss_anon", "rss_file", "rss_shmem"):
        check(k in p.get("memory", {}), "process %s: no memory.%s" %
              (p.get("pid"), k))
if pid in procs:
    check(procs[pid].get("threads") == 2, "root threads %r" %
          procs[pid].get("threads"))
    check(procs[pid].get("memory", {}).get("rss_anon", 0) > 0, "rss_anon")
    kids = [p for p in procs.values() if p.get("ppid") == pid]
    check(len(kids) == 1, "root has %d children" % len(kids))

sums = json.loads(data["gpuckpt.sums"])
check(sums.get("format") == 3, "trailer format %r" % sums.get("format"))
ents = sums.get("entries", [])
ients = [e for e in ents if e.get("name") in inames]
check([e.get("name") for e in ents[len(ents) - len(ients):]] == inames,
      "the page index is not last before the trailer")
check([e.get("sha256") for e in ients] == [sha[n] for n in inames],
      "the page index's digests differ from the trailer's")
allents = ents
ents = [e for e in ents if e.get("name") not in inames]
check([e.get("name") for e in ents] == names[:-1], "trailer names differ")
check([e.get("size") for e in ents] == [m.size for m in members[:-1]],
      "trailer sizes differ")
check([e.get("sha256") for e in ents] == [sha[m.name] for m in members[:-1]],
      "trailer digests differ from the entries'")
# each entry a frame of its own, back to back from the start
at = 0
for e in allents:
    check(e.get("at") == at and e.get("zsize", 0) > 0,
          "%s: at %r zsize %r, expected at %d" % (e.get("name"), e.get("at"),
          e.get("zsize"), at))
    at = e.get("at", 0) + e.get("zsize", 0)
check(sums.get("count") == len(names) - 1 + len(inames),
      "trailer count %r" % sums.get("count"))
check(sums.get("bytes") == sum(m.size for m in members[:-1]) +
      sum(m.size for m in index_members), "trailer bytes %r" %
      sums.get("bytes"))

for b in bad:
    print("image check: " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
}

test_expect_success 'start a 300 MiB workload' '
	start big -m 300 &&
	verify_workload $WPID &&
	before=$VCOUNTER
'

test_expect_success 'gpuckpt -p PID | gpurestore' '
	{ "$GCKPT" -p $WPID 2>ckpt.err; echo $? >ckpt.st; } |
	    "$GCKRESTORE" >restore.out 2>restore.err
	st=$?
	cat ckpt.err restore.err
	test $st -eq 0 &&
	echo 0 >expect &&
	test_cmp expect ckpt.st &&
	test_must_be_empty ckpt.err &&
	test_must_be_empty restore.err &&
	echo $WPID >expect &&
	test_cmp expect restore.out
'

test_expect_success 'the restored tree runs on with its state intact' '
	restored_ok $WPID &&
	test $VCOUNTER -gt $before
'

test_expect_success 'gpuckpt and gpurestore left nothing in TMPDIR' '
	test -z "$(ls -A "$TMPDIR")"
'

test_expect_success 'gpuckpt -o FILE' '
	kill_tree $WPID &&
	start file -m 64 &&
	mkdir out &&
	test_status 0 "$GCKPT" -p $WPID -o out/img.gck >stdout 2>stderr &&
	test_must_be_empty stdout &&
	test_must_be_empty stderr &&
	test -f out/img.gck &&
	echo img.gck >expect &&
	ls -A out >actual &&
	test_cmp expect actual &&
	wait_gone $WPID &&
	wait_gone $WCHILD
'

test_expect_success 'the image is a zstd frame for each entry, with checksums' '
	od -An -tx1 -N4 out/img.gck | tr -d " " >magic &&
	echo 28b52ffd >expect &&
	test_cmp expect magic &&
	zstd -lv out/img.gck >zstd.out 2>&1 &&
	frames=$(sed -n "s/^# Zstandard Frames: *//p" zstd.out) &&
	entries=$(zstd -dc out/img.gck | tar tf - | wc -l) &&
	test "$frames" -eq "$entries" &&
	grep "Check: *XXH64" zstd.out
'

test_expect_success 'stock tools list the image in order' '
	zstd -dc out/img.gck >img.tar &&
	tar tf img.tar >list &&
	test "$(sed -n 1p list)" = gpuckpt.json &&
	test "$(sed -n 2p list)" = criu/inventory.img &&
	test "$(sed -n \$p list)" = gpuckpt.sums &&
	grep -x criu/inventory.img list
'

test_expect_success 'the image follows the format' '
	check_image img.tar $WPID kill
'

test_expect_success 'gpuinspect describes the image' '
	test_status 0 "$GCKINSPECT" --json out/img.gck >inspect.out \
	    2>inspect.err &&
	test_must_be_empty inspect.err &&
	python3 -c "
import json, sys
m = json.load(open(\"inspect.out\"))
sys.exit(not (m[\"image\"][\"format\"] == 3 and m[\"root_pid\"] == $WPID))
"
'

test_expect_success 'gpuinspect --verify accepts the image' '
	test_status 0 "$GCKINSPECT" --verify out/img.gck >verify.out \
	    2>verify.err &&
	test_must_be_empty verify.err &&
	n=$(wc -l <list) &&
	test_grep "^image ok: \\($n\\|$((n - 1))\\) entries, [0-9]* bytes\$" \
	    verify.out
'

test_expect_success 'gpurestore FILE --pidfile' '
	test_status 0 "$GCKRESTORE" out/img.gck --pidfile pf >restore.out \
	    2>restore.err &&
	test_must_be_empty restore.err &&
	echo $WPID >expect &&
	test_cmp expect restore.out &&
	test_cmp expect pf &&
	restored_ok $WPID &&
	test -z "$(ls -A "$TMPDIR")"
'

test_expect_success 'gpuckpt --leave-running' '
	kill_tree $WPID &&
	start running -m 32 &&
	verify_workload $WPID &&
	before=$VCOUNTER &&
	test_status 0 "$GCKPT" --leave-running -p $WPID -o run.gck \
	    2>stderr &&
	test_must_be_empty stderr &&
	proc_running $WPID &&
	proc_running $WCHILD &&
	test "$(proc_field $WPID 22)" = "$WSTART" &&
	verify_workload $WPID &&
	test $VCOUNTER -gt $before
'

test_expect_success 'gpurestore refuses while the pid is in use' '
	test_status 1 "$GCKRESTORE" run.gck >restore.out 2>restore.err &&
	test_must_be_empty restore.out &&
	test_line_count restore.err 1 &&
	test_grep "^gpurestore: pid $WPID is in use" restore.err &&
	test "$(proc_field $WPID 22)" = "$WSTART" &&
	verify_workload $WPID &&
	test -z "$(ls -A "$TMPDIR")"
'

test_expect_success 'the --leave-running image restores' '
	kill_tree $WPID &&
	test_status 0 "$GCKRESTORE" run.gck >restore.out &&
	echo $WPID >expect &&
	test_cmp expect restore.out &&
	restored_ok $WPID &&
	zstd -dc run.gck >run.tar &&
	check_image run.tar $WPID running
'

test_expect_success 'gpuckpt --stop leaves the tree stopped' '
	kill_tree $WPID &&
	start stop -m 32 &&
	test_status 0 "$GCKPT" -s -p $WPID -o stop.gck 2>stderr &&
	test_must_be_empty stderr &&
	test "$(proc_field $WPID 3)" = T &&
	test "$(proc_field $WCHILD 3)" = T
'

test_expect_success 'the --stop image restores a running tree' '
	kill_tree $WPID &&
	test_status 0 "$GCKRESTORE" <stop.gck >restore.out &&
	echo $WPID >expect &&
	test_cmp expect restore.out &&
	restored_ok $WPID
'

test_expect_success 'gpurestore waits for the stopped source to go' '
	kill_tree $WPID &&
	start stopwait -m 8 &&
	test_status 0 "$GCKPT" -s -p $WPID -o stopwait.gck 2>stderr &&
	test_must_be_empty stderr &&
	{ (sleep 1; kill -KILL $WPID $WCHILD) & } &&
	test_status 0 "$GCKRESTORE" stopwait.gck >restore.out &&
	echo $WPID >expect &&
	test_cmp expect restore.out &&
	restored_ok $WPID
'

test_expect_success 'gpuckpt --compress=none' '
	kill_tree $WPID &&
	start none -m 32 &&
	test_status 0 "$GCKPT" --compress=none -p $WPID >none.gck 2>stderr &&
	test_must_be_empty stderr &&
	tar tf none.gck >list &&
	test "$(sed -n 1p list)" = gpuckpt.json &&
	test "$(sed -n \$p list)" = gpuckpt.sums &&
	check_image none.gck $WPID kill
'

test_expect_success 'the uncompressed image restores' '
	wait_gone $WPID &&
	wait_gone $WCHILD &&
	test_status 0 "$GCKRESTORE" - <none.gck >restore.out &&
	echo $WPID >expect &&
	test_cmp expect restore.out &&
	restored_ok $WPID
'

test_expect_success 'without gpuckpt-keeper, gpurestore fails before restoring' '
	kill_tree $WPID &&
	wait_gone $WPID &&
	wait_gone $WCHILD &&
	test_status 1 env GCK_LIBEXEC_DIR="$TRASH/nowhere" "$GCKRESTORE" \
	    none.gck >restore.out 2>restore.err &&
	test_must_be_empty restore.out &&
	test_line_count restore.err 1 &&
	test_grep "^gpurestore: cannot find .$TRASH/nowhere/gpuckpt-keeper., which criu restores under: No such file" restore.err &&
	proc_gone $WPID &&
	test_status 0 "$GCKRESTORE" none.gck >restore.out &&
	echo $WPID >expect &&
	test_cmp expect restore.out &&
	restored_ok $WPID
'

test_expect_success 'gpuckpt -c zstd:1 and zstd:19' '
	kill_tree $WPID &&
	start level -m 8 &&
	test_status 0 "$GCKPT" -R -c zstd:1 -p $WPID -o l1.gck &&
	test_status 0 "$GCKPT" -R --compress=zstd:19 -p $WPID -o l19.gck &&
	zstd -t l1.gck l19.gck &&
	verify_workload $WPID
'

test_expect_success 'a workload that is not a session leader' '
	kill_tree $WPID &&
	WSTATUS=$TRASH/job.status &&
	setsid sh -c "\"\$1\" -m 32 -f \"\$2\" </dev/null >/dev/null 2>&1 &" \
	    sh "$WORKLOAD" "$WSTATUS" &&
	wait_for_line "$WSTATUS" "^ready " &&
	WPID=$(sed -n "s/^ready pid=\\([0-9]*\\).*/\\1/p" "$WSTATUS") &&
	WCHILD=$(sed -n "s/^ready .*child=\\([0-9]*\\).*/\\1/p" "$WSTATUS") &&
	started="$started $WPID" &&
	WSTART=$(proc_field $WPID 22) &&
	WSID=$(proc_field $WPID 6) &&
	test "$WSID" != 0 &&
	test "$WSID" != $WPID &&
	verify_workload $WPID
'

test_expect_success 'gpuckpt handles it as a shell job' '
	test_status 0 "$GCKPT" -p $WPID -o job.gck 2>stderr &&
	test_must_be_empty stderr &&
	zstd -dc job.gck >job.tar &&
	check_image job.tar $WPID kill shell-job
'

test_expect_success 'gpurestore puts it in a new session' '
	wait_gone $WPID &&
	wait_gone $WCHILD &&
	test_status 0 "$GCKRESTORE" job.gck >restore.out &&
	echo $WPID >expect &&
	test_cmp expect restore.out &&
	restored_ok $WPID &&
	test "$(proc_field $WPID 6)" != "$WSID" &&
	test "$(proc_field $WPID 6)" != 0
'

# In a new PID namespace whose first process was not made a session
# leader, every process is in session 0: its leader is outside.
cat >session0.sh <<'EOF2'
"$1" -m 8 -f s0.status </dev/null >/dev/null 2>&1 &
i=0
until grep -q "^ready " s0.status 2>/dev/null; do
	i=$((i + 1))
	test $i -lt 600 || exit 1
	sleep 0.1
done
pid=$(sed -n "s/^ready pid=\([0-9]*\).*/\1/p" s0.status)
sed "s/.*) //" /proc/$pid/stat | cut -d" " -f4 >s0.sid
"$2" -p $pid -o s0.gck 2>s0.err
echo $? >s0.rc
sed "s/.*) //" /proc/$pid/stat | cut -d" " -f1 >s0.state
kill -USR1 $pid
i=0
until grep -q "^verify " s0.status; do
	i=$((i + 1))
	test $i -lt 100 || exit 1
	sleep 0.1
done
EOF2

test_expect_success 'a job in session 0 is refused before it is touched' '
	unshare --pid --fork --mount-proc sh session0.sh "$WORKLOAD" "$GCKPT" &&
	echo 0 >expect &&
	test_cmp expect s0.sid &&
	echo 1 >expect &&
	test_cmp expect s0.rc &&
	test_line_count s0.err 1 &&
	test_grep "^gpuckpt: cannot checkpoint pid [0-9]*: process [0-9]* (.workload.) is in session 0 .*setsid" s0.err &&
	test_grep "^[RS]\$" s0.state &&
	test_grep "^verify ok " s0.status &&
	test ! -e s0.gck &&
	test -z "$(ls -A "$TMPDIR")"
'

test_expect_success 'a nohup-style job: a controlling terminal, stdio on files' '
	kill_tree $WPID &&
	WSTATUS=$TRASH/nohup.status &&
	{ script -qec "exec sh -c '\''\"$WORKLOAD\" -m 16 -f \"$WSTATUS\" </dev/null >/dev/null 2>&1 & wait'\''" /dev/null \
	    </dev/null >/dev/null 2>&1 & } &&
	wait_for_line "$WSTATUS" "^ready " &&
	WPID=$(sed -n "s/^ready pid=\([0-9]*\).*/\1/p" "$WSTATUS") &&
	WCHILD=$(sed -n "s/^ready .*child=\([0-9]*\).*/\1/p" "$WSTATUS") &&
	started="$started $WPID" &&
	test "$(proc_field $WPID 7)" != 0 &&
	test_status 0 "$GCKPT" -p $WPID -o nohup.gck 2>stderr &&
	test_must_be_empty stderr &&
	wait_gone $WPID &&
	wait_gone $WCHILD &&
	test_status 0 "$GCKRESTORE" nohup.gck >restore.out &&
	echo $WPID >expect &&
	test_cmp expect restore.out &&
	restored_ok $WPID &&
	test "$(proc_field $WPID 7)" = 0
'

test_expect_success 'nothing left in TMPDIR' '
	kill_tree $WPID &&
	test -z "$(ls -A "$TMPDIR")"
'

test_done
