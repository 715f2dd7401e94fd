/*
 * fakenccl.c -- a stand-in for NVIDIA's libnccl.so.2 in the tests.
 *
 * It exports, with nccl.h's names and prototypes, what a data-parallel
 * job of the tests uses: ncclGetVersion(), ncclGetUniqueId(),
 * ncclCommInitRank(), ncclCommDestroy(), ncclCommAbort(),
 * ncclCommCount(), ncclCommUserRank(), ncclCommCuDevice(),
 * ncclAllReduce(), ncclBroadcast(), ncclGroupStart(), ncclGroupEnd(),
 * ncclGetErrorString() and ncclGetLastError(); and the interface of the
 * LD_PRELOAD shim of NCCL's contrib/nccl_checkpoint (NCCL 2.30.7), which
 * the stand-in keeps itself:
 *	ncclResult_t ncclCheckpointPrepare(void);
 *	ncclResult_t ncclCheckpointRestore(void);
 *	ncclResult_t ncclCheckpointGetVersion(int *checkpointVersion,
 *	    int *ncclVersion);
 * It reaches the CUDA driver (libcuda.so.1: the stand-in of
 * fakecuda/fakecuda.c in the tests) through dlopen() and dlsym() at the
 * first call that needs it, so that a process may load it, and take a
 * unique ID, before it forks the ranks that then call cuInit().
 * ncclGetVersion() answers FAKENCCL_VERSION, the stand-in's own code
 * (2.29.7 by NCCL_VERSION()), whatever nccl.h it was built with.
 *
 * The model.  A unique ID is "fakenccl" and 16 random bytes; the ranks
 * of a communicator meet in FAKENCCL_DIR/HEX/ (HEX: those bytes in hex;
 * without FAKENCCL_DIR ncclCommInitRank() fails with ncclInvalidUsage,
 * and an ID that is not the stand-in's with ncclInvalidArgument).  Each
 * rank allocates a buffer of device memory (cuMemAlloc(), in the context
 * current at ncclCommInitRank(), whose device is the communicator's),
 *	FLAG	a 32-bit word: the last collective whose data is posted
 *	SLOT 0, SLOT 1	SLOTBYTES each, past a page
 * exports it (cuIpcGetMemHandle()) and publishes the handle in up.G.RANK
 * ("PID HANDLE-HEX", written to a temporary file and renamed), G the
 * communicator's generation: 0 at ncclCommInitRank(), one more at each
 * rebuild.  It then waits for every rank's up.G (polling every
 * millisecond, for 60 s at most, else ncclSystemError) and opens each
 * peer's buffer (cuIpcOpenMemHandle()).  Files of other generations are
 * never read, so that none left behind confuses a later one.
 *
 * Collective number S of a communicator (its count lives in the
 * process's memory, so that it survives a checkpoint of the process) has
 * every rank post its data (ncclAllReduce(): its sendbuff; ncclBroadcast():
 * the root's only) into its own SLOT S % 2, through the host
 * (cuMemcpyDtoH(), cuMemcpyHtoD()), then write its FLAG = S
 * (cuStreamWriteValue32()), then wait for every peer's FLAG to reach S
 * (cuStreamWaitValue32(), CU_STREAM_WAIT_VALUE_GEQ), then read the
 * SLOT S % 2 it needs of every rank and write the result to recvbuff.
 * The wait is done inside the driver, as NCCL's kernel spins on its
 * peers' flags: a rank waiting there cannot be locked (its call is in
 * progress) while the peer it waits for is locked, and so cannot post.
 * Two slots are enough: a rank posts into SLOT S % 2 for collective S
 * only once it has seen every peer's FLAG at S - 1 or more, and a peer
 * writes FLAG = S - 1 only after it has finished collective S - 2,
 * reads of that same slot included; and a peer reads the slot for S only
 * after it has seen FLAG reach S, while the owner posts into it again
 * (at S + 2) only after it has seen that peer's FLAG at S + 1, which the
 * peer writes once it has read.  The same argument bounds a peer's FLAG
 * to S - 1, S or S + 1 while a rank waits for S: hence GEQ, and the
 * cyclic compare of 32 bits is never near its wrap.  A new buffer (a
 * rebuild) has its FLAG written with the count of collectives so far
 * before its handle is published, not left at 0: then the next wait
 * (S + 1) holds off until the peer posts whatever the count, where a
 * FLAG of 0 would pass a cyclic compare once S + 1 is 2^31 or more.
 * Only ncclInt64 and ncclUint64 with ncclSum are reduced (else
 * ncclInvalidArgument), wrapping around; a collective of more than
 * SLOTBYTES is ncclInvalidArgument.  The stream is passed on to the
 * driver's calls; the operation is done by the time the call returns.
 * ncclGroupStart() and ncclGroupEnd() count their depth only (a
 * collective inside a group is done at once).
 *
 * Taking a communicator down (ncclCheckpointPrepare(),
 * ncclCommDestroy()) is collective: each rank closes what it opened of
 * its peers' buffers, says so in down.G.RANK, and waits (60 s at most)
 * for every rank's down.G before it frees its own buffer: an exporter
 * must not free memory that an importer has still open (CUDA leaves that
 * undefined; fakecuda's importer would wait for it as for an exporter
 * being restored).  ncclCommAbort() frees at once.
 *
 * ncclCheckpointPrepare() takes every live communicator of the process
 * down so that it can be locked and checkpointed without CUDA IPC (the
 * driver locks a process that shares memory through IPC only in a job,
 * from r610): it closes what it opened through CUDA IPC and frees its
 * own buffer; the application's ncclComm_t stays valid, and a
 * collective on it fails with ncclInvalidUsage until
 * ncclCheckpointRestore() rebuilds every communicator taken down, with
 * the same handle and the next generation, the ranks meeting again: a
 * collective call too.  A prepare passes over a communicator that is
 * down already, a restore over one that is up.  Either may be called
 * from any thread (a tool's hook, say) while none of the communicators'
 * collectives is in progress.  ncclCheckpointGetVersion() gives
 * FAKENCCL_CKPT_VERSION and FAKENCCL_VERSION.
 *
 * Files: a rank removes its up.G once every rank's down.G is there (no
 * one reads it again) and its down.G once every rank's up.G+1 is there
 * (no one waits for it), so that it has two files at most at any time.
 * At ncclCommDestroy(), after the barrier, it removes its up.G and
 * writes gone.RANK; the rank that finds every gone.* there (every rank is
 * past the barrier) empties FAKENCCL_DIR/HEX/ and removes it.
 *
 * ncclCheckpointRestore() meets in the directory that the file named by
 * NCCL_CHECKPOINT_KVS_PATH holds, where there is one (kvs_move()), as
 * the contrib shim meets through the key-value store named there.
 *
 * The process holds no descriptor into FAKENCCL_DIR between calls.  A
 * communicator is used by one thread at a time; the list of live ones
 * is guarded by a mutex, held through a prepare or a restore.  The
 * driver's calls are made with the communicator's context pushed, so
 * that any thread may make them.  fakecuda opens 16 imports at most: 17
 * ranks.
 */

#include "config.h"

#include <sys/types.h>
#include <sys/random.h>
#include <sys/stat.h>

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>
/* nccl.h declares a few functions without a prototype. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop

/* (with their prototypes) */
ncclResult_t	ncclGroupStart(void);
ncclResult_t	ncclGroupEnd(void);

/* The shim's interface (contrib/nccl_checkpoint). */
ncclResult_t	ncclCheckpointPrepare(void);
ncclResult_t	ncclCheckpointRestore(void);
ncclResult_t	ncclCheckpointGetVersion(int *, int *);

#define FAKENCCL_VERSION	22907	/* the stand-in's: 2.29.7 */
#define FAKENCCL_CKPT_VERSION	1
#define ID_MAGIC	"fakenccl"
#define ID_MAGICLEN	8
#define ID_RANDLEN	16
#define FLAG_OFF	0
#define SLOT_OFF	4096
#define SLOTBYTES	((size_t)512 * 1024)
#define BUFBYTES	(SLOT_OFF + 2 * SLOTBYTES)
#define MEET_MS		60000
#define HANDLE_HEX	(2 * CU_IPC_HANDLE_SIZE)

struct ncclComm {
	struct ncclComm	*next;		/* the live ones */
	int		 nranks, rank;
	int		 dev;
	CUcontext	 ctx;
	char		 dir[PATH_MAX];	/* FAKENCCL_DIR/HEX */
	unsigned long	 gen;
	uint64_t	 seq;		/* collectives done */
	int		 up;		/* its buffers are there */
	CUdeviceptr	 buf;		/* this rank's, exported */
	CUdeviceptr	*peer;		/* each rank's, here; NULL: not open */
};

/* The driver's entry points, found at the first need. */
static struct cudrv {
	CUresult	(*CtxGetCurrent)(CUcontext *);
	CUresult	(*CtxGetDevice)(CUdevice *);
	CUresult	(*CtxPushCurrent)(CUcontext);
	CUresult	(*CtxPopCurrent)(CUcontext *);
	CUresult	(*MemAlloc)(CUdeviceptr *, size_t);
	CUresult	(*MemFree)(CUdeviceptr);
	CUresult	(*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
	CUresult	(*MemcpyDtoH)(void *, CUdeviceptr, size_t);
	CUresult	(*IpcGetMemHandle)(CUipcMemHandle *, CUdeviceptr);
	CUresult	(*IpcOpenMemHandle)(CUdeviceptr *, CUipcMemHandle,
			    unsigned int);
	CUresult	(*IpcCloseMemHandle)(CUdeviceptr);
	CUresult	(*StreamWaitValue32)(CUstream, CUdeviceptr, cuuint32_t,
			    unsigned int);
	CUresult	(*StreamWriteValue32)(CUstream, CUdeviceptr,
			    cuuint32_t, unsigned int);
	CUresult	(*GetErrorName)(CUresult, const char **);
} cu;

static pthread_mutex_t		 listmtx = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t		 loadmtx = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t		 errmtx = PTHREAD_MUTEX_INITIALIZER;
static struct ncclComm		*comms;		/* guarded by listmtx */
static int			 loaded;	/* guarded by loadmtx */
static char			 lasterr[512];	/* guarded by errmtx */
static _Thread_local int	 groupdepth;

static void		 seterr(const char *, ...)
			    __attribute__((__format__(__printf__, 1, 2)));
static ncclResult_t	 cuda_err(const char *, CUresult);
static ncclResult_t	 load(void);
static uint64_t		 now_ms(void);
static void		 msleep(unsigned int);
static int		 rank_path(char *, size_t, const struct ncclComm *,
			    const char *, unsigned long, int);
static int		 put_file(const char *, const char *);
static ncclResult_t	 meet(struct ncclComm *, const char *,
			    unsigned long);
static ncclResult_t	 read_handle(const struct ncclComm *, int,
			    CUipcMemHandle *);
static ncclResult_t	 build(struct ncclComm *);
static void		 close_peers(struct ncclComm *);
static ncclResult_t	 teardown(struct ncclComm *, int);
static void		 dir_remove(struct ncclComm *);
static int		 unlink_comm(struct ncclComm *);
static ncclResult_t	 comm_end(ncclComm_t, int);
static ncclResult_t	 push(const struct ncclComm *);
static void		 pop(void);
static ncclResult_t	 collective(struct ncclComm *, const void *, void *,
			    size_t, int, int, CUstream);
static size_t		 type_size(ncclDataType_t);

static void
seterr(const char *fmt, ...)
{
	va_list	ap;

	pthread_mutex_lock(&errmtx);
	va_start(ap, fmt);
	vsnprintf(lasterr, sizeof lasterr, fmt, ap);
	va_end(ap);
	pthread_mutex_unlock(&errmtx);
}

static ncclResult_t
cuda_err(const char *what, CUresult r)
{
	const char	*s = NULL;

	if (cu.GetErrorName == NULL || cu.GetErrorName(r, &s) != CUDA_SUCCESS ||
	    s == NULL)
		s = "unknown CUresult";
	seterr("%s: %s", what, s);
	return ncclUnhandledCudaError;
}

static ncclResult_t
load(void)
{
	static const struct {
		const char	*name;
		size_t		 off;
	} syms[] = {
#define SYM(n, f)	{ n, offsetof(struct cudrv, f) }
		SYM("cuCtxGetCurrent", CtxGetCurrent),
		SYM("cuCtxGetDevice", CtxGetDevice),
		SYM("cuCtxPushCurrent_v2", CtxPushCurrent),
		SYM("cuCtxPopCurrent_v2", CtxPopCurrent),
		SYM("cuMemAlloc_v2", MemAlloc),
		SYM("cuMemFree_v2", MemFree),
		SYM("cuMemcpyHtoD_v2", MemcpyHtoD),
		SYM("cuMemcpyDtoH_v2", MemcpyDtoH),
		SYM("cuIpcGetMemHandle", IpcGetMemHandle),
		SYM("cuIpcOpenMemHandle_v2", IpcOpenMemHandle),
		SYM("cuIpcCloseMemHandle", IpcCloseMemHandle),
		SYM("cuStreamWaitValue32_v2", StreamWaitValue32),
		SYM("cuStreamWriteValue32_v2", StreamWriteValue32),
		SYM("cuGetErrorName", GetErrorName),
#undef SYM
	};
	ncclResult_t	 r = ncclSuccess;
	size_t		 i;
	void		*h, *fn;

	pthread_mutex_lock(&loadmtx);
	if (loaded)
		goto out;
	if ((h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) == NULL) {
		seterr("cannot load libcuda.so.1: %s", dlerror());
		r = ncclSystemError;
		goto out;
	}
	for (i = 0; i < sizeof syms / sizeof syms[0]; i++) {
		if ((fn = dlsym(h, syms[i].name)) == NULL) {
			seterr("libcuda.so.1 lacks %s", syms[i].name);
			r = ncclSystemError;
			goto out;
		}
		*(void **)((char *)&cu + syms[i].off) = fn;
	}
	loaded = 1;
out:
	pthread_mutex_unlock(&loadmtx);
	return r;
}

static uint64_t
now_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void
msleep(unsigned int ms)
{
	struct timespec	ts;

	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (long)(ms % 1000) * 1000000L;
	nanosleep(&ts, NULL);
}

/* dir/WHAT.GEN.RANK, or with dot a temporary name for it. */
static int
rank_path(char *path, size_t len, const struct ncclComm *c,
    const char *what, unsigned long gen, int rank)
{
	int	n;

	n = snprintf(path, len, "%s/%s.%lu.%d", c->dir, what, gen, rank);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* Writes text to a temporary file and renames it to path. */
static int
put_file(const char *path, const char *text)
{
	char	tmp[PATH_MAX + 16], *slash;
	size_t	len = strlen(text);
	int	fd, n;

	/* (a leading dot: a name no rank looks for) */
	if ((slash = strrchr(path, '/')) == NULL)
		return -1;
	n = snprintf(tmp, sizeof tmp, "%.*s/.%s.%ld", (int)(slash - path),
	    path, slash + 1, (long)getpid());
	if (n < 0 || (size_t)n >= sizeof tmp)
		return -1;
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	    0644)) == -1)
		return -1;
	if (write(fd, text, len) != (ssize_t)len) {
		close(fd);
		unlink(tmp);
		return -1;
	}
	close(fd);
	if (rename(tmp, path) == -1) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

/* Waits until every rank's WHAT.GEN is there, MEET_MS at most. */
static ncclResult_t
meet(struct ncclComm *c, const char *what, unsigned long gen)
{
	char		 path[PATH_MAX];
	uint64_t	 until = now_ms() + MEET_MS;
	int		 r, left;

	for (;;) {
		left = -1;
		for (r = 0; r < c->nranks && left == -1; r++)
			if (rank_path(path, sizeof path, c, what, gen, r) ==
			    -1 || access(path, F_OK) == -1)
				left = r;
		if (left == -1)
			return ncclSuccess;
		if (now_ms() > until) {
			seterr("rank %d: no %s.%lu from rank %d within %d ms",
			    c->rank, what, gen, left, MEET_MS);
			return ncclSystemError;
		}
		msleep(1);
	}
}

static ncclResult_t
push(const struct ncclComm *c)
{
	CUresult	r;

	if ((r = cu.CtxPushCurrent(c->ctx)) != CUDA_SUCCESS)
		return cuda_err("cuCtxPushCurrent", r);
	return ncclSuccess;
}

static void
pop(void)
{
	cu.CtxPopCurrent(NULL);
}

/* Closes what this rank opened of its peers' buffers. */
static void
close_peers(struct ncclComm *c)
{
	int	r;

	for (r = 0; r < c->nranks; r++) {
		if (r != c->rank && c->peer[r] != 0)
			cu.IpcCloseMemHandle(c->peer[r]);
		c->peer[r] = 0;
	}
}

/* Rank k's handle, from its up.GEN: "PID HEX". */
static ncclResult_t
read_handle(const struct ncclComm *c, int k, CUipcMemHandle *h)
{
	char		 path[PATH_MAX], text[HANDLE_HEX + 64], *p, *e;
	unsigned int	 i, b;
	ssize_t		 got;
	int		 fd;

	if (rank_path(path, sizeof path, c, "up", c->gen, k) == -1)
		return ncclInternalError;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		seterr("rank %d: %s: %s", c->rank, path, strerror(errno));
		return ncclSystemError;
	}
	got = read(fd, text, sizeof text - 1);
	close(fd);
	if (got < 0)
		got = 0;
	text[got] = '\0';
	if ((p = strchr(text, ' ')) == NULL ||
	    (e = strchr(p + 1, '\n')) == NULL || e - (p + 1) != HANDLE_HEX) {
		seterr("rank %d: %s: not a handle", c->rank, path);
		return ncclSystemError;
	}
	for (i = 0, p++; i < sizeof h->reserved; i++, p += 2) {
		if (sscanf(p, "%2x", &b) != 1) {
			seterr("rank %d: %s: not a handle", c->rank, path);
			return ncclSystemError;
		}
		h->reserved[i] = (char)b;
	}
	return ncclSuccess;
}

/*
 * The buffers of generation c->gen: this rank's, with its FLAG at the
 * count of collectives so far, published in up.GEN, then every peer's.
 * Called with the communicator's context current.
 */
static ncclResult_t
build(struct ncclComm *c)
{
	CUipcMemHandle	 h;
	char		 path[PATH_MAX], text[HANDLE_HEX + 64];
	unsigned int	 i;
	ncclResult_t	 nr;
	CUresult	 r;
	size_t		 n;
	int		 k, published = 0;

	c->buf = 0;
	if ((r = cu.MemAlloc(&c->buf, BUFBYTES)) != CUDA_SUCCESS) {
		c->buf = 0;
		nr = cuda_err("cuMemAlloc", r);
		goto fail;
	}
	if ((r = cu.StreamWriteValue32(NULL, c->buf + FLAG_OFF,
	    (cuuint32_t)c->seq, 0)) != CUDA_SUCCESS) {
		nr = cuda_err("cuStreamWriteValue32", r);
		goto fail;
	}
	if ((r = cu.IpcGetMemHandle(&h, c->buf)) != CUDA_SUCCESS) {
		nr = cuda_err("cuIpcGetMemHandle", r);
		goto fail;
	}
	n = (size_t)snprintf(text, sizeof text, "%ld ", (long)getpid());
	for (i = 0; i < sizeof h.reserved; i++)
		n += (size_t)snprintf(text + n, sizeof text - n, "%02x",
		    (unsigned char)h.reserved[i]);
	snprintf(text + n, sizeof text - n, "\n");
	if (rank_path(path, sizeof path, c, "up", c->gen, c->rank) == -1 ||
	    put_file(path, text) == -1) {
		seterr("rank %d: cannot write %s: %s", c->rank, path,
		    strerror(errno));
		nr = ncclSystemError;
		goto fail;
	}
	published = 1;
	if ((nr = meet(c, "up", c->gen)) != ncclSuccess)
		goto fail;
	c->peer[c->rank] = c->buf;
	for (k = 0; k < c->nranks; k++) {
		if (k == c->rank)
			continue;
		if ((nr = read_handle(c, k, &h)) != ncclSuccess)
			goto fail;
		if ((r = cu.IpcOpenMemHandle(&c->peer[k], h,
		    CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)) != CUDA_SUCCESS) {
			c->peer[k] = 0;
			nr = cuda_err("cuIpcOpenMemHandle", r);
			goto fail;
		}
	}
	/* Every rank is at this generation: none waits for down.GEN-1. */
	if (c->gen > 0 && rank_path(path, sizeof path, c, "down", c->gen - 1,
	    c->rank) == 0)
		unlink(path);
	c->up = 1;
	return ncclSuccess;

fail:
	close_peers(c);
	if (published && rank_path(path, sizeof path, c, "up", c->gen,
	    c->rank) == 0)
		unlink(path);
	if (c->buf != 0)
		cu.MemFree(c->buf);
	c->buf = 0;
	return nr;
}

/*
 * Takes the communicator's buffers down; with wait, after the barrier
 * of down.GEN, so that no peer has this rank's buffer open when it is
 * freed (a barrier that fails keeps it, for that reason).  Called with
 * its context current.
 */
static ncclResult_t
teardown(struct ncclComm *c, int wait)
{
	char		path[PATH_MAX];
	ncclResult_t	nr = ncclSuccess;
	CUresult	r;

	close_peers(c);
	c->up = 0;
	if (wait) {
		if (rank_path(path, sizeof path, c, "down", c->gen, c->rank) ==
		    -1 || put_file(path, "down\n") == -1) {
			seterr("rank %d: cannot write %s: %s", c->rank, path,
			    strerror(errno));
			return ncclSystemError;
		}
		if ((nr = meet(c, "down", c->gen)) != ncclSuccess)
			return nr;
	}
	/* No one reads up.GEN again. */
	if (rank_path(path, sizeof path, c, "up", c->gen, c->rank) == 0)
		unlink(path);
	if ((r = cu.MemFree(c->buf)) != CUDA_SUCCESS)
		nr = cuda_err("cuMemFree", r);
	c->buf = 0;
	return nr;
}

/*
 * At ncclCommDestroy(), past the barrier: gone.RANK, and the last rank
 * there empties the directory.
 */
static void
dir_remove(struct ncclComm *c)
{
	struct dirent	*de;
	char		 path[PATH_MAX + 256];
	DIR		*d;
	int		 r;

	snprintf(path, sizeof path, "%s/gone.%d", c->dir, c->rank);
	if (put_file(path, "gone\n") == -1)
		return;
	for (r = 0; r < c->nranks; r++) {
		snprintf(path, sizeof path, "%s/gone.%d", c->dir, r);
		if (access(path, F_OK) == -1)
			return;
	}
	if ((d = opendir(c->dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		snprintf(path, sizeof path, "%s/%s", c->dir, de->d_name);
		unlink(path);
	}
	closedir(d);
	rmdir(c->dir);
}

static size_t
type_size(ncclDataType_t t)
{
	switch (t) {
	case ncclInt8:
	case ncclUint8:
	case ncclFloat8e4m3:
	case ncclFloat8e5m2:
		return 1;
	case ncclFloat16:
	case ncclBfloat16:
		return 2;
	case ncclInt32:
	case ncclUint32:
	case ncclFloat32:
		return 4;
	case ncclInt64:
	case ncclUint64:
	case ncclFloat64:
		return 8;
	default:
		return 0;
	}
}

/*
 * Collective number seq + 1 (see the top): root -1 sums n 64-bit words
 * of every rank, else n bytes of root are copied.
 */
static ncclResult_t
collective(struct ncclComm *c, const void *sendbuff, void *recvbuff,
    size_t n, int root, int sum, CUstream stream)
{
	uint64_t	 s = c->seq + 1, *acc = NULL, *in = NULL;
	CUdeviceptr	 slot = SLOT_OFF + (s % 2) * SLOTBYTES;
	ncclResult_t	 nr;
	CUresult	 r;
	size_t		 i, words = n / sizeof(uint64_t);
	int		 k;

	if ((nr = push(c)) != ncclSuccess)
		return nr;
	if ((acc = malloc(n)) == NULL || (in = malloc(n)) == NULL) {
		seterr("rank %d: out of memory", c->rank);
		nr = ncclSystemError;
		goto out;
	}
	if (root == -1 || root == c->rank) {
		if ((r = cu.MemcpyDtoH(in, (CUdeviceptr)(uintptr_t)sendbuff,
		    n)) != CUDA_SUCCESS) {
			nr = cuda_err("cuMemcpyDtoH", r);
			goto out;
		}
		if ((r = cu.MemcpyHtoD(c->buf + slot, in, n)) != CUDA_SUCCESS) {
			nr = cuda_err("cuMemcpyHtoD", r);
			goto out;
		}
	}
	if ((r = cu.StreamWriteValue32(stream, c->buf + FLAG_OFF,
	    (cuuint32_t)s, 0)) != CUDA_SUCCESS) {
		nr = cuda_err("cuStreamWriteValue32", r);
		goto out;
	}
	for (k = 0; k < c->nranks; k++)
		if (k != c->rank && (r = cu.StreamWaitValue32(stream,
		    c->peer[k] + FLAG_OFF, (cuuint32_t)s,
		    CU_STREAM_WAIT_VALUE_GEQ)) != CUDA_SUCCESS) {
			nr = cuda_err("cuStreamWaitValue32", r);
			goto out;
		}
	if (sum) {
		memset(acc, 0, n);
		for (k = 0; k < c->nranks; k++) {
			if ((r = cu.MemcpyDtoH(in, c->peer[k] + slot, n)) !=
			    CUDA_SUCCESS) {
				nr = cuda_err("cuMemcpyDtoH", r);
				goto out;
			}
			for (i = 0; i < words; i++)
				acc[i] += in[i];
		}
	} else if ((r = cu.MemcpyDtoH(acc, c->peer[root] + slot, n)) !=
	    CUDA_SUCCESS) {
		nr = cuda_err("cuMemcpyDtoH", r);
		goto out;
	}
	if ((r = cu.MemcpyHtoD((CUdeviceptr)(uintptr_t)recvbuff, acc, n)) !=
	    CUDA_SUCCESS) {
		nr = cuda_err("cuMemcpyHtoD", r);
		goto out;
	}
	c->seq = s;
	nr = ncclSuccess;
out:
	free(acc);
	free(in);
	pop();
	return nr;
}

/* The API. */

ncclResult_t
ncclGetVersion(int *version)
{
	if (version == NULL)
		return ncclInvalidArgument;
	*version = FAKENCCL_VERSION;
	return ncclSuccess;
}

ncclResult_t
ncclGetUniqueId(ncclUniqueId *uniqueId)
{
	unsigned char	rnd[ID_RANDLEN];
	size_t		got = 0;
	ssize_t		n;

	if (uniqueId == NULL)
		return ncclInvalidArgument;
	while (got < sizeof rnd) {
		if ((n = getrandom(rnd + got, sizeof rnd - got, 0)) == -1) {
			if (errno == EINTR)
				continue;
			seterr("getrandom: %s", strerror(errno));
			return ncclSystemError;
		}
		got += (size_t)n;
	}
	memset(uniqueId, 0, sizeof *uniqueId);
	memcpy(uniqueId->internal, ID_MAGIC, ID_MAGICLEN);
	memcpy(uniqueId->internal + ID_MAGICLEN, rnd, sizeof rnd);
	return ncclSuccess;
}

ncclResult_t
ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
	struct ncclComm	*c = NULL;
	const char	*top = getenv("FAKENCCL_DIR");
	CUdevice	 dev;
	ncclResult_t	 nr;
	CUresult	 r;
	size_t		 n;
	int		 i, pushed = 0;

	if (comm == NULL || nranks < 1 || rank < 0 || rank >= nranks ||
	    memcmp(commId.internal, ID_MAGIC, ID_MAGICLEN) != 0) {
		seterr("ncclCommInitRank: invalid argument");
		return ncclInvalidArgument;
	}
	*comm = NULL;
	if (top == NULL || *top == '\0') {
		seterr("ncclCommInitRank: FAKENCCL_DIR is not set");
		return ncclInvalidUsage;
	}
	if ((nr = load()) != ncclSuccess)
		return nr;
	if ((c = calloc(1, sizeof *c)) == NULL ||
	    (c->peer = calloc((size_t)nranks, sizeof *c->peer)) == NULL) {
		seterr("ncclCommInitRank: out of memory");
		nr = ncclSystemError;
		goto fail;
	}
	c->nranks = nranks;
	c->rank = rank;
	n = (size_t)snprintf(c->dir, sizeof c->dir, "%s/", top);
	for (i = 0; i < ID_RANDLEN && n < sizeof c->dir; i++)
		n += (size_t)snprintf(c->dir + n, sizeof c->dir - n, "%02x",
		    (unsigned char)commId.internal[ID_MAGICLEN + i]);
	if (n >= sizeof c->dir - 64) {
		seterr("ncclCommInitRank: FAKENCCL_DIR is too long");
		nr = ncclInvalidUsage;
		goto fail;
	}
	if (mkdir(c->dir, 0755) == -1 && errno != EEXIST) {
		seterr("ncclCommInitRank: %s: %s", c->dir, strerror(errno));
		nr = ncclSystemError;
		goto fail;
	}
	if ((r = cu.CtxGetCurrent(&c->ctx)) != CUDA_SUCCESS) {
		nr = cuda_err("cuCtxGetCurrent", r);
		goto fail;
	}
	if (c->ctx == NULL) {
		seterr("ncclCommInitRank: no current CUDA context");
		nr = ncclInvalidUsage;
		goto fail;
	}
	if ((nr = push(c)) != ncclSuccess)
		goto fail;
	pushed = 1;
	if ((r = cu.CtxGetDevice(&dev)) != CUDA_SUCCESS) {
		nr = cuda_err("cuCtxGetDevice", r);
		goto fail;
	}
	c->dev = (int)dev;
	if ((nr = build(c)) != ncclSuccess)
		goto fail;
	pop();
	pthread_mutex_lock(&listmtx);
	c->next = comms;
	comms = c;
	pthread_mutex_unlock(&listmtx);
	*comm = c;
	return ncclSuccess;

fail:
	if (pushed)
		pop();
	if (c != NULL)
		free(c->peer);
	free(c);
	return nr;
}

/* Takes c off the list of live communicators; 0 if it is not there. */
static int
unlink_comm(struct ncclComm *c)
{
	struct ncclComm	**pp;
	int		  found = 0;

	pthread_mutex_lock(&listmtx);
	for (pp = &comms; *pp != NULL; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			found = 1;
			break;
		}
	pthread_mutex_unlock(&listmtx);
	return found;
}

/*
 * Destroy (wait): collective, then the files go with the last rank.
 * Abort: at once, and this rank's files with it.
 */
static ncclResult_t
comm_end(ncclComm_t comm, int wait)
{
	char		path[PATH_MAX];
	ncclResult_t	nr = ncclSuccess;

	if (comm == NULL || !unlink_comm(comm))
		return ncclInvalidArgument;
	if (comm->up && (nr = push(comm)) == ncclSuccess) {
		nr = teardown(comm, wait);
		pop();
	}
	if (wait && nr == ncclSuccess)
		dir_remove(comm);
	else if (!wait && rank_path(path, sizeof path, comm, "down",
	    comm->gen, comm->rank) == 0)
		unlink(path);
	free(comm->peer);
	free(comm);
	return nr;
}

ncclResult_t
ncclCommDestroy(ncclComm_t comm)
{
	return comm_end(comm, 1);
}

ncclResult_t
ncclCommAbort(ncclComm_t comm)
{
	return comm_end(comm, 0);
}

ncclResult_t
ncclCommCount(const ncclComm_t comm, int *count)
{
	if (comm == NULL || count == NULL)
		return ncclInvalidArgument;
	*count = comm->nranks;
	return ncclSuccess;
}

ncclResult_t
ncclCommUserRank(const ncclComm_t comm, int *rank)
{
	if (comm == NULL || rank == NULL)
		return ncclInvalidArgument;
	*rank = comm->rank;
	return ncclSuccess;
}

ncclResult_t
ncclCommCuDevice(const ncclComm_t comm, int *device)
{
	if (comm == NULL || device == NULL)
		return ncclInvalidArgument;
	*device = comm->dev;
	return ncclSuccess;
}

ncclResult_t
ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
    ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
    cudaStream_t stream)
{
	if (comm == NULL || (datatype != ncclInt64 && datatype != ncclUint64) ||
	    op != ncclSum || count > SLOTBYTES / sizeof(uint64_t) ||
	    (count > 0 && (sendbuff == NULL || recvbuff == NULL))) {
		seterr("ncclAllReduce: invalid argument");
		return ncclInvalidArgument;
	}
	if (!comm->up) {
		seterr("ncclAllReduce: the communicator is down");
		return ncclInvalidUsage;
	}
	if (count == 0)
		return ncclSuccess;
	return collective(comm, sendbuff, recvbuff, count * sizeof(uint64_t),
	    -1, 1, (CUstream)stream);
}

ncclResult_t
ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
    ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
	size_t	sz = type_size(datatype);

	if (comm == NULL || sz == 0 || root < 0 || root >= comm->nranks ||
	    count > SLOTBYTES / sz || (count > 0 && recvbuff == NULL) ||
	    (count > 0 && root == comm->rank && sendbuff == NULL)) {
		seterr("ncclBroadcast: invalid argument");
		return ncclInvalidArgument;
	}
	if (!comm->up) {
		seterr("ncclBroadcast: the communicator is down");
		return ncclInvalidUsage;
	}
	if (count == 0)
		return ncclSuccess;
	return collective(comm, sendbuff, recvbuff, count * sz, root, 0,
	    (CUstream)stream);
}

ncclResult_t
ncclGroupStart(void)
{
	groupdepth++;
	return ncclSuccess;
}

ncclResult_t
ncclGroupEnd(void)
{
	if (groupdepth == 0) {
		seterr("ncclGroupEnd: no group started");
		return ncclInvalidUsage;
	}
	groupdepth--;
	return ncclSuccess;
}

const char *
ncclGetErrorString(ncclResult_t result)
{
	switch (result) {
	case ncclSuccess:
		return "no error";
	case ncclUnhandledCudaError:
		return "unhandled cuda error";
	case ncclSystemError:
		return "unhandled system error";
	case ncclInternalError:
		return "internal error";
	case ncclInvalidArgument:
		return "invalid argument";
	case ncclInvalidUsage:
		return "invalid usage";
	case ncclRemoteError:
		return "remote process exited or there was a network error";
	case ncclInProgress:
		return "NCCL operation in progress";
	default:
		return "unknown result code";
	}
}

/* The last error of the process (comm is not used, as in NCCL). */
const char *
ncclGetLastError(ncclComm_t comm)
{
	return lasterr;
}

/* The shim's interface. */

/*
 * The list stays locked throughout: communicators are not made or
 * destroyed while the process is taken down or rebuilt.
 */
ncclResult_t
ncclCheckpointPrepare(void)
{
	struct ncclComm	*c;
	ncclResult_t	 nr = ncclSuccess, e;

	pthread_mutex_lock(&listmtx);
	for (c = comms; c != NULL; c = c->next) {
		if (!c->up)
			continue;
		if ((e = push(c)) == ncclSuccess) {
			e = teardown(c, 1);
			pop();
		}
		if (e != ncclSuccess && nr == ncclSuccess)
			nr = e;
	}
	pthread_mutex_unlock(&listmtx);
	return nr;
}

/*
 * A rebuild that fails leaves its communicator down, at the generation
 * it tried: the ranks are no longer at one, and the job must abort.
 */
/*
 * Where a rebuild meets: as the contrib shim reads the address of the
 * key-value store its ranks meet through from the file that
 * NCCL_CHECKPOINT_KVS_PATH names, once restored, the stand-in reads a
 * directory from there (its first line) and meets in DIR/HEX/ instead
 * of FAKENCCL_DIR/HEX/, so that a job restored beside what its original
 * left after its own rebuild meets afresh.  Without the variable, or
 * the file, the communicator stays where it met.
 */
static void
kvs_move(struct ncclComm *c)
{
	const char	*path = getenv("NCCL_CHECKPOINT_KVS_PATH");
	char		 top[PATH_MAX], nd[PATH_MAX], *hex;
	FILE		*f;

	if (path == NULL || *path == '\0' || (f = fopen(path, "r")) == NULL)
		return;
	if (fgets(top, sizeof top, f) != NULL) {
		top[strcspn(top, "\n")] = '\0';
		hex = strrchr(c->dir, '/');
		if (top[0] != '\0' && hex != NULL &&
		    strlen(top) + strlen(hex) < sizeof c->dir - 64) {
			memcpy(nd, top, strlen(top));
			memcpy(nd + strlen(top), hex, strlen(hex) + 1);
			if ((mkdir(top, 0755) == 0 || errno == EEXIST) &&
			    (mkdir(nd, 0755) == 0 || errno == EEXIST))
				memcpy(c->dir, nd, strlen(nd) + 1);
		}
	}
	fclose(f);
}

ncclResult_t
ncclCheckpointRestore(void)
{
	struct ncclComm	*c;
	ncclResult_t	 nr = ncclSuccess, e;

	pthread_mutex_lock(&listmtx);
	for (c = comms; c != NULL; c = c->next) {
		if (c->up)
			continue;
		if ((e = push(c)) == ncclSuccess) {
			c->gen++;
			kvs_move(c);
			e = build(c);
			pop();
		}
		if (e != ncclSuccess && nr == ncclSuccess)
			nr = e;
	}
	pthread_mutex_unlock(&listmtx);
	return nr;
}

ncclResult_t
ncclCheckpointGetVersion(int *checkpointVersion, int *ncclVersion)
{
	if (checkpointVersion == NULL || ncclVersion == NULL)
		return ncclInvalidArgument;
	*checkpointVersion = FAKENCCL_CKPT_VERSION;
	*ncclVersion = FAKENCCL_VERSION;
	return ncclSuccess;
}
