/*
 * job.c: the driver's job file, under which the processes of one job
 * are checkpointed together.
 *
 * From NVIDIA driver r590 (CUDA 13.1) a CUDA process whose environment
 * names a job file (CUDA_CHECKPOINT_JOB_FILE) belongs to that job: its
 * processes share what the driver keeps there, and a process that
 * shares device memory with another (CUDA IPC, r610) can be checkpointed
 * only as part of one.  The file is a memfd that the job's first
 * process holds, and that its children inherit, as cuda-checkpoint
 * --launch-job makes it; the variable names it through /proc, by the
 * PID of the process that made it, so that a child that closed its
 * descriptors still finds it while the job's root lives.  CRIU dumps and
 * restores the memfd, and its descriptor number, with the process; the
 * variable is in its memory.  Whoever calls the driver's checkpoint
 * functions on a process of the job names the same file in its own
 * environment, and takes the job's processes one at a time.
 */
#include "config.h"

#include <sys/types.h>
#include <sys/mman.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "private.h"
#include "core/proc.h"
#include "core/util.h"
#include "gpu/cuda.h"
#include "gpu/job.h"

/*
 * Whether path (/proc/PID/fd/N) is a job file: a memfd, as gck_job_new()
 * and cuda-checkpoint --launch-job make it, whatever its name.
 */
static int
job_file(const char *path)
{
	char	link[128];
	ssize_t	n;

	if ((n = readlink(path, link, sizeof link - 1)) <= 0)
		return 0;
	link[n] = '\0';
	return strncmp(link, "/memfd:", strlen("/memfd:")) == 0;
}

/*
 * Where the job file that val names is: *pidp, the process that holds
 * it as its processes see it (0: each process, its own descriptor, as
 * /proc/self/fd/N and /dev/fd/N say), and *fdp.  Returns 0, or -1 when
 * val names a file in no such way.
 */
static int
job_where(const char *val, pid_t *pidp, int *fdp)
{
	int	pid, fd, n = 0;

	*pidp = 0;
	if (sscanf(val, "/proc/%d/fd/%d%n", &pid, &fd, &n) == 2 &&
	    val[n] == '\0' && pid > 0 && fd >= 0) {
		*pidp = pid;
		*fdp = fd;
		return 0;
	}
	n = 0;
	if ((sscanf(val, "/proc/self/fd/%d%n", &fd, &n) == 1 ||
	    (n = 0, sscanf(val, "/dev/fd/%d%n", &fd, &n) == 1)) &&
	    val[n] == '\0' && fd >= 0) {
		*fdp = fd;
		return 0;
	}
	return -1;
}

/*
 * Makes a job file for a command about to be run by this process: a
 * memfd, left open across exec (*fdp), and into val (len bytes) the
 * value of GCK_JOB_ENV that names it.  Refuses, with nothing made, a
 * driver older than r590.  Returns GCK_OK or a code.
 */
int
gck_job_new(struct gck_ctx *ctx, int *fdp, char *val, size_t len)
{
	struct gck_cuda	*cu = NULL;
	char		 ver[32], why[GCK_ERRMAX];
	int		 fd, r;

	*fdp = -1;
	if ((r = gck_cuda_open(ctx, &cu)) != GCK_OK) {
		snprintf(why, sizeof why, "%s", gck_error_string(ctx));
		return gck_set_error(ctx, r, "a job file needs NVIDIA driver "
		    "r590 (CUDA 13.1) or newer: %s", why);
	}
	gck_cuda_version_string(gck_cuda_version(cu), ver, sizeof ver);
	r = gck_cuda_version(cu) < GCK_CUDA_JOB_VERSION;
	gck_cuda_close(cu);
	if (r)
		return gck_set_error(ctx, GCK_ECUDA, "a job file needs NVIDIA "
		    "driver r590 (CUDA 13.1) or newer; this driver is %s", ver);
	if ((fd = memfd_create(GCK_JOB_NAME, 0)) == -1)
		return gck_set_syserr(ctx, errno, "cannot make a job file: %s",
		    strerror(errno));
	if ((size_t)snprintf(val, len, "/proc/%d/fd/%d", (int)getpid(), fd) >=
	    len) {
		close(fd);
		return gck_set_error(ctx, GCK_EINVAL, "no room for the job "
		    "file's name");
	}
	*fdp = fd;
	return GCK_OK;
}

/*
 * The job file process pid's environment names (GCK_JOB_ENV), into val
 * (len bytes).  Returns 1, 0 when it names none, or -1 when the
 * environment cannot be read.
 */
int
gck_job_of(pid_t pid, char *val, size_t len)
{
	char	 path[64], *buf = NULL, *p, *end;
	size_t	 n = 0, cap = 0, klen = strlen(GCK_JOB_ENV);
	ssize_t	 got;
	int	 fd, found = 0;

	snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	for (;;) {
		if (n + 4096 + 1 > cap) {
			cap = cap == 0 ? 65536 : cap * 2;
			if (cap > (16u << 20) ||
			    (p = realloc(buf, cap)) == NULL) {
				free(buf);
				close(fd);
				return -1;
			}
			buf = p;
		}
		if ((got = read(fd, buf + n, cap - n - 1)) == -1) {
			if (errno == EINTR)
				continue;
			free(buf);
			close(fd);
			return -1;
		}
		if (got == 0)
			break;
		n += (size_t)got;
	}
	close(fd);
	if (buf == NULL)
		return 0;
	buf[n] = '\0';
	for (p = buf, end = buf + n; p < end; p += strlen(p) + 1)
		if (strncmp(p, GCK_JOB_ENV, klen) == 0 && p[klen] == '=') {
			found = snprintf(val, len, "%s", p + klen + 1) <
			    (int)len && p[klen + 1] != '\0';
			break;
		}
	free(buf);
	return found;
}

/*
 * Whether the CUDA processes among cand (ncand of them) of tree t, rooted
 * at root, are of a job: the file their environment names must be one a
 * process of the tree holds, a memfd (/proc/PID/fd/N, PID as the tree's
 * PID namespace ns sees it, NULL for ours; or /proc/self/fd/N or
 * /dev/fd/N, each process's own), the same for each of them.  The driver
 * is then told of it through this process's environment (GCK_JOB_ENV),
 * by the holder's PID here, and *holderp (the holder's PID in ns, the
 * image's) and *fdp say where the file is; without a job, the variable
 * goes and *holderp is 0.  what is the operation ("checkpoint").  The
 * environment is read whole here: the tree's scan keeps only its first
 * GCK_ENV_MAX bytes, and a variable set last may lie beyond.  Returns
 * GCK_OK or a code.
 */
int
gck_job_setup(struct gck_ctx *ctx, const char *what, pid_t root,
    const struct gck_ptree *t, const struct gck_proc *cand, size_t ncand,
    const struct gck_nsview *ns, pid_t *holderp, int *fdp)
{
	char	 val[256], first[256], path[64];
	pid_t	 holder = 0, who = 0, host = 0;
	size_t	 i;
	int	 fd = -1;

	*holderp = 0;
	*fdp = 0;
	for (i = 0; i < ncand; i++) {
		if (gck_job_of(cand[i].pid, val, sizeof val) != 1)
			continue;
		if (who == 0) {
			snprintf(first, sizeof first, "%s", val);
			who = cand[i].pid;
		} else if (strcmp(val, first) != 0)
			return gck_set_error(ctx, GCK_EINVAL, "cannot %s pid "
			    "%d: processes %d and %d are of two jobs ('%s' and "
			    "'%s'): take each job by itself", what, (int)root,
			    (int)who, (int)cand[i].pid, first, val);
	}
	if (who == 0) {
		(void)unsetenv(GCK_JOB_ENV);
		return GCK_OK;
	}
	/*
	 * The holder's PID as the job's processes see it (in their
	 * namespace); or each holds its own, and the first found stands
	 * for them all.
	 */
	if (job_where(first, &holder, &fd) == -1)
		holder = -1;
	else if (holder == 0) {
		host = who;
		holder = gck_nsview_local(ns, who);
	}
	for (i = 0; host == 0 && holder > 0 && i < t->n; i++)
		if (gck_nsview_local(ns, t->procs[i].pid) == holder)
			host = t->procs[i].pid;
	snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)host, fd);
	if (host <= 0 || !job_file(path))
		return gck_set_error(ctx, GCK_EINVAL, "cannot %s pid %d: "
		    "process %d is of a job whose file '%s' is not one that a "
		    "process of the tree holds (start the job with gpuckpt "
		    "--launch, and take the whole tree it starts)", what,
		    (int)root, (int)who, first);
	if (setenv(GCK_JOB_ENV, path, 1) == -1)
		return gck_set_syserr(ctx, errno, "cannot name the job file: "
		    "%s", strerror(errno));
	*holderp = holder;
	*fdp = fd;
	gck_log(ctx, 1, "a job: its file is descriptor %d of process %d; "
	    "its processes one at a time", fd, (int)holder);
	return GCK_OK;
}

/*
 * Names to the driver (GCK_JOB_ENV) the job file of a tree restored
 * here: descriptor fd of process holder, as this host sees it, which
 * criu gave back as the memfd it was.  Returns GCK_OK or a code.
 */
int
gck_job_name(struct gck_ctx *ctx, pid_t holder, int fd)
{
	char	path[64];

	snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)holder, fd);
	if (!job_file(path))
		return gck_set_error(ctx, GCK_EINVAL, "the job's file, "
		    "descriptor %d of restored process %d, is not there", fd,
		    (int)holder);
	if (setenv(GCK_JOB_ENV, path, 1) == -1)
		return gck_set_syserr(ctx, errno, "cannot name the job file: "
		    "%s", strerror(errno));
	return GCK_OK;
}
