/*
 * statefds -- file descriptor and memory mapping state that must come
 * back unchanged from a checkpoint and restore.
 *
 * usage: statefds CASE DIR
 *        statefds -l		(lists the cases)
 *
 * It sets up the state that CASE names (the table `cases' below lists
 * them), records its descriptor table (numbers, descriptor and status
 * flags, what each one is), writes its pid to DIR/ready, then sleeps
 * in 20 ms steps until DIR/go exists.  Then it checks that the state is
 * exactly what it set up, uses it once more (data written after the
 * restore must reach the other end, the file, the other process), and
 * writes "ok CASE" or "FAIL CASE: reason" to DIR/result.  It exits 0
 * if the checks passed, 1 if not, 2 on a usage or setup error.  Both
 * files are written under a temporary name and renamed into place.
 *
 * With PERTURB=1 in the environment it changes the state a little
 * right after writing DIR/ready: the checks must then fail, which the
 * tests use as a negative control.
 *
 * The children some cases fork wait for DIR/go as well, check what they
 * see and exit 0, or 1 with a reason on stderr; the parent reaps them
 * and takes their status into its result.
 */

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <sys/types.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAXFDS		64
#define GO_TIMEOUT_MS	120000
#define STEP_MS		20

struct fdsnap {
	int	fd;
	int	fdflags;	/* F_GETFD */
	int	flags;		/* F_GETFL */
	mode_t	type;		/* S_IFMT of fstat */
	char	link[256];	/* /proc/self/fd/N, pipe and socket inodes cut */
};

struct tcase {
	const char	*name;
	int		(*setup)(void);
	void		(*perturb)(void);
	int		(*check)(void);
};

static int	 check_fdtable(void);
static void	 die(const char *, ...)
		    __attribute__((__format__(__printf__, 1, 2)));
static int	 fail(const char *, ...)
		    __attribute__((__format__(__printf__, 1, 2)));
static int	 cmpstr(const void *, const void *);
static int	 fdinfo_lines(int, const char *, char *, size_t);
static int	 file_has(const char *, const char *, size_t, off_t);
static void	 fill(char *, size_t, int);
static int	 go_exists(void);
static void	 msleep(long);
static int	 pattern_ok(const char *, size_t, int, const char *);
static int	 reap(pid_t, const char *);
static int	 snap_fds(struct fdsnap *, int);
static void	 wait_go(void);
static int	 write_file(const char *, const char *);
static int	 xrecv(int, char *, size_t, const char *, const char *);

static const char	*dir;
static char		 why[1024];
static struct fdsnap	 fds_before[MAXFDS];
static int		 nfds_before;
static long		 pagesz;

/* ------------------------------------------------------------------ */
/* helpers */

static void
die(const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	fprintf(stderr, "statefds: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, ": %s\n", strerror(errno));
	va_end(ap);
	exit(2);
}

/* Records the first failure; returns -1. */
static int
fail(const char *fmt, ...)
{
	va_list	ap;

	if (why[0] == '\0') {
		va_start(ap, fmt);
		vsnprintf(why, sizeof why, fmt, ap);
		va_end(ap);
	}
	return -1;
}

static void
msleep(long ms)
{
	struct timespec	ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

static int
go_exists(void)
{
	char	path[PATH_MAX];

	snprintf(path, sizeof path, "%s/go", dir);
	return access(path, F_OK) == 0;
}

/* Sleeps in short steps until DIR/go exists. */
static void
wait_go(void)
{
	long	waited;

	for (waited = 0; !go_exists(); waited += STEP_MS) {
		if (waited > GO_TIMEOUT_MS) {
			errno = ETIMEDOUT;
			die("no %s/go", dir);
		}
		msleep(STEP_MS);
	}
}

/* Writes DIR/NAME atomically: a temporary file, then rename(2). */
static int
write_file(const char *name, const char *text)
{
	char	tmp[PATH_MAX], path[PATH_MAX];
	size_t	len = strlen(text);
	int	fd;

	snprintf(tmp, sizeof tmp, "%s/.%s.%d", dir, name, (int)getpid());
	snprintf(path, sizeof path, "%s/%s", dir, name);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	    0644)) == -1)
		return -1;
	if (write(fd, text, len) != (ssize_t)len || close(fd) == -1 ||
	    rename(tmp, path) == -1)
		return -1;
	return 0;
}

static void
fill(char *p, size_t n, int seed)
{
	size_t	i;

	for (i = 0; i < n; i++)
		p[i] = (char)(seed + i * 7 + (i >> 9));
}

/* The n bytes at p are fill()'s pattern for seed. */
static int
pattern_ok(const char *p, size_t n, int seed, const char *what)
{
	size_t	i;

	for (i = 0; i < n; i++)
		if (p[i] != (char)(seed + i * 7 + (i >> 9)))
			return fail("%s: byte %zu is 0x%02x, expected 0x%02x",
			    what, i, (unsigned char)p[i],
			    (unsigned char)(seed + i * 7 + (i >> 9)));
	return 0;
}

/* The file at path holds the n bytes at want from offset off on. */
static int
file_has(const char *path, const char *want, size_t n, off_t off)
{
	char	*buf;
	ssize_t	 got;
	int	 fd, r = 0;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return fail("cannot open '%s': %s", path, strerror(errno));
	if ((buf = malloc(n)) == NULL)
		die("malloc");
	got = pread(fd, buf, n, off);
	if (got != (ssize_t)n)
		r = fail("'%s': read %zd bytes at %jd, expected %zu", path,
		    got, (intmax_t)off, n);
	else if (memcmp(buf, want, n) != 0)
		r = fail("'%s': wrong contents at %jd", path, (intmax_t)off);
	free(buf);
	close(fd);
	return r;
}

static int
cmpstr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Copies into buf the lines of /proc/self/fdinfo/FD that start with
 * prefix, sorted (the kernel lists epoll targets and inotify watches in
 * an order of its own), with the fields of epoll targets that name
 * kernel objects (pos, ino, sdev) left out: a restore makes new ones.
 */
static int
fdinfo_lines(int fd, const char *prefix, char *buf, size_t len)
{
	char	 path[64], line[512], *lines[16], *p;
	FILE	*f;
	size_t	 used = 0;
	int	 n = 0, i;

	snprintf(path, sizeof path, "/proc/self/fdinfo/%d", fd);
	if ((f = fopen(path, "re")) == NULL)
		return -1;
	while (n < 16 && fgets(line, sizeof line, f) != NULL) {
		if (strncmp(line, prefix, strlen(prefix)) != 0)
			continue;
		if (strcmp(prefix, "tfd:") == 0 &&
		    (p = strstr(line, " pos:")) != NULL)
			strcpy(p, "\n");
		if ((lines[n++] = strdup(line)) == NULL)
			die("strdup");
	}
	fclose(f);
	qsort(lines, n, sizeof lines[0], cmpstr);
	buf[0] = '\0';
	for (i = 0; i < n; i++) {
		if (used + strlen(lines[i]) < len) {
			strcpy(buf + used, lines[i]);
			used += strlen(lines[i]);
		}
		free(lines[i]);
	}
	return 0;
}

/* Receives exactly the message want (its boundary too) on fd. */
static int
xrecv(int fd, char *buf, size_t len, const char *want, const char *what)
{
	ssize_t	n;

	n = recv(fd, buf, len, MSG_DONTWAIT);
	if (n == -1)
		return fail("%s: recv: %s (expected '%s')", what,
		    strerror(errno), want);
	if ((size_t)n != strlen(want) || memcmp(buf, want, n) != 0)
		return fail("%s: received '%.*s' (%zd bytes), expected '%s'",
		    what, (int)n, buf, n, want);
	return 0;
}

/* Waits up to 5 s for the child pid to exit 0. */
static int
reap(pid_t pid, const char *what)
{
	int	status, i;
	pid_t	r;

	for (i = 0; i < 250; i++) {
		if ((r = waitpid(pid, &status, WNOHANG)) == -1)
			return fail("%s: waitpid %d: %s", what, (int)pid,
			    strerror(errno));
		if (r == pid) {
			if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
				return 0;
			return fail("%s: child %d ended with status 0x%x", what,
			    (int)pid, status);
		}
		msleep(STEP_MS);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return fail("%s: child %d did not finish", what, (int)pid);
}

/* Records the descriptor table; returns the number of entries. */
static int
snap_fds(struct fdsnap *t, int max)
{
	struct dirent	*de;
	struct stat	 st;
	DIR		*d;
	char		 path[64], *p;
	ssize_t		 n;
	int		 count = 0, fd, i, j;

	if ((d = opendir("/proc/self/fd")) == NULL)
		die("opendir /proc/self/fd");
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		fd = atoi(de->d_name);
		if (fd == dirfd(d))
			continue;
		if (count == max) {
			errno = EMFILE;
			die("more than %d descriptors", max);
		}
		t[count].fd = fd;
		t[count].fdflags = fcntl(fd, F_GETFD);
		t[count].flags = fcntl(fd, F_GETFL);
		t[count].type = fstat(fd, &st) == 0 ? (st.st_mode & S_IFMT) : 0;
		snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
		n = readlink(path, t[count].link, sizeof t[count].link - 1);
		t[count].link[n < 0 ? 0 : n] = '\0';
		/* A new pipe or socket has a new inode number. */
		if ((strncmp(t[count].link, "pipe:[", 6) == 0 ||
		    strncmp(t[count].link, "socket:[", 8) == 0) &&
		    (p = strchr(t[count].link, '[')) != NULL)
			p[1] = '\0';
		count++;
	}
	closedir(d);
	for (i = 1; i < count; i++)	/* sort by number */
		for (j = i; j > 0 && t[j - 1].fd > t[j].fd; j--) {
			struct fdsnap	tmp = t[j];

			t[j] = t[j - 1];
			t[j - 1] = tmp;
		}
	return count;
}

/* The descriptor table is the one recorded before DIR/ready. */
static int
check_fdtable(void)
{
	struct fdsnap	now[MAXFDS];
	int		n, i;

	n = snap_fds(now, MAXFDS);
	for (i = 0; i < n && i < nfds_before; i++) {
		struct fdsnap	*a = &fds_before[i], *b = &now[i];

		if (a->fd != b->fd)
			return fail("descriptor %d %s", a->fd < b->fd ? a->fd :
			    b->fd, a->fd < b->fd ? "is gone" : "is new");
		if (a->fdflags != b->fdflags)
			return fail("fd %d: descriptor flags 0x%x, were 0x%x",
			    a->fd, b->fdflags, a->fdflags);
		if (a->flags != b->flags)
			return fail("fd %d: status flags 0%o, were 0%o",
			    a->fd, b->flags, a->flags);
		if (a->type != b->type)
			return fail("fd %d: file type 0%o, was 0%o", a->fd,
			    (unsigned)b->type, (unsigned)a->type);
		if (strcmp(a->link, b->link) != 0)
			return fail("fd %d: '%s', was '%s'", a->fd, b->link,
			    a->link);
	}
	if (n != nfds_before)
		return fail("%d descriptors, were %d", n, nfds_before);
	return 0;
}

/* ------------------------------------------------------------------ */
/* pipes and FIFOs */

#define PIPE_BYTES	3000
#define PIPE_SIZE	(256 * 1024)

static int	pp[2];		/* read end 40, write end 41 */
static char	pipe_data[PIPE_BYTES];

static void
put_at(int fd, int want)
{
	if (fd == want)
		return;
	if (dup2(fd, want) == -1)
		die("dup2 %d", want);
	close(fd);
}

static int
pipe_setup(void)
{
	if (pipe(pp) == -1)
		die("pipe");
	put_at(pp[0], 40);
	put_at(pp[1], 41);
	pp[0] = 40;
	pp[1] = 41;
	if (fcntl(pp[0], F_SETFL, O_NONBLOCK) == -1)
		die("O_NONBLOCK");
	if (fcntl(pp[1], F_SETPIPE_SZ, PIPE_SIZE) == -1)
		die("F_SETPIPE_SZ");
	fill(pipe_data, sizeof pipe_data, 1);
	if (write(pp[1], pipe_data, sizeof pipe_data) != sizeof pipe_data)
		die("write pipe");
	return 0;
}

static void
pipe_perturb(void)
{
	char	c;

	if (read(pp[0], &c, 1) != 1)
		die("read pipe");
}

static int
pipe_check(void)
{
	char	buf[PIPE_BYTES + 100];
	ssize_t	n;
	int	sz, queued;

	if ((sz = fcntl(pp[0], F_GETPIPE_SZ)) != PIPE_SIZE)
		return fail("pipe size %d, expected %d", sz, PIPE_SIZE);
	if (ioctl(pp[0], FIONREAD, &queued) == -1 || queued != PIPE_BYTES)
		return fail("%d bytes in the pipe, expected %d", queued,
		    PIPE_BYTES);
	if ((n = read(pp[0], buf, sizeof buf)) != PIPE_BYTES)
		return fail("read %zd bytes from the pipe, expected %d", n,
		    PIPE_BYTES);
	if (memcmp(buf, pipe_data, PIPE_BYTES) != 0)
		return fail("the pipe's data differ");
	/* Empty now, and still non-blocking. */
	if (read(pp[0], buf, 1) != -1 || errno != EAGAIN)
		return fail("reading the empty pipe did not fail with EAGAIN");
	if (write(pp[1], "after", 5) != 5 || read(pp[0], buf, 10) != 5 ||
	    memcmp(buf, "after", 5) != 0)
		return fail("the pipe does not carry data after the restore");
	return 0;
}

/*
 * One pipe, both ends open in the parent and in a child: the child's
 * "C1" and then the parent's "P1" are in it at the checkpoint; after it
 * the child writes "C2" and exits, and the parent reads "C1P1C2".
 */
static int
pipe_shared_child(void)
{
	if ((fcntl(pp[0], F_GETFL) & (O_ACCMODE | O_NONBLOCK)) != O_RDONLY ||
	    (fcntl(pp[1], F_GETFL) & (O_ACCMODE | O_NONBLOCK)) !=
	    (O_WRONLY | O_NONBLOCK))
		return fail("child: pipe flags 0%o 0%o",
		    fcntl(pp[0], F_GETFL), fcntl(pp[1], F_GETFL));
	if (write(pp[1], "C2", 2) != 2)
		return fail("child: write: %s", strerror(errno));
	return 0;
}

static pid_t	child;

static int
pipe_shared_setup(void)
{
	int	queued = 0, i;

	if (pipe(pp) == -1)
		die("pipe");
	if (fcntl(pp[1], F_SETFL, O_NONBLOCK) == -1)
		die("O_NONBLOCK");
	if ((child = fork()) == -1)
		die("fork");
	if (child == 0) {
		if (write(pp[1], "C1", 2) != 2)
			_exit(3);
		wait_go();
		if (pipe_shared_child() != 0) {
			fprintf(stderr, "statefds: %s\n", why);
			_exit(1);
		}
		_exit(0);
	}
	for (i = 0; queued < 2 && i < 2500; i++) {
		if (ioctl(pp[0], FIONREAD, &queued) == -1)
			die("FIONREAD");
		msleep(2);
	}
	if (queued != 2) {
		errno = ETIMEDOUT;
		die("the child did not write");
	}
	if (write(pp[1], "P1", 2) != 2)
		die("write pipe");
	return 0;
}

static void
pipe_shared_perturb(void)
{
	if (write(pp[1], "X", 1) != 1)
		die("write pipe");
}

static int
pipe_shared_check(void)
{
	char	buf[64];
	ssize_t	n;

	if (reap(child, "pipe child") != 0)
		return -1;
	if ((fcntl(pp[1], F_GETFL) & (O_ACCMODE | O_NONBLOCK)) !=
	    (O_WRONLY | O_NONBLOCK))
		return fail("write end flags 0%o", fcntl(pp[1], F_GETFL));
	n = read(pp[0], buf, sizeof buf);
	if (n != 6 || memcmp(buf, "C1P1C2", 6) != 0)
		return fail("read '%.*s' from the shared pipe, expected "
		    "'C1P1C2'", (int)(n < 0 ? 0 : n), buf);
	return 0;
}

/* A FIFO opened read-write at fd 42, and for reading at 43. */
static int	fifo_rw, fifo_ro;
static char	fifo_path[PATH_MAX];

static int
fifo_setup(void)
{
	snprintf(fifo_path, sizeof fifo_path, "%s/fifo", dir);
	if (mkfifo(fifo_path, 0600) == -1)
		die("mkfifo");
	if ((fifo_rw = open(fifo_path, O_RDWR)) == -1)
		die("open fifo");
	put_at(fifo_rw, 42);
	fifo_rw = 42;
	if ((fifo_ro = open(fifo_path, O_RDONLY | O_NONBLOCK)) == -1)
		die("open fifo");
	put_at(fifo_ro, 43);
	fifo_ro = 43;
	if (write(fifo_rw, "through the fifo", 16) != 16)
		die("write fifo");
	return 0;
}

static void
fifo_perturb(void)
{
	char	c;

	if (read(fifo_ro, &c, 1) != 1)
		die("read fifo");
}

static int
fifo_check(void)
{
	struct stat	st;
	char		buf[64];
	ssize_t		n;
	int		fd;

	if (fstat(fifo_rw, &st) == -1 || !S_ISFIFO(st.st_mode))
		return fail("fd %d is not a FIFO", fifo_rw);
	n = read(fifo_ro, buf, sizeof buf);
	if (n != 16 || memcmp(buf, "through the fifo", 16) != 0)
		return fail("read '%.*s' from the FIFO", (int)(n < 0 ? 0 : n),
		    buf);
	/* It is still the FIFO at its path: a new writer reaches it. */
	if ((fd = open(fifo_path, O_WRONLY | O_NONBLOCK)) == -1)
		return fail("cannot open the FIFO to write: %s",
		    strerror(errno));
	if (write(fd, "new", 3) != 3)
		return fail("write to the FIFO: %s", strerror(errno));
	close(fd);
	n = read(fifo_rw, buf, sizeof buf);
	if (n != 3 || memcmp(buf, "new", 3) != 0)
		return fail("the FIFO did not pass data written after the "
		    "restore");
	return 0;
}

/* ------------------------------------------------------------------ */
/* unix sockets */

static int	sk[2];
static int	sndbuf_before, rcvbuf_before;

static int
sockopt(int fd, int opt)
{
	socklen_t	len;
	int		v = -1;

	len = sizeof v;
	getsockopt(fd, SOL_SOCKET, opt, &v, &len);
	return v;
}

static int
pair_setup(int type)
{
	int	v;

	if (socketpair(AF_UNIX, type, 0, sk) == -1)
		die("socketpair");
	put_at(sk[0], 44);
	put_at(sk[1], 45);
	sk[0] = 44;
	sk[1] = 45;
	v = 65536;
	if (setsockopt(sk[0], SOL_SOCKET, SO_SNDBUF, &v, sizeof v) == -1)
		die("SO_SNDBUF");
	v = 98304;
	if (setsockopt(sk[1], SOL_SOCKET, SO_RCVBUF, &v, sizeof v) == -1)
		die("SO_RCVBUF");
	sndbuf_before = sockopt(sk[0], SO_SNDBUF);
	rcvbuf_before = sockopt(sk[1], SO_RCVBUF);
	if (send(sk[0], "one", 3, 0) != 3 ||
	    send(sk[0], "second message", 14, 0) != 14 ||
	    send(sk[0], "3", 1, 0) != 1 ||
	    send(sk[1], "the other way", 13, 0) != 13)
		die("send");
	return 0;
}

static int
pair_check(int type)
{
	socklen_t	len;
	char		buf[256];
	int		v;

	len = sizeof v;
	if (getsockopt(sk[0], SOL_SOCKET, SO_TYPE, &v, &len) == -1 ||
	    v != type)
		return fail("socket type %d, expected %d", v, type);
	if ((v = sockopt(sk[0], SO_SNDBUF)) != sndbuf_before)
		return fail("SO_SNDBUF %d, was %d", v, sndbuf_before);
	if ((v = sockopt(sk[1], SO_RCVBUF)) != rcvbuf_before)
		return fail("SO_RCVBUF %d, was %d", v, rcvbuf_before);
	if (type == SOCK_STREAM) {
		if (xrecv(sk[1], buf, sizeof buf, "onesecond message3",
		    "stream") != 0)
			return -1;
	} else if (xrecv(sk[1], buf, sizeof buf, "one", "message 1") != 0 ||
	    xrecv(sk[1], buf, sizeof buf, "second message", "message 2") != 0 ||
	    xrecv(sk[1], buf, sizeof buf, "3", "message 3") != 0)
		return -1;
	if (xrecv(sk[0], buf, sizeof buf, "the other way", "reply") != 0)
		return -1;
	if (recv(sk[1], buf, sizeof buf, MSG_DONTWAIT) != -1 ||
	    errno != EAGAIN)
		return fail("more data queued than was sent");
	if (send(sk[1], "after", 5, 0) != 5 ||
	    xrecv(sk[0], buf, sizeof buf, "after", "after restore") != 0)
		return -1;
	return 0;
}

static int
stream_setup(void)
{
	return pair_setup(SOCK_STREAM);
}

static int
stream_check(void)
{
	return pair_check(SOCK_STREAM);
}

static int
dgram_setup(void)
{
	return pair_setup(SOCK_DGRAM);
}

static int
dgram_check(void)
{
	return pair_check(SOCK_DGRAM);
}

static int
seqpacket_setup(void)
{
	return pair_setup(SOCK_SEQPACKET);
}

static int
seqpacket_check(void)
{
	return pair_check(SOCK_SEQPACKET);
}

static void
pair_perturb(void)
{
	if (send(sk[0], "x", 1, 0) != 1)
		die("send");
}

/*
 * A listening socket bound to DIR/listen.sock at fd 46 with a client
 * (fd 47) that connected, not yet accepted.  In the case unix-inflight
 * the client has also sent data on that connection: CRIU (4.1 and 4.2
 * alike) refuses to dump it ("Non-empty write queue on an in-flight socket"), see
 * t-state-fds.sh.
 */
static int			lsk, csk, lsk_data;
static struct sockaddr_un	lsk_addr;

static int
listen_setup(void)
{
	lsk_addr.sun_family = AF_UNIX;
	snprintf(lsk_addr.sun_path, sizeof lsk_addr.sun_path,
	    "%s/listen.sock", dir);
	if ((lsk = socket(AF_UNIX, SOCK_STREAM, 0)) == -1)
		die("socket");
	put_at(lsk, 46);
	lsk = 46;
	if (bind(lsk, (struct sockaddr *)&lsk_addr, sizeof lsk_addr) == -1 ||
	    listen(lsk, 5) == -1)
		die("bind, listen");
	if ((csk = socket(AF_UNIX, SOCK_STREAM, 0)) == -1)
		die("socket");
	put_at(csk, 47);
	csk = 47;
	if (connect(csk, (struct sockaddr *)&lsk_addr, sizeof lsk_addr) == -1)
		die("connect");
	if (lsk_data && send(csk, "pending hello", 13, 0) != 13)
		die("send");
	return 0;
}

static int
inflight_setup(void)
{
	lsk_data = 1;
	return listen_setup();
}

static void
listen_perturb(void)
{
	int	fd;

	if ((fd = accept(lsk, NULL, NULL)) == -1)
		die("accept");
	close(fd);
}

/* fd has something to read (a listener: a connection to accept). */
static int
readable(int fd)
{
	struct pollfd	pfd = { .fd = fd, .events = POLLIN };

	return poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN);
}

static int
listen_check(void)
{
	struct sockaddr_un	sa;
	socklen_t		len;
	char			buf[64];
	int			fd, c2, v, r = -1;

	len = sizeof sa;
	memset(&sa, 0, sizeof sa);
	if (getsockname(lsk, (struct sockaddr *)&sa, &len) == -1 ||
	    strcmp(sa.sun_path, lsk_addr.sun_path) != 0)
		return fail("the listener is bound to '%s', expected '%s'",
		    sa.sun_path, lsk_addr.sun_path);
	len = sizeof v;
	if (getsockopt(lsk, SOL_SOCKET, SO_ACCEPTCONN, &v, &len) == -1 || !v)
		return fail("fd %d is not listening", lsk);
	if (!readable(lsk))
		return fail("no pending connection on the listener");
	if ((fd = accept4(lsk, NULL, NULL, SOCK_NONBLOCK)) == -1)
		return fail("accept: %s", strerror(errno));
	if (!lsk_data && send(csk, "pending hello", 13, 0) != 13) {
		fail("client: send: %s", strerror(errno));
		goto out;
	}
	if (xrecv(fd, buf, sizeof buf, "pending hello", "pending") != 0)
		goto out;
	if (send(fd, "welcome", 7, 0) != 7 ||
	    xrecv(csk, buf, sizeof buf, "welcome", "client") != 0)
		goto out;
	if (readable(lsk)) {
		fail("a second pending connection");
		goto out;
	}
	/* The path still leads to the listener. */
	if ((c2 = socket(AF_UNIX, SOCK_STREAM, 0)) == -1 ||
	    connect(c2, (struct sockaddr *)&lsk_addr, sizeof lsk_addr) == -1) {
		fail("cannot connect to '%s' after the restore: %s",
		    lsk_addr.sun_path, strerror(errno));
		goto out;
	}
	close(fd);
	if (!readable(lsk) || (fd = accept(lsk, NULL, NULL)) == -1) {
		fail("cannot accept after the restore: %s", strerror(errno));
		goto out;
	}
	close(c2);
	r = 0;
out:
	close(fd);
	return r;
}

/*
 * A datagram socket bound to an abstract name at fd 48, and a client at
 * fd 49 connected to it, with a message queued.
 */
static int			asrv, acli;
static struct sockaddr_un	aaddr;
static socklen_t		aaddr_len;

static int
abstract_setup(void)
{
	int	n;

	aaddr.sun_family = AF_UNIX;
	n = snprintf(aaddr.sun_path + 1, sizeof aaddr.sun_path - 1,
	    "gpuckpt-statefds-%d", (int)getpid());
	aaddr_len = offsetof(struct sockaddr_un, sun_path) + 1 + n;
	if ((asrv = socket(AF_UNIX, SOCK_DGRAM, 0)) == -1)
		die("socket");
	put_at(asrv, 48);
	asrv = 48;
	if (bind(asrv, (struct sockaddr *)&aaddr, aaddr_len) == -1)
		die("bind");
	if ((acli = socket(AF_UNIX, SOCK_DGRAM, 0)) == -1)
		die("socket");
	put_at(acli, 49);
	acli = 49;
	if (connect(acli, (struct sockaddr *)&aaddr, aaddr_len) == -1)
		die("connect");
	if (send(acli, "queued", 6, 0) != 6)
		die("send");
	return 0;
}

static void
abstract_perturb(void)
{
	if (send(acli, "extra", 5, 0) != 5)
		die("send");
}

static int
abstract_check(void)
{
	struct sockaddr_un	sa;
	socklen_t		len;
	char			buf[64];
	int			fd;

	len = sizeof sa;
	if (getsockname(asrv, (struct sockaddr *)&sa, &len) == -1 ||
	    len != aaddr_len || memcmp(&sa, &aaddr, len) != 0)
		return fail("the server's name is '@%.*s', expected '@%s'",
		    (int)(len - offsetof(struct sockaddr_un, sun_path) - 1),
		    sa.sun_path + 1, aaddr.sun_path + 1);
	len = sizeof sa;
	if (getpeername(acli, (struct sockaddr *)&sa, &len) == -1 ||
	    len != aaddr_len || memcmp(&sa, &aaddr, len) != 0)
		return fail("the client is not connected to '@%s'",
		    aaddr.sun_path + 1);
	if (xrecv(asrv, buf, sizeof buf, "queued", "queued") != 0)
		return -1;
	if (recv(asrv, buf, sizeof buf, MSG_DONTWAIT) != -1 ||
	    errno != EAGAIN)
		return fail("more than one message was queued");
	/* A new socket reaches the server by its name. */
	if ((fd = socket(AF_UNIX, SOCK_DGRAM, 0)) == -1 ||
	    sendto(fd, "by name", 7, 0, (struct sockaddr *)&aaddr,
	    aaddr_len) != 7)
		return fail("cannot send to '@%s' after the restore: %s",
		    aaddr.sun_path + 1, strerror(errno));
	close(fd);
	if (xrecv(asrv, buf, sizeof buf, "by name", "by name") != 0 ||
	    send(acli, "client", 6, 0) != 6 ||
	    xrecv(asrv, buf, sizeof buf, "client", "client") != 0)
		return -1;
	return 0;
}

/* ------------------------------------------------------------------ */
/* eventfd, signalfd, inotify, epoll */

/* An eventfd at fd 54 with its counter at 12 (5, then 7 written). */
static int	efd;

static int
eventfd_setup(void)
{
	uint64_t	v = 7;

	if ((efd = eventfd(5, EFD_NONBLOCK)) == -1)
		die("eventfd");
	put_at(efd, 54);
	efd = 54;
	if (write(efd, &v, sizeof v) != sizeof v)
		die("write eventfd");
	return 0;
}

static void
eventfd_perturb(void)
{
	uint64_t	v = 1;

	if (write(efd, &v, sizeof v) != sizeof v)
		die("write eventfd");
}

static int
eventfd_check(void)
{
	uint64_t	v = 0;
	char		info[256];

	if (fdinfo_lines(efd, "eventfd-count:", info, sizeof info) == -1 ||
	    strtoull(info + 14, NULL, 16) != 12)
		return fail("fdinfo says '%s', expected count 12", info);
	if (read(efd, &v, sizeof v) != sizeof v || v != 12)
		return fail("the counter read %" PRIu64 ", expected 12", v);
	if (read(efd, &v, sizeof v) != -1 || errno != EAGAIN)
		return fail("the counter is not zero after a read");
	v = 3;
	if (write(efd, &v, sizeof v) != sizeof v ||
	    read(efd, &v, sizeof v) != sizeof v || v != 3)
		return fail("the counter does not count after the restore");
	return 0;
}

/*
 * An eventfd in semaphore mode (EFD_SEMAPHORE) at fd 55 with its
 * counter at 3: each read takes 1.  CRIU 4.2 does not keep the mode
 * (its image holds the counter and the status flags, not the eventfd's
 * own flags), so this case is expected to fail with
 * "not a semaphore" until CRIU does; see t-state-fds.sh.
 */
static int	efd_sem;

static int
eventfd_sem_setup(void)
{
	if ((efd_sem = eventfd(3, EFD_SEMAPHORE | EFD_NONBLOCK)) == -1)
		die("eventfd");
	put_at(efd_sem, 55);
	efd_sem = 55;
	return 0;
}

static void
eventfd_sem_perturb(void)
{
	uint64_t	v = 1;

	if (write(efd_sem, &v, sizeof v) != sizeof v)
		die("write eventfd");
}

static int
eventfd_sem_check(void)
{
	uint64_t	v = 0;
	char		info[256];
	int		i;

	if (fdinfo_lines(efd_sem, "eventfd-semaphore:", info,
	    sizeof info) == 0 && info[0] != '\0' && atoi(info + 18) != 1)
		return fail("not a semaphore: fdinfo says '%s'", info);
	for (i = 0; i < 3; i++)
		if (read(efd_sem, &v, sizeof v) != sizeof v || v != 1)
			return fail("not a semaphore: read %d gave %" PRIu64
			    ", expected 1", i + 1, v);
	if (read(efd_sem, &v, sizeof v) != -1 || errno != EAGAIN)
		return fail("the semaphore was above 3");
	return 0;
}

/*
 * SIGUSR1 and SIGRTMIN+3 go to a signalfd; SIGUSR2 is blocked too but
 * is not in its mask.  All three are pending, the real-time one twice
 * with its values.
 */
static int	sfd;
static char	sfd_mask[256];

static int
signalfd_setup(void)
{
	union sigval	val;
	sigset_t	set;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	sigaddset(&set, SIGRTMIN + 3);
	if (sigprocmask(SIG_BLOCK, &set, NULL) == -1)
		die("sigprocmask");
	sigdelset(&set, SIGUSR2);
	if ((sfd = signalfd(-1, &set, SFD_NONBLOCK)) == -1)
		die("signalfd");
	put_at(sfd, 50);
	sfd = 50;
	if (fdinfo_lines(sfd, "sigmask:", sfd_mask, sizeof sfd_mask) == -1)
		die("fdinfo");
	val.sival_int = 1111;
	if (sigqueue(getpid(), SIGRTMIN + 3, val) == -1)
		die("sigqueue");
	val.sival_int = 2222;
	if (sigqueue(getpid(), SIGRTMIN + 3, val) == -1 ||
	    kill(getpid(), SIGUSR1) == -1 || kill(getpid(), SIGUSR2) == -1)
		die("signal");
	return 0;
}

static void
signalfd_perturb(void)
{
	struct signalfd_siginfo	si;

	if (read(sfd, &si, sizeof si) != sizeof si)
		die("read signalfd");
}

static int
signalfd_check(void)
{
	struct signalfd_siginfo	si;
	sigset_t		pend;
	char			mask[256];
	int			i;
	static const struct {
		int	sig;
		int	val;
	} want[3] = { { SIGUSR1, 0 }, { 0, 1111 }, { 0, 2222 } };

	if (fdinfo_lines(sfd, "sigmask:", mask, sizeof mask) == -1 ||
	    strcmp(mask, sfd_mask) != 0)
		return fail("signalfd %s, was %s", mask, sfd_mask);
	if (sigpending(&pend) == -1 || !sigismember(&pend, SIGUSR1) ||
	    !sigismember(&pend, SIGUSR2) || !sigismember(&pend, SIGRTMIN + 3))
		return fail("a signal is no longer pending");
	for (i = 0; i < 3; i++) {
		int	sig = want[i].sig ? want[i].sig : SIGRTMIN + 3;

		if (read(sfd, &si, sizeof si) != sizeof si)
			return fail("signal %d of 3 not read: %s", i + 1,
			    strerror(errno));
		if ((int)si.ssi_signo != sig)
			return fail("read signal %u, expected %d", si.ssi_signo,
			    sig);
		if (want[i].val != 0 && si.ssi_int != want[i].val)
			return fail("signal %d came with %d, expected %d", sig,
			    si.ssi_int, want[i].val);
		if ((int)si.ssi_pid != getpid())
			return fail("signal %d from pid %u, expected %d", sig,
			    si.ssi_pid, (int)getpid());
	}
	if (read(sfd, &si, sizeof si) != -1 || errno != EAGAIN)
		return fail("a fourth signal on the signalfd (%u)",
		    si.ssi_signo);
	if (sigpending(&pend) == -1 || !sigismember(&pend, SIGUSR2) ||
	    sigismember(&pend, SIGUSR1))
		return fail("SIGUSR2 should be pending, SIGUSR1 not");
	return 0;
}

/*
 * inotify at fd 51: DIR/watched for creations, deletions and moves in,
 * DIR/watched/file for changes.  CRIU keeps the watches (their
 * descriptors, masks and the inodes they watch), not the events queued
 * at the checkpoint: those are lost (an IN_CREATE queued then is not
 * there to read after a restore), so none are queued; events made after
 * the restore must arrive, and nothing else.
 */
static int	ifd, iwd_dir, iwd_file;
static char	iwatches[512];

static int
inotify_setup(void)
{
	char	path[PATH_MAX];
	int	fd;

	snprintf(path, sizeof path, "%s/watched", dir);
	if (mkdir(path, 0700) == -1)
		die("mkdir");
	snprintf(path, sizeof path, "%s/watched/file", dir);
	if ((fd = open(path, O_WRONLY | O_CREAT, 0600)) == -1)
		die("open");
	close(fd);
	if ((ifd = inotify_init1(IN_NONBLOCK)) == -1)
		die("inotify_init1");
	put_at(ifd, 51);
	ifd = 51;
	if ((iwd_file = inotify_add_watch(ifd, path, IN_MODIFY |
	    IN_CLOSE_WRITE)) == -1)
		die("inotify_add_watch");
	snprintf(path, sizeof path, "%s/watched", dir);
	if ((iwd_dir = inotify_add_watch(ifd, path, IN_CREATE | IN_DELETE |
	    IN_MOVED_TO | IN_ONLYDIR)) == -1)
		die("inotify_add_watch");
	if (fdinfo_lines(ifd, "inotify ", iwatches, sizeof iwatches) == -1)
		die("fdinfo");
	return 0;
}

static void
inotify_perturb(void)
{
	if (inotify_rm_watch(ifd, iwd_file) == -1)
		die("inotify_rm_watch");
}

static char	ibuf[4096] __attribute__((aligned(8)));
static ssize_t	ilen, ipos;

/* Reads the next event: it is (wd, mask, name). */
static int
next_event(int wd, uint32_t mask, const char *name)
{
	struct inotify_event	*ev;
	ssize_t			 n;
	int			 i;

	for (i = 0; ipos >= ilen && i < 100; i++) {
		if ((n = read(ifd, ibuf, sizeof ibuf)) > 0) {
			ipos = 0;
			ilen = n;
			break;
		}
		if (errno != EAGAIN)
			return fail("read inotify: %s", strerror(errno));
		msleep(10);
	}
	if (ipos >= ilen)
		return fail("no event for '%s' (mask 0x%x)", name, mask);
	ev = (struct inotify_event *)(ibuf + ipos);
	ipos += sizeof *ev + ev->len;
	if (ev->wd != wd || ev->mask != mask ||
	    strcmp(ev->len ? ev->name : "", name) != 0)
		return fail("event (wd %d, mask 0x%x, '%s'), expected "
		    "(wd %d, mask 0x%x, '%s')", ev->wd, ev->mask,
		    ev->len ? ev->name : "", wd, mask, name);
	return 0;
}

static int
inotify_check(void)
{
	char	path[PATH_MAX], info[512];
	int	fd;

	if (fdinfo_lines(ifd, "inotify ", info, sizeof info) == -1 ||
	    strcmp(info, iwatches) != 0)
		return fail("watches:\n%swere:\n%s", info, iwatches);
	snprintf(path, sizeof path, "%s/watched/new", dir);
	if ((fd = open(path, O_WRONLY | O_CREAT, 0600)) == -1)
		return fail("cannot create '%s': %s", path, strerror(errno));
	close(fd);
	snprintf(path, sizeof path, "%s/watched/file", dir);
	if ((fd = open(path, O_WRONLY)) == -1 || write(fd, "x", 1) != 1)
		return fail("cannot write '%s': %s", path, strerror(errno));
	close(fd);
	if (next_event(iwd_dir, IN_CREATE, "new") != 0 ||
	    next_event(iwd_file, IN_MODIFY, "") != 0 ||
	    next_event(iwd_file, IN_CLOSE_WRITE, "") != 0)
		return -1;
	if (ipos < ilen || read(ifd, ibuf, sizeof ibuf) != -1 ||
	    errno != EAGAIN)
		return fail("more inotify events than expected");
	return 0;
}

/*
 * epoll at fd 52 over a pipe with data (level-triggered), an empty
 * eventfd (edge-triggered) and both ends of a socket pair.
 */
static int	epfd, ep_pipe[2], ep_efd, ep_sk[2];
static char	ep_info[1024];

static void
ep_add(int fd, uint32_t events, uint64_t data)
{
	struct epoll_event	ev = { .events = events, .data.u64 = data };

	if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == -1)
		die("epoll_ctl");
}

static int
epoll_setup(void)
{
	if ((epfd = epoll_create1(EPOLL_CLOEXEC)) == -1 ||
	    pipe2(ep_pipe, O_NONBLOCK) == -1 ||
	    (ep_efd = eventfd(0, EFD_NONBLOCK)) == -1 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, ep_sk) == -1)
		die("epoll setup");
	put_at(epfd, 52);
	epfd = 52;
	ep_add(ep_pipe[0], EPOLLIN, 0x1111222233334444ULL);
	ep_add(ep_efd, EPOLLIN | EPOLLET, 0x5555);
	ep_add(ep_sk[0], EPOLLOUT, 0x6666);
	ep_add(ep_sk[1], EPOLLIN | EPOLLRDHUP, 0x7777);
	if (write(ep_pipe[1], "data", 4) != 4)
		die("write");
	if (fdinfo_lines(epfd, "tfd:", ep_info, sizeof ep_info) == -1)
		die("fdinfo");
	return 0;
}

static void
epoll_perturb(void)
{
	struct epoll_event	ev = { .events = EPOLLIN, .data.u64 = 0x5556 };

	if (epoll_ctl(epfd, EPOLL_CTL_MOD, ep_efd, &ev) == -1)
		die("epoll_ctl");
}

/* epoll_wait reports exactly the n (events, data) pairs of want. */
static int
ep_ready(const struct epoll_event *want, int n, const char *when)
{
	struct epoll_event	got[8];
	int			m, i, j;

	if ((m = epoll_wait(epfd, got, 8, 0)) == -1)
		return fail("epoll_wait: %s", strerror(errno));
	if (m != n)
		return fail("%s: %d ready, expected %d", when, m, n);
	for (i = 0; i < n; i++) {
		for (j = 0; j < m; j++)
			if (got[j].data.u64 == want[i].data.u64 &&
			    got[j].events == want[i].events)
				break;
		if (j == m)
			return fail("%s: no events 0x%x with data 0x%" PRIx64,
			    when, want[i].events, (uint64_t)want[i].data.u64);
	}
	return 0;
}

static int
epoll_check(void)
{
	static const struct epoll_event	first[] = {
		{ EPOLLIN, { .u64 = 0x1111222233334444ULL } },
		{ EPOLLOUT, { .u64 = 0x6666 } },
	};
	static const struct epoll_event	second[] = {
		{ EPOLLIN, { .u64 = 0x1111222233334444ULL } },
		{ EPOLLOUT, { .u64 = 0x6666 } },
		{ EPOLLIN, { .u64 = 0x7777 } },
		{ EPOLLIN, { .u64 = 0x5555 } },	/* last: edge-triggered */
	};
	uint64_t	one = 1;
	char		info[1024];

	if (fdinfo_lines(epfd, "tfd:", info, sizeof info) == -1 ||
	    strcmp(info, ep_info) != 0)
		return fail("epoll targets:\n%swere:\n%s", info, ep_info);
	if (ep_ready(first, 2, "after the restore") != 0)
		return -1;
	if (write(ep_efd, &one, sizeof one) != sizeof one ||
	    send(ep_sk[0], "x", 1, 0) != 1)
		return fail("cannot write: %s", strerror(errno));
	if (ep_ready(second, 4, "after writing") != 0)
		return -1;
	/* The eventfd is edge-triggered: reported once. */
	if (ep_ready(second, 3, "once more") != 0)
		return -1;
	return 0;
}

/* ------------------------------------------------------------------ */
/* memory mappings */

#define SHM_PAGES	3

static char	*shm;

/*
 * Page 0 is written by the parent, page 1 by the child, page 2 holds
 * two mailbox words: after the restore the parent posts 1, the child
 * answers 2, which each sees only if the mapping is still shared.
 */
static int
shm_anon_child(void)
{
	volatile uint32_t	*box = (uint32_t *)(shm + 2 * pagesz);
	int			 i;

	if (pattern_ok(shm, pagesz, 10, "child: page 0") != 0 ||
	    pattern_ok(shm + pagesz, pagesz, 11, "child: page 1") != 0)
		return -1;
	for (i = 0; box[0] != 1 && i < 250; i++)
		msleep(STEP_MS);
	if (box[0] != 1)
		return fail("child: the parent's word never came");
	box[1] = 2;
	return 0;
}

static int
shm_anon_setup(void)
{
	volatile uint32_t	*box;
	int			 i;

	shm = mmap(NULL, SHM_PAGES * pagesz, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shm == MAP_FAILED)
		die("mmap");
	box = (uint32_t *)(shm + 2 * pagesz);
	fill(shm, pagesz, 10);
	if ((child = fork()) == -1)
		die("fork");
	if (child == 0) {
		fill(shm + pagesz, pagesz, 11);
		box[2] = 1;
		wait_go();
		if (shm_anon_child() != 0) {
			fprintf(stderr, "statefds: %s\n", why);
			_exit(1);
		}
		_exit(0);
	}
	for (i = 0; box[2] != 1 && i < 2500; i++)
		msleep(2);
	if (box[2] != 1) {
		errno = ETIMEDOUT;
		die("the child did not fill its page");
	}
	return 0;
}

static void
shm_anon_perturb(void)
{
	shm[pagesz + 100] ^= 1;
}

static int
shm_anon_check(void)
{
	volatile uint32_t	*box = (uint32_t *)(shm + 2 * pagesz);
	int			 i;

	if (pattern_ok(shm, pagesz, 10, "page 0") != 0 ||
	    pattern_ok(shm + pagesz, pagesz, 11, "page 1") != 0)
		return -1;
	box[0] = 1;
	for (i = 0; box[1] != 2 && i < 250; i++)
		msleep(STEP_MS);
	if (box[1] != 2)
		return fail("the child's answer never came: the mapping is "
		    "not shared");
	return reap(child, "shared memory child");
}

/* MAP_SHARED of DIR/shared.dat (two pages), written through the mapping. */
static char	*fmap;
static char	 fmap_path[PATH_MAX];

static int
shm_file_setup(void)
{
	int	fd;

	snprintf(fmap_path, sizeof fmap_path, "%s/shared.dat", dir);
	if ((fd = open(fmap_path, O_RDWR | O_CREAT | O_TRUNC, 0600)) == -1 ||
	    ftruncate(fd, 2 * pagesz) == -1)
		die("open '%s'", fmap_path);
	fmap = mmap(NULL, 2 * pagesz, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
	    0);
	if (fmap == MAP_FAILED)
		die("mmap");
	close(fd);
	fill(fmap, 2 * pagesz, 20);
	return 0;
}

static void
shm_file_perturb(void)
{
	fmap[3] ^= 1;
}

static int
shm_file_check(void)
{
	char	buf[16];
	int	fd;

	if (pattern_ok(fmap, 2 * pagesz, 20, "mapping") != 0 ||
	    file_has(fmap_path, fmap, 2 * pagesz, 0) != 0)
		return -1;
	/* Writes through the mapping reach the file, and back. */
	memcpy(fmap + pagesz + 5, "via mapping", 11);
	if (msync(fmap, 2 * pagesz, MS_SYNC) == -1)
		return fail("msync: %s", strerror(errno));
	if (file_has(fmap_path, "via mapping", 11, pagesz + 5) != 0)
		return -1;
	if ((fd = open(fmap_path, O_WRONLY)) == -1 ||
	    pwrite(fd, "via file", 8, 17) != 8)
		return fail("cannot write '%s': %s", fmap_path,
		    strerror(errno));
	close(fd);
	memcpy(buf, fmap + 17, 8);
	if (memcmp(buf, "via file", 8) != 0)
		return fail("a write to the file is not seen in the mapping");
	return 0;
}

/*
 * MAP_PRIVATE of DIR/private.dat (three pages): page 0 written (a
 * private copy), pages 1 and 2 read or left alone.
 */
static char	*pmap;
static char	 pmap_path[PATH_MAX];
static char	 pmap_file[3 * 65536];

static int
private_setup(void)
{
	int	fd;

	snprintf(pmap_path, sizeof pmap_path, "%s/private.dat", dir);
	fill(pmap_file, 3 * pagesz, 30);
	if ((fd = open(pmap_path, O_RDWR | O_CREAT | O_TRUNC, 0600)) == -1 ||
	    write(fd, pmap_file, 3 * pagesz) != 3 * pagesz)
		die("write '%s'", pmap_path);
	pmap = mmap(NULL, 3 * pagesz, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd,
	    0);
	if (pmap == MAP_FAILED)
		die("mmap");
	close(fd);
	fill(pmap, pagesz, 31);
	if (pmap[pagesz + 1] != pmap_file[pagesz + 1])
		die("page 1");
	return 0;
}

static void
private_perturb(void)
{
	pmap[2 * pagesz + 9] ^= 1;
}

static int
private_check(void)
{
	if (pattern_ok(pmap, pagesz, 31, "written page") != 0)
		return -1;
	if (memcmp(pmap + pagesz, pmap_file + pagesz, 2 * pagesz) != 0)
		return fail("the pages not written differ from the file");
	if (file_has(pmap_path, pmap_file, 3 * pagesz, 0) != 0)
		return -1;
	/* Still private: a write does not reach the file. */
	pmap[2 * pagesz] ^= 0xff;
	if (msync(pmap, 3 * pagesz, MS_SYNC) == -1)
		return fail("msync: %s", strerror(errno));
	if (file_has(pmap_path, pmap_file, 3 * pagesz, 0) != 0)
		return fail("a write to the private mapping reached the file");
	return 0;
}

/*
 * One anonymous mapping of five pages cut by mprotect: rw, none (a
 * guard page), r, rw, r-x; all filled before the cut.
 */
#define MP_PAGES	5

static char		*mp;
static const char	*mp_perms[MP_PAGES] = {
	"rw-p", "---p", "r--p", "rw-p", "r-xp"
};
static const int	 mp_prot[MP_PAGES] = {
	PROT_READ | PROT_WRITE, PROT_NONE, PROT_READ, PROT_READ | PROT_WRITE,
	PROT_READ | PROT_EXEC
};

/* The protections of each page of mp, from /proc/self/maps. */
static int
mp_maps(char perms[MP_PAGES][5])
{
	unsigned long	 lo, hi, base = (unsigned long)mp, a;
	char		 line[512], p[5];
	FILE		*f;
	int		 i;

	for (i = 0; i < MP_PAGES; i++)
		strcpy(perms[i], "?");
	if ((f = fopen("/proc/self/maps", "re")) == NULL)
		return -1;
	while (fgets(line, sizeof line, f) != NULL) {
		if (sscanf(line, "%lx-%lx %4s", &lo, &hi, p) != 3)
			continue;
		for (a = lo; a < hi; a += pagesz)
			if (a >= base && a < base + MP_PAGES * pagesz)
				memcpy(perms[(a - base) / pagesz], p, 5);
	}
	fclose(f);
	return 0;
}

static int
mprotect_setup(void)
{
	char	perms[MP_PAGES][5];
	int	i;

	mp = mmap(NULL, MP_PAGES * pagesz, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mp == MAP_FAILED)
		die("mmap");
	for (i = 0; i < MP_PAGES; i++) {
		fill(mp + i * pagesz, pagesz, 40 + i);
		if (mprotect(mp + i * pagesz, pagesz, mp_prot[i]) == -1)
			die("mprotect");
	}
	mp_maps(perms);
	for (i = 0; i < MP_PAGES; i++)
		if (strcmp(perms[i], mp_perms[i]) != 0) {
			errno = EINVAL;
			die("page %d is %s, expected %s", i, perms[i],
			    mp_perms[i]);
		}
	return 0;
}

static void
mprotect_perturb(void)
{
	if (mprotect(mp + pagesz, pagesz, PROT_READ) == -1)
		die("mprotect");
}

static int
mprotect_check(void)
{
	char	perms[MP_PAGES][5];
	char	name[32];
	int	i;

	if (mp_maps(perms) == -1)
		return fail("cannot read /proc/self/maps");
	for (i = 0; i < MP_PAGES; i++)
		if (strcmp(perms[i], mp_perms[i]) != 0)
			return fail("page %d is %s, expected %s", i, perms[i],
			    mp_perms[i]);
	/* Contents, the guard page's too once it may be read. */
	if (mprotect(mp + pagesz, pagesz, PROT_READ) == -1)
		return fail("mprotect: %s", strerror(errno));
	for (i = 0; i < MP_PAGES; i++) {
		snprintf(name, sizeof name, "page %d", i);
		if (pattern_ok(mp + i * pagesz, pagesz, 40 + i, name) != 0)
			return -1;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* deleted files, regular files, descriptors */

#define DEL_BYTES	10000
#define DEL_OFFSET	1234

static int	delfd;
static char	del_data[DEL_BYTES];

/* DIR/deleted.dat at fd 53, O_RDWR, offset 1234, then unlinked. */
static int
deleted_setup(void)
{
	char	path[PATH_MAX];

	snprintf(path, sizeof path, "%s/deleted.dat", dir);
	fill(del_data, sizeof del_data, 50);
	if ((delfd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0640)) == -1 ||
	    write(delfd, del_data, sizeof del_data) != sizeof del_data ||
	    lseek(delfd, DEL_OFFSET, SEEK_SET) != DEL_OFFSET ||
	    unlink(path) == -1)
		die("'%s'", path);
	put_at(delfd, 53);
	delfd = 53;
	return 0;
}

static void
deleted_perturb(void)
{
	if (lseek(delfd, 1, SEEK_CUR) == -1)
		die("lseek");
}

static int
deleted_check(void)
{
	struct stat	st;
	char		buf[DEL_BYTES];
	off_t		off;
	ssize_t		n;

	if (fstat(delfd, &st) == -1 || st.st_nlink != 0 ||
	    st.st_size != DEL_BYTES || (st.st_mode & 07777) != 0640)
		return fail("deleted file: %ju links, %jd bytes, mode 0%o",
		    (uintmax_t)st.st_nlink, (intmax_t)st.st_size,
		    (unsigned)(st.st_mode & 07777));
	if ((off = lseek(delfd, 0, SEEK_CUR)) != DEL_OFFSET)
		return fail("offset %jd, expected %d", (intmax_t)off,
		    DEL_OFFSET);
	n = read(delfd, buf, sizeof buf);
	if (n != DEL_BYTES - DEL_OFFSET ||
	    memcmp(buf, del_data + DEL_OFFSET, n) != 0)
		return fail("read %zd bytes of other contents", n);
	if (pwrite(delfd, "more", 4, DEL_BYTES) != 4 ||
	    fstat(delfd, &st) == -1 || st.st_size != DEL_BYTES + 4)
		return fail("cannot write the deleted file");
	return 0;
}

/* DIR/deleted-map.dat mapped shared, then closed and unlinked. */
static char	*dmap;

static int
deleted_map_setup(void)
{
	char	path[PATH_MAX];
	int	fd;

	snprintf(path, sizeof path, "%s/deleted-map.dat", dir);
	if ((fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600)) == -1 ||
	    ftruncate(fd, 2 * pagesz) == -1)
		die("'%s'", path);
	dmap = mmap(NULL, 2 * pagesz, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
	    0);
	if (dmap == MAP_FAILED)
		die("mmap");
	close(fd);
	fill(dmap, 2 * pagesz, 60);
	if (unlink(path) == -1)
		die("unlink");
	return 0;
}

static void
deleted_map_perturb(void)
{
	dmap[pagesz] ^= 1;
}

static int
deleted_map_check(void)
{
	unsigned long	 lo, hi;
	char		 line[512];
	FILE		*f;
	int		 found = 0;

	if (pattern_ok(dmap, 2 * pagesz, 60, "deleted mapping") != 0)
		return -1;
	if ((f = fopen("/proc/self/maps", "re")) == NULL)
		return fail("cannot read /proc/self/maps");
	while (fgets(line, sizeof line, f) != NULL)
		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 &&
		    lo == (unsigned long)dmap)
			found = hi - lo == (unsigned long)(2 * pagesz) &&
			    strncmp(strchr(line, ' ') + 1, "rw-s", 4) == 0 &&
			    strstr(line, "/deleted-map.dat (deleted)\n") !=
			    NULL;
	fclose(f);
	if (!found)
		return fail("no shared mapping of the deleted file at %p",
		    (void *)dmap);
	dmap[0] = 'w';
	return 0;
}

/*
 * Regular files: DIR/ro.dat O_RDONLY at fd 54 (offset 1000), rw.dat
 * O_RDWR at 55 (offset 10), ap.dat O_WRONLY|O_APPEND at 56 (offset 5,
 * writes still go to the end).
 */
#define RF_BYTES	4096

static char	rf_data[RF_BYTES];

static int
open_at(const char *name, int flags, int fd)
{
	char	path[PATH_MAX];
	int	f;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	if ((f = open(path, flags | O_CREAT, 0600)) == -1)
		die("open '%s'", path);
	put_at(f, fd);
	return fd;
}

static int
files_setup(void)
{
	int	fd;

	fill(rf_data, sizeof rf_data, 70);
	fd = open_at("ro.dat", O_WRONLY, 54);
	if (write(fd, rf_data, RF_BYTES) != RF_BYTES)
		die("write");
	close(fd);
	fd = open_at("ro.dat", O_RDONLY, 54);
	fd = open_at("rw.dat", O_RDWR, 55);
	if (write(fd, rf_data, 100) != 100 || lseek(fd, 10, SEEK_SET) != 10)
		die("rw.dat");
	fd = open_at("ap.dat", O_WRONLY | O_APPEND, 56);
	if (write(fd, rf_data, 100) != 100 || lseek(fd, 5, SEEK_SET) != 5)
		die("ap.dat");
	if (lseek(54, 1000, SEEK_SET) != 1000)
		die("lseek");
	return 0;
}

static void
files_perturb(void)
{
	if (fcntl(56, F_SETFL, 0) == -1)
		die("F_SETFL");
}

static int
files_check(void)
{
	char	path[PATH_MAX], buf[16];
	off_t	off;

	if ((fcntl(54, F_GETFL) & O_ACCMODE) != O_RDONLY ||
	    (fcntl(55, F_GETFL) & (O_ACCMODE | O_APPEND)) != O_RDWR ||
	    (fcntl(56, F_GETFL) & (O_ACCMODE | O_APPEND)) !=
	    (O_WRONLY | O_APPEND))
		return fail("access modes 0%o 0%o 0%o", fcntl(54, F_GETFL),
		    fcntl(55, F_GETFL), fcntl(56, F_GETFL));
	if ((off = lseek(54, 0, SEEK_CUR)) != 1000 ||
	    (off = lseek(55, 0, SEEK_CUR)) != 10 ||
	    (off = lseek(56, 0, SEEK_CUR)) != 5)
		return fail("an offset is %jd", (intmax_t)off);
	if (read(54, buf, 4) != 4 || memcmp(buf, rf_data + 1000, 4) != 0)
		return fail("ro.dat: wrong data at offset 1000");
	if (write(54, "x", 1) != -1 || errno != EBADF)
		return fail("ro.dat is writable");
	if (read(55, buf, 4) != 4 || memcmp(buf, rf_data + 10, 4) != 0 ||
	    write(55, "RW", 2) != 2)
		return fail("rw.dat: read or write at offset 10 failed");
	snprintf(path, sizeof path, "%s/rw.dat", dir);
	if (file_has(path, "RW", 2, 14) != 0)
		return -1;
	if (write(56, "END", 3) != 3 || lseek(56, 0, SEEK_CUR) != 103)
		return fail("ap.dat: a write did not go to the end");
	snprintf(path, sizeof path, "%s/ap.dat", dir);
	if (file_has(path, rf_data, 100, 0) != 0 ||
	    file_has(path, "END", 3, 100) != 0)
		return -1;
	return 0;
}

/*
 * One open file, three descriptors: 57 (close-on-exec), its dup 58
 * (not), and 300 from F_DUPFD_CLOEXEC; a gap below 300.  The offset
 * is shared.
 */
static int
dup_setup(void)
{
	int	fd;

	fill(rf_data, sizeof rf_data, 70);
	fd = open_at("dup.dat", O_RDWR | O_CLOEXEC, 57);
	if (fcntl(fd, F_SETFD, FD_CLOEXEC) == -1 ||
	    write(fd, rf_data, 200) != 200 || lseek(fd, 77, SEEK_SET) != 77 ||
	    dup2(fd, 58) != 58 || fcntl(fd, F_DUPFD_CLOEXEC, 300) != 300)
		die("dup.dat");
	return 0;
}

static void
dup_perturb(void)
{
	if (fcntl(58, F_SETFD, FD_CLOEXEC) == -1)
		die("F_SETFD");
}

static int
dup_check(void)
{
	struct stat	a, b, c;
	char		buf[8];
	off_t		o1, o2, o3;

	if (fcntl(57, F_GETFD) != FD_CLOEXEC || fcntl(58, F_GETFD) != 0 ||
	    fcntl(300, F_GETFD) != FD_CLOEXEC)
		return fail("close-on-exec flags %d %d %d, expected 1 0 1",
		    fcntl(57, F_GETFD), fcntl(58, F_GETFD),
		    fcntl(300, F_GETFD));
	if (fstat(57, &a) == -1 || fstat(58, &b) == -1 ||
	    fstat(300, &c) == -1 || a.st_ino != b.st_ino ||
	    a.st_ino != c.st_ino)
		return fail("the three descriptors are not one file");
	o1 = lseek(57, 0, SEEK_CUR);
	o2 = lseek(58, 0, SEEK_CUR);
	o3 = lseek(300, 0, SEEK_CUR);
	if (o1 != 77 || o2 != 77 || o3 != 77)
		return fail("offsets %jd %jd %jd, expected 77",
		    (intmax_t)o1, (intmax_t)o2, (intmax_t)o3);
	/* One offset: reading through one moves the others. */
	if (read(58, buf, 3) != 3 || memcmp(buf, rf_data + 77, 3) != 0)
		return fail("wrong data at offset 77");
	o1 = lseek(57, 0, SEEK_CUR);
	o3 = lseek(300, 0, SEEK_CUR);
	if (o1 != 80 || o3 != 80)
		return fail("offsets %jd %jd after a read through the dup, "
		    "expected 80", (intmax_t)o1, (intmax_t)o3);
	return 0;
}

/* ------------------------------------------------------------------ */

static const struct tcase	cases[] = {
	{ "pipe", pipe_setup, pipe_perturb, pipe_check },
	{ "pipe-shared", pipe_shared_setup, pipe_shared_perturb,
	    pipe_shared_check },
	{ "fifo", fifo_setup, fifo_perturb, fifo_check },
	{ "unix-stream", stream_setup, pair_perturb, stream_check },
	{ "unix-dgram", dgram_setup, pair_perturb, dgram_check },
	{ "unix-seqpacket", seqpacket_setup, pair_perturb, seqpacket_check },
	{ "unix-listen", listen_setup, listen_perturb, listen_check },
	{ "unix-inflight", inflight_setup, listen_perturb, listen_check },
	{ "unix-abstract", abstract_setup, abstract_perturb, abstract_check },
	{ "eventfd", eventfd_setup, eventfd_perturb, eventfd_check },
	{ "eventfd-semaphore", eventfd_sem_setup, eventfd_sem_perturb,
	    eventfd_sem_check },
	{ "signalfd", signalfd_setup, signalfd_perturb, signalfd_check },
	{ "inotify", inotify_setup, inotify_perturb, inotify_check },
	{ "epoll", epoll_setup, epoll_perturb, epoll_check },
	{ "shm-anon", shm_anon_setup, shm_anon_perturb, shm_anon_check },
	{ "shm-file", shm_file_setup, shm_file_perturb, shm_file_check },
	{ "private-file", private_setup, private_perturb, private_check },
	{ "mprotect", mprotect_setup, mprotect_perturb, mprotect_check },
	{ "deleted", deleted_setup, deleted_perturb, deleted_check },
	{ "deleted-map", deleted_map_setup, deleted_map_perturb,
	    deleted_map_check },
	{ "files", files_setup, files_perturb, files_check },
	{ "dup", dup_setup, dup_perturb, dup_check },
};

int
main(int argc, char **argv)
{
	const struct tcase	*tc = NULL;
	const char		*perturb;
	char			 buf[1200];
	size_t			 i;
	int			 fd, r;

	if (argc == 2 && strcmp(argv[1], "-l") == 0) {
		for (i = 0; i < sizeof cases / sizeof cases[0]; i++)
			printf("%s\n", cases[i].name);
		return 0;
	}
	if (argc != 3) {
		fprintf(stderr, "usage: statefds -l | statefds case dir\n");
		return 2;
	}
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++)
		if (strcmp(argv[1], cases[i].name) == 0)
			tc = &cases[i];
	if (tc == NULL) {
		fprintf(stderr, "statefds: unknown case '%s'\n", argv[1]);
		return 2;
	}
	dir = argv[2];
	pagesz = sysconf(_SC_PAGESIZE);
	if (pagesz > 65536) {
		fprintf(stderr, "statefds: pages too large\n");
		return 2;
	}
	/* Only stdio is inherited. */
	for (fd = 3; fd < 1024; fd++)
		close(fd);

	tc->setup();
	nfds_before = snap_fds(fds_before, MAXFDS);
	snprintf(buf, sizeof buf, "%d\n", (int)getpid());
	if (write_file("ready", buf) == -1)
		die("cannot write %s/ready", dir);
	perturb = getenv("PERTURB");
	if (perturb != NULL && strcmp(perturb, "1") == 0)
		tc->perturb();
	wait_go();

	r = check_fdtable();
	if (r == 0)
		r = tc->check();
	for (i = 0; why[i] != '\0'; i++)	/* one line */
		if (why[i] == '\n')
			why[i] = why[i + 1] == '\0' ? '\0' : ' ';
	if (r == 0)
		snprintf(buf, sizeof buf, "ok %s\n", tc->name);
	else
		snprintf(buf, sizeof buf, "FAIL %s: %s\n", tc->name, why);
	fputs(buf, stderr);
	if (write_file("result", buf) == -1)
		die("cannot write %s/result", dir);
	return r == 0 ? 0 : 1;
}
