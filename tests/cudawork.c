/*
 * cudawork -- a tree of CUDA processes whose device memory can be
 * checked after a checkpoint and restore.
 *
 * usage: cudawork [-i] [-n nproc] [-m MiB] [-d devlist] [-e ordinal]
 *	  -f statusfile
 *
 * It forks nproc - 1 children (default 1 process in all) before it
 * touches CUDA.  Then each process loads libcuda.so.1, takes device
 * devlist[i % n] (a comma list of ordinals, default "0") for process i,
 * the root being 0, allocates MiB (default 8) of device memory, fills it
 * from the host with a pattern seeded by its PID and remembers its
 * checksum, and allocates an 8-byte device counter that it reads,
 * increments and writes back every 10 ms: the counter stops while the
 * process is locked or checkpointed.  When all are ready the root
 * appends
 *	ready pid=PID sum=HEX child=PID|0 mib=N nproc=N devs=UUID[,UUID...]
 * to statusfile, sum being the xor of the checksums and devs the GPU of
 * each process, root first.  On SIGUSR1 each process reads its memory
 * back and checks the checksum, checks that the counter holds what it
 * last wrote and that it moves on from the previous check, and looks
 * up the GPU its context is on now; the root then appends
 *	verify ok sum=HEX counter=N thread=N child=PID|0 devs=UUID[,...]
 * (counter and thread: the root's counter) or "verify FAIL pid PID:
 * what".  On SIGUSR2 the root rewrites one page (4 KiB) in every 64 of
 * its device memory, all over it, with a pattern of its own, takes its
 * checksum again and appends "rewrote sum=HEX pages=N", the sum as
 * "verify" will give it (a training step's update at its sparsest: the
 * changes scattered, nowhere a run).  With -e the root also holds the
 * primary context of device ordinal, never current and with no memory
 * on it (a GPU it holds nothing on).  With -i the processes share device
 * memory through CUDA IPC: the root exports a page of its own
 * (cuIpcGetMemHandle()) and hands the handle to each child, which opens
 * it before it is ready; at each check the root writes a new word there
 * and sends it with the request, each child reads it back through its
 * mapping and writes its answer into its own slot of that page, which
 * the root reads back, and "verify ok" ends in " ipc=N", N the children
 * whose words went both ways.  A process that cannot start makes the root append "error pid
 * PID: what" and exit 1.  The status file is opened for each line and
 * written with one write(2).  Descriptors other than 0, 1 and 2 that it
 * inherits are closed first (but a job file of its own, gpuckpt
 * --launch); the root and the children talk over pipes
 * made before the fork, open for their whole life.
 */

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <sys/types.h>

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stddef.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda.h>

#include "common/work.h"

#define CHUNK		(1024 * 1024)
#define MAXPROC		64
#define UUIDLEN		41
#define LINELEN		4096
#define ANSWER_MS	10000

struct cuda {
	CUresult	(*Init)(unsigned int);
	CUresult	(*DeviceGet)(CUdevice *, int);
	CUresult	(*DeviceGetUuid)(CUuuid *, CUdevice);
	CUresult	(*PrimaryCtxRetain)(CUcontext *, CUdevice);
	CUresult	(*CtxSetCurrent)(CUcontext);
	CUresult	(*CtxGetDevice)(CUdevice *);
	CUresult	(*MemAlloc)(CUdeviceptr *, size_t);
	CUresult	(*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
	CUresult	(*MemcpyDtoH)(void *, CUdeviceptr, size_t);
	CUresult	(*GetErrorName)(CUresult, const char **);
	CUresult	(*IpcGetMemHandle)(CUipcMemHandle *, CUdeviceptr);
	CUresult	(*IpcOpenMemHandle)(CUdeviceptr *, CUipcMemHandle,
			    unsigned int);
};

static _Noreturn void	 usage(void);
static void		 failed(const char *, ...)
			    __attribute__((__format__(__printf__, 1, 2)));
static const char	*cuname(CUresult);
static int		 cuda_load(void);
static int		 device_uuid(char *);
static int		 cuda_start(int, unsigned long);
static void		 step(void);
static int		 check(char *, size_t);
static _Noreturn void	 child_main(int, int, int, unsigned long, int);
static int		 ipc_open(int);
static int		 ipc_export(void);
static void		 verify(void);
static void		 rewrite(void);
static uint64_t			 kids_sum;	/* the children's, xored */
static int			 ipc;		/* -i */
static CUdeviceptr		 dshared;	/* the page shared, here */

static struct cuda		 cu;
static CUdeviceptr		 dbuf, dctr;
static size_t			 nbytes;
static uint64_t			 sum;		/* of the pattern written */
static uint64_t			 shadow;	/* the counter last written */
static uint64_t			 lastver;	/* at the last check */
static char			 failure[256];	/* the first CUDA failure */
static uint64_t			 chunk[CHUNK / sizeof(uint64_t)];
static int			 nproc = 1;
static int			 tochild[MAXPROC], fromchild[MAXPROC];
static pid_t			 kids[MAXPROC];
static unsigned long		 vseq;

static _Noreturn void
usage(void)
{
	fprintf(stderr, "usage: cudawork [-i] [-n nproc] [-m MiB] [-d devlist] "
	    "[-e ordinal] -f statusfile\n");
	exit(2);
}

/* Keeps the first failure of this process for the next check. */
static void
failed(const char *fmt, ...)
{
	va_list	ap;

	if (failure[0] != '\0')
		return;
	va_start(ap, fmt);
	vsnprintf(failure, sizeof failure, fmt, ap);
	va_end(ap);
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

static int
cuda_load(void)
{
	static const struct {
		const char	*name;
		size_t		 off;
	} syms[] = {
#define SYM(n, f)	{ n, offsetof(struct cuda, f) }
		SYM("cuInit", Init),
		SYM("cuDeviceGet", DeviceGet),
		SYM("cuDeviceGetUuid_v2", DeviceGetUuid),
		SYM("cuDevicePrimaryCtxRetain", PrimaryCtxRetain),
		SYM("cuCtxSetCurrent", CtxSetCurrent),
		SYM("cuCtxGetDevice", CtxGetDevice),
		SYM("cuMemAlloc_v2", MemAlloc),
		SYM("cuMemcpyHtoD_v2", MemcpyHtoD),
		SYM("cuMemcpyDtoH_v2", MemcpyDtoH),
		SYM("cuGetErrorName", GetErrorName),
		SYM("cuIpcGetMemHandle", IpcGetMemHandle),
		SYM("cuIpcOpenMemHandle_v2", IpcOpenMemHandle),
#undef SYM
	};
	size_t	 i;
	void	*h, *fn;

	if ((h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) == NULL) {
		failed("cannot load libcuda.so.1: %s", dlerror());
		return -1;
	}
	for (i = 0; i < sizeof syms / sizeof syms[0]; i++) {
		if ((fn = dlsym(h, syms[i].name)) == NULL) {
			failed("libcuda.so.1 lacks %s", syms[i].name);
			return -1;
		}
		*(void **)((char *)&cu + syms[i].off) = fn;
	}
	return 0;
}

/* The UUID of the GPU the current context is on now. */
static int
device_uuid(char *s)
{
	const unsigned char	*u;
	CUuuid			 uuid;
	CUdevice		 dev;
	CUresult		 r;

	if ((r = cu.CtxGetDevice(&dev)) != CUDA_SUCCESS) {
		failed("cuCtxGetDevice: %s", cuname(r));
		return -1;
	}
	if ((r = cu.DeviceGetUuid(&uuid, dev)) != CUDA_SUCCESS) {
		failed("cuDeviceGetUuid: %s", cuname(r));
		return -1;
	}
	u = (const unsigned char *)uuid.bytes;
	snprintf(s, UUIDLEN, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-"
	    "%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2], u[3], u[4],
	    u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
	    u[15]);
	return 0;
}

static int
cuda_start(int ordinal, unsigned long mib)
{
	CUcontext	ctx;
	CUdevice	dev;
	CUresult	r;
	uint64_t	x, zero = 0;
	size_t		off;

	if (cuda_load() == -1)
		return -1;
	if ((r = cu.Init(0)) != CUDA_SUCCESS) {
		failed("cuInit: %s", cuname(r));
		return -1;
	}
	if ((r = cu.DeviceGet(&dev, ordinal)) != CUDA_SUCCESS) {
		failed("cuDeviceGet %d: %s", ordinal, cuname(r));
		return -1;
	}
	if ((r = cu.PrimaryCtxRetain(&ctx, dev)) != CUDA_SUCCESS ||
	    (r = cu.CtxSetCurrent(ctx)) != CUDA_SUCCESS) {
		failed("context on device %d: %s", ordinal, cuname(r));
		return -1;
	}
	nbytes = (size_t)mib * 1024 * 1024;
	if ((r = cu.MemAlloc(&dbuf, nbytes)) != CUDA_SUCCESS) {
		failed("cuMemAlloc %lu MiB: %s", mib, cuname(r));
		return -1;
	}
	x = ((uint64_t)getpid() << 32) ^ WORK_GOLDEN;
	sum = WORK_FNV_INIT;
	for (off = 0; off < nbytes; off += CHUNK) {
		x = work_fill(chunk, CHUNK / sizeof(uint64_t), x);
		sum = work_fnv(sum, chunk, CHUNK / sizeof(uint64_t));
		if ((r = cu.MemcpyHtoD(dbuf + off, chunk, CHUNK)) !=
		    CUDA_SUCCESS) {
			failed("cuMemcpyHtoD: %s", cuname(r));
			return -1;
		}
	}
	if ((r = cu.MemAlloc(&dctr, sizeof zero)) != CUDA_SUCCESS ||
	    (r = cu.MemcpyHtoD(dctr, &zero, sizeof zero)) != CUDA_SUCCESS) {
		failed("the counter: %s", cuname(r));
		return -1;
	}
	step();
	return failure[0] != '\0' ? -1 : 0;
}

/* Counter: device to host, plus one, back to the device. */
static void
step(void)
{
	uint64_t	v;
	CUresult	r;

	if ((r = cu.MemcpyDtoH(&v, dctr, sizeof v)) != CUDA_SUCCESS) {
		failed("cuMemcpyDtoH: %s", cuname(r));
		return;
	}
	if (v != shadow) {
		failed("counter %" PRIu64 ", last written %" PRIu64, v,
		    shadow);
		return;
	}
	v++;
	if ((r = cu.MemcpyHtoD(dctr, &v, sizeof v)) != CUDA_SUCCESS) {
		failed("cuMemcpyHtoD: %s", cuname(r));
		return;
	}
	shadow = v;
}

/*
 * Checks this process: "ok SUM COUNTER UUID" or "FAIL pid PID: what"
 * into out.  A counter that has not moved since the previous check is
 * stepped once, so that the check also proves the process can go on.
 */
static int
check(char *out, size_t len)
{
	char		uuid[UUIDLEN];
	uint64_t	v = 0, h = WORK_FNV_INIT;
	CUresult	r;
	size_t		off;

	if (failure[0] == '\0' && (r = cu.MemcpyDtoH(&v, dctr, sizeof v)) !=
	    CUDA_SUCCESS)
		failed("cuMemcpyDtoH: %s", cuname(r));
	if (failure[0] == '\0' && v != shadow)
		failed("counter %" PRIu64 ", last written %" PRIu64, v,
		    shadow);
	if (failure[0] == '\0' && v <= lastver) {
		step();
		v = shadow;
	}
	for (off = 0; failure[0] == '\0' && off < nbytes; off += CHUNK) {
		if ((r = cu.MemcpyDtoH(chunk, dbuf + off, CHUNK)) !=
		    CUDA_SUCCESS)
			failed("cuMemcpyDtoH: %s", cuname(r));
		else
			h = work_fnv(h, chunk, CHUNK / sizeof(uint64_t));
	}
	if (failure[0] == '\0' && h != sum)
		failed("memory sum=%016" PRIx64 " expected=%016" PRIx64, h,
		    sum);
	if (failure[0] == '\0' && device_uuid(uuid) == 0 &&
	    failure[0] == '\0') {
		lastver = v;
		snprintf(out, len, "ok %016" PRIx64 " %" PRIu64 " %s", h, v,
		    uuid);
		return 0;
	}
	snprintf(out, len, "FAIL pid %ld: %s", (long)getpid(), failure);
	return -1;
}

/* One line, one write(2). */
/* A child's: the handle the root sends, "ipc HEX", opened. */
static int
ipc_open(int in)
{
	CUipcMemHandle	h;
	char		line[LINELEN], *p;
	unsigned int	i, b;
	CUresult	r;

	if (work_get_line(in, line, sizeof line, 60000) == -1 ||
	    strncmp(line, "ipc ", 4) != 0 ||
	    strlen(line + 4) != 2 * sizeof h.reserved) {
		failed("no IPC handle from the root");
		return -1;
	}
	for (i = 0, p = line + 4; i < sizeof h.reserved; i++, p += 2) {
		if (sscanf(p, "%2x", &b) != 1) {
			failed("a bad IPC handle");
			return -1;
		}
		h.reserved[i] = (char)b;
	}
	if ((r = cu.IpcOpenMemHandle(&dshared, h,
	    CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)) != CUDA_SUCCESS) {
		failed("cuIpcOpenMemHandle: %s", cuname(r));
		return -1;
	}
	return 0;
}

/* The root's: a page of its own, its handle sent to each child. */
static int
ipc_export(void)
{
	CUipcMemHandle	h;
	char		line[LINELEN];
	uint64_t	zero[512] = { 0 };
	size_t		i, n;
	CUresult	r;
	int		k;

	if ((r = cu.MemAlloc(&dshared, sizeof zero)) != CUDA_SUCCESS ||
	    (r = cu.MemcpyHtoD(dshared, zero, sizeof zero)) != CUDA_SUCCESS ||
	    (r = cu.IpcGetMemHandle(&h, dshared)) != CUDA_SUCCESS) {
		failed("the shared page: %s", cuname(r));
		return -1;
	}
	n = (size_t)snprintf(line, sizeof line, "ipc ");
	for (i = 0; i < sizeof h.reserved; i++)
		n += (size_t)snprintf(line + n, sizeof line - n, "%02x",
		    (unsigned char)h.reserved[i]);
	for (k = 1; k < nproc; k++)
		if (work_put_line(tochild[k], line) == -1) {
			failed("cannot send the IPC handle");
			return -1;
		}
	return 0;
}

/*
 * A child: says "ready PID SUM UUID" (or "error what"), then answers
 * each request "SEQ" with "SEQ " and its check, until the root is gone.
 */
static _Noreturn void
child_main(int ordinal, int in, int out, unsigned long mib, int slot)
{
	struct pollfd	pfd;
	char		line[LINELEN], req[64], uuid[UUIDLEN], *w;
	uint64_t	word, got;
	CUresult	r;

	if (cuda_start(ordinal, mib) == -1 || device_uuid(uuid) == -1 ||
	    (ipc && ipc_open(in) == -1)) {
		snprintf(line, sizeof line, "error pid %ld: %s",
		    (long)getpid(), failure);
		work_put_line(out, line);
		_exit(1);
	}
	snprintf(line, sizeof line, "ready %ld %016" PRIx64 " %s",
	    (long)getpid(), sum, uuid);
	if (work_put_line(out, line) == -1)
		_exit(1);
	for (;;) {
		pfd.fd = in;
		pfd.events = POLLIN;
		if (poll(&pfd, 1, 10) > 0) {
			if (work_get_line(in, req, sizeof req, 1000) == -1)
				_exit(0);
			/* "SEQ [WORD]": the word through the shared page */
			if ((w = strchr(req, ' ')) != NULL) {
				*w++ = '\0';
				word = strtoull(w, NULL, 16);
				if ((r = cu.MemcpyDtoH(&got, dshared,
				    sizeof got)) != CUDA_SUCCESS)
					failed("shared page: %s", cuname(r));
				else if (got != word)
					failed("shared page holds %016" PRIx64
					    ", the root wrote %016" PRIx64,
					    got, word);
				else if ((r = cu.MemcpyHtoD(dshared + 8 *
				    (CUdeviceptr)slot, &(uint64_t){ ~word },
				    8)) != CUDA_SUCCESS)
					failed("shared page: %s", cuname(r));
			}
			snprintf(line, sizeof line, "%s ", req);
			check(line + strlen(line), sizeof line - strlen(line));
			if (work_put_line(out, line) == -1)
				_exit(0);
		}
		step();
	}
}

/* The root's SIGUSR2: one page in 64 rewritten, its checksum again. */
static void
rewrite(void)
{
	static uint64_t	 seed = 0x9e3779b97f4a7c15ULL;
	CUresult	 r;
	size_t		 off;
	unsigned long	 n = 0;

	for (off = 0; off < nbytes; off += 64 * 4096, n++) {
		seed = work_fill(chunk, 4096 / sizeof(uint64_t), seed);
		if ((r = cu.MemcpyHtoD(dbuf + off, chunk, 4096)) !=
		    CUDA_SUCCESS) {
			work_status("error pid %ld: cuMemcpyHtoD: %s",
			    (long)getpid(), cuname(r));
			return;
		}
	}
	sum = WORK_FNV_INIT;
	for (off = 0; off < nbytes; off += CHUNK) {
		if ((r = cu.MemcpyDtoH(chunk, dbuf + off, CHUNK)) !=
		    CUDA_SUCCESS) {
			work_status("error pid %ld: cuMemcpyDtoH: %s",
			    (long)getpid(), cuname(r));
			return;
		}
		sum = work_fnv(sum, chunk, CHUNK / sizeof(uint64_t));
	}
	work_status("rewrote sum=%016" PRIx64 " pages=%lu", sum ^ kids_sum, n);
}

/* The root asks every child, checks itself, and writes the verdict. */
static void
verify(void)
{
	char		 line[LINELEN], mine[LINELEN], devs[MAXPROC * UUIDLEN];
	char		 seq[32], *p, *e;
	uint64_t	 total, h, counter;
	size_t		 n;
	int		 i;

	char		 req[64];
	uint64_t	 word = 0, back[MAXPROC];
	int		 nipc = 0;
	CUresult	 r;

	vseq++;
	snprintf(seq, sizeof seq, "%lu", vseq);
	snprintf(req, sizeof req, "%s", seq);
	if (ipc) {
		word = ((uint64_t)getpid() << 32 | vseq) ^ WORK_GOLDEN;
		if ((r = cu.MemcpyHtoD(dshared, &word, sizeof word)) !=
		    CUDA_SUCCESS) {
			work_status("verify FAIL pid %ld: shared page: %s",
			    (long)getpid(), cuname(r));
			return;
		}
		snprintf(req, sizeof req, "%s %016" PRIx64, seq, word);
	}
	for (i = 1; i < nproc; i++)
		work_put_line(tochild[i], req);
	if (check(mine, sizeof mine) == -1) {
		work_status("verify %s", mine);
		return;
	}
	/* "ok SUM COUNTER UUID" */
	total = strtoull(mine + 3, &p, 16);
	counter = strtoull(p, &p, 10);
	snprintf(devs, sizeof devs, "%s", p + 1);
	for (i = 1; i < nproc; i++) {
		n = strlen(seq);
		do {
			if (work_get_line(fromchild[i], line, sizeof line,
			    ANSWER_MS) == -1) {
				work_status("verify FAIL pid %ld: no answer",
				    (long)kids[i]);
				return;
			}
		} while (strncmp(line, seq, n) != 0 || line[n] != ' ');
		p = line + n + 1;
		if (strncmp(p, "ok ", 3) != 0) {
			work_status("verify %s", p);
			return;
		}
		h = strtoull(p + 3, &e, 16);
		strtoull(e, &e, 10);
		total ^= h;
		snprintf(devs + strlen(devs), sizeof devs - strlen(devs), ",%s",
		    e + 1);
	}
	if (ipc) {
		if ((r = cu.MemcpyDtoH(back, dshared, sizeof back)) !=
		    CUDA_SUCCESS) {
			work_status("verify FAIL pid %ld: shared page: %s",
			    (long)getpid(), cuname(r));
			return;
		}
		for (i = 1; i < nproc; i++)
			nipc += back[i] == ~word;
	}
	snprintf(req, sizeof req, ipc ? " ipc=%d" : "", nipc);
	work_status("verify ok sum=%016" PRIx64 " counter=%" PRIu64 " thread=%"
	    PRIu64 " child=%ld devs=%s%s", total, counter, counter,
	    (long)(nproc > 1 ? kids[1] : 0), devs, req);
}

int
main(int argc, char *argv[])
{
	char			 line[LINELEN], devs[MAXPROC * UUIDLEN];
	char			*ep, *p;
	unsigned long		 mib = 8, v;
	uint64_t		 total;
	int			 ch, i, j, ndev = 0, dev[MAXPROC], empty = -1;
	CUcontext		 ectx;
	CUdevice		 edev;
	CUresult		 r;
	int			 p1[MAXPROC][2], p2[MAXPROC][2];
	long			 n;

	while ((ch = getopt(argc, argv, "d:e:f:im:n:")) != -1) {
		switch (ch) {
		case 'i':
			ipc = 1;
			break;
		case 'e':
			errno = 0;
			v = strtoul(optarg, &ep, 10);
			if (errno || *ep != '\0' || ep == optarg || v > 1024)
				usage();
			empty = (int)v;
			break;
		case 'd':
			ndev = 0;
			for (p = optarg; ; p = ep + 1) {
				errno = 0;
				v = strtoul(p, &ep, 10);
				if (errno || ep == p || v > 1024 ||
				    ndev == MAXPROC ||
				    (*ep != ',' && *ep != '\0'))
					usage();
				dev[ndev++] = (int)v;
				if (*ep == '\0')
					break;
			}
			break;
		case 'f':
			work_statusfile = optarg;
			break;
		case 'm':
			errno = 0;
			mib = strtoul(optarg, &ep, 10);
			if (errno || *ep != '\0' || mib == 0 || mib > 65536)
				usage();
			break;
		case 'n':
			errno = 0;
			n = strtol(optarg, &ep, 10);
			if (errno || *ep != '\0' || n < 1 || n > MAXPROC)
				usage();
			nproc = (int)n;
			break;
		default:
			usage();
		}
	}
	if (work_statusfile == NULL || optind != argc)
		usage();
	if (ndev == 0)
		dev[ndev++] = 0;

	work_close_inherited();
	work_signals(0);
	signal(SIGUSR2, work_on_usr2);

	for (i = 1; i < nproc; i++)
		if (pipe(p1[i]) == -1 || pipe(p2[i]) == -1) {
			work_status("error pid %ld: pipe: %s", (long)getpid(),
			    strerror(errno));
			return 1;
		}
	for (i = 1; i < nproc; i++) {
		switch (kids[i] = fork()) {
		case -1:
			work_status("error pid %ld: fork: %s", (long)getpid(),
			    strerror(errno));
			return 1;
		case 0:
			signal(SIGUSR1, SIG_IGN);
			signal(SIGUSR2, SIG_IGN);
			for (j = 1; j < nproc; j++) {
				if (j != i) {
					close(p1[j][0]);
					close(p2[j][1]);
				}
				close(p1[j][1]);
				close(p2[j][0]);
			}
			child_main(dev[i % ndev], p1[i][0], p2[i][1], mib, i);
		}
	}
	for (i = 1; i < nproc; i++) {
		close(p1[i][0]);
		close(p2[i][1]);
		tochild[i] = p1[i][1];
		fromchild[i] = p2[i][0];
	}

	if (cuda_start(dev[0], mib) == -1 || device_uuid(devs) == -1 ||
	    (ipc && ipc_export() == -1)) {
		work_status("error pid %ld: %s", (long)getpid(), failure);
		return 1;
	}
	if (empty != -1 && ((r = cu.DeviceGet(&edev, empty)) != CUDA_SUCCESS ||
	    (r = cu.PrimaryCtxRetain(&ectx, edev)) != CUDA_SUCCESS)) {
		work_status("error pid %ld: a context on device %d: %s",
		    (long)getpid(), empty, cuname(r));
		return 1;
	}
	total = sum;
	for (i = 1; i < nproc; i++) {
		if (work_get_line(fromchild[i], line, sizeof line, 60000) == -1) {
			work_status("error pid %ld: no word from child %ld",
			    (long)getpid(), (long)kids[i]);
			return 1;
		}
		/* "ready PID SUM UUID" */
		if (strncmp(line, "ready ", 6) != 0) {
			work_status("%s", line);
			return 1;
		}
		strtol(line + 6, &p, 10);
		total ^= strtoull(p, &p, 16);
		snprintf(devs + strlen(devs), sizeof devs - strlen(devs), ",%s",
		    p + 1);
	}
	kids_sum = total ^ sum;
	work_status("ready pid=%ld sum=%016" PRIx64 " child=%ld mib=%lu "
	    "nproc=%d devs=%s", (long)getpid(), total,
	    (long)(nproc > 1 ? kids[1] : 0), mib, nproc, devs);
	for (;;) {
		step();
		if (work_want_verify) {
			work_want_verify = 0;
			verify();
		}
		if (work_want_rewrite) {
			work_want_rewrite = 0;
			rewrite();
		}
		work_msleep(10);
	}
}
