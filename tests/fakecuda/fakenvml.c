/*
 * fakenvml.c -- a stand-in for libnvidia-ml.so.1 in the tests.
 *
 * It reads the files of the stand-in CUDA driver (fakecuda.c) under
 * FAKECUDA_DIR: the GPUs from gpus, the release from driver, and the
 * memory each process holds from the sizes of mem/UUID/PID.  A device
 * handle stands for an ordinal, that is a line of gpus read afresh at
 * each call.  Processes that are gone hold no memory.  As the real
 * NVML, it names a process by its PID as the caller sees it, not by the
 * PID in its own namespace that its files are named by (see
 * mem_holder() in gpus.c).  Its events are described above
 * nvmlEventSetCreate() below.
 */

#include "config.h"

#include <sys/types.h>
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpus.h"

/* The parts of nvml.h that are stood in for. */
#define NVML_SUCCESS			0
#define NVML_ERROR_UNINITIALIZED	1
#define NVML_ERROR_INVALID_ARGUMENT	2
#define NVML_ERROR_NOT_SUPPORTED	3
#define NVML_ERROR_NOT_FOUND		6
#define NVML_ERROR_INSUFFICIENT_SIZE	7
#define NVML_ERROR_DRIVER_NOT_LOADED	9
#define NVML_ERROR_TIMEOUT		10
#define NVML_ERROR_GPU_IS_LOST		15
#define NVML_ERROR_UNKNOWN		999
#define NVML_VALUE_NOT_AVAILABLE	0xffffffffU

struct nvml_device {
	unsigned int	 index;
};

struct nvml_memory {
	unsigned long long total, free, used;
};

struct nvml_process_info {
	unsigned int	 pid;
	unsigned long long usedGpuMemory;
	unsigned int	 gpuInstanceId;
	unsigned int	 computeInstanceId;
};

int		 nvmlInit_v2(void);
int		 nvmlInit(void);
int		 nvmlShutdown(void);
const char	*nvmlErrorString(int);
int		 nvmlSystemGetDriverVersion(char *, unsigned int);
int		 nvmlDeviceGetCount_v2(unsigned int *);
int		 nvmlDeviceGetCount(unsigned int *);
int		 nvmlDeviceGetHandleByIndex_v2(unsigned int,
		    struct nvml_device **);
int		 nvmlDeviceGetHandleByIndex(unsigned int,
		    struct nvml_device **);
int		 nvmlDeviceGetHandleByUUID(const char *, struct nvml_device **);
int		 nvmlDeviceGetUUID(struct nvml_device *, char *, unsigned int);
int		 nvmlDeviceGetName(struct nvml_device *, char *, unsigned int);
int		 nvmlDeviceGetCudaComputeCapability(struct nvml_device *, int *,
		    int *);
int		 nvmlDeviceGetMemoryInfo(struct nvml_device *,
		    struct nvml_memory *);
int		 nvmlDeviceGetMinorNumber(struct nvml_device *, unsigned int *);
int		 nvmlDeviceGetComputeRunningProcesses_v3(struct nvml_device *,
		    unsigned int *, struct nvml_process_info *);

static int		 gpus_read(int, const char *, struct gpu *, int *);
static int		 device(struct nvml_device *, struct gpu *);
static int		 copy_out(char *, unsigned int, const char *);
static int		 procs(const char *, struct nvml_process_info *,
			    unsigned int);
static int		 gpu_lost(const char *);

static struct nvml_device	 devices[MAXGPUS];
static char			*fakedir;
static int			 initcount;

/*
 * The GPU of ordinal index, or with that UUID, read afresh: copied to *g
 * with its ordinal in *ordp (-1 when there is none).  Returns how many
 * GPUs there are.
 */
static int
gpus_read(int index, const char *uuid, struct gpu *g, int *ordp)
{
	unsigned char	u[16];

	if (uuid == NULL)
		return gpus_scan(fakedir, index, NULL, g, ordp);
	if (uuid_parse(uuid, u) == -1)		/* no GPU has it */
		return gpus_scan(fakedir, -1, NULL, g, ordp);
	return gpus_scan(fakedir, index, u, g, ordp);
}

static int
device(struct nvml_device *d, struct gpu *g)
{
	int	ord = -1;

	if (initcount == 0)
		return NVML_ERROR_UNINITIALIZED;
	if (d >= &devices[0] && d < &devices[MAXGPUS])
		gpus_read((int)d->index, NULL, g, &ord);
	if (ord == -1)
		return NVML_ERROR_INVALID_ARGUMENT;
	return gpu_lost(g->uuidstr) ? NVML_ERROR_GPU_IS_LOST : NVML_SUCCESS;
}

static int
copy_out(char *buf, unsigned int len, const char *s)
{
	if (buf == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (strlen(s) >= len)
		return NVML_ERROR_INSUFFICIENT_SIZE;
	memcpy(buf, s, strlen(s) + 1);
	return NVML_SUCCESS;
}

/*
 * The live processes with memory on the GPU, by their PIDs as we see
 * them: fills max entries of out at most and returns how many there
 * are.
 */
static int
procs(const char *uuid, struct nvml_process_info *out, unsigned int max)
{
	struct dirent	*de;
	struct stat	 st;
	char		 dir[PATH_MAX], path[PATH_MAX], *e;
	DIR		*d;
	long		 key;
	pid_t		 pid;
	int		 n = 0;

	snprintf(dir, sizeof dir, "%s/mem/%s", fakedir, uuid);
	if ((d = opendir(dir)) == NULL)
		return 0;
	while ((de = readdir(d)) != NULL) {
		key = strtol(de->d_name, &e, 10);
		if (*e != '\0' || key <= 0 || key > INT_MAX ||
		    snprintf(path, sizeof path, "%s/%s", dir, de->d_name) >=
		    (int)sizeof path ||
		    (pid = mem_holder(path, (pid_t)key)) == -1 ||
		    fstatat(dirfd(d), de->d_name, &st, 0) == -1)
			continue;
		if (out != NULL && (unsigned int)n < max) {
			out[n].pid = (unsigned int)pid;
			out[n].usedGpuMemory = (unsigned long long)st.st_size;
			out[n].gpuInstanceId = NVML_VALUE_NOT_AVAILABLE;
			out[n].computeInstanceId = NVML_VALUE_NOT_AVAILABLE;
		}
		n++;
	}
	closedir(d);
	return n;
}

int
nvmlInit_v2(void)
{
	const char	*d = getenv("FAKECUDA_DIR");

	if (initcount > 0) {
		initcount++;
		return NVML_SUCCESS;
	}
	if (d == NULL || *d == '\0')
		return NVML_ERROR_DRIVER_NOT_LOADED;
	free(fakedir);
	if ((fakedir = strdup(d)) == NULL)
		return NVML_ERROR_UNKNOWN;
	initcount = 1;
	return NVML_SUCCESS;
}

int
nvmlInit(void)
{
	return nvmlInit_v2();
}

int
nvmlShutdown(void)
{
	if (initcount == 0)
		return NVML_ERROR_UNINITIALIZED;
	/* The last shutdown lets go, as the caller may dlclose() us. */
	if (--initcount == 0) {
		free(fakedir);
		fakedir = NULL;
	}
	return NVML_SUCCESS;
}

const char *
nvmlErrorString(int result)
{
	switch (result) {
	case NVML_SUCCESS:
		return "Success";
	case NVML_ERROR_UNINITIALIZED:
		return "Uninitialized";
	case NVML_ERROR_INVALID_ARGUMENT:
		return "Invalid Argument";
	case NVML_ERROR_NOT_SUPPORTED:
		return "Not Supported";
	case NVML_ERROR_NOT_FOUND:
		return "Not Found";
	case NVML_ERROR_INSUFFICIENT_SIZE:
		return "Insufficient Size";
	case NVML_ERROR_DRIVER_NOT_LOADED:
		return "Driver Not Loaded";
	case NVML_ERROR_TIMEOUT:
		return "Timeout";
	case NVML_ERROR_GPU_IS_LOST:
		return "GPU is lost";
	default:
		return "Unknown Error";
	}
}

/* The second word of driver, "580.65.06" when there is none. */
int
nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
	char	 path[PATH_MAX], buf[256], *p = buf, *w;
	ssize_t	 n;
	int	 fd;

	if (initcount == 0)
		return NVML_ERROR_UNINITIALIZED;
	snprintf(path, sizeof path, "%s/driver", fakedir);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return copy_out(version, length, "580.65.06");
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	if (next_word(&p) == NULL || (w = next_word(&p)) == NULL)
		return copy_out(version, length, "580.65.06");
	return copy_out(version, length, w);
}

int
nvmlDeviceGetCount_v2(unsigned int *count)
{
	if (initcount == 0)
		return NVML_ERROR_UNINITIALIZED;
	if (count == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	*count = (unsigned int)gpus_read(-1, NULL, NULL, NULL);
	return NVML_SUCCESS;
}

int
nvmlDeviceGetCount(unsigned int *count)
{
	return nvmlDeviceGetCount_v2(count);
}

int
nvmlDeviceGetHandleByIndex_v2(unsigned int index, struct nvml_device **dev)
{
	if (initcount == 0)
		return NVML_ERROR_UNINITIALIZED;
	if (dev == NULL ||
	    index >= (unsigned int)gpus_read(-1, NULL, NULL, NULL))
		return NVML_ERROR_INVALID_ARGUMENT;
	devices[index].index = index;
	*dev = &devices[index];
	return NVML_SUCCESS;
}

int
nvmlDeviceGetHandleByIndex(unsigned int index, struct nvml_device **dev)
{
	return nvmlDeviceGetHandleByIndex_v2(index, dev);
}

int
nvmlDeviceGetHandleByUUID(const char *uuid, struct nvml_device **dev)
{
	struct gpu	g;
	int		ord;

	if (initcount == 0)
		return NVML_ERROR_UNINITIALIZED;
	if (uuid == NULL || dev == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	gpus_read(-1, uuid, &g, &ord);
	if (ord == -1)
		return NVML_ERROR_NOT_FOUND;
	devices[ord].index = (unsigned int)ord;
	*dev = &devices[ord];
	return NVML_SUCCESS;
}

int
nvmlDeviceGetUUID(struct nvml_device *d, char *uuid, unsigned int length)
{
	struct gpu	g;
	int		r;

	if ((r = device(d, &g)) != NVML_SUCCESS)
		return r;
	return copy_out(uuid, length, g.uuidstr);
}

/*
 * The minor number of its device node, /dev/nvidiaN: its ordinal, as on
 * a host whose GPUs the driver numbered in the order of their buses.
 */
int
nvmlDeviceGetMinorNumber(struct nvml_device *d, unsigned int *minor)
{
	struct gpu	g;
	int		r;

	if ((r = device(d, &g)) != NVML_SUCCESS)
		return r;
	if (minor == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	*minor = d->index;
	return NVML_SUCCESS;
}

int
nvmlDeviceGetName(struct nvml_device *d, char *name, unsigned int length)
{
	struct gpu	g;
	int		r;

	if ((r = device(d, &g)) != NVML_SUCCESS)
		return r;
	return copy_out(name, length, g.name);
}

int
nvmlDeviceGetCudaComputeCapability(struct nvml_device *d, int *major,
    int *minor)
{
	struct gpu	g;
	int		r;

	if ((r = device(d, &g)) != NVML_SUCCESS)
		return r;
	if (major == NULL || minor == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	*major = g.major;
	*minor = g.minor;
	return NVML_SUCCESS;
}

int
nvmlDeviceGetMemoryInfo(struct nvml_device *d, struct nvml_memory *mem)
{
	struct nvml_process_info	*p = NULL;
	struct gpu			 g;
	unsigned long long		 used = 0;
	int				 r, n, i;

	if ((r = device(d, &g)) != NVML_SUCCESS)
		return r;
	if (mem == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	n = procs(g.uuidstr, NULL, 0);
	if (n > 0 && (p = calloc((size_t)n, sizeof *p)) == NULL)
		return NVML_ERROR_UNKNOWN;
	n = procs(g.uuidstr, p, (unsigned int)n);
	for (i = 0; p != NULL && i < n; i++)
		used += p[i].usedGpuMemory;
	free(p);
	mem->total = g.total;
	mem->used = used < g.total ? used : g.total;
	mem->free = g.total - mem->used;
	return NVML_SUCCESS;
}

/*
 * Fewer slots than processes: NVML_ERROR_INSUFFICIENT_SIZE, with the
 * number needed in *count.
 */
int
nvmlDeviceGetComputeRunningProcesses_v3(struct nvml_device *d,
    unsigned int *count, struct nvml_process_info *infos)
{
	struct gpu	g;
	unsigned int	n;
	int		r;

	if ((r = device(d, &g)) != NVML_SUCCESS)
		return r;
	if (count == NULL || (*count > 0 && infos == NULL))
		return NVML_ERROR_INVALID_ARGUMENT;
	n = (unsigned int)procs(g.uuidstr, infos, *count);
	if (n > *count) {
		*count = n;
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	*count = n;
	return NVML_SUCCESS;
}

/*
 * Events.  A test injects one by appending a line to events/UUID under
 * FAKECUDA_DIR (fakectl event), with one write(2):
 *	KIND [DATA]
 * KIND is one of sbe, dbe, pstate, xid, clock, sbe-storm, retire,
 * retire-failed, poison, poison-fatal, unavailable, recovery (the event
 * types of NVML, DATA its eventData), or lost: the GPU has fallen off
 * the bus, and from then on every call on it, and every wait of a set
 * it is in, fails with NVML_ERROR_GPU_IS_LOST.  "clock REASONS" makes
 * REASONS (a number, as strtoull() reads it with base 0) the GPU's
 * clocks event reasons, then delivers a clock event.  A set sees the
 * lines written after its device was registered, in order, those of
 * the types registered; a wait looks for them every 10 ms.  A GPU
 * supports every type, or those of the mask in events/supported, when
 * that file exists.
 */
#define EVENT_TYPES_ALL		0xff9fULL
#define EVENT_TYPE_CLOCK	0x10ULL
#define SET_MAX			MAXGPUS

struct nvml_event_data {
	struct nvml_device	*device;
	unsigned long long	 eventType;
	unsigned long long	 eventData;
	unsigned int		 gpuInstanceId;
	unsigned int		 computeInstanceId;
};

struct nvml_event_set {
	int			 n;
	unsigned int		 ord[SET_MAX];
	unsigned long long	 types[SET_MAX];
	off_t			 off[SET_MAX];	/* read so far */
};

static const struct {
	const char		*name;
	unsigned long long	 type;
} event_kinds[] = {
	{ "sbe", 0x1 }, { "dbe", 0x2 }, { "pstate", 0x4 }, { "xid", 0x8 },
	{ "clock", EVENT_TYPE_CLOCK }, { "sbe-storm", 0x200 },
	{ "retire", 0x400 }, { "retire-failed", 0x800 }, { "poison", 0x1000 },
	{ "poison-fatal", 0x2000 }, { "unavailable", 0x4000 },
	{ "recovery", 0x8000 },
};

static unsigned long long	 clock_reasons[MAXGPUS];

int	nvmlEventSetCreate(struct nvml_event_set **);
int	nvmlEventSetFree(struct nvml_event_set *);
int	nvmlDeviceGetSupportedEventTypes(struct nvml_device *,
	    unsigned long long *);
int	nvmlDeviceRegisterEvents(struct nvml_device *, unsigned long long,
	    struct nvml_event_set *);
int	nvmlEventSetWait_v2(struct nvml_event_set *, struct nvml_event_data *,
	    unsigned int);
int	nvmlEventSetWait(struct nvml_event_set *, struct nvml_event_data *,
	    unsigned int);
int	nvmlDeviceGetCurrentClocksEventReasons(struct nvml_device *,
	    unsigned long long *);
int	nvmlDeviceGetCurrentClocksThrottleReasons(struct nvml_device *,
	    unsigned long long *);

/* Whether the GPU of UUID has fallen off the bus: events/UUID says lost. */
static int
gpu_lost(const char *uuid)
{
	char	 path[PATH_MAX], line[128];
	FILE	*f;
	int	 lost = 0;

	snprintf(path, sizeof path, "%s/events/%s", fakedir, uuid);
	if ((f = fopen(path, "re")) == NULL)
		return 0;
	while (!lost && fgets(line, sizeof line, f) != NULL)
		lost = strncmp(line, "lost", 4) == 0 &&
		    (line[4] == '\n' || line[4] == ' ' || line[4] == '\0');
	fclose(f);
	return lost;
}

static unsigned long long
supported_types(void)
{
	char			 path[PATH_MAX], buf[64];
	unsigned long long	 mask = EVENT_TYPES_ALL;
	FILE			*f;

	snprintf(path, sizeof path, "%s/events/supported", fakedir);
	if ((f = fopen(path, "re")) == NULL)
		return mask;
	if (fgets(buf, sizeof buf, f) != NULL)
		mask = strtoull(buf, NULL, 0) & EVENT_TYPES_ALL;
	fclose(f);
	return mask;
}

int
nvmlEventSetCreate(struct nvml_event_set **set)
{
	if (initcount == 0)
		return NVML_ERROR_UNINITIALIZED;
	if (set == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	if ((*set = calloc(1, sizeof **set)) == NULL)
		return NVML_ERROR_UNKNOWN;
	return NVML_SUCCESS;
}

int
nvmlEventSetFree(struct nvml_event_set *set)
{
	if (initcount == 0)
		return NVML_ERROR_UNINITIALIZED;
	free(set);
	return NVML_SUCCESS;
}

int
nvmlDeviceGetSupportedEventTypes(struct nvml_device *d,
    unsigned long long *types)
{
	struct gpu	g;
	int		r;

	if ((r = device(d, &g)) != NVML_SUCCESS)
		return r;
	if (types == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	*types = supported_types();
	return NVML_SUCCESS;
}

int
nvmlDeviceRegisterEvents(struct nvml_device *d, unsigned long long types,
    struct nvml_event_set *set)
{
	struct stat	st;
	struct gpu	g;
	char		path[PATH_MAX];
	int		r, i;

	if ((r = device(d, &g)) != NVML_SUCCESS)
		return r;
	if (set == NULL || types == 0)
		return NVML_ERROR_INVALID_ARGUMENT;
	if ((types & ~supported_types()) != 0)
		return NVML_ERROR_NOT_SUPPORTED;
	for (i = 0; i < set->n && set->ord[i] != d->index; i++)
		;
	if (i == SET_MAX)
		return NVML_ERROR_UNKNOWN;
	if (i == set->n) {
		snprintf(path, sizeof path, "%s/events/%s", fakedir,
		    g.uuidstr);
		set->ord[i] = d->index;
		set->off[i] = stat(path, &st) == 0 ? st.st_size : 0;
		set->n++;
	}
	set->types[i] |= types;
	return NVML_SUCCESS;
}

/*
 * The next event of entry i of set, if a whole line of it is there:
 * 1 (an event in *data, or *lost set), 0 (none yet).
 */
static int
next_event(struct nvml_event_set *set, int i, struct nvml_event_data *data,
    int *lost)
{
	struct gpu		 g;
	char			 path[PATH_MAX], line[128], *p, *w, *nl;
	unsigned long long	 type, arg;
	ssize_t			 n;
	size_t			 k;
	int			 fd, ord;

	gpus_read((int)set->ord[i], NULL, &g, &ord);
	if (ord == -1)
		return 0;
	snprintf(path, sizeof path, "%s/events/%s", fakedir, g.uuidstr);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return 0;
	for (;;) {
		n = pread(fd, line, sizeof line - 1, set->off[i]);
		if (n <= 0 || (nl = memchr(line, '\n', (size_t)n)) == NULL) {
			close(fd);
			return 0;
		}
		*nl = '\0';
		set->off[i] += nl - line + 1;
		p = line;
		if ((w = next_word(&p)) == NULL)
			continue;
		if (strcmp(w, "lost") == 0) {
			close(fd);
			*lost = 1;
			return 1;
		}
		for (k = 0; k < sizeof event_kinds / sizeof event_kinds[0] &&
		    strcmp(event_kinds[k].name, w) != 0; k++)
			;
		if (k == sizeof event_kinds / sizeof event_kinds[0])
			continue;
		type = event_kinds[k].type;
		arg = (w = next_word(&p)) != NULL ? strtoull(w, NULL, 0) : 0;
		if (type == EVENT_TYPE_CLOCK) {
			clock_reasons[ord] = arg;
			arg = 0;
		}
		if ((set->types[i] & type) == 0)
			continue;
		close(fd);
		devices[ord].index = (unsigned int)ord;
		data->device = &devices[ord];
		data->eventType = type;
		data->eventData = arg;
		data->gpuInstanceId = NVML_VALUE_NOT_AVAILABLE;
		data->computeInstanceId = NVML_VALUE_NOT_AVAILABLE;
		return 1;
	}
}

int
nvmlEventSetWait_v2(struct nvml_event_set *set, struct nvml_event_data *data,
    unsigned int timeoutms)
{
	struct timespec	 ts = { 0, 10 * 1000 * 1000 };
	unsigned int	 waited = 0;
	int		 i, lost = 0;

	if (initcount == 0)
		return NVML_ERROR_UNINITIALIZED;
	if (set == NULL || data == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	for (;;) {
		for (i = 0; i < set->n; i++) {
			if (next_event(set, i, data, &lost) == 1)
				return lost ? NVML_ERROR_GPU_IS_LOST :
				    NVML_SUCCESS;
		}
		if (waited >= timeoutms)
			return NVML_ERROR_TIMEOUT;
		nanosleep(&ts, NULL);
		waited += 10;
	}
}

int
nvmlEventSetWait(struct nvml_event_set *set, struct nvml_event_data *data,
    unsigned int timeoutms)
{
	return nvmlEventSetWait_v2(set, data, timeoutms);
}

int
nvmlDeviceGetCurrentClocksEventReasons(struct nvml_device *d,
    unsigned long long *reasons)
{
	struct gpu	g;
	int		r;

	if ((r = device(d, &g)) != NVML_SUCCESS)
		return r;
	if (reasons == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	*reasons = clock_reasons[d->index];
	return NVML_SUCCESS;
}

int
nvmlDeviceGetCurrentClocksThrottleReasons(struct nvml_device *d,
    unsigned long long *reasons)
{
	return nvmlDeviceGetCurrentClocksEventReasons(d, reasons);
}
