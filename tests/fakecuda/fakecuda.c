/*
 * fakecuda.c -- a stand-in for NVIDIA's libcuda.so.1 in the tests.
 *
 * It exports the driver API entry points that gpuckpt and the test
 * workloads use, with cuda.h's names and signatures, and keeps its
 * state in plain files under the directory named by FAKECUDA_DIR
 * (without it cuInit() fails with CUDA_ERROR_NO_DEVICE):
 *
 *	gpus		one GPU a line, read afresh at each use; its
 *			ordinal is its line's place (the physical ordinal,
 *			see CUDA_VISIBLE_DEVICES below); blank, "#" and
 *			malformed lines are skipped.  Same chip: same NAME
 *			and MAJOR.MINOR.
 *			UUID MAJOR.MINOR TOTAL_BYTES PCI_BUS_ID NAME...
 *	driver		"VERSION RELEASE", default "13000 580.65.06".
 *			Below 12080 cuGetProcAddress() does not find the
 *			checkpoint API and its functions fail with
 *			CUDA_ERROR_NOT_SUPPORTED; below 13000 a restore
 *			with GPU pairs fails with CUDA_ERROR_NOT_SUPPORTED;
 *			below 13040 there is no custom storage (see
 *			below).
 *	mem/UUID/KEY	the device memory process KEY holds on GPU UUID:
 *			a GPU's used memory is the sum of the sizes of the
 *			files of live processes (see mem_holder() in
 *			gpus.c).
 *	proc/KEY/	a CUDA process: state (RUNNING, LOCKED,
 *			CHECKPOINTED or FAILED), statep (the address of
 *			the state in its memory, from which the state of a
 *			stopped process is read: one restored from an image
 *			is in the state it had then, whatever the file says
 *			of the process it was taken from), tid (its restore
 *			thread), req and ack (see below), lock (callers
 *			queue on it), storage (the layout of a pending
 *			custom storage operation: its ID, then "UUID SIZE"
 *			a context).
 *	inject/ACTION.KEY, inject/ACTION
 *			read when ACTION (lock, checkpoint, restore,
 *			unlock, storage or complete) runs in KEY, the
 *			first found wins:
 *			"ERRORNAME [FAILED]" makes the action fail with
 *			that error (an unknown name: CUDA_ERROR_UNKNOWN)
 *			without doing anything, and FAILED puts the process
 *			in the FAILED state; "hang" makes a lock wait its
 *			timeout and fail with CUDA_ERROR_NOT_READY, and any
 *			other action wait until its caller gives up.  Only
 *			an action allowed in the present state gets there.
 *	inject/dtoh, inject/htod (.CALLER first)
 *			read at each cuMemcpyDtoHAsync() or
 *			cuMemcpyHtoDAsync() in the caller: "ERRORNAME"
 *			makes the copy fail with that error.
 *	copies		where it is, a line for each copy to or from the
 *			memory custom storage maps: "htod|dtoh PID GPU
 *			OFFSET BYTES pinned|pageable" (PID as the caller
 *			sees it; pinned: the host side is memory
 *			cuMemHostAlloc() gave).
 *	delay/ACTION	milliseconds that ACTION sleeps before its work.
 *	log		one line per action, with one write(2):
 *			ACTION KEY START_NS END_NS RESULT STATE [PAIRS]
 *			(CLOCK_MONOTONIC; a restore adds its OLD=NEW pairs).
 *			ACTION is also checkpoint-storage, restore-storage,
 *			complete or abandon (see below).
 *
 * A process's KEY is its PID in its own PID namespace, getpid() at
 * cuInit(), which CRIU gives it back on a restore, in a namespace too;
 * for a process in the caller's namespace it is simply its PID.  The
 * real driver reaches a process through /proc, and its callers, as
 * NVML's, speak of PIDs as they see them, host PIDs for a tree restored
 * in a namespace of its own: so the cuCheckpointProcess*() functions
 * take the PID the caller sees, find its KEY as the last field of NSpid
 * in /proc/PID/status, and cuCheckpointProcessGetRestoreThreadId()
 * answers with the restore thread's TID as the caller sees it; NVML
 * (fakenvml.c) names the process that holds mem/UUID/KEY by its PID
 * here.  Two processes with one PID in two namespaces would share a
 * KEY, and so their files: the tests never have two such CUDA
 * processes.
 *
 * CUDA_VISIBLE_DEVICES, when it is set, is read once by cuInit(), as
 * the real driver reads it: a comma list of GPUs, each an ordinal of
 * gpus (read as strtoul() reads it: leading digits, the rest ignored)
 * or "GPU-" and as much of a UUID as names one GPU only.  The list ends
 * at the first entry that names no GPU; a GPU named twice, or none at
 * all (an empty string hides every GPU), makes cuInit() fail with
 * CUDA_ERROR_NO_DEVICE.  The process then sees these GPUs only,
 * numbered from 0 in the list's order, in every call that takes or
 * gives a CUdevice; without it, it sees every GPU of gpus.  The
 * checkpoint API, which names processes, and NVML (fakenvml.c) ignore
 * it.  The visible GPUs are kept as UUIDs in the process's memory, so
 * an image of the process carries them; a restore with GPU pairs
 * replaces each OLDUUID among them by its NEWUUID, as the real driver
 * remaps them, so that a device keeps its ordinal on its new GPU.  Such
 * a NEWUUID must be in gpus (else CUDA_ERROR_INVALID_DEVICE), and no GPU
 * may come to be visible twice (CUDA_ERROR_INVALID_VALUE).
 *
 * Device memory is real memory: a file in mem/ mapped shared at fixed
 * addresses inside a range reserved at cuInit().  A checkpoint copies
 * it into the process's heap, puts an inaccessible reservation back and
 * removes the file, so that a process image taken then (by CRIU) holds
 * the contents and nothing refers to the file; a restore maps a new file
 * at the same addresses and copies the contents back.  Outside of a call
 * the process holds no descriptor into FAKECUDA_DIR.
 *
 * As in the real driver, only the process itself changes its state, in
 * its restore thread.  cuCheckpointProcess{Lock,Checkpoint,Restore,
 * Unlock}() called in another process write proc/KEY/req,
 *	SEQ ACTION DEADLINE_NS JOB [TIMEOUT_MS | OLDUUID=NEWUUID ...]
 * (JOB: the caller's job, see below, or "-")
 * and wait for proc/KEY/ack, "SEQ CODE NAME".  The restore thread looks
 * for req every millisecond, takes it away, and does the action unless
 * the deadline has passed.  A caller that has waited long enough (a
 * lock: its timeout and 2 s, or FAKECUDA_CALL_TIMEOUT_MS, default 10 s,
 * with no timeout; other actions: FAKECUDA_CALL_TIMEOUT_MS) withdraws
 * its request and fails with CUDA_ERROR_TIMEOUT: a stopped process
 * answers nothing.  In the FAILED state every action fails with
 * CUDA_ERROR_ILLEGAL_STATE and every application call with
 * CUDA_ERROR_UNKNOWN.  A process forked from one that called cuInit()
 * cannot use the driver: every call fails with
 * CUDA_ERROR_NOT_INITIALIZED, cuInit() included.
 *
 * Job files (driver version 13010, r590): a process whose environment
 * names a file in CUDA_CHECKPOINT_JOB_FILE at cuInit() is of that job.
 * The file holds the job's ID, written by the first process of the job
 * to find it empty ("job-PID-NS"), and the process keeps the ID in its
 * memory, so that one restored from an image is of its job still (CRIU
 * gives a memfd its contents back).  A file that cannot be opened makes
 * cuInit() fail with CUDA_ERROR_INVALID_VALUE.  An action on a process
 * of a job fails with CUDA_ERROR_INVALID_VALUE unless its caller names
 * the same job in its own CUDA_CHECKPOINT_JOB_FILE, with
 * CUDA_ERROR_NOT_PERMITTED while another action is under way on a
 * process of the job (they go one at a time; job.ID is its lock), and
 * custom storage with CUDA_ERROR_NOT_SUPPORTED (the driver does not
 * offer it to a job).  The real driver's codes for these cases are not
 * documented: these are the stand-in's own.
 *
 * CUDA IPC (cuIpcGetMemHandle(), cuIpcOpenMemHandle(),
 * cuIpcCloseMemHandle()): a handle names the exporter's KEY and the
 * allocation's address, "fakeipc KEY VA"; the exporter writes
 * ipc/KEY-VA, "UUID OFFSET LENGTH", where the allocation is in its memory
 * file, at the export and after each restore.  An importer maps that part
 * of the file shared at fresh addresses of its own (its own handle:
 * CUDA_ERROR_INVALID_CONTEXT; a handle whose ipc/ file is not there:
 * CUDA_ERROR_INVALID_HANDLE), unmaps it at its own checkpoint, and at
 * the start of each call maps it again wherever ipc/ says the memory is
 * now, should that not be the file it mapped, waiting the call timeout
 * for an exporter not restored yet (then CUDA_ERROR_ILLEGAL_ADDRESS).  A
 * process that exported or imported memory is locked only when it is of
 * a job and the driver's release (driver's second word) is 610 or newer,
 * else the lock fails with CUDA_ERROR_NOT_SUPPORTED (the stand-in's
 * code: the real one is not documented), and custom storage refuses it
 * with CUDA_ERROR_NOT_SUPPORTED, as NVIDIA documents.
 *
 * Stream memory operations (cuStreamWriteValue32() and
 * cuStreamWaitValue32(), exported under their _v2 names too, which
 * cuGetProcAddress() gives a caller of 11070 or later; the two do the
 * same) are application calls on a 32-bit word, 4-byte aligned, of the
 * caller's own device memory (an allocation of any context of its) or of
 * memory it opened through CUDA IPC, else CUDA_ERROR_INVALID_VALUE; they
 * need a current context (CUDA_ERROR_INVALID_CONTEXT) and one of the
 * special streams (NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD; any
 * other: CUDA_ERROR_INVALID_HANDLE).  A write stores the value at once, a
 * release store (with CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER a relaxed
 * one; other flags: CUDA_ERROR_INVALID_VALUE).  A wait is done inside the
 * call, as a GPU kernel spins on a flag that a peer writes (an NCCL
 * collective): it reads the word (an acquire load) every millisecond
 * until the condition of its flags holds, with no timeout of its own:
 * GEQ, (int32_t)(*addr - value) >= 0, the driver's cyclic compare; EQ;
 * AND, (*addr & value) != 0; NOR, ~(*addr | value) != 0
 * (CU_STREAM_WAIT_VALUE_FLUSH is taken and does nothing; other bits:
 * CUDA_ERROR_INVALID_VALUE).  For as long as it waits the call is in
 * progress: a lock of the process waits for it and fails with
 * CUDA_ERROR_NOT_READY after its timeout, so that a process waiting for
 * a peer that is locked, and so cannot write, is not locked either.
 * Between two reads the wait lets go of the serializer of application
 * calls, so that the process's other threads go on with theirs (a
 * stream's wait holds no host thread); each read checks first that the
 * word is still mapped (freed or closed meanwhile:
 * CUDA_ERROR_ILLEGAL_ADDRESS), and every 10 ms an import is mapped again
 * where its owner's memory is now, as at the start of a call, so that
 * the wait sees the writes of a peer restored meanwhile (an owner not
 * there keeps the mapping it had).  The FAILED state and the exit of the
 * process end a wait with CUDA_ERROR_UNKNOWN.
 *
 * Custom storage (driver API 13040, CUDA 13.4; the layouts are in
 * src/lib/gpu/custom.h).  From driver version 13040 cuGetProcAddress()
 * finds cuCheckpointOperationComplete(); cuMemcpyDtoHAsync(),
 * cuMemcpyHtoDAsync(), cuStreamSynchronize(), cuMemHostAlloc() and
 * cuMemFreeHost() are there at any version, as in a real driver.  What
 * NVIDIA documents:
 *   - A checkpoint whose arguments name storage_out, of a LOCKED
 *     process, maps each of its GPUs' memory into the caller and sets
 *     *storage_out to an info (handle, dev[] of {devptr, size, stream},
 *     ndev) that belongs to the driver; the caller copies the memory
 *     out (cuMemcpyDtoHAsync() on the stream) and calls
 *     cuCheckpointOperationComplete(handle), which waits on the streams,
 *     unmaps the memory and ends the operation: the process is then
 *     CHECKPOINTED.
 *   - A restore with storage_out, of a CHECKPOINTED process, maps its
 *     new memory into the caller, who copies in (cuMemcpyHtoDAsync());
 *     after the complete call the process is LOCKED.
 * The stand-in's model, where the documentation says nothing:
 *   - Below 13040 storage_out lies where a 13.0 driver has a reserved
 *     field: the call fails with CUDA_ERROR_INVALID_VALUE and changes
 *     nothing.
 *   - "Memory of a GPU" is the process's memory file of that GPU, whole:
 *     dev[N] is the file mem/UUID/KEY of its Nth context, its size the
 *     file's (an allocation sits at its offset in it, a freed one is a
 *     hole of zeros); a context without memory has devptr 0 and size 0.
 *     The caller maps it read-only (checkpoint) or read-write (restore),
 *     shared with the process.
 *   - The handle and the streams are numbers that are never given
 *     twice; a stream is valid while its operation lives.  The special
 *     streams (NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD) are always
 *     valid; any other: CUDA_ERROR_INVALID_HANDLE.  An async copy is done
 *     at once; its device range must lie inside one mapping of a live
 *     operation of the caller (a copy in: of a restore), else
 *     CUDA_ERROR_INVALID_VALUE, unless it is the caller's own device
 *     memory in its current context.  cuStreamSynchronize() waits for the
 *     copies under way of the stream's operation.
 *   - cuMemHostAlloc() needs a current context (CUDA_ERROR_INVALID_CONTEXT)
 *     and gives whole pages; cuMemFreeHost() needs none, and fails with
 *     CUDA_ERROR_INVALID_VALUE for memory it did not give.
 *   - The process's side: checkpoint-storage (LOCKED, else
 *     CUDA_ERROR_ILLEGAL_STATE) keeps its memory files mapped, records
 *     the operation as pending and writes proc/KEY/storage; it reads
 *     inject/checkpoint, then inject/storage, and sleeps delay/checkpoint
 *     and delay/storage.  inject/storage stands for a process custom
 *     storage does not support (NVIDIA names CUDA IPC, multicast objects
 *     and a job file; the stand-in refuses IPC and jobs itself, see
 *     above, and has no multicast objects), e.g.
 *     CUDA_ERROR_NOT_SUPPORTED.  The complete call then puts reservations
 *     back at the allocations' addresses and removes the memory files,
 *     keeping no copy: the process is CHECKPOINTED "custom", its memory
 *     with the caller.
 *   - restore-storage (CHECKPOINTED, else CUDA_ERROR_ILLEGAL_STATE;
 *     inject/restore, then inject/storage) makes the checks of a restore
 *     (CUDA_ERROR_INVALID_DEVICE, _INVALID_VALUE, _OUT_OF_MEMORY), then
 *     the memory files again, on the (new) GPUs, with the sizes they had
 *     and every allocation at its file offset and address, zero until
 *     the caller copies in; the GPUs move (contexts and visible GPUs) at
 *     once.  The complete call makes it LOCKED.
 *   - A custom checkpoint and a staged one do not mix: a restore without
 *     storage of a process checkpointed custom, and one with storage of
 *     a process checkpointed the staged way (its memory in its heap),
 *     fail with CUDA_ERROR_INVALID_VALUE and change nothing.  Whether a
 *     process is custom, and its pending operation, live in its memory
 *     (fc), so that a process CRIU restores from an image taken after a
 *     custom checkpoint can be restored with storage by a new caller.
 *   - The complete call ends the operation whatever happens: an unknown
 *     or spent handle fails with CUDA_ERROR_INVALID_HANDLE; inject/complete
 *     fails it ("ERRORNAME [FAILED]", "hang") and the operation is
 *     abandoned; an operation the process no longer has fails with
 *     CUDA_ERROR_ILLEGAL_STATE and changes nothing.
 *   - An operation abandoned is as if it had not been: a checkpoint's
 *     memory never left, the process stays LOCKED; a restore's new memory
 *     files go, and the process is CHECKPOINTED as before it, GPUs
 *     included.  An unlock of a process whose checkpoint operation is
 *     pending abandons it (the process goes RUNNING with its memory: the
 *     engine's rollback relies on it), and the caller that unlocks drops
 *     its side of it.  A new checkpoint (restore) of either kind abandons
 *     a pending checkpoint (restore) operation first, even if it then
 *     fails, so that a caller that gave up can start over.  A caller that
 *     cannot map what the process laid out has it abandon the operation.
 *   - A copy that fails (inject/dtoh, inject/htod) changes nothing: the
 *     caller may copy again, complete, or unlock.
 */

#include "config.h"

#include <sys/types.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>

#include "../../src/lib/gpu/custom.h"
#include "gpus.h"

/*
 * cuda.h maps these names to their newer versions; the driver exports
 * the old ones too.
 */
#undef cuDeviceGetUuid
#undef cuGetProcAddress
#undef cuStreamWaitValue32
#undef cuStreamWriteValue32
CUresult CUDAAPI cuDeviceGetUuid(CUuuid *, CUdevice);
CUresult CUDAAPI cuGetProcAddress(const char *, void **, int, cuuint64_t);
CUresult CUDAAPI cuStreamWaitValue32(CUstream, CUdeviceptr, cuuint32_t,
    unsigned int);
CUresult CUDAAPI cuStreamWriteValue32(CUstream, CUdeviceptr, cuuint32_t,
    unsigned int);
/* The driver API of 13040 (CUDA 13.4), which cuda.h 13.0 lacks. */
CUresult CUDAAPI cuCheckpointOperationComplete(void *);

#define MAXCTX		16
#define MAXPAIRS	64
#define STACKDEPTH	16
#define PDIRLEN		(PATH_MAX - 64)	/* proc/KEY, with room for a name */
#define VA_BYTES	((size_t)64 << 30)
#define VA_ALIGN	((uintptr_t)2 << 20)
#define DEF_VERSION	13000
#define CKPT_VERSION	12080		/* the checkpoint API */
#define REMAP_VERSION	13000		/* restore with GPU pairs */
#define STORAGE_VERSION	13040		/* custom storage */
#define JOB_VERSION	13010		/* job files (r590) */
#define JOB_ENV		"CUDA_CHECKPOINT_JOB_FILE"
#define DEF_RELEASE	580
#define IPC_RELEASE	610		/* CUDA IPC in a job */
#define MAXIMP		16
#define IPC_MAGIC	"fakeipc"
#define CALL_TIMEOUT_MS	10000
#define LOCK_SLACK_MS	2000
#define MS		1000000ULL	/* ns */

struct alloc {
	uintptr_t	 va;
	size_t		 len;		/* mapped: req rounded to pages */
	size_t		 req;		/* asked for */
	off_t		 off;		/* in the memory file */
	void		*save;		/* the contents while checkpointed */
	int		 exported;	/* through cuIpcGetMemHandle() */
};

/*
 * Memory of another process opened through cuIpcOpenMemHandle(): its
 * owner KEY and address there, where it is mapped here, and the file
 * and offset it was mapped from (mapped 0: a reservation, as after a
 * checkpoint; mapped again at the next call).
 */
struct imp {
	long		 key;
	uintptr_t	 expva;
	uintptr_t	 va;
	size_t		 len;
	int		 refs;
	int		 mapped;
	dev_t		 dev;
	ino_t		 ino;
	off_t		 off;
};

/*
 * Host memory for an allocation's contents while checkpointed: whole
 * pages of their own, as a driver stages device memory for DMA, so that
 * the same contents make the same pages wherever they land.
 */
static void *
save_new(const struct alloc *a)
{
	void	*p;

	p = mmap(NULL, a->len, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

static void
save_free(struct alloc *a)
{
	if (a->save != NULL)
		munmap(a->save, a->len);
	a->save = NULL;
}

struct CUctx_st {
	int		 used;
	int		 refs;
	struct gpu	 gpu;		/* where it lives now */
	struct alloc	*allocs;	/* sorted by off */
	size_t		 nallocs, allocsz;
	off_t		 fsize;
};

struct pair {
	unsigned char	 from[16], to[16];
};

/* A process's custom storage operation (fc.op). */
enum {
	OP_NONE,
	OP_CKPT,			/* mapped out, LOCKED */
	OP_RESTORE			/* mapped in, CHECKPOINTED */
};

/*
 * The caller's side of a custom storage operation: the info it gave,
 * the mappings dev[] describes, and the handle and streams, numbers
 * that are never given twice (hid, and hid with the GPU's index).
 */
struct op {
	struct op		*next;
	int			 pid;		/* as the caller sees it */
	int			 restore;
	unsigned long long	 id;		/* the process's fc.opid */
	uintptr_t		 hid;
	int			 busy;		/* copies under way */
	struct gck_cu_storage	 info;
	struct gck_cu_storage_dev dev[MAXCTX];
};

#define HID_SHIFT	8		/* a handle's stream numbers */

struct inject {
	CUresult	 r;
	int		 failed;
	int		 hang;
};

static const struct cuerr {
	CUresult	 code;
	const char	*name;
	const char	*text;
} cuerrs[] = {
#define E(c, t)	{ c, #c, t }
	E(CUDA_SUCCESS, "no error"),
	E(CUDA_ERROR_INVALID_VALUE, "invalid argument"),
	E(CUDA_ERROR_OUT_OF_MEMORY, "out of memory"),
	E(CUDA_ERROR_NOT_INITIALIZED, "initialization error"),
	E(CUDA_ERROR_DEINITIALIZED, "driver shutting down"),
	E(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected"),
	E(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal"),
	E(CUDA_ERROR_DEVICE_UNAVAILABLE,
	    "CUDA-capable device(s) is/are busy or unavailable"),
	E(CUDA_ERROR_INVALID_CONTEXT, "invalid device context"),
	E(CUDA_ERROR_ECC_UNCORRECTABLE, "uncorrectable ECC error encountered"),
	E(CUDA_ERROR_OPERATING_SYSTEM,
	    "OS call failed or operation not supported on this OS"),
	E(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle"),
	E(CUDA_ERROR_ILLEGAL_STATE,
	    "the operation cannot be performed in the present state"),
	E(CUDA_ERROR_NOT_FOUND, "named symbol not found"),
	E(CUDA_ERROR_NOT_READY, "device not ready"),
	E(CUDA_ERROR_ILLEGAL_ADDRESS,
	    "an illegal memory access was encountered"),
	E(CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure"),
	E(CUDA_ERROR_NOT_PERMITTED, "operation not permitted"),
	E(CUDA_ERROR_NOT_SUPPORTED, "operation not supported"),
	E(CUDA_ERROR_SYSTEM_NOT_READY, "system not yet initialized"),
	E(CUDA_ERROR_TIMEOUT, "wait operation timed out"),
	E(CUDA_ERROR_UNKNOWN, "unknown error"),
#undef E
};

static const char *const state_words[] = {
	"RUNNING", "LOCKED", "CHECKPOINTED", "FAILED"
};

static int		 msleep(unsigned int);
static uint64_t		 now_ns(void);
static int		 gpu_get(int, const unsigned char *, struct gpu *);
static int		 vis_entry(const char *, unsigned char *);
static int		 vis_parse(const char *);
static CUresult		 vis_remap(const struct pair *, size_t,
			    unsigned char (*)[16]);
static int		 dev_count(void);
static int		 dev_gpu(int, struct gpu *);
static int		 dev_ordinal(const unsigned char *);
static int		 driver_read(const char *, int, int);
static const char	*fake_dir(void);
static int		 driver_version(void);
static unsigned long long mem_used(const char *, const char *);
static int		 mkdirs(const char *, ...)
			    __attribute__((__format__(__printf__, 1, 2)));
static int		 write_atomic(const char *, const char *, const char *);
static int		 read_small(const char *, char *, size_t);
static int		 pid_stopped(pid_t);
static int		 state_in_memory(int, const char *, CUprocessState *);
static const struct cuerr *err_lookup(CUresult);
static CUresult		 err_byname(const char *);
static const char	*err_name(CUresult);
static int		 ready(void);
static CUresult		 enter(void);
static void		 leave(void);
static struct CUctx_st	*cur_ctx(void);
static int		 ctx_valid(CUcontext);
static int		 mem_path(char *, size_t, const struct gpu *);
static int		 unmap_to_reserve(uintptr_t, size_t);
static void		 ctx_unmap(struct CUctx_st *);
static void		 ctx_destroy(struct CUctx_st *);
static struct alloc	*alloc_find(uintptr_t, size_t);
static size_t		 va_room(size_t);
static int		 ipc_used(void);
static int		 ipc_path(char *, size_t, long, uintptr_t);
static int		 ipc_read(long, uintptr_t, char *, size_t, long long *,
			    unsigned long *);
static int		 ipc_publish(const struct CUctx_st *,
			    const struct alloc *);
static void		 ipc_publish_all(void);
static CUresult		 imp_map(struct imp *);
static CUresult		 imp_sync(void);
static void		 imp_unmap_all(void);
static struct imp	*imp_find(uintptr_t, size_t);
static int		 driver_release(void);
static void		 state_set(CUprocessState);
static void		 proc_files(void);
static void		 cond_wait_until(uint64_t);
static struct inject	 inject_read(const char *);
static void		 delay_read(const char *);
static void		 log_action(const char *, uint64_t, uint64_t, CUresult,
			    const char *);
static CUresult		 act_hang(uint64_t);
static int		 act_begin(const char *, const char *, CUprocessState,
			    uint64_t, CUresult *);
static CUresult		 act_lock(unsigned int, uint64_t);
static CUresult		 act_checkpoint(uint64_t);
static CUresult		 act_restore(const struct pair *, size_t, uint64_t);
static CUresult		 act_unlock(uint64_t);
static struct inject	 inject_first(const char *, const char *);
static CUresult		 restore_plan(const struct pair *, size_t, int,
			    struct gpu *, unsigned long long *,
			    unsigned char (*)[16]);
static int		 storage_write(void);
static void		 storage_unlink(void);
static void		 op_abandon(void);
static CUresult		 act_checkpoint_storage(uint64_t);
static CUresult		 act_restore_storage(const struct pair *, size_t,
			    uint64_t);
static CUresult		 act_complete(const char *, int, uint64_t);
static CUresult		 op_map(int, int, unsigned long long *,
			    struct op **);
static void		 op_free(struct op *);
static struct op	*op_take(uintptr_t);
static void		 op_drop_pid(int);
static CUresult		 op_start(int, const char *, const char *, int,
			    struct gck_cu_storage **);
static int		 stream_valid(CUstream, struct op **);
static struct op	*op_holding(uintptr_t, size_t, int);
static CUresult		 copy_inject(const char *);
static CUresult		 async_copy(void *, uintptr_t, size_t, CUstream,
			    int);
static int		 pairs_parse(char *, struct pair *, size_t *);
static void		 request_handle(const char *);
static void		*restore_thread(void *);
static CUresult		 tool_check(int, char *, size_t);
static pid_t		 task_outer(int, pid_t);
static CUresult		 tool_call(int, const char *, const char *,
			    unsigned long);
static unsigned long	 call_timeout(void);
static CUresult		 getproc(const char *, void **, int,
			    CUdriverProcAddressQueryResult *);
static void		 fakecuda_fini(void) __attribute__((destructor));

/*
 * The process's side.  mtx guards state, locking, active and exiting;
 * api serializes the bodies of application calls, which run only while
 * the state is RUNNING, and the restore thread changes contexts and
 * mappings only once no call is active.
 */
static struct {
	pthread_mutex_t	 mtx;
	pthread_cond_t	 cv;
	pthread_mutex_t	 api;
	int		 inited;
	pid_t		 pid;
	pid_t		 tid;
	char		*dir;
	CUprocessState	 state;
	int		 locking;
	int		 active;
	int		 exiting;
	uintptr_t	 va_next, va_end;
	struct CUctx_st	 ctx[MAXCTX];
	int		 masked;	/* CUDA_VISIBLE_DEVICES was set */
	int		 nvis;
	unsigned char	 vis[MAXGPUS][16];	/* device N is vis[N] */
	int		 op;		/* OP_*: the pending operation */
	unsigned long long opid;
	int		 custom;	/* checkpointed to custom storage */
	char		 job[64];	/* its job's ID, or "" */
	struct imp	 imp[MAXIMP];	/* memory of others, through IPC */
	size_t		 nimp;
	struct gpu	 opgpu[MAXCTX];	/* a pending restore's old GPUs */
	unsigned char	 opvis[MAXGPUS][16];	/* and visible GPUs */
} fc = {
	.mtx = PTHREAD_MUTEX_INITIALIZER,
	.api = PTHREAD_MUTEX_INITIALIZER,
};

/*
 * The caller's side: its custom storage operations, and the host
 * memory cuMemHostAlloc() gave.
 */
static struct {
	pthread_mutex_t	 mtx;
	pthread_cond_t	 cv;
	struct op	*list;
	uintptr_t	 hid;
	struct hostmem {
		void	*p;
		size_t	 len;
	}		*host;
	size_t		 nhost, hostsz;
} ops = {
	.mtx = PTHREAD_MUTEX_INITIALIZER,
	.cv = PTHREAD_COND_INITIALIZER,
};

static _Thread_local struct CUctx_st	*ctxstack[STACKDEPTH];
static _Thread_local int		 ctxdepth;
static atomic_uint			 callseq;

static int
msleep(unsigned int ms)
{
	struct timespec	ts;

	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (long)(ms % 1000) * 1000000L;
	return nanosleep(&ts, NULL);
}

static uint64_t
now_ns(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Returns 1 if pid is stopped (by a signal or a tracer). */
static int
pid_stopped(pid_t pid)
{
	char	path[64], buf[512], *p;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if (read_small(path, buf, sizeof buf) == -1 ||
	    (p = strrchr(buf, ')')) == NULL)
		return 0;
	return p[1] == ' ' && (p[2] == 'T' || p[2] == 't');
}

/* The GPU of that ordinal, or with that UUID: returns its ordinal or -1. */
static int
gpu_get(int ordinal, const unsigned char *uuid, struct gpu *g)
{
	int	ord;

	gpus_scan(fc.dir, ordinal, uuid, g, &ord);
	return ord;
}

/*
 * One entry of CUDA_VISIBLE_DEVICES, blanks around it ignored: an
 * ordinal of gpus (its leading digits), or "GPU-" and the start of one
 * GPU's UUID only.  Fills uuid; -1 when the entry names no GPU.
 */
static int
vis_entry(const char *w, unsigned char *uuid)
{
	struct gpu	 g, cur;
	unsigned long	 n;
	size_t		 len;
	char		*e;
	int		 i, count, found = 0;

	while (*w == ' ' || *w == '\t')
		w++;
	len = strlen(w);
	while (len > 0 && (w[len - 1] == ' ' || w[len - 1] == '\t'))
		len--;
	if (*w >= '0' && *w <= '9') {
		errno = 0;
		n = strtoul(w, &e, 10);
		if (errno != 0 || n >= MAXGPUS ||
		    gpu_get((int)n, NULL, &g) == -1)
			return -1;
		memcpy(uuid, g.uuid, 16);
		return 0;
	}
	if (len < 4 || len >= UUIDLEN || strncmp(w, "GPU-", 4) != 0)
		return -1;
	count = gpus_scan(fc.dir, -1, NULL, NULL, NULL);
	for (i = 0; i < count; i++) {
		if (gpu_get(i, NULL, &cur) == -1 ||
		    strncasecmp(cur.uuidstr, w, len) != 0)
			continue;
		g = cur;
		found++;
	}
	if (found != 1)
		return -1;
	memcpy(uuid, g.uuid, 16);
	return 0;
}

/*
 * Reads CUDA_VISIBLE_DEVICES into fc.vis, up to its first entry that
 * names no GPU, and returns how many GPUs it names; 0 when one is named
 * twice.
 */
static int
vis_parse(const char *s)
{
	unsigned char	u[16];
	char		buf[256];
	size_t		len;
	int		i, n = 0;

	for (;;) {
		len = strcspn(s, ",");
		if (len >= sizeof buf)
			break;
		memcpy(buf, s, len);
		buf[len] = '\0';
		if (vis_entry(buf, u) == -1)
			break;
		for (i = 0; i < n; i++)
			if (memcmp(fc.vis[i], u, 16) == 0)
				return 0;
		if (n == MAXGPUS)
			break;
		memcpy(fc.vis[n++], u, 16);
		if (s[len] == '\0')
			break;
		s += len + 1;
	}
	return n;
}

/*
 * The visible GPUs after a restore with these pairs, into to: each
 * that a pair names becomes the pair's GPU, which must be in gpus, and
 * no GPU may be there twice.
 */
static CUresult
vis_remap(const struct pair *pairs, size_t npairs, unsigned char (*to)[16])
{
	struct gpu	g;
	size_t		j;
	int		i, k;

	for (i = 0; i < fc.nvis; i++) {
		memcpy(to[i], fc.vis[i], 16);
		for (j = 0; j < npairs; j++)
			if (memcmp(pairs[j].from, fc.vis[i], 16) == 0)
				break;
		if (j == npairs)
			continue;
		memcpy(to[i], pairs[j].to, 16);
		if (gpu_get(-1, to[i], &g) == -1)
			return CUDA_ERROR_INVALID_DEVICE;
	}
	for (i = 0; i < fc.nvis; i++)
		for (k = 0; k < i; k++)
			if (memcmp(to[i], to[k], 16) == 0)
				return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

/* How many devices the process sees. */
static int
dev_count(void)
{
	return fc.masked ? fc.nvis : gpus_scan(fc.dir, -1, NULL, NULL, NULL);
}

/* The GPU that is the process's device dev: 0, or -1 if there is none. */
static int
dev_gpu(int dev, struct gpu *g)
{
	if (!fc.masked)
		return gpu_get(dev, NULL, g) == -1 ? -1 : 0;
	if (dev < 0 || dev >= fc.nvis)
		return -1;
	return gpu_get(-1, fc.vis[dev], g) == -1 ? -1 : 0;
}

/* The process's device that is the GPU with that UUID, or -1. */
static int
dev_ordinal(const unsigned char *uuid)
{
	struct gpu	g;
	int		i, ord;

	if ((ord = gpu_get(-1, uuid, &g)) == -1 || !fc.masked)
		return ord;
	for (i = 0; i < fc.nvis; i++)
		if (memcmp(fc.vis[i], uuid, 16) == 0)
			return i;
	return -1;
}

/*
 * The number word (0 or 1) of dir/driver starts with: the driver's CUDA
 * version, or its release's major number; else def.
 */
static int
driver_read(const char *dir, int word, int def)
{
	char	 path[PATH_MAX], buf[256], *p = buf, *v = NULL, *e;
	long	 n;
	int	 i;

	if (dir == NULL)
		return def;
	snprintf(path, sizeof path, "%s/driver", dir);
	if (read_small(path, buf, sizeof buf) == -1)
		return def;
	for (i = 0; i <= word; i++)
		if ((v = next_word(&p)) == NULL)
			return def;
	n = strtol(v, &e, 10);
	return (*e == '\0' || (word == 1 && *e == '.')) && n > 0 &&
	    n < INT_MAX ? (int)n : def;
}

static const char *
fake_dir(void)
{
	const char	*d;

	if (fc.inited)
		return fc.dir;
	d = getenv("FAKECUDA_DIR");
	return d != NULL && *d != '\0' ? d : NULL;
}

static int
driver_version(void)
{
	return driver_read(fake_dir(), 0, DEF_VERSION);
}

static int
driver_release(void)
{
	return driver_read(fake_dir(), 1, DEF_RELEASE);
}

/*
 * The memory in use on a GPU: the sizes of the files in mem/UUID/ of
 * the processes still alive (a killed process frees its memory), as far
 * as this process can see them.
 */
static unsigned long long
mem_used(const char *dir, const char *uuidstr)
{
	struct dirent		*de;
	struct stat		 st;
	char			 path[PATH_MAX], *e;
	unsigned long long	 used = 0;
	DIR			*d;
	long			 pid;

	snprintf(path, sizeof path, "%s/mem/%s", dir, uuidstr);
	if ((d = opendir(path)) == NULL)
		return 0;
	while ((de = readdir(d)) != NULL) {
		pid = strtol(de->d_name, &e, 10);
		if (*e != '\0' || pid <= 0 || pid > INT_MAX ||
		    snprintf(path, sizeof path, "%s/mem/%s/%s", dir, uuidstr,
		    de->d_name) >= (int)sizeof path ||
		    mem_holder(path, (pid_t)pid) == -1)
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, 0) == 0)
			used += (unsigned long long)st.st_size;
	}
	closedir(d);
	return used;
}

/* Creates the directory the format names, and its parents. */
static int
mkdirs(const char *fmt, ...)
{
	char	path[PATH_MAX], *p;
	va_list	ap;
	int	n;

	va_start(ap, fmt);
	n = vsnprintf(path, sizeof path, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof path)
		return -1;
	for (p = path + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, 0755) == -1 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (mkdir(path, 0755) == -1 && errno != EEXIST)
		return -1;
	return 0;
}

/* Writes path.tmp-suffix and renames it to path. */
static int
write_atomic(const char *path, const char *suffix, const char *text)
{
	char	tmp[PATH_MAX];
	size_t	len = strlen(text);
	int	fd, r = -1;

	snprintf(tmp, sizeof tmp, "%s.tmp%s", path, suffix);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	    0644)) == -1)
		return -1;
	if (write(fd, text, len) == (ssize_t)len)
		r = 0;
	if (close(fd) == -1)
		r = -1;
	if (r == 0 && rename(tmp, path) == -1)
		r = -1;
	if (r == -1)
		unlink(tmp);
	return r;
}

/* Reads a small file whole, NUL-terminated. */
static int
read_small(const char *path, char *buf, size_t len)
{
	ssize_t	n;
	int	fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return 0;
}

static const struct cuerr *
err_lookup(CUresult r)
{
	size_t	i;

	for (i = 0; i < sizeof cuerrs / sizeof cuerrs[0]; i++)
		if (cuerrs[i].code == r)
			return &cuerrs[i];
	return NULL;
}

/* A name that is not known reads as CUDA_ERROR_UNKNOWN. */
static CUresult
err_byname(const char *name)
{
	size_t	i;

	for (i = 0; i < sizeof cuerrs / sizeof cuerrs[0]; i++)
		if (strcmp(cuerrs[i].name, name) == 0)
			return cuerrs[i].code;
	return CUDA_ERROR_UNKNOWN;
}

static const char *
err_name(CUresult r)
{
	const struct cuerr	*e = err_lookup(r);

	return e != NULL ? e->name : "CUDA_ERROR_UNKNOWN";
}

/* The driver is initialized in this process (not in a forked copy). */
static int
ready(void)
{
	return fc.inited && fc.pid == getpid();
}

/*
 * Every application call starts here: it waits while the process is
 * locked or checkpointed, and fails at once in the FAILED state.
 */
static CUresult
enter(void)
{
	CUresult	r = CUDA_SUCCESS;

	if (!ready())
		return CUDA_ERROR_NOT_INITIALIZED;
	pthread_mutex_lock(&fc.mtx);
	while (fc.state != CU_PROCESS_STATE_FAILED &&
	    (fc.state != CU_PROCESS_STATE_RUNNING || fc.locking))
		pthread_cond_wait(&fc.cv, &fc.mtx);
	if (fc.state == CU_PROCESS_STATE_FAILED)
		r = CUDA_ERROR_UNKNOWN;
	else
		fc.active++;
	pthread_mutex_unlock(&fc.mtx);
	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&fc.api);
	if (fc.nimp > 0 && (r = imp_sync()) != CUDA_SUCCESS)
		leave();
	return r;
}

static void
leave(void)
{
	pthread_mutex_unlock(&fc.api);
	pthread_mutex_lock(&fc.mtx);
	if (--fc.active == 0)
		pthread_cond_broadcast(&fc.cv);
	pthread_mutex_unlock(&fc.mtx);
}

static int
ctx_valid(CUcontext c)
{
	return c >= &fc.ctx[0] && c < &fc.ctx[MAXCTX] && c->used;
}

static struct CUctx_st *
cur_ctx(void)
{
	if (ctxdepth == 0 || !ctx_valid(ctxstack[ctxdepth - 1]))
		return NULL;
	return ctxstack[ctxdepth - 1];
}

static int
mem_path(char *path, size_t len, const struct gpu *g)
{
	int	n;

	n = snprintf(path, len, "%s/mem/%s/%ld", fc.dir, g->uuidstr,
	    (long)fc.pid);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

static int
unmap_to_reserve(uintptr_t va, size_t len)
{
	if (mmap((void *)va, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS |
	    MAP_FIXED | MAP_NORESERVE, -1, 0) == MAP_FAILED)
		return -1;
	return 0;
}

/*
 * Takes a context's memory away from the process: its addresses go back
 * to an inaccessible reservation and its memory file is removed.
 */
static void
ctx_unmap(struct CUctx_st *c)
{
	char	path[PATH_MAX];
	size_t	i;

	for (i = 0; i < c->nallocs; i++)
		unmap_to_reserve(c->allocs[i].va, c->allocs[i].len);
	if (mem_path(path, sizeof path, &c->gpu) == 0)
		unlink(path);
}

/* Frees a context's memory and its file. */
static void
ctx_destroy(struct CUctx_st *c)
{
	size_t	i;

	ctx_unmap(c);
	for (i = 0; i < c->nallocs; i++)
		save_free(&c->allocs[i]);
	free(c->allocs);
	memset(c, 0, sizeof *c);
}

/* The allocation that holds [p, p + n), in any context. */
static struct alloc *
alloc_find(uintptr_t p, size_t n)
{
	struct alloc	*a;
	size_t		 i, k;

	for (k = 0; k < MAXCTX; k++) {
		if (!fc.ctx[k].used)
			continue;
		for (i = 0; i < fc.ctx[k].nallocs; i++) {
			a = &fc.ctx[k].allocs[i];
			if (p >= a->va && p - a->va <= a->req &&
			    n <= a->req - (p - a->va))
				return a;
		}
	}
	return NULL;
}

/*
 * The addresses len bytes take at fc.va_next, 2 MiB aligned, or 0 where
 * the range reserved has no room for them.
 */
static size_t
va_room(size_t len)
{
	size_t	span = (len + VA_ALIGN - 1) & ~(VA_ALIGN - 1);

	return span > fc.va_end - fc.va_next ? 0 : span;
}

/*
 * CUDA IPC.  An exported allocation is published as ipc/KEY-VA (VA in
 * hex): "UUID OFFSET LENGTH", where its memory is now, rewritten by a
 * restore; the handle names KEY and VA.  An importer maps that part of
 * the owner's memory file shared, and maps it again at its next call
 * whenever the file is not the one it mapped (the owner was restored)
 * or it unmapped it (its own checkpoint), waiting for an owner not yet
 * restored.
 */
static int
ipc_used(void)
{
	size_t	i, k;

	if (fc.nimp > 0)
		return 1;
	for (k = 0; k < MAXCTX; k++)
		for (i = 0; fc.ctx[k].used && i < fc.ctx[k].nallocs; i++)
			if (fc.ctx[k].allocs[i].exported)
				return 1;
	return 0;
}

static int
ipc_path(char *path, size_t len, long key, uintptr_t va)
{
	int	n;

	n = snprintf(path, len, "%s/ipc/%ld-%lx", fc.dir, key,
	    (unsigned long)va);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

static int
ipc_publish(const struct CUctx_st *c, const struct alloc *a)
{
	char	path[PATH_MAX], text[128];

	snprintf(text, sizeof text, "%s %lld %zu\n", c->gpu.uuidstr,
	    (long long)a->off, a->req);
	if (mkdirs("%s/ipc", fc.dir) == -1 ||
	    ipc_path(path, sizeof path, (long)fc.pid, a->va) == -1)
		return -1;
	return write_atomic(path, "", text);
}

/* After a restore: where each exported allocation is now. */
static void
ipc_publish_all(void)
{
	size_t	i, k;

	for (k = 0; k < MAXCTX; k++)
		for (i = 0; fc.ctx[k].used && i < fc.ctx[k].nallocs; i++)
			if (fc.ctx[k].allocs[i].exported)
				(void)ipc_publish(&fc.ctx[k],
				    &fc.ctx[k].allocs[i]);
}

/*
 * What ipc/KEY-VA says: the UUID of the GPU, the offset in the owner's
 * memory file and the length.  Returns 0, -1 where it is not there, or
 * -2 where it is not such a line.
 */
static int
ipc_read(long key, uintptr_t va, char *uuid, size_t ulen, long long *offp,
    unsigned long *lenp)
{
	char	path[PATH_MAX], buf[256], *p = buf, *u, *w, *e;

	if (ipc_path(path, sizeof path, key, va) == -1 ||
	    read_small(path, buf, sizeof buf) == -1)
		return -1;
	if ((u = next_word(&p)) == NULL || strlen(u) >= ulen ||
	    (w = next_word(&p)) == NULL ||
	    (*offp = strtoll(w, &e, 10)) < 0 || *e != '\0' ||
	    (w = next_word(&p)) == NULL ||
	    (*lenp = strtoul(w, &e, 10)) == 0 || *e != '\0')
		return -2;
	snprintf(uuid, ulen, "%s", u);
	return 0;
}

/*
 * Maps import m where its owner's memory is now, unless it is mapped
 * there already.  CUDA_ERROR_NOT_FOUND: the owner's memory is not there
 * (yet).
 */
static CUresult
imp_map(struct imp *m)
{
	struct stat	 st;
	char		 path[PATH_MAX], uuid[64];
	long long	 off;
	unsigned long	 len;
	int		 fd;

	switch (ipc_read(m->key, m->expva, uuid, sizeof uuid, &off, &len)) {
	case -1:
		return CUDA_ERROR_NOT_FOUND;
	case -2:
		return CUDA_ERROR_INVALID_HANDLE;
	}
	if (len < m->len)
		return CUDA_ERROR_INVALID_HANDLE;
	snprintf(path, sizeof path, "%s/mem/%s/%ld", fc.dir, uuid, m->key);
	if ((fd = open(path, O_RDWR | O_CLOEXEC)) == -1)
		return CUDA_ERROR_NOT_FOUND;
	if (fstat(fd, &st) == -1) {
		close(fd);
		return CUDA_ERROR_OPERATING_SYSTEM;
	}
	if (m->mapped && st.st_dev == m->dev && st.st_ino == m->ino &&
	    (off_t)off == m->off) {
		close(fd);
		return CUDA_SUCCESS;
	}
	if (mmap((void *)m->va, m->len, PROT_READ | PROT_WRITE, MAP_SHARED |
	    MAP_FIXED, fd, (off_t)off) == MAP_FAILED) {
		close(fd);
		return CUDA_ERROR_OPERATING_SYSTEM;
	}
	close(fd);
	m->mapped = 1;
	m->dev = st.st_dev;
	m->ino = st.st_ino;
	m->off = (off_t)off;
	return CUDA_SUCCESS;
}

/*
 * Every import where its owner's memory is, at the start of a call;
 * an owner not back within the call timeout: CUDA_ERROR_ILLEGAL_ADDRESS.
 */
static CUresult
imp_sync(void)
{
	unsigned long	waited;
	CUresult	r;
	size_t		i;

	for (i = 0; i < fc.nimp; i++) {
		waited = 0;
		while ((r = imp_map(&fc.imp[i])) == CUDA_ERROR_NOT_FOUND &&
		    waited++ < call_timeout())
			msleep(1);
		if (r == CUDA_ERROR_NOT_FOUND)
			return CUDA_ERROR_ILLEGAL_ADDRESS;
		if (r != CUDA_SUCCESS)
			return r;
	}
	return CUDA_SUCCESS;
}

/* A checkpoint: the imports become reservations, the owners' files go. */
static void
imp_unmap_all(void)
{
	size_t	i;

	for (i = 0; i < fc.nimp; i++)
		if (fc.imp[i].mapped) {
			unmap_to_reserve(fc.imp[i].va, fc.imp[i].len);
			fc.imp[i].mapped = 0;
		}
}

/* The import that holds [p, p + n). */
static struct imp *
imp_find(uintptr_t p, size_t n)
{
	size_t	i;

	for (i = 0; i < fc.nimp; i++)
		if (p >= fc.imp[i].va && p - fc.imp[i].va <= fc.imp[i].len &&
		    n <= fc.imp[i].len - (p - fc.imp[i].va))
			return &fc.imp[i];
	return NULL;
}

/* Called with mtx held. */
static void
state_set(CUprocessState s)
{
	char	path[PATH_MAX], text[32];

	fc.state = s;
	pthread_cond_broadcast(&fc.cv);
	if (fc.exiting)
		return;
	snprintf(path, sizeof path, "%s/proc/%ld/state", fc.dir,
	    (long)fc.pid);
	snprintf(text, sizeof text, "%s\n", state_words[s]);
	write_atomic(path, "", text);
}

/* (Re)creates proc/KEY/ with its state and tid; called with mtx held. */
static void
proc_files(void)
{
	char	path[PATH_MAX], text[32];

	if (fc.exiting)
		return;
	mkdirs("%s/proc/%ld", fc.dir, (long)fc.pid);
	mkdirs("%s/mem", fc.dir);
	snprintf(path, sizeof path, "%s/proc/%ld/tid", fc.dir, (long)fc.pid);
	snprintf(text, sizeof text, "%ld\n", (long)fc.tid);
	write_atomic(path, "", text);
	snprintf(path, sizeof path, "%s/proc/%ld/statep", fc.dir,
	    (long)fc.pid);
	snprintf(text, sizeof text, "%lx\n", (unsigned long)&fc.state);
	write_atomic(path, "", text);
	state_set(fc.state);
}

/* Waits on cv with mtx held until the monotonic time ns (0: forever). */
static void
cond_wait_until(uint64_t ns)
{
	struct timespec	ts;

	if (ns == 0) {
		pthread_cond_wait(&fc.cv, &fc.mtx);
		return;
	}
	ts.tv_sec = (time_t)(ns / 1000000000ULL);
	ts.tv_nsec = (long)(ns % 1000000000ULL);
	pthread_cond_timedwait(&fc.cv, &fc.mtx, &ts);
}

/*
 * inject/ACTION.KEY, else inject/ACTION: "ERRORNAME [FAILED]" or
 * "hang".  Read when the action runs.
 */
static struct inject
inject_read(const char *action)
{
	struct inject	 in = { CUDA_SUCCESS, 0, 0 };
	char		 path[PATH_MAX], buf[256], *p = buf, *w;

	snprintf(path, sizeof path, "%s/inject/%s.%ld", fc.dir, action,
	    (long)fc.pid);
	if (read_small(path, buf, sizeof buf) == -1) {
		snprintf(path, sizeof path, "%s/inject/%s", fc.dir, action);
		if (read_small(path, buf, sizeof buf) == -1)
			return in;
	}
	if ((w = next_word(&p)) == NULL)
		return in;
	if (strcmp(w, "hang") == 0) {
		in.hang = 1;
		return in;
	}
	in.r = err_byname(w);
	if (in.r == CUDA_SUCCESS)
		in.r = CUDA_ERROR_UNKNOWN;
	while ((w = next_word(&p)) != NULL)
		if (strcmp(w, "FAILED") == 0)
			in.failed = 1;
	return in;
}

/* delay/ACTION: milliseconds to sleep before the action's work. */
static void
delay_read(const char *action)
{
	char		 path[PATH_MAX], buf[64];
	unsigned long	 ms;
	uint64_t	 until;

	snprintf(path, sizeof path, "%s/delay/%s", fc.dir, action);
	if (read_small(path, buf, sizeof buf) == -1)
		return;
	if ((ms = strtoul(buf, NULL, 10)) == 0)
		return;
	until = now_ns() + ms * MS;
	while (now_ns() < until)
		msleep(1);
}

/* One line, one write(2): ACTION KEY START END RESULT STATE [EXTRA]. */
static void
log_action(const char *action, uint64_t start, uint64_t end, CUresult r,
    const char *extra)
{
	char	path[PATH_MAX], line[8192];
	int	fd, n;

	snprintf(path, sizeof path, "%s/log", fc.dir);
	n = snprintf(line, sizeof line, "%s %ld %llu %llu %s %s%s%s\n", action,
	    (long)fc.pid, (unsigned long long)start, (unsigned long long)end,
	    err_name(r), state_words[fc.state], *extra ? " " : "", extra);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof line) {
		n = sizeof line - 1;
		line[n - 1] = '\n';
	}
	if ((fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
	    0644)) == -1)
		return;
	if (write(fd, line, (size_t)n) != n) {
		/* The log is for the tests to read: nothing to do. */
	}
	close(fd);
}

/* An injected hang: nothing happens until the caller has given up. */
static CUresult
act_hang(uint64_t deadline)
{
	while (deadline == 0 || now_ns() <= deadline)
		cond_wait_until(deadline);
	return CUDA_ERROR_TIMEOUT;
}

/*
 * RUNNING -> LOCKED: new calls wait from now on; the calls in progress
 * must end within timeout_ms (0: until the caller gives up), else the
 * process stays RUNNING and the answer is CUDA_ERROR_NOT_READY.
 */
static CUresult
act_lock(unsigned int timeout_ms, uint64_t deadline)
{
	struct inject	in;
	uint64_t	until;
	CUresult	r;

	delay_read("lock");
	pthread_mutex_lock(&fc.mtx);
	if (fc.state != CU_PROCESS_STATE_RUNNING) {
		r = CUDA_ERROR_ILLEGAL_STATE;
		goto out;
	}
	/*
	 * Memory shared through CUDA IPC: only in a job, from r610 (the
	 * real driver's code for this is not documented; this is ours).
	 */
	if (ipc_used() && (fc.job[0] == '\0' ||
	    driver_release() < IPC_RELEASE)) {
		r = CUDA_ERROR_NOT_SUPPORTED;
		goto out;
	}
	in = inject_read("lock");
	if (in.r != CUDA_SUCCESS) {
		if (in.failed)
			state_set(CU_PROCESS_STATE_FAILED);
		r = in.r;
		goto out;
	}
	until = timeout_ms != 0 ? now_ns() + timeout_ms * MS : deadline;
	fc.locking = 1;
	while (in.hang || fc.active > 0) {
		if (until != 0 && now_ns() >= until)
			break;
		cond_wait_until(until);
	}
	fc.locking = 0;
	if (in.hang || fc.active > 0) {
		pthread_cond_broadcast(&fc.cv);
		r = CUDA_ERROR_NOT_READY;
		goto out;
	}
	state_set(CU_PROCESS_STATE_LOCKED);
	r = CUDA_SUCCESS;
out:
	pthread_mutex_unlock(&fc.mtx);
	return r;
}

/*
 * How an action in the process starts: its delays (delay/A, then
 * delay/B; B may be NULL), mtx taken, the state it must find, and what
 * inject/A (else inject/B) says.  Returns 1 for the action to go on, or
 * 0 with *rp its result; mtx is held either way.
 */
static int
act_begin(const char *a, const char *b, CUprocessState from,
    uint64_t deadline, CUresult *rp)
{
	struct inject	in;

	delay_read(a);
	if (b != NULL)
		delay_read(b);
	pthread_mutex_lock(&fc.mtx);
	if (fc.state != from) {
		*rp = CUDA_ERROR_ILLEGAL_STATE;
		return 0;
	}
	in = b != NULL ? inject_first(a, b) : inject_read(a);
	if (in.hang) {
		*rp = act_hang(deadline);
		return 0;
	}
	if (in.r != CUDA_SUCCESS) {
		if (in.failed)
			state_set(CU_PROCESS_STATE_FAILED);
		*rp = in.r;
		return 0;
	}
	return 1;
}

/*
 * LOCKED -> CHECKPOINTED: every allocation is copied to the heap, its
 * addresses go back to an inaccessible reservation and the memory file
 * is removed, which releases the GPU.
 */
static CUresult
act_checkpoint(uint64_t deadline)
{
	struct CUctx_st	*c;
	struct alloc	*a;
	CUresult	 r;
	size_t		 i, k;

	if (!act_begin("checkpoint", NULL, CU_PROCESS_STATE_LOCKED,
	    deadline, &r))
		goto out;
	if (fc.op == OP_CKPT)
		op_abandon();
	for (k = 0; k < MAXCTX; k++) {
		c = &fc.ctx[k];
		for (i = 0; c->used && i < c->nallocs; i++) {
			a = &c->allocs[i];
			if ((a->save = save_new(a)) == NULL) {
				r = CUDA_ERROR_OUT_OF_MEMORY;
				goto undo;
			}
			memcpy(a->save, (void *)a->va, a->req);
		}
	}
	for (k = 0; k < MAXCTX; k++) {
		c = &fc.ctx[k];
		if (!c->used)
			continue;
		ctx_unmap(c);
		c->fsize = 0;
	}
	imp_unmap_all();
	state_set(CU_PROCESS_STATE_CHECKPOINTED);
	r = CUDA_SUCCESS;
	goto out;
undo:
	for (k = 0; k < MAXCTX; k++)
		for (i = 0; fc.ctx[k].used && i < fc.ctx[k].nallocs; i++) {
			save_free(&fc.ctx[k].allocs[i]);
		}
out:
	pthread_mutex_unlock(&fc.mtx);
	return r;
}

/*
 * Where a restore puts each context (to) and how much memory it needs
 * there (need), with the visible GPUs it leaves (vis).  Each GPU the
 * process had goes to its pair's new GPU when pairs are given (all of
 * its GPUs must be named), else to itself; a custom one needs its
 * memory file's size as the checkpoint described it, a staged one its
 * allocations.  Called with mtx held; changes nothing.
 */
static CUresult
restore_plan(const struct pair *pairs, size_t npairs, int custom,
    struct gpu *to, unsigned long long *need, unsigned char (*vis)[16])
{
	struct CUctx_st	*c;
	size_t		 i, j, k;

	for (k = 0; k < MAXCTX; k++) {
		c = &fc.ctx[k];
		if (!c->used)
			continue;
		memcpy(to[k].uuid, c->gpu.uuid, 16);
		if (npairs > 0) {
			for (j = 0; j < npairs; j++)
				if (memcmp(pairs[j].from, c->gpu.uuid, 16) == 0)
					break;
			if (j == npairs)
				return CUDA_ERROR_INVALID_VALUE;
			memcpy(to[k].uuid, pairs[j].to, 16);
		}
		for (j = 0; j < k; j++)
			if (fc.ctx[j].used &&
			    memcmp(to[j].uuid, to[k].uuid, 16) == 0)
				return CUDA_ERROR_INVALID_VALUE;
		if (gpu_get(-1, to[k].uuid, &to[k]) == -1 ||
		    strcmp(to[k].name, c->gpu.name) != 0 ||
		    to[k].major != c->gpu.major ||
		    to[k].minor != c->gpu.minor)
			return CUDA_ERROR_INVALID_DEVICE;
		need[k] = 0;
		if (custom)
			need[k] = (unsigned long long)c->fsize;
		else
			for (i = 0; i < c->nallocs; i++)
				need[k] += c->allocs[i].len;
		if (mem_used(fc.dir, to[k].uuidstr) + need[k] > to[k].total)
			return CUDA_ERROR_OUT_OF_MEMORY;
	}
	return vis_remap(pairs, npairs, vis);
}

/*
 * CHECKPOINTED -> LOCKED.  Everything is checked before anything is
 * touched.
 */
static CUresult
act_restore(const struct pair *pairs, size_t npairs, uint64_t deadline)
{
	struct CUctx_st		*c;
	struct alloc		*a;
	struct gpu		 to[MAXCTX];
	unsigned long long	 need[MAXCTX];
	unsigned char		 vis[MAXGPUS][16];
	char			 path[PATH_MAX];
	CUresult		 r;
	size_t			 i, k;
	off_t			 off;
	void			*p;
	int			 fd = -1;

	if (!act_begin("restore", NULL, CU_PROCESS_STATE_CHECKPOINTED,
	    deadline, &r))
		goto out;
	if (fc.op == OP_RESTORE)
		op_abandon();
	if (fc.custom) {
		/* Its memory is with the caller of the custom checkpoint. */
		r = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	r = restore_plan(pairs, npairs, 0, to, need, vis);
	if (r != CUDA_SUCCESS)
		goto out;

	for (k = 0; k < MAXCTX; k++) {
		c = &fc.ctx[k];
		if (!c->used)
			continue;
		c->gpu = to[k];
		if (mkdirs("%s/mem/%s", fc.dir, c->gpu.uuidstr) == -1 ||
		    mem_path(path, sizeof path, &c->gpu) == -1 ||
		    (fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC,
		    0644)) == -1 || ftruncate(fd, (off_t)need[k]) == -1)
			goto failed;
		for (i = 0, off = 0; i < c->nallocs; i++) {
			a = &c->allocs[i];
			p = mmap((void *)a->va, a->len, PROT_READ | PROT_WRITE,
			    MAP_SHARED | MAP_FIXED, fd, off);
			if (p == MAP_FAILED)
				goto failed;
			memcpy(p, a->save, a->req);
			save_free(a);
			a->off = off;
			off += (off_t)a->len;
		}
		c->fsize = off;
		close(fd);
		fd = -1;
	}
	memcpy(fc.vis, vis, (size_t)fc.nvis * sizeof vis[0]);
	ipc_publish_all();
	state_set(CU_PROCESS_STATE_LOCKED);
	r = CUDA_SUCCESS;
	goto out;
failed:
	/* Half restored: as the real driver, give up on the process. */
	if (fd != -1)
		close(fd);
	state_set(CU_PROCESS_STATE_FAILED);
	r = CUDA_ERROR_OPERATING_SYSTEM;
out:
	pthread_mutex_unlock(&fc.mtx);
	return r;
}

/*
 * LOCKED -> RUNNING: the waiting calls go on.  A pending checkpoint
 * operation is dropped: its memory never left.
 */
static CUresult
act_unlock(uint64_t deadline)
{
	CUresult	r;

	if (!act_begin("unlock", NULL, CU_PROCESS_STATE_LOCKED,
	    deadline, &r))
		goto out;
	if (fc.op == OP_CKPT)
		op_abandon();
	state_set(CU_PROCESS_STATE_RUNNING);
	r = CUDA_SUCCESS;
out:
	pthread_mutex_unlock(&fc.mtx);
	return r;
}

/* inject/a, or inject/b when a says nothing. */
static struct inject
inject_first(const char *a, const char *b)
{
	struct inject	in;

	in = inject_read(a);
	if (in.r == CUDA_SUCCESS && !in.hang)
		in = inject_read(b);
	return in;
}

/*
 * proc/KEY/storage, the layout of the pending operation for its caller:
 * its ID, then a line a used context: the GPU's UUID and the size of
 * its memory file.  Called with mtx held.
 */
static int
storage_write(void)
{
	struct CUctx_st	*c;
	char		 path[PATH_MAX], text[MAXCTX * 80 + 32];
	size_t		 k, n;

	n = (size_t)snprintf(text, sizeof text, "%llu\n", fc.opid);
	for (k = 0; k < MAXCTX; k++) {
		c = &fc.ctx[k];
		if (c->used)
			n += (size_t)snprintf(text + n, sizeof text - n,
			    "%s %lld\n", c->gpu.uuidstr, (long long)c->fsize);
	}
	snprintf(path, sizeof path, "%s/proc/%ld/storage", fc.dir,
	    (long)fc.pid);
	return write_atomic(path, "", text);
}

static void
storage_unlink(void)
{
	char	path[PATH_MAX];

	snprintf(path, sizeof path, "%s/proc/%ld/storage", fc.dir,
	    (long)fc.pid);
	unlink(path);
}

/*
 * Ends the pending operation as if it had not been: a checkpoint's
 * memory never left; a restore's new memory files go, and the contexts
 * and visible GPUs are those of the checkpoint again, so that it can be
 * tried anew.  Called with mtx held.
 */
static void
op_abandon(void)
{
	struct CUctx_st	*c;
	size_t		 k;

	if (fc.op == OP_RESTORE) {
		for (k = 0; k < MAXCTX; k++) {
			c = &fc.ctx[k];
			if (!c->used)
				continue;
			ctx_unmap(c);
			c->gpu = fc.opgpu[k];
		}
		memcpy(fc.vis, fc.opvis, sizeof fc.vis);
	}
	fc.op = OP_NONE;
	fc.opid = 0;
	storage_unlink();
}

/*
 * A checkpoint to custom storage, LOCKED: the memory files stay, mapped
 * in the process, for the caller to map and copy out; the process
 * stays LOCKED until the complete call.
 */
static CUresult
act_checkpoint_storage(uint64_t deadline)
{
	CUresult	r;

	if (!act_begin("checkpoint", "storage", CU_PROCESS_STATE_LOCKED,
	    deadline, &r))
		goto out;
	/* (NVIDIA: custom storage does not take CUDA IPC) */
	if (ipc_used()) {
		r = CUDA_ERROR_NOT_SUPPORTED;
		goto out;
	}
	if (fc.op == OP_CKPT)
		op_abandon();
	fc.op = OP_CKPT;
	fc.opid = now_ns();
	if (storage_write() == -1) {
		op_abandon();
		r = CUDA_ERROR_OPERATING_SYSTEM;
		goto out;
	}
	r = CUDA_SUCCESS;
out:
	pthread_mutex_unlock(&fc.mtx);
	return r;
}

/*
 * A restore from custom storage, CHECKPOINTED, of a process checkpointed
 * to custom storage: the checks of a restore, then each memory file is
 * made again on its (new) GPU with the size it had, and the allocations
 * mapped at their addresses and file offsets, zero until the caller
 * copies in.  The process stays CHECKPOINTED until the complete call.
 */
static CUresult
act_restore_storage(const struct pair *pairs, size_t npairs,
    uint64_t deadline)
{
	struct CUctx_st		*c;
	struct alloc		*a;
	struct gpu		 to[MAXCTX];
	unsigned long long	 need[MAXCTX];
	unsigned char		 vis[MAXGPUS][16];
	char			 path[PATH_MAX];
	CUresult		 r;
	size_t			 i, k;
	int			 fd = -1;

	if (!act_begin("restore", "storage", CU_PROCESS_STATE_CHECKPOINTED,
	    deadline, &r))
		goto out;
	if (fc.op == OP_RESTORE)
		op_abandon();
	if (!fc.custom) {
		/* Its memory is in its heap, for a staged restore. */
		r = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	r = restore_plan(pairs, npairs, 1, to, need, vis);
	if (r != CUDA_SUCCESS)
		goto out;

	for (k = 0; k < MAXCTX; k++)
		fc.opgpu[k] = fc.ctx[k].gpu;
	memcpy(fc.opvis, fc.vis, sizeof fc.opvis);
	fc.op = OP_RESTORE;
	fc.opid = now_ns();
	for (k = 0; k < MAXCTX; k++) {
		c = &fc.ctx[k];
		if (!c->used)
			continue;
		c->gpu = to[k];
		if (mkdirs("%s/mem/%s", fc.dir, c->gpu.uuidstr) == -1 ||
		    mem_path(path, sizeof path, &c->gpu) == -1 ||
		    (fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC,
		    0644)) == -1 || ftruncate(fd, c->fsize) == -1)
			goto failed;
		for (i = 0; i < c->nallocs; i++) {
			a = &c->allocs[i];
			if (mmap((void *)a->va, a->len, PROT_READ | PROT_WRITE,
			    MAP_SHARED | MAP_FIXED, fd, a->off) == MAP_FAILED)
				goto failed;
		}
		close(fd);
		fd = -1;
	}
	memcpy(fc.vis, vis, (size_t)fc.nvis * sizeof vis[0]);
	if (storage_write() == -1)
		goto failed;
	r = CUDA_SUCCESS;
	goto out;
failed:
	/* Nothing was copied in yet: back to the checkpoint. */
	if (fd != -1)
		close(fd);
	op_abandon();
	r = CUDA_ERROR_OPERATING_SYSTEM;
out:
	pthread_mutex_unlock(&fc.mtx);
	return r;
}

/*
 * The end of the pending operation ID (args), which the caller has
 * unmapped.  A checkpoint's allocations go back to reservations and its
 * memory files are removed, with no copy in the process: CHECKPOINTED.
 * A restore's process is LOCKED.  When it fails, or with abandon, the
 * operation is abandoned (op_abandon()).  Either way it ends.
 */
static CUresult
act_complete(const char *args, int abandon, uint64_t deadline)
{
	struct inject		 in;
	struct CUctx_st		*c;
	unsigned long long	 id;
	CUresult		 r;
	size_t			 k;

	id = strtoull(args, NULL, 10);
	if (!abandon)
		delay_read("complete");
	pthread_mutex_lock(&fc.mtx);
	if (fc.state == CU_PROCESS_STATE_FAILED || fc.op == OP_NONE ||
	    id == 0 || fc.opid != id) {
		r = CUDA_ERROR_ILLEGAL_STATE;
		goto out;
	}
	if (abandon) {
		op_abandon();
		r = CUDA_SUCCESS;
		goto out;
	}
	in = inject_read("complete");
	if (in.hang) {
		r = act_hang(deadline);
		op_abandon();
		goto out;
	}
	if (in.r != CUDA_SUCCESS) {
		op_abandon();
		if (in.failed)
			state_set(CU_PROCESS_STATE_FAILED);
		r = in.r;
		goto out;
	}
	if (fc.op == OP_CKPT) {
		for (k = 0; k < MAXCTX; k++) {
			c = &fc.ctx[k];
			if (!c->used)
				continue;
			ctx_unmap(c);
		}
		fc.custom = 1;
	} else
		fc.custom = 0;
	state_set(fc.op == OP_CKPT ? CU_PROCESS_STATE_CHECKPOINTED :
	    CU_PROCESS_STATE_LOCKED);
	fc.op = OP_NONE;
	fc.opid = 0;
	storage_unlink();
	r = CUDA_SUCCESS;
out:
	pthread_mutex_unlock(&fc.mtx);
	return r;
}

/* OLDUUID=NEWUUID words. */
static int
pairs_parse(char *p, struct pair *pairs, size_t *np)
{
	char	*w, *eq;

	*np = 0;
	while ((w = next_word(&p)) != NULL) {
		if (*np == MAXPAIRS || (eq = strchr(w, '=')) == NULL)
			return -1;
		*eq = '\0';
		if (uuid_parse(w, pairs[*np].from) == -1 ||
		    uuid_parse(eq + 1, pairs[*np].to) == -1)
			return -1;
		*eq = '=';
		(*np)++;
	}
	return 0;
}

/*
 * The ID of the job whose file path names, into id (len bytes): what
 * the file holds, written by its first process when it was empty (with
 * create).  Returns 0, or -1 when the file cannot be read.
 */
static int
job_id(const char *path, int create, char *id, size_t len)
{
	char	buf[64];
	ssize_t	n;
	int	fd;

	if ((fd = open(path, (create ? O_RDWR : O_RDONLY) | O_CLOEXEC)) == -1)
		return -1;
	if (create)
		flock(fd, LOCK_EX);
	n = pread(fd, buf, sizeof buf - 1, 0);
	if (n == 0 && create) {
		n = snprintf(buf, sizeof buf, "job-%ld-%llu\n", (long)getpid(),
		    (unsigned long long)now_ns());
		if (pwrite(fd, buf, (size_t)n, 0) != n)
			n = -1;
	}
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	if (buf[0] == '\0')
		return -1;
	snprintf(id, len, "%s", buf);
	return 0;
}

/*
 * The job the caller of the checkpoint API names (its JOB_ENV), as a
 * word of a request: its ID, or "-".
 */
static void
caller_job(char *id, size_t len)
{
	const char	*path = getenv(JOB_ENV);

	if (driver_version() < JOB_VERSION || path == NULL || *path == '\0' ||
	    job_id(path, 0, id, len) == -1)
		snprintf(id, len, "-");
}

/*
 * Before an action on a process of a job: the caller must name that
 * job, and no other action may be under way on a process of it (*fdp
 * holds the job's lock until job_end()).
 */
static CUresult
job_begin(const char *caller, const char *action, int *fdp)
{
	char	path[PATH_MAX];
	int	fd;

	*fdp = -1;
	if (fc.job[0] == '\0' || strcmp(action, "state") == 0)
		return CUDA_SUCCESS;
	if (strcmp(caller, fc.job) != 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (strcmp(action, "checkpoint-storage") == 0 ||
	    strcmp(action, "restore-storage") == 0)
		return CUDA_ERROR_NOT_SUPPORTED;
	snprintf(path, sizeof path, "%s/job.%s", fc.dir, fc.job);
	if ((fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644)) == -1)
		return CUDA_ERROR_OPERATING_SYSTEM;
	if (flock(fd, LOCK_EX | LOCK_NB) == -1) {
		close(fd);
		return CUDA_ERROR_NOT_PERMITTED;
	}
	*fdp = fd;
	return CUDA_SUCCESS;
}

/*
 * Takes proc/KEY/req ("SEQ ACTION DEADLINE_NS [ARGS]"), does the action
 * unless the caller's deadline has passed, logs it and answers in
 * proc/KEY/ack ("SEQ CODE NAME").
 */
static void
request_handle(const char *req)
{
	struct pair	 pairs[MAXPAIRS];
	char		 busy[PATH_MAX], ack[PATH_MAX], buf[16384], extra[8192];
	char		 text[256], *p = buf, *seq, *action, *dl, *job, *args;
	unsigned long	 ms;
	uint64_t	 start, deadline;
	size_t		 npairs = 0;
	CUresult	 r;
	int		 jfd;

	snprintf(busy, sizeof busy, "%s.busy", req);
	if (rename(req, busy) == -1)
		return;
	if (read_small(busy, buf, sizeof buf) == -1) {
		unlink(busy);
		return;
	}
	unlink(busy);
	start = now_ns();
	if ((seq = next_word(&p)) == NULL || (action = next_word(&p)) == NULL ||
	    (dl = next_word(&p)) == NULL || (job = next_word(&p)) == NULL)
		return;
	deadline = strtoull(dl, NULL, 10);
	jfd = -1;
	args = p + strspn(p, " \t");
	args[strcspn(args, "\r\n")] = '\0';
	snprintf(extra, sizeof extra, "%s", strcmp(action, "restore") == 0 ||
	    strcmp(action, "restore-storage") == 0 ? args : "");

	if (deadline != 0 && start > deadline)
		r = CUDA_ERROR_TIMEOUT;
	else if ((r = job_begin(job, action, &jfd)) != CUDA_SUCCESS)
		;
	else if (strcmp(action, "lock") == 0) {
		ms = strtoul(args, NULL, 10);
		r = act_lock(ms > UINT_MAX ? UINT_MAX : (unsigned int)ms,
		    deadline);
	} else if (strcmp(action, "checkpoint") == 0)
		r = act_checkpoint(deadline);
	else if (strcmp(action, "checkpoint-storage") == 0)
		r = act_checkpoint_storage(deadline);
	else if (strcmp(action, "restore") == 0 ||
	    strcmp(action, "restore-storage") == 0) {
		if (pairs_parse(args, pairs, &npairs) == -1)
			r = CUDA_ERROR_INVALID_VALUE;
		else if (strcmp(action, "restore") == 0)
			r = act_restore(pairs, npairs, deadline);
		else
			r = act_restore_storage(pairs, npairs, deadline);
	} else if (strcmp(action, "complete") == 0)
		r = act_complete(args, 0, deadline);
	else if (strcmp(action, "abandon") == 0)
		r = act_complete(args, 1, deadline);
	else if (strcmp(action, "unlock") == 0)
		r = act_unlock(deadline);
	else if (strcmp(action, "state") == 0) {
		/*
		 * The state lives in the process: the file may be older
		 * than the process (one restored from an image), so it is
		 * written again before the caller reads it.
		 */
		pthread_mutex_lock(&fc.mtx);
		proc_files();
		pthread_mutex_unlock(&fc.mtx);
		r = CUDA_SUCCESS;
	} else
		r = CUDA_ERROR_INVALID_VALUE;
	if (jfd != -1)
		close(jfd);		/* the job's lock */

	if (strcmp(action, "state") != 0) {
		pthread_mutex_lock(&fc.mtx);
		log_action(action, start, now_ns(), r, extra);
		pthread_mutex_unlock(&fc.mtx);
	}
	snprintf(ack, sizeof ack, "%s/proc/%ld/ack", fc.dir, (long)fc.pid);
	snprintf(text, sizeof text, "%s %d %s\n", seq, (int)r, err_name(r));
	write_atomic(ack, "", text);
}

/*
 * The restore thread: looks for a request every millisecond.  It holds
 * no descriptor while it waits, so a process image taken at any time
 * has none open into FAKECUDA_DIR, and after a restore by CRIU it simply
 * goes on.
 */
static void *
restore_thread(void *arg)
{
	struct stat	 st;
	char		 req[PDIRLEN], state[PATH_MAX];
	unsigned int	 n = 0;

	prctl(PR_SET_NAME, "cuda-restore", 0, 0, 0);
	pthread_mutex_lock(&fc.mtx);
	fc.tid = gettid();
	pthread_cond_broadcast(&fc.cv);
	pthread_mutex_unlock(&fc.mtx);
	snprintf(req, sizeof req, "%s/proc/%ld/req", fc.dir, (long)fc.pid);
	snprintf(state, sizeof state, "%s/proc/%ld/state", fc.dir,
	    (long)fc.pid);
	for (;;) {
		msleep(1);
		if (stat(req, &st) == 0) {
			request_handle(req);
			continue;
		}
		/* Someone emptied FAKECUDA_DIR: say again who we are. */
		if (++n % 100 == 0 && access(state, F_OK) == -1) {
			pthread_mutex_lock(&fc.mtx);
			proc_files();
			pthread_mutex_unlock(&fc.mtx);
		}
	}
	return NULL;
}

/* At exit the process gives its GPU memory back and leaves proc/. */
static void
fakecuda_fini(void)
{
	static const char *const names[] = {
		"state", "statep", "tid", "req", "req.busy", "ack", "lock",
		"storage"
	};
	char	path[PATH_MAX];
	size_t	i;

	if (!ready())
		return;
	pthread_mutex_lock(&fc.mtx);
	fc.exiting = 1;
	for (i = 0; i < MAXCTX; i++)
		if (fc.ctx[i].used && mem_path(path, sizeof path,
		    &fc.ctx[i].gpu) == 0)
			unlink(path);
	for (i = 0; i < sizeof names / sizeof names[0]; i++) {
		snprintf(path, sizeof path, "%s/proc/%ld/%s", fc.dir,
		    (long)fc.pid, names[i]);
		unlink(path);
	}
	snprintf(path, sizeof path, "%s/proc/%ld", fc.dir, (long)fc.pid);
	rmdir(path);
	pthread_mutex_unlock(&fc.mtx);
}

/* Error names and strings. */

CUresult CUDAAPI
cuGetErrorName(CUresult error, const char **pStr)
{
	const struct cuerr	*e = err_lookup(error);

	if (pStr == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	*pStr = e != NULL ? e->name : NULL;
	return e != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI
cuGetErrorString(CUresult error, const char **pStr)
{
	const struct cuerr	*e = err_lookup(error);

	if (pStr == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	*pStr = e != NULL ? e->text : NULL;
	return e != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI
cuDriverGetVersion(int *driverVersion)
{
	if (driverVersion == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	*driverVersion = driver_version();
	return CUDA_SUCCESS;
}

/*
 * Reads CUDA_VISIBLE_DEVICES, reserves the address range of device
 * memory, creates proc/KEY/ and starts the restore thread, with every
 * signal blocked so that the application's signals go to its own
 * threads.
 */
CUresult CUDAAPI
cuInit(unsigned int Flags)
{
	pthread_condattr_t	 ca;
	pthread_t		 th;
	sigset_t		 all, old;
	const char		*dir, *cvd, *jf;
	uintptr_t		 base;
	void			*va = MAP_FAILED;
	CUresult		 r;
	int			 e;

	if (Flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fc.mtx);
	if (fc.inited) {
		r = ready() ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
		goto out;
	}
	dir = getenv("FAKECUDA_DIR");
	if (dir == NULL || *dir == '\0' ||
	    gpus_scan(dir, -1, NULL, NULL, NULL) == 0) {
		r = CUDA_ERROR_NO_DEVICE;
		goto out;
	}
	/* Absolute, so that a change of directory does not matter. */
	if ((fc.dir = realpath(dir, NULL)) == NULL &&
	    (fc.dir = strdup(dir)) == NULL) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	if ((cvd = getenv("CUDA_VISIBLE_DEVICES")) != NULL) {
		fc.masked = 1;
		if ((fc.nvis = vis_parse(cvd)) == 0) {
			r = CUDA_ERROR_NO_DEVICE;
			goto out;
		}
	}
	va = mmap(NULL, VA_BYTES, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS |
	    MAP_NORESERVE, -1, 0);
	if (va == MAP_FAILED) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	/* A job file named: the process is of that job (r590). */
	if (driver_version() >= JOB_VERSION &&
	    (jf = getenv(JOB_ENV)) != NULL && *jf != '\0' &&
	    job_id(jf, 1, fc.job, sizeof fc.job) == -1) {
		r = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	base = ((uintptr_t)va + VA_ALIGN - 1) & ~(VA_ALIGN - 1);
	fc.va_next = base;
	fc.va_end = (uintptr_t)va + VA_BYTES;
	fc.pid = getpid();
	fc.state = CU_PROCESS_STATE_RUNNING;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&fc.cv, &ca);
	pthread_condattr_destroy(&ca);

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	e = pthread_create(&th, NULL, restore_thread, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (e != 0) {
		r = CUDA_ERROR_OPERATING_SYSTEM;
		goto out;
	}
	pthread_detach(th);
	while (fc.tid == 0)
		pthread_cond_wait(&fc.cv, &fc.mtx);
	fc.inited = 1;
	proc_files();
	va = MAP_FAILED;
	r = CUDA_SUCCESS;
out:
	if (va != MAP_FAILED)
		munmap(va, VA_BYTES);
	if (r != CUDA_SUCCESS && !fc.inited) {
		free(fc.dir);
		fc.dir = NULL;
		fc.masked = fc.nvis = 0;
	}
	pthread_mutex_unlock(&fc.mtx);
	return r;
}

/* Devices. */

CUresult CUDAAPI
cuDeviceGetCount(int *count)
{
	CUresult	r;

	if ((r = enter()) != CUDA_SUCCESS)
		return r;
	if (count == NULL)
		r = CUDA_ERROR_INVALID_VALUE;
	else
		*count = dev_count();
	leave();
	return r;
}

CUresult CUDAAPI
cuDeviceGet(CUdevice *device, int ordinal)
{
	struct gpu	g;
	CUresult	r;

	if ((r = enter()) != CUDA_SUCCESS)
		return r;
	if (device == NULL)
		r = CUDA_ERROR_INVALID_VALUE;
	else if (dev_gpu(ordinal, &g) == -1)
		r = CUDA_ERROR_INVALID_DEVICE;
	else
		*device = ordinal;
	leave();
	return r;
}

CUresult CUDAAPI
cuDeviceGetName(char *name, int len, CUdevice dev)
{
	struct gpu	g;
	CUresult	r;

	if ((r = enter()) != CUDA_SUCCESS)
		return r;
	if (name == NULL || len <= 0)
		r = CUDA_ERROR_INVALID_VALUE;
	else if (dev_gpu(dev, &g) == -1)
		r = CUDA_ERROR_INVALID_DEVICE;
	else
		snprintf(name, (size_t)len, "%s", g.name);
	leave();
	return r;
}

CUresult CUDAAPI
cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
	struct gpu	g;
	CUresult	r;

	if ((r = enter()) != CUDA_SUCCESS)
		return r;
	if (uuid == NULL)
		r = CUDA_ERROR_INVALID_VALUE;
	else if (dev_gpu(dev, &g) == -1)
		r = CUDA_ERROR_INVALID_DEVICE;
	else
		memcpy(uuid->bytes, g.uuid, 16);
	leave();
	return r;
}

CUresult CUDAAPI
cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
	return cuDeviceGetUuid_v2(uuid, dev);
}

CUresult CUDAAPI
cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	struct gpu	g;
	CUresult	r;

	if ((r = enter()) != CUDA_SUCCESS)
		return r;
	if (bytes == NULL)
		r = CUDA_ERROR_INVALID_VALUE;
	else if (dev_gpu(dev, &g) == -1)
		r = CUDA_ERROR_INVALID_DEVICE;
	else
		*bytes = (size_t)g.total;
	leave();
	return r;
}

CUresult CUDAAPI
cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
	struct gpu	g;
	unsigned int	dom, bus, slot;
	CUresult	r;

	if ((r = enter()) != CUDA_SUCCESS)
		return r;
	if (pi == NULL) {
		r = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	if (dev_gpu(dev, &g) == -1) {
		r = CUDA_ERROR_INVALID_DEVICE;
		goto out;
	}
	dom = bus = slot = 0;
	sscanf(g.pci, "%x:%x:%x", &dom, &bus, &slot);
	switch (attrib) {
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
		*pi = g.major;
		break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
		*pi = g.minor;
		break;
	case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
		*pi = (int)bus;
		break;
	case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
		*pi = (int)slot;
		break;
	case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
		*pi = (int)dom;
		break;
	default:
		r = CUDA_ERROR_INVALID_VALUE;
		break;
	}
out:
	leave();
	return r;
}

CUresult CUDAAPI
cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
	struct gpu	g;
	CUresult	r;

	if ((r = enter()) != CUDA_SUCCESS)
		return r;
	if (pciBusId == NULL || len <= 0)
		r = CUDA_ERROR_INVALID_VALUE;
	else if (dev_gpu(dev, &g) == -1)
		r = CUDA_ERROR_INVALID_DEVICE;
	else
		snprintf(pciBusId, (size_t)len, "%s", g.pci);
	leave();
	return r;
}

/* Contexts: one primary context a GPU, with an empty memory file. */

CUresult CUDAAPI
cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	struct CUctx_st	*c = NULL;
	struct gpu	 g;
	char		 path[PATH_MAX];
	CUresult	 r;
	size_t		 i;
	int		 fd;

	if ((r = enter()) != CUDA_SUCCESS)
		return r;
	if (pctx == NULL) {
		r = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	if (dev_gpu(dev, &g) == -1) {
		r = CUDA_ERROR_INVALID_DEVICE;
		goto out;
	}
	for (i = 0; i < MAXCTX; i++)
		if (fc.ctx[i].used && memcmp(fc.ctx[i].gpu.uuid, g.uuid,
		    16) == 0) {
			c = &fc.ctx[i];
			c->refs++;
			*pctx = c;
			goto out;
		}
	for (i = 0; i < MAXCTX && c == NULL; i++)
		if (!fc.ctx[i].used)
			c = &fc.ctx[i];
	if (c == NULL) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	if (mkdirs("%s/mem/%s", fc.dir, g.uuidstr) == -1 ||
	    mem_path(path, sizeof path, &g) == -1 ||
	    (fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	    0644)) == -1) {
		r = CUDA_ERROR_OPERATING_SYSTEM;
		goto out;
	}
	close(fd);
	memset(c, 0, sizeof *c);
	c->used = 1;
	c->refs = 1;
	c->gpu = g;
	*pctx = c;
out:
	leave();
	return r;
}

CUresult CUDAAPI
cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	struct gpu	g;
	CUresult	r;
	size_t		i;
	int		k;

	if ((r = enter()) != CUDA_SUCCESS)
		return r;
	if (dev_gpu(dev, &g) == -1) {
		r = CUDA_ERROR_INVALID_DEVICE;
		goto out;
	}
	r = CUDA_ERROR_INVALID_CONTEXT;
	for (i = 0; i < MAXCTX; i++) {
		if (!fc.ctx[i].used ||
		    memcmp(fc.ctx[i].gpu.uuid, g.uuid, 16) != 0)
			continue;
		r = CUDA_SUCCESS;
		if (--fc.ctx[i].refs > 0)
			break;
		for (k = 0; k < ctxdepth; k++)
			if (ctxstack[k] == &fc.ctx[i])
				ctxstack[k] = NULL;
		ctx_destroy(&fc.ctx[i]);
		break;
	}
out:
	leave();
	return r;
}

CUresult CUDAAPI
cuCtxSetCurrent(CUcontext ctx)
{
	CUresult	r;

	if ((r = enter()) != CUDA_SUCCESS)
		return r;
	if (ctx != NULL && !ctx_valid(ctx))
		r = CUDA_ERROR_INVALID_CONTEXT;
	else if (ctxdepth == 0) {
		if (ctx != NULL)
			ctxstack[ctxdepth++] = ctx;
	} else if (ctx == NULL)
		ctxdepth--;
	else
		ctxstack[ctxdepth - 1] = ctx;
	leave();
	return r;
}

CUresult CUDAAPI
cuCtxGetCurrent(CUcontext *pctx)
{
	CUresult	r;

	if ((r = enter()) != CUDA_SUCCESS)
		return r;
	if (pctx == NULL)
		r = CUDA_ERROR_INVALID_VALUE;
	else
		*pctx = cur_ctx();
	leave();
	return r;
}

CUresult CUDAAPI
cuCtxPushCurrent_v2(CUcontext ctx)
{
	CUresult	r;

	if ((r = enter()) != CUDA_SUCCESS)
		return r;
	if (!ctx_valid(ctx))
		r = CUDA_ERROR_INVALID_CONTEXT;
	else if (ctxdepth == STACKDEPTH)
		r = CUDA_ERROR_OUT_OF_MEMORY;
	else
		ctxstack[ctxdepth++] = ctx;
	leave();
	return r;
}

CUresult CUDAAPI
cuCtxPopCurrent_v2(CUcontext *pctx)
{
	CUresult	r;

	if ((r = enter()) != CUDA_SUCCESS)
		return r;
	if (ctxdepth == 0)
		r = CUDA_ERROR_INVALID_CONTEXT;
	else {
		ctxdepth--;
		if (pctx != NULL)
			*pctx = ctxstack[ctxdepth];
	}
	leave();
	return r;
}

/*
 * The device the context is on now.  A restore may move the context to
 * another GPU: its device is then that GPU's ordinal, or, under
 * CUDA_VISIBLE_DEVICES, the same device, which moved with it.
 */
CUresult CUDAAPI
cuCtxGetDevice(CUdevice *device)
{
	struct CUctx_st	*c;
	CUresult	 r;
	int		 ord;

	if ((r = enter()) != CUDA_SUCCESS)
		return r;
	if (device == NULL)
		r = CUDA_ERROR_INVALID_VALUE;
	else if ((c = cur_ctx()) == NULL)
		r = CUDA_ERROR_INVALID_CONTEXT;
	else if ((ord = dev_ordinal(c->gpu.uuid)) == -1)
		r = CUDA_ERROR_INVALID_DEVICE;
	else
		*device = ord;
	leave();
	return r;
}

CUresult CUDAAPI
cuCtxSynchronize(void)
{
	CUresult	r;

	if ((r = enter()) != CUDA_SUCCESS)
		return r;
	if (cur_ctx() == NULL)
		r = CUDA_ERROR_INVALID_CONTEXT;
	leave();
	return r;
}

/* Memory. */

/*
 * The allocation takes the first gap of the memory file that fits, or
 * its end, and fresh addresses 2 MiB aligned.
 */
CUresult CUDAAPI
cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	struct CUctx_st	*c;
	struct alloc	*a;
	struct gpu	 g;
	char		 path[PATH_MAX];
	unsigned long long used;
	size_t		 len, span, i, pg = (size_t)sysconf(_SC_PAGESIZE);
	off_t		 off = 0, fsize;
	CUresult	 r;
	void		*p;
	int		 fd = -1;

	if ((r = enter()) != CUDA_SUCCESS)
		return r;
	if ((c = cur_ctx()) == NULL) {
		r = CUDA_ERROR_INVALID_CONTEXT;
		goto out;
	}
	if (dptr == NULL || bytesize == 0 || bytesize > VA_BYTES) {
		r = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	len = (bytesize + pg - 1) / pg * pg;
	if ((span = va_room(len)) == 0) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	if (gpu_get(-1, c->gpu.uuid, &g) == -1) {
		r = CUDA_ERROR_INVALID_DEVICE;
		goto out;
	}
	for (i = 0; i < c->nallocs; i++) {
		if (c->allocs[i].off - off >= (off_t)len)
			break;
		off = c->allocs[i].off + (off_t)c->allocs[i].len;
	}
	fsize = off + (off_t)len > c->fsize ? off + (off_t)len : c->fsize;
	used = mem_used(fc.dir, g.uuidstr);
	used = used > (unsigned long long)c->fsize ? used - c->fsize : 0;
	if (used + (unsigned long long)fsize > g.total) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	if (c->nallocs == c->allocsz) {
		a = reallocarray(c->allocs, c->allocsz + 16, sizeof *a);
		if (a == NULL) {
			r = CUDA_ERROR_OUT_OF_MEMORY;
			goto out;
		}
		c->allocs = a;
		c->allocsz += 16;
	}
	if (mkdirs("%s/mem/%s", fc.dir, g.uuidstr) == -1 ||
	    mem_path(path, sizeof path, &g) == -1 ||
	    (fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644)) == -1 ||
	    ftruncate(fd, fsize) == -1) {
		r = CUDA_ERROR_OPERATING_SYSTEM;
		goto out;
	}
	p = mmap((void *)fc.va_next, len, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_FIXED, fd, off);
	if (p == MAP_FAILED) {
		if (ftruncate(fd, c->fsize) == -1) {
			/* The file stays larger: its size is only a count. */
		}
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	memmove(&c->allocs[i + 1], &c->allocs[i],
	    (c->nallocs - i) * sizeof *a);
	a = &c->allocs[i];
	memset(a, 0, sizeof *a);
	a->va = fc.va_next;
	a->len = len;
	a->req = bytesize;
	a->off = off;
	c->nallocs++;
	c->fsize = fsize;
	fc.va_next += span;
	*dptr = (CUdeviceptr)a->va;
out:
	if (fd != -1)
		close(fd);
	leave();
	return r;
}

/* The addresses are not used again; the file shrinks to its last use. */
CUresult CUDAAPI
cuMemFree_v2(CUdeviceptr dptr)
{
	struct CUctx_st	*c;
	struct alloc	*a;
	char		 path[PATH_MAX];
	CUresult	 r;
	size_t		 i, k;
	off_t		 fsize;
	int		 fd;

	if ((r = enter()) != CUDA_SUCCESS)
		return r;
	r = CUDA_ERROR_INVALID_VALUE;
	for (k = 0; k < MAXCTX && r != CUDA_SUCCESS; k++) {
		c = &fc.ctx[k];
		for (i = 0; c->used && i < c->nallocs; i++)
			if (c->allocs[i].va == (uintptr_t)dptr) {
				r = CUDA_SUCCESS;
				break;
			}
	}
	if (r != CUDA_SUCCESS)
		goto out;
	c = &fc.ctx[k - 1];
	a = &c->allocs[i];
	if (a->exported && ipc_path(path, sizeof path, (long)fc.pid,
	    a->va) == 0)
		unlink(path);
	unmap_to_reserve(a->va, a->len);
	if (mem_path(path, sizeof path, &c->gpu) == 0 &&
	    (fd = open(path, O_RDWR | O_CLOEXEC)) != -1) {
		fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		    a->off, (off_t)a->len);
		memmove(a, a + 1, (c->nallocs - i - 1) * sizeof *a);
		c->nallocs--;
		fsize = c->nallocs == 0 ? 0 :
		    c->allocs[c->nallocs - 1].off +
		    (off_t)c->allocs[c->nallocs - 1].len;
		if (fsize < c->fsize && ftruncate(fd, fsize) == 0)
			c->fsize = fsize;
		close(fd);
	} else {
		memmove(a, a + 1, (c->nallocs - i - 1) * sizeof *a);
		c->nallocs--;
	}
out:
	leave();
	return r;
}

CUresult CUDAAPI
cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
	CUresult	r;

	if ((r = enter()) != CUDA_SUCCESS)
		return r;
	if (cur_ctx() == NULL)
		r = CUDA_ERROR_INVALID_CONTEXT;
	else if (ByteCount > 0 && (srcHost == NULL ||
	    (alloc_find((uintptr_t)dstDevice, ByteCount) == NULL &&
	    imp_find((uintptr_t)dstDevice, ByteCount) == NULL)))
		r = CUDA_ERROR_INVALID_VALUE;
	else if (ByteCount > 0)
		memcpy((void *)(uintptr_t)dstDevice, srcHost, ByteCount);
	leave();
	return r;
}

CUresult CUDAAPI
cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
	CUresult	r;

	if ((r = enter()) != CUDA_SUCCESS)
		return r;
	if (cur_ctx() == NULL)
		r = CUDA_ERROR_INVALID_CONTEXT;
	else if (ByteCount > 0 && (dstHost == NULL ||
	    (alloc_find((uintptr_t)srcDevice, ByteCount) == NULL &&
	    imp_find((uintptr_t)srcDevice, ByteCount) == NULL)))
		r = CUDA_ERROR_INVALID_VALUE;
	else if (ByteCount > 0)
		memcpy(dstHost, (void *)(uintptr_t)srcDevice, ByteCount);
	leave();
	return r;
}

/*
 * CUDA IPC: a handle for the base of an allocation of the caller's
 * ("fakeipc KEY VA"), published where the allocation's memory is.
 */
CUresult CUDAAPI
cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
	struct CUctx_st	*c;
	struct alloc	*a = NULL;
	CUresult	 r;
	size_t		 i, k;

	if ((r = enter()) != CUDA_SUCCESS)
		return r;
	if (cur_ctx() == NULL) {
		r = CUDA_ERROR_INVALID_CONTEXT;
		goto out;
	}
	for (k = 0; k < MAXCTX && a == NULL; k++)
		for (i = 0; fc.ctx[k].used && i < fc.ctx[k].nallocs; i++)
			if (fc.ctx[k].allocs[i].va == (uintptr_t)dptr) {
				a = &fc.ctx[k].allocs[i];
				c = &fc.ctx[k];
				break;
			}
	if (pHandle == NULL || a == NULL) {
		r = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	if (ipc_publish(c, a) == -1) {
		r = CUDA_ERROR_OPERATING_SYSTEM;
		goto out;
	}
	a->exported = 1;
	memset(pHandle, 0, sizeof *pHandle);
	snprintf(pHandle->reserved, sizeof pHandle->reserved, "%s %ld %lx",
	    IPC_MAGIC, (long)fc.pid, (unsigned long)a->va);
out:
	leave();
	return r;
}

/*
 * Maps the memory a handle names, of another process, at fresh
 * addresses; a handle opened again gives the same ones.
 */
CUresult CUDAAPI
cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle,
    unsigned int Flags)
{
	struct imp	*m;
	char		 h[CU_IPC_HANDLE_SIZE + 1], *p = h, *w, *e, uuid[64];
	unsigned long	 va, ulen;
	long long	 off;
	size_t		 i, len, span, pg = (size_t)sysconf(_SC_PAGESIZE);
	long		 key;
	CUresult	 r;

	if ((r = enter()) != CUDA_SUCCESS)
		return r;
	memcpy(h, handle.reserved, CU_IPC_HANDLE_SIZE);
	h[CU_IPC_HANDLE_SIZE] = '\0';
	if (cur_ctx() == NULL) {
		r = CUDA_ERROR_INVALID_CONTEXT;
		goto out;
	}
	if (pdptr == NULL || (Flags & ~CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) ||
	    (w = next_word(&p)) == NULL || strcmp(w, IPC_MAGIC) != 0 ||
	    (w = next_word(&p)) == NULL || (key = strtol(w, &e, 10)) <= 0 ||
	    *e != '\0' || (w = next_word(&p)) == NULL ||
	    (va = strtoul(w, &e, 16)) == 0 || *e != '\0') {
		r = CUDA_ERROR_INVALID_HANDLE;
		goto out;
	}
	/* (a process cannot open its own) */
	if (key == (long)fc.pid) {
		r = CUDA_ERROR_INVALID_CONTEXT;
		goto out;
	}
	for (i = 0; i < fc.nimp; i++)
		if (fc.imp[i].key == key && fc.imp[i].expva == va) {
			fc.imp[i].refs++;
			*pdptr = (CUdeviceptr)fc.imp[i].va;
			goto out;
		}
	if (fc.nimp == MAXIMP) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	m = &fc.imp[fc.nimp];
	memset(m, 0, sizeof *m);
	m->key = key;
	m->expva = va;
	if (ipc_read(key, va, uuid, sizeof uuid, &off, &ulen) != 0) {
		r = CUDA_ERROR_INVALID_HANDLE;
		goto out;
	}
	len = (ulen + pg - 1) / pg * pg;
	if ((span = va_room(len)) == 0) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	m->va = fc.va_next;
	m->len = len;
	if ((r = imp_map(m)) != CUDA_SUCCESS) {
		if (r == CUDA_ERROR_NOT_FOUND)
			r = CUDA_ERROR_INVALID_HANDLE;
		goto out;
	}
	m->refs = 1;
	fc.va_next += span;
	fc.nimp++;
	*pdptr = (CUdeviceptr)m->va;
out:
	leave();
	return r;
}

/* The last close unmaps; the owner's memory is untouched. */
CUresult CUDAAPI
cuIpcCloseMemHandle(CUdeviceptr dptr)
{
	CUresult	r;
	size_t		i;

	if ((r = enter()) != CUDA_SUCCESS)
		return r;
	r = CUDA_ERROR_INVALID_VALUE;
	for (i = 0; i < fc.nimp; i++)
		if (fc.imp[i].va == (uintptr_t)dptr) {
			r = CUDA_SUCCESS;
			if (--fc.imp[i].refs > 0)
				break;
			unmap_to_reserve(fc.imp[i].va, fc.imp[i].len);
			memmove(&fc.imp[i], &fc.imp[i + 1],
			    (fc.nimp - i - 1) * sizeof fc.imp[0]);
			fc.nimp--;
			break;
		}
	leave();
	return r;
}

CUresult CUDAAPI
cuMemGetInfo_v2(size_t *free, size_t *total)
{
	struct CUctx_st		*c;
	struct gpu		 g;
	unsigned long long	 used;
	CUresult		 r;
	int			 ord;

	if ((r = enter()) != CUDA_SUCCESS)
		return r;
	if (free == NULL || total == NULL)
		r = CUDA_ERROR_INVALID_VALUE;
	else if ((c = cur_ctx()) == NULL)
		r = CUDA_ERROR_INVALID_CONTEXT;
	else if ((ord = gpu_get(-1, c->gpu.uuid, &g)) == -1)
		r = CUDA_ERROR_INVALID_DEVICE;
	else {
		used = mem_used(fc.dir, g.uuidstr);
		*total = (size_t)g.total;
		*free = used < g.total ? (size_t)(g.total - used) : 0;
	}
	leave();
	return r;
}

/*
 * Stream memory operations, on the special streams only.  The word is
 * the caller's device memory or memory it opened through CUDA IPC.
 */
static CUresult
memop_check(CUstream stream, CUdeviceptr addr)
{
	uintptr_t	p = (uintptr_t)addr;

	if (stream != NULL && stream != CU_STREAM_LEGACY &&
	    stream != CU_STREAM_PER_THREAD)
		return CUDA_ERROR_INVALID_HANDLE;
	if (cur_ctx() == NULL)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (p % sizeof(uint32_t) != 0 || (alloc_find(p, sizeof(uint32_t)) ==
	    NULL && imp_find(p, sizeof(uint32_t)) == NULL))
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

/* Whether the word v meets a wait's condition (flags checked). */
static int
memop_met(uint32_t v, uint32_t value, unsigned int flags)
{
	switch (flags & 0x3) {
	case CU_STREAM_WAIT_VALUE_GEQ:
		/* cyclic, as the driver compares: the signed difference */
		return (int32_t)(v - value) >= 0;
	case CU_STREAM_WAIT_VALUE_EQ:
		return v == value;
	case CU_STREAM_WAIT_VALUE_AND:
		return (v & value) != 0;
	default:
		return ~(v | value) != 0;
	}
}

/* The write is done at once. */
CUresult CUDAAPI
cuStreamWriteValue32_v2(CUstream stream, CUdeviceptr addr, cuuint32_t value,
    unsigned int flags)
{
	_Atomic uint32_t	*w;
	CUresult		 r;

	if ((r = enter()) != CUDA_SUCCESS)
		return r;
	if ((r = memop_check(stream, addr)) != CUDA_SUCCESS)
		goto out;
	if ((flags & ~(unsigned int)CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER) !=
	    0) {
		r = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	w = (_Atomic uint32_t *)(uintptr_t)addr;
	atomic_store_explicit(w, (uint32_t)value, flags ?
	    memory_order_relaxed : memory_order_release);
out:
	leave();
	return r;
}

/*
 * The wait is done inside the call, as a kernel spins on a flag that a
 * peer writes: the call stays in progress, and a lock of this process
 * waits for it, until the word meets the condition.  Between two reads
 * it lets go of fc.api, so that the process's other threads go on as a
 * host thread does while a stream waits; every read checks first that
 * the word is still mapped, and now and then an import is mapped again
 * where its owner's memory is, so that the wait sees the writes of a
 * peer restored meanwhile.  Only the FAILED state and the exit of the
 * process end it otherwise.
 */
CUresult CUDAAPI
cuStreamWaitValue32_v2(CUstream stream, CUdeviceptr addr, cuuint32_t value,
    unsigned int flags)
{
	_Atomic uint32_t	*w = (_Atomic uint32_t *)(uintptr_t)addr;
	struct imp		*m;
	uintptr_t		 p = (uintptr_t)addr;
	unsigned int		 n;
	CUresult		 r;
	int			 gone;

	if ((r = enter()) != CUDA_SUCCESS)
		return r;
	if ((r = memop_check(stream, addr)) != CUDA_SUCCESS)
		goto out;
	if ((flags & ~(0x3U | (unsigned int)CU_STREAM_WAIT_VALUE_FLUSH)) !=
	    0) {
		r = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	for (n = 1; ; n++) {
		if (memop_met(atomic_load_explicit(w, memory_order_acquire),
		    (uint32_t)value, flags))
			break;
		pthread_mutex_unlock(&fc.api);
		pthread_mutex_lock(&fc.mtx);
		gone = fc.exiting || fc.state == CU_PROCESS_STATE_FAILED;
		pthread_mutex_unlock(&fc.mtx);
		if (!gone)
			msleep(1);
		pthread_mutex_lock(&fc.api);
		if (gone) {
			r = CUDA_ERROR_UNKNOWN;
			break;
		}
		if (alloc_find(p, sizeof(uint32_t)) != NULL)
			continue;
		if ((m = imp_find(p, sizeof(uint32_t))) == NULL) {
			r = CUDA_ERROR_ILLEGAL_ADDRESS;
			break;
		}
		/* (an owner not there now keeps the mapping it had) */
		if (n % 10 == 0)
			(void)imp_map(m);
	}
out:
	leave();
	return r;
}

CUresult CUDAAPI
cuStreamWriteValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value,
    unsigned int flags)
{
	return cuStreamWriteValue32_v2(stream, addr, value, flags);
}

CUresult CUDAAPI
cuStreamWaitValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value,
    unsigned int flags)
{
	return cuStreamWaitValue32_v2(stream, addr, value, flags);
}

/* The checkpoint API, as a tool calls it for another process. */

/*
 * Fills pdir with proc/KEY, the files of the process that is pid to the
 * caller, when the call may go on.
 */
static CUresult
tool_check(int pid, char *pdir, size_t len)
{
	char	path[PATH_MAX];

	if (!ready())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (driver_version() < CKPT_VERSION)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (pid <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(pdir, len, "%s/proc/%d", fc.dir, (int)pid_key(pid));
	snprintf(path, sizeof path, "%s/state", pdir);
	if (!pid_alive(pid) || access(path, F_OK) == -1)
		return CUDA_ERROR_NOT_INITIALIZED;
	return CUDA_SUCCESS;
}

static unsigned long
call_timeout(void)
{
	const char	*s = getenv("FAKECUDA_CALL_TIMEOUT_MS");
	unsigned long	 ms;
	char		*e;

	if (s == NULL || *s == '\0')
		return CALL_TIMEOUT_MS;
	ms = strtoul(s, &e, 10);
	return *e == '\0' && ms > 0 ? ms : CALL_TIMEOUT_MS;
}

/*
 * Sends a request to the restore thread of pid and waits for its answer
 * at most timeout_ms; one caller at a time per process.
 */
static CUresult
tool_call(int pid, const char *action, const char *args,
    unsigned long timeout_ms)
{
	char		 pdir[PDIRLEN], path[PATH_MAX], req[PATH_MAX];
	char		 seq[96], suffix[64], *text = NULL, buf[256], *p, *w;
	char		 job[64];
	uint64_t	 deadline;
	unsigned int	 n;
	CUresult	 r;
	size_t		 len;
	long		 code;
	int		 fd = -1, i;

	if ((r = tool_check(pid, pdir, sizeof pdir)) != CUDA_SUCCESS)
		return r;
	deadline = now_ns() + timeout_ms * MS;
	snprintf(path, sizeof path, "%s/lock", pdir);
	if ((fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644)) == -1) {
		r = CUDA_ERROR_OPERATING_SYSTEM;
		goto out;
	}
	while (flock(fd, LOCK_EX | LOCK_NB) == -1) {
		if (now_ns() > deadline) {
			r = CUDA_ERROR_TIMEOUT;
			goto out;
		}
		msleep(1);
	}

	n = atomic_fetch_add(&callseq, 1) + 1;
	snprintf(seq, sizeof seq, "%ld.%u.%llu", (long)getpid(), n,
	    (unsigned long long)now_ns());
	snprintf(suffix, sizeof suffix, ".%ld.%u", (long)getpid(), n);
	len = strlen(seq) + strlen(action) + strlen(args) + 64 + sizeof job;
	if ((text = malloc(len)) == NULL) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	caller_job(job, sizeof job);
	snprintf(text, len, "%s %s %llu %s%s%s\n", seq, action,
	    (unsigned long long)deadline, job, *args ? " " : "", args);
	snprintf(req, sizeof req, "%s/req", pdir);
	if (write_atomic(req, suffix, text) == -1) {
		r = CUDA_ERROR_OPERATING_SYSTEM;
		goto out;
	}

	snprintf(path, sizeof path, "%s/ack", pdir);
	for (i = 1; ; i++) {
		if (read_small(path, buf, sizeof buf) == 0) {
			p = buf;
			if ((w = next_word(&p)) != NULL &&
			    strcmp(w, seq) == 0 &&
			    (w = next_word(&p)) != NULL) {
				code = strtol(w, NULL, 10);
				r = (CUresult)code;
				break;
			}
		}
		if (now_ns() > deadline) {
			unlink(req);	/* too late: withdraw it */
			r = CUDA_ERROR_TIMEOUT;
			break;
		}
		if (i % 100 == 0 && !pid_alive(pid)) {
			unlink(req);
			r = CUDA_ERROR_NOT_INITIALIZED;
			break;
		}
		msleep(1);
	}
out:
	free(text);
	if (fd != -1)
		close(fd);
	return r;
}

/*
 * The state of stopped process pid, read from its memory at the address
 * its statep file gives.  Returns 0, or -1 if it cannot be read.
 */
static int
state_in_memory(int pid, const char *pdir, CUprocessState *state)
{
	char		 path[PATH_MAX], buf[64];
	unsigned long	 addr;
	CUprocessState	 s;
	char		*e;
	int		 fd;
	ssize_t		 n;

	snprintf(path, sizeof path, "%s/statep", pdir);
	if (read_small(path, buf, sizeof buf) == -1)
		return -1;
	errno = 0;
	addr = strtoul(buf, &e, 16);
	if (errno != 0 || e == buf || addr == 0)
		return -1;
	snprintf(path, sizeof path, "/proc/%d/mem", pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	n = pread(fd, &s, sizeof s, (off_t)addr);
	close(fd);
	if (n != (ssize_t)sizeof s || (unsigned int)s >=
	    sizeof state_words / sizeof state_words[0])
		return -1;
	*state = s;
	return 0;
}

CUresult CUDAAPI
cuCheckpointProcessGetState(int pid, CUprocessState *state)
{
	char		 pdir[PDIRLEN], path[PATH_MAX], buf[64], *p = buf, *w;
	CUresult	 r;
	size_t		 i;

	if ((r = tool_check(pid, pdir, sizeof pdir)) != CUDA_SUCCESS)
		return r;
	if (state == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	/*
	 * A process that can run is asked (its restore thread republishes
	 * its state); a stopped one cannot answer, and its state is read
	 * from its memory, where statep says it is: its file may be of the
	 * process it was restored from, killed later in another state.
	 */
	if (!pid_stopped(pid)) {
		if ((r = tool_call(pid, "state", "", call_timeout())) !=
		    CUDA_SUCCESS)
			return r;
	} else if (state_in_memory(pid, pdir, state) == 0)
		return CUDA_SUCCESS;
	snprintf(path, sizeof path, "%s/state", pdir);
	if (read_small(path, buf, sizeof buf) == -1 ||
	    (w = next_word(&p)) == NULL)
		return CUDA_ERROR_NOT_INITIALIZED;
	for (i = 0; i < sizeof state_words / sizeof state_words[0]; i++)
		if (strcmp(w, state_words[i]) == 0) {
			*state = (CUprocessState)i;
			return CUDA_SUCCESS;
		}
	return CUDA_ERROR_UNKNOWN;
}

/*
 * The process's thread that is inner in its own namespace, as the caller
 * sees it: -1 when there is none.
 */
static pid_t
task_outer(int pid, pid_t inner)
{
	struct dirent	*de;
	char		 path[128], *e;
	pid_t		 found = -1;
	DIR		*d;
	long		 tid;

	snprintf(path, sizeof path, "/proc/%d/task/%d/status", pid,
	    (int)inner);
	if (pid_inner(path, inner) == inner)
		return inner;
	snprintf(path, sizeof path, "/proc/%d/task", pid);
	if ((d = opendir(path)) == NULL)
		return -1;
	while (found == -1 && (de = readdir(d)) != NULL) {
		tid = strtol(de->d_name, &e, 10);
		if (*e != '\0' || tid <= 0 || tid > INT_MAX)
			continue;
		snprintf(path, sizeof path, "/proc/%d/task/%ld/status", pid,
		    tid);
		if (pid_inner(path, (pid_t)tid) == inner)
			found = (pid_t)tid;
	}
	closedir(d);
	return found;
}

/* The restore thread, as the caller sees it. */
CUresult CUDAAPI
cuCheckpointProcessGetRestoreThreadId(int pid, int *tid)
{
	char		 pdir[PDIRLEN], path[PATH_MAX], buf[64], *e;
	CUresult	 r;
	pid_t		 t;
	long		 n;

	if ((r = tool_check(pid, pdir, sizeof pdir)) != CUDA_SUCCESS)
		return r;
	if (tid == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(path, sizeof path, "%s/tid", pdir);
	if (read_small(path, buf, sizeof buf) == -1)
		return CUDA_ERROR_NOT_INITIALIZED;
	n = strtol(buf, &e, 10);
	if (n <= 0 || n > INT_MAX || (*e != '\0' && *e != '\n') ||
	    (t = task_outer(pid, (pid_t)n)) == -1)
		return CUDA_ERROR_UNKNOWN;
	*tid = (int)t;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuCheckpointProcessLock(int pid, CUcheckpointLockArgs *args)
{
	char		pdir[PDIRLEN], buf[32];
	unsigned int	ms = 0;
	CUresult	r;
	size_t		i;

	if ((r = tool_check(pid, pdir, sizeof pdir)) != CUDA_SUCCESS)
		return r;
	if (args != NULL) {
		if (args->reserved0 != 0)
			return CUDA_ERROR_INVALID_VALUE;
		for (i = 0; i < 7; i++)
			if (args->reserved1[i] != 0)
				return CUDA_ERROR_INVALID_VALUE;
		ms = args->timeoutMs;
	}
	snprintf(buf, sizeof buf, "%u", ms);
	return tool_call(pid, "lock", buf, ms != 0 ?
	    (unsigned long)ms + LOCK_SLACK_MS : call_timeout());
}

/* Custom storage, the caller's side. */

/*
 * Maps each memory file that proc/KEY/storage names for the operation
 * pid has just started, read-only for a checkpoint, and fills in its
 * info; *idp is the operation's ID once it is read.
 */
static CUresult
op_map(int pid, int restore, unsigned long long *idp, struct op **opp)
{
	struct gck_cu_storage_dev	*d;
	struct op			*op = NULL;
	struct stat			 st;
	char				 path[PATH_MAX], buf[MAXCTX * 80 + 32];
	char				*p = buf, *w, *sz, *e;
	unsigned long long		 size;
	unsigned int			 i;
	CUresult			 r;
	long				 key = (long)pid_key(pid);
	void				*m;
	int				 fd = -1;

	*idp = 0;
	*opp = NULL;
	snprintf(path, sizeof path, "%s/proc/%ld/storage", fc.dir, key);
	if (read_small(path, buf, sizeof buf) == -1) {
		r = CUDA_ERROR_OPERATING_SYSTEM;
		goto out;
	}
	if ((w = next_word(&p)) == NULL ||
	    (*idp = strtoull(w, &e, 10)) == 0 || *e != '\0') {
		r = CUDA_ERROR_UNKNOWN;
		goto out;
	}
	if ((op = calloc(1, sizeof *op)) == NULL) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	op->pid = pid;
	op->restore = restore;
	op->id = *idp;
	op->info.dev = op->dev;
	while ((w = next_word(&p)) != NULL) {
		if (op->info.ndev == MAXCTX || (sz = next_word(&p)) == NULL ||
		    (size = strtoull(sz, &e, 10), *e != '\0') ||
		    size > SIZE_MAX) {
			r = CUDA_ERROR_UNKNOWN;
			goto out;
		}
		d = &op->dev[op->info.ndev++];
		if (size == 0)
			continue;
		snprintf(path, sizeof path, "%s/mem/%s/%ld", fc.dir, w, key);
		if ((fd = open(path, (restore ? O_RDWR : O_RDONLY) |
		    O_CLOEXEC)) == -1 || fstat(fd, &st) == -1 ||
		    (unsigned long long)st.st_size < size) {
			r = CUDA_ERROR_OPERATING_SYSTEM;
			goto out;
		}
		m = mmap(NULL, (size_t)size, restore ? PROT_READ | PROT_WRITE :
		    PROT_READ, MAP_SHARED, fd, 0);
		if (m == MAP_FAILED) {
			r = CUDA_ERROR_OUT_OF_MEMORY;
			goto out;
		}
		d->devptr = (CUdeviceptr)(uintptr_t)m;
		d->size = (size_t)size;
		close(fd);
		fd = -1;
	}
	pthread_mutex_lock(&ops.mtx);
	ops.hid += (uintptr_t)1 << HID_SHIFT;
	op->hid = ops.hid;
	op->info.handle = (void *)op->hid;
	for (i = 0; i < op->info.ndev; i++)
		op->dev[i].stream = (CUstream)(op->hid | (i + 1));
	op->next = ops.list;
	ops.list = op;
	pthread_mutex_unlock(&ops.mtx);
	*opp = op;
	op = NULL;
	r = CUDA_SUCCESS;
out:
	if (fd != -1)
		close(fd);
	op_free(op);
	return r;
}

/* Unmaps an operation's memory and frees it; NULL-safe. */
static void
op_free(struct op *op)
{
	unsigned int	i;

	if (op == NULL)
		return;
	for (i = 0; i < op->info.ndev; i++)
		if (op->dev[i].devptr != 0)
			munmap((void *)(uintptr_t)op->dev[i].devptr,
			    op->dev[i].size);
	free(op);
}

/*
 * Takes the live operation of that handle off the list once its copies
 * are done, or NULL.
 */
static struct op *
op_take(uintptr_t hid)
{
	struct op	**pp, *op = NULL;

	pthread_mutex_lock(&ops.mtx);
	for (pp = &ops.list; hid != 0 && *pp != NULL; pp = &(*pp)->next)
		if ((*pp)->hid == hid) {
			op = *pp;
			*pp = op->next;
			break;
		}
	while (op != NULL && op->busy > 0)
		pthread_cond_wait(&ops.cv, &ops.mtx);
	pthread_mutex_unlock(&ops.mtx);
	return op;
}

/* Ends the caller's operations on pid: the process dropped them. */
static void
op_drop_pid(int pid)
{
	struct op	*op;
	uintptr_t	 hid;

	for (;;) {
		pthread_mutex_lock(&ops.mtx);
		for (op = ops.list; op != NULL && op->pid != pid; op = op->next)
			;
		hid = op != NULL ? op->hid : 0;
		pthread_mutex_unlock(&ops.mtx);
		if (hid == 0)
			break;
		op_free(op_take(hid));
	}
}

/*
 * Starts an operation in the process and maps it: *sp is its info.  If
 * the mapping fails the process abandons the operation.
 */
static CUresult
op_start(int pid, const char *action, const char *args, int restore,
    struct gck_cu_storage **sp)
{
	struct op		*op;
	unsigned long long	 id;
	char			 buf[32];
	CUresult		 r;

	if ((r = tool_call(pid, action, args, call_timeout())) !=
	    CUDA_SUCCESS)
		return r;
	if ((r = op_map(pid, restore, &id, &op)) != CUDA_SUCCESS) {
		if (id != 0) {
			snprintf(buf, sizeof buf, "%llu", id);
			tool_call(pid, "abandon", buf, call_timeout());
		}
		return r;
	}
	*sp = &op->info;
	return CUDA_SUCCESS;
}

/*
 * A stream a copy may go on: a special one, or one of a live operation.
 * Called with ops.mtx held; *opp is that operation, else NULL.
 */
static int
stream_valid(CUstream stream, struct op **opp)
{
	struct op	*op;
	uintptr_t	 s = (uintptr_t)stream, i;

	*opp = NULL;
	if (stream == NULL || stream == CU_STREAM_LEGACY ||
	    stream == CU_STREAM_PER_THREAD)
		return 1;
	i = s & (((uintptr_t)1 << HID_SHIFT) - 1);
	for (op = ops.list; op != NULL; op = op->next)
		if (op->hid == s - i) {
			*opp = op;
			return i >= 1 && i <= op->info.ndev;
		}
	return 0;
}

/*
 * The live operation whose mapping holds [p, p + n): a restore's when
 * it is written to.  Called with ops.mtx held.
 */
static struct op *
op_holding(uintptr_t p, size_t n, int write)
{
	struct gck_cu_storage_dev	*d;
	struct op			*op;
	unsigned int			 i;

	for (op = ops.list; op != NULL; op = op->next) {
		if (write && !op->restore)
			continue;
		for (i = 0; i < op->info.ndev; i++) {
			d = &op->dev[i];
			if (d->devptr != 0 && p >= d->devptr &&
			    p - d->devptr <= d->size &&
			    n <= d->size - (p - d->devptr))
				return op;
		}
	}
	return NULL;
}

/*
 * copies, where it is: a line for each copy of an operation, with one
 * write(2): "htod|dtoh PID GPU OFFSET BYTES", PID as the caller sees
 * it, OFFSET in the memory of its GPU (its Nth).
 */
static void
copy_note(const struct op *op, uintptr_t p, const void *host, size_t n,
    int htod)
{
	const struct gck_cu_storage_dev	*d;
	char				 path[PATH_MAX], line[128];
	uintptr_t			 h = (uintptr_t)host, b;
	unsigned int			 i;
	size_t				 k;
	int				 fd, len, pinned = 0;

	snprintf(path, sizeof path, "%s/copies", fc.dir);
	if (access(path, F_OK) == -1)
		return;
	for (i = 0; i < op->info.ndev; i++) {
		d = &op->dev[i];
		if (d->devptr != 0 && p >= d->devptr && p - d->devptr < d->size)
			break;
	}
	if (i == op->info.ndev)
		return;
	/* (the host side: memory cuMemHostAlloc() gave, or not) */
	pthread_mutex_lock(&ops.mtx);
	for (k = 0; k < ops.nhost && !pinned; k++) {
		b = (uintptr_t)ops.host[k].p;
		pinned = h >= b && h - b <= ops.host[k].len &&
		    n <= ops.host[k].len - (h - b);
	}
	pthread_mutex_unlock(&ops.mtx);
	len = snprintf(line, sizeof line, "%s %d %u %llu %zu %s\n", htod ?
	    "htod" : "dtoh", op->pid, i, (unsigned long long)(p -
	    op->dev[i].devptr), n, pinned ? "pinned" : "pageable");
	if ((fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC)) == -1)
		return;
	if (write(fd, line, (size_t)len) != len)
		(void)0;
	close(fd);
}

/* inject/dtoh or inject/htod: "ERRORNAME" fails each copy so. */
static CUresult
copy_inject(const char *what)
{
	struct inject	in;

	in = inject_read(what);
	return in.hang ? CUDA_SUCCESS : in.r;
}

/*
 * An asynchronous copy, done at once: to or from an operation's
 * mapping, or else the caller's own device memory in its current
 * context.
 */
static CUresult
async_copy(void *host, uintptr_t dev, size_t n, CUstream stream, int htod)
{
	struct op	*op = NULL, *sop;
	CUresult	 r = CUDA_SUCCESS;

	if (!ready())
		return CUDA_ERROR_NOT_INITIALIZED;
	pthread_mutex_lock(&ops.mtx);
	if (!stream_valid(stream, &sop))
		r = CUDA_ERROR_INVALID_HANDLE;
	else if (n > 0 && host == NULL)
		r = CUDA_ERROR_INVALID_VALUE;
	else if (n > 0 && (op = op_holding(dev, n, htod)) != NULL)
		op->busy++;
	pthread_mutex_unlock(&ops.mtx);
	if (r != CUDA_SUCCESS || n == 0)
		return r;
	if ((r = copy_inject(htod ? "htod" : "dtoh")) != CUDA_SUCCESS)
		goto out;
	if (op == NULL) {
		if ((r = enter()) != CUDA_SUCCESS)
			return r;
		if (cur_ctx() == NULL || alloc_find(dev, n) == NULL)
			r = CUDA_ERROR_INVALID_VALUE;
		else if (htod)
			memcpy((void *)dev, host, n);
		else
			memcpy(host, (void *)dev, n);
		leave();
		return r;
	}
	if (htod)
		memcpy((void *)dev, host, n);
	else
		memcpy(host, (void *)dev, n);
	copy_note(op, dev, host, n, htod);
out:
	if (op != NULL) {
		pthread_mutex_lock(&ops.mtx);
		if (--op->busy == 0)
			pthread_cond_broadcast(&ops.cv);
		pthread_mutex_unlock(&ops.mtx);
	}
	return r;
}

CUresult CUDAAPI
cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
    CUstream hStream)
{
	return async_copy(dstHost, (uintptr_t)srcDevice, ByteCount, hStream, 0);
}

CUresult CUDAAPI
cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost,
    size_t ByteCount, CUstream hStream)
{
	return async_copy((void *)(uintptr_t)srcHost, (uintptr_t)dstDevice,
	    ByteCount, hStream, 1);
}

/* Waits for the copies under way on the stream's operation. */
CUresult CUDAAPI
cuStreamSynchronize(CUstream hStream)
{
	struct op	*op;
	uintptr_t	 hid;
	CUresult	 r = CUDA_SUCCESS;

	if (!ready())
		return CUDA_ERROR_NOT_INITIALIZED;
	pthread_mutex_lock(&ops.mtx);
	if (!stream_valid(hStream, &op))
		r = CUDA_ERROR_INVALID_HANDLE;
	else if (op != NULL) {
		/* op may end meanwhile: look for it again each time. */
		hid = op->hid;
		while (stream_valid(hStream, &op) && op != NULL &&
		    op->hid == hid && op->busy > 0)
			pthread_cond_wait(&ops.cv, &ops.mtx);
	}
	pthread_mutex_unlock(&ops.mtx);
	return r;
}

/* Page-locked host memory: whole pages of their own. */
CUresult CUDAAPI
cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
	struct hostmem	*h;
	size_t		 len, pg = (size_t)sysconf(_SC_PAGESIZE);
	CUresult	 r;
	void		*p;

	if ((r = enter()) != CUDA_SUCCESS)
		return r;
	if (cur_ctx() == NULL) {
		r = CUDA_ERROR_INVALID_CONTEXT;
		goto out;
	}
	if (pp == NULL || bytesize == 0 || bytesize > SIZE_MAX - pg ||
	    (Flags & ~(unsigned int)(CU_MEMHOSTALLOC_PORTABLE |
	    CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED)) != 0) {
		r = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	len = (bytesize + pg - 1) / pg * pg;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	pthread_mutex_lock(&ops.mtx);
	if (ops.nhost == ops.hostsz) {
		h = reallocarray(ops.host, ops.hostsz + 16, sizeof *h);
		if (h == NULL) {
			pthread_mutex_unlock(&ops.mtx);
			munmap(p, len);
			r = CUDA_ERROR_OUT_OF_MEMORY;
			goto out;
		}
		ops.host = h;
		ops.hostsz += 16;
	}
	ops.host[ops.nhost].p = p;
	ops.host[ops.nhost].len = len;
	ops.nhost++;
	pthread_mutex_unlock(&ops.mtx);
	*pp = p;
out:
	leave();
	return r;
}

/* Needs no current context: the memory is the process's. */
CUresult CUDAAPI
cuMemFreeHost(void *p)
{
	CUresult	r;
	size_t		i;

	if ((r = enter()) != CUDA_SUCCESS)
		return r;
	r = CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&ops.mtx);
	for (i = 0; p != NULL && i < ops.nhost; i++)
		if (ops.host[i].p == p) {
			munmap(p, ops.host[i].len);
			ops.host[i] = ops.host[--ops.nhost];
			r = CUDA_SUCCESS;
			break;
		}
	pthread_mutex_unlock(&ops.mtx);
	leave();
	return r;
}

/*
 * Ends a custom storage operation: waits for its copies, unmaps its
 * memory, frees its info and has the process finish it.  The handle is
 * spent whatever the process answers.
 */
CUresult CUDAAPI
cuCheckpointOperationComplete(void *handle)
{
	struct op	*op;
	char		 buf[32];
	int		 pid;

	if (!ready())
		return CUDA_ERROR_NOT_INITIALIZED;
	if ((op = op_take((uintptr_t)handle)) == NULL)
		return CUDA_ERROR_INVALID_HANDLE;
	pid = op->pid;
	snprintf(buf, sizeof buf, "%llu", op->id);
	op_free(op);
	return tool_call(pid, "complete", buf, call_timeout());
}

/*
 * From 13040 the arguments may name storage_out, where a 13.0 driver
 * sees a reserved field that is not zero.
 */
CUresult CUDAAPI
cuCheckpointProcessCheckpoint(int pid, CUcheckpointCheckpointArgs *args)
{
	struct gck_cu_ckpt_args	 ca;
	char			 pdir[PDIRLEN];
	CUresult		 r;
	size_t			 i;

	if ((r = tool_check(pid, pdir, sizeof pdir)) != CUDA_SUCCESS)
		return r;
	memset(&ca, 0, sizeof ca);
	if (args != NULL)
		memcpy(&ca, args, sizeof ca);
	if (driver_version() < STORAGE_VERSION) {
		for (i = 0; args != NULL && i < 8; i++)
			if (args->reserved[i] != 0)
				return CUDA_ERROR_INVALID_VALUE;
	} else
		for (i = 0; i < sizeof ca.reserved; i++)
			if (ca.reserved[i] != 0)
				return CUDA_ERROR_INVALID_VALUE;
	if (ca.storage_out == NULL)
		return tool_call(pid, "checkpoint", "", call_timeout());
	*ca.storage_out = NULL;
	return op_start(pid, "checkpoint-storage", "", 0, ca.storage_out);
}

CUresult CUDAAPI
cuCheckpointProcessRestore(int pid, CUcheckpointRestoreArgs *args)
{
	struct gck_cu_restore_args	 ra;
	CUcheckpointGpuPair		*pr;
	char				 pdir[PDIRLEN], *words = NULL, *p;
	unsigned int			 n = 0, i;
	CUresult			 r;
	size_t				 k;

	if ((r = tool_check(pid, pdir, sizeof pdir)) != CUDA_SUCCESS)
		return r;
	memset(&ra, 0, sizeof ra);
	if (args != NULL) {
		memcpy(&ra, args, sizeof ra);
		if (driver_version() < STORAGE_VERSION) {
			for (k = 0; k < sizeof args->reserved; k++)
				if (args->reserved[k] != 0)
					return CUDA_ERROR_INVALID_VALUE;
			if (args->reserved1 != 0)
				return CUDA_ERROR_INVALID_VALUE;
		} else {
			if (ra.padding0 != 0)
				return CUDA_ERROR_INVALID_VALUE;
			for (k = 0; k < sizeof ra.reserved; k++)
				if (ra.reserved[k] != 0)
					return CUDA_ERROR_INVALID_VALUE;
		}
		n = args->gpuPairsCount;
		if (n > 0 && args->gpuPairs == NULL)
			return CUDA_ERROR_INVALID_VALUE;
		if (n > MAXPAIRS)
			return CUDA_ERROR_INVALID_VALUE;
	}
	if (n > 0 && driver_version() < REMAP_VERSION)
		return CUDA_ERROR_NOT_SUPPORTED;
	if ((words = malloc((size_t)n * 2 * UUIDLEN + 1)) == NULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*words = '\0';
	for (i = 0, p = words; i < n; i++) {
		pr = &args->gpuPairs[i];
		if (i > 0)
			*p++ = ' ';
		uuid_format((const unsigned char *)pr->oldUuid.bytes, p);
		p += UUIDLEN - 1;
		*p++ = '=';
		uuid_format((const unsigned char *)pr->newUuid.bytes, p);
		p += UUIDLEN - 1;
	}
	if (ra.storage_out == NULL)
		r = tool_call(pid, "restore", words, call_timeout());
	else {
		*ra.storage_out = NULL;
		r = op_start(pid, "restore-storage", words, 1, ra.storage_out);
	}
	free(words);
	return r;
}

/* An unlock drops the caller's pending checkpoint operation on pid. */
CUresult CUDAAPI
cuCheckpointProcessUnlock(int pid, CUcheckpointUnlockArgs *args)
{
	char		pdir[PDIRLEN];
	CUresult	r;
	size_t		i;

	if ((r = tool_check(pid, pdir, sizeof pdir)) != CUDA_SUCCESS)
		return r;
	for (i = 0; args != NULL && i < 8; i++)
		if (args->reserved[i] != 0)
			return CUDA_ERROR_INVALID_VALUE;
	if ((r = tool_call(pid, "unlock", "", call_timeout())) == CUDA_SUCCESS)
		op_drop_pid(pid);
	return r;
}

/* Entry points by name, as cuGetProcAddress() finds them. */

static const struct entry {
	const char	*name;
	int		 since;		/* CUDA version of this variant */
	void		(*fn)(void);
} entries[] = {
#define F(n, s, f)	{ n, s, (void (*)(void))f }
	F("cuInit", 0, cuInit),
	F("cuDriverGetVersion", 0, cuDriverGetVersion),
	F("cuGetErrorName", 0, cuGetErrorName),
	F("cuGetErrorString", 0, cuGetErrorString),
	F("cuGetProcAddress", 0, cuGetProcAddress),
	F("cuGetProcAddress", 12000, cuGetProcAddress_v2),
	F("cuDeviceGetCount", 0, cuDeviceGetCount),
	F("cuDeviceGet", 0, cuDeviceGet),
	F("cuDeviceGetName", 0, cuDeviceGetName),
	F("cuDeviceGetUuid", 0, cuDeviceGetUuid),
	F("cuDeviceGetUuid", 11040, cuDeviceGetUuid_v2),
	F("cuDeviceTotalMem", 0, cuDeviceTotalMem_v2),
	F("cuDeviceGetAttribute", 0, cuDeviceGetAttribute),
	F("cuDeviceGetPCIBusId", 0, cuDeviceGetPCIBusId),
	F("cuDevicePrimaryCtxRetain", 0, cuDevicePrimaryCtxRetain),
	F("cuDevicePrimaryCtxRelease", 0, cuDevicePrimaryCtxRelease_v2),
	F("cuCtxSetCurrent", 0, cuCtxSetCurrent),
	F("cuCtxGetCurrent", 0, cuCtxGetCurrent),
	F("cuCtxPushCurrent", 0, cuCtxPushCurrent_v2),
	F("cuCtxPopCurrent", 0, cuCtxPopCurrent_v2),
	F("cuCtxGetDevice", 0, cuCtxGetDevice),
	F("cuCtxSynchronize", 0, cuCtxSynchronize),
	F("cuMemAlloc", 0, cuMemAlloc_v2),
	F("cuMemFree", 0, cuMemFree_v2),
	F("cuMemcpyHtoD", 0, cuMemcpyHtoD_v2),
	F("cuMemcpyDtoH", 0, cuMemcpyDtoH_v2),
	F("cuMemGetInfo", 0, cuMemGetInfo_v2),
	F("cuMemcpyDtoHAsync", 0, cuMemcpyDtoHAsync_v2),
	F("cuMemcpyHtoDAsync", 0, cuMemcpyHtoDAsync_v2),
	F("cuStreamSynchronize", 0, cuStreamSynchronize),
	F("cuStreamWaitValue32", 0, cuStreamWaitValue32),
	F("cuStreamWaitValue32", 11070, cuStreamWaitValue32_v2),
	F("cuStreamWriteValue32", 0, cuStreamWriteValue32),
	F("cuStreamWriteValue32", 11070, cuStreamWriteValue32_v2),
	F("cuMemHostAlloc", 0, cuMemHostAlloc),
	F("cuMemFreeHost", 0, cuMemFreeHost),
	F("cuCheckpointProcessGetState", CKPT_VERSION,
	    cuCheckpointProcessGetState),
	F("cuCheckpointProcessGetRestoreThreadId", CKPT_VERSION,
	    cuCheckpointProcessGetRestoreThreadId),
	F("cuCheckpointProcessLock", CKPT_VERSION, cuCheckpointProcessLock),
	F("cuCheckpointProcessCheckpoint", CKPT_VERSION,
	    cuCheckpointProcessCheckpoint),
	F("cuCheckpointProcessRestore", CKPT_VERSION,
	    cuCheckpointProcessRestore),
	F("cuCheckpointProcessUnlock", CKPT_VERSION, cuCheckpointProcessUnlock),
	F("cuCheckpointOperationComplete", STORAGE_VERSION,
	    cuCheckpointOperationComplete),
#undef F
};

/*
 * The newest variant that both the caller's version and the driver's
 * version have; a symbol that one of them is too old for is "found but
 * not sufficient".
 */
static CUresult
getproc(const char *symbol, void **pfn, int cudaVersion,
    CUdriverProcAddressQueryResult *status)
{
	const struct entry	*best = NULL;
	size_t			 i;
	int			 drv, found = 0;

	if (symbol == NULL || pfn == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	*pfn = NULL;
	drv = driver_version();
	for (i = 0; i < sizeof entries / sizeof entries[0]; i++) {
		if (strcmp(entries[i].name, symbol) != 0)
			continue;
		found = 1;
		if (entries[i].since <= cudaVersion &&
		    entries[i].since <= drv &&
		    (best == NULL || entries[i].since > best->since))
			best = &entries[i];
	}
	if (best == NULL) {
		if (status != NULL)
			*status = found ?
			    CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT :
			    CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
		return CUDA_ERROR_NOT_FOUND;
	}
	*pfn = (void *)best->fn;
	if (status != NULL)
		*status = CU_GET_PROC_ADDRESS_SUCCESS;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
    cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)
{
	return getproc(symbol, pfn, cudaVersion, symbolStatus);
}

CUresult CUDAAPI
cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
    cuuint64_t flags)
{
	return getproc(symbol, pfn, cudaVersion, NULL);
}
