/*
 * benchwork -- a workload for the benchmark: a process with a known
 * amount of memory of a known kind, which measures its own downtime.
 *
 * usage: benchwork [-k kind] [-m MiB] [-p pattern] [-r percent] [-s seed]
 *		   [-w percent] [-f statusfile]
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
 * same kind, pattern and size hold the same bytes.  Once filled it
 * appends
 *	ready pid=PID kind=KIND mib=N sum=HEX fill_ms=N pattern=NAME
 * to STATUSFILE (default "benchwork.status") and loops, every 2 ms
 * reading CLOCK_REALTIME.  When more than 50 ms passed since the last
 * turn it appends
 *	gap MS restored=0|1
 * where restored=1 says that the process is no longer the one that was
 * started (its start time in /proc/self/stat changed, as it does when
 * CRIU restores it): the largest such gap is the time it did not run.
 * On SIGUSR1 it checks the checksum of its memory and appends
 * "verify ok sum=HEX" or "verify FAIL ...".  On SIGUSR2 it rewrites 5%
 * of its memory (-r PERCENT) with new content of its kind and appends
 * "rewrote sum=HEX bytes=N".  With -w it keeps rewriting that percent
 * of its memory a second, as time goes, and its "ready" line has
 * rewriting=PERCENT before the pattern.
 *
 * The pattern (-p) says how it writes, and rewrites:
 *
 *	runs	(the default) 2 MiB runs aligned to 2 MiB: -r spreads them
 *		over the memory, -w picks them at random
 *	pages	single 4 KiB pages picked at random, one here, one there,
 *		each given new bytes of the kind its 1 MiB block has (for
 *		zero90 and random, random bytes); only pages that hold
 *		data are picked (of mixed, those of the text and random
 *		blocks; of zero90, those not zero), so that every rewrite
 *		changes the page, and zero pages stay zero
 *	heap	the memory is not one mapping but objects of 16 to 4096
 *		bytes (sizes from the PRNG) taken one by one from
 *		malloc(3), MiB of them, each of one kind: of mixed, a
 *		quarter of them random, a quarter text and half zeros; of
 *		zero90, one in ten random, the rest zeros; of random, all
 *		random.  A rewrite gives objects picked at random, those
 *		that are not zeros, new content of their kind, until the
 *		percent of the memory's bytes is written
 *
 * -r picks each page or object once at most, and with pages and heap
 * rewrites that percent of the bytes that hold data (of mixed, of half
 * its memory), which is what an image holds; -w's percent is always of
 * the whole memory.  With pages and heap, and
 * with -w, it keeps a checksum of each run, page or object as it writes
 * it; a check compares each with its own and answers with the checksum
 * of those, which is also the sum of the "ready" and "rewrote" lines.
 * Otherwise the sum is that of the whole memory.  The status file is
 * opened for each line and written with one write(2), so no descriptor
 * stays open across a checkpoint.  Descriptors above 2 are closed first.
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
static void		 fill_as(int, unsigned char *, size_t);
static void		 fill_kind(unsigned char *, size_t);
static void		 fill_mixed(unsigned char *, size_t);
static void		 fill_random(unsigned char *, size_t);
static void		 fill_text(unsigned char *, size_t);
static void		 fill_zero90(unsigned char *, size_t);
static int		 heap_fill(void);
static int		 is_zero_page(const unsigned char *);
static int64_t		 now_ms(void);
static void		 on_usr2(int);
static int		 page_fill(size_t);
static size_t		 rewrite_runs(unsigned);
static size_t		 rewrite_units(unsigned);
static uint64_t		 rnd(void);
static long long	 start_time(void);
static size_t		 unit_len(size_t);
static int		 unit_live(size_t);
static size_t		 unit_pick(void);
static unsigned char	*unit_ptr(size_t);
static void		 unit_rewrite(size_t);
static int		 units_ok(void);
static uint64_t		 units_sum(void);
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
	    "[-p runs|pages|heap] [-r percent] [-s seed] [-w percent] "
	    "[-f statusfile]\n");
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
#define OBJ_MIN		16
#define OBJ_MAX		4096

/* How it writes (-p). */
enum { P_RUNS, P_PAGES, P_HEAP };
static const char *const patterns[] = { "runs", "pages", "heap" };

/* What a page or an object holds. */
enum { F_ZERO, F_TEXT, F_RANDOM };

/* -p heap: an object and the kind of bytes it holds. */
struct obj {
	unsigned char	*p;
	uint32_t	 len;
	uint32_t	 fill;
};

static const char	*kind = "mixed";
static int		 pattern = P_RUNS;
static unsigned char	*mem;		/* runs and pages: the mapping */
static size_t		 len;		/* bytes of memory, in all */
static struct obj	*objs;		/* heap: the objects */
static unsigned char	*livemap;	/* pages: a bit a page, set on data */

/*
 * The units a checksum each is kept of (with pages and heap, and with
 * -w): runs of 2 MiB, pages or objects.  nlive of them hold data.
 */
static uint64_t		*usum;
static size_t		 nunit, nlive;

static void
on_usr2(int sig)
{
	(void)sig;
	want_rewrite = 1;
}

static void
fill_kind(unsigned char *p, size_t n)
{
	if (strcmp(kind, "mixed") == 0)
		fill_mixed(p, n);
	else if (strcmp(kind, "zero90") == 0)
		fill_zero90(p, n);
	else
		fill_random(p, n);
}

static void
fill_as(int fill, unsigned char *p, size_t n)
{
	switch (fill) {
	case F_ZERO:
		memset(p, 0, n);
		break;
	case F_TEXT:
		fill_text(p, n);
		break;
	default:
		fill_random(p, n);
		break;
	}
}

static int
is_zero_page(const unsigned char *p)
{
	static const unsigned char	zero[PAGE];

	return memcmp(p, zero, PAGE) == 0;
}

/* Where unit i begins. */
static unsigned char *
unit_ptr(size_t i)
{
	switch (pattern) {
	case P_PAGES:
		return mem + i * PAGE;
	case P_HEAP:
		return objs[i].p;
	default:
		return mem + i * RUN;
	}
}

static size_t
unit_len(size_t i)
{
	switch (pattern) {
	case P_PAGES:
		return PAGE;
	case P_HEAP:
		return objs[i].len;
	default:
		return RUN;
	}
}

/* pages: the kind of bytes page i holds, that of its 1 MiB block. */
static int
page_fill(size_t i)
{
	size_t	turn = i * PAGE / BLOCK % 4;

	if (strcmp(kind, "mixed") != 0)
		return F_RANDOM;
	if (turn == 1)
		return F_TEXT;
	return turn == 3 ? F_RANDOM : F_ZERO;
}

/* Whether a rewrite may pick unit i: runs always, else one with data. */
static int
unit_live(size_t i)
{
	switch (pattern) {
	case P_PAGES:
		return (livemap[i / 8] >> i % 8) & 1;
	case P_HEAP:
		return objs[i].fill != F_ZERO;
	default:
		return 1;
	}
}

/* Gives unit i new content of its kind, and keeps its checksum. */
static void
unit_rewrite(size_t i)
{
	switch (pattern) {
	case P_PAGES:
		fill_as(page_fill(i), mem + i * PAGE, PAGE);
		break;
	case P_HEAP:
		fill_as(objs[i].fill, objs[i].p, objs[i].len);
		break;
	default:
		fill_kind(mem + i * RUN, RUN);
		break;
	}
	usum[i] = checksum(unit_ptr(i), unit_len(i));
}

/* A unit a rewrite may pick, at random; there must be one. */
static size_t
unit_pick(void)
{
	size_t	i;

	do
		i = (size_t)(rnd() % nunit);
	while (!unit_live(i));
	return i;
}

/* The checksum of the units' checksums. */
static uint64_t
units_sum(void)
{
	return checksum((const unsigned char *)usum, nunit * sizeof *usum);
}

/* Whether every unit holds what its checksum says. */
static int
units_ok(void)
{
	size_t	i;

	for (i = 0; i < nunit; i++)
		if (checksum(unit_ptr(i), unit_len(i)) != usum[i])
			return 0;
	return 1;
}

/*
 * heap: takes objects of OBJ_MIN to OBJ_MAX bytes from malloc() until
 * they hold len bytes, each filled with bytes of one kind.  Returns -1
 * when memory ran out.
 */
static int
heap_fill(void)
{
	struct obj	*o;
	size_t		 cap = 0, total = 0, n;
	uint64_t	 x;
	int		 fill;

	while (total < len) {
		if (nunit == cap) {
			cap = cap == 0 ? 65536 : cap * 2;
			if ((o = realloc(objs, cap * sizeof *objs)) == NULL)
				return -1;
			objs = o;
		}
		x = rnd();
		n = OBJ_MIN + x % (OBJ_MAX - OBJ_MIN + 1);
		if (n > len - total)
			n = len - total;
		x >>= 32;
		if (strcmp(kind, "mixed") == 0)
			fill = x % 4 == 0 ? F_RANDOM : x % 4 == 1 ? F_TEXT :
			    F_ZERO;
		else if (strcmp(kind, "zero90") == 0)
			fill = x % 10 == 0 ? F_RANDOM : F_ZERO;
		else
			fill = F_RANDOM;
		o = &objs[nunit];
		if ((o->p = malloc(n)) == NULL)
			return -1;
		o->len = (uint32_t)n;
		o->fill = (uint32_t)fill;
		fill_as(fill, o->p, n);
		total += n;
		nunit++;
	}
	return 0;
}

/* runs: rewrites pct percent of the memory in aligned runs of 2 MiB. */
static size_t
rewrite_runs(unsigned pct)
{
	uintptr_t	 start = (uintptr_t)mem, end = start + len, at;
	size_t		 nruns, i, stride, done = 0;

	nruns = len / 100 * pct / RUN;
	if (nruns == 0)
		nruns = 1;
	stride = len / nruns;
	for (i = 0; i < nruns; i++) {
		at = (start + i * stride + RUN - 1) & ~(RUN - 1);
		if (at + RUN > end)
			break;
		if (usum != NULL)
			unit_rewrite((at - start) / RUN);
		else
			fill_kind((unsigned char *)at, RUN);
		done += RUN;
	}
	return done;
}

/*
 * pages and heap: rewrites units picked at random, each once at most,
 * until pct percent of the bytes of the units with data (what an image
 * holds) are written, or every one of them was.
 */
static size_t
rewrite_units(unsigned pct)
{
	unsigned char	*seen;
	size_t		 want = 0, done = 0, n = 0, i;

	for (i = 0; i < nunit; i++)
		if (unit_live(i))
			want += unit_len(i);
	want = want / 100 * pct;
	if (nlive == 0 || (seen = calloc(nunit / 8 + 1, 1)) == NULL)
		return 0;
	do {
		i = unit_pick();
		if (seen[i / 8] & (1u << i % 8))
			continue;
		seen[i / 8] |= 1u << i % 8;
		unit_rewrite(i);
		done += unit_len(i);
		n++;
	} while (done < want && n < nlive);
	free(seen);
	return done;
}

int
main(int argc, char *argv[])
{
	struct timespec		 turn = { 0, TURN_MS * 1000000L };
	unsigned long		 mib = 256;
	unsigned long long	 seed = 1;
	uint64_t		 sum, now;
	int64_t			 t0, prev, t;
	long long		 started;
	size_t			 n, i;
	char			*ep;
	unsigned		 rpct = 5, wpct = 0;
	double			 due = 0;
	int			 ch;

	work_statusfile = "benchwork.status";
	while ((ch = getopt(argc, argv, "f:k:m:p:r:s:w:")) != -1) {
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
		case 'p':
			for (pattern = 0; pattern < 3; pattern++)
				if (strcmp(optarg, patterns[pattern]) == 0)
					break;
			if (pattern == 3)
				usage();
			break;
		case 'r':
			errno = 0;
			rpct = (unsigned)strtoul(optarg, &ep, 10);
			if (errno || *ep != '\0' || rpct == 0 || rpct > 100)
				usage();
			break;
		case 's':
			errno = 0;
			seed = strtoull(optarg, &ep, 10);
			if (errno || *ep != '\0')
				usage();
			break;
		case 'w':
			errno = 0;
			wpct = (unsigned)strtoul(optarg, &ep, 10);
			if (errno || *ep != '\0' || wpct > 100)
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

	len = (size_t)mib * 1024 * 1024;
	rstate = seed * 0x9e3779b97f4a7c15ULL + 0x2545f4914f6cdd1dULL;
	if (rstate == 0)
		rstate = 1;
	t0 = now_ms();
	if (pattern == P_HEAP) {
		if (heap_fill() == -1) {
			work_status("error cannot allocate %lu MiB of objects",
			    mib);
			return 1;
		}
	} else {
		/* aligned to 2 MiB in the address space, as the runs are */
		mem = mmap(NULL, len + RUN, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (mem == MAP_FAILED) {
			work_status("error cannot map %lu MiB: %s", mib,
			    strerror(errno));
			return 1;
		}
		mem = (unsigned char *)(((uintptr_t)mem + RUN - 1) &
		    ~(uintptr_t)(RUN - 1));
		fill_kind(mem, len);
		if (pattern == P_PAGES) {
			nunit = len / PAGE;
			if ((livemap = calloc(nunit / 8 + 1, 1)) == NULL) {
				work_status("error cannot allocate the map of "
				    "pages");
				return 1;
			}
			/* the pages with data, as filled: rewrites keep them */
			for (i = 0; i < nunit; i++)
				if (page_fill(i) != F_ZERO &&
				    !is_zero_page(mem + i * PAGE))
					livemap[i / 8] |= 1u << i % 8;
		} else if (wpct > 0) {
			nunit = len / RUN;
			if (nunit == 0 || len % RUN != 0) {
				work_status("error -w needs a multiple of 2 MiB");
				return 1;
			}
		}
	}
	if (nunit > 0) {
		if ((usum = calloc(nunit, sizeof *usum)) == NULL) {
			work_status("error cannot allocate the checksums");
			return 1;
		}
		for (i = 0; i < nunit; i++) {
			usum[i] = checksum(unit_ptr(i), unit_len(i));
			if (unit_live(i))
				nlive++;
		}
		sum = units_sum();
	} else
		sum = checksum(mem, len);
	started = start_time();

	if (wpct > 0)
		work_status("ready pid=%ld kind=%s mib=%lu sum=%016" PRIx64
		    " fill_ms=%lld rewriting=%u pattern=%s", (long)getpid(),
		    kind, mib, sum, (long long)(now_ms() - t0), wpct,
		    patterns[pattern]);
	else
		work_status("ready pid=%ld kind=%s mib=%lu sum=%016" PRIx64
		    " fill_ms=%lld pattern=%s", (long)getpid(), kind, mib, sum,
		    (long long)(now_ms() - t0), patterns[pattern]);
	prev = now_ms();
	for (;;) {
		nanosleep(&turn, NULL);	/* a signal may cut it short */
		t = now_ms();
		if (t - prev > GAP_MS)
			work_status("gap %lld restored=%d",
			    (long long)(t - prev), start_time() != started);
		/* -w: the bytes due in the time that went by */
		if (wpct > 0 && nlive > 0 && t > prev && t - prev <= GAP_MS) {
			due += (double)len * wpct / 100.0 * (double)(t - prev) /
			    1000.0;
			while (due > 0) {
				i = unit_pick();
				unit_rewrite(i);
				due -= (double)unit_len(i);
			}
		}
		prev = t;
		if (want_rewrite) {
			want_rewrite = 0;
			if (pattern == P_RUNS)
				n = rewrite_runs(rpct);
			else
				n = rewrite_units(rpct);
			sum = usum != NULL ? units_sum() : checksum(mem, len);
			work_status("rewrote sum=%016" PRIx64 " bytes=%zu", sum,
			    n);
			prev = now_ms();
		}
		if (work_want_verify) {
			work_want_verify = 0;
			/* -w: what the units hold now is what counts */
			if (wpct > 0)
				sum = units_sum();
			if (usum != NULL)
				now = units_ok() ? units_sum() : 0;
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
