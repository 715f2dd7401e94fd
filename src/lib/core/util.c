/*
 * util.c: small helpers around system calls.
 */
#include "config.h"

#include <sys/random.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "private.h"
#include "core/util.h"

static void	rmtree_at(int, const char *, int);
static int	libexec_try(char *, size_t, const char *, const char *);

/*
 * Writes all of buf to fd.  A signal that interrupts the write and set
 * the interrupt flag ends it with GCK_EINTR.  Returns GCK_OK or a code.
 */
int
gck_write_all(struct gck_ctx *ctx, int fd, const void *buf, size_t len,
    const char *what)
{
	const char	*p = buf;
	ssize_t		 n;

	while (len > 0) {
		if (gck_check_interrupt(ctx) != GCK_OK)
			return GCK_EINTR;
		n = write(fd, p, len);
		if (n == -1) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return gck_set_syserr(ctx, errno, "cannot write %s: %s",
			    what, strerror(errno));
		}
		p += n;
		len -= (size_t)n;
	}
	return GCK_OK;
}

/*
 * Reads up to len bytes, stopping early only at end of file.  Returns the
 * count, or -1 with the error set.
 */
ssize_t
gck_read_full(struct gck_ctx *ctx, int fd, void *buf, size_t len,
    const char *what)
{
	char	*p = buf;
	size_t	 got = 0;
	ssize_t	 n;

	while (got < len) {
		if (gck_check_interrupt(ctx) != GCK_OK)
			return -1;
		n = read(fd, p + got, len - got);
		if (n == -1) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			gck_set_syserr(ctx, errno, "cannot read %s: %s", what,
			    strerror(errno));
			return -1;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/*
 * Chooses a name nobody uses yet: prefix and 12 random letters and
 * digits.  Nothing is made: mkdir() or O_EXCL then makes sure, once a
 * guard knows the name, so that no moment leaves the thing unknown to
 * it.  Returns GCK_OK with *pathp set (free it) or a code.
 */
int
gck_tempname(struct gck_ctx *ctx, const char *prefix, char **pathp)
{
	static const char	 abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
				     "abcdefghijklmnopqrstuvwxyz0123456789";
	unsigned char		 b[12];
	char			 suf[sizeof b + 1];
	size_t			 i;

	*pathp = NULL;
	if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b)
		return gck_set_syserr(ctx, errno, "getrandom: %s",
		    strerror(errno));
	for (i = 0; i < sizeof b; i++)
		suf[i] = abc[b[i] % (sizeof abc - 1)];
	suf[sizeof b] = '\0';
	if (asprintf(pathp, "%s%s", prefix, suf) == -1) {
		*pathp = NULL;
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	}
	return GCK_OK;
}

/*
 * The name of a private work directory under tmpdir ($TMPDIR, else
 * /var/tmp), not yet made: gck_workdir_make() makes it.  Returns GCK_OK
 * with *dirp set (free it) or a code.
 */
int
gck_workdir_name(struct gck_ctx *ctx, const char *tmpdir, char **dirp)
{
	char	*prefix;
	int	 r;

	*dirp = NULL;
	if (tmpdir == NULL || *tmpdir == '\0')
		tmpdir = getenv("TMPDIR");
	if (tmpdir == NULL || *tmpdir == '\0')
		tmpdir = "/var/tmp";
	if (asprintf(&prefix, "%s/gpuckpt.", tmpdir) == -1)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	r = gck_tempname(ctx, prefix, dirp);
	free(prefix);
	return r;
}

/*
 * Makes the work directory gck_workdir_name() named.  On failure, *dirp
 * is freed and NULL: what stands at that name is not ours to remove.
 */
int
gck_workdir_make(struct gck_ctx *ctx, char **dirp)
{
	char	*tmpdir;
	int	 oerrno, r;

	if (mkdir(*dirp, 0700) == 0)
		return GCK_OK;
	oerrno = errno;
	tmpdir = dirname(*dirp);
	r = gck_set_syserr(ctx, oerrno, "cannot make a work directory in "
	    "'%s': %s", tmpdir, strerror(oerrno));
	free(*dirp);
	*dirp = NULL;
	return r;
}

static void
rmtree_at(int dfd, const char *name, int depth)
{
	struct dirent	*de;
	DIR		*dir;
	int		 fd;

	if (depth > 8)
		return;
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC);
	if (fd == -1) {
		unlinkat(dfd, name, 0);
		return;
	}
	if ((dir = fdopendir(fd)) == NULL) {
		close(fd);
		return;
	}
	while ((de = readdir(dir)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (de->d_type == DT_DIR)
			rmtree_at(dirfd(dir), de->d_name, depth + 1);
		else
			unlinkat(dirfd(dir), de->d_name, 0);
	}
	closedir(dir);
	unlinkat(dfd, name, AT_REMOVEDIR);
}

/* Removes a work directory and everything in it.  NULL is fine. */
void
gck_rmtree(const char *path)
{
	if (path != NULL)
		rmtree_at(AT_FDCWD, path, 0);
}

/*
 * Reads a small file into buf, NUL-terminated.  Returns the length, or -1
 * with errno set.
 */
int
gck_read_small_file(const char *path, char *buf, size_t len)
{
	ssize_t	n;
	size_t	got = 0;
	int	fd, oerrno;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	while (got + 1 < len) {
		n = read(fd, buf + got, len - 1 - got);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == -1) {
				oerrno = errno;
				close(fd);
				errno = oerrno;
				return -1;
			}
			break;
		}
		got += (size_t)n;
	}
	close(fd);
	buf[got] = '\0';
	return (int)got;
}

void
gck_hex64(uint64_t v, char out[17])
{
	snprintf(out, 17, "%016llx", (unsigned long long)v);
}

/*
 * Makes room in the array at *arrayp, of *capp elements of size bytes,
 * for one more after n: doubles it when full.  Returns GCK_OK or
 * GCK_ENOMEM with the error set.
 */
int
gck_grow(struct gck_ctx *ctx, void *arrayp, size_t *capp, size_t n,
    size_t size)
{
	void	*na, **ap = arrayp;
	size_t	 nc;

	if (n < *capp)
		return GCK_OK;
	nc = *capp ? *capp * 2 : 64;
	if ((na = reallocarray(*ap, nc, size)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	*ap = na;
	*capp = nc;
	return GCK_OK;
}

/* Milliseconds on the monotonic clock. */
int64_t
gck_now_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Sleeps ms milliseconds; returns early on a signal. */
int
gck_msleep(int ms)
{
	struct timespec	ts;

	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (long)(ms % 1000) * 1000000L;
	return nanosleep(&ts, NULL);
}

/* Puts dir/name into buf; 0 when it is there to run, else -1 (errno). */
static int
libexec_try(char *buf, size_t len, const char *dir, const char *name)
{
	if ((size_t)snprintf(buf, len, "%s/%s", dir, name) >= len) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return access(buf, X_OK);
}

/*
 * Finds the program name of $(libexecdir)/gpuckpt (gpuckpt-hook,
 * gpuckpt-keeper), what saying what it is for, and puts its path into
 * buf.  GCK_LIBEXEC_DIR, when set, is the only place looked in.
 * Otherwise ../libexec/ beside this program's executable comes first,
 * where the build tree has them (src/ckpt/gpuckpt, src/libexec/): a
 * program that was built is run with the helpers built with it, not
 * with an older installation's; an installed program finds none there.
 * Then GCK_LIBEXECDIR, where `make install' puts them.  Returns GCK_OK,
 * or GCK_ESYS naming the path looked for.
 */
int
gck_libexec_path(struct gck_ctx *ctx, const char *name, const char *what,
    char *buf, size_t len)
{
	const char	*dir = getenv("GCK_LIBEXEC_DIR");
	char		 self[PATH_MAX], sdir[PATH_MAX + 16];
	ssize_t		 n;

	if (dir != NULL && *dir != '\0') {
		if (libexec_try(buf, len, dir, name) == 0)
			return GCK_OK;
		goto fail;
	}
	if ((n = readlink("/proc/self/exe", self, sizeof self - 1)) != -1) {
		self[n] = '\0';
		snprintf(sdir, sizeof sdir, "%s/libexec",
		    dirname(dirname(self)));
		if (libexec_try(buf, len, sdir, name) == 0)
			return GCK_OK;
	}
	if (libexec_try(buf, len, GCK_LIBEXECDIR, name) == 0)
		return GCK_OK;
fail:
	return gck_set_syserr(ctx, errno, "cannot find '%s', which %s: %s",
	    buf, what, strerror(errno));
}

/*
 * For a child about to run criu(8): its hardware breakpoints off, unless
 * whoever runs us says otherwise (CRIU_FAULT).  criu dump and restore
 * stop each task as it leaves criu's code injected in it, on a hardware
 * breakpoint where the kernel gives them; in some virtual machines
 * (Firecracker's, for one) the breakpoint is set but never fires, and
 * criu waits forever.  Without them, criu follows the task's system
 * calls to the same place instead (FI_NO_BREAKPOINTS, 130), as criu did
 * by default before 3.x for Xen guests: a little slower, the same
 * result.
 */
/*
 * Made before the fork, as the child of a process of several threads may
 * not allocate (another thread may hold the allocator's lock as it
 * forks): our environment, with CRIU_FAULT as above and, with hook,
 * GCK_CRIU_HOOK=hook, for execve(2).  Returns it (free it with
 * gck_criu_envp_free()), or NULL when out of memory.
 */
char **
gck_criu_envp(const char *hook)
{
	extern char	**environ;
	char		**e;
	size_t		  n = 0, i, k = 0;

	while (environ[n] != NULL)
		n++;
	if ((e = calloc(n + 3, sizeof *e)) == NULL)
		return NULL;
	for (i = 0; i < n; i++)
		if (hook == NULL || strncmp(environ[i], "GCK_CRIU_HOOK=", 14)
		    != 0)
			e[k++] = environ[i];
	if (getenv("CRIU_FAULT") == NULL)
		e[k++] = (char *)"CRIU_FAULT=130";
	if (hook != NULL && asprintf(&e[k], "GCK_CRIU_HOOK=%s", hook) == -1) {
		free(e);
		return NULL;
	}
	return e;
}

/* Frees what gck_criu_envp(hook) made. */
void
gck_criu_envp_free(char **e, const char *hook)
{
	size_t	n = 0;

	if (e == NULL)
		return;
	while (e[n] != NULL)
		n++;
	if (hook != NULL && n > 0)
		free(e[n - 1]);
	free(e);
}
