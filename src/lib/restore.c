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

#include "private.h"

static int	pids_free(struct gck_ctx *, const struct gck_manifest *, int,
		    int);
static int	source_here(const struct gck_manifest *);
static void	reap_image_pids(const pid_t *, size_t, int);
static void	kill_leftovers(const pid_t *, size_t, pid_t);
static int	gpu_preflight(struct gck_ctx *, const struct gck_manifest *,
		    const char *, struct gck_cuda **, struct gck_cproc **,
		    size_t *);

/*
 * Waits up to ms for the image's processes, killed, to be gone: criu
 * leaves the ones it restored, or was restoring, to us (a subreaper for
 * the while), and we reap them, so that none lingers as a zombie.
 */
static void
reap_image_pids(const pid_t *pids, size_t n, int ms)
{
	size_t	i, left;
	int	waited;

	for (waited = 0; waited <= ms; waited += 10) {
		for (i = left = 0; i < n; i++) {
			while (waitpid(pids[i], NULL, WNOHANG | __WALL) > 0)
				;
			if (gck_pid_state(pids[i]) != 0)
				left++;
		}
		if (left == 0)
			return;
		gck_msleep(10);
	}
}

/*
 * Kills what a criu that failed, or was killed, left behind: the
 * image's processes that are ours (we are their subreaper while criu
 * runs) or children of one of them, whose PIDs were free when criu
 * started; and any other child of ours but the guard (a process criu
 * was making), with what it had made in turn, which comes to us as
 * its parent dies.
 */
static void
kill_leftovers(const pid_t *pids, size_t n, pid_t guard)
{
	struct dirent	*de;
	DIR		*d;
	pid_t		 ppid, p;
	size_t		 i, j;
	int		 ours, round, found;

	for (i = 0; i < n; i++) {
		if ((ppid = gck_pid_ppid(pids[i])) <= 0)
			continue;
		ours = ppid == getpid();
		for (j = 0; j < n && !ours; j++)
			ours = ppid == pids[j];
		if (ours) {
			kill(pids[i], SIGKILL);
			kill(pids[i], SIGCONT);
		}
	}
	for (round = 0; round < 100; round++) {
		if ((d = opendir("/proc")) == NULL)
			return;
		found = 0;
		while ((de = readdir(d)) != NULL) {
			if (!isdigit((unsigned char)de->d_name[0]))
				continue;
			p = (pid_t)atoi(de->d_name);
			if (p == guard || gck_pid_ppid(p) != getpid())
				continue;
			if (waitpid(p, NULL, WNOHANG | __WALL) == p)
				continue;
			kill(p, SIGKILL);
			kill(p, SIGCONT);
			found = 1;
		}
		closedir(d);
		if (!found)
			return;
		gck_msleep(10);
	}
}

/*
 * Checks, before anything is touched, that this host can take the
 * image's GPU state: a driver new enough, and for each of the image's
 * GPUs one of the same chip with room enough, as mapped.  Returns with
 * the processes to restore and the GPU pairs each needs.
 */
static int
gpu_preflight(struct gck_ctx *ctx, const struct gck_manifest *m,
    const char *map, struct gck_cuda **cup, struct gck_cproc **cpp,
    size_t *np)
{
	const struct gck_mcuda	*mc = gck_manifest_cuda(m);
	struct gck_gpu		*host = NULL;
	struct gck_cproc	*cp = NULL;
	char			 msg[GCK_ERRMAX], ver[32];
	int			 dst[GCK_GPUS_MAX], remap = 0, r;
	size_t			 nhost = 0, i, g;

	*cup = NULL;
	*cpp = NULL;
	*np = 0;
	if (mc == NULL || mc->nprocs == 0) {
		if (map != NULL)
			return gck_set_error(ctx, GCK_EINVAL, "a GPU map was "
			    "given, but the image has no CUDA process");
		return GCK_OK;
	}
	if ((r = gck_cuda_open(ctx, cup)) != GCK_OK) {
		snprintf(msg, sizeof msg, "%s", ctx->msg);
		return gck_set_error(ctx, r, "cannot restore: the image's "
		    "process %d ('%s') uses CUDA, but %s", (int)mc->procs[0].pid,
		    mc->procs[0].comm, msg);
	}
	if ((r = gck_cuda_init(ctx, *cup)) != GCK_OK ||
	    (r = gck_cuda_devices(ctx, *cup, 1, &host, &nhost)) != GCK_OK)
		goto out;
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
	if ((cp = calloc(mc->nprocs, sizeof *cp)) == NULL) {
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < mc->nprocs; i++) {
		cp[i].pid = mc->procs[i].pid;
		snprintf(cp[i].comm, sizeof cp[i].comm, "%s",
		    mc->procs[i].comm);
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
		if ((st = gck_pid_state(gck_manifest_pid(m, i))) == 0 ||
		    st == 'Z')
			continue;
		/* The very process, in whatever state criu left it. */
		if (gck_manifest_start(m, i) != 0 &&
		    gck_pid_start(gck_manifest_pid(m, i)) ==
		    gck_manifest_start(m, i)) {
			busy = 1;
			continue;
		}
		if ((st != 'T' && st != 't') ||
		    gck_pid_comm(gck_manifest_pid(m, i), comm,
		    sizeof comm) == -1 ||
		    strcmp(comm, gck_manifest_comm(m, i)) != 0)
			return 0;
		busy = 1;
	}
	return busy;
}

/*
 * Checks that the image's PIDs are free on this host.  The source tree
 * that gpuckpt kills on this same host once the image is written is
 * waited for, up to ms: when source_here() found it (src), whatever
 * state its processes are in (stopped, or running for the moment criu
 * takes to leave them stopped); otherwise while they are exiting
 * (SIGKILL pending), zombies whose parent has yet to reap them, or
 * being reaped.  Any other process seen busy for BUSY_MS on end is in
 * use.
 */
#define BUSY_MS	100
static int
pids_free(struct gck_ctx *ctx, const struct gck_manifest *m, int ms, int src)
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
				return gck_set_error(ctx, GCK_EBUSY,
				    "pid %d is in use on this host (by '%s'); "
				    "the image's process '%s' needs it: stop "
				    "that process or restore on another host",
				    (int)pid, comm, gck_manifest_comm(m, i));
			}
			if (gck_check_interrupt(ctx) != GCK_OK)
				return GCK_EINTR;
			gck_msleep(20);
			waited += 20;
		}
	}
	return GCK_OK;
}

int
gck_restore(struct gck_ctx *ctx, const struct gck_restore_opts *o,
    pid_t *rootp)
{
	return gck_restore_ex(ctx, o, NULL, NULL, rootp);
}

int
gck_restore_ex(struct gck_ctx *ctx, const struct gck_restore_opts *o,
    gck_ready_fn ready, void *ready_arg, pid_t *rootp)
{
	const struct gck_manifest	*m;
	struct gck_reader		*rd = NULL;
	struct gck_serve		*srv = NULL;
	struct gck_cuda			*cu = NULL;
	struct gck_cproc		*cp = NULL;
	struct gck_guard		*guard = NULL;
	size_t				 ncp = 0;
	char				*work = NULL, imgdir[PATH_MAX];
	pid_t				*pids = NULL, root = -1;
	size_t				 n = 0, i;
	int				 r, restored = 0, waited, dfd = -1;
	int				 subreaper = 0, criu_ran = 0, src;
	char				 st;

	*rootp = -1;
	if ((r = gck_criu_can_restore(ctx, NULL)) != GCK_OK)
		goto out;
	/* The guard knows the work directory before it is there. */
	if ((r = gck_workdir_name(ctx, o->tmpdir, &work)) != GCK_OK ||
	    (r = gck_guard_start(ctx, 0, work, NULL, NULL, 0, &guard)) !=
	    GCK_OK)
		goto out;
	if ((r = gck_workdir_make(ctx, &work)) != GCK_OK)
		goto out;
	snprintf(imgdir, sizeof imgdir, "%s/img", work);
	if (mkdir(imgdir, 0700) == -1) {
		r = gck_set_syserr(ctx, errno, "cannot make '%s': %s", imgdir,
		    strerror(errno));
		goto out;
	}
	if ((r = gck_reader_new(ctx, o->infd, &rd)) != GCK_OK ||
	    (r = gck_reader_head(rd, &m)) != GCK_OK)
		goto out;
	if ((r = gpu_preflight(ctx, m, o->gpu_map, &cu, &cp, &ncp)) != GCK_OK)
		goto out;
	n = gck_manifest_nprocs(m);
	if ((pids = calloc(n, sizeof *pids)) == NULL) {
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < n; i++)
		pids[i] = gck_manifest_pid(m, i);
	src = source_here(m);
	if (src || !gck_manifest_has_file_list(m)) {
		/*
		 * The source is this host's own stopped tree, which goes
		 * only once its image is all written (or the image does not
		 * say which of its files are memory, to be fed to criu as
		 * they arrive): read it all first, into the work area, then
		 * restore from there.
		 */
		if (gck_manifest_has_file_list(m))
			gck_log(ctx, 1, "process tree %d is still on this "
			    "host, stopped: reading the whole image before "
			    "restoring it", (int)gck_manifest_root_pid(m));
		if ((dfd = open(imgdir, O_RDONLY | O_DIRECTORY |
		    O_CLOEXEC)) == -1) {
			r = gck_set_syserr(ctx, errno, "cannot open '%s': %s",
			    imgdir, strerror(errno));
			goto out;
		}
		if ((r = gck_reader_extract(rd, dfd)) != GCK_OK)
			goto out;
	}
	if ((r = pids_free(ctx, m, o->pid_wait_ms, src)) != GCK_OK)
		goto out;
	/*
	 * Otherwise CRIU restores as the image arrives, each part checked
	 * before it is handed over; the tree stays stopped until the
	 * trailer has proved the image whole.
	 */
	gck_log(ctx, 1, "reading image of process tree %d",
	    (int)gck_manifest_root_pid(m));
	if (dfd == -1 && ((r = gck_serve_open(ctx, imgdir, m, &srv)) !=
	    GCK_OK || (r = gck_serve_preload(srv, rd)) != GCK_OK))
		goto out;
	gck_log(ctx, 1, "restoring process tree %d",
	    (int)gck_manifest_root_pid(m));
	(void)prctl(PR_GET_CHILD_SUBREAPER, &subreaper);
	(void)prctl(PR_SET_CHILD_SUBREAPER, 1);
	criu_ran = 1;
	/*
	 * Should we die from now on, our guard waits for criu to be gone
	 * too, and kills what is left of the tree.
	 */
	gck_guard_tree(guard, gck_manifest_root_pid(m));
	r = gck_criu_restore(ctx, imgdir, gck_manifest_shell_job(m),
	    gck_manifest_criu_opts(m), srv, rd, gck_guard_fd(guard),
	    &restored);
	if (restored)
		root = gck_manifest_root_pid(m);
	if (r != GCK_OK)
		goto out;
	if (root != gck_manifest_root_pid(m)) {
		r = gck_set_error(ctx, GCK_ECRIU, "criu restored pid %d, "
		    "not %d", (int)root, (int)gck_manifest_root_pid(m));
		goto out;
	}
	/*
	 * The stop criu leaves the tasks in may land a moment later.  A
	 * zombie of the image is restored as one.
	 */
	for (i = 0; i < n; i++) {
		for (waited = 0; ; waited += 10) {
			st = gck_pid_state(pids[i]);
			if (gck_manifest_zombie(m, i) ? st == 'Z' :
			    st == 'T' || st == 't')
				break;
			if (st == 0 || st == 'Z' || waited >= 5000) {
				r = gck_set_error(ctx, GCK_ECRIU, "restored "
				    "process %d is %s", (int)pids[i], st == 0 ||
				    st == 'Z' ? "not there" : "not stopped");
				goto out;
			}
			gck_msleep(10);
		}
	}
	if ((r = gck_check_interrupt(ctx)) != GCK_OK ||
	    (ready != NULL && (r = ready(ctx, ready_arg, root)) != GCK_OK))
		goto out;
	/* The tree may run: should we die now, the guard lets it. */
	gck_guard_intent(guard, 'R');
	/*
	 * Every process is there: let the tree continue.  Its CUDA
	 * processes stay locked, their CUDA calls waiting, while their
	 * restore threads bring the device memory back; should that fail,
	 * the tree is killed.
	 */
	gck_pids_signal(pids, n, SIGCONT);
	if ((r = gck_cuda_step(ctx, cu, cp, ncp, GCK_CS_RESTORE, 0)) !=
	    GCK_OK || (r = gck_cuda_step(ctx, cu, cp, ncp, GCK_CS_UNLOCK, 0)) !=
	    GCK_OK)
		goto out;
	restored = 0;
	*rootp = root;
	r = GCK_OK;
out:
	if (restored) {
		char	msg[GCK_ERRMAX];
		int	oerrno = ctx->oerrno;

		gck_pids_signal(pids, n, SIGKILL);
		gck_pids_signal(pids, n, SIGCONT);
		gck_pids_wait_dead(pids, n, 5000);
		snprintf(msg, sizeof msg, "%s", ctx->msg);
		gck_set_error(ctx, r, "%s; the restored process tree %d was "
		    "killed", msg, (int)gck_manifest_root_pid(m));
		ctx->oerrno = oerrno;
	}
	if (criu_ran && r != GCK_OK) {
		if (!restored)
			kill_leftovers(pids, n, gck_guard_pid(guard));
		reap_image_pids(pids, n, 5000);
	}
	if (criu_ran)
		(void)prctl(PR_SET_CHILD_SUBREAPER, subreaper);
	if (dfd != -1)
		close(dfd);
	gck_serve_free(srv);
	gck_reader_free(rd);
	gck_cuda_close(cu);
	free(cp);
	gck_rmtree(work);
	gck_guard_free(guard);
	free(work);
	free(pids);
	return r;
}
