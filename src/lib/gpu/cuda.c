/*
 * cuda.c: the CUDA driver's checkpoint API, and NVML, loaded at run time.
 *
 * libcuda.so.1 is opened with dlopen() and every entry point is resolved
 * through cuGetProcAddress(), so the tools run where there is no driver
 * at all and speak of one only when a CUDA process needs it.  The
 * environment variables GPUCKPT_LIBCUDA and GPUCKPT_LIBNVML name other
 * libraries to load instead.
 *
 * Every step (lock, checkpoint, restore, unlock) is taken for all the
 * processes at once, one thread each: moving device memory to the host
 * and back is the driver's long work, and the processes need not wait
 * for one another.  The state is read before and after every step, and
 * a process the driver reports FAILED is reported, never passed over.
 */
#include "config.h"

#include <sys/types.h>

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda.h>

#include "private.h"
#include "core/proc.h"
#include "gpu/cuda.h"
#include "gpu/custom.h"
#include "gpu/cudapriv.h"

typedef CUresult (*getproc_fn)(const char *, void **, int, cuuint64_t,
    CUdriverProcAddressQueryResult *);

struct step_job {
	struct gck_cuda		*cu;
	struct gck_cproc	*p;
	enum gck_cstep		 step;
	unsigned int		 lock_ms;
};

_Static_assert(GCK_CUDA_RUNNING == CU_PROCESS_STATE_RUNNING &&
    GCK_CUDA_LOCKED == CU_PROCESS_STATE_LOCKED &&
    GCK_CUDA_CHECKPOINTED == CU_PROCESS_STATE_CHECKPOINTED,
    "GCK_CUDA_* follow CUprocessState");

static const char *const step_names[] = {
	"lock", "checkpoint", "restore", "unlock"
};
static const CUprocessState step_from[] = {
	CU_PROCESS_STATE_RUNNING, CU_PROCESS_STATE_LOCKED,
	CU_PROCESS_STATE_CHECKPOINTED, CU_PROCESS_STATE_LOCKED
};
static const CUprocessState step_to[] = {
	CU_PROCESS_STATE_LOCKED, CU_PROCESS_STATE_CHECKPOINTED,
	CU_PROCESS_STATE_LOCKED, CU_PROCESS_STATE_RUNNING
};

static void	 nvml_open(struct gck_cuda *);
static int	 read_state(struct gck_cuda *, struct gck_cproc *);
static void	*step_thread(void *);
static void	*settle_thread(void *);
static void	 run_step(struct gck_cuda *, struct gck_cproc *,
		    enum gck_cstep, unsigned int);
static void	 run_all(struct gck_cuda *, struct gck_cproc *, size_t,
		    enum gck_cstep, unsigned int, void *(*)(void *));
static void	 format_uuid(const unsigned char *, char *, size_t);

const char *
gck_cuda_state_name(int st)
{
	switch (st) {
	case CU_PROCESS_STATE_RUNNING:
		return "RUNNING";
	case CU_PROCESS_STATE_LOCKED:
		return "LOCKED";
	case CU_PROCESS_STATE_CHECKPOINTED:
		return "CHECKPOINTED";
	case CU_PROCESS_STATE_FAILED:
		return "FAILED";
	default:
		return "in an unknown state";
	}
}

const char *
gck_cuda_errname(const struct gck_cuda *cu, int r)
{
	const char	*s = NULL;
	static char	 buf[32];

	if (cu != NULL && cu->GetErrorName != NULL &&
	    cu->GetErrorName((CUresult)r, &s) == CUDA_SUCCESS && s != NULL)
		return s;
	snprintf(buf, sizeof buf, "CUDA error %d", r);
	return buf;
}

/* "CUDA 12.8" for 12080. */
void
gck_cuda_version_string(int v, char *buf, size_t len)
{
	snprintf(buf, len, "CUDA %d.%d", v / 1000, v % 1000 / 10);
}

static void
format_uuid(const unsigned char *u, char *buf, size_t len)
{
	snprintf(buf, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
	    "%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2], u[3], u[4], u[5],
	    u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
}

/* Parses "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".  Returns 0 or -1. */
int
gck_cuda_parse_uuid(const char *s, unsigned char u[16])
{
	static const int	 dash[] = { 8, 13, 18, 23 };
	size_t			 i, k = 0, d = 0;
	int			 hi = -1, v;

	if (strncmp(s, "GPU-", 4) != 0 || strlen(s) != 40)
		return -1;
	s += 4;
	for (i = 0; i < 36; i++) {
		if (d < 4 && (int)i == dash[d]) {
			if (s[i] != '-')
				return -1;
			d++;
			continue;
		}
		if (!isxdigit((unsigned char)s[i]))
			return -1;
		v = isdigit((unsigned char)s[i]) ? s[i] - '0' :
		    tolower((unsigned char)s[i]) - 'a' + 10;
		if (hi == -1)
			hi = v;
		else {
			u[k++] = (unsigned char)(hi << 4 | v);
			hi = -1;
		}
	}
	return k == 16 ? 0 : -1;
}

/*
 * Returns 1 if pid has the CUDA driver or an NVIDIA device mapped: a
 * process the driver may hold GPU state for.
 */
int
gck_cuda_probe(pid_t pid)
{
	char	 path[64], line[4096];
	FILE	*f;
	int	 found = 0;

	snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
	if ((f = fopen(path, "re")) == NULL)
		return 0;
	while (!found && fgets(line, sizeof line, f) != NULL)
		found = strstr(line, "/libcuda.so") != NULL ||
		    strstr(line, " /dev/nvidia") != NULL;
	fclose(f);
	return found;
}

/* The NVML library to load: GPUCKPT_LIBNVML, else libnvidia-ml.so.1. */
const char *
gck_nvml_path(void)
{
	const char	*path = getenv("GPUCKPT_LIBNVML");

	return path != NULL && *path != '\0' ? path : "libnvidia-ml.so.1";
}

static void
nvml_open(struct gck_cuda *cu)
{
	if ((cu->nvml = dlopen(gck_nvml_path(), RTLD_NOW | RTLD_LOCAL)) ==
	    NULL)
		return;
	*(void **)&cu->NvmlInit = dlsym(cu->nvml, "nvmlInit_v2");
	*(void **)&cu->NvmlShutdown = dlsym(cu->nvml, "nvmlShutdown");
	*(void **)&cu->NvmlDriverVersion = dlsym(cu->nvml,
	    "nvmlSystemGetDriverVersion");
	*(void **)&cu->NvmlByUuid = dlsym(cu->nvml,
	    "nvmlDeviceGetHandleByUUID");
	*(void **)&cu->NvmlMemory = dlsym(cu->nvml, "nvmlDeviceGetMemoryInfo");
	*(void **)&cu->NvmlMinor = dlsym(cu->nvml, "nvmlDeviceGetMinorNumber");
	*(void **)&cu->NvmlProcesses = dlsym(cu->nvml,
	    "nvmlDeviceGetComputeRunningProcesses_v3");
	if (cu->NvmlInit == NULL || cu->NvmlShutdown == NULL ||
	    cu->NvmlByUuid == NULL || cu->NvmlMemory == NULL ||
	    cu->NvmlProcesses == NULL || cu->NvmlInit() != NVML_OK) {
		dlclose(cu->nvml);
		cu->nvml = NULL;
		return;
	}
	if (cu->NvmlDriverVersion == NULL ||
	    cu->NvmlDriverVersion(cu->release, sizeof cu->release) != NVML_OK)
		cu->release[0] = '\0';
}

/*
 * Loads the driver and resolves the checkpoint API.  It does not call
 * cuInit(): a process that forks (the guard) must do that itself.
 * Fails with GCK_ECUDA and a message naming what is missing.
 */
/*
 * The custom storage entry points, asked for at 13040: all of them, or
 * none (a driver older than 13.4 lacks cuCheckpointOperationComplete,
 * and the checkpoint then goes through the process's host memory).
 */
static void
cuda_open_storage(struct gck_cuda *cu, getproc_fn getproc)
{
	static const struct {
		const char	*name;
		size_t		 off;
	} syms[] = {
#define SYM(n, f)	{ n, offsetof(struct gck_cuda, f) }
		SYM("cuCheckpointOperationComplete", OperationComplete),
		SYM("cuMemcpyDtoHAsync", MemcpyDtoHAsync),
		SYM("cuMemcpyHtoDAsync", MemcpyHtoDAsync),
		SYM("cuStreamSynchronize", StreamSynchronize),
		SYM("cuMemHostAlloc", MemHostAlloc),
		SYM("cuMemFreeHost", MemFreeHost),
#undef SYM
	};
	CUdriverProcAddressQueryResult	 qr;
	size_t				 i;
	void				*fn;

	if (cu->version < GCK_CUDA_STORAGE_VERSION)
		return;
	for (i = 0; i < sizeof syms / sizeof syms[0]; i++) {
		fn = NULL;
		if (getproc(syms[i].name, &fn, GCK_CUDA_STORAGE_VERSION,
		    CU_GET_PROC_ADDRESS_DEFAULT, &qr) != CUDA_SUCCESS ||
		    fn == NULL)
			break;
		*(void **)((char *)cu + syms[i].off) = fn;
	}
	if (i < sizeof syms / sizeof syms[0])
		for (i = 0; i < sizeof syms / sizeof syms[0]; i++)
			*(void **)((char *)cu + syms[i].off) = NULL;
}

/* Whether the driver offers custom storage: 1 or 0. */
int
gck_cuda_storage(const struct gck_cuda *cu)
{
	return cu->OperationComplete != NULL;
}

int
gck_cuda_open(struct gck_ctx *ctx, struct gck_cuda **cup)
{
	static const struct {
		const char	*name;
		size_t		 off;
		int		 ckpt;
	} syms[] = {
#define SYM(n, f, c)	{ n, offsetof(struct gck_cuda, f), c }
		SYM("cuInit", Init, 0),
		SYM("cuGetErrorName", GetErrorName, 0),
		SYM("cuDeviceGetCount", DeviceGetCount, 0),
		SYM("cuDeviceGet", DeviceGet, 0),
		SYM("cuDeviceGetName", DeviceGetName, 0),
		SYM("cuDeviceGetUuid", DeviceGetUuid, 0),
		SYM("cuDeviceTotalMem", DeviceTotalMem, 0),
		SYM("cuDeviceGetAttribute", DeviceGetAttribute, 0),
		SYM("cuDeviceGetPCIBusId", DeviceGetPCIBusId, 0),
		SYM("cuDevicePrimaryCtxRetain", PrimaryCtxRetain, 0),
		SYM("cuDevicePrimaryCtxRelease", PrimaryCtxRelease, 0),
		SYM("cuCtxPushCurrent", CtxPushCurrent, 0),
		SYM("cuCtxPopCurrent", CtxPopCurrent, 0),
		SYM("cuMemGetInfo", MemGetInfo, 0),
		SYM("cuCheckpointProcessGetState", GetState, 1),
		SYM("cuCheckpointProcessLock", Lock, 1),
		SYM("cuCheckpointProcessCheckpoint", Checkpoint, 1),
		SYM("cuCheckpointProcessRestore", Restore, 1),
		SYM("cuCheckpointProcessUnlock", Unlock, 1),
#undef SYM
	};
	struct gck_cuda			*cu;
	const char			*path = getenv("GPUCKPT_LIBCUDA");
	getproc_fn			 getproc;
	CUdriverProcAddressQueryResult	 qr;
	char				 ver[32];
	size_t				 i;
	void				*fn;

	*cup = NULL;
	if (path == NULL || *path == '\0')
		path = "libcuda.so.1";
	if ((cu = calloc(1, sizeof *cu)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	if ((cu->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL)) == NULL) {
		gck_set_error(ctx, GCK_ECUDA, "no CUDA driver could be loaded "
		    "(%s); NVIDIA driver r570 or newer is needed", dlerror());
		free(cu);
		return GCK_ECUDA;
	}
	if ((*(void **)&getproc = dlsym(cu->lib, "cuGetProcAddress_v2")) ==
	    NULL || (*(void **)&cu->DriverGetVersion = dlsym(cu->lib,
	    "cuDriverGetVersion")) == NULL) {
		gck_cuda_close(cu);
		return gck_set_error(ctx, GCK_ECUDA, "the CUDA driver %s is "
		    "too old (no cuGetProcAddress_v2): NVIDIA driver r570 "
		    "(CUDA 12.8) or newer is needed", path);
	}
	if (cu->DriverGetVersion(&cu->version) != CUDA_SUCCESS) {
		gck_cuda_close(cu);
		return gck_set_error(ctx, GCK_ECUDA, "the CUDA driver %s does "
		    "not tell its version", path);
	}
	gck_cuda_version_string(cu->version, ver, sizeof ver);
	for (i = 0; i < sizeof syms / sizeof syms[0]; i++) {
		fn = NULL;
		if (getproc(syms[i].name, &fn, GCK_CUDA_CKPT_VERSION,
		    CU_GET_PROC_ADDRESS_DEFAULT, &qr) != CUDA_SUCCESS ||
		    fn == NULL) {
			gck_set_error(ctx, GCK_ECUDA, "the CUDA driver (%s) "
			    "lacks %s: %s", ver, syms[i].name, syms[i].ckpt ||
			    cu->version < GCK_CUDA_CKPT_VERSION ?
			    "checkpointing CUDA processes needs NVIDIA driver "
			    "r570 (CUDA 12.8) or newer" : "a broken driver?");
			gck_cuda_close(cu);
			return GCK_ECUDA;
		}
		*(void **)((char *)cu + syms[i].off) = fn;
	}
	cuda_open_storage(cu, getproc);
	if (cu->version < GCK_CUDA_CKPT_VERSION) {
		gck_cuda_close(cu);
		return gck_set_error(ctx, GCK_ECUDA, "the CUDA driver is %s: "
		    "checkpointing CUDA processes needs NVIDIA driver r570 "
		    "(CUDA 12.8) or newer", ver);
	}
	*cup = cu;
	return GCK_OK;
}

/*
 * Initializes the driver, and NVML when there is one, in this process.
 * The GPUs are seen whole:
 * CUDA_VISIBLE_DEVICES, meant for applications, would hide some and
 * renumber the rest.
 */
int
gck_cuda_init(struct gck_ctx *ctx, struct gck_cuda *cu)
{
	CUresult	r;

	if (cu->inited)
		return GCK_OK;
	unsetenv("CUDA_VISIBLE_DEVICES");
	if ((r = cu->Init(0)) != CUDA_SUCCESS)
		return gck_set_error(ctx, GCK_ECUDA, "cannot initialize the "
		    "CUDA driver: %s", gck_cuda_errname(cu, r));
	cu->inited = 1;
	nvml_open(cu);
	return GCK_OK;
}

void
gck_cuda_close(struct gck_cuda *cu)
{
	if (cu == NULL)
		return;
	if (cu->nvml != NULL) {
		cu->NvmlShutdown();
		dlclose(cu->nvml);
	}
	/* libcuda is never unloaded: its threads may outlive a dlclose. */
	free(cu->spool);
	free(cu);
}

int
gck_cuda_version(const struct gck_cuda *cu)
{
	return cu->version;
}

const char *
gck_cuda_release(const struct gck_cuda *cu)
{
	return cu->release[0] != '\0' ? cu->release : NULL;
}

/*
 * Has each step take the processes one after the other (serial: 1), as
 * the driver wants it for the processes of one job (job.c), rather than
 * all at once.
 */
void
gck_cuda_set_serial(struct gck_cuda *cu, int serial)
{
	cu->serial = serial;
}

int
gck_cuda_has_nvml(const struct gck_cuda *cu)
{
	return cu->nvml != NULL;
}

/*
 * Keeps, of the n candidate processes, those the driver holds state
 * for: a process that loaded the driver but never initialized it has
 * none.  Returns GCK_OK with *procsp (n entries at most) and *np set.
 */
int
gck_cuda_find(struct gck_ctx *ctx, struct gck_cuda *cu,
    const struct gck_proc *cand, size_t n, struct gck_cproc **procsp,
    size_t *np)
{
	struct gck_cproc	*procs;
	CUprocessState		 st;
	CUresult		 r;
	size_t			 i, k = 0;

	*procsp = NULL;
	*np = 0;
	if ((procs = calloc(n ? n : 1, sizeof *procs)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	for (i = 0; i < n; i++) {
		r = cu->GetState((int)cand[i].pid, &st);
		if (r == CUDA_ERROR_NOT_INITIALIZED) {
			gck_log(ctx, 2, "process %d has no CUDA state",
			    (int)cand[i].pid);
			continue;
		}
		if (r != CUDA_SUCCESS) {
			free(procs);
			return gck_set_error(ctx, GCK_ECUDA, "process %d ('%s'): "
			    "cannot read its CUDA state: %s", (int)cand[i].pid,
			    cand[i].comm, gck_cuda_errname(cu, r));
		}
		procs[k].pid = cand[i].pid;
		snprintf(procs[k].comm, sizeof procs[k].comm, "%s",
		    cand[i].comm);
		procs[k].state = st;
		k++;
	}
	*procsp = procs;
	*np = k;
	return GCK_OK;
}

/*
 * Lists the GPUs of this host, in driver order.  With want_free, also
 * their free memory: from NVML, else through a context on each GPU.
 */
int
gck_cuda_devices(struct gck_ctx *ctx, struct gck_cuda *cu, int want_free,
    struct gck_gpu **gpusp, size_t *np)
{
	struct gck_gpu		*gpus = NULL, *g;
	struct nvml_memory	 nm;
	nvml_dev		 nd;
	CUdevice		 dev;
	CUcontext		 c, old;
	CUuuid			 uu;
	CUresult		 r;
	size_t			 total, free_b, tot_b;
	unsigned int		 minor;
	int			 n, i;

	*gpusp = NULL;
	*np = 0;
	if ((r = cu->DeviceGetCount(&n)) != CUDA_SUCCESS)
		return gck_set_error(ctx, GCK_ECUDA, "cannot count the GPUs: "
		    "%s", gck_cuda_errname(cu, r));
	if (n > GCK_GPUS_MAX)
		n = GCK_GPUS_MAX;
	if (n > 0 && (gpus = calloc((size_t)n, sizeof *gpus)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	for (i = 0; i < n; i++) {
		g = &gpus[i];
		g->index = i;
		g->free = -1;
		if ((r = cu->DeviceGet(&dev, i)) != CUDA_SUCCESS ||
		    (r = cu->DeviceGetName(g->name, sizeof g->name, dev)) !=
		    CUDA_SUCCESS ||
		    (r = cu->DeviceGetUuid(&uu, dev)) != CUDA_SUCCESS ||
		    (r = cu->DeviceTotalMem(&total, dev)) != CUDA_SUCCESS ||
		    (r = cu->DeviceGetAttribute(&g->cc_major,
		    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)) !=
		    CUDA_SUCCESS ||
		    (r = cu->DeviceGetAttribute(&g->cc_minor,
		    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)) !=
		    CUDA_SUCCESS ||
		    (r = cu->DeviceGetPCIBusId(g->pci, sizeof g->pci, dev)) !=
		    CUDA_SUCCESS) {
			free(gpus);
			return gck_set_error(ctx, GCK_ECUDA, "cannot query GPU "
			    "%d: %s", i, gck_cuda_errname(cu, r));
		}
		memcpy(g->uuid, uu.bytes, sizeof g->uuid);
		format_uuid(g->uuid, g->uuidstr, sizeof g->uuidstr);
		g->total = total;
		g->minor = -1;
		if (cu->nvml != NULL && cu->NvmlMinor != NULL &&
		    cu->NvmlByUuid(g->uuidstr, &nd) == NVML_OK &&
		    cu->NvmlMinor(nd, &minor) == NVML_OK && minor < 254)
			g->minor = (int)minor;
		if (!want_free)
			continue;
		if (cu->nvml != NULL && cu->NvmlByUuid(g->uuidstr, &nd) ==
		    NVML_OK && cu->NvmlMemory(nd, &nm) == NVML_OK) {
			g->free = (int64_t)nm.free;
			continue;
		}
		if (cu->PrimaryCtxRetain(&c, dev) != CUDA_SUCCESS)
			continue;
		if (cu->CtxPushCurrent(c) == CUDA_SUCCESS) {
			if (cu->MemGetInfo(&free_b, &tot_b) == CUDA_SUCCESS)
				g->free = (int64_t)free_b;
			cu->CtxPopCurrent(&old);
		}
		cu->PrimaryCtxRelease(dev);
	}
	*gpusp = gpus;
	*np = (size_t)n;
	return GCK_OK;
}

/*
 * Records which GPUs each process uses, and how much memory on each,
 * as NVML tells.  Without NVML every process is taken to use every GPU,
 * amount unknown.
 */
void
gck_cuda_usage(struct gck_cuda *cu, const struct gck_gpu *gpus, size_t ngpus,
    struct gck_cproc *procs, size_t nprocs)
{
	struct nvml_process	*np = NULL;
	nvml_dev		 nd;
	unsigned int		 cnt, k;
	size_t			 g, i;

	for (i = 0; i < nprocs; i++) {
		procs[i].gpus = 0;
		memset(procs[i].mem, 0, sizeof procs[i].mem);
		procs[i].gpu_memory_known = 0;
	}
	if (cu->nvml != NULL)
		np = calloc(NVML_PROCS_MAX, sizeof *np);
	for (g = 0; g < ngpus; g++) {
		cnt = NVML_PROCS_MAX;
		if (np == NULL || cu->NvmlByUuid(gpus[g].uuidstr, &nd) !=
		    NVML_OK || cu->NvmlProcesses(nd, &cnt, np) != NVML_OK) {
			for (i = 0; i < nprocs; i++)
				procs[i].gpus |= 1ULL << g;
			continue;
		}
		for (i = 0; i < nprocs; i++) {
			procs[i].gpu_memory_known = 1;
			for (k = 0; k < cnt; k++) {
				if (np[k].pid != (unsigned int)procs[i].pid)
					continue;
				procs[i].gpus |= 1ULL << g;
				if (np[k].used != NVML_NOT_AVAILABLE)
					procs[i].mem[g] += (int64_t)np[k].used;
			}
		}
	}
	free(np);
}

/* Reads the state of p; on failure marks p failed and returns -1. */
static int
read_state(struct gck_cuda *cu, struct gck_cproc *p)
{
	CUprocessState	st;
	CUresult	r;

	if ((r = cu->GetState((int)p->pid, &st)) != CUDA_SUCCESS) {
		p->cuerr = r;
		p->getstate = 1;
		p->failed = 1;
		return -1;
	}
	p->state = st;
	return 0;
}

/* One step for one process: the state is checked before and after. */
static void
run_step(struct gck_cuda *cu, struct gck_cproc *p, enum gck_cstep step,
    unsigned int lock_ms)
{
	CUcheckpointLockArgs		 la;
	CUcheckpointCheckpointArgs	 ca;
	CUcheckpointRestoreArgs		 ra;
	CUcheckpointUnlockArgs		 ua;
	CUprocessState			 st;
	CUresult			 r = CUDA_ERROR_INVALID_VALUE;

	p->step = step;
	p->cuerr = CUDA_SUCCESS;
	p->failed = 0;
	p->getstate = 0;
	p->syserr = 0;
	p->srcfail = 0;
	if (read_state(cu, p) == -1)
		return;
	/* Custom storage may have taken it there already. */
	if (p->custom && (step == GCK_CS_CHECKPOINT ||
	    step == GCK_CS_RESTORE) && p->state == (int)step_to[step])
		return;
	if (p->state != (int)step_from[step]) {
		p->failed = 1;
		return;
	}
	switch (step) {
	case GCK_CS_LOCK:
		memset(&la, 0, sizeof la);
		la.timeoutMs = lock_ms;
		r = cu->Lock((int)p->pid, &la);
		break;
	case GCK_CS_CHECKPOINT:
		if (cu->spool != NULL && gck_cuda_storage(cu)) {
			switch (gck_cuda_store_copy_out(cu, p)) {
			case 0:
				r = CUDA_SUCCESS;
				goto done;
			case -1:
				goto failed;
			}
		}
		memset(&ca, 0, sizeof ca);
		r = cu->Checkpoint((int)p->pid, &ca);
		break;
	case GCK_CS_RESTORE:
		if (p->custom) {
			if (!gck_cuda_storage(cu) ||
			    gck_cuda_store_copy_back(cu, p) == -1)
				goto failed;
			r = CUDA_SUCCESS;
			break;
		}
		memset(&ra, 0, sizeof ra);
		ra.gpuPairs = p->npairs > 0 ? (CUcheckpointGpuPair *)p->pairs :
		    NULL;
		ra.gpuPairsCount = p->npairs;
		r = cu->Restore((int)p->pid, p->npairs > 0 ? &ra : NULL);
		break;
	case GCK_CS_UNLOCK:
		memset(&ua, 0, sizeof ua);
		r = cu->Unlock((int)p->pid, &ua);
		break;
	}
	if (r != CUDA_SUCCESS) {
		p->cuerr = r;
failed:
		p->failed = 1;
		if (cu->GetState((int)p->pid, &st) == CUDA_SUCCESS)
			p->state = st;
		return;
	}
done:
	if (read_state(cu, p) == -1)
		return;
	if (p->state != (int)step_to[step])
		p->failed = 1;
}

static void *
step_thread(void *arg)
{
	struct step_job	*j = arg;

	run_step(j->cu, j->p, j->step, j->lock_ms);
	return NULL;
}

/*
 * Brings one process back to RUNNING from wherever the steps left it:
 * a checkpointed process is restored onto its own GPUs, then unlocked.
 */
static void *
settle_thread(void *arg)
{
	struct step_job	*j = arg;
	struct gck_cproc *p = j->p;
	CUcheckpointUnlockArgs ua;
	CUprocessState	 st, was;
	CUresult	 r;
	int		 tries;

	p->failed = 0;
	p->cuerr = CUDA_SUCCESS;
	p->getstate = 0;
	for (tries = 0; tries < 8; tries++) {
		if ((r = j->cu->GetState((int)p->pid, &st)) != CUDA_SUCCESS) {
			if (kill(p->pid, 0) == -1 && errno == ESRCH)
				return NULL;	/* gone: nothing to settle */
			p->cuerr = r;
			p->getstate = 1;
			p->failed = 1;
			return NULL;
		}
		p->state = st;
		switch (st) {
		case CU_PROCESS_STATE_RUNNING:
			p->failed = 0;
			p->cuerr = CUDA_SUCCESS;
			return NULL;
		case CU_PROCESS_STATE_LOCKED:
			p->step = GCK_CS_UNLOCK;
			memset(&ua, 0, sizeof ua);
			r = j->cu->Unlock((int)p->pid, &ua);
			break;
		case CU_PROCESS_STATE_CHECKPOINTED:
			p->step = GCK_CS_RESTORE;
			if (p->custom)
				r = gck_cuda_storage(j->cu) &&
				    gck_cuda_store_copy_back(j->cu, p) == 0 ?
				    CUDA_SUCCESS : p->cuerr != CUDA_SUCCESS ?
				    (CUresult)p->cuerr : CUDA_ERROR_UNKNOWN;
			else
				r = j->cu->Restore((int)p->pid, NULL);
			break;
		default:
			p->failed = 1;
			return NULL;
		}
		if (r == CUDA_SUCCESS)
			continue;
		/*
		 * A step still under way in the process (one whose caller
		 * is gone) may have moved it on: look again.
		 */
		p->cuerr = r;
		p->failed = 1;
		was = st;
		if (j->cu->GetState((int)p->pid, &st) != CUDA_SUCCESS ||
		    st == was)
			return NULL;
		p->state = st;
	}
	p->failed = 1;
	return NULL;
}

static void
run_all(struct gck_cuda *cu, struct gck_cproc *procs, size_t n,
    enum gck_cstep step, unsigned int lock_ms, void *(*fn)(void *))
{
	struct step_job	*jobs;
	pthread_t	*th;
	char		*started;
	size_t		 i;

	jobs = calloc(n ? n : 1, sizeof *jobs);
	th = calloc(n ? n : 1, sizeof *th);
	started = calloc(n ? n : 1, 1);
	for (i = 0; i < n; i++) {
		struct step_job	 one = { cu, &procs[i], step, lock_ms };

		/* The driver takes the processes of a job one at a time. */
		if (cu->serial || jobs == NULL || th == NULL ||
		    started == NULL) {
			fn(&one);
			continue;
		}
		jobs[i] = one;
		if (pthread_create(&th[i], NULL, fn, &jobs[i]) == 0)
			started[i] = 1;
		else
			fn(&jobs[i]);
	}
	for (i = 0; i < n; i++)
		if (started != NULL && started[i])
			pthread_join(th[i], NULL);
	free(started);
	free(th);
	free(jobs);
}

/*
 * Why the driver may refuse to lock a process: memory it shares
 * through CUDA IPC, which it checkpoints only in a job (job.c), from
 * r610.
 */
static void
ipc_why(const struct gck_cuda *cu, char *buf, size_t len)
{
	if (!cu->serial)
		snprintf(buf, len, " (a process that shares device memory "
		    "through CUDA IPC is checkpointed only in a job started "
		    "with gpuckpt --launch, on NVIDIA driver r610 or newer)");
	else if (cu->release[0] == '\0' ||
	    atoi(cu->release) < GCK_CUDA_IPC_RELEASE)
		snprintf(buf, len, " (a process that shares device memory "
		    "through CUDA IPC is checkpointed only on NVIDIA driver "
		    "r610 or newer; this driver is %s)", cu->release[0] !=
		    '\0' ? cu->release : "of an unknown release");
}

/*
 * Whether pid has NCCL loaded without libgpuckpt-nccl.so: its ranks
 * cannot quiesce before the lock.
 */
static int
nccl_alone(pid_t pid)
{
	char	 path[64], line[PATH_MAX + 128];
	FILE	*f;
	int	 nccl = 0, hook = 0;

	snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
	if ((f = fopen(path, "re")) == NULL)
		return 0;
	while (fgets(line, sizeof line, f) != NULL) {
		if (strstr(line, "/libnccl.so") != NULL)
			nccl = 1;
		else if (strstr(line, "/libgpuckpt-nccl.so") != NULL)
			hook = 1;
	}
	fclose(f);
	return nccl && !hook;
}

/* Describes what went wrong for p into buf. */
static void
describe(const struct gck_cuda *cu, const struct gck_cproc *p,
    unsigned int lock_ms, char *buf, size_t len)
{
	const char	*step = step_names[p->step];
	int		 st = p->state;

	if (p->custom && p->syserr == EBADMSG && cu->src == NULL)
		snprintf(buf, len, "process %d ('%s'): GPU %s through custom "
		    "storage failed: the spool's copy of the memory of its GPU "
		    "%u is damaged (it does not match its digest), and was not "
		    "given to the GPU", (int)p->pid, p->comm, step, p->faildev);
	else if (p->custom && p->syserr != 0)
		snprintf(buf, len, "process %d ('%s'): GPU %s through custom "
		    "storage failed: the memory of its GPU %u: %s%s",
		    (int)p->pid, p->comm, step, p->faildev,
		    strerror(p->syserr), p->step == GCK_CS_RESTORE &&
		    cu->src != NULL ? "" : " (in the spool)");
	else if (p->custom && p->srcfail != 0)
		snprintf(buf, len, "process %d ('%s'): GPU %s through custom "
		    "storage failed: %s its GPU %u", (int)p->pid, p->comm,
		    step, p->srcfail > 0 ? "cannot read the memory of" :
		    p->srcfail == -2 ? "the driver maps a size other than the "
		    "image's for" : "the image does not hold as many bytes "
		    "as the driver maps for", p->faildev);
	else if (p->custom && p->step == GCK_CS_RESTORE &&
	    !gck_cuda_storage(cu))
		snprintf(buf, len, "process %d ('%s'): cannot GPU restore: its "
		    "device memory went through custom storage, which the "
		    "driver lacks (it needs CUDA 13.4, driver API 13040)",
		    (int)p->pid, p->comm);
	else if (p->getstate)
		snprintf(buf, len, "process %d ('%s'): cannot read its CUDA "
		    "state around GPU %s: %s", (int)p->pid, p->comm, step,
		    gck_cuda_errname(cu, p->cuerr));
	else if (p->cuerr != CUDA_SUCCESS)
	{
		char	why[256] = "";

		if (p->step == GCK_CS_LOCK && p->cuerr ==
		    CUDA_ERROR_NOT_READY && nccl_alone(p->pid))
			snprintf(why, sizeof why, " (its CUDA work did not "
			    "finish within the %u ms lock timeout: an NCCL "
			    "collective waiting for a rank locked already? "
			    "For the ranks to quiesce first, preload "
			    "libgpuckpt-nccl.so, see gpuckpt(1))", lock_ms);
		else if (p->step == GCK_CS_LOCK && p->cuerr ==
		    CUDA_ERROR_NOT_READY)
			snprintf(why, sizeof why, " (its CUDA work did not "
			    "finish within the %u ms lock timeout)", lock_ms);
		else if (p->step == GCK_CS_LOCK &&
		    p->cuerr == CUDA_ERROR_NOT_SUPPORTED)
			ipc_why(cu, why, sizeof why);
		else if (p->cuerr == CUDA_ERROR_TIMEOUT)
			snprintf(why, sizeof why, " (its CUDA restore thread "
			    "did not answer)");
		snprintf(buf, len, "process %d ('%s'): GPU %s failed: %s%s%s",
		    (int)p->pid, p->comm, step, gck_cuda_errname(cu, p->cuerr),
		    why, st == CU_PROCESS_STATE_FAILED ? "; the driver reports "
		    "the process FAILED" : "");
	}
	else if (st == CU_PROCESS_STATE_FAILED)
		snprintf(buf, len, "process %d ('%s'): cannot GPU %s: the "
		    "driver reports the process FAILED", (int)p->pid, p->comm,
		    step);
	else
		snprintf(buf, len, "process %d ('%s'): cannot GPU %s: its "
		    "CUDA state is %s, not %s", (int)p->pid, p->comm, step,
		    gck_cuda_state_name(st), gck_cuda_state_name(
		    step_from[p->step]));
}

/*
 * Takes every process through one step, all at once.  On failure the
 * message names the first process that failed, the step and the
 * driver's error; the others are counted.
 */
int
gck_cuda_step(struct gck_ctx *ctx, struct gck_cuda *cu,
    struct gck_cproc *procs, size_t n, enum gck_cstep step,
    unsigned int lock_ms)
{
	char	buf[GCK_ERRMAX];
	size_t	i, nfail = 0, first = 0;

	if (n == 0)
		return GCK_OK;
	gck_log(ctx, 1, "GPU %s: %zu process%s", step_names[step], n,
	    n == 1 ? "" : "es");
	run_all(cu, procs, n, step, lock_ms, step_thread);
	for (i = 0; i < n; i++)
		if (procs[i].failed && nfail++ == 0)
			first = i;
	if (nfail == 0)
		return GCK_OK;
	describe(cu, &procs[first], lock_ms, buf, sizeof buf);
	if (nfail > 1)
		return gck_set_error(ctx, GCK_ECUDA, "%s (and %zu more)", buf,
		    nfail - 1);
	return gck_set_error(ctx, GCK_ECUDA, "%s", buf);
}

/*
 * Starts the restore of each process of procs whose device memory went
 * through custom storage: the driver maps its GPUs, for the caller to
 * write their memory from any thread (gck_cuda_store_write()), then
 * gck_cuda_end_in() to end.  On failure the message names the process.
 */
int
gck_cuda_map_in(struct gck_ctx *ctx, struct gck_cuda *cu,
    struct gck_cproc *procs, size_t n)
{
	char			 buf[GCK_ERRMAX];
	struct gck_cproc	*p;
	size_t			 i;

	for (i = 0; i < n; i++) {
		p = &procs[i];
		if (!p->custom)
			continue;
		p->step = GCK_CS_RESTORE;
		p->cuerr = CUDA_SUCCESS;
		p->failed = p->getstate = p->syserr = p->srcfail = 0;
		if (read_state(cu, p) == -1 ||
		    p->state != (int)step_from[GCK_CS_RESTORE] ||
		    !gck_cuda_storage(cu) || gck_cuda_store_map_in(cu, p) == -1) {
			describe(cu, p, 0, buf, sizeof buf);
			return gck_set_error(ctx, GCK_ECUDA, "%s", buf);
		}
	}
	return GCK_OK;
}

/*
 * Ends the restores gck_cuda_map_in() started (end: 1), each process
 * then LOCKED; or lets go of their mappings (0: they are to be killed).
 * Returns GCK_OK or a code.
 */
int
gck_cuda_end_in(struct gck_ctx *ctx, struct gck_cuda *cu,
    struct gck_cproc *procs, size_t n, int end)
{
	char	buf[GCK_ERRMAX];
	size_t	i, first = n;

	for (i = 0; i < n; i++) {
		if (procs[i].inmap == NULL)
			continue;
		if (gck_cuda_store_end_in(cu, &procs[i], end && first == n) ==
		    -1 || (end && first == n && (read_state(cu, &procs[i]) ==
		    -1 || procs[i].state != (int)step_to[GCK_CS_RESTORE]))) {
			procs[i].failed = 1;
			first = i;
		}
	}
	if (first == n)
		return GCK_OK;
	describe(cu, &procs[first], 0, buf, sizeof buf);
	return gck_set_error(ctx, GCK_ECUDA, "%s", buf);
}

/*
 * Brings every process back to RUNNING (restoring onto the same GPUs
 * what was checkpointed), all at once.  The processes must be able to
 * run: their restore threads do the work.  Returns the number that could
 * not be brought back, the first of them described in buf.
 */
size_t
gck_cuda_settle(struct gck_cuda *cu, struct gck_cproc *procs, size_t n,
    char *buf, size_t len)
{
	size_t	i, nfail = 0;

	if (len > 0)
		buf[0] = '\0';
	if (n == 0)
		return 0;
	run_all(cu, procs, n, GCK_CS_UNLOCK, 0, settle_thread);
	for (i = 0; i < n; i++)
		if (procs[i].failed && nfail++ == 0)
			describe(cu, &procs[i], 0, buf, len);
	return nfail;
}

/*
 * Collects the processes of t that have the CUDA driver or an NVIDIA
 * device mapped: those the driver may hold GPU state for.
 */
int
gck_cuda_candidates(struct gck_ctx *ctx, const struct gck_ptree *t,
    struct gck_proc **candp, size_t *np)
{
	struct gck_proc	*cand;
	size_t		 i, n = 0;

	*candp = NULL;
	*np = 0;
	if ((cand = calloc(t->n, sizeof *cand)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	for (i = 0; i < t->n; i++)
		if (gck_cuda_probe(t->procs[i].pid)) {
			cand[n] = t->procs[i];
			cand[n].cwd = NULL;
			cand[n].argv = NULL;
			cand[n].argc = 0;
			n++;
		}
	if (n == 0) {
		free(cand);
		return GCK_OK;
	}
	*candp = cand;
	*np = n;
	return GCK_OK;
}

/*
 * Loads the driver for the CUDA processes of a tree, and refuses what
 * the driver could not take: a stopped CUDA process cannot be locked or
 * checkpointed, since its CUDA restore thread must run.
 */
int
gck_cuda_prepare(struct gck_ctx *ctx, const char *what, pid_t root,
    const struct gck_proc *cand, size_t ncand, struct gck_cuda **cup)
{
	char	msg[GCK_ERRMAX];
	size_t	i;
	int	r;

	*cup = NULL;
	if (ncand == 0)
		return GCK_OK;
	for (i = 0; i < ncand; i++)
		if (cand[i].state == 'T' || cand[i].state == 't')
			return gck_set_error(ctx, GCK_EINVAL, "cannot %s pid %d: "
			    "CUDA process %d ('%s') is stopped, and its CUDA "
			    "restore thread must run (continue it with kill "
			    "-CONT %d)", what, (int)root, (int)cand[i].pid,
			    cand[i].comm, (int)cand[i].pid);
	if ((r = gck_cuda_open(ctx, cup)) != GCK_OK) {
		snprintf(msg, sizeof msg, "%s", ctx->msg);
		return gck_set_error(ctx, r, "cannot %s pid %d: process %d "
		    "('%s') uses CUDA, but %s", what, (int)root,
		    (int)cand[0].pid, cand[0].comm, msg);
	}
	return GCK_OK;
}

/* Refuses CUDA processes that are not RUNNING: someone else has them. */
int
gck_cuda_all_running(struct gck_ctx *ctx, const char *what,
    const struct gck_cproc *cp, size_t n)
{
	size_t	i;

	for (i = 0; i < n; i++) {
		if (cp[i].state == CU_PROCESS_STATE_RUNNING)
			continue;
		return gck_set_error(ctx, GCK_EINVAL, "cannot %s process %d "
		    "('%s'): its CUDA state is %s%s", what, (int)cp[i].pid,
		    cp[i].comm, gck_cuda_state_name(cp[i].state),
		    cp[i].state == CU_PROCESS_STATE_CHECKPOINTED ?
		    " (suspended: bring it back with "
		    "gpurestore --resume first)" :
		    cp[i].state == CU_PROCESS_STATE_LOCKED ?
		    " (another checkpoint holds it)" : "");
	}
	return GCK_OK;
}

/*
 * Brings the CUDA processes among cand back onto their GPUs, through a
 * driver of its own: the guard, which calls it, was forked before
 * gpuckpt initialized one.  Device memory that went through custom
 * storage comes back from the spool beside work, files of sops.
 */
void
gck_cuda_bring_back(struct gck_ctx *ctx, const struct gck_proc *cand,
    size_t ncand, const char *work, const struct gck_cuda_spool *sops)
{
	struct gck_cuda		*cu = NULL;
	struct gck_cproc	*cp = NULL;
	size_t			 ncp = 0;
	char			 why[GCK_ERRMAX], spool[PATH_MAX];

	if (ncand == 0 || gck_cuda_open(ctx, &cu) != GCK_OK)
		return;
	/* A job's, named to us by the checkpoint (job.c): one at a time. */
	cu->serial = getenv(GCK_JOB_ENV) != NULL;
	if (gck_cuda_init(ctx, cu) == GCK_OK &&
	    gck_cuda_find(ctx, cu, cand, ncand, &cp, &ncp) == GCK_OK) {
		/* Device memory that went through custom storage: its spool. */
		if (work != NULL && (size_t)snprintf(spool, sizeof spool,
		    "%s" GCK_SPOOL_SUFFIX, work) < sizeof spool)
			gck_cuda_spool_learn(cu, cp, ncp, spool, sops);
		gck_cuda_settle(cu, cp, ncp, why, sizeof why);
	}
	free(cp);
	gck_cuda_close(cu);
}
