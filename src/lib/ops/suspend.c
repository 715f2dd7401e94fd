/*
 * suspend.c: gck_suspend() and gck_resume(), a GPU freed in place.
 *
 * No CRIU here: the CUDA processes of a tree are locked and checkpointed
 * (device memory into their host memory, GPUs released) and go on
 * running on the CPU, their CUDA calls waiting; later they are restored,
 * possibly onto other GPUs of the host, and unlocked.  Where the driver
 * has custom storage, the device memory is parked in files of ours
 * instead, in a directory named for the tree (park_dir()), which the
 * resume takes it back from.
 */
#include "config.h"

#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "private.h"
#include "core/proc.h"
#include "core/util.h"
#include "gpu/cuda.h"
#include "gpu/job.h"
#include "gpu/nccl.h"
#include "gpu/gpumap.h"

struct cuda_tree {
	struct gck_ptree	*t;
	struct gck_proc		*cand;
	size_t			 ncand;
	struct gck_cuda		*cu;
	struct gck_cproc	*cp;
	size_t			 ncp;
	pid_t			 job_holder;	/* of a job (job.c) */
};

static int	cuda_tree_open(struct gck_ctx *, const char *, pid_t,
		    struct cuda_tree *);
static void	cuda_tree_close(struct cuda_tree *);
static int	park_dir(struct gck_ctx *, pid_t, char *, size_t);

/*
 * Where the device memory of the suspended tree rooted at pid is parked
 * (custom storage): gpuckpt-parked.PID.START in $TMPDIR (/var/tmp), the
 * root's start time telling one tree of that PID from another.
 */
static int
park_dir(struct gck_ctx *ctx, pid_t pid, char *buf, size_t len)
{
	const char	*tmpdir = getenv("TMPDIR");
	int		 n;

	if (tmpdir == NULL || *tmpdir == '\0')
		tmpdir = "/var/tmp";
	n = snprintf(buf, len, "%s/gpuckpt-parked.%d.%llu", tmpdir, (int)pid,
	    (unsigned long long)gck_pid_start(pid));
	if (n < 0 || (size_t)n >= len)
		return gck_set_error(ctx, GCK_EINVAL, "TMPDIR is too long");
	return GCK_OK;
}

/* Finds the CUDA processes of the tree rooted at pid, driver loaded. */
static int
cuda_tree_open(struct gck_ctx *ctx, const char *what, pid_t pid,
    struct cuda_tree *ct)
{
	struct gck_nsview	*ns = NULL;
	int			 r, fd;

	memset(ct, 0, sizeof *ct);
	if ((r = gck_ptree_scan(ctx, pid, &ct->t)) != GCK_OK ||
	    (r = gck_cuda_candidates(ctx, ct->t, &ct->cand, &ct->ncand)) !=
	    GCK_OK || (r = gck_nsview_of(ctx, pid, &ns)) != GCK_OK)
		return r;
	r = gck_job_setup(ctx, what, pid, ct->t, ct->cand, ct->ncand, ns,
	    &ct->job_holder, &fd);
	gck_nsview_free(ns);
	if (r != GCK_OK || (r = gck_cuda_prepare(ctx, what, pid, ct->cand,
	    ct->ncand, &ct->cu)) != GCK_OK)
		return r;
	if (ct->cu != NULL)
		gck_cuda_set_serial(ct->cu, ct->job_holder > 0);
	if (ct->cu != NULL &&
	    ((r = gck_cuda_init(ctx, ct->cu)) != GCK_OK ||
	    (r = gck_cuda_find(ctx, ct->cu, ct->cand, ct->ncand, &ct->cp,
	    &ct->ncp)) != GCK_OK))
		return r;
	if (ct->ncp == 0)
		return gck_set_error(ctx, GCK_EINVAL, "cannot %s pid %d: no "
		    "process of its tree uses CUDA", what, (int)pid);
	return GCK_OK;
}

static void
cuda_tree_close(struct cuda_tree *ct)
{
	gck_cuda_close(ct->cu);
	free(ct->cp);
	free(ct->cand);
	gck_ptree_free(ct->t);
}

int
gck_suspend(struct gck_ctx *ctx, pid_t pid, unsigned int lock_ms,
    int staging, size_t *np)
{
	struct cuda_tree	 ct;
	struct gck_nccl		*q = NULL;
	char			 why[GCK_ERRMAX], park[PATH_MAX] = "";
	size_t			 i, nc = 0;
	int			 r;

	*np = 0;
	if ((r = cuda_tree_open(ctx, "suspend", pid, &ct)) != GCK_OK ||
	    (r = gck_cuda_all_running(ctx, "suspend", ct.cp, ct.ncp)) !=
	    GCK_OK)
		goto out;
	/*
	 * An NCCL job's ranks quiesce first, as for a checkpoint
	 * (checkpoint.c), and wait parked, with no lease, for the resume.
	 */
	if ((r = gck_nccl_find_procs(ctx, ct.cand, ct.ncand, &q)) != GCK_OK ||
	    (r = gck_nccl_quiesce(ctx, q, GCK_NCCL_TIMEOUT_MS, 0, NULL)) !=
	    GCK_OK) {
		gck_error_fate(ctx, GCK_FATE_RUNNING, "process tree %d left "
		    "running on its GPUs", (int)pid);
		goto out;
	}
	/* (the driver offers no custom storage to a job) */
	if (!staging && ct.job_holder == 0 && gck_cuda_storage(ct.cu)) {
		if ((r = park_dir(ctx, pid, park, sizeof park)) != GCK_OK)
			goto out;
		/* (one left by a tree of that PID and start is not ours) */
		if (mkdir(park, 0700) == -1) {
			r = gck_set_syserr(ctx, errno, "cannot make '%s': %s",
			    park, strerror(errno));
			park[0] = '\0';
			goto out;
		}
		if ((r = gck_cuda_store_out(ctx, ct.cu, park, NULL)) != GCK_OK)
			goto out;
	}
	if ((r = gck_cuda_step(ctx, ct.cu, ct.cp, ct.ncp, GCK_CS_LOCK,
	    lock_ms)) != GCK_OK || (r = gck_check_interrupt(ctx)) != GCK_OK ||
	    (r = gck_cuda_step(ctx, ct.cu, ct.cp, ct.ncp, GCK_CS_CHECKPOINT,
	    0)) != GCK_OK) {
		if (gck_cuda_settle(ct.cu, ct.cp, ct.ncp, why, sizeof why) > 0)
			gck_error_fate(ctx, GCK_FATE_RUNNING, "and %s", why);
		else if (gck_nccl_settle(q, why, sizeof why) != GCK_OK)
			gck_error_fate(ctx, GCK_FATE_RUNNING, "process tree %d "
			    "left running on its GPUs, but %s", (int)pid, why);
		else
			gck_error_fate(ctx, GCK_FATE_RUNNING, "process tree %d "
			    "left running on its GPUs", (int)pid);
		goto out;
	}
	for (i = 0; i < ct.ncp; i++)
		nc += ct.cp[i].custom;
	if (nc > 0)
		gck_log(ctx, 1, "device memory of %zu process%s parked in "
		    "'%s'", nc, nc == 1 ? "" : "es", park);
	*np = ct.ncp;
out:
	/* Parked memory stays only for a tree suspended that way. */
	if (park[0] != '\0' && (r != GCK_OK || nc == 0))
		gck_rmtree(park);
	gck_nccl_free(q);
	cuda_tree_close(&ct);
	return r;
}

int
gck_resume(struct gck_ctx *ctx, pid_t pid, const char *map, size_t *np)
{
	struct cuda_tree	 ct;
	struct gck_nccl		*q = NULL;
	struct gck_gpu		*host = NULL;
	struct gck_cproc	*todo = NULL;
	unsigned char		 pairs[GCK_GPUS_MAX][2][16];
	unsigned int		 npairs = 0;
	char			 ver[32], msg[GCK_ERRMAX], park[PATH_MAX];
	size_t			 i, n, m, nhost = 0;
	int			 r, r2;

	*np = 0;
	if ((r = cuda_tree_open(ctx, "resume", pid, &ct)) != GCK_OK ||
	    (r = park_dir(ctx, pid, park, sizeof park)) != GCK_OK)
		goto out;
	/* Those whose device memory is parked come back from there. */
	gck_cuda_spool_learn(ct.cu, ct.cp, ct.ncp, park, NULL);
	/*
	 * Processes left RUNNING (a suspend cut short) are passed over,
	 * but a tree with none suspended is refused, as is a FAILED one.
	 */
	for (i = n = 0; i < ct.ncp; i++) {
		if (ct.cp[i].state == GCK_CUDA_RUNNING)
			continue;
		if (ct.cp[i].state == GCK_CUDA_LOCKED ||
		    ct.cp[i].state == GCK_CUDA_CHECKPOINTED) {
			n++;
			continue;
		}
		r = gck_set_error(ctx, GCK_EINVAL, "cannot resume process %d "
		    "('%s'): its CUDA state is %s", (int)ct.cp[i].pid,
		    ct.cp[i].comm, gck_cuda_state_name(ct.cp[i].state));
		goto out;
	}
	if (n == 0) {
		r = gck_set_error(ctx, GCK_EINVAL, "cannot resume process %d "
		    "('%s'): its CUDA state is RUNNING, it is not suspended",
		    (int)ct.cp[0].pid, ct.cp[0].comm);
		goto out;
	}
	if (map != NULL) {
		if (gck_cuda_version(ct.cu) < GCK_CUDA_REMAP_VERSION) {
			gck_cuda_version_string(gck_cuda_version(ct.cu), ver,
			    sizeof ver);
			r = gck_set_error(ctx, GCK_ECUDA, "cannot resume onto "
			    "other GPUs: remapping needs NVIDIA driver r580 "
			    "(CUDA 13.0) or newer; this driver is %s", ver);
			goto out;
		}
		if ((r = gck_cuda_devices(ctx, ct.cu, 0, &host, &nhost)) !=
		    GCK_OK || (r = gck_gpumap_host(ctx, host, nhost, map,
		    pairs, &npairs)) != GCK_OK)
			goto out;
	}
	if ((todo = calloc(ct.ncp, sizeof *todo)) == NULL) {
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	/* The checkpointed ones are restored, then the locked unlocked. */
	for (i = n = 0; i < ct.ncp; i++)
		if (ct.cp[i].state == GCK_CUDA_CHECKPOINTED) {
			todo[n] = ct.cp[i];
			memcpy(todo[n].pairs, pairs, sizeof pairs);
			todo[n].npairs = npairs;
			n++;
		}
	if ((r = gck_cuda_step(ctx, ct.cu, todo, n, GCK_CS_RESTORE, 0)) !=
	    GCK_OK)
		snprintf(msg, sizeof msg, "%.900s (it stays suspended)",
		    ctx->msg);
	for (i = m = 0; i < n; i++)
		if (todo[i].state == GCK_CUDA_LOCKED)
			todo[m++] = todo[i];
	for (i = 0; i < ct.ncp; i++)
		if (ct.cp[i].state == GCK_CUDA_LOCKED)
			todo[m++] = ct.cp[i];
	r2 = gck_cuda_step(ctx, ct.cu, todo, m, GCK_CS_UNLOCK, 0);
	if (r != GCK_OK)
		gck_set_error(ctx, r, "%s", msg);
	else
		r = r2;
	/* An NCCL job's ranks rebuild, their GPUs back. */
	if (r == GCK_OK && (r = gck_nccl_find_procs(ctx, ct.cand, ct.ncand,
	    &q)) == GCK_OK)
		r = gck_nccl_resume(ctx, q, GCK_NCCL_RESUME_MS);
	if (r == GCK_OK) {
		*np = ct.ncp;
		/* Nothing is parked any more. */
		for (i = 0; i < ct.ncp; i++)
			if (ct.cp[i].custom)
				break;
		if (i < ct.ncp)
			gck_rmtree(park);
	}
out:
	gck_nccl_free(q);
	free(todo);
	free(host);
	cuda_tree_close(&ct);
	return r;
}
