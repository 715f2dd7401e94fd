/*
 * workload -- a process tree whose state can be checked after a
 * checkpoint and restore.
 *
 * usage: workload [-F] [-m MiB] [-p runs|pages|heap] [-r PERCENT] [-s KiB]
 *	      [-w PERCENT] [-z PERCENT] [-f statusfile]
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
 * (the time the process was stopped, give or take 10 ms).  With -r, on
 * SIGUSR2 it rewrites PERCENT of its memory with new bytes, in runs of
 * 2 MiB aligned to 2 MiB in its address space and spread over it,
 * remembers the new checksum and appends
 *	rewrote sum=HEX runs=N
 * (a later check answers with that sum).  With -w it keeps rewriting
 * PERCENT of its memory a second, 2 MiB runs aligned to 2 MiB picked at
 * random, a few each 50 ms: it then keeps a checksum of each run and
 * checks each against its run, the "ready" line says rewriting=PERCENT
 * and the sum a check answers with is that of its run checksums at the
 * time.
 *
 * -p says how -r and -w write: runs, as above (the default); pages,
 * single 4 KiB pages picked at random, one here, one there; or heap,
 * where the memory is not one allocation but objects of 2 to 512 words
 * (16 to 4096 bytes, sizes from a PRNG) taken one by one from
 * malloc(3), MiB of them, filled with pseudo-random words (-z: that
 * percent of them with zeros), and rewritten object by object.  -r
 * picks each page or object once at most, and says "pages=N" or
 * "objects=N" for "runs=N".  With pages and heap it keeps a checksum
 * of each page or object, checks each against its own, and answers
 * with the sum of those, as -w does of its runs; -p heap takes no -F.
 * When -p is given, the "ready" line ends with pattern=NAME.  The
 * status file is opened for each line and written with one write(2),
 * so it never stays open across a checkpoint.  Descriptors other than
 * 0, 1 and 2 that it inherits are closed first.
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
static int	 heap_fill(uint64_t, unsigned long);
static void	 keep_rewriting(void);
static void	 rewrite(void);
static void	 rewrite_units(void);
static void	*ticker(void *);
static size_t	 unit_pick(uint64_t *);
static uint64_t	*unit_ptr(size_t);
static void	 unit_rewrite(size_t, uint64_t *);
static size_t	 unit_words(size_t);
static uint64_t	 units_sum(void);
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
static double			 wdue;		/* -w: bytes due */
static size_t			 wnext;		/* -w: the unit to rewrite next */
static uint64_t			 wseed;
static unsigned long		 rewrites;

#define WRUN_WORDS	((2u << 20) / 8)
#define WPAGE_WORDS	(WORK_PAGE / 8)
#define OBJ_MIN_WORDS	2
#define OBJ_MAX_WORDS	512

/* -p: how -r and -w write. */
enum { P_RUNS, P_PAGES, P_HEAP };
static const char *const patterns[] = { "runs", "pages", "heap" };
static const char *const unitname[] = { "run", "page", "object" };
static int			 pattern = P_RUNS;

/* -p heap: the objects. */
struct obj {
	uint64_t	*p;
	size_t		 words;
};
static struct obj		*objs;

/*
 * The units a checksum each is kept of (with -w, and with pages and
 * heap): runs of 2 MiB, pages or objects.
 */
static uint64_t			*usum;
static size_t			 nunit;

static uint64_t *
unit_ptr(size_t j)
{
	switch (pattern) {
	case P_PAGES:
		return mem + j * WPAGE_WORDS;
	case P_HEAP:
		return objs[j].p;
	default:
		return mem + j * WRUN_WORDS;
	}
}

static size_t
unit_words(size_t j)
{
	switch (pattern) {
	case P_PAGES:
		return WPAGE_WORDS;
	case P_HEAP:
		return objs[j].words;
	default:
		return WRUN_WORDS;
	}
}

/* A unit picked at random, the state *x going on. */
static size_t
unit_pick(uint64_t *x)
{
	*x = *x * 6364136223846793005ULL + 1442695040888963407ULL;
	return (size_t)((*x >> 33) % nunit);
}

/* Unit j given new bytes from the state *x, and its sum kept. */
static void
unit_rewrite(size_t j, uint64_t *x)
{
	*x = work_fill(unit_ptr(j), unit_words(j), *x);
	usum[j] = work_fnv(WORK_FNV_INIT, unit_ptr(j), unit_words(j));
}

/* The sum of the unit sums. */
static uint64_t
units_sum(void)
{
	return work_fnv(WORK_FNV_INIT, usum, nunit);
}

/* -w: rewrites the bytes due since the last turn (50 ms). */
static void
keep_rewriting(void)
{
	wdue += (double)nwords * 8.0 * (double)wpct / 100.0 / 20.0;
	while (wdue >= (double)unit_words(wnext) * 8.0) {
		wdue -= (double)unit_words(wnext) * 8.0;
		unit_rewrite(wnext, &wseed);
		wnext = unit_pick(&wseed);
		rewrites++;
	}
	sum = units_sum();
}

/*
 * heap: takes objects of OBJ_MIN_WORDS to OBJ_MAX_WORDS words from
 * malloc() until they hold nwords, filled from x; zpct percent of them
 * are zeros.  Returns -1 when memory ran out.
 */
static int
heap_fill(uint64_t x, unsigned long zpct)
{
	struct obj	*o;
	size_t		 cap = 0, total = 0, n;

	while (total < nwords) {
		if (nunit == cap) {
			cap = cap == 0 ? 65536 : cap * 2;
			if ((o = realloc(objs, cap * sizeof *objs)) == NULL)
				return -1;
			objs = o;
		}
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		n = OBJ_MIN_WORDS + (size_t)(x >> 33) % (OBJ_MAX_WORDS -
		    OBJ_MIN_WORDS + 1);
		if (n > nwords - total)
			n = nwords - total;
		o = &objs[nunit];
		if ((o->p = malloc(n * sizeof *o->p)) == NULL)
			return -1;
		o->words = n;
		if ((nunit * 37) % 100 < zpct)
			memset(o->p, 0, n * sizeof *o->p);
		else
			x = work_fill(o->p, n, x);
		total += n;
		nunit++;
	}
	return 0;
}

/* -r: rewrites rpct percent of the memory in aligned runs of 2 MiB. */
static void
rewrite(void)
{
	const uintptr_t	run = 2u << 20;
	uintptr_t	start = (uintptr_t)mem, end = start + nwords * 8, at;
	size_t		nruns, i, stride;
	uint64_t	x = (uint64_t)time(NULL) ^ sum;

	if (pattern != P_RUNS) {
		rewrite_units();
		return;
	}
	nruns = (size_t)((end - start) / 100 * rpct / run);
	if (nruns == 0)
		nruns = 1;
	stride = (size_t)((end - start) / nruns);
	for (i = 0; i < nruns; i++) {
		at = (start + i * stride + run - 1) & ~(run - 1);
		if (at + run > end)
			break;
		/* -w keeps a sum of each run */
		if (usum != NULL)
			unit_rewrite((at - start) / run, &x);
		else
			x = work_fill((uint64_t *)at, run / 8, x);
	}
	sum = usum != NULL ? units_sum() : work_fnv(WORK_FNV_INIT, mem, nwords);
	work_status("rewrote sum=%016" PRIx64 " runs=%zu", sum, i);
}

/*
 * -r with pages and heap: rewrites pages or objects picked at random,
 * each once at most, until rpct percent of the memory is written.
 */
static void
rewrite_units(void)
{
	unsigned char	*seen;
	size_t		 want = nwords / 100 * rpct, done = 0, n = 0, j;
	uint64_t	 x = (uint64_t)time(NULL) ^ sum;

	if ((seen = calloc(nunit / 8 + 1, 1)) == NULL) {
		work_status("error cannot allocate %zu bytes", nunit / 8 + 1);
		return;
	}
	do {
		j = unit_pick(&x);
		if (seen[j / 8] & (1u << j % 8))
			continue;
		seen[j / 8] |= 1u << j % 8;
		unit_rewrite(j, &x);
		done += unit_words(j);
		n++;
	} while (done < want && n < nunit);
	free(seen);
	sum = units_sum();
	work_status("rewrote sum=%016" PRIx64 " %ss=%zu", sum,
	    unitname[pattern], n);
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

	if (usum != NULL) {
		for (size_t j = 0; j < nunit; j++)
			if (work_fnv(WORK_FNV_INIT, unit_ptr(j),
			    unit_words(j)) != usum[j]) {
				work_status("verify FAIL memory %s %zu of %zu "
				    "(after %lu rewrites)", unitname[pattern], j,
				    nunit, rewrites);
				return;
			}
		now = units_sum();
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
	int			 pgiven = 0;
	size_t			 i;
	uint64_t		 seed;
	struct timespec		 ts;

	work_statusfile = "workload.status";
	while ((ch = getopt(argc, argv, "Ff:m:p:r:s:w:z:")) != -1) {
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
		case 'p':
			for (pattern = 0; pattern < 3; pattern++)
				if (strcmp(optarg, patterns[pattern]) == 0)
					break;
			if (pattern == 3) {
				fprintf(stderr, "workload: bad -p '%s'\n",
				    optarg);
				return 2;
			}
			pgiven = 1;
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
			    "[-p runs|pages|heap] [-r PERCENT] [-s KiB] "
			    "[-w PERCENT] [-z PERCENT] [-f statusfile]\n");
			return 2;
		}
	}
	if (filemem && pattern == P_HEAP) {
		fprintf(stderr, "workload: -p heap takes no -F\n");
		return 2;
	}

	work_close_inherited();
	work_signals(0);
	if (rpct > 0)
		signal(SIGUSR2, work_on_usr2);

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
	seed = ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_sec ^
	    ((uint64_t)ts.tv_nsec << 16);
	if (pattern == P_HEAP) {
		if (heap_fill(seed, zpct) == -1) {
			work_status("error cannot allocate %lu MiB of objects",
			    mib);
			return 1;
		}
	} else if (filemem) {
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
	if (mem != NULL) {
		(void)work_fill(mem, nwords, seed);
		/* Pages written with zeros: present, but all zero. */
		for (i = 0; i < nwords / 512; i++)
			if ((i * 37) % 100 < zpct)
				memset(mem + i * 512, 0, 4096);
		sum = work_fnv(WORK_FNV_INIT, mem, nwords);
	} else
		sum = seed;
	if (wpct > 0 && pattern == P_RUNS) {
		if (filemem || mib % 2 != 0) {
			work_status("error -w needs an even -m and no -F");
			return 1;
		}
		nunit = mib / 2;
	} else if (pattern == P_PAGES)
		nunit = nwords / WPAGE_WORDS;
	if (nunit > 0) {
		if ((usum = calloc(nunit, sizeof *usum)) == NULL) {
			work_status("error cannot allocate the sums of %zu %ss",
			    nunit, unitname[pattern]);
			return 1;
		}
		for (i = 0; i < nunit; i++)
			usum[i] = work_fnv(WORK_FNV_INIT, unit_ptr(i),
			    unit_words(i));
		wseed = sum;
		wnext = unit_pick(&wseed);
		sum = units_sum();
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
		    "mib=%lu rewriting=%lu%s%s", (long)getpid(), sum,
		    (long)child, mib, wpct, pgiven ? " pattern=" : "",
		    pgiven ? patterns[pattern] : "");
	else
		work_status("ready pid=%ld sum=%016" PRIx64 " child=%ld "
		    "mib=%lu%s%s", (long)getpid(), sum, (long)child, mib,
		    pgiven ? " pattern=" : "", pgiven ? patterns[pattern] : "");
	for (;;) {
		counter++;
		if (work_want_rewrite) {
			work_want_rewrite = 0;
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
