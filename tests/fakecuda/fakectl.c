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
 * (cuDriverGetVersion()) and whether cuGetProcAddress() finds every
 * function of the checkpoint API:
 *	api=13000 checkpoint=yes|no  "nvml" prints the driver release, then a
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

#include <ctype.h>
#include <dlfcn.h>
#include <err.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda.h>

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
static int		 uuid_parse(const char *, CUuuid *);
static void		 load(const char *, const char *);
static int		 nvml(void);
static int		 devices(void);
static int		 driver(void);
static double		 now(void);

static getproc_fn	 getproc;
static CUresult		(*errname)(CUresult, const char **);

static _Noreturn void
usage(void)
{
	fprintf(stderr, "usage: fakectl [-t] state|tid|checkpoint|unlock pid\n"
	    "       fakectl [-t] lock pid [timeout_ms]\n"
	    "       fakectl [-t] restore pid [olduuid=newuuid ...]\n"
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
	CUdriverProcAddressQueryResult	 st;
	CUresult			 r;
	void				*fn = NULL;

	r = getproc(symbol, &fn, 12080, CU_GET_PROC_ADDRESS_DEFAULT, &st);
	if (r != CUDA_SUCCESS)
		fail(action, pid, r);
	if (fn == NULL)
		fail(action, pid, CUDA_ERROR_NOT_FOUND);
	return fn;
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
	CUdriverProcAddressQueryResult	 st;
	CUresult			 r;
	size_t				 i;
	int				 v, all = 1;
	void				*fn;
	CUresult			 (*version)(int *);

	load("driver", NULL);
	*(void **)&version = resolve("cuDriverGetVersion", "driver", NULL);
	if ((r = version(&v)) != CUDA_SUCCESS)
		fail("driver", NULL, r);
	for (i = 0; i < sizeof api / sizeof api[0]; i++) {
		fn = NULL;
		if (getproc(api[i], &fn, 12080, CU_GET_PROC_ADDRESS_DEFAULT,
		    &st) != CUDA_SUCCESS || fn == NULL)
			all = 0;
	}
	printf("api=%d checkpoint=%s\n", v, all ? "yes" : "no");
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
	const char		*action, *arg;
	CUresult		 r;
	char			 old[64], *eq, *e;
	unsigned long		 ms = 0;
	long			 pid;
	double			 t0;
	int			 i, tid, timed = 0;
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
	if (argc > 1 && strcmp(argv[1], "-t") == 0) {
		timed = 1;
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
	if (strcmp(action, "lock") == 0) {
		if (argc > 4)
			usage();
		if (argc == 4) {
			errno = 0;
			ms = strtoul(argv[3], &e, 10);
			if (errno != 0 || *e != '\0' || ms > UINT_MAX)
				usage();
		}
	} else if (strcmp(action, "restore") == 0) {
		if (argc - 3 > (int)(sizeof pairs / sizeof pairs[0]))
			usage();
		for (i = 3; i < argc; i++) {
			if ((eq = strchr(argv[i], '=')) == NULL ||
			    (size_t)(eq - argv[i]) >= sizeof old)
				usage();
			memcpy(old, argv[i], (size_t)(eq - argv[i]));
			old[eq - argv[i]] = '\0';
			if (uuid_parse(old, &pairs[i - 3].oldUuid) == -1 ||
			    uuid_parse(eq + 1, &pairs[i - 3].newUuid) == -1)
				usage();
		}
	} else if (argc != 3 || (strcmp(action, "state") != 0 &&
	    strcmp(action, "tid") != 0 && strcmp(action, "checkpoint") != 0 &&
	    strcmp(action, "unlock") != 0))
		usage();

	load(action, arg);

	t0 = now();
	if (strcmp(action, "state") == 0) {
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
