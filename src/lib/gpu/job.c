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
#include "core/util.h"
#include "gpu/cuda.h"
#include "gpu/job.h"

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
