/*
 * workload -- a process tree whose state can be checked after a
 * checkpoint and restore.
 *
 * usage: workload [-F] [-m MiB] [-r PERCENT] [-s KiB] [-w PERCENT]
 *	      [-z PERCENT] [-f statusfile]
 *
 * It fills MiB of memory (default 256) with a pseudo-random pattern,
 * PERCENT of its pages (scattered, default 0) written with zeros, and
 * remembers its checksum, opens STATUSFILE.data and writes to it so
 * that the file offset is known, forks a child that echoes bytes back
 * over a pair of pipes, and runs a thread that counts every 10 ms while
 * the main loop counts every 50 ms.  With -s it also attaches a System V
 * shared memory segment of KiB, filled with a pattern of its own and
 * marked for removal at once, so that it goes when the process does.
 * With -F the memory is a private mapping of STATUSFILE.mem, a file of
 * MiB zeros, rather than anonymous memory: the zero pages it writes stay
 * in an image (as holes), where those of anonymous memory are left out.
 * When ready it appends
 *	ready pid=PID sum=HEX child=PID mib=N
 * to STATUSFILE (default "workload.status").  On SIGUSR1 it checks the
 * memory checksum (and the segment's), the file offset, a round trip
 * through the child and that the thread still counts, and appends either
 *	verify ok sum=HEX counter=N thread=N child=PID gap=MS
 * or "verify FAIL what", where gap is the longest time, in milliseconds,
 * that the counting thread went without a turn since the check before
 * (the time the process was stopped, give or take 10 ms).  With -r, on SIGUSR2 it rewrites PERCENT of
 * its memory with new bytes, in runs of 2 MiB aligned to 2 MiB in its
 * address space and spread over it, remembers the new checksum and
 * appends
 *	rewrote sum=HEX runs=N
 * (a later check answers with that sum).  With -w it keeps rewriting
 * PERCENT of its memory a second, 2 MiB runs aligned to 2 MiB picked at
 * random, a few each 50 ms: it then keeps a checksum of each run and
 * checks each against its run, the "ready" line says rewriting=PERCENT
 * and the sum a check answers with is that of its run checksums at the
 * time.  The status file is opened for each line and
 * written with one write(2), so it never stays open across a checkpoint.
 * Descriptors other than 0, 1 and 2 that it inherits are closed first.
 */

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <sys/types.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/work.h"

#define DATA_BYTES	12345

static void	 child_loop(int, int);
static void	*ticker(void *);
static void	 verify(void);

static atomic_ulong		 thread_ticks;
static atomic_ulong		 thread_gap;	/* ms, longest since checked */
static uint64_t			*mem;
static size_t			 nwords;
static uint64_t			 sum;
static unsigned long		 counter;
static int			 datafd = -1, tochild = -1, fromchild = -1;
static off_t			 dataoff;
static uint64_t			*shm;		/* -s: the segment */
static size_t			 shmwords;
static uint64_t			 shmsum;
static pid_t			 child;
static unsigned long		 rpct;		/* -r */
static unsigned long		 wpct;		/* -w */
static uint64_t			*runsum;	/* -w: each run's sum */
static size_t			 nrun;
static double			 wdue;		/* -w: runs due */
static uint64_t			 wseed;
static unsigned long		 rewrites;

#define WRUN_WORDS	((2u << 20) / 8)

/* -w: the sum of the run sums. */
static uint64_t
runs_sum(void)
{
	return work_fnv(WORK_FNV_INIT, runsum, nrun);
}

/* -w: rewrites the runs due since the last turn (50 ms). */
static void
keep_rewriting(void)
{
	size_t	j;

	wdue += (double)nrun * (double)wpct / 100.0 / 20.0;
	while (wdue >= 1.0) {
		wdue -= 1.0;
		wseed = wseed * 6364136223846793005ULL + 1442695040888963407ULL;
		j = (size_t)((wseed >> 33) % nrun);
		wseed = work_fill(mem + j * WRUN_WORDS, WRUN_WORDS, wseed);
		runsum[j] = work_fnv(WORK_FNV_INIT, mem + j * WRUN_WORDS,
		    WRUN_WORDS);
		rewrites++;
	}
	sum = runs_sum();
}
static volatile sig_atomic_t	 want_rewrite;

static void
on_usr2(int sig)
{
	(void)sig;
	want_rewrite = 1;
}

/* -r: rewrites rpct percent of the memory in aligned runs of 2 MiB. */
static void
rewrite(void)
{
	const uintptr_t	run = 2u << 20;
	uintptr_t	start = (uintptr_t)mem, end = start + nwords * 8, at;
	size_t		nruns, i, stride;
	uint64_t	x = (uint64_t)time(NULL) ^ sum;

	nruns = (size_t)((end - start) / 100 * rpct / run);
	if (nruns == 0)
		nruns = 1;
	stride = (size_t)((end - start) / nruns);
	for (i = 0; i < nruns; i++) {
		at = (start + i * stride + run - 1) & ~(run - 1);
		if (at + run > end)
			break;
		x = work_fill((uint64_t *)at, run / 8, x);
	}
	sum = work_fnv(WORK_FNV_INIT, mem, nwords);
	work_status("rewrote sum=%016" PRIx64 " runs=%zu", sum, i);
}

static long long
mono_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void *
ticker(void *arg)
{
	long long	prev = mono_ms(), t;

	for (;;) {
		atomic_fetch_add(&thread_ticks, 1);
		work_msleep(10);
		t = mono_ms();
		/* the gap between turns, but the sleep's own 10 ms */
		if (t - prev - 10 > (long long)atomic_load(&thread_gap))
			atomic_store(&thread_gap, (unsigned long)(t - prev - 10));
		prev = t;
	}
	return NULL;
}

/* The child: echo every byte from in back to out until EOF. */
static void
child_loop(int in, int out)
{
	char	buf[256];
	ssize_t	n;

	for (;;) {
		n = read(in, buf, sizeof buf);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(0);
		if (write(out, buf, n) != n)
			_exit(1);
	}
}

static void
verify(void)
{
	struct pollfd	pfd;
	char		nonce[32], back[32];
	unsigned long	t0, t1;
	uint64_t	now, shmnow;
	off_t		off;
	size_t		len, got;
	ssize_t		n;
	int		waited;

	if (wpct > 0) {
		for (size_t j = 0; j < nrun; j++)
			if (work_fnv(WORK_FNV_INIT, mem + j * WRUN_WORDS,
			    WRUN_WORDS) != runsum[j]) {
				work_status("verify FAIL memory run %zu of %zu "
				    "(after %lu rewrites)", j, nrun, rewrites);
				return;
			}
		now = runs_sum();
	} else
		now = work_fnv(WORK_FNV_INIT, mem, nwords);
	if (now != sum) {
		work_status("verify FAIL memory sum=%016" PRIx64
		    " expected=%016" PRIx64, now, sum);
		return;
	}
	if (shm != NULL && (shmnow = work_fnv(WORK_FNV_INIT, shm,
	    shmwords)) != shmsum) {
		work_status("verify FAIL shm sum=%016" PRIx64 " expected=%016"
		    PRIx64, shmnow, shmsum);
		return;
	}
	if ((off = lseek(datafd, 0, SEEK_CUR)) != dataoff) {
		work_status("verify FAIL data offset %lld expected %lld",
		    (long long)off, (long long)dataoff);
		return;
	}

	len = (size_t)snprintf(nonce, sizeof nonce, "%lu.%ld.%lu", counter,
	    (long)time(NULL), (unsigned long)random());
	if (write(tochild, nonce, len) != (ssize_t)len) {
		work_status("verify FAIL pipe write: %s", strerror(errno));
		return;
	}
	for (got = 0, waited = 0; got < len && waited < 1000; ) {
		pfd.fd = fromchild;
		pfd.events = POLLIN;
		if (poll(&pfd, 1, 100) <= 0) {
			waited += 100;
			continue;
		}
		if ((n = read(fromchild, back + got, len - got)) <= 0) {
			work_status("verify FAIL pipe read: %s",
			    n == 0 ? "end of file" : strerror(errno));
			return;
		}
		got += (size_t)n;
	}
	if (got != len || memcmp(nonce, back, len) != 0) {
		work_status("verify FAIL pipe round trip (%zu of %zu bytes)",
		    got, len);
		return;
	}

	t0 = atomic_load(&thread_ticks);
	work_msleep(100);
	work_msleep(50);	/* in case a signal cut the first one short */
	t1 = atomic_load(&thread_ticks);
	if (t1 == t0) {
		work_status("verify FAIL thread stopped at %lu", t0);
		return;
	}

	work_status("verify ok sum=%016" PRIx64 " counter=%lu thread=%lu "
	    "child=%ld gap=%lu", now, counter, t1, (long)child,
	    atomic_exchange(&thread_gap, 0));
}

int
main(int argc, char *argv[])
{
	pthread_t		 th;
	char			 datafile[4096], memfile[4096], buf[DATA_BYTES];
	unsigned long		 mib = 256, zpct = 0, shmkib = 0;
	char			*ep;
	int			 ch, p1[2], p2[2], shmid, filemem = 0, memfd;
	size_t			 i;
	struct timespec		 ts;

	work_statusfile = "workload.status";
	while ((ch = getopt(argc, argv, "Ff:m:r:s:w:z:")) != -1) {
		switch (ch) {
		case 'F':
			filemem = 1;
			break;
		case 'f':
			work_statusfile = optarg;
			break;
		case 'm':
			errno = 0;
			mib = strtoul(optarg, &ep, 10);
			if (errno || *ep != '\0' || mib == 0 || mib > 65536) {
				fprintf(stderr, "workload: bad -m '%s'\n",
				    optarg);
				return 2;
			}
			break;
		case 'r':
			errno = 0;
			rpct = strtoul(optarg, &ep, 10);
			if (errno || *ep != '\0' || rpct == 0 || rpct > 100) {
				fprintf(stderr, "workload: bad -r '%s'\n",
				    optarg);
				return 2;
			}
			break;
		case 'w':
			errno = 0;
			wpct = strtoul(optarg, &ep, 10);
			if (errno || *ep != '\0' || wpct == 0 || wpct > 100) {
				fprintf(stderr, "workload: bad -w '%s'\n",
				    optarg);
				return 2;
			}
			break;
		case 's':
			errno = 0;
			shmkib = strtoul(optarg, &ep, 10);
			if (errno || *ep != '\0' || shmkib == 0 ||
			    shmkib > 1048576 || shmkib % 4 != 0) {
				fprintf(stderr, "workload: bad -s '%s'\n",
				    optarg);
				return 2;
			}
			break;
		case 'z':
			errno = 0;
			zpct = strtoul(optarg, &ep, 10);
			if (errno || *ep != '\0' || zpct > 100) {
				fprintf(stderr, "workload: bad -z '%s'\n",
				    optarg);
				return 2;
			}
			break;
		default:
			fprintf(stderr, "usage: workload [-F] [-m MiB] "
			    "[-r PERCENT] [-s KiB] [-w PERCENT] [-z PERCENT] "
			    "[-f statusfile]\n");
			return 2;
		}
	}

	work_close_inherited();
	work_signals(0);
	if (rpct > 0)
		signal(SIGUSR2, on_usr2);

	clock_gettime(CLOCK_REALTIME, &ts);
	srandom((unsigned)(getpid() ^ ts.tv_nsec));
	snprintf(datafile, sizeof datafile, "%s.data", work_statusfile);
	if ((datafd = open(datafile, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC,
	    0644)) == -1) {
		work_status("error cannot open '%s': %s", datafile,
		    strerror(errno));
		return 1;
	}
	for (i = 0; i < sizeof buf; i++)
		buf[i] = (char)('a' + i % 26);
	if (write(datafd, buf, sizeof buf) != (ssize_t)sizeof buf ||
	    lseek(datafd, 1000, SEEK_SET) != 1000 ||
	    write(datafd, "offset", 6) != 6) {
		work_status("error cannot write '%s': %s", datafile,
		    strerror(errno));
		return 1;
	}
	dataoff = 1006;

	if (pipe(p1) == -1 || pipe(p2) == -1) {
		work_status("error pipe: %s", strerror(errno));
		return 1;
	}
	switch (child = fork()) {
	case -1:
		work_status("error fork: %s", strerror(errno));
		return 1;
	case 0:
		close(p1[1]);
		close(p2[0]);
		close(datafd);
		prctl(PR_SET_NAME, "workload-echo", 0, 0, 0);
		child_loop(p1[0], p2[1]);
		_exit(0);
	}
	close(p1[0]);
	close(p2[1]);
	tochild = p1[1];
	fromchild = p2[0];

	/* After the fork, so that the child does not share the pages. */
	nwords = (size_t)mib * 1024 * 1024 / sizeof *mem;
	if (filemem) {
		snprintf(memfile, sizeof memfile, "%s.mem", work_statusfile);
		if ((memfd = open(memfile, O_RDWR | O_CREAT | O_TRUNC |
		    O_CLOEXEC, 0644)) == -1 ||
		    ftruncate(memfd, (off_t)(nwords * sizeof *mem)) == -1 ||
		    (mem = mmap(NULL, nwords * sizeof *mem, PROT_READ |
		    PROT_WRITE, MAP_PRIVATE, memfd, 0)) == MAP_FAILED) {
			work_status("error cannot map '%s': %s", memfile,
			    strerror(errno));
			return 1;
		}
		close(memfd);
	} else if ((mem = aligned_alloc(wpct > 0 ? 2u << 20 : 4096,
	    nwords * sizeof *mem)) == NULL) {
		work_status("error cannot allocate %lu MiB", mib);
		return 1;
	}
	(void)work_fill(mem, nwords, ((uint64_t)getpid() << 32) ^
	    (uint64_t)ts.tv_sec ^ ((uint64_t)ts.tv_nsec << 16));
	/* Pages written with zeros: present, but all zero. */
	for (i = 0; i < nwords / 512; i++)
		if ((i * 37) % 100 < zpct)
			memset(mem + i * 512, 0, 4096);
	sum = work_fnv(WORK_FNV_INIT, mem, nwords);
	if (wpct > 0) {
		if (filemem || mib % 2 != 0 || (runsum = calloc(mib / 2,
		    sizeof *runsum)) == NULL) {
			work_status("error -w needs an even -m and no -F");
			return 1;
		}
		nrun = mib / 2;
		for (i = 0; i < nrun; i++)
			runsum[i] = work_fnv(WORK_FNV_INIT, mem + i *
			    WRUN_WORDS, WRUN_WORDS);
		wseed = sum;
		sum = runs_sum();
	}

	if (shmkib > 0) {
		shmwords = (size_t)shmkib * 1024 / sizeof *shm;
		if ((shmid = shmget(IPC_PRIVATE, shmwords * sizeof *shm,
		    IPC_CREAT | 0600)) == -1 ||
		    (shm = shmat(shmid, NULL, 0)) == (void *)-1) {
			work_status("error System V shared memory: %s",
			    strerror(errno));
			return 1;
		}
		(void)shmctl(shmid, IPC_RMID, NULL);
		(void)work_fill(shm, shmwords, sum);
		shmsum = work_fnv(WORK_FNV_INIT, shm, shmwords);
	}

	if ((errno = pthread_create(&th, NULL, ticker, NULL)) != 0) {
		work_status("error pthread_create: %s", strerror(errno));
		return 1;
	}

	if (wpct > 0)
		work_status("ready pid=%ld sum=%016" PRIx64 " child=%ld "
		    "mib=%lu rewriting=%lu", (long)getpid(), sum, (long)child,
		    mib, wpct);
	else
		work_status("ready pid=%ld sum=%016" PRIx64 " child=%ld "
		    "mib=%lu", (long)getpid(), sum, (long)child, mib);
	for (;;) {
		counter++;
		if (want_rewrite) {
			want_rewrite = 0;
			rewrite();
		}
		if (wpct > 0)
			keep_rewriting();
		if (work_want_verify) {
			work_want_verify = 0;
			verify();
		}
		work_msleep(50);
	}
}
