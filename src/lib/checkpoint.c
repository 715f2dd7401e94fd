/*
 * checkpoint.c: gck_checkpoint(), the safety protocol of gpuckpt.
 *
 * CRIU dumps the tree and leaves it stopped; the image is streamed; only
 * once all of it, trailer included, has been written and flushed is the
 * tree disposed of.  Any failure before that resumes the tree.
 */
#include "config.h"

#include <sys/stat.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "private.h"

struct out {
	char	*path;		/* final name, or NULL for a given fd */
	char	*tmp;		/* temporary name while writing */
	int	 fd;
	int	 owned;
};

static int	out_open(struct gck_ctx *, const struct gck_ckpt_opts *,
		    struct out *);
static int	out_commit(struct gck_ctx *, struct out *);
static void	out_abort(struct out *);
static int	stream_image(struct gck_ctx *, const struct gck_ckpt_opts *,
		    const char *, const char *, int);
static int	image_order(const struct dirent **, const struct dirent **);
static int	image_rank(const char *);
static int	tree_restorable(struct gck_ctx *, const struct gck_ptree *,
		    pid_t);

static int
out_open(struct gck_ctx *ctx, const struct gck_ckpt_opts *o, struct out *out)
{
	out->fd = -1;
	if (o->output == NULL) {
		out->fd = o->outfd;
		return GCK_OK;
	}
	if ((out->path = strdup(o->output)) == NULL ||
	    asprintf(&out->tmp, "%s.tmp.XXXXXX", o->output) == -1) {
		out->tmp = NULL;
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	}
	if ((out->fd = mkostemp(out->tmp, O_CLOEXEC)) == -1) {
		int	oerrno = errno;

		free(out->tmp);
		out->tmp = NULL;
		return gck_set_syserr(ctx, oerrno, "cannot create '%s': %s",
		    o->output, strerror(oerrno));
	}
	out->owned = 1;
	return GCK_OK;
}

/* Makes the output durable and, for a file, gives it its name. */
static int
out_commit(struct gck_ctx *ctx, struct out *out)
{
	struct stat	 st;
	char		*dir;
	int		 dfd;

	if (fstat(out->fd, &st) == 0 && S_ISREG(st.st_mode) &&
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

/*
 * Restore reads inventory.img first and the page data last: the stream
 * carries them in that order.
 */
static int
image_rank(const char *name)
{
	if (strcmp(name, "inventory.img") == 0)
		return 0;
	if (strncmp(name, "pagemap", 7) == 0)
		return 2;
	if (strncmp(name, "pages-", 6) == 0)
		return 3;
	return 1;
}

static int
image_order(const struct dirent **a, const struct dirent **b)
{
	int	ra = image_rank((*a)->d_name), rb = image_rank((*b)->d_name);

	if (ra != rb)
		return ra - rb;
	return strcmp((*a)->d_name, (*b)->d_name);
}

static int
regular_only(const struct dirent *d)
{
	return d->d_name[0] != '.';
}

static int
stream_image(struct gck_ctx *ctx, const struct gck_ckpt_opts *o,
    const char *manifest, const char *imgdir, int fd)
{
	struct gck_writer	*w = NULL;
	struct dirent		**names = NULL;
	char			 path[PATH_MAX];
	int			 n = -1, i, r, ffd;

	if ((n = scandir(imgdir, &names, regular_only, image_order)) == -1) {
		r = gck_set_syserr(ctx, errno, "cannot read '%s': %s", imgdir,
		    strerror(errno));
		goto out;
	}
	if ((r = gck_writer_new(ctx, fd, o->level, o->part_size, &w)) !=
	    GCK_OK)
		goto out;
	if ((r = gck_writer_add(w, "gpuckpt.json", manifest,
	    strlen(manifest))) != GCK_OK)
		goto out;
	for (i = 0; i < n; i++) {
		snprintf(path, sizeof path, "%.3800s/%s", imgdir,
		    names[i]->d_name);
		if ((ffd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) ==
		    -1) {
			r = gck_set_syserr(ctx, errno, "cannot open '%s': %s",
			    path, strerror(errno));
			goto out;
		}
		gck_log(ctx, 2, "adding %s", names[i]->d_name);
		r = gck_writer_add_file(w, names[i]->d_name, ffd);
		close(ffd);
		if (r != GCK_OK)
			goto out;
	}
	r = gck_writer_finish(w);
out:
	gck_writer_free(w);
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return r;
}

/*
 * Refuses, before it is touched, a tree whose image could not be made or
 * could never be restored:
 * - gpurestore restores detached, with no terminal to hand out, so a
 *   process with a terminal open could be dumped but never restored;
 * - session 0 is the one a process has when no ancestor ever called
 *   setsid() in this PID namespace (children of an init that never did,
 *   or of a session leader outside the namespace), and CRIU cannot
 *   record it.
 */
static int
tree_restorable(struct gck_ctx *ctx, const struct gck_ptree *t, pid_t root)
{
	const struct gck_proc	*p;
	char			 tty[256];
	size_t			 i;
	int			 fd;

	for (i = 0; i < t->n; i++) {
		p = &t->procs[i];
		if ((fd = gck_pid_tty_fd(p->pid, tty, sizeof tty)) != -1)
			return gck_set_error(ctx, GCK_EINVAL, "cannot "
			    "checkpoint pid %d: process %d ('%s') has terminal "
			    "%s open on fd %d, which a restore could not give "
			    "back (start the job with its input and output on "
			    "files, e.g. nohup or setsid)", (int)root,
			    (int)p->pid, p->comm, tty, fd);
		if (p->sid == 0)
			return gck_set_error(ctx, GCK_EINVAL, "cannot "
			    "checkpoint pid %d: process %d ('%s') is in session "
			    "0 (its session leader is outside this PID "
			    "namespace), which CRIU cannot record (start the "
			    "job with setsid)", (int)root, (int)p->pid, p->comm);
	}
	return GCK_OK;
}

int
gck_checkpoint(struct gck_ctx *ctx, const struct gck_ckpt_opts *o)
{
	struct gck_ptree	*pre = NULL, *t = NULL;
	struct gck_guard	*guard = NULL;
	struct gck_proc		*cand = NULL;
	struct gck_cuda		*cu = NULL;
	struct gck_cproc	*cp = NULL;
	struct gck_gpu		*gpus = NULL;
	struct gck_cuda_facts	 cf;
	struct out		 out = { NULL, NULL, -1, 0 };
	char			*work = NULL, *manifest = NULL;
	char			 imgdir[PATH_MAX], criuver[64], msg[GCK_ERRMAX];
	pid_t			*pids = NULL;
	size_t			 npids = 0, i, ncand = 0, ncp = 0, ngpus = 0;
	size_t			 nbad;
	int			 r, shell_job, dumped = 0, gpu_touched = 0;
	char			 cudaver[16], why[GCK_ERRMAX];

	if ((r = gck_ptree_scan(ctx, o->pid, &pre)) != GCK_OK)
		goto out;
	for (i = 0; i < pre->n; i++)
		if (pre->procs[i].pid == getpid()) {
			r = gck_set_error(ctx, GCK_EINVAL, "cannot checkpoint "
			    "pid %d: the tree contains this gpuckpt (pid %d)",
			    (int)o->pid, (int)getpid());
			gck_ptree_free(pre);
			pre = NULL;
			goto out;
		}
	if ((r = tree_restorable(ctx, pre, o->pid)) != GCK_OK)
		goto out;
	if ((r = gck_cuda_candidates(ctx, pre, &cand, &ncand)) != GCK_OK ||
	    (r = gck_cuda_prepare(ctx, "checkpoint", o->pid, cand, ncand,
	    &cu)) != GCK_OK)
		goto out;
	/*
	 * A root that does not lead its own session, or has a controlling
	 * terminal, belongs to a shell's job: CRIU must be told.
	 */
	shell_job = pre->procs[0].sid != pre->procs[0].pid ||
	    pre->procs[0].tty_nr != 0;
	if ((r = gck_check_interrupt(ctx)) != GCK_OK)
		goto out;
	if ((r = gck_mkworkdir(ctx, o->tmpdir, &work)) != GCK_OK)
		goto out;
	snprintf(imgdir, sizeof imgdir, "%s/img", work);
	if (mkdir(imgdir, 0700) == -1) {
		r = gck_set_syserr(ctx, errno, "cannot make '%s': %s", imgdir,
		    strerror(errno));
		goto out;
	}
	if ((r = gck_criu_version(ctx, work, criuver, sizeof criuver)) !=
	    GCK_OK)
		goto out;
	if ((r = out_open(ctx, o, &out)) != GCK_OK)
		goto out;
	if ((r = gck_guard_start(ctx, o->pid, work, out.tmp, cand, ncand,
	    &guard)) != GCK_OK)
		goto out;

	/*
	 * The GPU first, while the tree runs: the lock lets the CUDA work
	 * already submitted finish and blocks any more; the checkpoint
	 * moves device memory into each process's host memory, where CRIU
	 * finds it, and releases the GPUs.
	 */
	if (cu != NULL) {
		if ((r = gck_cuda_init(ctx, cu)) != GCK_OK ||
		    (r = gck_cuda_find(ctx, cu, cand, ncand, &cp, &ncp)) !=
		    GCK_OK || (r = gck_cuda_all_running(ctx, "checkpoint", cp,
		    ncp)) != GCK_OK)
			goto out;
	}
	if (ncp > 0) {
		if ((r = gck_cuda_devices(ctx, cu, 0, &gpus, &ngpus)) != GCK_OK)
			goto out;
		gpu_touched = 1;
		if ((r = gck_cuda_step(ctx, cu, cp, ncp, GCK_CS_LOCK,
		    o->lock_ms)) != GCK_OK ||
		    (r = gck_check_interrupt(ctx)) != GCK_OK)
			goto out;
		gck_cuda_usage(cu, gpus, ngpus, cp, ncp);
		if ((r = gck_cuda_step(ctx, cu, cp, ncp, GCK_CS_CHECKPOINT,
		    0)) != GCK_OK || (r = gck_check_interrupt(ctx)) != GCK_OK)
			goto out;
	}

	gck_log(ctx, 1, "dumping process tree %d (%zu processes)",
	    (int)o->pid, pre->n);
	if ((r = gck_criu_dump(ctx, o->pid, work, imgdir, shell_job)) !=
	    GCK_OK) {
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
		goto out;
	}
	dumped = 1;
	/* The tree is stopped now: this view of it is stable. */
	if ((r = gck_ptree_scan(ctx, o->pid, &t)) != GCK_OK)
		goto out;
	if ((pids = calloc(t->n, sizeof *pids)) == NULL) {
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < t->n; i++)
		pids[npids++] = t->procs[i].pid;
	if ((r = gck_check_interrupt(ctx)) != GCK_OK)
		goto out;
	if (ncp > 0) {
		memset(&cf, 0, sizeof cf);
		cf.driver_version = gck_cuda_version(cu);
		snprintf(cudaver, sizeof cudaver, "%d.%d", cf.driver_version /
		    1000, cf.driver_version % 1000 / 10);
		cf.cuda_version = cudaver;
		cf.release = gck_cuda_release(cu);
		cf.nvml = gck_cuda_has_nvml(cu);
		cf.gpus = gpus;
		cf.ngpus = ngpus;
		cf.procs = cp;
		cf.nprocs = ncp;
	}
	if ((manifest = gck_manifest_build(ctx, t, o, criuver,
	    shell_job, ncp > 0 ? &cf : NULL)) == NULL) {
		r = ctx->code;
		goto out;
	}
	gck_log(ctx, 1, "writing image");
	if ((r = stream_image(ctx, o, manifest, imgdir, out.fd)) != GCK_OK)
		goto out;
	if ((r = out_commit(ctx, &out)) != GCK_OK)
		goto out;

	/*
	 * The image is complete and flushed: dispose of the tree.  A signal
	 * that arrives now comes too late to change that.
	 */
	gck_guard_intent(guard, "KRS"[o->after]);
	switch (o->after) {
	case GCK_AFTER_KILL:
		gck_log(ctx, 1, "killing process tree %d", (int)o->pid);
		gck_pids_signal(pids, npids, SIGKILL);
		if (gck_pids_wait_dead(pids, npids, 10000) == -1) {
			r = gck_set_error(ctx, GCK_ESYS, "process tree %d "
			    "did not die after SIGKILL", (int)o->pid);
			goto out;
		}
		break;
	case GCK_AFTER_RUN:
		gck_pids_signal(pids, npids, SIGCONT);
		if (gpu_touched && gck_cuda_settle(cu, cp, ncp, why,
		    sizeof why) > 0) {
			/* The image stands; out_abort() leaves it be. */
			dumped = gpu_touched = 0;
			r = gck_set_error(ctx, GCK_ECUDA, "the image is "
			    "complete, but a process could not get its GPU "
			    "back: %s", why);
			goto out;
		}
		break;
	case GCK_AFTER_STOP:
		break;
	}
	dumped = 0;
	gpu_touched = 0;
	r = GCK_OK;
out:
	if (r != GCK_OK) {
		out_abort(&out);
		if (dumped) {
			/* Roll back: the tree runs on as if nothing happened. */
			gck_pids_signal(pids, npids, SIGCONT);
		}
		/* Its restore threads running again, the GPU comes back. */
		nbad = gpu_touched ? gck_cuda_settle(cu, cp, ncp, why,
		    sizeof why) : 0;
		if (r != GCK_ENOPROC && pre != NULL) {
			int	oerrno = ctx->oerrno;

			snprintf(msg, sizeof msg, "%s", ctx->msg);
			if (nbad > 0)
				gck_set_error(ctx, r, "%s; process tree %d "
				    "left running, but %s", msg, (int)o->pid,
				    why);
			else
				gck_set_error(ctx, r, "%s; process tree %d left "
				    "running", msg, (int)o->pid);
			ctx->oerrno = oerrno;
		}
	} else {
		free(out.path);
		free(out.tmp);
	}
	gck_guard_free(guard);
	gck_cuda_close(cu);
	free(cp);
	free(gpus);
	free(cand);
	gck_rmtree(work);
	free(work);
	free(manifest);
	free(pids);
	gck_ptree_free(pre);
	gck_ptree_free(t);
	return r;
}
