/*
 * work.h: what the workloads of the tests and the benchmark share (the
 * status file, sleeping, the SIGUSR1 and SIGUSR2 requests, a pattern and
 * its checksum).  Header only, so that nvcc compiles it into gpuwork too.
 *
 * A program sets work_statusfile, calls work_close_inherited() and
 * work_signals(), and then appends lines with work_status(); its loop
 * checks work_want_verify, and work_want_rewrite where it takes
 * work_on_usr2() as SIGUSR2's handler.
 */
#ifndef GCK_TESTS_WORK_H
#define GCK_TESTS_WORK_H

#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WORK_LINE_MAX	4096		/* a status line, at the most */
#define WORK_FNV_INIT	0xcbf29ce484222325ULL
#define WORK_GOLDEN	0x9e3779b97f4a7c15ULL

static const char		*work_statusfile;
static volatile sig_atomic_t	 work_want_verify;
static volatile sig_atomic_t	 work_want_rewrite;

/*
 * Appends a line to work_statusfile.  The file is opened for each line
 * and written with one write(2), so it never stays open across a
 * checkpoint.
 */
static inline void
work_status(const char *fmt, ...)
    __attribute__((__format__(__printf__, 1, 2)));

static inline void
work_status(const char *fmt, ...)
{
	char	buf[WORK_LINE_MAX];
	va_list	ap;
	int	fd, n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof buf - 2)
		n = sizeof buf - 2;
	buf[n++] = '\n';
	if ((fd = open(work_statusfile, O_WRONLY | O_APPEND | O_CREAT |
	    O_CLOEXEC, 0644)) == -1)
		return;
	if (write(fd, buf, n) != n) {
		/* nothing better to do: the caller will time out */
	}
	close(fd);
}

static inline void
work_msleep(long ms)
{
	struct timespec	ts;

	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (ms % 1000) * 1000000L;
	nanosleep(&ts, NULL);	/* a signal may cut it short: fine */
}

static inline void
work_on_usr1(int sig)
{
	(void)sig;
	work_want_verify = 1;
}

static inline void
work_on_usr2(int sig)
{
	(void)sig;
	work_want_rewrite = 1;
}

/*
 * SIGUSR1 asks for a check (with flags such as SA_RESTART); SIGPIPE is
 * ignored.
 */
static inline void
work_signals(int flags)
{
	struct sigaction	sa;

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = work_on_usr1;
	sa.sa_flags = flags;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/*
 * Closes the descriptors above 2: those inherited from the test harness
 * or the shell (log files, make's jobserver pipes) are not part of the
 * state under test.  A job file that CUDA_CHECKPOINT_JOB_FILE names as
 * this process's own (gpuckpt --launch; /proc/self/fd/N or /dev/fd/N)
 * stays: it is the job's.
 */
static inline void
work_close_inherited(void)
{
	const char	*jf = getenv("CUDA_CHECKPOINT_JOB_FILE");
	char		 own[64];
	int		 fd, keep = -1, n;

	snprintf(own, sizeof own, "/proc/%d/fd/", (int)getpid());
	if (jf != NULL && strncmp(jf, "/proc/self/fd/", 14) == 0)
		snprintf(own, sizeof own, "/proc/self/fd/");
	else if (jf != NULL && strncmp(jf, "/dev/fd/", 8) == 0)
		snprintf(own, sizeof own, "/dev/fd/");
	if (jf != NULL && strncmp(jf, own, strlen(own)) == 0 &&
	    sscanf(jf + strlen(own), "%d%n", &keep, &n) == 1 &&
	    jf[strlen(own) + (size_t)n] == '\0' && keep > 2) {
		for (fd = 3; fd < 1024; fd++)
			if (fd != keep)
				close(fd);
		return;
	}
	if (close_range(3, ~0U, 0) == -1)
		for (fd = 3; fd < 1024; fd++)
			close(fd);
}

#define WORK_PAGE	4096

/* Page n of region r: words that tell both apart, none of them zero. */
static inline void
work_page_fill(unsigned char *p, int r, size_t n)
{
	uint64_t	w;
	size_t		i;

	for (i = 0; i < WORK_PAGE / sizeof w; i++) {
		w = (((uint64_t)r << 56) | ((uint64_t)n << 20) | i) *
		    WORK_GOLDEN | 1;
		memcpy(p + i * sizeof w, &w, sizeof w);
	}
}

/* Writes s and a newline with one write(2).  Returns 0, or -1. */
static inline int
work_put_line(int fd, const char *s)
{
	char	buf[4096];
	int	n;

	n = snprintf(buf, sizeof buf, "%s\n", s);
	if (n < 0 || (size_t)n >= sizeof buf)
		return -1;
	return write(fd, buf, (size_t)n) == n ? 0 : -1;
}

/*
 * Reads one line, a byte at a time, waiting timeout_ms at most (-1: for
 * as long as it takes).  Returns 0, or -1.
 */
static inline int
work_get_line(int fd, char *buf, size_t len, int timeout_ms)
{
	struct pollfd	pfd;
	size_t		n = 0;
	ssize_t		r;
	int		waited = 0;

	while (n + 1 < len) {
		pfd.fd = fd;
		pfd.events = POLLIN;
		if (poll(&pfd, 1, 100) <= 0) {
			waited += 100;
			if (timeout_ms >= 0 && waited >= timeout_ms)
				return -1;
			continue;
		}
		if ((r = read(fd, buf + n, 1)) == -1 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		if (buf[n] == '\n')
			break;
		n++;
	}
	buf[n] = '\0';
	return 0;
}

/* Whether page p is page n of region r as work_page_fill() wrote it. */
static inline int
work_page_is(const unsigned char *p, int r, size_t n)
{
	unsigned char	want[WORK_PAGE];

	work_page_fill(want, r, n);
	return memcmp(p, want, WORK_PAGE) == 0;
}

/*
 * Fills n words with xorshift64 from x (0: a fixed seed).  Returns the
 * state, from which another fill goes on.
 */
static inline uint64_t
work_fill(uint64_t *p, size_t n, uint64_t x)
{
	size_t	i;

	if (x == 0)
		x = WORK_GOLDEN;
	for (i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = x;
	}
	return x;
}

/* FNV-1a over n 64-bit words, going on from h (WORK_FNV_INIT to start). */
static inline uint64_t
work_fnv(uint64_t h, const uint64_t *p, size_t n)
{
	size_t	i;

	for (i = 0; i < n; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

#endif /* GCK_TESTS_WORK_H */
