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
 * mem_holder() in gpus.c).
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
int		 nvmlDeviceGetComputeRunningProcesses_v3(struct nvml_device *,
		    unsigned int *, struct nvml_process_info *);

static int		 gpus_read(int, const char *, struct gpu *, int *);
static int		 device(struct nvml_device *, struct gpu *);
static int		 copy_out(char *, unsigned int, const char *);
static int		 procs(const char *, struct nvml_process_info *,
			    unsigned int);

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
	return ord == -1 ? NVML_ERROR_INVALID_ARGUMENT : NVML_SUCCESS;
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
