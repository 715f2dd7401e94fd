/*
 * fillwork -- a parent and a child whose memory a restore from an image
 * file writes in place, and beside it memory of each kind that it must
 * leave to criu.
 *
 * usage: fillwork -f statusfile -d dir
 *
 * The parent fills
 *	S	4 MiB of private anonymous memory, a mapping of its own,
 *		which the child inherits and never writes: the two share
 *		its pages
 * then forks, and fills, each with a pattern of its own,
 *	P	24 MiB of private anonymous memory
 *	H	4 MiB of heap (brk)
 *	R	4 MiB of private anonymous memory, then made read-only
 *	N	256 KiB of private anonymous memory, then made inaccessible
 *	F	a private mapping of dir/fillwork.file, 1 MiB of bytes 0xa5,
 *		its even pages written over
 *	A	4 MiB, a signal stack up to its last 1 MiB boundary, on
 *		which its SIGUSR2 handler runs: the frame of a signal goes
 *		at the top of a chunk of the image that nothing else shares
 * and 64 KiB on the stack of each of two threads, which then sleep.
 * The child fills
 *	Q	8 MiB of private anonymous memory of its own.
 * Then the parent appends
 *	ready pid=PID child=PID s=ADDR a=ADDR p=ADDR r=ADDR
 * to statusfile (addresses in hexadecimal).  On SIGUSR1 each process
 * checks all it holds and appends "verify parent ok" (or "verify child
 * ok"), or "verify parent FAIL region X page N".  On SIGUSR2 the
 * parent's handler, which runs on A, checks A but for its own frame and
 * appends "usr2 ok", or "usr2 FAIL ..." (not on A, or A changed).
 * Descriptors above 2 are closed first.
 */

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <sys/mman.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/work.h"

#define PG	4096
#define NP	6144		/* pages of each region */
#define NH	1024
#define NR	1024
#define NN	64
#define NF	256
#define NS	1024
#define NA	1024
#define NQ	2048
#define NT	16		/* pages on each thread's stack */
#define FRAME	(16 * PG)	/* A's top, where frames go */

static int	 region_ok(const char *, const unsigned char *, int, size_t,
		    size_t);
static int	 check(int);
static void	*map(size_t, int, int, off_t);
static void	*thread_main(void *);
static void	 on_usr2(int, siginfo_t *, void *);

static unsigned char	*rp, *rh, *rr, *rn, *rf, *rs, *ra, *rq;
static size_t		 na;		/* pages of A on the signal stack */
static unsigned char	*volatile tstack[2];
static volatile sig_atomic_t	 usr2_seen;

/* Whether pages [from, to) of region r at p are as work_page_fill() made
 * them. */
static int
region_ok(const char *who, const unsigned char *p, int r, size_t from,
    size_t to)
{
	size_t	n;

	for (n = from; n < to; n++)
		if (!work_page_is(p + n * PG, r, n)) {
			work_status("verify %s FAIL region %c page %zu", who, r,
			    n);
			return 0;
		}
	return 1;
}

static int
check(int child)
{
	const char	*who = child ? "child" : "parent";
	size_t		 n;
	int		 i;

	if (child) {
		if (!region_ok(who, rq, 'Q', 0, NQ) ||
		    !region_ok(who, rs, 'S', 0, NS))
			return -1;
		work_status("verify %s ok", who);
		return 0;
	}
	if (!region_ok(who, rp, 'P', 0, NP) || !region_ok(who, rh, 'H', 0,
	    NH) || !region_ok(who, rr, 'R', 0, NR) ||
	    !region_ok(who, rs, 'S', 0, NS) ||
	    !region_ok(who, ra, 'A', 0, na - FRAME / PG))
		return -1;
	if (mprotect(rn, NN * PG, PROT_READ) == -1)
		return -1;
	i = region_ok(who, rn, 'N', 0, NN);
	(void)mprotect(rn, NN * PG, PROT_NONE);
	if (!i)
		return -1;
	for (n = 0; n < NF; n++)
		if (n % 2 == 0 ? !work_page_is(rf + n * PG, 'F', n) :
		    rf[n * PG] != 0xa5 || memcmp(rf + n * PG, rf + n * PG + 1,
		    PG - 1) != 0) {
			work_status("verify %s FAIL region F page %zu", who, n);
			return -1;
		}
	for (i = 0; i < 2; i++)
		if (!region_ok(who, tstack[i], 'T' + i, 0, NT))
			return -1;
	work_status("verify %s ok", who);
	return 0;
}

static void *
map(size_t len, int flags, int fd, off_t off)
{
	void	*p;

	p = mmap(NULL, len, PROT_READ | PROT_WRITE, flags, fd, off);
	if (p == MAP_FAILED) {
		work_status("error mmap: %s", strerror(errno));
		exit(1);
	}
	(void)madvise(p, len, MADV_NOHUGEPAGE);
	return p;
}

/* A thread that keeps a pattern on its stack, and sleeps. */
static void *
thread_main(void *arg)
{
	unsigned char	stack[NT * PG];
	size_t		n;
	int		i = (int)(intptr_t)arg;
	sigset_t	set;

	/* The signals are the main thread's, SIGUSR2 on its stack A. */
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	for (n = 0; n < NT; n++)
		work_page_fill(stack + n * PG, 'T' + i, n);
	tstack[i] = stack;
	for (;;)
		work_msleep(1000);
	return NULL;
}

/* SIGUSR2, on A: its frame at the top of A, the rest as it was. */
static void
on_usr2(int sig, siginfo_t *si, void *uc)
{
	unsigned char	here;

	(void)uc;
	usr2_seen = 1;
	if (&here < ra || &here >= ra + na * PG)
		work_status("usr2 FAIL not on the signal stack");
	else if (si->si_signo != sig || !region_ok("usr2", ra, 'A', 0,
	    na - FRAME / PG))
		work_status("usr2 FAIL");
	else
		work_status("usr2 ok");
}

int
main(int argc, char **argv)
{
	struct sigaction sa;
	pthread_t	 t;
	stack_t		 ss;
	const char	*dir = NULL;
	char		 path[4096], c;
	pid_t		 child;
	size_t		 n;
	int		 ch, fd, i;

	while ((ch = getopt(argc, argv, "d:f:")) != -1) {
		switch (ch) {
		case 'd':
			dir = optarg;
			break;
		case 'f':
			work_statusfile = optarg;
			break;
		default:
			fprintf(stderr, "usage: fillwork -f statusfile -d dir\n");
			return 2;
		}
	}
	if (work_statusfile == NULL || dir == NULL) {
		fprintf(stderr, "usage: fillwork -f statusfile -d dir\n");
		return 2;
	}
	work_close_inherited();
	work_signals(SA_RESTART);

	/* S between two inaccessible pages: a mapping of its own */
	rs = map((NS + 2) * PG, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mprotect(rs, PG, PROT_NONE) == -1 ||
	    mprotect(rs + (NS + 1) * PG, PG, PROT_NONE) == -1) {
		work_status("error mprotect: %s", strerror(errno));
		return 1;
	}
	rs += PG;
	for (n = 0; n < NS; n++)
		work_page_fill(rs + n * PG, 'S', n);

	if ((child = fork()) == -1) {
		work_status("error fork: %s", strerror(errno));
		return 1;
	}
	if (child == 0) {
		rq = map(NQ * PG, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		for (n = 0; n < NQ; n++)
			work_page_fill(rq + n * PG, 'Q', n);
		for (;;) {
			if (work_want_verify) {
				work_want_verify = 0;
				check(1);
			}
			work_msleep(50);
		}
	}

	rp = map(NP * PG, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	for (n = 0; n < NP; n++)
		work_page_fill(rp + n * PG, 'P', n);
	if ((rh = sbrk(NH * PG)) == (void *)-1) {
		work_status("error sbrk: %s", strerror(errno));
		return 1;
	}
	for (n = 0; n < NH; n++)
		work_page_fill(rh + n * PG, 'H', n);
	rr = map(NR * PG, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	for (n = 0; n < NR; n++)
		work_page_fill(rr + n * PG, 'R', n);
	rn = map(NN * PG, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	for (n = 0; n < NN; n++)
		work_page_fill(rn + n * PG, 'N', n);
	if (mprotect(rr, NR * PG, PROT_READ) == -1 ||
	    mprotect(rn, NN * PG, PROT_NONE) == -1) {
		work_status("error mprotect: %s", strerror(errno));
		return 1;
	}
	snprintf(path, sizeof path, "%s/fillwork.file", dir);
	if ((fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644)) == -1) {
		work_status("error %s: %s", path, strerror(errno));
		return 1;
	}
	c = (char)0xa5;
	for (n = 0; n < NF * PG; n++)
		if (write(fd, &c, 1) != 1) {
			work_status("error write: %s", strerror(errno));
			return 1;
		}
	rf = map(NF * PG, MAP_PRIVATE, fd, 0);
	close(fd);
	for (n = 0; n < NF; n += 2)
		work_page_fill(rf + n * PG, 'F', n);
	ra = map(NA * PG, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	for (n = 0; n < NA; n++)
		work_page_fill(ra + n * PG, 'A', n);
	na = ((((uintptr_t)ra + NA * PG) & ~(uintptr_t)((1 << 20) - 1)) -
	    (uintptr_t)ra) / PG;
	ss.ss_sp = ra;
	ss.ss_size = na * PG;
	ss.ss_flags = 0;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_usr2;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaltstack(&ss, NULL) == -1 || sigaction(SIGUSR2, &sa,
	    NULL) == -1) {
		work_status("error sigaltstack: %s", strerror(errno));
		return 1;
	}
	for (i = 0; i < 2; i++)
		if (pthread_create(&t, NULL, thread_main, (void *)(intptr_t)i)
		    != 0) {
			work_status("error pthread_create");
			return 1;
		}
	while (tstack[0] == NULL || tstack[1] == NULL)
		work_msleep(10);
	work_status("ready pid=%d child=%d s=%" PRIxPTR " a=%" PRIxPTR
	    " p=%" PRIxPTR " r=%" PRIxPTR, (int)getpid(), (int)child,
	    (uintptr_t)rs, (uintptr_t)ra, (uintptr_t)rp, (uintptr_t)rr);
	for (;;) {
		if (work_want_verify) {
			work_want_verify = 0;
			check(0);
		}
		work_msleep(50);
	}
}
