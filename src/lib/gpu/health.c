/*
 * health.c: the health of GPUs, as NVML's events tell it.
 *
 * libnvidia-ml.so.1 (or the library GPUCKPT_LIBNVML names) is opened at
 * run time, as in cuda.c.  Each GPU watched is registered, in one event
 * set, for the event types the policy needs and the GPU supports
 * (nvmlDeviceGetSupportedEventTypes()); nvmlEventSetWait_v2() is then
 * called in slices of WAIT_SLICE_MS, so that a signal is seen between
 * them.  An event the policy does not name is passed over (logged at
 * level 1) and the wait goes on.
 *
 * What an event means, and whether it is fatal, that is whether the
 * device memory of the job can no longer be trusted or read, is decided
 * here, from NVIDIA's Xid catalogue and NVML's documentation:
 * - Xid critical errors: those of the table below; 48 (double-bit ECC),
 *   79 (the GPU has fallen off the bus), 94 and 95 (contained and
 *   uncontained ECC errors: the process that met it is stopped), 119
 *   and 120 (GSP errors: the GPU needs a reset) and 140 (an unrecovered
 *   ECC error) are fatal; 63, 64 (row remapping recorded, or failed),
 *   74 (NVLink) and 92 (a high single-bit ECC rate) are not.  Other Xids
 *   (13, 31, 43...: an application's own faults) are watched only when
 *   the policy lists them, and are not fatal;
 * - double-bit ECC errors: fatal;
 * - a pending page retirement or row remapping, or one that failed
 *   (nvmlEventTypeDramRetirementEvent, ...Failure): not fatal, the
 *   memory still reads, but the GPU wants a reset;
 * - clock events: only when the clocks event reasons then name a slow
 *   down (hardware, hardware thermal, software thermal, power brake);
 *   not fatal;
 * - the GPU unavailable, a fatal poison error, or NVML_ERROR_GPU_IS_LOST
 *   from the wait itself: fatal, and always watched, as nothing more
 *   can be.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "private.h"
#include "core/util.h"
#include "gpu/cuda.h"

/* The parts of nvml.h used here (NVML of driver r560 and later). */
typedef int			 nvml_ret;
typedef struct nvml_device	*nvml_dev;
typedef struct nvml_set		*nvml_set;
struct nvml_event {
	nvml_dev		 device;
	unsigned long long	 type;
	unsigned long long	 data;
	unsigned int		 gpu_instance, compute_instance;
};
#define NVML_OK			0
#define NVML_TIMEOUT		10
#define NVML_GPU_IS_LOST	15

#define EV_DBE			0x2ULL
#define EV_XID			0x8ULL
#define EV_CLOCK		0x10ULL
#define EV_RETIRE		0x400ULL
#define EV_RETIRE_FAILED	0x800ULL
#define EV_POISON_FATAL		0x2000ULL
#define EV_UNAVAILABLE		0x4000ULL

/* Clocks event reasons that are a slowdown. */
#define CLK_HW_SLOWDOWN		0x8ULL
#define CLK_SW_THERMAL		0x20ULL
#define CLK_HW_THERMAL		0x40ULL
#define CLK_HW_POWER_BRAKE	0x80ULL

#define WAIT_SLICE_MS		500
#define GPUS_MAX		64

static const struct xid {
	unsigned int	 xid;
	int		 fatal;
	const char	*what;
} xids[] = {
	{ 48, 1, "a double-bit ECC error" },
	{ 63, 0, "a row remapping or page retirement recorded" },
	{ 64, 0, "a row remapping or page retirement failed" },
	{ 74, 0, "an NVLink error" },
	{ 79, 1, "the GPU has fallen off the bus" },
	{ 92, 0, "a high single-bit ECC error rate" },
	{ 94, 1, "a contained ECC error" },
	{ 95, 1, "an uncontained ECC error" },
	{ 119, 1, "a GSP timeout" },
	{ 120, 1, "a GSP error" },
	{ 140, 1, "an unrecovered ECC error" },
};

struct gpu {
	nvml_dev	 dev;
	unsigned int	 index;
	char		 uuid[96];
};

struct gck_health {
	void		*lib;
	unsigned int	 events;
	unsigned int	*xid;		/* the policy's, or NULL: the table */
	size_t		 nxid;
	int		 allxid;
	struct gpu	 gpus[GPUS_MAX];
	size_t		 ngpus;
	nvml_set	 set;

	nvml_ret	(*Init)(void);
	nvml_ret	(*Shutdown)(void);
	const char	*(*ErrorString)(nvml_ret);
	nvml_ret	(*Count)(unsigned int *);
	nvml_ret	(*ByIndex)(unsigned int, nvml_dev *);
	nvml_ret	(*ByUuid)(const char *, nvml_dev *);
	nvml_ret	(*Uuid)(nvml_dev, char *, unsigned int);
	nvml_ret	(*Supported)(nvml_dev, unsigned long long *);
	nvml_ret	(*SetCreate)(nvml_set *);
	nvml_ret	(*SetFree)(nvml_set);
	nvml_ret	(*Register)(nvml_dev, unsigned long long, nvml_set);
	nvml_ret	(*Wait)(nvml_set, struct nvml_event *, unsigned int);
	nvml_ret	(*Reasons)(nvml_dev, unsigned long long *);
};

static const char *
nvml_error(struct gck_health *h, nvml_ret r)
{
	const char	*s = h->ErrorString != NULL ? h->ErrorString(r) : NULL;

	return s != NULL ? s : "unknown NVML error";
}

static void *
sym(struct gck_health *h, const char *name)
{
	return dlsym(h->lib, name);
}

/* Opens NVML.  Returns GCK_OK or GCK_ECUDA. */
static int
health_load(struct gck_ctx *ctx, struct gck_health *h)
{
	const char	*path = gck_nvml_path();
	nvml_ret	 r;

	if ((h->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL)) == NULL)
		return gck_set_error(ctx, GCK_ECUDA, "cannot load NVML (%s): "
		    "%s", path, dlerror());
	*(void **)&h->Init = sym(h, "nvmlInit_v2");
	*(void **)&h->Shutdown = sym(h, "nvmlShutdown");
	*(void **)&h->ErrorString = sym(h, "nvmlErrorString");
	*(void **)&h->Count = sym(h, "nvmlDeviceGetCount_v2");
	*(void **)&h->ByIndex = sym(h, "nvmlDeviceGetHandleByIndex_v2");
	*(void **)&h->ByUuid = sym(h, "nvmlDeviceGetHandleByUUID");
	*(void **)&h->Uuid = sym(h, "nvmlDeviceGetUUID");
	*(void **)&h->Supported = sym(h, "nvmlDeviceGetSupportedEventTypes");
	*(void **)&h->SetCreate = sym(h, "nvmlEventSetCreate");
	*(void **)&h->SetFree = sym(h, "nvmlEventSetFree");
	*(void **)&h->Register = sym(h, "nvmlDeviceRegisterEvents");
	*(void **)&h->Wait = sym(h, "nvmlEventSetWait_v2");
	*(void **)&h->Reasons = sym(h, "nvmlDeviceGetCurrentClocksEventReasons");
	if (h->Reasons == NULL)
		*(void **)&h->Reasons = sym(h,
		    "nvmlDeviceGetCurrentClocksThrottleReasons");
	if (h->Init == NULL || h->Shutdown == NULL || h->Count == NULL ||
	    h->ByIndex == NULL || h->ByUuid == NULL || h->Uuid == NULL ||
	    h->Supported == NULL || h->SetCreate == NULL ||
	    h->SetFree == NULL || h->Register == NULL || h->Wait == NULL) {
		dlclose(h->lib);
		h->lib = NULL;
		return gck_set_error(ctx, GCK_ECUDA, "NVML (%s) has no event "
		    "API", path);
	}
	if ((r = h->Init()) != NVML_OK) {
		gck_set_error(ctx, GCK_ECUDA, "nvmlInit: %s", nvml_error(h, r));
		dlclose(h->lib);
		h->lib = NULL;
		return GCK_ECUDA;
	}
	return GCK_OK;
}

/* Adds the GPU name names (an NVML index or a UUID) to those watched. */
static int
health_gpu(struct gck_ctx *ctx, struct gck_health *h, const char *name)
{
	struct gpu	*g = &h->gpus[h->ngpus];
	unsigned long	 n;
	char		*e;
	nvml_ret	 r;
	size_t		 i;

	if (h->ngpus == GPUS_MAX)
		return gck_set_error(ctx, GCK_EINVAL, "too many GPUs: %d at "
		    "most", GPUS_MAX);
	if (strncmp(name, "MIG-", 4) == 0)
		return gck_set_error(ctx, GCK_EINVAL, "%s: a MIG instance: "
		    "name its GPU", name);
	errno = 0;
	n = strtoul(name, &e, 10);
	if (*name >= '0' && *name <= '9' && *e == '\0' && errno == 0) {
		if ((r = h->ByIndex((unsigned int)n, &g->dev)) != NVML_OK)
			return gck_set_error(ctx, GCK_EINVAL, "no GPU %s: %s",
			    name, nvml_error(h, r));
	} else if ((r = h->ByUuid(name, &g->dev)) != NVML_OK)
		return gck_set_error(ctx, GCK_EINVAL, "no GPU %s: %s", name,
		    nvml_error(h, r));
	if ((r = h->Uuid(g->dev, g->uuid, sizeof g->uuid)) != NVML_OK)
		return gck_set_error(ctx, GCK_ECUDA, "GPU %s: its UUID: %s",
		    name, nvml_error(h, r));
	for (i = 0; i < h->ngpus; i++)
		if (strcmp(h->gpus[i].uuid, g->uuid) == 0)
			return GCK_OK;
	g->index = (unsigned int)n;
	if (*name < '0' || *name > '9') {
		/* its index, for the message: the handle's place */
		unsigned int	 count = 0, k;
		nvml_dev	 d;

		g->index = ~0u;
		if (h->Count(&count) == NVML_OK)
			for (k = 0; k < count; k++)
				if (h->ByIndex(k, &d) == NVML_OK &&
				    d == g->dev)
					g->index = k;
	}
	h->ngpus++;
	return GCK_OK;
}

/* The event types the policy needs. */
static unsigned long long
health_types(const struct gck_health *h)
{
	unsigned long long	t = EV_UNAVAILABLE | EV_POISON_FATAL;

	if (h->events & GCK_HEALTH_XID)
		t |= EV_XID;
	if (h->events & GCK_HEALTH_DBE)
		t |= EV_DBE;
	if (h->events & GCK_HEALTH_RETIRE)
		t |= EV_RETIRE | EV_RETIRE_FAILED;
	if (h->events & GCK_HEALTH_CLOCKS)
		t |= EV_CLOCK;
	return t;
}

/* Registers each GPU for what it can report of what is asked. */
static int
health_register(struct gck_ctx *ctx, struct gck_health *h)
{
	unsigned long long	 want = health_types(h), can, miss;
	nvml_ret		 r;
	size_t			 i;

	if ((r = h->SetCreate(&h->set)) != NVML_OK)
		return gck_set_error(ctx, GCK_ECUDA, "nvmlEventSetCreate: %s",
		    nvml_error(h, r));
	for (i = 0; i < h->ngpus; i++) {
		struct gpu	*g = &h->gpus[i];

		if ((r = h->Supported(g->dev, &can)) != NVML_OK)
			return gck_set_error(ctx, GCK_ECUDA, "GPU %s: the "
			    "events it reports: %s", g->uuid,
			    nvml_error(h, r));
		if ((can & want & ~(EV_UNAVAILABLE | EV_POISON_FATAL)) == 0)
			return gck_set_error(ctx, GCK_ECUDA, "GPU %s reports "
			    "none of the events asked for", g->uuid);
		if ((miss = want & ~can) != 0)
			gck_log(ctx, 1, "GPU %s cannot report events 0x%llx",
			    g->uuid, miss);
		if ((r = h->Register(g->dev, want & can, h->set)) != NVML_OK)
			return gck_set_error(ctx, GCK_ECUDA, "GPU %s: "
			    "nvmlDeviceRegisterEvents: %s", g->uuid,
			    nvml_error(h, r));
	}
	return GCK_OK;
}

int
gck_health_open(struct gck_ctx *ctx, const struct gck_health_opts *o,
    struct gck_health **hp)
{
	struct gck_health	*h;
	unsigned int		 count = 0, i;
	char			 num[16];
	int			 r;

	*hp = NULL;
	if ((h = calloc(1, sizeof *h)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	h->events = o->events;
	h->allxid = o->all_xids;
	if (o->nxids > 0) {
		if ((h->xid = calloc(o->nxids, sizeof *h->xid)) == NULL) {
			free(h);
			return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		}
		memcpy(h->xid, o->xids, o->nxids * sizeof *h->xid);
		h->nxid = o->nxids;
	}
	if ((r = health_load(ctx, h)) != GCK_OK) {
		gck_health_close(h);
		return r;
	}
	for (i = 0; i < o->ngpus && r == GCK_OK; i++)
		r = health_gpu(ctx, h, o->gpus[i]);
	if (r == GCK_OK && o->ngpus == 0) {
		if (h->Count(&count) != NVML_OK || count == 0)
			r = gck_set_error(ctx, GCK_ECUDA, "NVML shows no GPU");
		for (i = 0; i < count && r == GCK_OK; i++) {
			snprintf(num, sizeof num, "%u", i);
			r = health_gpu(ctx, h, num);
		}
	}
	if (r == GCK_OK)
		r = health_register(ctx, h);
	if (r != GCK_OK) {
		gck_health_close(h);
		return r;
	}
	*hp = h;
	return GCK_OK;
}

size_t
gck_health_count(const struct gck_health *h)
{
	return h->ngpus;
}

const char *
gck_health_uuid(const struct gck_health *h, size_t i)
{
	return i < h->ngpus ? h->gpus[i].uuid : NULL;
}

void
gck_health_close(struct gck_health *h)
{
	if (h == NULL)
		return;
	if (h->lib != NULL) {
		if (h->set != NULL)
			h->SetFree(h->set);
		h->Shutdown();
		dlclose(h->lib);
	}
	free(h->xid);
	free(h);
}

static const struct xid *
xid_find(unsigned int xid)
{
	size_t	i;

	for (i = 0; i < sizeof xids / sizeof xids[0]; i++)
		if (xids[i].xid == xid)
			return &xids[i];
	return NULL;
}

/* Whether the policy watches Xid xid. */
static int
xid_watched(const struct gck_health *h, unsigned int xid)
{
	size_t	i;

	if (h->allxid)
		return 1;
	if (h->xid == NULL)
		return xid_find(xid) != NULL;
	for (i = 0; i < h->nxid; i++)
		if (h->xid[i] == xid)
			return 1;
	return 0;
}

/* The slowdowns reasons names, into buf. */
static void
clock_names(unsigned long long reasons, char *buf, size_t len)
{
	static const struct {
		unsigned long long	 bit;
		const char		*name;
	} names[] = {
		{ CLK_HW_SLOWDOWN, "hardware slowdown" },
		{ CLK_HW_THERMAL, "hardware thermal slowdown" },
		{ CLK_SW_THERMAL, "software thermal slowdown" },
		{ CLK_HW_POWER_BRAKE, "power brake slowdown" },
	};
	size_t	i, n = 0;

	buf[0] = '\0';
	for (i = 0; i < sizeof names / sizeof names[0]; i++)
		if ((reasons & names[i].bit) && n < len)
			n += (size_t)snprintf(buf + n, len - n, "%s%s",
			    n > 0 ? ", " : "", names[i].name);
}

/*
 * What event e of GPU g means under the policy: 1 (it is one, in *ev),
 * 0 (passed over).
 */
static int
health_judge(struct gck_ctx *ctx, struct gck_health *h, struct gpu *g,
    const struct nvml_event *e, struct gck_health_event *ev)
{
	const struct xid	*x;
	unsigned long long	 reasons = 0;
	char			 buf[96];

	memset(ev, 0, sizeof *ev);
	snprintf(ev->uuid, sizeof ev->uuid, "%s", g->uuid);
	ev->index = g->index;
	ev->data = e->data;
	switch (e->type) {
	case EV_XID:
		ev->kind = "xid";
		x = xid_find((unsigned int)e->data);
		ev->fatal = x != NULL && x->fatal;
		snprintf(ev->what, sizeof ev->what, "Xid %llu%s%s", e->data,
		    x != NULL ? ": " : "", x != NULL ? x->what : "");
		if (!xid_watched(h, (unsigned int)e->data)) {
			gck_log(ctx, 1, "GPU %s: %s, not watched", g->uuid,
			    ev->what);
			return 0;
		}
		return 1;
	case EV_DBE:
		ev->kind = "dbe";
		ev->fatal = 1;
		snprintf(ev->what, sizeof ev->what, "a double-bit ECC error");
		return 1;
	case EV_RETIRE:
	case EV_RETIRE_FAILED:
		ev->kind = "retire";
		snprintf(ev->what, sizeof ev->what, "a page retirement or row "
		    "remapping %s", e->type == EV_RETIRE ? "pending" : "failed");
		return 1;
	case EV_CLOCK:
		ev->kind = "clocks";
		if (h->Reasons == NULL || h->Reasons(g->dev, &reasons) !=
		    NVML_OK)
			return 0;
		reasons &= CLK_HW_SLOWDOWN | CLK_HW_THERMAL | CLK_SW_THERMAL |
		    CLK_HW_POWER_BRAKE;
		if (reasons == 0) {
			gck_log(ctx, 1, "GPU %s: clocks changed, no slowdown",
			    g->uuid);
			return 0;
		}
		ev->data = reasons;
		clock_names(reasons, buf, sizeof buf);
		snprintf(ev->what, sizeof ev->what, "clocks slowed down: %s",
		    buf);
		return 1;
	case EV_UNAVAILABLE:
	case EV_POISON_FATAL:
		ev->kind = "lost";
		ev->fatal = 1;
		snprintf(ev->what, sizeof ev->what, "%s", e->type ==
		    EV_UNAVAILABLE ? "the GPU is unavailable" :
		    "a fatal poison error");
		return 1;
	default:
		gck_log(ctx, 1, "GPU %s: event 0x%llx, not watched", g->uuid,
		    e->type);
		return 0;
	}
}

/* The wait said that a GPU is lost: which one, into *ev. */
static void
health_lost(struct gck_health *h, struct gck_health_event *ev)
{
	unsigned long long	can;
	size_t			i;

	memset(ev, 0, sizeof *ev);
	ev->kind = "lost";
	ev->fatal = 1;
	snprintf(ev->uuid, sizeof ev->uuid, "%s", h->gpus[0].uuid);
	ev->index = h->gpus[0].index;
	for (i = 0; i < h->ngpus; i++)
		if (h->Supported(h->gpus[i].dev, &can) == NVML_GPU_IS_LOST) {
			snprintf(ev->uuid, sizeof ev->uuid, "%s",
			    h->gpus[i].uuid);
			ev->index = h->gpus[i].index;
			break;
		}
	snprintf(ev->what, sizeof ev->what, "the GPU is lost");
}

int
gck_health_wait(struct gck_ctx *ctx, struct gck_health *h, long timeout_ms,
    struct gck_health_event *ev)
{
	struct nvml_event	 e;
	unsigned int		 slice;
	int64_t			 end = gck_now_ms() + timeout_ms, left;
	nvml_ret		 r;
	size_t			 i;

	for (;;) {
		if (gck_interrupted(ctx))
			return gck_check_interrupt(ctx);
		left = end - gck_now_ms();
		if (timeout_ms >= 0 && left <= 0)
			return gck_set_error(ctx, GCK_ETIMEDOUT, "no event in "
			    "%ld ms", timeout_ms);
		slice = timeout_ms >= 0 && left < WAIT_SLICE_MS ?
		    (unsigned int)left : WAIT_SLICE_MS;
		memset(&e, 0, sizeof e);
		r = h->Wait(h->set, &e, slice);
		if (r == NVML_TIMEOUT)
			continue;
		if (r == NVML_GPU_IS_LOST) {
			health_lost(h, ev);
			return GCK_OK;
		}
		if (r != NVML_OK)
			return gck_set_error(ctx, GCK_ECUDA, "nvmlEventSetWait: "
			    "%s", nvml_error(h, r));
		for (i = 0; i < h->ngpus && h->gpus[i].dev != e.device; i++)
			;
		if (i == h->ngpus)
			continue;
		if (health_judge(ctx, h, &h->gpus[i], &e, ev))
			return GCK_OK;
	}
}
