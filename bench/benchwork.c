/*
 * benchwork -- a workload for the benchmark: a process with a known
 * amount of memory of a known kind, which measures its own downtime.
 *
 * usage: benchwork [-k kind] [-m MiB] [-r percent] [-s seed] [-w percent]
 *		   [-f statusfile]
 *
 * It maps MiB of anonymous memory (default 256) and writes every page
 * of it, so that all of it is present and a checkpoint must carry it:
 *
 *	mixed	half zero pages, a quarter random bytes, a quarter text
 *		(words drawn from a fixed list), in 1 MiB blocks taking
 *		turns: zero, text, zero, random
 *	zero90	runs of 1 to 32 pages, each run zero with probability 0.9
 *		and random otherwise, so the zero pages are scattered
 *	random	random bytes only (incompressible)
 *
 * All of it comes from a PRNG with a fixed seed (-s), so two runs of the
 * same kind and size hold the same bytes.  Once filled it appends
 *	ready pid=PID kind=KIND mib=N sum=HEX fill_ms=N
 * to STATUSFILE (default "benchwork.status") and loops, every 2 ms
 * reading CLOCK_REALTIME.  When more than 50 ms passed since the last
 * turn it appends
 *	gap MS restored=0|1
 * where restored=1 says that the process is no longer the one that was
 * started (its start time in /proc/self/stat changed, as it does when
 * CRIU restores it): the largest such gap is the time it did not run.
 * On SIGUSR1 it checks the checksum of its memory and appends
 * "verify ok sum=HEX" or "verify FAIL ...".  On SIGUSR2 it rewrites 5%
 * of its memory (-r PERCENT) in runs of 2 MiB aligned to 2 MiB, spread
 * over it, with new content of its kind, and appends "rewrote sum=HEX
 * bytes=N".  With -w it keeps rewriting that percent of its memory a
 * second, 2 MiB runs aligned to 2 MiB picked at random, as time goes:
 * its "ready" line then ends with rewriting=PERCENT, it keeps a checksum
 * of each run, and a check compares each run with its own, answering
 * with the checksum of those.  The status file is opened
 * for each line and written with one write(2), so no descriptor stays
 * open across a checkpoint.  Descriptors above 2 are closed first.
 */

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <sys/types.h>
#include <sys/mman.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/work.h"

#define PAGE		4096UL
#define BLOCK		(1024UL * 1024)
#define GAP_MS		50
#define TURN_MS		2

static uint64_t		 checksum(const unsigned char *, size_t);
static void		 fill_mixed(unsigned char *, size_t);
static void		 fill_random(unsigned char *, size_t);
static void		 fill_text(unsigned char *, size_t);
static void		 fill_zero90(unsigned char *, size_t);
static int64_t		 now_ms(void);
static uint64_t		 rnd(void);
static long long	 start_time(void);
static void		 usage(void) __attribute__((__noreturn__));

/* A fixed list of common English words: text made of them compresses
 * with zstd -3 about as well as ordinary prose does. */
static const char *const words[] = {
	"the", "of", "and", "to", "in", "a", "is", "that", "for", "it",
	"as", "was", "with", "be", "by", "on", "not", "he", "this", "are",
	"or", "his", "from", "at", "which", "but", "have", "an", "had",
	"they", "you", "were", "their", "one", "all", "we", "can", "her",
	"has", "there", "been", "if", "more", "when", "will", "would",
	"who", "so", "no", "process", "memory", "checkpoint", "restore",
	"image", "stream", "kernel", "page", "file", "system", "network",
	"between", "through", "without", "against", "because", "before",
	"after", "another", "however", "number", "people", "government",
	"company", "problem", "question", "example", "different", "large",
	"small", "important", "public", "during", "several", "although",
	"country", "children", "history", "water", "market", "service",
	"family", "development", "information", "interest", "business",
	"program", "research", "result", "student", "community", "morning",
	"evening", "language", "machine", "computer", "mountain", "river",
	"village", "window", "garden", "yesterday", "tomorrow", "quickly",
	"slowly", "perhaps", "always", "never", "sometimes", "something",
	"everything", "nothing", "anything", "together", "already", "almost",
	"enough", "whether", "either", "neither", "second", "minute", "hour",
	"year", "century", "moment", "reason", "season", "weather", "winter",
	"summer", "autumn", "spring", "north", "south", "east", "west",
	"green", "yellow", "purple", "orange", "silver", "golden", "ancient",
	"modern", "simple", "complex", "careful", "certain", "possible",
	"special", "general", "natural", "national", "political", "social",
	"economic", "physical", "medical", "central", "local", "federal",
};

static uint64_t	 rstate;

static void
usage(void)
{
	fprintf(stderr, "usage: benchwork [-k mixed|zero90|random] [-m MiB] "
	    "[-r percent] [-s seed] [-w percent] [-f statusfile]\n");
	exit(2);
}

/* xorshift64*: fast, and the same bytes for the same seed. */
static uint64_t
rnd(void)
{
	rstate ^= rstate >> 12;
	rstate ^= rstate << 25;
	rstate ^= rstate >> 27;
	return rstate * 0x2545f4914f6cdd1dULL;
}

static void
fill_random(unsigned char *p, size_t len)
{
	uint64_t	x;
	size_t		i;

	for (i = 0; i + 8 <= len; i += 8) {
		x = rnd();
		memcpy(p + i, &x, 8);
	}
	for (; i < len; i++)
		p[i] = (unsigned char)rnd();
}

/* Words separated by spaces, a line break now and then. */
static void
fill_text(unsigned char *p, size_t len)
{
	const size_t	 nwords = sizeof words / sizeof words[0];
	const char	*w;
	size_t		 i = 0, n, col = 0;
	uint64_t	 x;

	while (i < len) {
		x = rnd();
		w = words[x % nwords];
		n = strlen(w);
		if (n > len - i)
			n = len - i;
		memcpy(p + i, w, n);
		i += n;
		col += n + 1;
		if (i < len) {
			if (col > 60 + (x >> 60)) {
				p[i++] = '\n';
				col = 0;
			} else
				p[i++] = ' ';
		}
	}
}

static void
fill_mixed(unsigned char *p, size_t len)
{
	size_t	off, n, turn;

	for (off = 0, turn = 0; off < len; off += n, turn++) {
		n = len - off < BLOCK ? len - off : BLOCK;
		switch (turn % 4) {
		case 0:
		case 2:
			memset(p + off, 0, n);
			break;
		case 1:
			fill_text(p + off, n);
			break;
		case 3:
			fill_random(p + off, n);
			break;
		}
	}
}

static void
fill_zero90(unsigned char *p, size_t len)
{
	size_t		off, n;
	uint64_t	x;

	for (off = 0; off < len; off += n) {
		x = rnd();
		n = (1 + (x >> 59)) * PAGE;	/* 1 to 32 pages */
		if (n > len - off)
			n = len - off;
		if (x % 10 == 0)
			fill_random(p + off, n);
		else
			memset(p + off, 0, n);
	}
}

/* Four lanes of multiply and rotate, so that 4 GiB takes a second or two. */
static uint64_t
checksum(const unsigned char *p, size_t len)
{
	uint64_t	h[4] = { 1, 2, 3, 4 }, w;
	size_t		i;
	int		j;

	for (i = 0; i + 32 <= len; i += 32) {
		for (j = 0; j < 4; j++) {
			memcpy(&w, p + i + 8 * j, 8);
			h[j] = (h[j] ^ w) * 0x9e3779b97f4a7c15ULL;
			h[j] = (h[j] << 31) | (h[j] >> 33);
		}
	}
	for (; i < len; i++)
		h[0] = (h[0] ^ p[i]) * 0x100000001b3ULL;
	return h[0] ^ (h[1] * 3) ^ (h[2] * 5) ^ (h[3] * 7);
}

static int64_t
now_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Field 22 of /proc/self/stat: when this process started, in ticks. */
static long long
start_time(void)
{
	char		 buf[1024], *p;
	long long	 v = -1;
	ssize_t		 n;
	int		 fd, i;

	if ((fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* "pid (comm) state ...": comm may hold ')' */
	if ((p = strrchr(buf, ')')) == NULL)
		return -1;
	/* fields 3 to 22 follow, each after a space */
	for (i = 3; i <= 22 && p != NULL; i++)
		p = strchr(p + 1, ' ');
	if (p != NULL)
		v = strtoll(p + 1, NULL, 10);
	return v;
}

static volatile sig_atomic_t	 want_rewrite;

#define RUN		(2UL << 20)

/* -w: the runs, each with its checksum. */
static uint64_t		*runsum;
static size_t		 nrun;

static void
fill_kind(const char *kind, unsigned char *p, size_t len)
{
	if (strcmp(kind, "mixed") == 0)
		fill_mixed(p, len);
	else if (strcmp(kind, "zero90") == 0)
		fill_zero90(p, len);
	else
		fill_random(p, len);
}

/* -w: the checksum of the run checksums. */
static uint64_t
runs_sum(void)
{
	return checksum((const unsigned char *)runsum, nrun * sizeof *runsum);
}

/* -w: whether every run holds what its checksum says. */
static int
runs_ok(const unsigned char *mem)
{
	size_t	j;

	for (j = 0; j < nrun; j++)
		if (checksum(mem + j * RUN, RUN) != runsum[j])
			return 0;
	return 1;
}

static void
on_usr2(int sig)
{
	(void)sig;
	want_rewrite = 1;
}

/* Rewrites pct percent of mem (len bytes) in aligned runs of 2 MiB. */
static size_t
rewrite(const char *kind, unsigned char *mem, size_t len, unsigned pct)
{
	const uintptr_t	 run = 2u << 20;
	uintptr_t	 start = (uintptr_t)mem, end = start + len, at;
	size_t		 nruns, i, stride, done = 0;

	nruns = len / 100 * pct / run;
	if (nruns == 0)
		nruns = 1;
	stride = len / nruns;
	for (i = 0; i < nruns; i++) {
		at = (start + i * stride + run - 1) & ~(run - 1);
		if (at + run > end)
			break;
		fill_kind(kind, (unsigned char *)at, run);
		done += run;
	}
	return done;
}

int
main(int argc, char *argv[])
{
	struct timespec		 turn = { 0, TURN_MS * 1000000L };
	const char		*kind = "mixed";
	unsigned long		 mib = 256;
	unsigned long long	 seed = 1;
	unsigned char		*mem;
	uint64_t		 sum, now;
	int64_t			 t0, prev, t;
	long long		 started;
	size_t			 len, n;
	char			*ep;
	unsigned		 rpct = 5, wpct = 0;
	double			 due = 0;
	size_t			 j;
	int			 ch;

	work_statusfile = "benchwork.status";
	while ((ch = getopt(argc, argv, "f:k:m:r:s:w:")) != -1) {
		switch (ch) {
		case 'f':
			work_statusfile = optarg;
			break;
		case 'k':
			kind = optarg;
			break;
		case 'm':
			errno = 0;
			mib = strtoul(optarg, &ep, 10);
			if (errno || *ep != '\0' || mib == 0 || mib > 1048576)
				usage();
			break;
		case 'r':
			errno = 0;
			rpct = (unsigned)strtoul(optarg, &ep, 10);
			if (errno || *ep != '\0' || rpct == 0 || rpct > 100)
				usage();
			break;
		case 'w':
			errno = 0;
			wpct = (unsigned)strtoul(optarg, &ep, 10);
			if (errno || *ep != '\0' || wpct > 100)
				usage();
			break;
		case 's':
			errno = 0;
			seed = strtoull(optarg, &ep, 10);
			if (errno || *ep != '\0')
				usage();
			break;
		default:
			usage();
		}
	}
	if (optind != argc)
		usage();
	if (strcmp(kind, "mixed") != 0 && strcmp(kind, "zero90") != 0 &&
	    strcmp(kind, "random") != 0)
		usage();

	work_close_inherited();
	work_signals(0);
	signal(SIGUSR2, on_usr2);

	/* aligned to 2 MiB in the address space, as the runs are */
	len = (size_t)mib * 1024 * 1024;
	mem = mmap(NULL, len + RUN, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem != MAP_FAILED)
		mem = (unsigned char *)(((uintptr_t)mem + RUN - 1) &
		    ~(uintptr_t)(RUN - 1));
	if (mem == MAP_FAILED) {
		work_status("error cannot map %lu MiB: %s", mib,
		    strerror(errno));
		return 1;
	}
	rstate = seed * 0x9e3779b97f4a7c15ULL + 0x2545f4914f6cdd1dULL;
	if (rstate == 0)
		rstate = 1;
	t0 = now_ms();
	if (strcmp(kind, "mixed") == 0)
		fill_mixed(mem, len);
	else if (strcmp(kind, "zero90") == 0)
		fill_zero90(mem, len);
	else
		fill_random(mem, len);
	sum = checksum(mem, len);
	if (wpct > 0) {
		nrun = len / RUN;
		if (nrun == 0 || len % RUN != 0 ||
		    (runsum = calloc(nrun, sizeof *runsum)) == NULL) {
			work_status("error -w needs a multiple of 2 MiB");
			return 1;
		}
		for (j = 0; j < nrun; j++)
			runsum[j] = checksum(mem + j * RUN, RUN);
		sum = runs_sum();
	}
	started = start_time();

	if (wpct > 0)
		work_status("ready pid=%ld kind=%s mib=%lu sum=%016" PRIx64
		    " fill_ms=%lld rewriting=%u", (long)getpid(), kind, mib,
		    sum, (long long)(now_ms() - t0), wpct);
	else
		work_status("ready pid=%ld kind=%s mib=%lu sum=%016" PRIx64
		    " fill_ms=%lld", (long)getpid(), kind, mib, sum,
		    (long long)(now_ms() - t0));
	prev = now_ms();
	for (;;) {
		nanosleep(&turn, NULL);	/* a signal may cut it short */
		t = now_ms();
		if (t - prev > GAP_MS)
			work_status("gap %lld restored=%d",
			    (long long)(t - prev), start_time() != started);
		/* -w: the runs due in the time that went by */
		if (wpct > 0 && t > prev && t - prev <= GAP_MS) {
			due += (double)nrun * wpct / 100.0 * (double)(t - prev) /
			    1000.0;
			while (due >= 1.0) {
				due -= 1.0;
				j = (size_t)(rnd() % nrun);
				fill_kind(kind, mem + j * RUN, RUN);
				runsum[j] = checksum(mem + j * RUN, RUN);
			}
			sum = runs_sum();
		}
		prev = t;
		if (want_rewrite) {
			want_rewrite = 0;
			n = rewrite(kind, mem, len, rpct);
			sum = checksum(mem, len);
			work_status("rewrote sum=%016" PRIx64 " bytes=%zu", sum,
			    n);
			prev = now_ms();
		}
		if (work_want_verify) {
			work_want_verify = 0;
			if (wpct > 0)
				now = runs_ok(mem) ? runs_sum() : 0;
			else
				now = checksum(mem, len);
			if (now == sum)
				work_status("verify ok sum=%016" PRIx64, now);
			else
				work_status("verify FAIL sum=%016" PRIx64
				    " expected=%016" PRIx64, now, sum);
			/* the check itself is not downtime */
			prev = now_ms();
		}
	}
}
