/*
 * storage.c: device memory through the driver's custom storage (driver
 * API 13040, see gpu/custom.h).
 *
 * A checkpoint has the driver map each GPU's memory of a locked process
 * into us, and copies it, a GPU a thread, through a ring of buffers of
 * our own (pinned where the driver gives them) into a spool file a GPU,
 * whose form the caller chooses (struct gck_cuda_spool: a checkpoint's
 * are the image's own compressed chunks, a suspend's the memory as it
 * is); the complete call then leaves the process CHECKPOINTED with
 * nothing of its device memory in its host memory.  The spool waits for
 * the image, which takes it once criu has dumped the tree: the driver
 * must have finished before criu reads the process, and the image's
 * manifest, written first, lists criu's files.  A restore mirrors it,
 * the memory coming from the image (or, to roll a failed checkpoint
 * back, from the spool), each piece checked before it is copied to the
 * GPU.
 */
#include "config.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda.h>

#include "private.h"
#include "core/util.h"
#include "gpu/cuda.h"
#include "gpu/custom.h"
#include "gpu/cudapriv.h"

#define RING_N		2
#define RING_BUF	(8u << 20)	/* bytes a buffer */

struct ring {
	void		*buf[RING_N];
	size_t		 nbuf;
	int		 pinned;
	int		 retained, pushed;
	CUdevice	 dev;
};

/* One GPU's memory of a process, being copied. */
struct devjob {
	struct gck_cuda			*cu;
	struct gck_cproc		*p;
	const struct gck_cu_storage_dev	*d;
	unsigned int			 k;
	gck_cuda_src_fn			 src;	/* copy in: from it */
	void				*srcarg;
	struct gck_ctx			*ctx;	/* src's, or NULL */
	CUresult			 cuerr;
	int				 syserr;
	int				 srcfail;
};

/*
 * The spool file of GPU k (as the driver describes the process's GPUs)
 * of process pid under dir.  Returns 0, or -1 if it does not fit.
 */
int
gck_cuda_spool_path(const char *dir, pid_t pid, unsigned int k, char *buf,
    size_t len)
{
	int	n;

	n = snprintf(buf, len, "%s/%d-%u.mem", dir, (int)pid, k);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

/*
 * The name in an image of the file of device memory of GPU k (as the
 * driver describes the process's GPUs) of process pid, as the manifest
 * names it.
 */
void
gck_cuda_dev_file(char *buf, size_t len, pid_t pid, unsigned int k)
{
	snprintf(buf, len, "cuda-%d-%u.mem", (int)pid, k);
}

/*
 * The size of the segments of size bytes of a GPU's memory that go
 * through custom storage: the memory is cut in files of that many bytes,
 * the last the rest, which the image lists a segment of each GPU after
 * the other, so that a reader of the stream has the memory of every GPU
 * before it at once (gpuckpt-image(5)).  16 MiB, doubled until the GPU's
 * memory makes at most GCK_SEG_GPU of them.
 */
uint64_t
gck_cuda_segment(uint64_t size)
{
	uint64_t	seg = GCK_SEG_MIN;

	while (gck_cuda_nsegs(size, seg) > GCK_SEG_GPU &&
	    seg < (UINT64_C(1) << 40))
		seg *= 2;
	return seg;
}

/*
 * The segments of size seg (0: the memory is one file, as images before
 * segments hold it) that size bytes of a GPU's memory make: at least one,
 * an empty GPU's empty file.
 */
uint64_t
gck_cuda_nsegs(uint64_t size, uint64_t seg)
{
	if (seg == 0 || size <= seg)
		return 1;
	return size / seg + (size % seg != 0);
}

/* The bytes of segment s of those. */
uint64_t
gck_cuda_seg_size(uint64_t size, uint64_t seg, uint64_t s)
{
	if (seg == 0)
		return s == 0 ? size : 0;
	if (s * seg >= size)
		return 0;
	return size - s * seg < seg ? size - s * seg : seg;
}

/*
 * The name in an image of segment s (of size seg) of the memory of GPU
 * k of process pid: cuda-PID-K.mem.NNNNN, or, unsegmented (seg 0), its
 * one file.
 */
void
gck_cuda_seg_file(char *buf, size_t len, pid_t pid, unsigned int k,
    uint64_t seg, uint64_t s)
{
	if (seg == 0)
		gck_cuda_dev_file(buf, len, pid, k);
	else
		snprintf(buf, len, "cuda-%d-%u.mem.%05llu", (int)pid, k,
		    (unsigned long long)s);
}

/*
 * Buffers for the copies: pinned through the primary context of the
 * first GPU when the driver gives them, else of our own (the copies
 * then go through the driver's staging).
 */
static void
ring_open(struct gck_cuda *cu, struct ring *rg)
{
	CUcontext	c;
	size_t		i;

	memset(rg, 0, sizeof *rg);
	if (cu->MemHostAlloc != NULL && cu->DeviceGet(&rg->dev, 0) ==
	    CUDA_SUCCESS && cu->PrimaryCtxRetain(&c, rg->dev) ==
	    CUDA_SUCCESS) {
		rg->retained = 1;
		if (cu->CtxPushCurrent(c) == CUDA_SUCCESS) {
			rg->pushed = 1;
			for (i = 0; i < RING_N; i++) {
				if (cu->MemHostAlloc(&rg->buf[i], RING_BUF,
				    CU_MEMHOSTALLOC_PORTABLE) != CUDA_SUCCESS)
					break;
				rg->nbuf++;
			}
			if (rg->nbuf == RING_N) {
				rg->pinned = 1;
				return;
			}
			while (rg->nbuf > 0)
				cu->MemFreeHost(rg->buf[--rg->nbuf]);
		}
	}
	for (i = 0; i < RING_N; i++) {
		rg->buf[i] = mmap(NULL, RING_BUF, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (rg->buf[i] == MAP_FAILED)
			break;
		rg->nbuf++;
	}
}

static void
ring_close(struct gck_cuda *cu, struct ring *rg)
{
	CUcontext	c;

	while (rg->nbuf > 0) {
		if (rg->pinned)
			cu->MemFreeHost(rg->buf[--rg->nbuf]);
		else
			munmap(rg->buf[--rg->nbuf], RING_BUF);
	}
	if (rg->pushed)
		cu->CtxPopCurrent(&c);
	if (rg->retained)
		cu->PrimaryCtxRelease(rg->dev);
}

/* A spool file of the memory as it is (no struct gck_cuda_spool). */
struct rawfile {
	int		 fd;
	int		 done;
	char		 path[PATH_MAX];
};

static int
raw_create(void *arg, const char *path, pid_t pid, unsigned int k,
    uint64_t size, void **hp)
{
	struct rawfile	*f;
	int		 e;

	(void)arg;
	(void)pid;
	(void)k;
	if ((f = calloc(1, sizeof *f)) == NULL)
		return ENOMEM;
	snprintf(f->path, sizeof f->path, "%s", path);
	if ((f->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	    0600)) == -1) {
		e = errno;
		free(f);
		return e;
	}
	/* Its full size first: a copy never stops half-way for room. */
	if (size > 0 && (e = posix_fallocate(f->fd, 0, (off_t)size)) != 0 &&
	    e != EOPNOTSUPP && e != EINVAL) {
		close(f->fd);
		unlink(path);
		free(f);
		return e;
	}
	*hp = f;
	return 0;
}

static int
raw_put(void *h, const void *buf, size_t n)
{
	struct rawfile	*f = h;
	const char	*p = buf;
	ssize_t		 w;

	while (n > 0) {
		if ((w = write(f->fd, p, n)) == -1) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int
raw_commit(void *h)
{
	struct rawfile	*f = h;
	int		 fd = f->fd;

	f->fd = -1;
	if (close(fd) == -1)
		return errno;
	f->done = 1;
	return 0;
}

static int
raw_open(void *arg, const char *path, uint64_t *sizep, void **hp)
{
	struct rawfile	*f;
	struct stat	 st;
	int		 e;

	(void)arg;
	if ((f = calloc(1, sizeof *f)) == NULL)
		return ENOMEM;
	f->done = 1;
	if ((f->fd = open(path, O_RDONLY | O_CLOEXEC)) == -1 ||
	    fstat(f->fd, &st) == -1) {
		e = errno;
		if (f->fd != -1)
			close(f->fd);
		free(f);
		return e;
	}
	*sizep = (uint64_t)st.st_size;
	*hp = f;
	return 0;
}

static ssize_t
raw_get(void *h, void *buf, size_t len)
{
	struct rawfile	*f = h;
	ssize_t		 n;

	do
		n = read(f->fd, buf, len);
	while (n == -1 && errno == EINTR);
	return n;
}

static void
raw_drop(void *h)
{
	struct rawfile	*f = h;

	if (f == NULL)
		return;
	if (f->fd != -1)
		close(f->fd);
	if (!f->done)
		unlink(f->path);
	free(f);
}

static const struct gck_cuda_spool rawspool = {
	raw_create, raw_put, raw_commit, raw_open, raw_get, raw_drop, NULL
};

/* The files of cu's spool. */
static const struct gck_cuda_spool *
spool_ops(const struct gck_cuda *cu)
{
	return cu->sops != NULL ? cu->sops : &rawspool;
}

/*
 * Copies GPU j->k's memory into its spool file: one buffer is put there
 * while the driver fills the other.
 */
static void *
copy_out_main(void *arg)
{
	struct devjob			*j = arg;
	struct gck_cuda			*cu = j->cu;
	const struct gck_cuda_spool	*so = spool_ops(cu);
	struct ring			 rg;
	char				 path[PATH_MAX];
	uint64_t			 size = j->d->size, off, next;
	size_t				 n, i = 0;
	void				*h = NULL;
	int				 e;

	if (gck_cuda_spool_path(cu->spool, j->p->pid, j->k, path,
	    sizeof path) == -1) {
		j->syserr = ENAMETOOLONG;
		return NULL;
	}
	if ((e = so->create(so->arg, path, j->p->pid, j->k, size, &h)) != 0) {
		j->syserr = e;
		return NULL;
	}
	ring_open(cu, &rg);
	if (rg.nbuf < RING_N) {
		j->syserr = ENOMEM;
		goto out;
	}
	n = size < RING_BUF ? (size_t)size : RING_BUF;
	if (n > 0 && (j->cuerr = cu->MemcpyDtoHAsync(rg.buf[0], j->d->devptr,
	    n, j->d->stream)) != CUDA_SUCCESS)
		goto out;
	for (off = 0; off < size; off = next, i ^= 1) {
		n = size - off < RING_BUF ? (size_t)(size - off) : RING_BUF;
		if ((j->cuerr = cu->StreamSynchronize(j->d->stream)) !=
		    CUDA_SUCCESS)
			goto out;
		next = off + n;
		if (next < size && (j->cuerr = cu->MemcpyDtoHAsync(
		    rg.buf[i ^ 1], j->d->devptr + next, size - next <
		    RING_BUF ? (size_t)(size - next) : RING_BUF,
		    j->d->stream)) != CUDA_SUCCESS)
			goto out;
		if ((e = so->put(h, rg.buf[i], n)) != 0) {
			j->syserr = e;
			/* (the copy under way must end before its buffer) */
			cu->StreamSynchronize(j->d->stream);
			goto out;
		}
	}
	if ((e = so->commit(h)) != 0)
		j->syserr = e;
out:
	ring_close(cu, &rg);
	so->drop(h);
	return NULL;
}

/* The spool files of a rollback's GPUs, open. */
struct spooled {
	const struct gck_cuda_spool	*so;
	void				*h[GCK_GPUS_MAX];
};

/* The next piece of GPU k's memory from its spool file (a rollback). */
static ssize_t
spool_src(void *arg, struct gck_ctx *ctx, const struct gck_cproc *p,
    unsigned int k, void *buf, size_t len)
{
	struct spooled	*sp = arg;

	(void)ctx;
	(void)p;
	return sp->so->get(sp->h[k], buf, len);
}

/*
 * Copies GPU j->k's memory in from j->src: a piece is read into one
 * buffer while the driver copies the other to the GPU.
 */
static void *
copy_in_main(void *arg)
{
	struct devjob	*j = arg;
	struct gck_cuda	*cu = j->cu;
	struct ring	 rg;
	uint64_t	 size = j->d->size, off = 0;
	ssize_t		 n;
	size_t		 i = 0, got;
	int		 busy = 0;

	ring_open(cu, &rg);
	if (rg.nbuf < RING_N) {
		j->syserr = ENOMEM;
		goto out;
	}
	for (;;) {
		/* A whole buffer, or the rest. */
		for (got = 0; got < RING_BUF; got += (size_t)n) {
			n = j->src(j->srcarg, j->ctx, j->p, j->k,
			    (char *)rg.buf[i] + got, RING_BUF - got);
			if (n < 0) {
				/* (the spool's errno; a source's, its ctx) */
				if (j->ctx == NULL && j->src == spool_src)
					j->syserr = errno != 0 ? errno : EIO;
				else
					j->srcfail = 1;
				goto out;
			}
			if (n == 0)
				break;
		}
		if (off + got > size) {
			j->srcfail = -1;	/* more than the GPU has */
			goto out;
		}
		if (busy && (j->cuerr = cu->StreamSynchronize(
		    j->d->stream)) != CUDA_SUCCESS)
			goto out;
		busy = 0;
		if (got == 0)
			break;
		if ((j->cuerr = cu->MemcpyHtoDAsync(j->d->devptr + off,
		    rg.buf[i], got, j->d->stream)) != CUDA_SUCCESS)
			goto out;
		busy = 1;
		off += got;
		i ^= 1;
	}
	if (off != size)
		j->srcfail = -1;		/* less than the GPU has */
out:
	if (busy)
		cu->StreamSynchronize(j->d->stream);
	ring_close(cu, &rg);
	return NULL;
}

/* Runs one job a GPU, each in a thread of its own where one can be had. */
static void
run_devs(struct devjob *jobs, unsigned int n, void *(*fn)(void *))
{
	pthread_t	th[GCK_GPUS_MAX];
	char		started[GCK_GPUS_MAX];
	unsigned int	k;

	for (k = 0; k < n; k++)
		started[k] = pthread_create(&th[k], NULL, fn, &jobs[k]) == 0;
	for (k = 0; k < n; k++) {
		if (started[k])
			pthread_join(th[k], NULL);
		else
			fn(&jobs[k]);
	}
}

/* The first failure of jobs into p, as run_step() leaves one. */
static int
devs_failed(struct gck_cproc *p, const struct devjob *jobs, unsigned int n)
{
	unsigned int	k;

	for (k = 0; k < n; k++) {
		if (jobs[k].cuerr == CUDA_SUCCESS && jobs[k].syserr == 0 &&
		    jobs[k].srcfail == 0)
			continue;
		p->cuerr = jobs[k].cuerr;
		p->syserr = jobs[k].syserr;
		p->srcfail = jobs[k].srcfail;
		p->faildev = k;
		return -1;
	}
	return 0;
}

/*
 * The checkpoint of process p, LOCKED, through custom storage, into
 * spool files under cu->spool.  Returns 0 with p CHECKPOINTED (the
 * driver's word: the caller reads the state again), 1 if the driver
 * would not (p->refused its answer; p is as it was, for the checkpoint
 * through host memory), or -1 with p->cuerr or p->syserr: the
 * operation is left unfinished, the device memory in place, for the
 * unlock that rolls it back.
 */
int
gck_cuda_store_copy_out(struct gck_cuda *cu, struct gck_cproc *p)
{
	struct gck_cu_ckpt_args	 a;
	struct gck_cu_storage	*info = NULL;
	struct devjob		 jobs[GCK_GPUS_MAX];
	unsigned int		 k;
	CUresult		 r;

	memset(&a, 0, sizeof a);
	a.storage_out = &info;
	if ((r = cu->Checkpoint((int)p->pid,
	    (CUcheckpointCheckpointArgs *)&a)) != CUDA_SUCCESS) {
		p->refused = (int)r;
		return 1;
	}
	p->custom = 1;
	if (info == NULL || info->ndev > GCK_GPUS_MAX ||
	    (info->ndev > 0 && info->dev == NULL)) {
		p->cuerr = CUDA_ERROR_INVALID_VALUE;
		return -1;
	}
	p->ndev = info->ndev;
	memset(jobs, 0, sizeof jobs);
	for (k = 0; k < info->ndev; k++) {
		p->devsize[k] = info->dev[k].size;
		jobs[k].cu = cu;
		jobs[k].p = p;
		jobs[k].d = &info->dev[k];
		jobs[k].k = k;
	}
	run_devs(jobs, info->ndev, copy_out_main);
	if (devs_failed(p, jobs, info->ndev) == -1)
		return -1;
	if ((r = cu->OperationComplete(info->handle)) != CUDA_SUCCESS) {
		p->cuerr = r;
		return -1;
	}
	return 0;
}

/*
 * Asks the driver to restore process p, CHECKPOINTED through custom
 * storage, onto the GPUs of p->pairs (none: its own), and checks that it
 * maps each GPU at the size checkpointed.  Returns the mapping, or NULL
 * with p->cuerr or p->srcfail set.
 */
static struct gck_cu_storage *
restore_mapped(struct gck_cuda *cu, struct gck_cproc *p)
{
	struct gck_cu_restore_args	 a;
	struct gck_cu_storage		*info = NULL;
	unsigned int			 k;
	CUresult			 r;

	memset(&a, 0, sizeof a);
	a.pairs = p->npairs > 0 ? (CUcheckpointGpuPair *)p->pairs : NULL;
	a.npairs = p->npairs;
	a.storage_out = &info;
	if ((r = cu->Restore((int)p->pid, (CUcheckpointRestoreArgs *)&a)) !=
	    CUDA_SUCCESS) {
		p->cuerr = r;
		return NULL;
	}
	if (info == NULL || info->ndev != p->ndev ||
	    (info->ndev > 0 && info->dev == NULL)) {
		p->cuerr = CUDA_ERROR_INVALID_VALUE;
		p->srcfail = info != NULL ? -2 : 0;
		return NULL;
	}
	for (k = 0; k < info->ndev; k++)
		if (info->dev[k].size != p->devsize[k]) {
			p->srcfail = -2;
			p->faildev = k;
			return NULL;
		}
	return info;
}

/*
 * The restore of process p, CHECKPOINTED through custom storage, onto
 * the GPUs of p->pairs (none: its own), its memory taken from cu->src,
 * else from its spool files under cu->spool.  Returns 0 with p LOCKED
 * (the caller reads the state again), or -1 with p->cuerr, p->syserr or
 * p->srcfail set.
 */
int
gck_cuda_store_copy_back(struct gck_cuda *cu, struct gck_cproc *p)
{
	struct gck_cu_storage		*info = NULL;
	struct devjob			 jobs[GCK_GPUS_MAX];
	struct spooled			 sp;
	char				 path[PATH_MAX];
	uint64_t			 size;
	unsigned int			 k, nfd = 0;
	CUresult			 r;
	int				 ret = -1, e;

	sp.so = spool_ops(cu);
	if (cu->src == NULL) {
		for (nfd = 0; nfd < p->ndev; nfd++) {
			e = cu->spool == NULL ? ENOENT :
			    gck_cuda_spool_path(cu->spool, p->pid, nfd, path,
			    sizeof path) == -1 ? ENAMETOOLONG :
			    sp.so->open(sp.so->arg, path, &size, &sp.h[nfd]);
			if (e == 0 && size != p->devsize[nfd]) {
				sp.so->drop(sp.h[nfd]);
				e = EIO;
			}
			if (e != 0) {
				p->syserr = e;
				p->faildev = nfd;
				goto out;
			}
		}
	}
	if ((info = restore_mapped(cu, p)) == NULL)
		goto out;
	memset(jobs, 0, sizeof jobs);
	for (k = 0; k < info->ndev; k++) {
		jobs[k].cu = cu;
		jobs[k].p = p;
		jobs[k].d = &info->dev[k];
		jobs[k].k = k;
		jobs[k].src = cu->src != NULL ? cu->src : spool_src;
		jobs[k].srcarg = cu->src != NULL ? cu->srcarg : &sp;
		jobs[k].ctx = NULL;
	}
	/* One source read in order (an image) takes the GPUs in turn. */
	if (cu->src != NULL)
		for (k = 0; k < info->ndev; k++)
			copy_in_main(&jobs[k]);
	else
		run_devs(jobs, info->ndev, copy_in_main);
	if (devs_failed(p, jobs, info->ndev) == -1)
		goto out;
	if ((r = cu->OperationComplete(info->handle)) != CUDA_SUCCESS) {
		p->cuerr = r;
		goto out;
	}
	ret = 0;
out:
	while (nfd > 0)
		sp.so->drop(sp.h[--nfd]);
	return ret;
}

/* A restore's mapping of a process's GPUs, written from any thread. */
struct inmap {
	struct gck_cu_storage	*info;
	CUcontext		 c;
	CUdevice		 dev;
	int			 retained;
};

/*
 * Starts the restore of process p, CHECKPOINTED through custom storage,
 * onto the GPUs of p->pairs (none: its own): the driver maps them, for
 * gck_cuda_store_write() to fill and gck_cuda_store_end_in() to end.
 * Returns 0, or -1 with p->cuerr, p->syserr or p->srcfail set.
 */
int
gck_cuda_store_map_in(struct gck_cuda *cu, struct gck_cproc *p)
{
	struct inmap	*m;

	if ((m = calloc(1, sizeof *m)) == NULL) {
		p->syserr = ENOMEM;
		return -1;
	}
	if ((m->info = restore_mapped(cu, p)) == NULL) {
		free(m);
		return -1;
	}
	/* The writes come from threads with no context of their own. */
	if (cu->DeviceGet(&m->dev, 0) == CUDA_SUCCESS &&
	    cu->PrimaryCtxRetain(&m->c, m->dev) == CUDA_SUCCESS)
		m->retained = 1;
	p->inmap = m;
	return 0;
}

/*
 * Writes len bytes at buf to offset off of the memory of GPU k of
 * process p, mapped by gck_cuda_store_map_in(), on any thread; they are
 * on the GPU when it returns.  Returns CUDA_SUCCESS or a CUresult.
 */
int
gck_cuda_store_write(struct gck_cuda *cu, const struct gck_cproc *p,
    unsigned int k, uint64_t off, const void *buf, size_t len)
{
	const struct inmap		*m = p->inmap;
	const struct gck_cu_storage_dev	*d;
	CUcontext			 c;
	CUresult			 r;
	int				 pushed;

	if (m == NULL || k >= m->info->ndev)
		return CUDA_ERROR_INVALID_VALUE;
	d = &m->info->dev[k];
	if (off > d->size || len > d->size - off)
		return CUDA_ERROR_INVALID_VALUE;
	if (len == 0)
		return CUDA_SUCCESS;
	pushed = m->retained && cu->CtxPushCurrent(m->c) == CUDA_SUCCESS;
	if ((r = cu->MemcpyHtoDAsync(d->devptr + off, buf, len, d->stream)) ==
	    CUDA_SUCCESS)
		r = cu->StreamSynchronize(d->stream);
	if (pushed)
		cu->CtxPopCurrent(&c);
	return r;
}

/*
 * Ends the restore that gck_cuda_store_map_in() started, with the
 * complete call (end: 1), or lets go of its mapping (0: the process is
 * to be killed).  Returns 0, or -1 with p->cuerr set.
 */
int
gck_cuda_store_end_in(struct gck_cuda *cu, struct gck_cproc *p, int end)
{
	struct inmap	*m = p->inmap;
	CUresult	 r = CUDA_SUCCESS;

	if (m == NULL)
		return 0;
	if (end)
		r = cu->OperationComplete(m->info->handle);
	if (m->retained)
		cu->PrimaryCtxRelease(m->dev);
	free(m);
	p->inmap = NULL;
	if (r != CUDA_SUCCESS) {
		p->cuerr = r;
		return -1;
	}
	return 0;
}

/*
 * Page-locked buffers of size bytes, for copies to the GPUs from any
 * thread: allocated through the primary context of the first GPU, as
 * the checkpoint's ring is.
 */
struct gck_pinpool {
	struct gck_cuda	*cu;
	pthread_mutex_t	 mtx;
	void		**buf;		/* the free ones: free[0, nfree) */
	void		**all;
	size_t		 nall, nfree, size;
	CUdevice	 dev;
};

/*
 * Up to n buffers of size bytes each.  Returns the pool, or NULL where
 * the driver gives none (the copies then go through its staging).
 */
struct gck_pinpool *
gck_cuda_pinpool_new(struct gck_cuda *cu, size_t n, size_t size)
{
	struct gck_pinpool	*pp;
	CUcontext		 c;

	if (cu == NULL || cu->MemHostAlloc == NULL || n == 0 ||
	    (pp = calloc(1, sizeof *pp)) == NULL)
		return NULL;
	if ((pp->all = calloc(n, sizeof *pp->all)) == NULL ||
	    (pp->buf = calloc(n, sizeof *pp->buf)) == NULL ||
	    cu->DeviceGet(&pp->dev, 0) != CUDA_SUCCESS) {
		free(pp->all);
		free(pp->buf);
		free(pp);
		return NULL;
	}
	pp->cu = cu;
	pp->size = size;
	pthread_mutex_init(&pp->mtx, NULL);
	if (cu->PrimaryCtxRetain(&c, pp->dev) != CUDA_SUCCESS) {
		gck_cuda_pinpool_free(pp);
		return NULL;
	}
	if (cu->CtxPushCurrent(c) == CUDA_SUCCESS) {
		while (pp->nall < n && cu->MemHostAlloc(&pp->all[pp->nall],
		    size, CU_MEMHOSTALLOC_PORTABLE) == CUDA_SUCCESS) {
			pp->buf[pp->nall] = pp->all[pp->nall];
			pp->nall++;
		}
		cu->CtxPopCurrent(&c);
	}
	cu->PrimaryCtxRelease(pp->dev);
	pp->nfree = pp->nall;
	if (pp->nall == 0) {
		gck_cuda_pinpool_free(pp);
		return NULL;
	}
	return pp;
}

/* A free buffer of the pool (NULL: none, or none that big), any thread. */
void *
gck_cuda_pinpool_get(struct gck_pinpool *pp, size_t len)
{
	void	*b = NULL;

	if (pp == NULL || len > pp->size)
		return NULL;
	pthread_mutex_lock(&pp->mtx);
	if (pp->nfree > 0)
		b = pp->buf[--pp->nfree];
	pthread_mutex_unlock(&pp->mtx);
	return b;
}

/* Whether b is one of the pool's buffers. */
int
gck_cuda_pinpool_owns(const struct gck_pinpool *pp, const void *b)
{
	size_t	i;

	if (pp == NULL || b == NULL)
		return 0;
	for (i = 0; i < pp->nall && pp->all[i] != b; i++)
		;
	return i < pp->nall;
}

/* Gives back b, if it is one of the pool's.  Returns 1 if it was. */
int
gck_cuda_pinpool_put(struct gck_pinpool *pp, void *b)
{
	if (!gck_cuda_pinpool_owns(pp, b))
		return 0;
	pthread_mutex_lock(&pp->mtx);
	pp->buf[pp->nfree++] = b;
	pthread_mutex_unlock(&pp->mtx);
	return 1;
}

void
gck_cuda_pinpool_free(struct gck_pinpool *pp)
{
	CUcontext	c;
	int		retained, pushed = 0;

	if (pp == NULL)
		return;
	/* (freed as they were allocated, in the first GPU's context) */
	retained = pp->nall > 0 &&
	    pp->cu->PrimaryCtxRetain(&c, pp->dev) == CUDA_SUCCESS;
	if (retained)
		pushed = pp->cu->CtxPushCurrent(c) == CUDA_SUCCESS;
	while (pp->nall > 0)
		pp->cu->MemFreeHost(pp->all[--pp->nall]);
	if (pushed)
		pp->cu->CtxPopCurrent(&c);
	if (retained)
		pp->cu->PrimaryCtxRelease(pp->dev);
	pthread_mutex_destroy(&pp->mtx);
	free(pp->all);
	free(pp->buf);
	free(pp);
}

/*
 * For the processes of cp that are CHECKPOINTED with spool files under
 * dir: that their memory went through custom storage, and its sizes (a
 * guard bringing back the tree of a checkpoint that died).
 */
void
gck_cuda_spool_learn(struct gck_cuda *cu, struct gck_cproc *cp, size_t n,
    const char *dir, const struct gck_cuda_spool *sops)
{
	const struct gck_cuda_spool	*so;
	char				 path[PATH_MAX];
	uint64_t			 size;
	size_t				 i;
	unsigned int			 k;
	void				*h;

	if (dir == NULL || (cu->spool == NULL &&
	    (cu->spool = strdup(dir)) == NULL))
		return;
	cu->sops = sops;
	so = spool_ops(cu);
	for (i = 0; i < n; i++) {
		if (cp[i].custom)
			continue;
		for (k = 0; k < GCK_GPUS_MAX; k++) {
			if (gck_cuda_spool_path(dir, cp[i].pid, k, path,
			    sizeof path) == -1 || so->open(so->arg, path,
			    &size, &h) != 0)
				break;
			so->drop(h);
			cp[i].devsize[k] = size;
		}
		if (k > 0) {
			cp[i].custom = 1;
			cp[i].ndev = k;
		}
	}
}

/*
 * Has the CHECKPOINT step go through custom storage where the driver
 * offers it, into spool files of sops (NULL: the memory as it is) under
 * dir (made here); a process the driver will not take that way goes
 * through its host memory.
 */
int
gck_cuda_store_out(struct gck_ctx *ctx, struct gck_cuda *cu, const char *dir,
    const struct gck_cuda_spool *sops)
{
	if (!gck_cuda_storage(cu))
		return GCK_OK;
	if (mkdir(dir, 0700) == -1 && errno != EEXIST)
		return gck_set_syserr(ctx, errno, "cannot make '%s': %s", dir,
		    strerror(errno));
	free(cu->spool);
	if ((cu->spool = strdup(dir)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	cu->sops = sops;
	return GCK_OK;
}

/*
 * Has the RESTORE step of process p take its device memory from src
 * (called with arg), then takes it through that step alone.  Returns
 * GCK_OK or a code.
 */
int
gck_cuda_store_in(struct gck_ctx *ctx, struct gck_cuda *cu,
    struct gck_cproc *p, gck_cuda_src_fn src, void *arg)
{
	int	r;

	cu->src = src;
	cu->srcarg = arg;
	r = gck_cuda_step(ctx, cu, p, 1, GCK_CS_RESTORE, 0);
	cu->src = NULL;
	cu->srcarg = NULL;
	return r;
}
