/*
 * fakectl -- drive the CUDA checkpoint API of a process from a shell.
 *
 * usage:
 *	fakectl [-t] ACTION PID [ARGS]
 *	fakectl driver
 *	fakectl state PID
 *	fakectl tid PID
 *	fakectl lock PID [TIMEOUT_MS]
 *	fakectl checkpoint PID
 *	fakectl restore PID [OLDUUID=NEWUUID ...]
 *	fakectl unlock PID
 *	fakectl [-t] [-wx] checkpoint-storage PID FILE
 *	fakectl [-t] [-wx] restore-storage PID FILE [OLDUUID=NEWUUID ...]
 *	fakectl nvml
 *	fakectl devices
 *
 * It drives whichever driver it is given: the stand-in of the tests, or
 * NVIDIA's on a GPU host (tests/gpu/run.sh times the driver's own steps
 * with it).
 * The driver is the library named by GPUCKPT_LIBCUDA (default
 * libcuda.so.1), its entry points found through cuGetProcAddress(); NVML
 * is the one named by GPUCKPT_LIBNVML (default libnvidia-ml.so.1).
 * PIDs are as fakectl sees them, whatever PID namespace the process is
 * in.  "state" prints the state word and "tid" the restore thread's ID;
 * the actions print nothing; with -t, each prints "time SECONDS", how
 * long the driver's call took.  "driver" prints the driver API version
 * (cuDriverGetVersion()), whether cuGetProcAddress() finds every
 * function of the checkpoint API, and those of custom storage (driver
 * API 13040) asked for at 13040:
 *	api=13040 checkpoint=yes|no storage=yes|no
 * "checkpoint-storage" checkpoints a LOCKED process to custom storage:
 * it copies each GPU's memory the driver maps, in the order of the
 * info's dev[], into FILE.0, FILE.1, ... through a buffer of
 * cuMemHostAlloc() (in the primary context of device 0; malloc() if that
 * fails) with cuMemcpyDtoHAsync() and cuStreamSynchronize(), printing
 * "N SIZE" a GPU, then completes the operation: the process is
 * CHECKPOINTED.  "restore-storage" restores such a process from
 * custom storage: each FILE.N must be as large as the memory dev[N]
 * maps, is copied in with cuMemcpyHtoDAsync(), "N SIZE" is printed, and
 * the operation is completed: the process is LOCKED.  A failed copy
 * ends fakectl without the complete call.  With -w fakectl waits, once
 * it has copied, until FILE.go exists before it completes; with -x
 * (the stand-in driver only: it hands the driver bogus handles) it
 * also prints "CHECK RESULT" for calls the driver must refuse, before
 * and after the complete call.  A driver without
 * cuCheckpointOperationComplete() is asked all the same, to see it
 * refuse.
 * "nvml" prints the driver release, then a
 * line a GPU:
 *	INDEX UUID total=N free=N used=N procs=PID:BYTES[,...]|- NAME
 * "devices" prints the devices the driver shows fakectl itself, as
 * CUDA_VISIBLE_DEVICES makes them, a line each:
 *	ORDINAL UUID NAME
 * A failure prints "fakectl: ACTION PID: CUDA_ERROR_..." ("fakectl:
 * devices: CUDA_ERROR_..." for devices) and exits 1; a usage error
 * exits 2.
 */

#include "config.h"

#include <sys/types.h>
#include <sys/stat.h>

#include <ctype.h>
#include <dlfcn.h>
#include <err.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>

#include "../../src/lib/gpu/custom.h"

#define STORAGE_VERSION	13040
#define BUFSZ		((size_t)1 << 20)
#define F_WAIT		0x1	/* -w */
#define F_CHECK		0x2	/* -x */

struct nvml_memory {
	unsigned long long total, free, used;
};

struct nvml_process_info {
	unsigned int	 pid;
	unsigned long long usedGpuMemory;
	unsigned int	 gpuInstanceId;
	unsigned int	 computeInstanceId;
};

typedef CUresult (*getproc_fn)(const char *, void **, int, cuuint64_t,
    CUdriverProcAddressQueryResult *);

static _Noreturn void	 usage(void);
static _Noreturn void	 fail(const char *, const char *, CUresult);
static void		*resolve(const char *, const char *, const char *);
static void		*resolve_at(const char *, int, const char *,
			    const char *);
static void		 check(const char *, CUresult);
static int		 storage(int, const char *, const char *, int,
			    CUcheckpointGpuPair *, unsigned int, int);
static int		 uuid_parse(const char *, CUuuid *);
static void		 load(const char *, const char *);
static int		 nvml(void);
static int		 devices(void);
static int		 driver(void);
static double		 now(void);

static getproc_fn	 getproc;
static CUresult		(*errname)(CUresult, const char **);

/* Custom storage, and a context for the copies' buffer. */
static struct {
	CUresult	(*checkpoint)(int, CUcheckpointCheckpointArgs *);
	CUresult	(*restore)(int, CUcheckpointRestoreArgs *);
	CUresult	(*complete)(void *);
	CUresult	(*dtoh)(void *, CUdeviceptr, size_t, CUstream);
	CUresult	(*htod)(CUdeviceptr, const void *, size_t, CUstream);
	CUresult	(*sync)(CUstream);
	CUresult	(*hostalloc)(void **, size_t, unsigned int);
	CUresult	(*freehost)(void *);
	CUresult	(*deviceget)(CUdevice *, int);
	CUresult	(*retain)(CUcontext *, CUdevice);
	CUresult	(*release)(CUdevice);
	CUresult	(*push)(CUcontext);
	CUresult	(*pop)(CUcontext *);
} cs;

static _Noreturn void
usage(void)
{
	fprintf(stderr, "usage: fakectl [-t] state|tid|checkpoint|unlock pid\n"
	    "       fakectl [-t] lock pid [timeout_ms]\n"
	    "       fakectl [-t] restore pid [olduuid=newuuid ...]\n"
	    "       fakectl [-t] [-wx] checkpoint-storage pid file\n"
	    "       fakectl [-t] [-wx] restore-storage pid file "
	    "[olduuid=newuuid ...]\n"
	    "       fakectl nvml|devices|driver\n");
	exit(2);
}

static _Noreturn void
fail(const char *action, const char *pid, CUresult r)
{
	const char	*name = NULL;

	if (errname == NULL || errname(r, &name) != CUDA_SUCCESS ||
	    name == NULL)
		errx(1, "%s%s%s: CUresult %d", action, pid != NULL ? " " : "",
		    pid != NULL ? pid : "", (int)r);
	errx(1, "%s%s%s: %s", action, pid != NULL ? " " : "",
	    pid != NULL ? pid : "", name);
}

/* The newest variant of symbol the checkpoint API's CUDA 12.8 knows. */
static void *
resolve(const char *symbol, const char *action, const char *pid)
{
	return resolve_at(symbol, 12080, action, pid);
}

/* The newest variant of symbol that CUDA version knows. */
static void *
resolve_at(const char *symbol, int version, const char *action,
    const char *pid)
{
	CUdriverProcAddressQueryResult	 qr;
	CUresult			 r;
	void				*fn = NULL;

	r = getproc(symbol, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &qr);
	if (r != CUDA_SUCCESS)
		fail(action, pid, r);
	if (fn == NULL)
		fail(action, pid, CUDA_ERROR_NOT_FOUND);
	return fn;
}

/* -x: one line, "CHECK RESULT". */
static void
check(const char *what, CUresult r)
{
	const char	*name = NULL;

	if (errname == NULL || errname(r, &name) != CUDA_SUCCESS ||
	    name == NULL)
		printf("%s %d\n", what, (int)r);
	else
		printf("%s %s\n", what, name);
}

/*
 * Checkpoints pid to custom storage into file.N (restore 0), or
 * restores it from there (restore 1, with npairs pairs); flags: F_WAIT
 * and F_CHECK.
 */
static int
storage(int pid, const char *arg, const char *file, int restore,
    CUcheckpointGpuPair *pairs, unsigned int npairs, int flags)
{
	struct gck_cu_ckpt_args		 ca;
	struct gck_cu_restore_args	 ra;
	CUcheckpointCheckpointArgs	 cargs;
	CUcheckpointRestoreArgs		 rargs;
	struct gck_cu_storage		*info = NULL;
	struct gck_cu_storage_dev	*d;
	CUdriverProcAddressQueryResult	 qr;
	struct stat			 sb;
	const char			*action;
	char				 path[PATH_MAX];
	CUcontext			 ctx = NULL, old;
	CUdevice			 dev0;
	CUstream			 stream0 = NULL;
	CUdeviceptr			 devptr0 = 0;
	CUresult			 r;
	unsigned int			 i;
	size_t				 off, n;
	ssize_t				 got;
	void				*buf = NULL, *handle;
	int				 fd, pinned = 0, have0;

	action = restore ? "restore-storage" : "checkpoint-storage";
	*(void **)&cs.checkpoint = resolve("cuCheckpointProcessCheckpoint",
	    action, arg);
	*(void **)&cs.restore = resolve("cuCheckpointProcessRestore", action,
	    arg);
#define SYM(f, n)	(*(void **)&cs.f = resolve_at(n, STORAGE_VERSION, \
	action, arg))
	SYM(dtoh, "cuMemcpyDtoHAsync");
	SYM(htod, "cuMemcpyHtoDAsync");
	SYM(sync, "cuStreamSynchronize");
	SYM(hostalloc, "cuMemHostAlloc");
	SYM(freehost, "cuMemFreeHost");
	SYM(deviceget, "cuDeviceGet");
	SYM(retain, "cuDevicePrimaryCtxRetain");
	SYM(release, "cuDevicePrimaryCtxRelease");
	SYM(push, "cuCtxPushCurrent");
	SYM(pop, "cuCtxPopCurrent");
#undef SYM
	/* Without it the driver is asked anyway: it must refuse. */
	*(void **)&cs.complete = NULL;
	getproc("cuCheckpointOperationComplete", (void **)&cs.complete,
	    STORAGE_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &qr);

	/* The buffer: page-locked in device 0's context, else malloc(). */
	if (cs.deviceget(&dev0, 0) == CUDA_SUCCESS &&
	    cs.retain(&ctx, dev0) == CUDA_SUCCESS) {
		if (cs.push(ctx) != CUDA_SUCCESS) {
			cs.release(dev0);
			ctx = NULL;
		} else if (cs.hostalloc(&buf, BUFSZ, 0) == CUDA_SUCCESS)
			pinned = 1;
	}
	if (buf == NULL && (buf = malloc(BUFSZ)) == NULL)
		err(1, "%s %s", action, arg);

	if (restore) {
		memset(&ra, 0, sizeof ra);
		ra.pairs = npairs > 0 ? pairs : NULL;
		ra.npairs = npairs;
		ra.storage_out = &info;
		memcpy(&rargs, &ra, sizeof rargs);
		r = cs.restore(pid, &rargs);
	} else {
		memset(&ca, 0, sizeof ca);
		ca.storage_out = &info;
		memcpy(&cargs, &ca, sizeof cargs);
		r = cs.checkpoint(pid, &cargs);
	}
	if (r != CUDA_SUCCESS)
		fail(action, arg, r);
	if (cs.complete == NULL)
		fail(action, arg, CUDA_ERROR_NOT_FOUND);
	if (info == NULL)
		fail(action, arg, CUDA_ERROR_UNKNOWN);
	handle = info->handle;

	if (flags & F_CHECK) {
		check("complete-null", cs.complete(NULL));
		for (i = 0; i < info->ndev && info->dev[i].size < 16; i++)
			;
		if (i < info->ndev) {
			d = &info->dev[i];
			check("bad-stream", cs.dtoh(buf, d->devptr, 16,
			    (CUstream)handle));
			check("dtoh-past-end", cs.dtoh(buf, d->devptr +
			    d->size - 8, 16, d->stream));
			check(restore ? "htod-past-end" : "htod-read-only",
			    cs.htod(d->devptr + (restore ? d->size - 8 : 0),
			    buf, 16, d->stream));
		}
	}

	for (i = 0; i < info->ndev; i++) {
		d = &info->dev[i];
		snprintf(path, sizeof path, "%s.%u", file, i);
		if (restore) {
			if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1 ||
			    fstat(fd, &sb) == -1)
				err(1, "%s %s: %s", action, arg, path);
			if ((unsigned long long)sb.st_size != d->size)
				errx(1, "%s %s: %s: %lld bytes, not %zu", action,
				    arg, path, (long long)sb.st_size, d->size);
		} else if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC |
		    O_CLOEXEC, 0644)) == -1)
			err(1, "%s %s: %s", action, arg, path);
		for (off = 0; off < d->size; off += n) {
			n = d->size - off < BUFSZ ? d->size - off : BUFSZ;
			if (restore) {
				if ((got = read(fd, buf, n)) == -1)
					err(1, "%s %s: %s", action, arg, path);
				if ((size_t)got != n)
					errx(1, "%s %s: %s: short read", action,
					    arg, path);
				r = cs.htod(d->devptr + off, buf, n, d->stream);
			} else
				r = cs.dtoh(buf, d->devptr + off, n, d->stream);
			if (r == CUDA_SUCCESS)
				r = cs.sync(d->stream);
			if (r != CUDA_SUCCESS)
				fail(action, arg, r);
			if (!restore && write(fd, buf, n) != (ssize_t)n)
				err(1, "%s %s: %s", action, arg, path);
		}
		if (close(fd) == -1)
			err(1, "%s %s: %s", action, arg, path);
		printf("%u %zu\n", i, d->size);
	}
	fflush(stdout);

	if (flags & F_WAIT) {
		snprintf(path, sizeof path, "%s.go", file);
		while (access(path, F_OK) == -1)
			usleep(10000);
	}
	/* (the info is the driver's: the complete call frees it) */
	if ((have0 = info->ndev > 0)) {
		stream0 = info->dev[0].stream;
		devptr0 = info->dev[0].devptr;
	}
	if ((r = cs.complete(handle)) != CUDA_SUCCESS)
		fail(action, arg, r);
	if (flags & F_CHECK) {
		check("complete-again", cs.complete(handle));
		if (have0) {
			check("sync-ended", cs.sync(stream0));
			check("dtoh-ended", cs.dtoh(buf, devptr0, 1, stream0));
		}
	}
	if (pinned)
		cs.freehost(buf);
	else
		free(buf);
	if (ctx != NULL) {
		cs.pop(&old);
		cs.release(dev0);
	}
	return 0;
}

static int
uuid_parse(const char *s, CUuuid *u)
{
	unsigned int	v;
	size_t		i, n = 0;

	if (strncmp(s, "GPU-", 4) != 0 || strlen(s) != 40)
		return -1;
	for (i = 4; s[i] != '\0'; ) {
		if (s[i] == '-') {
			i++;
			continue;
		}
		if (n == 16 || !isxdigit((unsigned char)s[i]) ||
		    !isxdigit((unsigned char)s[i + 1]) ||
		    sscanf(s + i, "%2x", &v) != 1)
			return -1;
		u->bytes[n++] = (char)v;
		i += 2;
	}
	return n == 16 ? 0 : -1;
}

/*
 * Loads the driver named by GPUCKPT_LIBCUDA and calls cuInit(), or fails
 * as action pid (pid NULL: action alone).
 */
static void
load(const char *action, const char *pid)
{
	const char	*lib = getenv("GPUCKPT_LIBCUDA");
	CUresult	 r;
	void		*h;
	CUresult	 (*init)(unsigned int);

	if (lib == NULL || *lib == '\0')
		lib = "libcuda.so.1";
	if ((h = dlopen(lib, RTLD_NOW | RTLD_LOCAL)) == NULL)
		errx(1, "%s%s%s: %s", action, pid != NULL ? " " : "",
		    pid != NULL ? pid : "", dlerror());
	*(void **)&errname = dlsym(h, "cuGetErrorName");
	if ((*(void **)&getproc = dlsym(h, "cuGetProcAddress_v2")) == NULL)
		errx(1, "%s%s%s: no cuGetProcAddress_v2 in %s", action,
		    pid != NULL ? " " : "", pid != NULL ? pid : "", lib);
	*(void **)&init = resolve("cuInit", action, pid);
	if ((r = init(0)) != CUDA_SUCCESS)
		fail(action, pid, r);
}

static double
now(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The driver API version, and whether the checkpoint API is there. */
static int
driver(void)
{
	static const char *const api[] = {
		"cuCheckpointProcessGetState",
		"cuCheckpointProcessGetRestoreThreadId",
		"cuCheckpointProcessLock", "cuCheckpointProcessCheckpoint",
		"cuCheckpointProcessRestore", "cuCheckpointProcessUnlock"
	};
	static const char *const sapi[] = {
		"cuCheckpointOperationComplete", "cuMemcpyDtoHAsync",
		"cuMemcpyHtoDAsync", "cuStreamSynchronize", "cuMemHostAlloc",
		"cuMemFreeHost"
	};
	CUdriverProcAddressQueryResult	 qr;
	CUresult			 r;
	size_t				 i;
	int				 v, all = 1, sall = 1;
	void				*fn;
	CUresult			 (*version)(int *);

	load("driver", NULL);
	*(void **)&version = resolve("cuDriverGetVersion", "driver", NULL);
	if ((r = version(&v)) != CUDA_SUCCESS)
		fail("driver", NULL, r);
	for (i = 0; i < sizeof api / sizeof api[0]; i++) {
		fn = NULL;
		if (getproc(api[i], &fn, 12080, CU_GET_PROC_ADDRESS_DEFAULT,
		    &qr) != CUDA_SUCCESS || fn == NULL)
			all = 0;
	}
	for (i = 0; i < sizeof sapi / sizeof sapi[0]; i++) {
		fn = NULL;
		if (getproc(sapi[i], &fn, STORAGE_VERSION,
		    CU_GET_PROC_ADDRESS_DEFAULT, &qr) != CUDA_SUCCESS ||
		    fn == NULL)
			sall = 0;
	}
	printf("api=%d checkpoint=%s storage=%s\n", v, all ? "yes" : "no",
	    sall ? "yes" : "no");
	return 0;
}

/* The devices this process sees: ORDINAL UUID NAME. */
static int
devices(void)
{
	const unsigned char	*b;
	CUuuid			 u;
	CUdevice		 dev;
	CUresult		 r;
	char			 name[256];
	int			 i, n;
	CUresult		 (*count)(int *);
	CUresult		 (*get)(CUdevice *, int);
	CUresult		 (*getuuid)(CUuuid *, CUdevice);
	CUresult		 (*getname)(char *, int, CUdevice);

	load("devices", NULL);
	*(void **)&count = resolve("cuDeviceGetCount", "devices", NULL);
	*(void **)&get = resolve("cuDeviceGet", "devices", NULL);
	*(void **)&getuuid = resolve("cuDeviceGetUuid", "devices", NULL);
	*(void **)&getname = resolve("cuDeviceGetName", "devices", NULL);
	if ((r = count(&n)) != CUDA_SUCCESS)
		fail("devices", NULL, r);
	for (i = 0; i < n; i++) {
		if ((r = get(&dev, i)) != CUDA_SUCCESS ||
		    (r = getuuid(&u, dev)) != CUDA_SUCCESS ||
		    (r = getname(name, sizeof name, dev)) != CUDA_SUCCESS)
			fail("devices", NULL, r);
		b = (const unsigned char *)u.bytes;
		printf("%d GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
		    "%02x%02x%02x%02x%02x%02x %s\n", (int)dev, b[0], b[1], b[2],
		    b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
		    b[12], b[13], b[14], b[15], name);
	}
	return 0;
}

static int
nvml(void)
{
	const char			*path = getenv("GPUCKPT_LIBNVML");
	struct nvml_process_info	 pi[256];
	struct nvml_memory		 m;
	char				 uuid[96], name[256], rel[96];
	unsigned int			 n, i, k, np;
	void				*h, *dev;
	int				 (*init)(void);
	int				 (*release)(char *, unsigned int);
	int				 (*count)(unsigned int *);
	int				 (*byindex)(unsigned int, void **);
	int				 (*getuuid)(void *, char *,
					    unsigned int);
	int				 (*getname)(void *, char *,
					    unsigned int);
	int				 (*meminfo)(void *,
					    struct nvml_memory *);
	int				 (*running)(void *, unsigned int *,
					    struct nvml_process_info *);

	if (path == NULL || *path == '\0')
		path = "libnvidia-ml.so.1";
	if ((h = dlopen(path, RTLD_NOW | RTLD_LOCAL)) == NULL)
		errx(1, "nvml: %s", dlerror());
	*(void **)&init = dlsym(h, "nvmlInit_v2");
	*(void **)&release = dlsym(h, "nvmlSystemGetDriverVersion");
	*(void **)&count = dlsym(h, "nvmlDeviceGetCount_v2");
	*(void **)&byindex = dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
	*(void **)&getuuid = dlsym(h, "nvmlDeviceGetUUID");
	*(void **)&getname = dlsym(h, "nvmlDeviceGetName");
	*(void **)&meminfo = dlsym(h, "nvmlDeviceGetMemoryInfo");
	*(void **)&running = dlsym(h,
	    "nvmlDeviceGetComputeRunningProcesses_v3");
	if (init == NULL || release == NULL || count == NULL ||
	    byindex == NULL || getuuid == NULL || getname == NULL ||
	    meminfo == NULL || running == NULL)
		errx(1, "nvml: %s lacks an entry point", path);
	if ((k = (unsigned int)init()) != 0)
		errx(1, "nvml: nvmlInit_v2: %u", k);
	if (release(rel, sizeof rel) != 0 || count(&n) != 0)
		errx(1, "nvml: cannot read the driver");
	printf("driver %s\n", rel);
	for (i = 0; i < n; i++) {
		np = sizeof pi / sizeof pi[0];
		if (byindex(i, &dev) != 0 || getuuid(dev, uuid, sizeof uuid) ||
		    getname(dev, name, sizeof name) || meminfo(dev, &m) != 0 ||
		    running(dev, &np, pi) != 0)
			errx(1, "nvml: cannot read GPU %u", i);
		printf("%u %s total=%llu free=%llu used=%llu procs=", i, uuid,
		    m.total, m.free, m.used);
		for (k = 0; k < np; k++)
			printf("%s%u:%llu", k ? "," : "", pi[k].pid,
			    pi[k].usedGpuMemory);
		printf("%s %s\n", np ? "" : "-", name);
	}
	return 0;
}

int
main(int argc, char *argv[])
{
	CUcheckpointGpuPair	 pairs[64];
	CUcheckpointLockArgs	 la;
	CUcheckpointRestoreArgs	 ra;
	CUprocessState		 st;
	const char		*action, *arg, *file = NULL;
	CUresult		 r;
	char			 old[64], *eq, *e;
	unsigned long		 ms = 0;
	long			 pid;
	double			 t0;
	int			 i, tid, timed = 0, flags = 0, first = 3;
	CUresult		 (*getstate)(int, CUprocessState *);
	CUresult		 (*threadid)(int, int *);
	CUresult		 (*lock)(int, CUcheckpointLockArgs *);
	CUresult		 (*checkpoint)(int,
				    CUcheckpointCheckpointArgs *);
	CUresult		 (*restore)(int, CUcheckpointRestoreArgs *);
	CUresult		 (*unlock)(int, CUcheckpointUnlockArgs *);
	static const char *const states[] = {
		"RUNNING", "LOCKED", "CHECKPOINTED", "FAILED"
	};

	if (argc == 2 && strcmp(argv[1], "nvml") == 0)
		return nvml();
	if (argc == 2 && strcmp(argv[1], "devices") == 0)
		return devices();
	if (argc == 2 && strcmp(argv[1], "driver") == 0)
		return driver();
	while (argc > 1 && (strcmp(argv[1], "-t") == 0 ||
	    strcmp(argv[1], "-w") == 0 || strcmp(argv[1], "-x") == 0 ||
	    strcmp(argv[1], "-wx") == 0 || strcmp(argv[1], "-xw") == 0)) {
		if (strcmp(argv[1], "-t") == 0)
			timed = 1;
		else
			flags |= (strchr(argv[1], 'w') ? F_WAIT : 0) |
			    (strchr(argv[1], 'x') ? F_CHECK : 0);
		argv++;
		argc--;
	}
	if (argc < 3)
		usage();
	action = argv[1];
	arg = argv[2];
	errno = 0;
	pid = strtol(arg, &e, 10);
	if (errno != 0 || *e != '\0' || pid <= 0 || pid > INT_MAX)
		usage();
	if (flags != 0 && strcmp(action, "checkpoint-storage") != 0 &&
	    strcmp(action, "restore-storage") != 0)
		usage();
	if (strcmp(action, "checkpoint-storage") == 0) {
		if (argc != 4)
			usage();
		file = argv[3];
	} else if (strcmp(action, "restore-storage") == 0) {
		if (argc < 4)
			usage();
		file = argv[3];
		first = 4;
	}
	if (strcmp(action, "lock") == 0) {
		if (argc > 4)
			usage();
		if (argc == 4) {
			errno = 0;
			ms = strtoul(argv[3], &e, 10);
			if (errno != 0 || *e != '\0' || ms > UINT_MAX)
				usage();
		}
	} else if (strcmp(action, "restore") == 0 ||
	    strcmp(action, "restore-storage") == 0) {
		if (argc - first > (int)(sizeof pairs / sizeof pairs[0]))
			usage();
		for (i = first; i < argc; i++) {
			if ((eq = strchr(argv[i], '=')) == NULL ||
			    (size_t)(eq - argv[i]) >= sizeof old)
				usage();
			memcpy(old, argv[i], (size_t)(eq - argv[i]));
			old[eq - argv[i]] = '\0';
			if (uuid_parse(old, &pairs[i - first].oldUuid) == -1 ||
			    uuid_parse(eq + 1, &pairs[i - first].newUuid) == -1)
				usage();
		}
	} else if (file == NULL && (argc != 3 ||
	    (strcmp(action, "state") != 0 && strcmp(action, "tid") != 0 &&
	    strcmp(action, "checkpoint") != 0 &&
	    strcmp(action, "unlock") != 0)))
		usage();

	load(action, arg);

	t0 = now();
	if (file != NULL)
		storage((int)pid, arg, file, first == 4, pairs, first == 4 ?
		    (unsigned int)(argc - first) : 0, flags);
	else if (strcmp(action, "state") == 0) {
		*(void **)&getstate = resolve("cuCheckpointProcessGetState",
		    action, arg);
		if ((r = getstate((int)pid, &st)) != CUDA_SUCCESS)
			fail(action, arg, r);
		if ((unsigned int)st >= sizeof states / sizeof states[0])
			printf("%d\n", (int)st);
		else
			printf("%s\n", states[st]);
	} else if (strcmp(action, "tid") == 0) {
		*(void **)&threadid = resolve(
		    "cuCheckpointProcessGetRestoreThreadId", action, arg);
		if ((r = threadid((int)pid, &tid)) != CUDA_SUCCESS)
			fail(action, arg, r);
		printf("%d\n", tid);
	} else if (strcmp(action, "lock") == 0) {
		*(void **)&lock = resolve("cuCheckpointProcessLock", action,
		    arg);
		memset(&la, 0, sizeof la);
		la.timeoutMs = (unsigned int)ms;
		if ((r = lock((int)pid, &la)) != CUDA_SUCCESS)
			fail(action, arg, r);
	} else if (strcmp(action, "checkpoint") == 0) {
		*(void **)&checkpoint = resolve(
		    "cuCheckpointProcessCheckpoint", action, arg);
		if ((r = checkpoint((int)pid, NULL)) != CUDA_SUCCESS)
			fail(action, arg, r);
	} else if (strcmp(action, "restore") == 0) {
		*(void **)&restore = resolve("cuCheckpointProcessRestore",
		    action, arg);
		memset(&ra, 0, sizeof ra);
		ra.gpuPairs = argc > 3 ? pairs : NULL;
		ra.gpuPairsCount = (unsigned int)(argc - 3);
		if ((r = restore((int)pid, &ra)) != CUDA_SUCCESS)
			fail(action, arg, r);
	} else {
		*(void **)&unlock = resolve("cuCheckpointProcessUnlock",
		    action, arg);
		if ((r = unlock((int)pid, NULL)) != CUDA_SUCCESS)
			fail(action, arg, r);
	}
	if (timed)
		printf("time %.6f\n", now() - t0);
	return 0;
}
