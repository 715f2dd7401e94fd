#!/bin/sh
test_description='the GPU bundle: made, copied away from the build tree, its runner run on the stand-in driver'
. "$GCK_SRCDIR/lib.sh"

: "${GCK_TOPBUILDDIR:?GCK_TOPBUILDDIR is not set: run the tests through make check}"
: "${GCK_TOPSRCDIR:?GCK_TOPSRCDIR is not set: run the tests through make check}"
require_criu
command -v patchelf >/dev/null || test_skip_all "patchelf not found (scripts/install-deps)"
command -v unshare >/dev/null || test_skip_all "unshare not found"

# The copy lives outside the build tree, which the runs below hide.
COPY=$(mktemp -d /tmp/gck-bundle.XXXXXX) || exit 1
test_cleanup() {
	test -n "${GCK_KEEP:-}" || rm -rf "$COPY"
}

# hidden CMD...: CMD in a mount namespace where the build tree, the
# source tree and the criu of /usr/local/sbin are empty directories,
# without LD_LIBRARY_PATH and TMPDIR, with the PATH of a bare host (whose
# /usr/bin/python3 has torch here).
hidden() {
	unshare -m sh -c '
		mount --make-rprivate / &&
		for d in "$0" "$1" /usr/local/sbin; do
			mount -t tmpfs none "$d" || exit 99
		done
		shift
		cd / && exec env -u LD_LIBRARY_PATH -u TMPDIR PATH=/usr/bin:/bin:/usr/sbin:/sbin "$@"' \
	    "$GCK_TOPBUILDDIR" "$GCK_TOPSRCDIR" "$@"
}

test_expect_success 'make gpu-bundle writes a bundle of at most 48 MiB' '
	$GCK_MAKE -C "$GCK_TOPBUILDDIR" gpu-bundle GPU_BUNDLE="$TRASH/b" \
	    >make.out 2>&1 || { cat make.out; false; } &&
	test -x b/run && test -x b/sbin/criu && test -x b/work/cudawork &&
	for p in gpuckpt gpurestore gpusend gpurecv gpuinspect gpuwatch gpuckpt-slurm; do
		test -x b/bin/$p || return 1
	done &&
	test -x b/libexec/gpuckpt-hook && test -x b/libexec/gpuckpt-keeper &&
	test "$(du -sb b | cut -f1)" -le $((48 << 20)) &&
	grep "^criu 4\." b/VERSION &&
	cp -a b/. "$COPY"/
'

test_expect_success 'no file of it needs a library it lacks but glibc and the driver' '
	for f in "$COPY"/bin/* "$COPY"/libexec/* "$COPY"/sbin/* \
	    "$COPY"/work/* "$COPY"/lib/* "$COPY"/fake/*; do
		head -c 4 "$f" | grep -q ELF || continue
		ldd "$f" | awk -v b="$COPY/" -v f="$f" "
		    \$2 == \"=>\" && \$1 !~ /^(libc|libm|libpthread|libdl|librt|libresolv|libutil|libmvec)\\.so/ &&
		    index(\$3, b) != 1 { print f \": \" \$0 }"
	done >outside &&
	test_must_be_empty outside &&
	! grep -l "$GCK_TOPBUILDDIR" "$COPY"/bin/* "$COPY"/sbin/* "$COPY"/libexec/* >refs
'

test_expect_success 'the programs run from the copy with the build tree hidden' '
	hidden "$COPY/bin/gpuckpt" --version >v.out 2>v.err &&
	test_must_be_empty v.err &&
	test -s v.out &&
	hidden "$COPY/sbin/criu" --version >c.out &&
	grep "^Version: 4\." c.out
'

test_expect_success 'run -f: every test passes on the stand-in driver' '
	test_status 0 hidden "$COPY/run" -f -o "$COPY/report" \
	    -w "$COPY/w" >run.out 2>run.err &&
	cat "$COPY/report" &&
	test_cmp run.out "$COPY/report" &&
	grep "^gpuckpt GPU validation: gpuckpt " "$COPY/report" &&
	grep "^host: Linux .* CPUs, .* GiB$" "$COPY/report" &&
	grep "^driver: 580.65.06 (NVML); GPUs:$" "$COPY/report" &&
	grep "^CUDA driver API: 13000$" "$COPY/report" &&
	grep "^checkpoint API: yes; remap (r580): yes; job file (r590): no; custom storage (API 13040): no$" "$COPY/report" &&
	grep "^criu: works here (4\." "$COPY/report" &&
	grep "^pass  bundle: [0-9]* programs and libraries, every library they need found in it$" "$COPY/report" &&
	grep "^pass  gpuwatch: NVML.s health events, every GPU registered (1 GPU)$" "$COPY/report" &&
	grep "^skip  t-gpu.sh: no GPU (/dev/nvidiactl not found)$" "$COPY/report" &&
	for m in 64 256; do
		grep "^pass  driver steps, $m MiB: lock, checkpoint, restore, unlock; memory checked$" "$COPY/report" &&
		grep "^pass  --suspend/--resume, $m MiB: memory checked after$" "$COPY/report" &&
		grep "^  driver steps, $m MiB: *lock [0-9.]* s, checkpoint [0-9.]* s ([0-9.]* GB/s), restore [0-9.]* s ([0-9.]* GB/s), unlock [0-9.]* s$" "$COPY/report" &&
		grep "^  --suspend/--resume, $m MiB: *suspend [0-9.]* s ([0-9.]* GB/s), resume [0-9.]* s" "$COPY/report" &&
		grep "^skip  custom storage, $m MiB: the driver has no custom storage (its API is 13000; CUDA 13.4, 13040, is needed)$" "$COPY/report" ||
		return 1
	done &&
	grep "^pass  gpuckpt | gpurestore, 1 process of 64 MiB: memory checked on the GPU after$" "$COPY/report" &&
	grep "^pass  gpuckpt | gpurestore, 2 processes of 256 MiB: memory checked on the GPU after$" "$COPY/report" &&
	grep "^pass  PyTorch training, checkpointed mid-run (cpu): stopped after step [0-9]*, restored, final weights equal to an uninterrupted run.s$" "$COPY/report" &&
	grep "^  PyTorch (cpu): *checkpoint [0-9.]* s, image [0-9]* MiB, restore [0-9.]* s$" "$COPY/report" &&
	grep "^skip  gpuckpt --launch: a job of 2 processes of 256 MiB, gpuckpt | gpurestore: the driver (580.65.06) has no job files: r590 is needed$" "$COPY/report" &&
	grep "^skip  CUDA IPC, 2 processes of 64 MiB sharing device memory: the driver (580.65.06) checkpoints no CUDA IPC: r610 is needed$" "$COPY/report" &&
	grep "^9 passed, 0 failed, 5 skipped, in [0-9]* s$" "$COPY/report" &&
	! test -e "$COPY/w"
'

test_expect_success 'run -f -a 13040: the tests of custom storage pass on the stand-in driver' '
	test_status 0 hidden "$COPY/run" -f -a 13040 -s 64 -t "storage job" \
	    -o "$COPY/report5" -w "$COPY/w5" >/dev/null 2>&1 &&
	cat "$COPY/report5" &&
	grep "^CUDA driver API: 13040$" "$COPY/report5" &&
	grep "custom storage (API 13040): yes$" "$COPY/report5" &&
	grep "^pass  custom storage, 64 MiB: the driver.s custom checkpoint and restore; memory checked$" "$COPY/report5" &&
	grep "^pass  custom storage, 64 MiB, abandoned by an unlock: the process runs on with its memory$" "$COPY/report5" &&
	grep "^pass  gpuckpt | gpurestore through custom storage, 64 MiB: memory checked on the GPU after$" "$COPY/report5" &&
	grep "^  custom storage, 64 MiB: *checkpoint [0-9.]* s ([0-9.]* GB/s), restore [0-9.]* s ([0-9.]* GB/s)" "$COPY/report5" &&
	grep "^pass  gpuckpt --launch: a job of 2 processes of 256 MiB, gpuckpt | gpurestore: taken as one job, memory checked on the GPU after$" "$COPY/report5" &&
	grep "^5 passed, 0 failed, 0 skipped, in [0-9]* s$" "$COPY/report5"
'

test_expect_success 'run -f -a 13040 -r 610.10.01: CUDA IPC refused outside a job, moved in one' '
	test_status 0 hidden "$COPY/run" -f -a 13040 -r 610.10.01 -t ipc \
	    -o "$COPY/report6" -w "$COPY/w6" >/dev/null 2>&1 &&
	cat "$COPY/report6" &&
	grep "^driver: 610.10.01 (NVML); GPUs:$" "$COPY/report6" &&
	grep "^pass  CUDA IPC, 2 processes of 64 MiB sharing device memory, not a job: refused, running and shared on: gpuckpt: .*GPU lock failed: CUDA_ERROR_NOT_SUPPORTED (a process that shares device memory through CUDA IPC is checkpointed only in a job started with gpuckpt --launch, on NVIDIA driver r610 or newer)" "$COPY/report6" &&
	grep "^pass  CUDA IPC, 2 processes of 64 MiB sharing device memory, a job (--launch), gpuckpt | gpurestore: memory checked, shared still$" "$COPY/report6" &&
	grep "^3 passed, 0 failed, 0 skipped, in [0-9]* s$" "$COPY/report6" &&
	! test -e "$COPY/w6"
'

test_expect_success 'a driver step that fails is a failure, and the runner says so' '
	mkdir -p "$COPY/w2/fakecuda/inject" &&
	echo CUDA_ERROR_UNKNOWN >"$COPY/w2/fakecuda/inject/checkpoint" &&
	test_status 1 hidden "$COPY/run" -f -s 64 -t "steps suspend roundtrip" \
	    -o "$COPY/report2" -w "$COPY/w2" >/dev/null 2>&1 &&
	cat "$COPY/report2" &&
	grep "^fail  driver steps, 64 MiB: fakectl: checkpoint [0-9]*: CUDA_ERROR_UNKNOWN" "$COPY/report2" &&
	grep "^fail  --suspend/--resume, 64 MiB: " "$COPY/report2" &&
	grep "^fail  gpuckpt | gpurestore, 1 process of 64 MiB: " "$COPY/report2" &&
	grep "^1 passed, 3 failed, 0 skipped, in [0-9]* s$" "$COPY/report2"
'

test_expect_success 'where criu cannot work, what needs no criu still runs' '
	mv "$COPY/sbin/criu" "$COPY/criu.real" &&
	printf "#!/bin/sh\necho \"Error (criu/kerndat.c:1): no way here\" >&2\nexit 1\n" \
	    >"$COPY/sbin/criu" &&
	chmod +x "$COPY/sbin/criu" &&
	test_status 0 hidden "$COPY/run" -f -s 64 -o "$COPY/report4" \
	    -w "$COPY/w4" >/dev/null 2>&1 &&
	mv "$COPY/criu.real" "$COPY/sbin/criu" &&
	cat "$COPY/report4" &&
	grep "^criu: cannot work here: Error (criu/kerndat.c:1): no way here$" "$COPY/report4" &&
	grep "^skip  t-gpu.sh: criu cannot work here$" "$COPY/report4" &&
	grep "^pass  driver steps, 64 MiB: " "$COPY/report4" &&
	grep "^pass  --suspend/--resume, 64 MiB: " "$COPY/report4" &&
	grep "^skip  gpuckpt | gpurestore, 1 process of 64 MiB: criu cannot work here$" "$COPY/report4" &&
	grep "^skip  gpuckpt | gpurestore, 2 processes of 256 MiB: criu cannot work here$" "$COPY/report4" &&
	grep "^skip  PyTorch training, checkpointed mid-run: criu cannot work here$" "$COPY/report4" &&
	grep "^skip  custom storage, 64 MiB: the driver has no custom storage" "$COPY/report4" &&
	grep "^skip  gpuckpt --launch: a job of 2 processes of 256 MiB, gpuckpt | gpurestore: criu cannot work here$" "$COPY/report4" &&
	grep "^skip  CUDA IPC, 2 processes of 64 MiB sharing device memory: criu cannot work here$" "$COPY/report4" &&
	grep "^4 passed, 0 failed, 7 skipped, in [0-9]* s$" "$COPY/report4"
'

test_expect_success 'a library missing from the bundle is a failure' '
	rm "$COPY/lib/libzstd.so.1" &&
	test_status 1 hidden "$COPY/run" -n -f -o "$COPY/report3" >/dev/null 2>&1 &&
	grep "^fail  bundle: libraries found outside it or not at all: .*bin/gpuckpt:libzstd.so.1" "$COPY/report3" &&
	grep "^(-n: no test run)$" "$COPY/report3"
'

test_expect_success 'run refuses what it does not know' '
	test_status 2 "$COPY/run" -t nosuch >out 2>err &&
	test_grep "^run: no test .nosuch." err &&
	test_status 2 "$COPY/run" -s 1G >out 2>err &&
	test_grep "^run: sizes are MiB" err
'

test_done
