/*
 * checkpoint.c: gck_checkpoint(), the safety protocol of gpuckpt.
 *
 * CRIU dumps the tree and leaves it stopped; the image is streamed; only
 * once all of it, trailer included, has been written and flushed is the
 * tree disposed of.  Any failure before that resumes the tree.
 */
#include "config.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <xxhash.h>

#include "private.h"
#include "core/cut.h"
#include "core/guard.h"
#include "core/proc.h"
#include "core/util.h"
#include "criu/criu.h"
#include "criu/pagemap.h"
#include "criu/streamer.h"
#include "criu/linkremap.h"
#include "criu/mntns.h"
#include "criu/ttynull.h"
#include "criu/zeroscan.h"
#include "gpu/cuda.h"
#include "gpu/job.h"
#include "gpu/nccl.h"
#include "image/chunker.h"
#include "image/devspool.h"
#include "image/digest.h"
#include "image/image.h"
#include "image/manifest.h"
#include "image/names.h"
#include "image/parent.h"
#include "image/sign.h"
#include "ops/ops.h"

struct out {
	char	*path;		/* final name, or NULL for a given fd */
	char	*tmp;		/* temporary name while writing */
	int	 fd;
	int	 owned;
	int	 inplace;	/* an existing file that is no regular file */
	mode_t	 kind;		/* S_IFMT of what the image goes to */
	int	 null;		/* the null device */
};

/* A checkpoint, phase by phase. */
struct ckpt {
	struct gck_ctx			*ctx;
	const struct gck_ckpt_opts	*o;
	gck_commit_fn			 commit;
	void				*commit_arg;
	struct gck_ckpt_result		*res;
	struct gck_ptree		*pre;	/* the tree as we found it */
	struct gck_nsview		*ns;	/* its PID namespace, not ours */
	struct gck_mntns		*mnt;	/* its mount namespace, not
						   ours (in our PID namespace, or
						   the whole of its own) */
	int				 whole;	/* its root is the init of ns:
						   all of that is dumped */
	struct gck_guard		*guard;
	struct gck_proc			*cand;	/* may hold GPU state */
	size_t				 ncand;
	struct gck_cuda			*cu;
	struct gck_cproc		*cp;	/* its CUDA processes */
	size_t				 ncp;
	struct gck_gpu			*gpus;
	size_t				 ngpus;
	struct gck_cuda_facts		 cf;
	pid_t				 job_holder;	/* a job: its file's */
	int				 job_fd;	/* holder, and fd */
	struct gck_nccl			*nccl;	/* its NCCL ranks */
	struct gck_cut			*cut;	/* one across hosts */
	struct gck_capture		*cap;
	struct gck_writer		*writer;	/* but its trailer */
	struct gck_parents		*parents;	/* --parent's image */
	enum gck_after			 after;
	struct out			 out;
	char				*work;
	char				 spool[PATH_MAX];	/* of GPUs */
	struct gck_devspool_conf	 dsconf;	/* its files, */
	struct gck_cuda_spool		 dsops;		/* the image's chunks */
	char				 imgdir[PATH_MAX];
	char				 criuver[64];
	char				 cudaver[16];
	char				 why[GCK_ERRMAX];	/* of a GPU */
	struct gck_pst			*procs;	/* the tree, as dumped */
	size_t				 nprocs;
	int				 shell_job;
	int				 dumped;	/* left stopped */
	int				 gpu_touched;
	int				 tcp_run;	/* criu lets it run */
	struct gck_stats		 st;	/* for c->res, once done */
	int64_t				 t0, mark;	/* gck_clock_us() */
	int64_t				 tstop;	/* the tree stopped, or 0 */
	uint64_t			 dropped;	/* zero pages left out */
	int64_t				 tran;	/* it ran again, or 0 */
	int				 gpu_lost;	/* not given back */
	/* A snapshot (see snapshot.c): */
	int				 snap;
	struct gck_ckpt_opts		 so;	/* how the stop writes */
	struct gck_parents		*pool;	/* the rounds, the parent */
	struct gck_memo			*memo;	/* what they read */
	struct out			 delta;	/* what the stop wrote */
	uint64_t			 snap_image;	/* the image written */
	uint64_t			 snap_refs;	/* of it, references */
};

static int	out_name(struct gck_ctx *, const struct gck_ckpt_opts *,
		    struct out *);
static int	out_open(struct gck_ctx *, const struct gck_ckpt_opts *,
		    struct out *);
static int	out_commit(struct gck_ctx *, struct out *);
static void	out_abort(struct out *);
static enum gck_after out_after(const struct out *);
struct devmem;
static int	spooled_files(struct gck_ctx *, const struct gck_cuda_facts *,
		    const struct gck_nsview *, const char *, struct devmem *);
static void	devmem_free(struct devmem *);
static int	stream_image(struct gck_ctx *, const struct gck_ckpt_opts *,
		    const char *, const struct gck_capture *,
		    const struct gck_nsview *, int,
		    const struct gck_parents *, struct devmem *,
		    struct gck_writer **);
static int	tree_restorable(struct gck_ctx *, const struct gck_ptree *,
		    const struct gck_nsview *, pid_t);
static int	tree_pidns(struct ckpt *);
static int	ckpt_job(struct ckpt *);
static int	ckpt_preflight(struct ckpt *);
static int	ckpt_stage(struct ckpt *);
static int	ckpt_quiesce(struct ckpt *);
static int	ckpt_nccl(struct ckpt *);
static int	cut_step(struct ckpt *, const char *, unsigned int);
static int	ckpt_nccl_resume(struct ckpt *);
static void	ckpt_cuda_facts(struct ckpt *);
static void	ckpt_log_storage(const struct ckpt *);
static const struct gck_parents *ckpt_parents(const struct ckpt *);
static pid_t	ns_local(void *, pid_t);
static void	guard_bring_back(struct gck_ctx *, const struct gck_proc *,
		    size_t, const char *);
static int	ckpt_dump(struct ckpt *);
static int	ckpt_commit(struct ckpt *);
static int	snap_wanted(const struct ckpt *);
static int	snap_rounds(struct ckpt *);
static int	snap_commit(struct ckpt *);
static void	ckpt_ran(struct ckpt *);
static int	ckpt_dispose(struct ckpt *);
static void	ckpt_stats(struct ckpt *);
static void	ckpt_rollback(struct ckpt *, int);
static void	ckpt_free(struct ckpt *);

/*
 * The output's names: for a file, the partial one it is written under
 * until it is complete, chosen here and made by out_open(), beside the
 * file a symbolic link names.  What exists and is no regular file (a
 * device, a FIFO) is written in place, never replaced.
 */
static int
out_name(struct gck_ctx *ctx, const struct gck_ckpt_opts *o, struct out *out)
{
	struct stat	 st;
	char		*prefix;
	int		 r;

	out->fd = -1;
	if (o->output == NULL)
		return GCK_OK;
	if (stat(o->output, &st) == 0 && !S_ISREG(st.st_mode)) {
		if (S_ISDIR(st.st_mode))
			return gck_set_error(ctx, GCK_EINVAL, "cannot write "
			    "the image to '%s': it is a directory",
			    o->output);
		out->inplace = 1;
		if ((out->path = strdup(o->output)) == NULL)
			return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		return GCK_OK;
	}
	if ((out->path = realpath(o->output, NULL)) == NULL &&
	    (out->path = strdup(o->output)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	if (asprintf(&prefix, "%s.tmp.", out->path) == -1)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	r = gck_tempname(ctx, prefix, &out->tmp);
	free(prefix);
	return r;
}

static int
out_open(struct gck_ctx *ctx, const struct gck_ckpt_opts *o, struct out *out)
{
	struct stat	st;
	int		oerrno;

	if (o->output == NULL)
		out->fd = o->outfd;
	else if (out->inplace) {
		if ((out->fd = open(out->path, O_WRONLY | O_NOCTTY |
		    O_CLOEXEC)) == -1) {
			oerrno = errno;
			return gck_set_syserr(ctx, oerrno, "cannot open '%s': "
			    "%s", o->output, strerror(oerrno));
		}
		out->owned = 1;
	} else {
		if ((out->fd = open(out->tmp, O_RDWR | O_CREAT | O_EXCL |
		    O_CLOEXEC, 0600)) == -1) {
			oerrno = errno;
			free(out->tmp);
			out->tmp = NULL;
			return gck_set_syserr(ctx, oerrno, "cannot create "
			    "'%s': %s", o->output, strerror(oerrno));
		}
		out->owned = 1;
	}
	if (fstat(out->fd, &st) == -1)
		return gck_set_syserr(ctx, errno, "cannot write the image: %s",
		    strerror(errno));
	out->kind = st.st_mode & S_IFMT;
	out->null = S_ISCHR(st.st_mode) && major(st.st_rdev) == 1 &&
	    minor(st.st_rdev) == 3;
	if (isatty(out->fd))
		return gck_set_error(ctx, GCK_EINVAL, "refusing to write an "
		    "image to a terminal");
	return GCK_OK;
}

/*
 * What becomes of the tree when nothing was asked: an image in a file
 * (or on a disk) is stored, and the tree goes; an image in the null
 * device is gone, and the tree runs on; of an image in a pipe, a socket
 * or another device only whoever restores it knows whether it arrived,
 * so the tree is left stopped for them to end.
 */
static enum gck_after
out_after(const struct out *out)
{
	if (out->null)
		return GCK_AFTER_RUN;
	if (out->kind == S_IFREG || out->kind == S_IFBLK)
		return GCK_AFTER_KILL;
	return GCK_AFTER_HANDOVER;
}

/* Makes the output durable and, for a file, gives it its name. */
static int
out_commit(struct gck_ctx *ctx, struct out *out)
{
	char		*dir;
	int		 dfd;

	if ((out->kind == S_IFREG || out->kind == S_IFBLK) &&
	    fsync(out->fd) == -1)
		return gck_set_syserr(ctx, errno, "cannot write %s: %s",
		    out->path != NULL ? out->path : "image", strerror(errno));
	if (!out->owned)
		return GCK_OK;
	if (close(out->fd) == -1) {
		out->fd = -1;
		return gck_set_syserr(ctx, errno, "cannot write '%s': %s",
		    out->path, strerror(errno));
	}
	out->fd = -1;
	if (out->inplace)
		return GCK_OK;
	if (rename(out->tmp, out->path) == -1)
		return gck_set_syserr(ctx, errno, "cannot rename to '%s': %s",
		    out->path, strerror(errno));
	free(out->tmp);
	out->tmp = NULL;
	if ((dir = strdup(out->path)) != NULL) {
		if ((dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY |
		    O_CLOEXEC)) != -1) {
			fsync(dfd);
			close(dfd);
		}
		free(dir);
	}
	return GCK_OK;
}

static void
out_abort(struct out *out)
{
	if (out->owned && out->fd != -1)
		close(out->fd);
	if (out->tmp != NULL)
		unlink(out->tmp);
	free(out->tmp);
	free(out->path);
}

/* Adds file f, kept in memory, as one entry or in parts. */
static int
add_kept(struct gck_writer *w, const struct gck_sfile *f, size_t part_size)
{
	char		 ename[GCK_SNAME + 32];
	size_t		 off, n;
	unsigned	 part;
	int		 r, sparse = strncmp(f->name, "pages-", 6) == 0;

	if (f->len <= part_size) {
		gck_entry_name(ename, sizeof ename, f->name, -1);
		return sparse ? gck_writer_add_pages(w, ename, f->data,
		    f->len) : gck_writer_add(w, ename, f->data, f->len);
	}
	for (off = 0, part = 0; off < f->len; off += n, part++) {
		n = f->len - off < part_size ? f->len - off : part_size;
		gck_entry_name(ename, sizeof ename, f->name, part);
		if ((r = sparse ? gck_writer_add_pages(w, ename,
		    f->data + off, n) : gck_writer_add(w, ename, f->data + off,
		    n)) != GCK_OK)
			return r;
	}
	return GCK_OK;
}

/* A part being read from a task while the one before is written. */
struct fetch {
	struct gck_pmread	*rd;
	char			*buf;
	size_t			 want;
	ssize_t			 n;
	pthread_t		 th;
	int			 running;
};

static void *
fetch_main(void *arg)
{
	struct fetch	*f = arg;

	f->n = gck_pmread_read(f->rd, f->buf, f->want);
	return NULL;
}

/* Starts reading the next part, in a thread if one can be had. */
static void
fetch_start(struct fetch *f, char *buf, size_t want)
{
	f->buf = buf;
	f->want = want;
	f->running = pthread_create(&f->th, NULL, fetch_main, f) == 0;
	if (!f->running)
		fetch_main(f);
}

static ssize_t
fetch_finish(struct fetch *f)
{
	if (f->running)
		pthread_join(f->th, NULL);
	f->running = 0;
	return f->n;
}

/*
 * The check that what is read again from a task is what criu wrote:
 * criu's part_size parts of the pages file each have a digest of their
 * samples, the first GCK_SAMPLE_LEN bytes of every GCK_SAMPLE_STRIDE;
 * the same digest is made, part by part, of what is read, whatever the
 * pieces it is read in (their bounds are whole pages).
 */
struct samples {
	XXH3_state_t	*st;
	uint64_t	 part;		/* the part being digested */
	uint64_t	 part_size;
};

static int
samples_part_done(struct gck_ctx *ctx, struct samples *sm,
    const struct gck_sfile *f, struct gck_pmread *rd,
    const struct gck_area *rseq, size_t nrseq, uint64_t len)
{
	uint64_t	d = XXH3_64bits_digest(sm->st);
	size_t		k;

	if (sm->part >= f->ndigests)
		return gck_set_error(ctx, GCK_ECRIU, "'%s' of process %d is "
		    "longer than criu wrote it", f->name, (int)f->pid);
	/*
	 * The tree has been held by criu all along: only the kernel can
	 * have written to it since, in the rseq areas.
	 */
	for (k = 0; d != f->digests[sm->part] && k < nrseq; k++)
		if (gck_pmread_overlaps(rd, sm->part * sm->part_size, len,
		    rseq[k].addr, rseq[k].size))
			break;
	if (d != f->digests[sm->part] && k == nrseq)
		return gck_set_error(ctx, GCK_ECRIU, "the memory of process %d "
		    "changed after criu dumped it (part %u of '%s')",
		    (int)f->pid, (unsigned)sm->part, f->name);
	sm->part++;
	XXH3_64bits_reset(sm->st);
	return GCK_OK;
}

/* Feeds n bytes read at offset off of the pages file. */
static int
samples_feed(struct gck_ctx *ctx, struct samples *sm,
    const struct gck_sfile *f, struct gck_pmread *rd,
    const struct gck_area *rseq, size_t nrseq, const char *buf,
    uint64_t off, size_t n)
{
	uint64_t	pend, in, s, e, x, j;
	int		r;

	while (n > 0) {
		pend = (sm->part + 1) * sm->part_size;
		x = pend - off < n ? pend - off : n;
		/* the samples in [off, off + x), from the part's start */
		in = off - sm->part * sm->part_size;
		for (j = in / GCK_SAMPLE_STRIDE; j * GCK_SAMPLE_STRIDE <
		    in + x; j++) {
			s = j * GCK_SAMPLE_STRIDE > in ? j * GCK_SAMPLE_STRIDE :
			    in;
			e = j * GCK_SAMPLE_STRIDE + GCK_SAMPLE_LEN < in + x ?
			    j * GCK_SAMPLE_STRIDE + GCK_SAMPLE_LEN : in + x;
			if (s < e)
				XXH3_64bits_update(sm->st, buf + (s - in),
				    (size_t)(e - s));
		}
		buf += x;
		off += x;
		n -= (size_t)x;
		if (off == pend || off == f->size)
			if ((r = samples_part_done(ctx, sm, f, rd, rseq, nrseq,
			    off - sm->part * sm->part_size)) != GCK_OK)
				return r;
	}
	return GCK_OK;
}

/* What add_pages() reads a task's pages with. */
struct pagesrc {
	const struct gck_sfile	*f;
	struct gck_pmread	*rd;
	struct gck_area		*rseq;
	size_t			 nrseq;
	struct samples		 sm;
	size_t			 chunk;		/* 0: parts (format 1) */
	size_t			 part_size;
	struct gck_chunker	 ck;
	uint64_t		*cuts;		/* where mappings start */
	size_t			 ncuts, icut;
};

/*
 * The bytes of the have read into buf, at offset off of the pages, that
 * make the next entry: a chunk (gck_chunker_scan(), ended at the start
 * of a mapping too; all of them at the end of the file), or a part
 * (format 1).
 */
static size_t
pages_cut(struct pagesrc *ps, const char *buf, size_t have, uint64_t toread,
    uint64_t off)
{
	size_t	n, lim = have;

	if (ps->chunk == 0)
		return have;
	while (ps->icut < ps->ncuts && ps->cuts[ps->icut] <= off)
		ps->icut++;
	if (ps->icut < ps->ncuts && ps->cuts[ps->icut] - off <= have)
		lim = (size_t)(ps->cuts[ps->icut] - off);
	if ((n = gck_chunker_scan(&ps->ck, buf, lim)) == 0 && (lim < have ||
	    toread == 0))
		n = lim;
	if (ps->icut < ps->ncuts && off + n == ps->cuts[ps->icut])
		gck_chunker_start(&ps->ck);	/* a mapping starts afresh */
	return n;
}

/*
 * Adds the pages file f, read again from its stopped task as its
 * pagemap lists them, a piece at a time, checked against the samples of
 * what criu wrote.  One piece is read while the one before it is
 * written.  Format 2 cuts it in chunks (chunker.c), none holding pages
 * of two mappings: the bytes read past a chunk's end start the next
 * one.  criu names the task as its PID
 * namespace ns (NULL: ours) sees it.
 */
static int
add_pages(struct gck_ctx *ctx, struct gck_writer *w,
    const struct gck_capture *cap, const struct gck_nsview *ns,
    const struct gck_sfile *f, char *bufs[2], struct pagesrc *ps)
{
	const struct gck_sfile	*pm;
	struct fetch		 fe;
	char			 pmname[64], mmname[64], *buf;
	char			 ename[GCK_SNAME + 32];
	uint64_t		 toread = f->size, off = 0;
	unsigned		 part;
	ssize_t			 n;
	size_t			 have = 0, len, cap_ = ps->chunk ? ps->chunk :
				    ps->part_size;
	pid_t			 pid;
	int			 r;

	memset(&fe, 0, sizeof fe);
	ps->f = f;
	snprintf(pmname, sizeof pmname, "pagemap-%d.img", (int)f->pid);
	if ((pm = gck_capture_find(cap, pmname)) == NULL)
		return gck_set_error(ctx, GCK_ECRIU, "criu wrote '%s' without "
		    "'%s'", f->name, pmname);
	if ((pid = gck_nsview_host(ns, f->pid)) <= 0)
		return gck_set_error(ctx, GCK_ECRIU, "criu wrote '%s' of "
		    "process %d, which is not in the tree", f->name,
		    (int)f->pid);
	snprintf(mmname, sizeof mmname, "mm-%d.img", (int)f->pid);
	if ((r = gck_pmread_open(ctx, pm, f, pid, &ps->rd)) != GCK_OK ||
	    (r = gck_rseq_areas(ctx, cap, pid, ns, &ps->rseq, &ps->nrseq)) !=
	    GCK_OK || (r = gck_pmread_vma_cuts(ps->rd, gck_capture_find(cap,
	    mmname), &ps->cuts, &ps->ncuts)) != GCK_OK)
		goto out;
	ps->icut = 0;
	gck_log(ctx, 2, "adding %s: %llu bytes of process %d's memory",
	    f->name, (unsigned long long)f->size, (int)f->pid);
	fe.rd = ps->rd;
	ps->sm.part = 0;
	XXH3_64bits_reset(ps->sm.st);
	gck_chunker_start(&ps->ck);
	/* While there is more to read, a read is under way. */
	if (toread > 0)
		fetch_start(&fe, bufs[0], toread < cap_ ? (size_t)toread :
		    cap_);
	for (part = 0; toread > 0 || have > 0; part++) {
		buf = bufs[part % 2];
		if (toread > 0) {
			if ((n = fetch_finish(&fe)) == -1) {
				r = gck_pmread_error(ps->rd);
				goto out;
			}
			if ((size_t)n != fe.want || n == 0) {
				r = gck_set_error(ctx, GCK_ECRIU, "'%s' of "
				    "process %d is shorter than criu wrote it",
				    f->name, (int)f->pid);
				goto out;
			}
			toread -= (uint64_t)n;
			have += (size_t)n;
		}
		len = pages_cut(ps, buf, have, toread, off);
		/* The rest starts the next piece, read meanwhile. */
		have -= len;
		memcpy(bufs[(part + 1) % 2], buf + len, have);
		if (toread > 0)
			fetch_start(&fe, bufs[(part + 1) % 2] + have,
			    toread < cap_ - have ? (size_t)toread :
			    cap_ - have);
		/* (zeroscan.c checked them, in criu's layout) */
		if (!f->checked && (r = samples_feed(ctx, &ps->sm, f, ps->rd,
		    ps->rseq, ps->nrseq, buf, off, len)) != GCK_OK)
			goto out;
		off += (uint64_t)len;
		gck_entry_name(ename, sizeof ename, f->name, part == 0 &&
		    len == f->size ? -1 : (long)part);
		if ((r = gck_writer_add_memory(w, ename, buf, len)) != GCK_OK)
			goto out;
	}
	r = GCK_OK;
out:
	fetch_finish(&fe);
	gck_pmread_free(ps->rd);
	ps->rd = NULL;
	free(ps->rseq);
	ps->rseq = NULL;
	ps->nrseq = 0;
	free(ps->cuts);
	ps->cuts = NULL;
	ps->ncuts = 0;
	return r;
}

/* The memory of a GPU of a process that custom storage spooled, */
struct devfile {
	char		 name[64];	/* as the image names it */
	char		 path[PATH_MAX];	/* the spool's */
	pid_t		 lpid;		/* its process, as the image has it */
	unsigned int	 k;
	uint64_t	 size, seg;	/* its bytes, its segments' */
	struct gck_splice_counts cnt;	/* how they went into the image */
};

/* a segment of it, a file of the image, */
struct devseg {
	size_t		 g;		/* of dev[g] */
	uint64_t	 s;
	char		 name[64];
};

/* all of them, the segments in the image's order. */
struct devmem {
	struct devfile	*dev;
	size_t		 ndev;
	struct devseg	*seg;
	size_t		 nseg;
};

/*
 * Writes the image but for its trailer: the manifest, the files criu
 * wrote that restore reads first (inventory.img first of all), then the
 * memory pages of each task, read again from the stopped tree, in the
 * order criu restores them.  Returns GCK_OK with *wp, to be finished.
 */
static int
stream_image(struct gck_ctx *ctx, const struct gck_ckpt_opts *o,
    const char *manifest, const struct gck_capture *cap,
    const struct gck_nsview *ns, int fd, const struct gck_parents *parents,
    struct devmem *dm, struct gck_writer **wp)
{
	const struct gck_sfile	*f;
	struct gck_writer	*w = NULL;
	struct pagesrc		 ps;
	char			*buf[2] = { NULL, NULL };
	size_t			 part_size = o->part_size ? o->part_size :
				    GCK_PART_SIZE, i, n, bsize;
	uint64_t		 bytes, holes;
	int			 r, pass, format = o->format ? o->format :
				    GCK_FORMAT_VERSION;

	memset(&ps, 0, sizeof ps);
	ps.part_size = ps.sm.part_size = part_size;
	ps.chunk = format > 1 ? GCK_CHUNK_SIZE : 0;
	if ((ps.sm.st = XXH3_createState()) == NULL) {
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}

	/* (a chunk is smaller than any part size in use) */
	bsize = part_size > GCK_CHUNK_SIZE ? part_size : GCK_CHUNK_SIZE;
	if (posix_memalign((void **)&buf[0], 4096, bsize) != 0 ||
	    posix_memalign((void **)&buf[1], 4096, bsize) != 0) {
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	if ((r = gck_writer_new2(ctx, fd, o->level, part_size, format,
	    o->threads, &w)) != GCK_OK)
		goto out;
	gck_writer_set_parents(w, parents);
	gck_writer_set_memo(w, o->memo);
	if ((r = gck_writer_set_sign(w, o->sign)) != GCK_OK)
		goto out;
	if ((r = gck_writer_add(w, GCK_ENTRY_MANIFEST, manifest,
	    strlen(manifest))) != GCK_OK)
		goto out;
	n = gck_capture_nfiles(cap);
	for (pass = 0; pass < 3; pass++)
		for (i = 0; i < n; i++) {
			f = gck_capture_file(cap, i);
			if ((pass == 0) != (strcmp(f->name,
			    "inventory.img") == 0) || (pass == 2) != f->pages)
				continue;
			if (pass < 2)
				r = add_kept(w, f, part_size);
			else
				r = add_pages(ctx, w, cap, ns, f, buf, &ps);
			if (r != GCK_OK)
				goto out;
		}
	/*
	 * The device memory last, a restore needs the process first: the
	 * chunks that wait in the spool, compressed as they will be here,
	 * a segment of each GPU after the other.
	 */
	for (i = 0; i < dm->ndev; i++)
		gck_log(ctx, 2, "adding %s: %llu bytes of device memory in "
		    "segments of %llu", dm->dev[i].name, (unsigned long long)
		    dm->dev[i].size, (unsigned long long)dm->dev[i].seg);
	for (i = 0; i < dm->nseg; i++) {
		struct devfile	*d = &dm->dev[dm->seg[i].g];

		if ((r = gck_devspool_splice(ctx, w, d->path, dm->seg[i].name,
		    d->size, dm->seg[i].s * d->seg, gck_cuda_seg_size(d->size,
		    d->seg, dm->seg[i].s), &d->cnt)) != GCK_OK)
			goto out;
	}
	for (i = 0; i < dm->ndev; i++)
		gck_log(ctx, 1, "image: %s: %llu chunks as the spool "
		    "compressed them, %llu referred to or patched, %llu from "
		    "their data, in %llu segment%s", dm->dev[i].name,
		    (unsigned long long)dm->dev[i].cnt.whole,
		    (unsigned long long)dm->dev[i].cnt.ref,
		    (unsigned long long)dm->dev[i].cnt.again,
		    (unsigned long long)dm->dev[i].cnt.segs,
		    dm->dev[i].cnt.segs == 1 ? "" : "s");
	gck_writer_stats(w, &bytes, &holes);
	gck_log(ctx, 1, "image: %llu bytes of CRIU data, %llu of them zero "
	    "pages left as holes", (unsigned long long)bytes,
	    (unsigned long long)holes);
	if (parents != NULL)
		gck_log(ctx, 1, "image: %llu bytes of memory referred to, "
		    "not stored: %s", (unsigned long long)
		    gck_writer_refbytes(w), o->memo != NULL && o->have ==
		    NULL ? "the rounds read them" :
		    gck_parents_count(parents) > 0 &&
		    gck_parents_path(parents, 0) == NULL ? "the receiver's "
		    "cache has them" : "its parent has them");
	*wp = w;
	w = NULL;
	r = GCK_OK;
out:
	gck_writer_free(w);
	if (ps.sm.st != NULL)
		XXH3_freeState(ps.sm.st);
	free(buf[0]);
	free(buf[1]);
	return r;
}

/* What write_image() needs, and what it leaves. */
struct wstate {
	struct gck_ctx			*ctx;
	const struct gck_ckpt_opts	*o;
	const struct gck_ckpt_opts	*so;	/* how the image is written */
	enum gck_after			 after;	/* as the manifest says */
	struct gck_capture		*cap;
	const char			*criuver;
	int				 shell_job;
	const struct gck_cuda_facts	*cf;
	const char			*spool;	/* of custom storage */
	struct out			*out;
	struct gck_nsview		*ns;	/* its PID namespace, not ours */
	struct gck_mntns		*mnt;	/* its mount namespace */
	struct gck_pst			*procs;	/* the tree, as criu holds it */
	size_t				 nprocs;
	size_t				 nttys;	/* terminal files made null */
	struct gck_writer		*w;	/* the image, but its trailer */
	const struct gck_parents	*parents;	/* or NULL */
	uint64_t			 dropped;	/* zero pages left out */
};

/*
 * The CUDA processes of cf as namespace ns sees them, for the manifest:
 * cf itself for our own, else a copy in *view whose processes, in *cpp
 * (free it), have their PIDs there.  Returns what stands for cf, or
 * NULL with the error set.
 */
static const struct gck_cuda_facts *
cuda_view(struct gck_ctx *ctx, const struct gck_nsview *ns,
    const struct gck_cuda_facts *cf, struct gck_cuda_facts *view,
    struct gck_cproc **cpp)
{
	size_t	i;

	*cpp = NULL;
	if (ns == NULL || cf == NULL)
		return cf;
	*view = *cf;
	if ((*cpp = calloc(cf->nprocs + 1, sizeof **cpp)) == NULL) {
		gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		return NULL;
	}
	for (i = 0; i < cf->nprocs; i++) {
		(*cpp)[i] = cf->procs[i];
		(*cpp)[i].pid = gck_nsview_local(ns, cf->procs[i].pid);
	}
	view->procs = *cpp;
	return view;
}

/*
 * The device memory of cf's processes that custom storage spooled under
 * spool, into *dm: a GPU's named as namespace ns sees the process, and
 * its segments, the first of every GPU, then the second of each that has
 * one, and so on.  Returns GCK_OK or a code.
 */
static int
spooled_files(struct gck_ctx *ctx, const struct gck_cuda_facts *cf,
    const struct gck_nsview *ns, const char *spool, struct devmem *dm)
{
	const struct gck_cproc	*p;
	struct devfile		*d;
	size_t			 i, n = 0, g, more;
	uint64_t		 s, nseg = 0;
	unsigned int		 k;

	memset(dm, 0, sizeof *dm);
	for (i = 0; cf != NULL && i < cf->nprocs; i++)
		for (k = 0; cf->procs[i].custom && k < cf->procs[i].ndev;
		    k++, n++)
			nseg += gck_cuda_nsegs(cf->procs[i].devsize[k],
			    gck_cuda_segment(cf->procs[i].devsize[k]));
	if (n == 0)
		return GCK_OK;
	if ((dm->dev = calloc(n, sizeof *dm->dev)) == NULL ||
	    (dm->seg = calloc((size_t)nseg, sizeof *dm->seg)) == NULL)
		goto nomem;
	for (i = 0; i < cf->nprocs; i++) {
		p = &cf->procs[i];
		for (k = 0; p->custom && k < p->ndev; k++) {
			d = &dm->dev[dm->ndev++];
			d->lpid = gck_nsview_local(ns, p->pid);
			d->k = k;
			gck_cuda_dev_file(d->name, sizeof d->name, d->lpid, k);
			if (gck_cuda_spool_path(spool, p->pid, k, d->path,
			    sizeof d->path) == -1) {
				devmem_free(dm);
				return gck_set_error(ctx, GCK_EINVAL, "the "
				    "spool's name is too long");
			}
			d->size = p->devsize[k];
			d->seg = gck_cuda_segment(d->size);
		}
	}
	for (s = 0, more = 1; more; s++)
		for (g = 0, more = 0; g < dm->ndev; g++) {
			d = &dm->dev[g];
			if (s >= gck_cuda_nsegs(d->size, d->seg))
				continue;
			more = 1;
			dm->seg[dm->nseg].g = g;
			dm->seg[dm->nseg].s = s;
			gck_cuda_seg_file(dm->seg[dm->nseg].name,
			    sizeof dm->seg[dm->nseg].name, d->lpid, d->k,
			    d->seg, s);
			dm->nseg++;
		}
	return GCK_OK;
nomem:
	devmem_free(dm);
	return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
}

static void
devmem_free(struct devmem *dm)
{
	free(dm->dev);
	free(dm->seg);
	memset(dm, 0, sizeof *dm);
}

/*
 * Writes the image while criu still holds the tree, every process
 * stopped where it was dumped; only its trailer is left, to be written
 * once criu has finished well.  The image records the tree as its PID
 * namespace sees it.  Returns GCK_OK or a code.
 */
static int
write_image(void *arg)
{
	struct wstate			*w = arg;
	struct gck_ctx			*ctx = w->ctx;
	struct gck_ptree		*t = NULL;
	struct gck_imgfile		*files = NULL;
	struct gck_cuda_facts		 cfview;
	const struct gck_cuda_facts	*cf;
	struct gck_cproc		*cps = NULL;
	struct devmem			 dm;
	char				*manifest = NULL;
	json_t				*parent = NULL, *mounts = NULL;
	uint64_t			 dropped;
	size_t				 i, n, nghosts, nnamed;
	int				 r;

	memset(&dm, 0, sizeof dm);
	if ((r = gck_ptree_scan(ctx, w->o->pid, &t)) != GCK_OK ||
	    (r = gck_nsview_learn(ctx, w->ns, t)) != GCK_OK)
		goto out;
	if ((w->procs = calloc(t->n, sizeof *w->procs)) == NULL) {
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < t->n; i++) {
		w->procs[w->nprocs].pid = t->procs[i].pid;
		w->procs[w->nprocs++].start = t->procs[i].start;
	}
	if ((r = gck_check_interrupt(ctx)) != GCK_OK)
		goto out;
	/* Whatever has a terminal open has /dev/null there, restored. */
	if ((r = gck_ttys_to_null(ctx, w->cap, &w->nttys)) != GCK_OK)
		goto out;
	if (w->nttys > 0)
		gck_log(ctx, 1, "image: %zu terminal file%s made /dev/null",
		    w->nttys, w->nttys == 1 ? "" : "s");
	/* Files criu linked back into their directories travel in it. */
	if ((r = gck_link_remaps(ctx, w->cap, w->o->pid, w->ns != NULL,
	    w->o->ghost_limit > 0 ? w->o->ghost_limit : GCK_GHOST_LIMIT,
	    &nghosts, &nnamed)) != GCK_OK)
		goto out;
	if (nghosts + nnamed > 0)
		gck_log(ctx, 1, "image: of the files criu linked back, %zu "
		    "travel in it, %zu are opened by another name", nghosts,
		    nnamed);
	/*
	 * The files outside its mount namespace as the stopped tree has
	 * them; a log of the host's the tree writes may grow: it is the
	 * host's.
	 */
	if ((r = gck_mntns_settle(ctx, w->mnt, w->cap, t, w->ns)) != GCK_OK)
		goto out;
	/* The manifest lists the pages files as they are left. */
	if ((r = gck_zero_scan(ctx, w->cap, w->ns, &dropped)) != GCK_OK)
		goto out;
	w->dropped = dropped;
	n = gck_capture_nfiles(w->cap);
	if ((r = spooled_files(ctx, w->cf, w->ns, w->spool, &dm)) != GCK_OK)
		goto out;
	if ((files = calloc(n + dm.nseg + 1, sizeof *files)) == NULL) {
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < n; i++) {
		files[i].name = gck_capture_file(w->cap, i)->name;
		files[i].size = gck_capture_file(w->cap, i)->size;
		files[i].memory = gck_capture_file(w->cap, i)->pages;
	}
	for (i = 0; i < dm.nseg; i++) {
		files[n + i].name = dm.seg[i].name;
		files[n + i].size = gck_cuda_seg_size(dm.dev[dm.seg[i].g].size,
		    dm.dev[dm.seg[i].g].seg, dm.seg[i].s);
		files[n + i].memory = 1;
		files[n + i].cuda = 1;
	}
	n += dm.nseg;
	gck_nsview_tree(w->ns, t);
	if (w->parents != NULL && (parent = gck_parents_json(w->parents)) ==
	    NULL) {
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	if (w->mnt != NULL && (mounts = gck_mntns_json(w->mnt)) == NULL) {
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	if (((cf = cuda_view(ctx, w->ns, w->cf, &cfview, &cps)) == NULL &&
	    w->cf != NULL) || (manifest = gck_manifest_build(ctx, t, w->o,
	    w->after, w->criuver, w->shell_job, cf, files, n,
	    parent, mounts)) == NULL) {
		r = ctx->code;
		goto out;
	}
	gck_log(ctx, 1, w->so != w->o ? "writing what the rounds did not "
	    "read" : "writing image");
	gck_meter_stage(ctx, w->so != w->o ? "stopped" : "writing", 0);
	r = stream_image(ctx, w->so, manifest, w->cap, w->ns, w->out->fd,
	    w->parents, &dm, &w->w);
out:
	gck_ptree_free(t);
	devmem_free(&dm);
	free(cps);
	free(files);
	free(manifest);
	json_decref(parent);
	json_decref(mounts);
	return r;
}

/*
 * Refuses, before it is touched, a tree whose image could not be made or
 * could never be restored:
 * - gpurestore restores detached, with no terminal to hand out: a
 *   terminal a process has open becomes /dev/null in the image
 *   (ttynull.c), but the master side of one, a terminal emulator's,
 *   could not stand for it;
 * - session 0 is the one a process has when no ancestor ever called
 *   setsid() in this PID namespace (children of an init that never did,
 *   or of a session leader outside the namespace), and CRIU cannot
 *   record it; a process of the tree that has just exited shows it too,
 *   and is no reason to refuse;
 * - a pipe to a process outside the tree (a pipeline's other end, as in
 *   `a | b &`) could never be joined up again: criu would dump it, and
 *   the restored end would find nobody there.
 */
static int
tree_restorable(struct gck_ctx *ctx, const struct gck_ptree *t,
    const struct gck_nsview *ns, pid_t root)
{
	const struct gck_proc	*p;
	char			 comm[64], peercomm[64];
	size_t			 i;
	pid_t			 in, peer;
	int			 fd;

	for (i = 0; i < t->n; i++) {
		p = &t->procs[i];
		if ((fd = gck_pid_ptmx_fd(p->pid)) != -1)
			return gck_set_error(ctx, GCK_EINVAL, "cannot "
			    "checkpoint pid %d: process %d ('%s') holds the "
			    "master side of a terminal (/dev/ptmx on fd %d), "
			    "which a restore could not give back", (int)root,
			    (int)p->pid, p->comm, fd);
		/* (one that exited as it was looked at has no session) */
		if (gck_nsview_sid(ns, p) == 0 && !gck_pid_dying(p->pid))
			return gck_set_error(ctx, GCK_EINVAL, "cannot "
			    "checkpoint pid %d: process %d ('%s') is in session "
			    "0 (its session leader is outside this PID "
			    "namespace), which CRIU cannot record (start the "
			    "job with setsid)", (int)root, (int)p->pid, p->comm);
	}
	if (gck_ptree_outside_pipe(t, &in, &fd, &peer)) {
		if (gck_pid_comm(in, comm, sizeof comm) == -1)
			snprintf(comm, sizeof comm, "?");
		if (gck_pid_comm(peer, peercomm, sizeof peercomm) == -1)
			snprintf(peercomm, sizeof peercomm, "?");
		return gck_set_error(ctx, GCK_EINVAL, "cannot checkpoint pid "
		    "%d: process %d ('%s') has a pipe on fd %d to process %d "
		    "('%s') outside the tree, which a restore could not join "
		    "up again (checkpoint the whole pipeline: start it under "
		    "one shell, e.g. (a | b) &, and give that shell's pid)",
		    (int)root, (int)in, comm, fd, (int)peer, peercomm);
	}
	return GCK_OK;
}

/*
 * Finds the PID namespace of the tree when it is not ours: the image
 * records the tree as that namespace sees it.  A tree under the
 * namespace's init is dumped by a criu that runs there; the init's, the
 * whole namespace (a container's), by a criu that runs here, which
 * dumps the namespaces with it, and is told what of its mount
 * namespace comes from here.
 */
static int
tree_pidns(struct ckpt *c)
{
	const struct gck_ptree	*t = c->pre;
	struct stat		 here, there;
	char			 root[64];
	int			 r;

	if ((r = gck_nsview_of(c->ctx, c->o->pid, &c->ns)) != GCK_OK ||
	    c->ns == NULL)
		return r;
	gck_log(c->ctx, 1, "process tree %d is in a PID namespace of its "
	    "own, as process %d; its init is process %d", (int)c->o->pid,
	    (int)gck_nsview_local(c->ns, c->o->pid), (int)c->ns->init);
	if (c->ns->init != c->o->pid)
		return GCK_OK;
	/*
	 * A namespace whose root is this host's own (unshare --pid, or
	 * gpurestore's own --pidns) is no container: what is saved is a
	 * tree under its init.
	 */
	snprintf(root, sizeof root, "/proc/%d/root", (int)c->o->pid);
	if (stat(root, &there) == -1 || stat("/", &here) == -1 ||
	    (there.st_dev == here.st_dev && there.st_ino == here.st_ino)) {
		if (t->n > 1)
			return gck_set_error(c->ctx, GCK_EINVAL, "cannot "
			    "checkpoint pid %d: it is the init (pid 1) of its "
			    "PID namespace, which criu dumps only with the "
			    "whole namespace, and its root is this host's: "
			    "checkpoint a process under it (-p %d)",
			    (int)c->o->pid, (int)t->procs[1].pid);
		return gck_set_error(c->ctx, GCK_EINVAL, "cannot checkpoint "
		    "pid %d: it is the init (pid 1) of its PID namespace, "
		    "which criu dumps only with the whole namespace, and its "
		    "root is this host's: checkpoint a process under it",
		    (int)c->o->pid);
	}
	c->whole = 1;
	gck_log(c->ctx, 1, "process %d is its PID namespace's init: "
	    "checkpointing the whole namespace, a container", (int)c->o->pid);
	return GCK_OK;
}

/* Whether process pid was stopped in t, the tree as we found it. */
static int
was_stopped(const struct gck_ptree *t, pid_t pid)
{
	size_t	i;

	for (i = 0; i < t->n; i++)
		if (t->procs[i].pid == pid)
			return t->procs[i].state == 'T' ||
			    t->procs[i].state == 't';
	return 0;
}

/*
 * Lets the tree (procs) run again, but for what was stopped in pre, as
 * we found it: what the user stopped stays stopped.
 */
static void
resume_tree(const struct gck_ptree *pre, const struct gck_pst *procs,
    size_t n)
{
	size_t	i;

	for (i = 0; i < n; i++)
		if (!was_stopped(pre, procs[i].pid))
			gck_psts_signal(&procs[i], 1, SIGCONT);
}

/* What the guard is to do with the tree should we die, after. */
static char
guard_intent(enum gck_after after)
{
	switch (after) {
	case GCK_AFTER_KILL:
		return 'K';
	case GCK_AFTER_RUN:
		return 'R';
	default:
		return 'S';
	}
}

int
gck_checkpoint(struct gck_ctx *ctx, const struct gck_ckpt_opts *o,
    struct gck_ckpt_result *res)
{
	return gck_checkpoint_ex(ctx, o, NULL, NULL, res);
}

void
gck_ckpt_result_free(struct gck_ckpt_result *res)
{
	if (res == NULL)
		return;
	free(res->pids);
	res->pids = NULL;
	res->npids = 0;
}

/* Fills res (if any) in with what became of the tree. */
static int
ckpt_result(struct gck_ctx *ctx, struct gck_ckpt_result *res,
    enum gck_after after, const struct gck_pst *procs, size_t n, size_t ncp,
    const struct out *out)
{
	size_t	i;
	int	fd;

	if (res == NULL)
		return GCK_OK;
	/* The first whose output went to a terminal, gone on restore. */
	res->tty_pid = -1;
	for (i = 0; i < n && res->tty_pid == -1; i++)
		for (fd = 1; fd <= 2; fd++)
			if (gck_pid_fd_tty(procs[i].pid, fd, res->tty,
			    sizeof res->tty)) {
				res->tty_pid = procs[i].pid;
				res->tty_fd = fd;
				break;
			}
	res->after = after;
	res->ncuda = ncp;
	res->reader = -1;
	if ((res->pids = calloc(n + 1, sizeof *res->pids)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	for (i = 0; i < n; i++)
		res->pids[i] = procs[i].pid;
	res->npids = n;
	res->output = out->kind == S_IFIFO ? "a pipe" : out->kind ==
	    S_IFSOCK ? "a socket" : out->kind == S_IFREG ? "a file" :
	    "a device";
	if (after == GCK_AFTER_HANDOVER && out->kind == S_IFIFO &&
	    (res->reader = gck_pipe_peer(out->fd)) > 0 &&
	    gck_pid_comm(res->reader, res->reader_comm,
	    sizeof res->reader_comm) == -1)
		res->reader = -1;
	return GCK_OK;
}

/*
 * Checks the tree before anything is touched: that it is there, can be
 * dumped and restored, does not hold us, and what of it uses CUDA.
 */
static int
ckpt_preflight(struct ckpt *c)
{
	struct gck_ctx			*ctx = c->ctx;
	const struct gck_ckpt_opts	*o = c->o;
	size_t				 i;
	int				 r;

	if (o->criu_opts & ~GCK_CRIU_OPTS_ALL)
		return gck_set_error(ctx, GCK_EINVAL, "unknown criu options "
		    "%#x", o->criu_opts & ~GCK_CRIU_OPTS_ALL);
	/*
	 * A cut across hosts writes a file: it is renamed into place only
	 * once every host's image is whole, and removed again should one
	 * host fail to rename its own.
	 */
	if (o->cut_dir != NULL && (o->output == NULL ||
	    strcmp(o->output, "-") == 0))
		return gck_set_error(ctx, GCK_EINVAL, "a cut across hosts "
		    "writes its image to a file (-o)");
	if (o->cut_dir != NULL && (r = gck_cut_open(ctx, o->cut_dir,
	    o->cut_size, o->cut_name, &c->cut)) != GCK_OK)
		return r;
	if ((o->criu_opts & GCK_CRIU_TCP_CLOSE) &&
	    (o->criu_opts & GCK_CRIU_TCP_ESTABLISHED))
		return gck_set_error(ctx, GCK_EINVAL, "--tcp-close and "
		    "--tcp-established exclude each other");
	/* The parent is read before anything is touched. */
	if (o->parent != NULL && o->format == 1)
		return gck_set_error(ctx, GCK_EINVAL, "an image of format "
		    "version 1 cannot have a parent");
	/* So is the key: a signed image is compressed, of format 2. */
	if (o->sign != NULL && (o->format == 1 || o->level == 0))
		return gck_set_error(ctx, GCK_EINVAL, "only a compressed image "
		    "of format 2 or 3 can be signed");
	if (o->sign != NULL && (r = gck_sig_usable(ctx, o->sign)) != GCK_OK)
		return r;
	if (o->parent != NULL && ((r = gck_parents_new(ctx, &c->parents)) !=
	    GCK_OK || (r = gck_parents_base(c->parents, o->parent)) !=
	    GCK_OK))
		return r;
	if ((r = gck_criu_can_dump(ctx, o->pid)) != GCK_OK)
		return r;
	if ((r = gck_ptree_scan(ctx, o->pid, &c->pre)) != GCK_OK)
		return r;
	for (i = 0; i < c->pre->n; i++)
		if (c->pre->procs[i].pid == getpid()) {
			r = gck_set_error(ctx, GCK_EINVAL, "cannot checkpoint "
			    "pid %d: the tree contains this gpuckpt (pid %d)",
			    (int)o->pid, (int)getpid());
			/* The message says nothing of a tree holding us. */
			gck_ptree_free(c->pre);
			c->pre = NULL;
			return r;
		}
	if ((r = tree_pidns(c)) != GCK_OK ||
	    (r = tree_restorable(ctx, c->pre, c->ns, o->pid)) != GCK_OK)
		return r;
	/*
	 * A tree in a PID namespace of its own is dumped by a criu that
	 * runs in its mount namespace; one in ours, from here, told what
	 * of its mount namespace comes from this host.
	 */
	if ((c->ns == NULL || c->whole) && (r = gck_mntns_scan(ctx, c->pre,
	    &c->mnt)) != GCK_OK)
		return r;
	if (c->whole && c->mnt == NULL)
		return gck_set_error(ctx, GCK_EINVAL, "cannot checkpoint pid "
		    "%d: it is the init of a PID namespace that shares this "
		    "host's mount namespace, whose /proc a restore could not "
		    "give it: checkpoint a process under it", (int)o->pid);
	/* The image names its processes as the namespace does. */
	if (c->whole)
		c->mnt->whole = 1;
	if ((r = gck_cuda_candidates(ctx, c->pre, &c->cand, &c->ncand)) !=
	    GCK_OK || (r = ckpt_job(c)) != GCK_OK ||
	    (r = gck_cuda_prepare(ctx, "checkpoint", o->pid, c->cand,
	    c->ncand, &c->cu)) != GCK_OK)
		return r;
	/* A driver before job files (r590) knows of no job. */
	if (c->cu != NULL && c->job_holder > 0 &&
	    gck_cuda_version(c->cu) < GCK_CUDA_JOB_VERSION) {
		gck_log(ctx, 1, "the driver predates job files (r590): the "
		    "tree is no job to it");
		c->job_holder = 0;
		(void)unsetenv(GCK_JOB_ENV);
	}
	if (c->cu != NULL)
		gck_cuda_set_serial(c->cu, c->job_holder > 0);
	/*
	 * A root that does not lead its own session, or has a controlling
	 * terminal, belongs to a shell's job: CRIU must be told.
	 */
	c->shell_job = c->pre->procs[0].sid != c->pre->procs[0].pid ||
	    c->pre->procs[0].tty_nr != 0;
	if ((r = gck_check_interrupt(ctx)) != GCK_OK)
		return r;
	return gck_criu_version(ctx, c->criuver, sizeof c->criuver);
}

/*
 * Whether the tree's CUDA processes are of a job (gpuckpt --launch):
 * see gck_job_setup().  Returns GCK_OK or a code, before anything is
 * touched.
 */
static int
ckpt_job(struct ckpt *c)
{
	return gck_job_setup(c->ctx, "checkpoint", c->o->pid, c->pre,
	    c->cand, c->ncand, c->ns, &c->job_holder, &c->job_fd);
}

/*
 * Makes the work directory and opens the output, the guard started
 * first, and settles what becomes of the tree.
 */
static int
ckpt_stage(struct ckpt *c)
{
	struct gck_ctx	*ctx = c->ctx;
	int		 r;

	/*
	 * The guard knows the work directory and the partial output file
	 * before they are there: killed at any moment, we leave neither.
	 */
	if ((r = gck_workdir_name(ctx, c->o->tmpdir, &c->work)) != GCK_OK ||
	    (r = out_name(ctx, c->o, &c->out)) != GCK_OK ||
	    (r = gck_guard_start(ctx, c->pre, c->work, c->out.tmp,
	    guard_bring_back, c->cand, c->ncand, &c->guard)) != GCK_OK)
		return r;
	if ((r = gck_workdir_make(ctx, &c->work)) != GCK_OK ||
	    (c->ns != NULL && !c->whole && (r = gck_criu_ns_check(ctx, c->ns,
	    c->work)) !=
	    GCK_OK))
		return r;
	snprintf(c->imgdir, sizeof c->imgdir, "%s/img", c->work);
	if (mkdir(c->imgdir, 0700) == -1)
		return gck_set_syserr(ctx, errno, "cannot make '%s': %s",
		    c->imgdir, strerror(errno));
	if ((r = out_open(ctx, c->o, &c->out)) != GCK_OK)
		return r;
	/* gpusend's hand-over decides for itself; we, by the output. */
	if (c->after == GCK_AFTER_DEFAULT)
		c->after = c->commit != NULL ? GCK_AFTER_KILL :
		    out_after(&c->out);
	return GCK_OK;
}

/*
 * The ranks of an NCCL job that take part (libgpuckpt-nccl.so) park at
 * one point and tear their communicators down before any GPU is locked:
 * else a rank locked would leave a peer waiting for it in a collective,
 * whose lock then never comes.
 */
static int
ckpt_nccl(struct ckpt *c)
{
	int	r;

	if ((r = gck_nccl_find_procs(c->ctx, c->cand, c->ncand, &c->nccl)) !=
	    GCK_OK)
		return r;
	return gck_nccl_quiesce(c->ctx, c->nccl, c->o->nccl_ms != 0 ?
	    c->o->nccl_ms : GCK_NCCL_TIMEOUT_MS, GCK_NCCL_LEASE_S, c->cut);
}

/*
 * The tree's GPUs given back, its NCCL ranks rebuild their
 * communicators and run on.  Returns GCK_OK or a code, the message
 * set.
 */
static int
ckpt_nccl_resume(struct ckpt *c)
{
	if (!gck_nccl_quiesced(c->nccl))
		return GCK_OK;
	return gck_nccl_resume(c->ctx, c->nccl, GCK_NCCL_RESUME_MS);
}

/*
 * The GPU first, while the tree runs: the lock lets the CUDA work
 * already submitted finish and blocks any more; the checkpoint moves
 * device memory into each process's host memory, where CRIU finds it,
 * and releases the GPUs.
 */
static int
ckpt_quiesce(struct ckpt *c)
{
	struct gck_ctx	*ctx = c->ctx;
	int		 r;

	if (c->cu != NULL) {
		if ((r = gck_cuda_init(ctx, c->cu)) != GCK_OK ||
		    (r = gck_cuda_find(ctx, c->cu, c->cand, c->ncand, &c->cp,
		    &c->ncp)) != GCK_OK ||
		    (r = gck_cuda_all_running(ctx, "checkpoint", c->cp,
		    c->ncp)) != GCK_OK)
			return r;
	}
	if (c->ncp == 0)
		return c->cut != NULL ? ckpt_nccl(c) : GCK_OK;
	if ((r = ckpt_nccl(c)) != GCK_OK ||
	    (r = gck_cuda_devices(ctx, c->cu, 0, &c->gpus, &c->ngpus)) !=
	    GCK_OK)
		return r;
	c->gpu_touched = 1;
	/* Its CUDA work stops here: the freeze starts. */
	c->tstop = gck_clock_us();
	if ((r = gck_cuda_step(ctx, c->cu, c->cp, c->ncp, GCK_CS_LOCK,
	    c->o->lock_ms)) != GCK_OK ||
	    (r = gck_check_interrupt(ctx)) != GCK_OK)
		return r;
	gck_cuda_usage(c->cu, c->gpus, c->ngpus, c->cp, c->ncp);
	/*
	 * Where the driver has custom storage, device memory goes into
	 * spool files of ours, beside the work directory, rather than into
	 * the processes' host memory.
	 */
	/* (the driver offers none to a job) */
	if (!c->o->gpu_staging && c->job_holder == 0 &&
	    gck_cuda_storage(c->cu)) {
		snprintf(c->spool, sizeof c->spool, "%s" GCK_SPOOL_SUFFIX,
		    c->work);
		/* (format 1's chunks are compressed again, from format 2) */
		c->dsconf.format = c->o->format == 0 ? GCK_FORMAT_VERSION :
		    c->o->format < 2 ? 2 : c->o->format;
		c->dsconf.level = c->snap ? c->so.level : c->o->level;
		c->dsconf.threads = c->o->threads;
		c->dsconf.parents = ckpt_parents(c);
		c->dsconf.local = ns_local;
		c->dsconf.arg = c->ns;
		gck_devspool_ops(&c->dsconf, &c->dsops);
		if ((r = gck_cuda_store_out(ctx, c->cu, c->spool, &c->dsops)) !=
		    GCK_OK) {
			c->spool[0] = '\0';
			return r;
		}
	}
	if ((r = gck_cuda_step(ctx, c->cu, c->cp, c->ncp, GCK_CS_CHECKPOINT,
	    0)) != GCK_OK)
		return r;
	ckpt_log_storage(c);
	return gck_check_interrupt(ctx);
}

/*
 * The images whose chunks the image refers to rather than store again:
 * a snapshot's rounds, --parent's, or the receiver's cache.
 */
static const struct gck_parents *
ckpt_parents(const struct ckpt *c)
{
	return c->snap ? c->pool : c->parents != NULL ? c->parents :
	    c->o->have;
}

/* The PID the image gives the process that is pid here. */
static pid_t
ns_local(void *arg, pid_t pid)
{
	return gck_nsview_local(arg, pid);
}

/*
 * The guard's bring-back of the GPUs: device memory that went through
 * custom storage is in the spool as the image's chunks.
 */
static void
guard_bring_back(struct gck_ctx *ctx, const struct gck_proc *cand,
    size_t ncand, const char *work)
{
	struct gck_cuda_spool	ops;

	gck_devspool_ops(NULL, &ops);
	gck_cuda_bring_back(ctx, cand, ncand, work, &ops);
}

/* Says which way each process's device memory went. */
static void
ckpt_log_storage(const struct ckpt *c)
{
	size_t	i;

	for (i = 0; i < c->ncp; i++)
		if (c->cp[i].custom)
			gck_log(c->ctx, 1, "process %d: device memory of %u "
			    "GPU%s through custom storage", (int)c->cp[i].pid,
			    c->cp[i].ndev, c->cp[i].ndev == 1 ? "" : "s");
		else if (c->cp[i].refused)
			gck_log(c->ctx, 1, "process %d: the driver would not "
			    "take custom storage (%s): device memory through "
			    "its host memory", (int)c->cp[i].pid,
			    gck_cuda_errname(c->cu, c->cp[i].refused));
}

/* What the manifest says of the CUDA processes, in c->cf. */
static void
ckpt_cuda_facts(struct ckpt *c)
{
	struct gck_cuda_facts	*cf = &c->cf;

	memset(cf, 0, sizeof *cf);
	cf->driver_version = gck_cuda_version(c->cu);
	snprintf(c->cudaver, sizeof c->cudaver, "%d.%d", cf->driver_version /
	    1000, cf->driver_version % 1000 / 10);
	cf->cuda_version = c->cudaver;
	cf->release = gck_cuda_release(c->cu);
	cf->nvml = gck_cuda_has_nvml(c->cu);
	cf->gpus = c->gpus;
	cf->ngpus = c->ngpus;
	cf->procs = c->cp;
	cf->nprocs = c->ncp;
	cf->job_holder = c->job_holder;
	cf->job_fd = c->job_fd;
	cf->nccl_ranks = gck_nccl_quiesced(c->nccl) ?
	    gck_nccl_count(c->nccl) : 0;
}

/*
 * Has criu dump the tree, the image written (but its trailer) while criu
 * holds it stopped.  Returns GCK_OK with the tree left stopped, or a
 * code with the tree let go on.
 */
static int
ckpt_dump(struct ckpt *c)
{
	struct gck_ctx		*ctx = c->ctx;
	const struct gck_ptree	*pre = c->pre;
	struct wstate		 w;
	struct gck_capture_job	 job;
	struct gck_criu_stream	 stream;
	struct gck_criu_dumpopts dopts;
	size_t			 i;
	int			 r;

	/* Without GPUs to lock, the freeze is the dump's, from its start. */
	if (c->tstop == 0)
		c->tstop = gck_clock_us();
	gck_log(ctx, 1, "dumping process tree %d (%zu process%s)",
	    (int)c->o->pid, pre->n, pre->n == 1 ? "" : "es");
	if ((r = gck_capture_open(ctx, c->imgdir, c->work, c->o->part_size ?
	    c->o->part_size : GCK_PART_SIZE, &c->cap)) != GCK_OK)
		return r;
	memset(&w, 0, sizeof w);
	w.ctx = ctx;
	w.o = c->o;
	w.so = c->snap ? &c->so : c->o;
	/* A tree held for gpusend's word is handed over, as with a pipe. */
	w.after = c->commit != NULL ? GCK_AFTER_HANDOVER : c->after;
	w.cap = c->cap;
	w.criuver = c->criuver;
	w.shell_job = c->shell_job;
	w.out = c->snap ? &c->delta : &c->out;
	w.parents = ckpt_parents(c);
	if (c->ncp > 0) {
		ckpt_cuda_facts(c);
		w.cf = &c->cf;
		w.spool = c->spool;
	}
	/*
	 * criu leaves the TCP connections it dumps frozen (in repair mode,
	 * the network locked) for a restore to take over; only criu itself
	 * can let go of them, so a tree to run on is left running by criu.
	 */
	c->tcp_run = c->after == GCK_AFTER_RUN &&
	    (c->o->criu_opts & GCK_CRIU_TCP_ESTABLISHED);
	job.cap = c->cap;
	job.post = write_image;
	job.arg = &w;
	stream.during = gck_capture_during;
	stream.arg = &job;
	stream.hook = gck_capture_hook_path(c->cap);
	w.ns = c->ns;
	w.mnt = c->mnt;
	gck_meter_stage(ctx, "dumping", 0);
	dopts.shell_job = c->shell_job;
	dopts.opts = c->o->criu_opts;
	dopts.leave_running = c->tcp_run;
	dopts.ghost_limit = c->o->ghost_limit;
	dopts.extra = c->mnt != NULL ? c->mnt->args : NULL;
	dopts.nextra = c->mnt != NULL ? c->mnt->nargs : 0;
	dopts.guard = c->guard;
	r = gck_criu_dump(ctx, c->o->pid, c->whole ? NULL : c->ns, c->imgdir,
	    &dopts, &stream);
	c->dropped = w.dropped;
	c->procs = w.procs;
	c->nprocs = w.nprocs;
	c->writer = w.w;
	if (r != GCK_OK) {
		/*
		 * criu resumes the tree when it fails; should it have died
		 * without doing so, or after leaving the tree stopped,
		 * resume what it stopped.  The stop it leaves may still be
		 * pending: SIGCONT discards it as well.
		 */
		for (i = 0; i < pre->n; i++)
			if (pre->procs[i].state != 'T' &&
			    pre->procs[i].state != 't')
				kill(pre->procs[i].pid, SIGCONT);
		return r;
	}
	c->dumped = 1;
	return GCK_OK;
}

/*
 * criu has done well and left the tree stopped: the trailer makes the
 * image whole, the rename (for a file) complete, and whoever takes it
 * over has their say.  Fills the result in.
 */
static int
ckpt_commit(struct ckpt *c)
{
	struct gck_ctx	*ctx = c->ctx;
	int		 r;

	if ((r = gck_check_interrupt(ctx)) != GCK_OK ||
	    (r = gck_writer_finish(c->writer)) != GCK_OK ||
	    (r = cut_step(c, "dumped", GCK_CUT_DUMP_MS)) != GCK_OK)
		return r;
	/*
	 * The rename makes a file image complete: should we die once it is
	 * done, the guard must dispose of the tree as asked, not resume it
	 * beside an image that would restore it a second time.
	 */
	if (c->out.tmp != NULL && c->commit == NULL)
		gck_guard_intent(c->guard, (char)(guard_intent(c->after) -
		    'A' + 'a'));
	if ((r = out_commit(ctx, &c->out)) != GCK_OK) {
		/* Rolled back after all. */
		gck_guard_intent(c->guard, 'R');
		return r;
	}
	/*
	 * Every host of a cut has its image in place before any tree is
	 * disposed of; should one not, the images go and the trees run on
	 * (the job is whole either way).
	 */
	if ((r = cut_step(c, "committed", GCK_CUT_COMMIT_MS)) != GCK_OK) {
		gck_guard_intent(c->guard, 'R');
		if (c->out.path != NULL && c->out.kind == S_IFREG &&
		    !c->out.inplace)
			unlink(c->out.path);
		return r;
	}
	/* Whoever takes the image over may still say no. */
	if (c->commit != NULL && (r = c->commit(ctx, c->commit_arg, c->guard,
	    &c->after)) != GCK_OK)
		return r;
	if ((r = ckpt_result(ctx, c->res, c->after, c->procs, c->nprocs,
	    c->ncp, &c->out)) == GCK_OK && c->res != NULL)
		c->res->ref_bytes = gck_writer_refbytes(c->writer);
	return r;
}

/*
 * A cut across hosts: this host has reached phase; every one of them
 * must within ms, else the checkpoint fails here too.
 */
static int
cut_step(struct ckpt *c, const char *phase, unsigned int ms)
{
	char	*others;
	int	 r;

	if (c->cut == NULL)
		return GCK_OK;
	gck_log(c->ctx, 1, "%s: waiting for the cut's other hosts", phase);
	if ((r = gck_cut_post(c->ctx, c->cut, phase, "")) != GCK_OK ||
	    (r = gck_cut_gather(c->ctx, c->cut, phase, gck_clock_us() +
	    (int64_t)ms * 1000, &others)) != GCK_OK)
		return r;
	free(others);
	return GCK_OK;
}

/*
 * The statistics of a checkpoint done, in c->st: the writer's counts,
 * the zero pages the scan left out, and the freeze, from the GPU lock
 * or the dump to the tree's end, resumption or hand-over.
 */
static void
ckpt_stats(struct ckpt *c)
{
	struct gck_stats	*st = &c->st;
	uint64_t		 bytes, holes;
	int64_t			 now = gck_clock_us();

	gck_writer_counts(c->writer, &st->memory_bytes, &st->image_bytes);
	gck_writer_stats(c->writer, &bytes, &holes);
	st->memory_bytes += c->dropped;
	st->zero_bytes = holes + c->dropped;
	st->unchanged_bytes = gck_writer_refbytes(c->writer);
	/* A snapshot's image is written from what the stop wrote. */
	if (c->snap) {
		st->image_bytes = c->snap_image;
		st->unchanged_bytes = c->snap_refs;
	}
	st->freeze_ms = c->tstop != 0 ? gck_stats_ms(c->tstop, c->tran != 0 ?
	    c->tran : now) : 0;
	st->total_ms = gck_stats_ms(c->t0, now);
	if (c->res != NULL)
		c->res->stats = *st;
}

/*
 * The image is complete and flushed: disposes of the tree as after
 * says.  A signal that arrives now comes too late to change that.
 */
static int
ckpt_dispose(struct ckpt *c)
{
	struct gck_ctx	*ctx = c->ctx;

	gck_guard_intent(c->guard, guard_intent(c->after));
	switch (c->after) {
	case GCK_AFTER_KILL:
		gck_log(ctx, 1, "killing process tree %d", (int)c->o->pid);
		/*
		 * Only the processes dumped: on this host, a restore may
		 * already have ended them and given their PIDs to the
		 * restored tree.
		 */
		gck_psts_signal(c->procs, c->nprocs, SIGKILL);
		if (gck_psts_wait_gone(c->procs, c->nprocs, 10000) == -1)
			return gck_set_syserr(ctx, ETIMEDOUT, "process tree %d "
			    "did not die after SIGKILL", (int)c->o->pid);
		break;
	case GCK_AFTER_RUN:
		resume_tree(c->pre, c->procs, c->nprocs);
		ckpt_ran(c);
		if (c->gpu_touched && gck_cuda_settle(c->cu, c->cp, c->ncp,
		    c->why, sizeof c->why) > 0) {
			/* The image stands; out_abort() leaves it be. */
			c->dumped = c->gpu_touched = 0;
			return gck_set_error(ctx, GCK_ECUDA, "the image is "
			    "complete, but a process could not get its GPU "
			    "back: %s", c->why);
		}
		if (ckpt_nccl_resume(c) != GCK_OK) {
			c->dumped = c->gpu_touched = 0;
			return gck_error_prefix(ctx, "the image is complete, "
			    "but ");
		}
		break;
	default:
		break;
	}
	return GCK_OK;
}

/*
 * After a failure (r): the tree is left as we found it, its GPUs given
 * back, and the message ends with what became of it.
 */
static void
ckpt_rollback(struct ckpt *c, int r)
{
	struct gck_ctx	*ctx = c->ctx;
	size_t		 nbad;
	int		 pid = (int)c->o->pid;

	/* The other hosts of a cut roll back too. */
	gck_cut_fail(c->cut, ctx->msg);
	out_abort(&c->out);
	if (c->dumped) {
		/* Roll back: the tree is left as we found it. */
		resume_tree(c->pre, c->procs, c->nprocs);
	}
	/* Its restore threads running again, the GPU comes back. */
	nbad = c->gpu_touched ? gck_cuda_settle(c->cu, c->cp, c->ncp, c->why,
	    sizeof c->why) : (size_t)c->gpu_lost;
	if (gck_nccl_settle(c->nccl, nbad == 0 ? c->why : NULL,
	    sizeof c->why) != GCK_OK && nbad == 0)
		nbad = 1;
	if (r != GCK_ENOPROC && c->pre != NULL) {
		if (nbad > 0)
			gck_error_fate(ctx, GCK_FATE_RUNNING, "process tree %d "
			    "left running, but %s", pid, c->why);
		else if (c->dumped && !c->tcp_run &&
		    (c->o->criu_opts & GCK_CRIU_TCP_ESTABLISHED))
			gck_error_fate(ctx, GCK_FATE_RUNNING, "process tree %d "
			    "left running, but its TCP connections stay "
			    "frozen, as criu --tcp-established left them", pid);
		else if (c->pre->procs[0].state == 'T')
			gck_error_fate(ctx, GCK_FATE_STOPPED, "process tree %d "
			    "left stopped, as it was", pid);
		else
			gck_error_fate(ctx, GCK_FATE_RUNNING, "process tree %d "
			    "left running", pid);
	}
	gck_ckpt_result_free(c->res);
}

/* Frees what the phases left, the work directory before the guard. */
static void
ckpt_free(struct ckpt *c)
{
	gck_writer_free(c->writer);
	gck_parents_free(c->parents);
	gck_parents_free(c->pool);
	gck_memo_free(c->memo);
	if (c->delta.fd != -1)
		close(c->delta.fd);
	gck_capture_free(c->cap);
	/*
	 * The work directory goes before the guard hears that all is
	 * settled: killed in between, we leave it to the guard.
	 */
	gck_rmtree(c->work);
	if (c->spool[0] != '\0')
		gck_rmtree(c->spool);
	gck_guard_free(c->guard);
	gck_cuda_close(c->cu);
	gck_nccl_free(c->nccl);
	gck_cut_free(c->cut);
	free(c->cp);
	free(c->gpus);
	free(c->cand);
	free(c->work);
	free(c->procs);
	gck_ptree_free(c->pre);
	gck_nsview_free(c->ns);
	gck_mntns_free(c->mnt);
}

/*
 * A snapshot is taken in two halves (snapshot.c): a tree left running,
 * to a file or a stream, in an image that may have parents.  A tree
 * whose TCP connections criu lets run is no snapshot: criu never stops
 * it.
 */
static int
snap_wanted(const struct ckpt *c)
{
	const struct gck_ckpt_opts	*o = c->o;

	return c->after == GCK_AFTER_RUN && c->commit == NULL &&
	    c->cut == NULL &&
	    !c->out.null && o->format != 1 && o->level > 0 &&
	    o->have == NULL && o->memo == NULL &&
	    !(o->criu_opts & GCK_CRIU_TCP_ESTABLISHED);
}

/*
 * The rounds, the tree running; the stop is then to write, fast, an
 * image of what changed since into the work directory.
 */
static int
snap_rounds(struct ckpt *c)
{
	struct gck_ctx	*ctx = c->ctx;
	char		 path[PATH_MAX];
	int		 r;

	if ((c->memo = gck_memo_new()) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	gck_meter_stage(ctx, "pre-copy", 0);
	if ((r = gck_snap_rounds(ctx, c->o->pid, c->work, c->o->parent,
	    c->memo, &c->pool)) != GCK_OK)
		return r;
	snprintf(path, sizeof path, "%s/stop.img", c->work);
	if ((c->delta.fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC,
	    0600)) == -1)
		return gck_set_syserr(ctx, errno, "cannot create '%s': %s",
		    path, strerror(errno));
	c->so = *c->o;
	c->so.level = GCK_SNAP_LEVEL;
	c->so.memo = c->memo;
	c->so.sign = NULL;
	c->so.parent = NULL;
	c->snap = 1;
	return GCK_OK;
}

/* The tree runs again: how long it was stopped. */
static void
ckpt_ran(struct ckpt *c)
{
	c->tran = gck_clock_us();
	gck_log(c->ctx, 1, "process tree %d ran again after %llu ms stopped",
	    (int)c->o->pid, (unsigned long long)(c->tstop != 0 ?
	    gck_stats_ms(c->tstop, c->tran) : 0));
}

/*
 * The image of the stop is whole: the tree runs again, its GPUs given
 * back, and the image asked for is written from that image and the
 * rounds'.  A failure from now on fails the snapshot, the tree running.
 */
static int
snap_commit(struct ckpt *c)
{
	struct gck_ctx	*ctx = c->ctx;
	int		 r;

	if ((r = gck_check_interrupt(ctx)) != GCK_OK ||
	    (r = gck_writer_finish(c->writer)) != GCK_OK)
		return r;
	resume_tree(c->pre, c->procs, c->nprocs);
	c->dumped = 0;
	ckpt_ran(c);
	if (c->gpu_touched) {
		c->gpu_touched = 0;
		c->gpu_lost = gck_cuda_settle(c->cu, c->cp, c->ncp, c->why,
		    sizeof c->why) > 0;
	}
	if ((r = ckpt_nccl_resume(c)) != GCK_OK)
		return gck_error_prefix(ctx, "the snapshot's tree ran again, "
		    "but ");
	gck_log(ctx, 1, "writing image");
	gck_meter_stage(ctx, "writing", 0);
	if ((r = gck_snap_write(ctx, c->delta.fd, c->pool, c->memo, c->o,
	    c->parents, c->out.fd, &c->snap_image, &c->snap_refs)) != GCK_OK ||
	    (r = gck_check_interrupt(ctx)) != GCK_OK ||
	    (r = out_commit(ctx, &c->out)) != GCK_OK ||
	    (r = ckpt_result(ctx, c->res, c->after, c->procs, c->nprocs,
	    c->ncp, &c->out)) != GCK_OK)
		return r;
	if (c->res != NULL)
		c->res->ref_bytes = c->snap_refs;
	if (c->gpu_lost) {
		/* The image stands; out_abort() leaves it be. */
		c->gpu_lost = 0;
		return gck_set_error(ctx, GCK_ECUDA, "the image is complete, "
		    "but a process could not get its GPU back: %s", c->why);
	}
	return GCK_OK;
}

int
gck_checkpoint_ex(struct gck_ctx *ctx, const struct gck_ckpt_opts *o,
    gck_commit_fn commit, void *commit_arg, struct gck_ckpt_result *res)
{
	struct ckpt	c;
	int		r;

	c = (struct ckpt){ .ctx = ctx, .o = o, .commit = commit,
	    .commit_arg = commit_arg, .res = res, .after = o->after };
	c.out.fd = c.delta.fd = -1;
	c.t0 = c.mark = gck_clock_us();
	if (res != NULL)
		memset(res, 0, sizeof *res);
	if ((r = ckpt_preflight(&c)) != GCK_OK)
		goto out;
	gck_stats_stage(&c.st, "check", &c.mark);
	if ((r = ckpt_stage(&c)) != GCK_OK)
		goto out;
	gck_stats_stage(&c.st, "prepare", &c.mark);
	if (snap_wanted(&c)) {
		if ((r = snap_rounds(&c)) != GCK_OK)
			goto out;
		gck_stats_stage(&c.st, "rounds", &c.mark);
	}
	if ((r = ckpt_quiesce(&c)) != GCK_OK)
		goto out;
	if (c.ncp > 0)
		gck_stats_stage(&c.st, "gpu", &c.mark);
	if ((r = ckpt_dump(&c)) != GCK_OK)
		goto out;
	gck_stats_stage(&c.st, "dump", &c.mark);
	if (c.snap) {
		if ((r = snap_commit(&c)) != GCK_OK)
			goto out;
		gck_stats_stage(&c.st, "write", &c.mark);
	} else {
		if ((r = ckpt_commit(&c)) != GCK_OK)
			goto out;
		gck_stats_stage(&c.st, "finish", &c.mark);
		if ((r = ckpt_dispose(&c)) != GCK_OK)
			goto out;
		gck_stats_stage(&c.st, "dispose", &c.mark);
	}
	ckpt_stats(&c);
	r = GCK_OK;
out:
	if (r != GCK_OK)
		ckpt_rollback(&c, r);
	else {
		free(c.out.path);
		free(c.out.tmp);
	}
	ckpt_free(&c);
	return r;
}
