/*
 * ncclwork -- the ranks of an NCCL job, whose collectives can be checked
 * across a lock, a checkpoint and a restore.
 *
 * usage: ncclwork [-n nranks] [-N total -R base -u idfile] [-D rank]
 *	  [-d ms] [-s ms] [-c K [-h ms]] -f statusfile
 *
 * The root, rank 0, takes a unique ID (ncclGetUniqueId()) and forks
 * nranks - 1 children (default 2 ranks in all), ranks 1 and on, before
 * it touches CUDA; each has the ID in its copy of the root's memory.
 * Then each rank loads libcuda.so.1, takes device rank % the number of
 * devices in its primary context, joins the communicator
 * (ncclCommInitRank()), allocates COUNT 64-bit words of device memory
 * and loops: at step K (from 1) it writes (rank + 1) * (K + i) into word
 * i, sums the words of all ranks in place (ncclAllReduce(), ncclInt64,
 * ncclSum) and checks that word i holds (K + i) * nranks * (nranks +
 * 1) / 2, then sleeps -s ms (default 20).  Rank -D (default 1) sleeps
 * -d ms (default 0) before each step, so that the others wait for it
 * inside the collective.  With -c every rank calls
 * ncclCheckpointPrepare() after every K steps, appends
 *	prepared rank=R pid=PID step=K
 * sleeps -h ms (default 0), calls ncclCheckpointRestore() and appends
 *	restored rank=R pid=PID step=K
 * (the sleeps of -d and -h run their full length whatever signal comes,
 * so that a test knows how long a rank stays there).
 * With -N the job has total ranks, of which this tree holds nranks,
 * ranks base and on (-R): one tree a host, as the ranks of a job across
 * hosts are; the tree of rank 0 takes the unique ID and writes it into
 * idfile (a temporary file renamed), the others read it from there,
 * waiting for it, and the sums are the job's.  The step last checked is
 * kept in the process's memory.  Once every
 * rank has checked step 1 (each child says so to the root over its
 * pipe) the root appends
 *	ready pid=PID ranks=PID,PID,... nranks=N nccl=VERSION
 * (ranks: the PIDs of the ranks, the root's first; VERSION: what
 * ncclGetVersion() gives).  On SIGUSR1 the root asks every child, over
 * the pipes, which step it has checked last, and appends
 *	verify ok step=K ranks=N
 * (K: the root's step) when every child has answered and is within one
 * step of it (each answers from a thread of its own, since it may be
 * waiting for the root inside a collective), or "verify FAIL rank R pid
 * PID: what".  A wrong sum makes its rank append "error rank R pid PID:
 * step K sum S want W" and exit 1; any other failure "error rank R pid
 * PID: what", and exit 1.  Only the root heeds SIGUSR1, between steps;
 * the children ignore it.  A child whose root is gone exits.
 *
 * The NCCL functions are found with dlsym(RTLD_DEFAULT) once
 * libnccl.so.2 is loaded RTLD_GLOBAL, so that a library preloaded to
 * interpose them by name (NCCL's checkpoint shim) is the one called;
 * ncclCheckpointPrepare() and ncclCheckpointRestore() are looked for only
 * with -c.  The status file is opened for each line and written with one
 * write(2).  Descriptors other than 0, 1 and 2 that it inherits are
 * closed first (but a job file of its own, gpuckpt --launch); the root
 * and the children talk over pipes made before the fork.
 */

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <sys/types.h>

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>
/* nccl.h declares a few functions without a prototype. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop

#include "common/work.h"

#define MAXRANKS	64
#define COUNT		4
#define LINELEN		4096
#define ANSWER_MS	10000
#define READY_MS	60000

struct cuda {
	CUresult	(*Init)(unsigned int);
	CUresult	(*DeviceGetCount)(int *);
	CUresult	(*DeviceGet)(CUdevice *, int);
	CUresult	(*PrimaryCtxRetain)(CUcontext *, CUdevice);
	CUresult	(*CtxSetCurrent)(CUcontext);
	CUresult	(*MemAlloc)(CUdeviceptr *, size_t);
	CUresult	(*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
	CUresult	(*MemcpyDtoH)(void *, CUdeviceptr, size_t);
	CUresult	(*GetErrorName)(CUresult, const char **);
};

struct nccl {
	ncclResult_t	(*GetVersion)(int *);
	ncclResult_t	(*GetUniqueId)(ncclUniqueId *);
	ncclResult_t	(*CommInitRank)(ncclComm_t *, int, ncclUniqueId, int);
	ncclResult_t	(*AllReduce)(const void *, void *, size_t,
			    ncclDataType_t, ncclRedOp_t, ncclComm_t,
			    cudaStream_t);
	const char	*(*GetErrorString)(ncclResult_t);
	const char	*(*GetLastError)(ncclComm_t);
	ncclResult_t	(*Prepare)(void);
	ncclResult_t	(*Restore)(void);
};

static _Noreturn void	 usage(void);
static _Noreturn void	 die(const char *, ...)
			    __attribute__((__format__(__printf__, 1, 2)));
static const char	*cuname(CUresult);
static void		 nccl_die(const char *, ncclResult_t);
static int		 cuda_load(void);
static int		 nccl_load(void);
static void		 rank_start(void);
static void		 id_read(void);
static void		 id_write(void);
static void		 hold(unsigned long);
static void		 step(unsigned long);
static void		*answer(void *);
static _Noreturn void	 child_main(int, int);
static void		 verify(void);
static unsigned long	 number(const char *, unsigned long);

static struct cuda		 cu;
static struct nccl		 nc;
static char			 loaderr[256];
static ncclUniqueId		 id;
static ncclComm_t		 comm;
static CUdeviceptr		 dbuf;
static int			 rank, nranks = 2;
static int			 total, base;	/* -N, -R */
static const char		*idfile;	/* -u */
static unsigned long		 delay_ms, sleep_ms = 20, every, hold_ms;
static int			 delayed = 1;	/* -D: the rank -d delays */
static atomic_ulong		 laststep;	/* the step last checked */
static int			 tochild[MAXRANKS], fromchild[MAXRANKS];
static pid_t			 kids[MAXRANKS];
static int			 child_in, child_out;
static unsigned long		 vseq;

static _Noreturn void
usage(void)
{
	fprintf(stderr, "usage: ncclwork [-n nranks] [-N total -R base "
	    "-u idfile] [-D rank]\n"
	    "\t[-d ms] [-s ms] [-c K [-h ms]] -f statusfile\n");
	exit(2);
}

/* "error rank R pid PID: what", and exit 1. */
static _Noreturn void
die(const char *fmt, ...)
{
	char	buf[LINELEN];
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	work_status("error rank %d pid %ld: %s", rank, (long)getpid(), buf);
	exit(1);
}

static const char *
cuname(CUresult r)
{
	const char	*s = NULL;

	if (cu.GetErrorName == NULL || cu.GetErrorName(r, &s) != CUDA_SUCCESS ||
	    s == NULL)
		return "unknown CUresult";
	return s;
}

static void
nccl_die(const char *what, ncclResult_t r)
{
	const char	*last = nc.GetLastError(NULL);

	die("%s: %s%s%s%s", what, nc.GetErrorString(r),
	    last != NULL && *last != '\0' ? " (" : "",
	    last != NULL ? last : "", last != NULL && *last != '\0' ? ")" :
	    "");
}

static int
cuda_load(void)
{
	static const struct {
		const char	*name;
		size_t		 off;
	} syms[] = {
#define SYM(n, f)	{ n, offsetof(struct cuda, f) }
		SYM("cuInit", Init),
		SYM("cuDeviceGetCount", DeviceGetCount),
		SYM("cuDeviceGet", DeviceGet),
		SYM("cuDevicePrimaryCtxRetain", PrimaryCtxRetain),
		SYM("cuCtxSetCurrent", CtxSetCurrent),
		SYM("cuMemAlloc_v2", MemAlloc),
		SYM("cuMemcpyHtoD_v2", MemcpyHtoD),
		SYM("cuMemcpyDtoH_v2", MemcpyDtoH),
		SYM("cuGetErrorName", GetErrorName),
#undef SYM
	};
	size_t	 i;
	void	*h, *fn;

	if ((h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) == NULL) {
		snprintf(loaderr, sizeof loaderr, "cannot load libcuda.so.1: "
		    "%s", dlerror());
		return -1;
	}
	for (i = 0; i < sizeof syms / sizeof syms[0]; i++) {
		if ((fn = dlsym(h, syms[i].name)) == NULL) {
			snprintf(loaderr, sizeof loaderr, "libcuda.so.1 lacks "
			    "%s", syms[i].name);
			return -1;
		}
		*(void **)((char *)&cu + syms[i].off) = fn;
	}
	return 0;
}

/* Every name through RTLD_DEFAULT: an interposer preloaded comes first. */
static int
nccl_load(void)
{
	static const struct {
		const char	*name;
		size_t		 off;
		int		 ckpt;	/* looked for with -c only */
	} syms[] = {
#define SYM(n, f, c)	{ n, offsetof(struct nccl, f), c }
		SYM("ncclGetVersion", GetVersion, 0),
		SYM("ncclGetUniqueId", GetUniqueId, 0),
		SYM("ncclCommInitRank", CommInitRank, 0),
		SYM("ncclAllReduce", AllReduce, 0),
		SYM("ncclGetErrorString", GetErrorString, 0),
		SYM("ncclGetLastError", GetLastError, 0),
		SYM("ncclCheckpointPrepare", Prepare, 1),
		SYM("ncclCheckpointRestore", Restore, 1),
#undef SYM
	};
	size_t	 i;
	void	*fn;

	if (dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL) == NULL) {
		snprintf(loaderr, sizeof loaderr, "cannot load libnccl.so.2: "
		    "%s", dlerror());
		return -1;
	}
	for (i = 0; i < sizeof syms / sizeof syms[0]; i++) {
		if (syms[i].ckpt && every == 0)
			continue;
		if ((fn = dlsym(RTLD_DEFAULT, syms[i].name)) == NULL) {
			snprintf(loaderr, sizeof loaderr, "no %s",
			    syms[i].name);
			return -1;
		}
		*(void **)((char *)&nc + syms[i].off) = fn;
	}
	return 0;
}

/* CUDA, a device, the communicator and the device words. */
/* -u: the unique ID, rank 0's tree writing it, the others waiting. */
static void
id_write(void)
{
	char	tmp[4096];
	FILE	*f;

	snprintf(tmp, sizeof tmp, "%s.tmp", idfile);
	if ((f = fopen(tmp, "w")) == NULL ||
	    fwrite(&id, sizeof id, 1, f) != 1 || fclose(f) != 0 ||
	    rename(tmp, idfile) == -1)
		die("%s: %s", idfile, strerror(errno));
}

static void
id_read(void)
{
	FILE	*f;
	int	 i;

	for (i = 0; (f = fopen(idfile, "r")) == NULL; i++) {
		if (i == 600)
			die("%s: %s", idfile, strerror(errno));
		work_msleep(100);
	}
	if (fread(&id, sizeof id, 1, f) != 1)
		die("%s: short", idfile);
	fclose(f);
}

static void
rank_start(void)
{
	CUcontext	ctx;
	CUdevice	dev;
	CUresult	r;
	ncclResult_t	nr;
	int		ndev, ord;

	if (cuda_load() == -1)
		die("%s", loaderr);
	if ((r = cu.Init(0)) != CUDA_SUCCESS)
		die("cuInit: %s", cuname(r));
	if ((r = cu.DeviceGetCount(&ndev)) != CUDA_SUCCESS || ndev < 1)
		die("cuDeviceGetCount: %s", r != CUDA_SUCCESS ? cuname(r) :
		    "no device");
	ord = rank % ndev;
	if ((r = cu.DeviceGet(&dev, ord)) != CUDA_SUCCESS)
		die("cuDeviceGet %d: %s", ord, cuname(r));
	if ((r = cu.PrimaryCtxRetain(&ctx, dev)) != CUDA_SUCCESS ||
	    (r = cu.CtxSetCurrent(ctx)) != CUDA_SUCCESS)
		die("context on device %d: %s", ord, cuname(r));
	if ((nr = nc.CommInitRank(&comm, total, id, rank)) != ncclSuccess)
		nccl_die("ncclCommInitRank", nr);
	if ((r = cu.MemAlloc(&dbuf, COUNT * sizeof(int64_t))) != CUDA_SUCCESS)
		die("cuMemAlloc: %s", cuname(r));
}

/* Sleeps ms whatever signals come meanwhile (a verify, say). */
static void
hold(unsigned long ms)
{
	struct timespec	ts;

	if (ms == 0)
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) ==
	    EINTR)
		;
}

/* Step k: the sum of every rank's words, checked; then -c's turn. */
static void
step(unsigned long k)
{
	int64_t		v[COUNT], want;
	ncclResult_t	nr;
	CUresult	r;
	int		i;

	if (rank == delayed)
		hold(delay_ms);
	for (i = 0; i < COUNT; i++)
		v[i] = (int64_t)(rank + 1) * (int64_t)(k + (unsigned long)i);
	if ((r = cu.MemcpyHtoD(dbuf, v, sizeof v)) != CUDA_SUCCESS)
		die("step %lu: cuMemcpyHtoD: %s", k, cuname(r));
	if ((nr = nc.AllReduce((const void *)(uintptr_t)dbuf,
	    (void *)(uintptr_t)dbuf, COUNT, ncclInt64, ncclSum, comm,
	    NULL)) != ncclSuccess)
		nccl_die("ncclAllReduce", nr);
	if ((r = cu.MemcpyDtoH(v, dbuf, sizeof v)) != CUDA_SUCCESS)
		die("step %lu: cuMemcpyDtoH: %s", k, cuname(r));
	for (i = 0; i < COUNT; i++) {
		want = (int64_t)(k + (unsigned long)i) * total *
		    (total + 1) / 2;
		if (v[i] != want) {
			work_status("error rank %d pid %ld: step %lu sum %"
			    PRId64 " want %" PRId64, rank, (long)getpid(), k,
			    v[i], want);
			exit(1);
		}
	}
	atomic_store(&laststep, k);
	if (every == 0 || k % every != 0)
		return;
	if ((nr = nc.Prepare()) != ncclSuccess)
		nccl_die("ncclCheckpointPrepare", nr);
	work_status("prepared rank=%d pid=%ld step=%lu", rank, (long)getpid(),
	    k);
	hold(hold_ms);
	if ((nr = nc.Restore()) != ncclSuccess)
		nccl_die("ncclCheckpointRestore", nr);
	work_status("restored rank=%d pid=%ld step=%lu", rank, (long)getpid(),
	    k);
}

/* One line, one write(2). */
/*
 * A child's thread: answers each request "SEQ" with "SEQ ok step=K";
 * its main thread may be inside a collective meanwhile.  The root gone,
 * the child goes too.
 */
static void *
answer(void *arg)
{
	char	req[64], line[LINELEN];

	for (;;) {
		if (work_get_line(child_in, req, sizeof req, -1) == -1)
			_exit(0);
		snprintf(line, sizeof line, "%s ok step=%lu", req,
		    atomic_load(&laststep));
		if (work_put_line(child_out, line) == -1)
			_exit(0);
	}
	return NULL;
}

/* A child: says "ready RANK PID" once step 1 is checked, then steps. */
static _Noreturn void
child_main(int in, int out)
{
	pthread_t	th;
	sigset_t	all, old;
	char		line[LINELEN];
	unsigned long	k;
	int		e;

	child_in = in;
	child_out = out;
	rank_start();
	step(1);
	snprintf(line, sizeof line, "ready %d %ld", rank, (long)getpid());
	if (work_put_line(out, line) == -1)
		_exit(1);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	e = pthread_create(&th, NULL, answer, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (e != 0)
		die("pthread_create: %s", strerror(e));
	pthread_detach(th);
	for (k = 2; ; k++) {
		work_msleep((long)sleep_ms);
		step(k);
	}
}

/* The root asks every child, and writes the verdict. */
static void
verify(void)
{
	char		 line[LINELEN], seq[32], *p, *e;
	unsigned long	 mine = atomic_load(&laststep), theirs;
	size_t		 n;
	int		 i;

	vseq++;
	snprintf(seq, sizeof seq, "%lu", vseq);
	n = strlen(seq);
	for (i = 1; i < nranks; i++)
		work_put_line(tochild[i], seq);
	for (i = 1; i < nranks; i++) {
		do {
			if (work_get_line(fromchild[i], line, sizeof line,
			    ANSWER_MS) == -1) {
				work_status("verify FAIL rank %d pid %ld: no "
				    "answer", i, (long)kids[i]);
				return;
			}
		} while (strncmp(line, seq, n) != 0 || line[n] != ' ');
		p = line + n + 1;
		if (strncmp(p, "ok step=", 8) != 0) {
			work_status("verify FAIL rank %d pid %ld: %s", i,
			    (long)kids[i], p);
			return;
		}
		theirs = strtoul(p + 8, &e, 10);
		if (theirs + 1 < mine || theirs > mine + 1) {
			work_status("verify FAIL rank %d pid %ld: step %lu, "
			    "rank 0 at %lu", i, (long)kids[i], theirs, mine);
			return;
		}
	}
	work_status("verify ok step=%lu ranks=%d", mine, nranks);
}

static unsigned long
number(const char *s, unsigned long max)
{
	unsigned long	 v;
	char		*e;

	errno = 0;
	v = strtoul(s, &e, 10);
	if (errno || e == s || *e != '\0' || v > max)
		usage();
	return v;
}

int
main(int argc, char *argv[])
{
	char		 line[LINELEN], pids[MAXRANKS * 24], *p;
	unsigned long	 k;
	ncclResult_t	 nr;
	int		 ch, i, j, version = 0;
	int		 p1[MAXRANKS][2], p2[MAXRANKS][2];

	while ((ch = getopt(argc, argv, "c:D:d:f:h:N:n:R:s:u:")) != -1) {
		switch (ch) {
		case 'c':
			every = number(optarg, 1000000);
			break;
		case 'D':
			delayed = (int)number(optarg, MAXRANKS - 1);
			break;
		case 'd':
			delay_ms = number(optarg, 3600000);
			break;
		case 'f':
			work_statusfile = optarg;
			break;
		case 'h':
			hold_ms = number(optarg, 3600000);
			break;
		case 'n':
			nranks = (int)number(optarg, MAXRANKS);
			if (nranks < 1)
				usage();
			break;
		case 'N':
			total = (int)number(optarg, 64);
			break;
		case 'R':
			base = (int)number(optarg, 63);
			break;
		case 's':
			sleep_ms = number(optarg, 3600000);
			break;
		case 'u':
			idfile = optarg;
			break;
		default:
			usage();
		}
	}
	if (total == 0)
		total = nranks;
	if (work_statusfile == NULL || optind != argc ||
	    (hold_ms > 0 && every == 0) || base + nranks > total ||
	    (total != nranks && idfile == NULL))
		usage();

	work_close_inherited();
	work_signals(0);

	if (nccl_load() == -1)
		die("%s", loaderr);
	if (base > 0)
		id_read();
	else if ((nr = nc.GetUniqueId(&id)) != ncclSuccess)
		nccl_die("ncclGetUniqueId", nr);
	else if (idfile != NULL)
		id_write();
	nc.GetVersion(&version);
	for (i = 1; i < nranks; i++)
		if (pipe(p1[i]) == -1 || pipe(p2[i]) == -1)
			die("pipe: %s", strerror(errno));
	for (i = 1; i < nranks; i++) {
		switch (kids[i] = fork()) {
		case -1:
			die("fork: %s", strerror(errno));
		case 0:
			signal(SIGUSR1, SIG_IGN);
			rank = base + i;
			for (j = 1; j < nranks; j++) {
				if (j != i) {
					close(p1[j][0]);
					close(p2[j][1]);
				}
				close(p1[j][1]);
				close(p2[j][0]);
			}
			child_main(p1[i][0], p2[i][1]);
		}
	}
	for (i = 1; i < nranks; i++) {
		close(p1[i][0]);
		close(p2[i][1]);
		tochild[i] = p1[i][1];
		fromchild[i] = p2[i][0];
	}

	rank = base;
	rank_start();
	step(1);
	snprintf(pids, sizeof pids, "%ld", (long)getpid());
	for (i = 1; i < nranks; i++) {
		if (work_get_line(fromchild[i], line, sizeof line, READY_MS) == -1)
			die("no word from rank %d pid %ld", i, (long)kids[i]);
		/* "ready RANK PID" */
		if (strncmp(line, "ready ", 6) != 0 ||
		    strtol(line + 6, &p, 10) != base + i)
			die("rank %d pid %ld says: %s", i, (long)kids[i], line);
		snprintf(pids + strlen(pids), sizeof pids - strlen(pids),
		    ",%ld", strtol(p, NULL, 10));
	}
	work_status("ready pid=%ld ranks=%s nranks=%d nccl=%d",
	    (long)getpid(), pids, nranks, version);
	/* A request that cuts the sleep short is answered before the step. */
	for (k = 2; ; k++) {
		if (work_want_verify) {
			work_want_verify = 0;
			verify();
		}
		work_msleep((long)sleep_ms);
		if (work_want_verify) {
			work_want_verify = 0;
			verify();
		}
		step(k);
	}
}
