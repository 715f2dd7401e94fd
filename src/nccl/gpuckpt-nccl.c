/*
 * libgpuckpt-nccl.so -- loaded into the ranks of an NCCL job, it lets
 * gpuckpt stop them all at one point between two NCCL operations and
 * have NCCL's checkpoint shim tear their communicators down, so that no
 * rank is locked on its GPU while another waits for it in a collective.
 *
 *	LD_PRELOAD=/usr/local/lib/gpuckpt/libgpuckpt-nccl.so:\
 *	    /usr/local/lib/libnccl-checkpoint-shim.so command ...
 *
 * It goes first, in front of the shim (NCCL 2.30.7's contrib/
 * nccl_checkpoint) and of NCCL itself: it defines the NCCL calls that
 * begin an operation, counts them and passes them on to the next
 * definition (dlsym(RTLD_NEXT)).  From the first of them a thread of
 * its own listens for gpuckpt (ncclproto.h says what they say).  To
 * quiesce, gpuckpt holds every rank where it is, sends each the largest
 * count any rank has reached, lets each run on to it and park there,
 * outside any NCCL call, and only then has each call the shim's
 * ncclCheckpointPrepare().  Ranks of one communicator begin its
 * collectives in one order, so at one count they have all issued the
 * same ones: the work already on the GPUs can finish, and the lock that
 * follows waits for nothing that waits for a peer.  After the
 * checkpoint (or its failure), or after a restore, gpuckpt or gpurestore
 * has the thread call ncclCheckpointRestore() and let the rank go.
 *
 * Nothing here is in the way while no gpuckpt asks: an operation takes
 * a mutex, adds one and passes on.  The listening thread makes no NCCL
 * call of the application's: it calls the shim only, and its own calls
 * into NCCL (the shim's, from its thread) pass through unheld.
 */

#define _GNU_SOURCE

#include <sys/types.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* (nccl.h declares a few functions without a prototype) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop

ncclResult_t	ncclGroupStart(void);
ncclResult_t	ncclGroupEnd(void);

#include "ncclproto.h"

#define EXPORT	__attribute__((visibility("default")))

/* A communicator the application made, as gpuckpt is told of it. */
struct comm {
	ncclComm_t	 comm;
	uint64_t	 id;		/* its unique ID's hash (or derived) */
	int		 nranks;	/* -1: ask NCCL when needed */
	int		 rank;
	unsigned long long colls;	/* collectives begun */
};

enum hstate { H_RUNNING, H_HELD, H_PREPARED };

static struct {
	pthread_mutex_t	 mtx;
	pthread_cond_t	 cv;
	enum hstate	 state;
	long long	 target;	/* held: -1, or where to park */
	unsigned long long ops;		/* operations begun */
	int		 inside;	/* operations under way */
	struct comm	 comms[GCK_NCCL_MAXCOMM];
	int		 ncomm;
	int		 overflow;	/* more than GCK_NCCL_MAXCOMM */
	int		 lfd;		/* the listening socket */
	time_t		 lease;		/* prepared: until when (realtime),
					   or 0: until resumed */
} h = {
	.mtx = PTHREAD_MUTEX_INITIALIZER,
	.cv = PTHREAD_COND_INITIALIZER,
	.target = -1,
	.lfd = -1,
};

static pthread_once_t		 once = PTHREAD_ONCE_INIT;
static _Thread_local int	 depth;		/* groups and calls open */
static _Thread_local int	 ours;		/* the listening thread */

static void	 start(void);

/* The next definition of an NCCL function: the shim's, or NCCL's. */
static void *
next(const char *name)
{
	void	*p;

	p = dlsym(RTLD_NEXT, name);
	return p;
}

#define NEXT(name)							\
	static __typeof__(&name)	 fn_;				\
	if (fn_ == NULL &&						\
	    (fn_ = (__typeof__(&name))next(#name)) == NULL)		\
		return ncclInternalError

static uint64_t
fnv(uint64_t hsh, const void *p, size_t n)
{
	const unsigned char	*c = p;
	size_t			 i;

	for (i = 0; i < n; i++) {
		hsh ^= c[i];
		hsh *= 0x100000001b3ULL;
	}
	return hsh;
}

#define FNV0	0xcbf29ce484222325ULL

/*
 * An operation begins: at the outermost level (not inside a group) it
 * waits while the rank is held and not yet let go to its target, then
 * counts.  Returns whether it counted, for op_end().
 */
static void
op_begin(void)
{
	pthread_once(&once, start);
	if (ours)
		return;
	pthread_mutex_lock(&h.mtx);
	if (depth++ == 0) {
		while (h.state != H_RUNNING &&
		    (h.target < 0 || h.ops >= (unsigned long long)h.target))
			pthread_cond_wait(&h.cv, &h.mtx);
		h.ops++;
	}
	h.inside++;
	pthread_mutex_unlock(&h.mtx);
}

static void
op_end(void)
{
	if (ours)
		return;
	pthread_mutex_lock(&h.mtx);
	depth--;
	if (--h.inside == 0)
		pthread_cond_broadcast(&h.cv);
	pthread_mutex_unlock(&h.mtx);
}

static struct comm *
comm_find(ncclComm_t c)
{
	int	i;

	for (i = 0; i < h.ncomm; i++)
		if (h.comms[i].comm == c)
			return &h.comms[i];
	return NULL;
}

/* A collective begun on c (under h.mtx, after op_begin()). */
static void
comm_coll(ncclComm_t c)
{
	struct comm	*m;

	if (ours)
		return;
	pthread_mutex_lock(&h.mtx);
	if ((m = comm_find(c)) != NULL)
		m->colls++;
	pthread_mutex_unlock(&h.mtx);
}

static void
comm_add(ncclComm_t c, uint64_t id, int nranks, int rank)
{
	struct comm	*m;

	if (ours || c == NULL)
		return;
	pthread_mutex_lock(&h.mtx);
	if ((m = comm_find(c)) == NULL) {
		if (h.ncomm == GCK_NCCL_MAXCOMM) {
			h.overflow = 1;
			pthread_mutex_unlock(&h.mtx);
			return;
		}
		m = &h.comms[h.ncomm++];
	}
	m->comm = c;
	m->id = id;
	m->nranks = nranks;
	m->rank = rank;
	m->colls = 0;
	pthread_mutex_unlock(&h.mtx);
}

static void
comm_drop(ncclComm_t c)
{
	struct comm	*m;

	if (ours)
		return;
	pthread_mutex_lock(&h.mtx);
	if ((m = comm_find(c)) != NULL)
		*m = h.comms[--h.ncomm];
	pthread_mutex_unlock(&h.mtx);
}

static uint64_t
comm_id(ncclComm_t c)
{
	struct comm	*m;
	uint64_t	 id = 0;

	pthread_mutex_lock(&h.mtx);
	if ((m = comm_find(c)) != NULL)
		id = m->id;
	pthread_mutex_unlock(&h.mtx);
	return id;
}

/* The application's calls that begin an operation. */

EXPORT ncclResult_t
ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
	NEXT(ncclCommInitRank);
	ncclResult_t	r;

	op_begin();
	r = fn_(comm, nranks, id, rank);
	if (r == ncclSuccess || r == ncclInProgress)
		comm_add(*comm, fnv(FNV0, &id, sizeof id), nranks, rank);
	op_end();
	return r;
}

EXPORT ncclResult_t
ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id,
    int rank, ncclConfig_t *config)
{
	NEXT(ncclCommInitRankConfig);
	ncclResult_t	r;

	op_begin();
	r = fn_(comm, nranks, id, rank, config);
	if (r == ncclSuccess || r == ncclInProgress)
		comm_add(*comm, fnv(FNV0, &id, sizeof id), nranks, rank);
	op_end();
	return r;
}

EXPORT ncclResult_t
ncclCommInitRankScalable(ncclComm_t *comm, int nranks, int rank, int nid,
    ncclUniqueId *ids, ncclConfig_t *config)
{
	NEXT(ncclCommInitRankScalable);
	ncclResult_t	r;

	op_begin();
	r = fn_(comm, nranks, rank, nid, ids, config);
	if ((r == ncclSuccess || r == ncclInProgress) && nid > 0)
		comm_add(*comm, fnv(FNV0, ids, sizeof *ids), nranks, rank);
	op_end();
	return r;
}

EXPORT ncclResult_t
ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
	NEXT(ncclCommInitAll);
	ncclResult_t	r;
	uint64_t	id;
	pid_t		pid = getpid();
	int		i;

	op_begin();
	r = fn_(comms, ndev, devlist);
	id = fnv(fnv(FNV0, &pid, sizeof pid), comms, sizeof *comms);
	for (i = 0; r == ncclSuccess && i < ndev; i++)
		comm_add(comms[i], id, ndev, i);
	op_end();
	return r;
}

EXPORT ncclResult_t
ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
    ncclConfig_t *config)
{
	NEXT(ncclCommSplit);
	ncclResult_t	r;
	uint64_t	id;

	op_begin();
	r = fn_(comm, color, key, newcomm, config);
	id = comm_id(comm);
	id = fnv(fnv(id, "split", 5), &color, sizeof color);
	if ((r == ncclSuccess || r == ncclInProgress) && newcomm != NULL)
		comm_add(*newcomm, id, -1, -1);
	op_end();
	return r;
}

EXPORT ncclResult_t
ncclCommShrink(ncclComm_t comm, int *exclude, int nexclude,
    ncclComm_t *newcomm, ncclConfig_t *config, int flags)
{
	NEXT(ncclCommShrink);
	ncclResult_t	r;
	uint64_t	id;

	op_begin();
	r = fn_(comm, exclude, nexclude, newcomm, config, flags);
	id = fnv(comm_id(comm), "shrink", 6);
	if (nexclude > 0 && exclude != NULL)
		id = fnv(id, exclude, (size_t)nexclude * sizeof *exclude);
	if ((r == ncclSuccess || r == ncclInProgress) && newcomm != NULL)
		comm_add(*newcomm, id, -1, -1);
	op_end();
	return r;
}

EXPORT ncclResult_t
ncclCommDestroy(ncclComm_t comm)
{
	NEXT(ncclCommDestroy);

	pthread_once(&once, start);
	comm_drop(comm);
	return fn_(comm);
}

EXPORT ncclResult_t
ncclCommAbort(ncclComm_t comm)
{
	NEXT(ncclCommAbort);

	pthread_once(&once, start);
	comm_drop(comm);
	return fn_(comm);
}

/* A collective: counted as an operation and on its communicator. */
#define COLL(call) do {							\
	ncclResult_t	r_;						\
									\
	op_begin();							\
	comm_coll(comm);						\
	r_ = (call);							\
	op_end();							\
	return r_;							\
} while (0)

/* A point-to-point call: an operation, not a collective. */
#define P2P(call) do {							\
	ncclResult_t	r_;						\
									\
	op_begin();							\
	r_ = (call);							\
	op_end();							\
	return r_;							\
} while (0)

EXPORT ncclResult_t
ncclAllReduce(const void *s, void *d, size_t n, ncclDataType_t t,
    ncclRedOp_t op, ncclComm_t comm, cudaStream_t st)
{
	NEXT(ncclAllReduce);

	COLL(fn_(s, d, n, t, op, comm, st));
}

EXPORT ncclResult_t
ncclReduce(const void *s, void *d, size_t n, ncclDataType_t t,
    ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t st)
{
	NEXT(ncclReduce);

	COLL(fn_(s, d, n, t, op, root, comm, st));
}

EXPORT ncclResult_t
ncclBcast(void *b, size_t n, ncclDataType_t t, int root, ncclComm_t comm,
    cudaStream_t st)
{
	NEXT(ncclBcast);

	COLL(fn_(b, n, t, root, comm, st));
}

EXPORT ncclResult_t
ncclBroadcast(const void *s, void *d, size_t n, ncclDataType_t t, int root,
    ncclComm_t comm, cudaStream_t st)
{
	NEXT(ncclBroadcast);

	COLL(fn_(s, d, n, t, root, comm, st));
}

EXPORT ncclResult_t
ncclReduceScatter(const void *s, void *d, size_t n, ncclDataType_t t,
    ncclRedOp_t op, ncclComm_t comm, cudaStream_t st)
{
	NEXT(ncclReduceScatter);

	COLL(fn_(s, d, n, t, op, comm, st));
}

EXPORT ncclResult_t
ncclAllGather(const void *s, void *d, size_t n, ncclDataType_t t,
    ncclComm_t comm, cudaStream_t st)
{
	NEXT(ncclAllGather);

	COLL(fn_(s, d, n, t, comm, st));
}

EXPORT ncclResult_t
ncclAlltoAll(const void *s, void *d, size_t n, ncclDataType_t t,
    ncclComm_t comm, cudaStream_t st)
{
	NEXT(ncclAlltoAll);

	COLL(fn_(s, d, n, t, comm, st));
}

EXPORT ncclResult_t
ncclGather(const void *s, void *d, size_t n, ncclDataType_t t, int root,
    ncclComm_t comm, cudaStream_t st)
{
	NEXT(ncclGather);

	COLL(fn_(s, d, n, t, root, comm, st));
}

EXPORT ncclResult_t
ncclScatter(const void *s, void *d, size_t n, ncclDataType_t t, int root,
    ncclComm_t comm, cudaStream_t st)
{
	NEXT(ncclScatter);

	COLL(fn_(s, d, n, t, root, comm, st));
}

EXPORT ncclResult_t
ncclSend(const void *s, size_t n, ncclDataType_t t, int peer,
    ncclComm_t comm, cudaStream_t st)
{
	NEXT(ncclSend);

	P2P(fn_(s, n, t, peer, comm, st));
}

EXPORT ncclResult_t
ncclRecv(void *d, size_t n, ncclDataType_t t, int peer, ncclComm_t comm,
    cudaStream_t st)
{
	NEXT(ncclRecv);

	P2P(fn_(d, n, t, peer, comm, st));
}

/*
 * A group is one operation, from its start to the end of its end: the
 * calls inside it are not held, and the rank is not at rest while one
 * is open.
 */
EXPORT ncclResult_t
ncclGroupStart(void)
{
	NEXT(ncclGroupStart);
	ncclResult_t	r;

	op_begin();
	if ((r = fn_()) != ncclSuccess)
		op_end();
	return r;
}

EXPORT ncclResult_t
ncclGroupEnd(void)
{
	NEXT(ncclGroupEnd);
	ncclResult_t	r;

	r = fn_();
	if (!ours && depth > 0)
		op_end();
	return r;
}

/* The listening thread's side. */

static const char *
state_name(void)
{
	switch (h.state) {
	case H_RUNNING:
		return "running";
	case H_HELD:
		return h.target >= 0 &&
		    h.ops == (unsigned long long)h.target && h.inside == 0 ?
		    "parked" : "held";
	default:
		return "prepared";
	}
}

static int
put(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int
put(int fd, const char *fmt, ...)
{
	char	line[GCK_NCCL_LINE];
	va_list	ap;
	int	n;
	ssize_t	w;
	size_t	off = 0;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof line - 1, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof line - 1)
		return -1;
	line[n++] = '\n';
	while (off < (size_t)n) {
		w = send(fd, line + off, (size_t)n - off, MSG_NOSIGNAL);
		if (w == -1 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		off += (size_t)w;
	}
	return 0;
}

/* The counts, under h.mtx: "WORD OPS NCOMM", the comm lines, "end". */
static int
put_counts(int fd, const char *word)
{
	static ncclResult_t (*count)(const ncclComm_t, int *);
	static ncclResult_t (*urank)(const ncclComm_t, int *);
	struct comm	*m;
	int		 i, n;

	if (count == NULL)
		count = (ncclResult_t (*)(const ncclComm_t, int *))
		    next("ncclCommCount");
	if (urank == NULL)
		urank = (ncclResult_t (*)(const ncclComm_t, int *))
		    next("ncclCommUserRank");
	if (put(fd, "%s %llu %d", word, h.ops, h.overflow ? -1 : h.ncomm) ==
	    -1)
		return -1;
	for (i = 0; i < h.ncomm; i++) {
		m = &h.comms[i];
		if (m->nranks < 0 && count != NULL && count(m->comm, &n) ==
		    ncclSuccess)
			m->nranks = n;
		if (m->rank < 0 && urank != NULL && urank(m->comm, &n) ==
		    ncclSuccess)
			m->rank = n;
		if (put(fd, "comm %016llx %d %d %llu",
		    (unsigned long long)m->id, m->nranks, m->rank,
		    m->colls) == -1)
			return -1;
	}
	return put(fd, "end");
}

static void
release(void)
{
	h.state = H_RUNNING;
	h.target = -1;
	pthread_cond_broadcast(&h.cv);
}

/* Whether the peer of fd has hung up. */
static int
hung_up(int fd)
{
	struct pollfd	p = { .fd = fd, .events = POLLRDHUP };

	return poll(&p, 1, 0) > 0 &&
	    (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

/* Under h.mtx: park at target, or give up when gpuckpt goes. */
static int
park(int fd, long long target)
{
	struct timespec	ts;

	h.target = target;
	pthread_cond_broadcast(&h.cv);
	for (;;) {
		if (h.ops > (unsigned long long)target)
			return put(fd, "beyond %llu", h.ops);
		if (h.ops == (unsigned long long)target && h.inside == 0)
			return put_counts(fd, "parked");
		if (hung_up(fd))
			return -1;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 10 * 1000 * 1000;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&h.cv, &h.mtx, &ts);
	}
}

/* Called without h.mtx: the shim calls back into NCCL, unheld (ours). */
static ncclResult_t
shim(const char *name, int *found)
{
	ncclResult_t	(*fn)(void);

	fn = (ncclResult_t (*)(void))dlsym(RTLD_DEFAULT, name);
	*found = fn != NULL;
	return fn != NULL ? fn() : ncclSuccess;
}

static const char *
nccl_error(ncclResult_t r)
{
	static const char *(*str)(ncclResult_t);

	if (str == NULL)
		str = (const char *(*)(ncclResult_t))
		    next("ncclGetErrorString");
	return str != NULL ? str(r) : "NCCL error";
}

static int
do_prepare(int fd, long secs)
{
	ncclResult_t	r;
	int		found, ncomm;

	if (h.state != H_HELD || h.inside != 0 || h.target < 0 ||
	    h.ops != (unsigned long long)h.target)
		return put(fd, "failed not parked");
	ncomm = h.ncomm;
	pthread_mutex_unlock(&h.mtx);
	r = ncomm > 0 ? shim("ncclCheckpointPrepare", &found) : ncclSuccess;
	pthread_mutex_lock(&h.mtx);
	if (ncomm > 0 && !found)
		return put(fd, "noshim");
	if (r != ncclSuccess)
		return put(fd, "failed %s", nccl_error(r));
	h.state = H_PREPARED;
	h.lease = secs > 0 ? time(NULL) + secs : 0;
	return put(fd, "prepared");
}

static int
do_resume(int fd)
{
	ncclResult_t	r = ncclSuccess;
	int		found = 1;

	if (h.state == H_PREPARED) {
		pthread_mutex_unlock(&h.mtx);
		r = h.ncomm > 0 ? shim("ncclCheckpointRestore", &found) :
		    ncclSuccess;
		pthread_mutex_lock(&h.mtx);
	}
	release();
	if (fd == -1)
		return 0;
	if (!found)
		return put(fd, "failed no ncclCheckpointRestore()");
	if (r != ncclSuccess)
		return put(fd, "failed %s", nccl_error(r));
	return put(fd, "resumed");
}

/* One request, under h.mtx; -1 ends the connection. */
static int
request(int fd, char *line)
{
	long long	n;
	char		*end;

	if (strcmp(line, "hold") == 0) {
		if (h.state == H_PREPARED)
			return put(fd, "busy prepared");
		h.state = H_HELD;
		h.target = -1;
		return put_counts(fd, "held");
	}
	if (strncmp(line, "park ", 5) == 0) {
		n = strtoll(line + 5, &end, 10);
		if (h.state != H_HELD || *end != '\0' || n < 0)
			return put(fd, "failed not held");
		return park(fd, n);
	}
	if (strncmp(line, "prepare ", 8) == 0) {
		n = strtoll(line + 8, &end, 10);
		if (*end != '\0' || n < 0)
			return put(fd, "failed bad request");
		return do_prepare(fd, (long)n);
	}
	if (strcmp(line, "resume") == 0)
		return do_resume(fd);
	if (strcmp(line, "state") == 0)
		return put(fd, "state %s %llu", state_name(), h.ops);
	if (strcmp(line, "bye") == 0)
		return -1;
	return put(fd, "failed unknown request");
}

/* One connection, to its end. */
static void
serve(int fd)
{
	char	buf[GCK_NCCL_LINE], *nl;
	size_t	len = 0;
	ssize_t	n;

	for (;;) {
		n = recv(fd, buf + len, sizeof buf - 1 - len, 0);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		buf[len] = '\0';
		if ((nl = strchr(buf, '\n')) == NULL) {
			if (len == sizeof buf - 1)
				break;
			continue;
		}
		*nl = '\0';
		pthread_mutex_lock(&h.mtx);
		n = request(fd, buf);
		pthread_mutex_unlock(&h.mtx);
		if (n == -1)
			break;
		len -= (size_t)(nl + 1 - buf);
		memmove(buf, nl + 1, len);
	}
	pthread_mutex_lock(&h.mtx);
	if (h.state == H_HELD)
		release();
	pthread_mutex_unlock(&h.mtx);
	close(fd);
}

static void *
listener(void *arg)
{
	sigset_t	all;
	int		fd, ms;
	time_t		now;

	(void)arg;
	ours = 1;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	for (;;) {
		struct pollfd	p = { .fd = h.lfd, .events = POLLIN };

		pthread_mutex_lock(&h.mtx);
		ms = -1;
		if (h.state == H_PREPARED && h.lease != 0) {
			now = time(NULL);
			if (now >= h.lease) {
				/* No one came back for it: it goes on. */
				do_resume(-1);
			} else
				ms = 1000;
		}
		pthread_mutex_unlock(&h.mtx);
		if (poll(&p, 1, ms) <= 0)
			continue;
		if ((fd = accept4(h.lfd, NULL, NULL, SOCK_CLOEXEC)) == -1)
			continue;
		serve(fd);
	}
	return NULL;
}

/* A forked child is no rank: it starts afresh, at its first call. */
static void
child(void)
{
	pthread_once_t	fresh = PTHREAD_ONCE_INIT;

	once = fresh;
	pthread_mutex_init(&h.mtx, NULL);
	pthread_cond_init(&h.cv, NULL);
	h.state = H_RUNNING;
	h.target = -1;
	h.ops = 0;
	h.inside = 0;
	h.ncomm = 0;
	h.overflow = 0;
	h.lfd = -1;
	depth = 0;
}

static void
start(void)
{
	struct sockaddr_un	sun;
	unsigned long long	rnd;
	pthread_attr_t		attr;
	pthread_t		t;
	socklen_t		len;
	int			fd, n, urnd;
	static int		atfork;

	if (!atfork) {
		atfork = 1;
		pthread_atfork(NULL, NULL, child);
	}
	rnd = (unsigned long long)time(NULL) ^ (unsigned long long)getpid();
	if ((urnd = open("/dev/urandom", O_RDONLY | O_CLOEXEC)) != -1) {
		if (read(urnd, &rnd, sizeof rnd) != (ssize_t)sizeof rnd)
			rnd ^= (unsigned long long)(uintptr_t)&rnd;
		close(urnd);
	}
	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	n = snprintf(sun.sun_path + 1, sizeof sun.sun_path - 1,
	    GCK_NCCL_PREFIX "%d.%016llx", (int)getpid(), rnd);
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
		return;
	if (bind(fd, (struct sockaddr *)&sun, len) == -1 ||
	    listen(fd, 4) == -1) {
		close(fd);
		return;
	}
	h.lfd = fd;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, listener, NULL) != 0) {
		close(fd);
		h.lfd = -1;
	}
	pthread_attr_destroy(&attr);
}
