/*
 * request.c: a snapshot of a series asked for now, by any process, of
 * the gpuckpt --series --every that writes it (gpuckpt --series DIR
 * --now, gpuckpt(1)).
 *
 * The asker makes a file of its own in the series' directory,
 * .now.PID.N, empty, and sends SIGUSR1 to the process that holds the
 * series' lock (its PID is in .lock), whose loop then takes a snapshot
 * at once.  Each snapshot, as it begins, takes the requests it finds
 * (gck_requests_take()): they were made before it began.  Once it is
 * listed, or has failed, it answers each in its file with one line,
 *	ok NAME
 *	failed WHY
 * (gck_requests_answer()), which the asker reads and then removes.  A
 * request made while a snapshot is under way is thus answered by the
 * next one, which the signal starts without waiting.
 */
#include "config.h"

#include <sys/file.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "private.h"
#include "core/util.h"
#include "ops/ops.h"

#define REQ_PREFIX	".now."
#define REQ_LOCK	".lock"
#define REQ_POLL_MS	100

static int	req_holder(struct gck_ctx *, const char *, long *);
static int	req_read(struct gck_ctx *, int, const char *, char **, int *);

/*
 * The process that holds the lock of the series in dir, into *pidp.
 * Returns GCK_OK, or GCK_ENOPROC when none does.
 */
static int
req_holder(struct gck_ctx *ctx, const char *dir, long *pidp)
{
	char	*path = NULL, buf[32];
	ssize_t	 n;
	int	 fd, r;

	if (asprintf(&path, "%s/%s", dir, REQ_LOCK) == -1)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		r = errno == ENOENT ? gck_set_error(ctx, GCK_ENOPROC,
		    "nothing writes the series in '%s': it has no lock "
		    "file", dir) : gck_set_syserr(ctx, errno,
		    "cannot open '%s': %s", path, strerror(errno));
		free(path);
		return r;
	}
	if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
		close(fd);
		free(path);
		return gck_set_error(ctx, GCK_ENOPROC, "nothing writes the "
		    "series in '%s': no gpuckpt --series holds its lock", dir);
	}
	n = pread(fd, buf, sizeof buf - 1, 0);
	close(fd);
	free(path);
	buf[n > 0 ? n : 0] = '\0';
	if ((*pidp = strtol(buf, NULL, 10)) <= 0)
		return gck_set_error(ctx, GCK_ENOPROC, "the lock of the series "
		    "in '%s' names no process", dir);
	return GCK_OK;
}

/*
 * The answer in the request file fd, once it has a whole line: *donep 1
 * and, for "ok NAME", *namep; for "failed WHY", the error.  *donep 0
 * while there is none.  Returns GCK_OK or a code.
 */
static int
req_read(struct gck_ctx *ctx, int fd, const char *dir, char **namep,
    int *donep)
{
	char	buf[1024], *nl;
	ssize_t	n;

	*donep = 0;
	if ((n = pread(fd, buf, sizeof buf - 1, 0)) == -1)
		return gck_set_syserr(ctx, errno, "cannot read the request of "
		    "a snapshot of '%s': %s", dir, strerror(errno));
	buf[n] = '\0';
	if ((nl = strchr(buf, '\n')) == NULL)
		return GCK_OK;
	*nl = '\0';
	*donep = 1;
	if (strncmp(buf, "ok ", 3) == 0 && buf[3] != '\0' &&
	    strchr(buf + 3, '/') == NULL) {
		if ((*namep = strdup(buf + 3)) == NULL)
			return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		return GCK_OK;
	}
	if (strncmp(buf, "failed ", 7) == 0)
		return gck_set_error(ctx, GCK_EINVAL, "the snapshot of '%s' "
		    "taken for the request failed: %s", dir, buf + 7);
	return gck_set_error(ctx, GCK_EINVAL, "the request of a snapshot of "
	    "'%s' was answered with '%s'", dir, buf);
}

int
gck_series_request(struct gck_ctx *ctx, const char *dir,
    unsigned int timeout_s, char **namep)
{
	struct timespec	 t0, t;
	char		*path = NULL;
	long		 pid = 0;
	int		 fd = -1, done = 0, r;

	*namep = NULL;
	if ((r = req_holder(ctx, dir, &pid)) != GCK_OK)
		return r;
	if (asprintf(&path, "%s/%s%ld.%ld", dir, REQ_PREFIX, (long)getpid(),
	    (long)time(NULL)) == -1)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	if ((fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC,
	    0600)) == -1) {
		r = gck_set_syserr(ctx, errno, "cannot create '%s': %s", path,
		    strerror(errno));
		free(path);
		return r;
	}
	if (kill((pid_t)pid, SIGUSR1) == -1) {
		r = gck_set_syserr(ctx, errno, "cannot ask process %ld, which "
		    "writes the series in '%s', for a snapshot: %s", pid, dir,
		    strerror(errno));
		goto out;
	}
	gck_log(ctx, 1, "asked process %ld for a snapshot of '%s'", pid, dir);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if ((r = req_read(ctx, fd, dir, namep, &done)) != GCK_OK ||
		    done)
			break;
		if ((r = gck_check_interrupt(ctx)) != GCK_OK)
			break;
		if (kill((pid_t)pid, 0) == -1 && errno == ESRCH) {
			/* It may have answered as it ended. */
			if ((r = req_read(ctx, fd, dir, namep, &done)) !=
			    GCK_OK || done)
				break;
			r = gck_set_error(ctx, GCK_ENOPROC, "process %ld, "
			    "which wrote the series in '%s', ended before a "
			    "snapshot was taken for the request", pid, dir);
			break;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (timeout_s > 0 && t.tv_sec - t0.tv_sec >= (time_t)timeout_s) {
			r = gck_set_error(ctx, GCK_ETIMEDOUT, "no snapshot of "
			    "'%s' was taken for the request in %u seconds",
			    dir, timeout_s);
			break;
		}
		gck_msleep(REQ_POLL_MS);
	}
out:
	close(fd);
	unlink(path);
	free(path);
	if (r != GCK_OK) {
		free(*namep);
		*namep = NULL;
	}
	return r;
}

/*
 * The requests waiting in dir, the names of their files, into *reqp
 * (*np of them; free them with gck_requests_answer()).  What cannot be
 * read is no request.
 */
void
gck_requests_take(const char *dir, char ***reqp, size_t *np)
{
	DIR		*d;
	struct dirent	*de;
	char		**v;

	*reqp = NULL;
	*np = 0;
	if ((d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, REQ_PREFIX, strlen(REQ_PREFIX)) != 0)
			continue;
		if ((v = realloc(*reqp, (*np + 1) * sizeof *v)) == NULL)
			break;
		*reqp = v;
		if ((v[*np] = strdup(de->d_name)) == NULL)
			break;
		(*np)++;
	}
	closedir(d);
}

/*
 * Answers the requests req of dir: the snapshot name was listed (r
 * GCK_OK), or failed, why on ctx.  A request whose asker has gone, its
 * file with it, is passed over.  Frees req.
 */
void
gck_requests_answer(struct gck_ctx *ctx, const char *dir, char **req,
    size_t n, int r, const char *name)
{
	char	*path, *why, *p;
	size_t	 i;
	int	 fd;

	why = r == GCK_OK ? NULL : strdup(gck_error_string(ctx));
	for (p = why; p != NULL && *p != '\0'; p++)
		if (*p == '\n')
			*p = ' ';
	for (i = 0; i < n; i++) {
		if (asprintf(&path, "%s/%s", dir, req[i]) != -1) {
			fd = open(path, O_WRONLY | O_APPEND | O_NOFOLLOW |
			    O_CLOEXEC);
			if (fd != -1) {
				if (r == GCK_OK)
					dprintf(fd, "ok %s\n", name);
				else
					dprintf(fd, "failed %s\n", why != NULL ?
					    why : "out of memory");
				close(fd);
			}
			free(path);
		}
		free(req[i]);
	}
	free(req);
	free(why);
}
