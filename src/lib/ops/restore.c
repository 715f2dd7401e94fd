/*
 * restore.c: gck_restore(), the safety protocol of gpurestore.
 *
 * CRIU restores the tree as the stream arrives, stopped, in a session of
 * its own; every part is checked before CRIU gets it.  Only when the
 * trailer has proved the stream whole, and every process is there, does
 * the tree continue.  On any failure what was restored is killed and the
 * work area removed.
 */
#include "config.h"

#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/types.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "private.h"
#include "core/guard.h"
#include "core/keeper.h"
#include "core/proc.h"
#include "core/util.h"
#include "criu/criu.h"
#include "criu/mntns.h"
#include "criu/fill.h"
#include "criu/streamer.h"
#include "gpu/cuda.h"
#include "gpu/job.h"
#include "gpu/nccl.h"
#include "gpu/gpumap.h"
#include "image/devfill.h"
#include "image/image.h"
#include "image/manifest.h"
#include "image/names.h"
#include "image/parent.h"
#include "image/sign.h"
#include "ops/needs.h"
#include "ops/ops.h"

/* A restored tree that gpurestore --wait stays with. */
struct gck_waiter {
	pid_t			 root;		/* as we see it */
	struct gck_keeper	*init;		/* its namespace's, or NULL */
};

/* A restore, phase by phase. */
struct rst {
	struct gck_ctx			*ctx;
	const struct gck_restore_opts	*o;
	gck_ready_fn			 ready;
	void				*ready_arg;
	const struct gck_manifest	*m;
	struct gck_reader		*rd;
	struct gck_parents		*parents;	/* or NULL */
	struct gck_parents		*refs;	/* the reader's: these or a pool */
	struct gck_serve		*srv;
	struct gck_fill			*fill;	/* memory written in place */
	int				 indexed;	/* an image file's own
							   trailer was read */
	struct gck_devfill		*devfill;	/* device memory given
						   to all GPUs at once */
	int				 infd;	/* the stream, or its copy */
	int				 tmpfd;	/* the copy, or -1 */
	off_t				 inoff;	/* where the stream began */
	struct gck_guard		*guard;
	struct gck_keeper		*keeper;	/* criu's, and the tree's */
	struct gck_cuda			*cu;
	struct gck_cproc		*cp;
	size_t				 ncp;
	char				 at[GCK_NAME_MAX + 1];	/* the file
						   the image is at after
						   criu: device memory */
	int				 devs[GCK_GPUS_MAX][2];	/* each GPU's
					   device node minor, there and here */
	size_t				 ndevs;
	char				*work;
	char				 imgdir[PATH_MAX];
	int				 dfd;	/* the image is in imgdir */
	char				*spool;	/* a copy of the stream */
	int				 spoolfd;
	pid_t				*pids;	/* the image's processes */
	struct gck_pst			*src;	/* its source, as it was */
	size_t				 n;
	int				 subreaper, criu_ran, restored;
	int				 ns;	/* in a PID namespace */
	struct gck_keeper_ns		 nsinfo;
	struct gck_mntns		*mnt;	/* its mount namespace's */
	int				 trusted;	/* signed, allowed */
	int				 handover;	/* the source is ours */
	int				 source_ended;
	int				 source_resumed;	/* by another */
	struct gck_stats		 st;	/* for o->stats, once done */
	int64_t				 t0, mark, trestore;
};

static int	pids_free(struct gck_ctx *, const struct gck_manifest *, int,
		    int, pid_t *);
static int	pids_place(struct rst *, int, int);
static pid_t	image_max_tid(const struct rst *);
static int	ns_pids(struct rst *);
static int	rst_waiter(struct rst *, struct gck_waiter **);
static int	wait_root(struct gck_waiter *, int *);
static int	source_here(const struct gck_manifest *);
static int	source_busy(struct gck_ctx *, const struct gck_manifest *,
		    pid_t, char);
static int	gpu_preflight(struct gck_ctx *, const struct gck_manifest *,
		    const char *, struct gck_cuda **, struct gck_cproc **,
		    size_t *, int (*)[2], size_t *);
static void	tree_kill(struct rst *);
static int	rst_plan(struct rst *);
static int	rst_mounts(struct rst *);
static int	whole(const struct rst *);
static int	rst_fill(struct rst *);
static int	rst_devfill(struct rst *);
static int	rst_nccl(struct rst *);
static int	source_stopped(const struct rst *);
static int	end_source(struct rst *);
static uint64_t	in_size(int, off_t);
static void	rst_stats(struct rst *);
static int	rst_steps(struct rst *);

/*
 * Checks, before anything is touched, that this host can take the
 * image's GPU state: a driver new enough, and for each of the image's
 * GPUs one of the same chip with room enough, as mapped.  Returns with
 * the processes to restore and the GPU pairs each needs.
 */
static int
gpu_preflight(struct gck_ctx *ctx, const struct gck_manifest *m,
    const char *map, struct gck_cuda **cup, struct gck_cproc **cpp,
    size_t *np, int (*devs)[2], size_t *ndevsp)
{
	const struct gck_mcuda	*mc = gck_manifest_cuda(m);
	struct gck_gpu		*host = NULL;
	struct gck_cproc	*cp = NULL;
	char			 ver[32];
	int			 dst[GCK_GPUS_MAX], remap = 0, r;
	size_t			 nhost = 0, i, g;

	*cup = NULL;
	*cpp = NULL;
	*np = 0;
	*ndevsp = 0;
	if (mc == NULL || mc->nprocs == 0) {
		if (map != NULL)
			return gck_set_error(ctx, GCK_EINVAL, "a GPU map was "
			    "given, but the image has no CUDA process");
		return GCK_OK;
	}
	if (gck_cuda_open(ctx, cup) != GCK_OK)
		return gck_error_prefix(ctx, "cannot restore: the image's "
		    "process %d ('%s') uses CUDA, but ", (int)mc->procs[0].pid,
		    mc->procs[0].comm);
	if ((r = gck_cuda_init(ctx, *cup)) != GCK_OK ||
	    (r = gck_cuda_devices(ctx, *cup, 1, &host, &nhost)) != GCK_OK)
		goto out;
	/*
	 * Device memory that went through custom storage is not in the
	 * process's host memory, where a driver without it would look.
	 */
	for (i = 0; i < mc->nprocs; i++)
		if (mc->procs[i].custom && !gck_cuda_storage(*cup)) {
			gck_cuda_version_string(gck_cuda_version(*cup), ver,
			    sizeof ver);
			r = gck_set_error(ctx, GCK_ECUDA, "cannot restore: "
			    "the device memory of process %d ('%s') went "
			    "through custom storage, which needs CUDA 13.4 "
			    "(driver API 13040) or newer; this driver is %s",
			    (int)mc->procs[i].pid, mc->procs[i].comm, ver);
			goto out;
		}
	/* A job's processes are of it to a driver that knows job files. */
	if (mc->job_holder > 0 &&
	    gck_cuda_version(*cup) < GCK_CUDA_JOB_VERSION) {
		gck_cuda_version_string(gck_cuda_version(*cup), ver,
		    sizeof ver);
		r = gck_set_error(ctx, GCK_ECUDA, "cannot restore: the image's "
		    "CUDA processes are one job (gpuckpt --launch), which needs "
		    "NVIDIA driver r590 (CUDA 13.1) or newer; this driver is "
		    "%s", ver);
		goto out;
	}
	if ((r = gck_gpumap_plan(ctx, mc, host, nhost, map, dst, &remap)) !=
	    GCK_OK)
		goto out;
	if (remap && gck_cuda_version(*cup) < GCK_CUDA_REMAP_VERSION) {
		gck_cuda_version_string(gck_cuda_version(*cup), ver,
		    sizeof ver);
		for (g = 0; g < mc->ngpus; g++)
			if (memcmp(mc->gpus[g].uuid, host[dst[g]].uuid, 16) !=
			    0)
				break;
		r = gck_set_error(ctx, GCK_ECUDA, "cannot restore: GPU %s "
		    "must be remapped (to %s), which needs NVIDIA driver r580 "
		    "(CUDA 13.0) or newer; this driver is %s",
		    mc->gpus[g].uuidstr, host[dst[g]].uuidstr, ver);
		goto out;
	}
	/*
	 * The device node of each GPU, /dev/nvidiaN, by its minor number
	 * (NVML's; else its ordinal), there and here: a container's bound
	 * nodes follow its GPUs.
	 */
	for (g = 0; g < mc->ngpus; g++) {
		devs[g][0] = mc->gpus[g].minor >= 0 ? mc->gpus[g].minor :
		    mc->gpus[g].index;
		devs[g][1] = host[dst[g]].minor >= 0 ? host[dst[g]].minor :
		    host[dst[g]].index;
	}
	*ndevsp = mc->ngpus;
	if ((cp = calloc(mc->nprocs, sizeof *cp)) == NULL) {
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < mc->nprocs; i++) {
		cp[i].pid = mc->procs[i].pid;
		snprintf(cp[i].comm, sizeof cp[i].comm, "%s",
		    mc->procs[i].comm);
		cp[i].custom = mc->procs[i].custom;
		cp[i].ndev = mc->procs[i].ndev;
		memcpy(cp[i].devsize, mc->procs[i].devsize,
		    sizeof cp[i].devsize);
		for (g = 0; remap && g < mc->ngpus; g++) {
			if (!(mc->procs[i].gpus & 1ULL << g))
				continue;
			memcpy(cp[i].pairs[cp[i].npairs][0], mc->gpus[g].uuid,
			    16);
			memcpy(cp[i].pairs[cp[i].npairs][1], host[dst[g]].uuid,
			    16);
			cp[i].npairs++;
			gck_log(ctx, 1, "process %d: GPU %s -> %s",
			    (int)cp[i].pid, mc->gpus[g].uuidstr,
			    host[dst[g]].uuidstr);
		}
	}
	*cpp = cp;
	*np = mc->nprocs;
	cp = NULL;
	r = GCK_OK;
out:
	free(cp);
	free(host);
	return r;
}

/*
 * Whether the image's tree is still here, stopped, as gpuckpt leaves it
 * while it writes the image: a checkpoint piped into a restore on the
 * same host.  Its PIDs are freed only once the whole image is written.
 * A process is known by its start time where the image has it (criu may
 * not have stopped it yet), otherwise by being stopped with its name.
 */
static int
source_here(const struct gck_manifest *m)
{
	char	comm[64], st;
	size_t	i;
	int	busy = 0;

	if (!gck_manifest_this_boot(m))
		return 0;
	for (i = 0; i < gck_manifest_nprocs(m); i++) {
		if ((st = gck_pid_state(gck_manifest_host_pid(m, i))) == 0 ||
		    st == 'Z')
			continue;
		/* The very process, in whatever state criu left it. */
		if (gck_manifest_proc_here(m, i)) {
			busy = 1;
			continue;
		}
		if ((st != 'T' && st != 't') ||
		    gck_pid_comm(gck_manifest_host_pid(m, i), comm,
		    sizeof comm) == -1 ||
		    strcmp(comm, gck_manifest_comm(m, i)) != 0)
			return 0;
		busy = 1;
	}
	return busy;
}

/*
 * Says that pid is taken by the image's own source, still on this host
 * (st: the state of the process holding it).  Returns GCK_EBUSY.
 */
static int
source_busy(struct gck_ctx *ctx, const struct gck_manifest *m, pid_t pid,
    char st)
{
	char	list[1024];
	size_t	i, off = 0;
	int	k;

	list[0] = '\0';
	for (i = 0; i < gck_manifest_nprocs(m) && off < sizeof list; i++) {
		k = snprintf(list + off, sizeof list - off, " %d",
		    (int)gck_manifest_host_pid(m, i));
		if (k < 0)
			break;
		off += (size_t)k;
	}
	if (st == 'T' || st == 't')
		return gck_set_error(ctx, GCK_EBUSY, "pid %d is in use on "
		    "this host by the image's source, process tree %d, left "
		    "stopped: end it (kill -KILL%s), restore on another "
		    "host, or restore a copy beside it with --pidns",
		    (int)pid, (int)gck_manifest_root_pid(m), list);
	return gck_set_error(ctx, GCK_EBUSY, "pid %d is in use on this host "
	    "by the image's source, process tree %d, still running: restore "
	    "on another host, once that tree has ended, or a copy beside it "
	    "with --pidns", (int)pid, (int)gck_manifest_root_pid(m));
}

/*
 * Checks that the image's PIDs are free on this host.  The source tree
 * that gpuckpt kills on this same host once the image is written is
 * waited for, up to ms: when source_here() found it (src), whatever
 * state its processes are in (stopped, or running for the moment criu
 * takes to leave them stopped); otherwise while they are exiting
 * (SIGKILL pending), zombies whose parent has yet to reap them, or
 * being reaped.  Any other process seen busy for BUSY_MS on end is in
 * use: with takenp, *takenp is then its PID, and no message is set.
 */
#define BUSY_MS	100
static int
pids_free(struct gck_ctx *ctx, const struct gck_manifest *m, int ms, int src,
    pid_t *takenp)
{
	char	comm[64], st;
	size_t	i;
	int	waited = 0, busy;
	pid_t	pid;

	for (i = 0; i < gck_manifest_nprocs(m); i++) {
		pid = gck_manifest_pid(m, i);
		busy = 0;
		while ((st = gck_pid_state(pid)) != 0) {
			busy = src || gck_pid_dying(pid) ? 0 : busy + 20;
			if (busy > BUSY_MS || waited >= ms) {
				if (gck_pid_comm(pid, comm, sizeof comm) == -1)
					snprintf(comm, sizeof comm, "?");
				if (src)
					return source_busy(ctx, m, pid, st);
				if (takenp != NULL) {
					*takenp = pid;
					return GCK_EBUSY;
				}
				return gck_set_error(ctx, GCK_EBUSY,
				    "pid %d is in use on this host (by '%s'%s); "
				    "the image's process '%s' needs it: end "
				    "that process or restore on another host",
				    (int)pid, comm, st == 'T' || st == 't' ?
				    ", stopped" : "", gck_manifest_comm(m, i));
			}
			if (gck_check_interrupt(ctx) != GCK_OK)
				return GCK_EINTR;
			gck_msleep(20);
			waited += 20;
		}
	}
	return GCK_OK;
}

/*
 * Whether the image is of a whole PID namespace (a container's), which
 * criu restores as a new one, its init under the keeper.
 */
static int
whole(const struct rst *st)
{
	return st->mnt != NULL && st->mnt->whole;
}

/*
 * Where the tree goes: here, its PIDs free (waited for up to ms, as
 * pids_free() says), or into a PID namespace of its own, when asked or
 * when a PID of the image is taken here by another process (said
 * aloud).  Returns GCK_OK or a code.
 */
static int
pids_place(struct rst *st, int src, int ms)
{
	char	comm[64];
	pid_t	taken = 0;
	int	r;

	/* A whole PID namespace is restored as one, by criu itself. */
	if (whole(st))
		return GCK_OK;
	if (st->o->pidns == GCK_PIDNS_ALWAYS)
		st->ns = 1;
	if (st->ns)
		return GCK_OK;
	r = pids_free(st->ctx, st->m, ms, src, &taken);
	if (r != GCK_EBUSY || taken <= 0)
		return r;
	if (gck_pid_comm(taken, comm, sizeof comm) == -1)
		snprintf(comm, sizeof comm, "?");
	gck_set_notice(st->ctx, "pid %d of the image is in use on this host (by "
	    "'%s'): restoring the tree in a PID namespace of its own, where "
	    "it keeps its PIDs (--pidns)", (int)taken, comm);
	st->ns = 1;
	return GCK_OK;
}

/*
 * The highest PID or thread ID of the image: what its manifest lists,
 * or, for an image without a list of its files (read whole into
 * imgdir), what the names of its core-TID.img files say.
 */
static pid_t
image_max_tid(const struct rst *st)
{
	struct dirent	*e;
	DIR		*d;
	pid_t		 max = gck_manifest_max_tid(st->m);
	int		 tid, end;

	if (gck_manifest_has_file_list(st->m) ||
	    (d = opendir(st->imgdir)) == NULL)
		return max;
	while ((e = readdir(d)) != NULL) {
		end = 0;
		if (sscanf(e->d_name, "core-%d.img%n", &tid, &end) == 1 &&
		    end > 0 && e->d_name[end] == '\0' && tid > max)
			max = tid;
	}
	closedir(d);
	return max;
}

/*
 * In a PID namespace: the restored processes as we see them, found
 * under the namespace's init by the PIDs they have in there, which
 * st->pids and the CUDA processes' st->cp hold until then.
 */
static int
ns_pids(struct rst *st)
{
	struct gck_ptree	*pt = NULL;
	pid_t			*host;
	size_t			 i, j;
	int			 r;

	if ((host = calloc(st->n, sizeof *host)) == NULL)
		return gck_set_error(st->ctx, GCK_ENOMEM, "out of memory");
	if ((r = gck_ptree_scan(st->ctx, gck_keeper_pid(st->keeper), &pt)) !=
	    GCK_OK)
		goto out;
	for (i = 0; i < st->n; i++) {
		for (j = 1; j < pt->n; j++)
			if (gck_pid_inner(pt->procs[j].pid) == st->pids[i])
				break;
		if (j == pt->n) {
			r = gck_set_error(st->ctx, GCK_ECRIU, "restored "
			    "process %d is not there", (int)st->pids[i]);
			goto out;
		}
		host[i] = pt->procs[j].pid;
		gck_log(st->ctx, 1, "process %d is %d here", (int)st->pids[i],
		    (int)host[i]);
	}
	for (j = 0; j < st->ncp; j++)
		for (i = 0; i < st->n; i++)
			if (st->cp[j].pid == st->pids[i]) {
				st->cp[j].pid = host[i];
				break;
			}
	memcpy(st->pids, host, st->n * sizeof *host);
	r = GCK_OK;
out:
	gck_ptree_free(pt);
	free(host);
	return r;
}

/* Whether a process of list is there still, a zombie or not. */
static int
psts_there(const struct gck_pst *list, size_t n)
{
	size_t	i;

	for (i = 0; i < n; i++)
		if (gck_pid_state(list[i].pid) != 0 && (list[i].start == 0 ||
		    gck_pid_start(list[i].pid) == list[i].start))
			return 1;
	return 0;
}

/*
 * Kills what there is of the restored tree, with its keeper, and reaps
 * what comes to us of it (as their parents die, we are their subreaper).
 */
static void
tree_kill(struct rst *st)
{
	struct gck_ctx		*tmp;
	struct gck_ptree	*pt = NULL;
	struct gck_pst		*all = NULL;
	pid_t			 k = gck_keeper_pid(st->keeper);
	size_t			 n = 0, i;
	int			 waited;

	if (st->keeper == NULL && !st->restored)
		return;
	/* What the scan says does not replace why the restore failed. */
	if (k > 0 && (tmp = gck_ctx_new()) != NULL) {
		if (gck_ptree_scan(tmp, k, &pt) != GCK_OK)
			pt = NULL;
		gck_ctx_free(tmp);
	}
	if ((all = calloc((pt != NULL ? pt->n : 0) + st->n + 1,
	    sizeof *all)) != NULL) {
		for (i = 0; pt != NULL && i < pt->n; i++) {
			all[n].pid = pt->procs[i].pid;
			all[n++].start = pt->procs[i].start;
		}
		/*
		 * In a namespace, all of it is under its init (the
		 * keeper, or the image's own, under the keeper): st->pids
		 * may still be the PIDs there.
		 */
		for (i = 0; st->restored && !st->ns && !whole(st) &&
		    i < st->n; i++) {
			all[n].pid = st->pids[i];
			all[n++].start = gck_pid_start(st->pids[i]);
		}
		gck_psts_signal(all, n, SIGKILL);
		gck_psts_signal(all, n, SIGCONT);
		/*
		 * Until each is reaped, not merely dead: a zombie that
		 * comes to us as its keeper dies would hold its PID for
		 * as long as we live (the next snapshot of a series, say).
		 */
		for (waited = 0; waited < 5000; waited += 10) {
			for (i = 0; i < n; i++)
				while (waitpid(all[i].pid, NULL,
				    WNOHANG | __WALL) > 0)
					;
			if (!psts_there(all, n))
				break;
			gck_msleep(10);
		}
	}
	free(all);
	gck_ptree_free(pt);
	gck_keeper_free(st->keeper);
	st->keeper = NULL;
	st->restored = 0;
}

/*
 * Has criu restore the image, every process left stopped (a zombie of
 * the image restored as one).  Returns GCK_OK or a code.
 */
static int
rst_restore(struct rst *st)
{
	struct gck_ctx		*ctx = st->ctx;
	struct gck_serve_job	 job;
	struct gck_criu_stream	 stream;
	struct gck_criu_extra	 x;
	size_t			 i;
	int			 r, waited;
	char			 c;

	gck_log(ctx, 1, "restoring process tree %d",
	    (int)gck_manifest_root_pid(st->m));
	(void)prctl(PR_GET_CHILD_SUBREAPER, &st->subreaper);
	(void)prctl(PR_SET_CHILD_SUBREAPER, 1);
	st->criu_ran = 1;
	job.s = st->srv;
	job.rd = st->rd;
	stream.during = gck_serve_during;
	stream.arg = &job;
	stream.hook = NULL;
	if (st->ns) {
		st->nsinfo.maxpid = image_max_tid(st);
		st->nsinfo.root = gck_manifest_root_pid(st->m);
		gck_log(ctx, 1, "in a PID namespace of its own, criu above "
		    "pid %d", (int)st->nsinfo.maxpid);
	}
	/* Its sockets' ports and addresses, now that a source here is gone. */
	if ((r = gck_needs_restore_check(ctx, st->dfd, st->srv, st->m,
	    st->o->tcp_close)) != GCK_OK)
		return r;
	if (st->mnt != NULL) {
		x.args = st->mnt->args;
		x.nargs = st->mnt->nargs;
		x.fds = st->mnt->fds;
		x.nfds = st->mnt->nfds;
	}
	if ((r = gck_criu_restore(ctx, st->imgdir,
	    gck_manifest_shell_job(st->m), gck_manifest_criu_opts(st->m),
	    st->o->tcp_close, st->mnt != NULL ? &x : NULL,
	    st->dfd == -1 ? &stream : NULL, st->ns ? &st->nsinfo : NULL,
	    st->guard, &st->keeper, &st->restored)) != GCK_OK)
		return r;
	if (st->srv != NULL && gck_serve_file(st->srv) != NULL)
		snprintf(st->at, sizeof st->at, "%s",
		    gck_serve_file(st->srv));
	if ((st->ns || whole(st)) && (r = ns_pids(st)) != GCK_OK)
		return r;
	/*
	 * The stop criu leaves the tasks in may land a moment later.  A
	 * zombie of the image is restored as one.
	 */
	for (i = 0; i < st->n; i++) {
		for (waited = 0; ; waited += 10) {
			c = gck_pid_state(st->pids[i]);
			if (gck_manifest_zombie(st->m, i) ? c == 'Z' :
			    c == 'T' || c == 't')
				break;
			if (c == 0 || c == 'Z' || waited >= 5000)
				return gck_set_error(ctx, GCK_ECRIU, "restored "
				    "process %d is %s", (int)st->pids[i],
				    c == 0 || c == 'Z' ? "not there" :
				    "not stopped");
			gck_msleep(10);
		}
	}
	return GCK_OK;
}

/*
 * Whether the image's source is on this host as gpuckpt left it for
 * its restore to end: every process of it still there, with its start
 * time, stopped.
 */
static int
source_stopped(const struct rst *st)
{
	size_t	i;
	char	c;

	for (i = 0; i < st->n; i++) {
		c = gck_pid_state(st->src[i].pid);
		if (gck_manifest_zombie(st->m, i))
			continue;
		if ((c != 'T' && c != 't') || st->src[i].start == 0 ||
		    gck_pid_start(st->src[i].pid) != st->src[i].start)
			return 0;
	}
	return 1;
}

/*
 * Ends the image's source tree, stopped on this host as gpuckpt left it
 * for its restore to end, once the whole image is here, checked and
 * kept: only if it is still the tree the image was made of, and still
 * stopped.  Returns GCK_OK, or a code (then it runs again, or was left
 * alone).
 */
static int
end_source(struct rst *st)
{
	struct gck_ctx	*ctx = st->ctx;

	if (!source_stopped(st)) {
		st->source_resumed = 1;
		return gck_set_error(ctx, GCK_EBUSY, "the image's source, "
		    "process tree %d, is no longer stopped on this host: "
		    "restoring it too would run it twice",
		    (int)gck_manifest_root_pid(st->m));
	}
	gck_log(ctx, 1, "ending the source, process tree %d",
	    (int)gck_manifest_root_pid(st->m));
	/* From now on the copy of the stream is the job: it stays. */
	gck_guard_intent(st->guard, 'E');
	st->source_ended = 1;
	gck_psts_signal(st->src, st->n, SIGKILL);
	if (gck_psts_wait_gone(st->src, st->n, 10000) == -1)
		return gck_set_syserr(ctx, ETIMEDOUT, "the image's source, "
		    "process tree %d, did not die after SIGKILL",
		    (int)gck_manifest_root_pid(st->m));
	return GCK_OK;
}

/*
 * Refuses to restore as a PID namespace's init (unshare --pid --fork
 * gpurecv): its end would be the end of every process restored in the
 * namespace, however well the restore went.  Returns GCK_OK or
 * GCK_EINVAL.
 */
int
gck_restore_not_init(struct gck_ctx *ctx)
{
	if (getpid() != 1)
		return GCK_OK;
	return gck_set_error(ctx, GCK_EINVAL, "refusing to restore as the "
	    "init of a PID namespace (pid 1): the restored tree would be "
	    "killed when this process exits");
}

/*
 * Copies the stream, all of it, into an unnamed file of the work
 * directory, which becomes the image read.  Returns GCK_OK or a code.
 */
static int
rst_copy(struct rst *st)
{
	struct gck_ctx	*ctx = st->ctx;
	char		*buf;
	ssize_t		 n;
	int		 r = GCK_OK;

	gck_log(ctx, 1, "reading the whole image before its signature is "
	    "checked");
	if ((st->tmpfd = open(st->work, O_TMPFILE | O_RDWR | O_CLOEXEC,
	    0600)) == -1)
		return gck_set_syserr(ctx, errno, "cannot make a file in '%s' "
		    "for the image: %s", st->work, strerror(errno));
	if ((buf = malloc(1u << 20)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	for (;;) {
		if ((r = gck_check_interrupt(ctx)) != GCK_OK)
			break;
		if ((n = read(st->o->infd, buf, 1u << 20)) == -1 &&
		    errno == EINTR)
			continue;
		if (n == -1) {
			r = gck_set_syserr(ctx, errno, "cannot read %s: %s",
			    st->o->inname != NULL ? st->o->inname : "the image",
			    strerror(errno));
			break;
		}
		if (n == 0)
			break;
		if ((r = gck_write_all(ctx, st->tmpfd, buf, (size_t)n,
		    "the copy of the image")) != GCK_OK)
			break;
	}
	free(buf);
	if (r == GCK_OK && lseek(st->tmpfd, 0, SEEK_SET) == -1)
		r = gck_set_syserr(ctx, errno, "cannot read the copy of the "
		    "image: %s", strerror(errno));
	st->infd = st->tmpfd;
	return r;
}

/*
 * Where an allowed_signers file applies (gck_sig_policy()): the image
 * must be signed by a key it allows, which is checked before anything
 * else is read of it, from its end; a stream is first copied to a file
 * for that.  Returns GCK_OK with the trailer signed in *tp (*tlenp
 * bytes, to be freed; NULL where no signature is needed), or a code.
 */
static int
rst_signed(struct rst *st, char **tp, size_t *tlenp)
{
	struct gck_ctx	*ctx = st->ctx;
	const char	*policy, *name;
	struct gck_sigkey k;
	struct stat	 sb;
	char		*sig = NULL, *who = NULL;
	size_t		 siglen;
	int		 r;

	*tp = NULL;
	st->infd = st->o->infd;
	if ((policy = gck_sig_policy(st->o->allowed_signers)) == NULL)
		return GCK_OK;
	name = st->o->inname != NULL ? st->o->inname : "the image";
	if ((fstat(st->infd, &sb) == -1 || !S_ISREG(sb.st_mode) ||
	    lseek(st->infd, 0, SEEK_CUR) != 0) && (r = rst_copy(st)) !=
	    GCK_OK)
		return r;
	if ((r = gck_image_tail(ctx, st->infd, name, tp, tlenp, &sig,
	    &siglen)) != GCK_OK && r != GCK_EFORMAT)
		return r;
	if (r == GCK_EFORMAT || sig == NULL) {
		r = gck_set_error(ctx, GCK_ESIGN, "the image is not signed, "
		    "and '%s' allows only signed images", policy);
		goto out;
	}
	if ((r = gck_sig_verify(ctx, policy, sig, siglen, *tp, *tlenp,
	    &who)) != GCK_OK || (r = gck_sig_key(ctx, sig, siglen, &k)) !=
	    GCK_OK)
		goto out;
	gck_log(ctx, 1, "image signed by %s (%s key %s), as '%s' allows",
	    who, k.type, k.fp, policy);
	st->trusted = 1;
out:
	if (r != GCK_OK) {
		free(*tp);
		*tp = NULL;
	}
	free(who);
	free(sig);
	return r;
}

/*
 * A tree of a mount namespace of its own: where its root file system
 * and the mounts it had from its host come from here, checked, and its
 * files outside the namespace opened (mntns.c).  Returns GCK_OK or a
 * code, before anything runs.
 */
static int
rst_mounts(struct rst *st)
{
	struct gck_mntns_where	 w;
	int			 r;

	if ((r = gck_mntns_parse(st->ctx, json_object_get(
	    gck_manifest_json(st->m), "mounts"), &st->mnt)) != GCK_OK)
		return r;
	if (st->mnt == NULL) {
		if (st->o->root != NULL || st->o->nmount_map > 0)
			return gck_set_error(st->ctx, GCK_EINVAL, "%s: the "
			    "image's tree shared its host's mount namespace, "
			    "and has no mounts to map", st->o->root != NULL ?
			    "--root" : "--mount-map");
		return GCK_OK;
	}
	memset(&w, 0, sizeof w);
	w.root = st->o->root;
	w.map = st->o->mount_map;
	w.nmap = st->o->nmount_map;
	w.trusted = st->trusted;
	w.firstfd = GCK_CRIU_FIRSTFD;
	w.devs = (const int (*)[2])st->devs;
	w.ndevs = st->ndevs;
	if ((r = gck_mntns_plan(st->ctx, st->mnt, &w)) != GCK_OK)
		return r;
	gck_log(st->ctx, 1, "its mount namespace: root '%s', %zu mount%s "
	    "and %zu file%s from this host", st->mnt->args[1], st->mnt->nb,
	    st->mnt->nb == 1 ? "" : "s", st->mnt->nf,
	    st->mnt->nf == 1 ? "" : "s");
	return GCK_OK;
}

/* Opens the image, checks it can be restored here, notes its PIDs. */
static int
rst_prepare(struct rst *st)
{
	struct gck_ctx	*ctx = st->ctx;
	char		*trailer = NULL, criuver[64];
	size_t		 i, tlen = 0;
	int		 r;

	if ((r = gck_restore_not_init(ctx)) != GCK_OK ||
	    (r = gck_criu_can_restore(ctx, NULL)) != GCK_OK)
		return r;
	/*
	 * The guard knows the work directory, and where a copy of the
	 * stream would go, before they are there.
	 */
	if ((r = gck_workdir_name(ctx, st->o->tmpdir, &st->work)) != GCK_OK)
		return r;
	if (asprintf(&st->spool, "%s.gck", st->work) == -1) {
		st->spool = NULL;
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	}
	if ((r = gck_guard_start(ctx, NULL, st->work, st->spool, NULL, NULL, 0,
	    &st->guard)) != GCK_OK)
		return r;
	if ((r = gck_workdir_make(ctx, &st->work)) != GCK_OK)
		return r;
	snprintf(st->imgdir, sizeof st->imgdir, "%s/img", st->work);
	if (mkdir(st->imgdir, 0700) == -1)
		return gck_set_syserr(ctx, errno, "cannot make '%s': %s",
		    st->imgdir, strerror(errno));
	if ((r = rst_signed(st, &trailer, &tlen)) != GCK_OK)
		return r;
	st->inoff = lseek(st->infd, 0, SEEK_CUR);
	gck_meter_stage(ctx, "reading", in_size(st->infd, st->inoff));
	r = gck_reader_new(ctx, st->infd, &st->rd);
	if (r == GCK_OK && trailer != NULL)
		r = gck_reader_expect(st->rd, trailer, tlen);
	free(trailer);
	if (r != GCK_OK)
		return r;
	gck_reader_set_threads(st->rd, st->o->threads);
	gck_reader_keep_raw(st->rd);
	if ((r = gck_reader_head(st->rd, &st->m)) != GCK_OK ||
	    (r = gck_criu_can_read(ctx, gck_manifest_criu_version(st->m),
	    criuver, sizeof criuver)) != GCK_OK)
		return r;
	if (gck_manifest_chunks_only(st->m))
		return gck_set_error(ctx, GCK_EFORMAT, "the image holds only "
		    "chunks of memory sent ahead of a live migration "
		    "(gpusend --live): it has no processes to restore");
	/* An image sent to gpurecv may take chunks from its cache. */
	if (st->o->pool != NULL && gck_manifest_cached(st->m)) {
		if ((r = gck_parents_pool_check(st->o->pool, st->m)) != GCK_OK)
			return r;
		st->refs = st->o->pool;
	} else {
		if ((r = gck_parents_open(ctx, st->m, st->o->parents,
		    st->o->nparents, &st->parents)) != GCK_OK)
			return r;
		st->refs = st->parents;
	}
	gck_reader_set_parents(st->rd, st->refs);
	if ((r = gpu_preflight(ctx, st->m, st->o->gpu_map, &st->cu, &st->cp,
	    &st->ncp, st->devs, &st->ndevs)) != GCK_OK ||
	    (r = rst_mounts(st)) != GCK_OK)
		return r;
	st->n = gck_manifest_nprocs(st->m);
	if ((st->pids = calloc(st->n, sizeof *st->pids)) == NULL ||
	    (st->src = calloc(st->n, sizeof *st->src)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	for (i = 0; i < st->n; i++) {
		st->pids[i] = gck_manifest_pid(st->m, i);
		st->src[i].pid = gck_manifest_host_pid(st->m, i);
		st->src[i].start = gck_manifest_start(st->m, i);
	}
	return GCK_OK;
}

/*
 * A hand-over on one host: gpuckpt left the source stopped for us to
 * end.  The whole stream is copied to a file beside the work directory
 * as it is read into it and checked, to the trailer; only then is the
 * source ended and its PIDs taken for the restore.  Should the restore
 * fail from there on, the copy is kept, and said where: the job is in
 * it.
 */
static int
rst_handover(struct rst *st)
{
	struct gck_ctx	*ctx = st->ctx;
	int		 r;

	if ((st->spoolfd = open(st->spool, O_WRONLY | O_CREAT | O_EXCL |
	    O_CLOEXEC, 0600)) == -1)
		return gck_set_syserr(ctx, errno, "cannot create '%s': %s",
		    st->spool, strerror(errno));
	if ((r = gck_reader_spool(st->rd, st->spoolfd)) != GCK_OK ||
	    (r = gck_reader_extract(st->rd, st->dfd)) != GCK_OK)
		return r;
	if (fsync(st->spoolfd) == -1 || close(st->spoolfd) == -1) {
		st->spoolfd = -1;
		return gck_set_syserr(ctx, errno, "cannot write '%s': %s",
		    st->spool, strerror(errno));
	}
	st->spoolfd = -1;
	if ((r = gck_check_interrupt(ctx)) != GCK_OK ||
	    (r = end_source(st)) != GCK_OK ||
	    (r = pids_place(st, 0, 10000)) != GCK_OK)
		return r;
	return rst_restore(st);
}

/* The bytes of a regular file fd from off on, or 0. */
static uint64_t
in_size(int fd, off_t off)
{
	struct stat	sb;

	if (off < 0 || fstat(fd, &sb) == -1 || !S_ISREG(sb.st_mode) ||
	    sb.st_size < off)
		return 0;
	return (uint64_t)(sb.st_size - off);
}

/*
 * Where the image is read from: as it arrives, or, when its source is
 * still on this host (its PIDs taken until it goes), all of it first.
 * Returns GCK_OK or a code.
 */
static int
rst_stage(struct rst *st)
{
	struct gck_ctx	*ctx = st->ctx;
	int		 src, r;

	src = source_here(st->m);
	if (src || !gck_manifest_has_file_list(st->m)) {
		/*
		 * The source is this host's own stopped tree, which goes
		 * only once its image is all written (or the image does not
		 * say which of its files are memory, to be fed to criu as
		 * they arrive): read it all first, into the work area, then
		 * restore from there.
		 */
		if (gck_manifest_has_file_list(st->m))
			gck_log(ctx, 1, "process tree %d is still on this "
			    "host, stopped: reading the whole image before "
			    "restoring it", (int)gck_manifest_root_pid(st->m));
		if ((st->dfd = open(st->imgdir, O_RDONLY | O_DIRECTORY |
		    O_CLOEXEC)) == -1)
			return gck_set_syserr(ctx, errno, "cannot open '%s': "
			    "%s", st->imgdir, strerror(errno));
		/*
		 * A source left for us to end, and still there (criu may
		 * hold it yet: whether it is stopped is seen once the image
		 * is whole); but gpusend (ready) ends its source itself, on
		 * its word.
		 */
		if (src && gck_manifest_after(st->m) == GCK_AFTER_HANDOVER) {
			if (st->ready == NULL) {
				st->handover = 1;
				return GCK_OK;
			}
			/*
			 * gpusend to this same host: its source holds the
			 * PIDs until the word that the copy runs (a whole
			 * namespace has new ones anyway).
			 */
			if (!whole(st)) {
				gck_set_notice(ctx, "the image's source, "
				    "process tree %d, is on this host until it "
				    "is handed over: restoring the tree in a "
				    "PID namespace of its own, where it keeps "
				    "its PIDs (--pidns)",
				    (int)gck_manifest_root_pid(st->m));
				st->ns = 1;
			}
			src = 0;
		}
		gck_reader_nospool(st->rd);
		if ((r = gck_reader_extract(st->rd, st->dfd)) != GCK_OK)
			return r;
	}
	gck_reader_nospool(st->rd);
	if ((r = pids_place(st, src, st->o->pid_wait_ms)) != GCK_OK)
		return r;
	/*
	 * Otherwise CRIU restores as the image arrives, each part checked
	 * before it is handed over; the tree stays stopped until the
	 * trailer has proved the image whole.
	 */
	gck_log(ctx, 1, "reading image of process tree %d",
	    (int)gck_manifest_root_pid(st->m));
	if (st->dfd == -1 && ((r = gck_serve_open(ctx, st->imgdir, st->m,
	    &st->srv)) != GCK_OK || (r = gck_serve_preload(st->srv, st->rd)) !=
	    GCK_OK || (r = rst_plan(st)) != GCK_OK))
		return r;
	return GCK_OK;
}

/*
 * From an image file (read from its start), the processes' private
 * memory is written in place by the workers that decompress it, once
 * criu has restored the tree without it (fill.c); criu is given the
 * rest, read ahead from where the image's trailer says.  Elsewhere, or
 * where that cannot be, criu restores all the memory from the stream.
 * Returns GCK_OK or a code.
 */
static int
rst_plan(struct rst *st)
{
	struct gck_parents	*self = NULL;
	struct stat		 sb;
	int			 r;

	if (st->inoff != 0 || fstat(st->infd, &sb) == -1 ||
	    !S_ISREG(sb.st_mode) || gck_manifest_format(st->m) < 2)
		return GCK_OK;
	if (gck_parents_self(st->ctx, st->infd, st->o->inname != NULL ?
	    st->o->inname : "the image", &self) != GCK_OK) {
		gck_log(st->ctx, 1, "restoring all memory through criu: %s",
		    gck_error_string(st->ctx));
		return GCK_OK;
	}
	if (gck_manifest_id(st->m) == NULL || strcmp(gck_parents_id(self, 0),
	    gck_manifest_id(st->m)) != 0)
		r = gck_set_error(st->ctx, GCK_ECORRUPT, "corrupt image: its "
		    "footer names the trailer of another image");
	else if ((r = gck_serve_fill(st->srv, self, st->refs,
	    &st->fill)) == GCK_OK && st->fill != NULL)
		gck_reader_set_taker(st->rd, gck_fill_taker(st->fill));
	/* (and its device memory, after: where each chunk is) */
	if (r == GCK_OK && (r = gck_devfill_index(st->ctx, st->m, self,
	    &st->devfill)) == GCK_OK)
		st->indexed = 1;
	gck_parents_free(self);
	return r;
}

/*
 * criu has restored the tree, stopped, without the memory to be written
 * in place: reads the rest of the image, every entry checked, as the
 * workers write that memory into the processes; then checks that each
 * chunk was written once, with what was checked.  Returns GCK_OK or a
 * code.
 */
static int
rst_fill(struct rst *st)
{
	const uint64_t	*at, *zsize;
	const void	*p;
	char		 name[GCK_NAME_MAX + 1];
	uint64_t	 size;
	size_t		 nf;
	ssize_t		 n;
	int		 r, hole;

	if (st->fill == NULL)
		return GCK_OK;
	/* The workers read the chunks' frames themselves, too. */
	gck_fill_frames(st->fill, &at, &zsize, &nf);
	if ((r = gck_reader_set_frames(st->rd, at, zsize, nf)) != GCK_OK)
		return r;
	gck_fill_arm(st->fill, st->pids);
	/* The device memory after it waits for the GPUs' restore. */
	snprintf(name, sizeof name, "%s", st->at);
	while (!gck_manifest_file_cuda(st->m, name)) {
		while ((n = gck_reader_file_chunk(st->rd, &p, SIZE_MAX,
		    &hole)) > 0)
			;
		if (n < 0)
			return st->ctx->code;
		if ((r = gck_reader_file(st->rd, name, sizeof name, &size)) ==
		    1) {
			name[0] = '\0';
			break;
		}
		if (r != GCK_OK)
			return r;
	}
	snprintf(st->at, sizeof st->at, "%s", name);
	return gck_fill_finish(st->fill);
}

/*
 * Where the GPUs' restore takes device memory from (image_src()), for
 * an older image read as a stream.
 */
struct isrc {
	struct rst	*st;
	pid_t		 pid;		/* the process, as the image has it */
	char		 want[64];	/* the file being read */
	char		*buf;		/* an entry, checked */
	size_t		 len, off, cap;
	char		 msg[GCK_ERRMAX];	/* why it failed */
};

/*
 * The next piece of device memory of GPU k of process p, from the image
 * as it is read, an entry at a time, each checked before any of it is
 * given.
 */
static ssize_t
image_src(void *arg, struct gck_ctx *unused, const struct gck_cproc *p,
    unsigned int k, void *buf, size_t len)
{
	struct isrc	*is = arg;
	struct rst	*st = is->st;
	char		 want[64], name[GCK_NAME_MAX + 1];
	uint64_t	 size;
	ssize_t		 n;
	int		 r;

	(void)unused;
	(void)p;
	gck_cuda_dev_file(want, sizeof want, is->pid, k);
	if (strcmp(want, is->want) != 0) {
		/* The file of the next GPU. */
		is->len = is->off = 0;
		if (st->at[0] == '\0') {
			r = gck_reader_file(st->rd, name, sizeof name, &size);
			if (r == 1)
				snprintf(name, sizeof name, "its end");
			else if (r != GCK_OK)
				goto failed;
		} else
			snprintf(name, sizeof name, "%s", st->at);
		st->at[0] = '\0';
		if (strcmp(name, want) != 0) {
			gck_set_error(st->ctx, GCK_EFORMAT, "corrupt image: "
			    "'%s' where the device memory '%s' should be",
			    name, want);
			goto failed;
		}
		snprintf(is->want, sizeof is->want, "%s", want);
	}
	if (is->off == is->len) {
		is->off = 0;
		if ((n = gck_reader_file_entry(st->rd, is->buf, is->cap)) < 0)
			goto failed;
		is->len = (size_t)n;
		if (n == 0)
			return 0;
	}
	n = (ssize_t)(is->len - is->off < len ? is->len - is->off : len);
	memcpy(buf, is->buf + is->off, (size_t)n);
	is->off += (size_t)n;
	return n;
failed:
	snprintf(is->msg, sizeof is->msg, "%s", st->ctx->msg);
	return -1;
}

/*
 * The device memory that went through custom storage, each chunk to its
 * GPU by the worker that decompresses it, on every CPU (devfill.c), as
 * the reader reads on to the image's trailer: where the chunks are, an
 * image file's trailer says, else the manifest.  Returns 1 where that
 * cannot be (an older image's, from a stream; nothing read), else GCK_OK
 * or a code.
 */
static int
rst_devfill(struct rst *st)
{
	struct gck_ctx	*ctx = st->ctx;
	const uint64_t	*at, *zsize;
	const void	*p;
	char		 name[GCK_NAME_MAX + 1];
	uint64_t	 size;
	size_t		 nf, ngpu, nproc;
	ssize_t		 n;
	int		 r, hole;

	/* (an image file whose trailer does not serve: as it comes) */
	if (st->indexed && st->devfill == NULL)
		return 1;
	if ((r = gck_devfill_plan(ctx, st->m, st->cu, st->cp, st->ncp,
	    &st->devfill)) != GCK_OK)
		return r;
	if (st->devfill == NULL)
		return 1;
	gck_devfill_counts(st->devfill, &ngpu, &nproc);
	gck_log(ctx, 1, "device memory of %zu GPU%s of %zu process%s through "
	    "custom storage: each chunk to its GPU as it is decompressed",
	    ngpu, ngpu == 1 ? "" : "s", nproc, nproc == 1 ? "" : "es");
	if ((r = gck_cuda_map_in(ctx, st->cu, st->cp, st->ncp)) != GCK_OK)
		return r;
	gck_devfill_frames(st->devfill, &at, &zsize, &nf);
	if (nf > 0 &&
	    (r = gck_reader_set_frames(st->rd, at, zsize, nf)) != GCK_OK)
		return r;
	gck_reader_set_taker(st->rd, gck_devfill_taker(st->devfill));
	/* The files of device memory, each read to its end, then the trailer. */
	snprintf(name, sizeof name, "%s", st->at);
	st->at[0] = '\0';
	for (;;) {
		if (name[0] == '\0' && (r = gck_reader_file(st->rd, name,
		    sizeof name, &size)) != GCK_OK) {
			if (r != 1)
				return r;
			break;
		}
		if (!gck_manifest_file_cuda(st->m, name))
			return gck_set_error(ctx, GCK_EFORMAT, "corrupt image: "
			    "'%s' after the device memory", name);
		while ((n = gck_reader_file_chunk(st->rd, &p, SIZE_MAX,
		    &hole)) > 0)
			;
		if (n < 0)
			return ctx->code;
		name[0] = '\0';
	}
	if ((r = gck_devfill_finish(st->devfill)) != GCK_OK)
		return r;
	return gck_cuda_end_in(ctx, st->cu, st->cp, st->ncp, 1);
}

/*
 * The CUDA processes whose device memory went through custom storage,
 * onto their GPUs: from an image extracted first, a thread a GPU's file,
 * all at once (devfill.c); else as the rest of the image is read, up to
 * its trailer, by the workers, or, for an older stream, one process
 * after the other in the image's order.  Returns GCK_OK or a code.
 */
static int
rst_custom(struct rst *st)
{
	const struct gck_mcuda	*mc = gck_manifest_cuda(st->m);
	struct isrc		 is;
	char			 name[GCK_NAME_MAX + 1];
	uint64_t		 size;
	size_t			 i, n = 0;
	int			 r = GCK_OK;

	for (i = 0; i < st->ncp; i++)
		n += st->cp[i].custom;
	if (n == 0)
		return GCK_OK;
	if (st->dfd != -1)
		return gck_devfill_dir(st->ctx, st->m, st->cu, st->cp, st->ncp,
		    st->dfd, st->imgdir);
	if ((r = rst_devfill(st)) != 1)
		return r;
	r = GCK_OK;
	memset(&is, 0, sizeof is);
	is.st = st;
	/* (format 2 cuts device memory in chunks; 1, in parts) */
	is.cap = gck_manifest_format(st->m) > 1 ? GCK_CHUNK_SIZE :
	    GCK_PART_MAX;
	if ((is.buf = malloc(is.cap)) == NULL)
		return gck_set_error(st->ctx, GCK_ENOMEM, "out of memory");
	for (i = 0; i < st->ncp && r == GCK_OK; i++) {
		if (!st->cp[i].custom)
			continue;
		is.pid = mc->procs[i].pid;
		is.msg[0] = '\0';
		gck_log(st->ctx, 1, "process %d: device memory of %u GPU%s "
		    "through custom storage", (int)st->cp[i].pid,
		    st->cp[i].ndev, st->cp[i].ndev == 1 ? "" : "s");
		if ((r = gck_cuda_store_in(st->ctx, st->cu, &st->cp[i],
		    image_src, &is)) != GCK_OK && is.msg[0] != '\0')
			/* What the image said, rather than the GPU's step. */
			r = gck_set_error(st->ctx, r, "%s", is.msg);
	}
	free(is.buf);
	if (r != GCK_OK)
		return r;
	/* Nothing but the trailer may follow. */
	if ((r = gck_reader_file(st->rd, name, sizeof name, &size)) == 1)
		return GCK_OK;
	if (r == GCK_OK)
		r = gck_set_error(st->ctx, GCK_EFORMAT, "corrupt image: '%s' "
		    "after the device memory", name);
	return r;
}

/*
 * An image of a job (gpuckpt --launch): the driver is told of its file,
 * which criu gave back to the process that held it, and takes its
 * processes one at a time.  Returns GCK_OK or a code.
 */
static int
rst_job(struct rst *st)
{
	const struct gck_mcuda	*mc = gck_manifest_cuda(st->m);
	size_t			 i;

	if (mc == NULL || st->cu == NULL)
		return GCK_OK;
	if (mc->job_holder == 0) {
		(void)unsetenv(GCK_JOB_ENV);
		return GCK_OK;
	}
	for (i = 0; i < st->n; i++)
		if (gck_manifest_pid(st->m, i) == mc->job_holder)
			break;
	if (i == st->n)
		return gck_set_error(st->ctx, GCK_EFORMAT, "corrupt image: "
		    "the job's file is held by process %d, which is not in "
		    "the image", (int)mc->job_holder);
	gck_cuda_set_serial(st->cu, 1);
	return gck_job_name(st->ctx, st->pids[i], mc->job_fd);
}

/*
 * Every process is there: lets the tree continue.  Its CUDA processes
 * stay locked, their CUDA calls waiting, while their restore threads
 * bring the device memory back; should that fail, the tree is killed.
 */
static int
rst_run(struct rst *st)
{
	int	r;

	if ((r = gck_check_interrupt(st->ctx)) != GCK_OK ||
	    (r = rst_job(st)) != GCK_OK ||
	    (st->ready != NULL && (r = st->ready(st->ctx, st->ready_arg,
	    st->pids[0])) != GCK_OK))
		return r;
	/* The tree may run: should we die now, the guard lets it. */
	gck_guard_intent(st->guard, 'R');
	gck_pids_signal(st->pids, st->n, SIGCONT);
	/* Its process groups need a parent in their session no more. */
	gck_keeper_release(st->keeper);
	if ((r = rst_custom(st)) != GCK_OK ||
	    (r = gck_cuda_step(st->ctx, st->cu, st->cp, st->ncp,
	    GCK_CS_RESTORE, 0)) != GCK_OK ||
	    (r = gck_cuda_step(st->ctx, st->cu, st->cp, st->ncp,
	    GCK_CS_UNLOCK, 0)) != GCK_OK)
		return r;
	return rst_nccl(st);
}

/*
 * The ranks of an NCCL job were parked, their communicators torn down
 * (libgpuckpt-nccl.so): their GPUs back, they rebuild and run on.  One
 * that cannot fails the restore, as a GPU that does not come back.
 */
static int
rst_nccl(struct rst *st)
{
	struct gck_nccl	*q;
	int		 r;

	if ((r = gck_nccl_find(st->ctx, st->pids, st->n, &q)) != GCK_OK ||
	    gck_nccl_count(q) == 0) {
		gck_nccl_free(q);
		return r;
	}
	gck_log(st->ctx, 1, "%zu NCCL rank%s rebuilding", gck_nccl_count(q),
	    gck_nccl_count(q) == 1 ? "" : "s");
	r = gck_nccl_resume(st->ctx, q, GCK_NCCL_RESUME_MS);
	gck_nccl_free(q);
	return r;
}

/* Ends the message on ctx with what became of the job. */
static void
rst_failed(struct rst *st)
{
	struct gck_ctx	*ctx = st->ctx;

	if (st->source_ended)
		gck_error_fate(ctx, GCK_FATE_KEPT, "%sits source had been "
		    "ended: the image is kept in '%s' (restore it from there)",
		    st->restored ? "the restored process tree was killed, and "
		    : "", st->spool);
	else if (st->handover && !st->source_resumed)
		gck_error_fate(ctx, GCK_FATE_STOPPED, "nothing restored: its "
		    "source, process tree %d, is left stopped on this host",
		    (int)gck_manifest_root_pid(st->m));
	else if (st->restored)
		gck_error_fate(ctx, GCK_FATE_KILLED, "the restored process "
		    "tree %d was killed", (int)gck_manifest_root_pid(st->m));
}

/*
 * The tree runs: what gck_wait() needs to stay with it.  Its root comes
 * to us (our subreaper's flag stays up) when its keeper goes, or, in a
 * namespace, its init reports on it.
 */
static int
rst_waiter(struct rst *st, struct gck_waiter **wp)
{
	struct gck_waiter	*w;

	if ((w = calloc(1, sizeof *w)) == NULL) {
		*wp = NULL;
		return gck_set_error(st->ctx, GCK_ENOMEM, "out of memory");
	}
	w->root = st->pids[0];
	if (st->ns) {
		w->init = st->keeper;
		st->keeper = NULL;
	}
	*wp = w;
	return GCK_OK;
}

/* Whether the root has ended, with *statusp.  0: not yet; -1: error. */
static int
wait_root(struct gck_waiter *w, int *statusp)
{
	pid_t	pid;
	int	status, r;

	if (w->init != NULL) {
		if ((r = gck_keeper_root_status(w->init, 0, statusp)) != -1)
			return r;
		/* The init died, and the namespace with it. */
		while (waitpid(gck_keeper_pid(w->init), &status, __WALL) ==
		    -1 && errno == EINTR)
			;
		*statusp = status;
		return 1;
	}
	while ((pid = waitpid(-1, &status, WNOHANG | __WALL)) > 0)
		if (pid == w->root) {
			*statusp = status;
			return 1;
		}
	if (pid == -1 && errno != EINTR)
		return -1;
	return 0;
}

int
gck_wait(struct gck_ctx *ctx, struct gck_waiter *w, const sigset_t *fwd,
    int *statusp)
{
	const struct timespec	 tick = { 0, 50 * 1000 * 1000 };
	sigset_t		 old;
	int			 sig, r;

	sigprocmask(SIG_BLOCK, fwd, &old);
	/* What came while the tree was restored. */
	if ((sig = gck_interrupted(ctx)) != 0 && sigismember(fwd, sig))
		kill(w->root, sig);
	while ((r = wait_root(w, statusp)) == 0)
		if ((sig = sigtimedwait(fwd, NULL, &tick)) > 0) {
			gck_log(ctx, 1, "signal %d: sent to process %d", sig,
			    (int)w->root);
			kill(w->root, sig);
		}
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (r == -1)
		return gck_set_syserr(ctx, errno, "cannot wait for process %d: "
		    "%s", (int)w->root, strerror(errno));
	return GCK_OK;
}

void
gck_waiter_free(struct gck_waiter *w)
{
	if (w == NULL)
		return;
	gck_keeper_free(w->init);
	free(w);
}

int
gck_restore(struct gck_ctx *ctx, const struct gck_restore_opts *o,
    pid_t *rootp)
{
	return gck_restore_ex(ctx, o, NULL, NULL, rootp);
}

/*
 * The steps of a restore, each timed in st->st, up to the tree
 * running.  Returns GCK_OK or a code.
 */
static int
rst_steps(struct rst *st)
{
	int	r;

	st->t0 = st->mark = gck_clock_us();
	if ((r = rst_prepare(st)) != GCK_OK)
		return r;
	gck_stats_stage(&st->st, "check", &st->mark);
	if ((r = rst_stage(st)) != GCK_OK)
		return r;
	gck_stats_stage(&st->st, "read", &st->mark);
	st->trestore = st->mark;
	if ((r = st->handover ? rst_handover(st) : rst_restore(st)) != GCK_OK)
		return r;
	gck_stats_stage(&st->st, "restore", &st->mark);
	if ((r = rst_fill(st)) != GCK_OK)
		return r;
	if (st->fill != NULL)
		gck_stats_stage(&st->st, "fill", &st->mark);
	if ((r = rst_run(st)) != GCK_OK)
		return r;
	gck_stats_stage(&st->st, "run", &st->mark);
	rst_stats(st);
	return GCK_OK;
}

/*
 * The statistics of a restore done, into o->stats: the memory its
 * image holds, the bytes read of it and of its parents, and the time
 * from criu's start to the tree running.
 */
static void
rst_stats(struct rst *st)
{
	struct gck_image_stats	is;
	int64_t			now = gck_clock_us();

	if (st->o->stats == NULL)
		return;
	gck_reader_stats(st->rd, &is);
	st->st.memory_bytes = gck_manifest_memory_bytes(st->m);
	st->st.image_bytes = gck_reader_inbytes(st->rd);
	st->st.unchanged_bytes = is.ref_bytes;
	st->st.freeze_ms = gck_stats_ms(st->trestore, now);
	st->st.total_ms = gck_stats_ms(st->t0, now);
	*st->o->stats = st->st;
}

int
gck_restore_ex(struct gck_ctx *ctx, const struct gck_restore_opts *o,
    gck_ready_fn ready, void *ready_arg, pid_t *rootp)
{
	struct rst	st;
	int		r;

	*rootp = -1;
	if (o->waiter != NULL)
		*o->waiter = NULL;
	st = (struct rst){ .ctx = ctx, .o = o, .ready = ready,
	    .ready_arg = ready_arg, .dfd = -1, .spoolfd = -1, .infd = o->infd,
	    .tmpfd = -1 };
	if ((r = rst_steps(&st)) != GCK_OK)
		goto out;
	*rootp = st.pids[0];
	if (o->waiter != NULL && (r = rst_waiter(&st, o->waiter)) != GCK_OK)
		goto out;
	r = GCK_OK;
out:
	if (r != GCK_OK) {
		rst_failed(&st);
		tree_kill(&st);
		gck_mntns_unmake(st.mnt);
	}
	gck_keeper_free(st.keeper);
	/* A tree waited for comes to us when its keeper goes. */
	if (st.criu_ran && (r != GCK_OK || o->waiter == NULL))
		(void)prctl(PR_SET_CHILD_SUBREAPER, st.subreaper);
	if (st.dfd != -1)
		close(st.dfd);
	if (st.spoolfd != -1)
		close(st.spoolfd);
	/* The copy of the stream goes, unless the job is in it. */
	if (st.spool != NULL && (r == GCK_OK || !st.source_ended))
		unlink(st.spool);
	gck_serve_free(st.srv);
	/* (its workers write through st.fill until they stop) */
	gck_reader_free(st.rd);
	gck_fill_free(st.fill);
	gck_devfill_free(st.devfill);
	gck_cuda_end_in(ctx, st.cu, st.cp, st.ncp, 0);
	if (st.tmpfd != -1)
		close(st.tmpfd);
	gck_parents_free(st.parents);
	gck_mntns_free(st.mnt);
	gck_cuda_close(st.cu);
	free(st.cp);
	gck_rmtree(st.work);
	gck_guard_free(st.guard);
	free(st.work);
	free(st.spool);
	free(st.pids);
	free(st.src);
	return r;
}
