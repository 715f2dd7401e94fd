/*
 * gpumap.c: where an image's GPUs go on this host.
 *
 * A map is "SRC=DST[,SRC=DST...]", each side a GPU UUID or a driver
 * index.  Without one, every GPU of the image whose UUID this host has
 * stays where it was; each other one takes, in image order, the first
 * unused GPU of this host of the same chip (name and compute capability)
 * with room for what the image's processes held on it.
 */
#include "config.h"

#include <sys/types.h>

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "private.h"
#include "gpu/cuda.h"
#include "gpu/gpumap.h"

#define MIB	(1024 * 1024)
/* What a GPU's processes need in all stops there: no GPU holds more. */
#define NEED_MAX	(INT64_MAX / 2)

static int	find_gpu(const struct gck_gpu *, size_t, const char *);
static int	same_chip(const struct gck_gpu *, const struct gck_gpu *);
static void	addf(char *, size_t, const char *, ...)
		    __attribute__((__format__(__printf__, 3, 4)));

/* Returns the position in gpus of a UUID or a driver index, or -1. */
static int
find_gpu(const struct gck_gpu *gpus, size_t n, const char *s)
{
	const char	*p;
	long		 v;
	size_t		 i;

	for (i = 0; i < n; i++)
		if (strcasecmp(gpus[i].uuidstr, s) == 0)
			return (int)i;
	if (*s == '\0' || strlen(s) > 4)
		return -1;
	for (p = s; *p != '\0'; p++)
		if (!isdigit((unsigned char)*p))
			return -1;
	v = strtol(s, NULL, 10);
	for (i = 0; i < n; i++)
		if (gpus[i].index == v)
			return (int)i;
	return -1;
}

static int
same_chip(const struct gck_gpu *a, const struct gck_gpu *b)
{
	return strcmp(a->name, b->name) == 0 && a->cc_major == b->cc_major &&
	    a->cc_minor == b->cc_minor;
}

/* Appends to a "; "-separated list in buf. */
static void
addf(char *buf, size_t len, const char *fmt, ...)
{
	va_list	ap;
	size_t	l = strlen(buf);

	if (l > 0 && l + 2 < len) {
		memcpy(buf + l, "; ", 3);
		l += 2;
	}
	if (l >= len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + l, len - l, fmt, ap);
	va_end(ap);
}

/*
 * Parses map into pairs of positions: src[k] in the first list, dst[k]
 * in the second.  Returns the number of pairs, or -1 with the error set.
 */
static int
parse_map(struct gck_ctx *ctx, const char *map, const struct gck_gpu *sg,
    size_t ns, const char *swhere, const struct gck_gpu *dg, size_t nd,
    int *src, int *dst)
{
	char	*copy, *item, *save = NULL, *eq;
	int	 n = 0, k, s, d;

	if ((copy = strdup(map)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory"), -1;
	if (*map == '\0' || map[strlen(map) - 1] == ',' || *map == ',' ||
	    strstr(map, ",,") != NULL) {
		gck_set_error(ctx, GCK_EINVAL, "invalid GPU map '%s': use "
		    "SRC=DST[,SRC=DST...]", map);
		goto fail;
	}
	for (item = strtok_r(copy, ",", &save); item != NULL;
	    item = strtok_r(NULL, ",", &save)) {
		if ((eq = strchr(item, '=')) == NULL || eq == item ||
		    eq[1] == '\0' || strchr(eq + 1, '=') != NULL) {
			gck_set_error(ctx, GCK_EINVAL, "invalid GPU map item "
			    "'%s': use SRC=DST, each a GPU UUID or index",
			    item);
			goto fail;
		}
		*eq = '\0';
		if ((s = find_gpu(sg, ns, item)) == -1) {
			gck_set_error(ctx, GCK_EINVAL, "GPU map: no GPU '%s' "
			    "%s", item, swhere);
			goto fail;
		}
		if ((d = find_gpu(dg, nd, eq + 1)) == -1) {
			gck_set_error(ctx, GCK_EINVAL, "GPU map: no GPU '%s' "
			    "on this host", eq + 1);
			goto fail;
		}
		for (k = 0; k < n; k++) {
			if (src[k] == s) {
				gck_set_error(ctx, GCK_EINVAL, "GPU map: %s "
				    "is mapped twice", sg[s].uuidstr);
				goto fail;
			}
			if (dst[k] == d) {
				gck_set_error(ctx, GCK_EINVAL, "GPU map: %s "
				    "is the target of both %s and %s",
				    dg[d].uuidstr, sg[src[k]].uuidstr,
				    sg[s].uuidstr);
				goto fail;
			}
		}
		if (n >= GCK_GPUS_MAX) {
			gck_set_error(ctx, GCK_EINVAL, "GPU map: more than %d "
			    "pairs", GCK_GPUS_MAX);
			goto fail;
		}
		src[n] = s;
		dst[n] = d;
		n++;
	}
	free(copy);
	return n;
fail:
	free(copy);
	return -1;
}

/*
 * Plans where each GPU of the image goes on this host (host: its GPUs
 * with their free memory).  dst[g] receives the position in host of
 * image GPU g, *remap whether any GPU changes.  Returns GCK_OK,
 * GCK_EINVAL for a bad or incomplete map, or GCK_ECUDA with the list of
 * what this host lacks.
 */
int
gck_gpumap_plan(struct gck_ctx *ctx, const struct gck_mcuda *mc,
    const struct gck_gpu *host, size_t nhost, const char *map, int *dst,
    int *remap)
{
	char		 why[GCK_ERRMAX] = "";
	int		 src[GCK_GPUS_MAX], to[GCK_GPUS_MAX], taken[GCK_GPUS_MAX];
	int64_t		 need[GCK_GPUS_MAX];
	int		 unknown[GCK_GPUS_MAX];
	const struct gck_gpu *s, *d;
	size_t		 g, i, h;
	int		 n, k;

	*remap = 0;
	memset(taken, 0, sizeof taken);
	for (g = 0; g < mc->ngpus; g++) {
		dst[g] = -1;
		need[g] = 0;
		unknown[g] = 0;
		for (i = 0; i < mc->nprocs; i++) {
			if (!(mc->procs[i].gpus & 1ULL << g))
				continue;
			if (mc->procs[i].mem[g] < 0)
				unknown[g] = 1;
			else if (mc->procs[i].mem[g] > NEED_MAX - need[g])
				need[g] = NEED_MAX;
			else
				need[g] += mc->procs[i].mem[g];
		}
	}
	if (map != NULL) {
		if ((n = parse_map(ctx, map, mc->gpus, mc->ngpus,
		    "in the image", host, nhost, src, to)) == -1)
			return ctx->code;
		for (k = 0; k < n; k++) {
			dst[src[k]] = to[k];
			taken[to[k]] = 1;
		}
		for (g = 0; g < mc->ngpus; g++)
			if (dst[g] == -1)
				return gck_set_error(ctx, GCK_EINVAL, "GPU map "
				    "'%s' does not say where the image's GPU %d "
				    "(%s, %s) goes: every GPU of the image must "
				    "be mapped", map, mc->gpus[g].index,
				    mc->gpus[g].uuidstr, mc->gpus[g].name);
	} else {
		/* A GPU this host has stays where it is. */
		for (g = 0; g < mc->ngpus; g++)
			for (h = 0; h < nhost; h++)
				if (memcmp(host[h].uuid, mc->gpus[g].uuid,
				    16) == 0) {
					dst[g] = (int)h;
					taken[h] = 1;
				}
		for (g = 0; g < mc->ngpus; g++) {
			if (dst[g] != -1)
				continue;
			for (h = 0; h < nhost; h++)
				if (!taken[h] && same_chip(&host[h],
				    &mc->gpus[g]) && (host[h].free < 0 ||
				    host[h].free >= need[g]))
					break;
			if (h == nhost) {
				addf(why, sizeof why, "no %s (compute "
				    "capability %d.%d) with %lld MiB free for "
				    "%s", mc->gpus[g].name,
				    mc->gpus[g].cc_major, mc->gpus[g].cc_minor,
				    (long long)(need[g] + MIB - 1) / MIB,
				    mc->gpus[g].uuidstr);
				continue;
			}
			dst[g] = (int)h;
			taken[h] = 1;
		}
	}
	for (g = 0; g < mc->ngpus; g++) {
		if (dst[g] == -1)
			continue;
		s = &mc->gpus[g];
		d = &host[dst[g]];
		if (memcmp(s->uuid, d->uuid, 16) != 0)
			*remap = 1;
		if (!same_chip(s, d))
			addf(why, sizeof why, "%s (%s, %d.%d) cannot go to "
			    "%s, a %s (%d.%d)", s->uuidstr, s->name,
			    s->cc_major, s->cc_minor, d->uuidstr, d->name,
			    d->cc_major, d->cc_minor);
		else if (!unknown[g] && d->free >= 0 && d->free < need[g])
			addf(why, sizeof why, "%s has %lld MiB free, %lld MiB "
			    "needed for %s", d->uuidstr,
			    (long long)d->free / MIB,
			    (long long)(need[g] + MIB - 1) / MIB, s->uuidstr);
	}
	if (why[0] != '\0')
		return gck_set_error(ctx, GCK_ECUDA, "this host cannot take "
		    "the image's GPUs: %s", why);
	return GCK_OK;
}

/*
 * Turns a map between GPUs of this host into driver GPU pairs.  GPUs the
 * map does not name keep their place, so the pairs cover every GPU a
 * process may have used here.  Returns GCK_OK or GCK_EINVAL.
 */
int
gck_gpumap_host(struct gck_ctx *ctx, const struct gck_gpu *host,
    size_t nhost, const char *map, unsigned char pairs[][2][16],
    unsigned int *np)
{
	int	src[GCK_GPUS_MAX], to[GCK_GPUS_MAX], named[GCK_GPUS_MAX];
	int	n, k;
	size_t	h;

	*np = 0;
	if ((n = parse_map(ctx, map, host, nhost, "on this host", host, nhost,
	    src, to)) == -1)
		return ctx->code;
	memset(named, 0, sizeof named);
	for (k = 0; k < n; k++) {
		if (!same_chip(&host[src[k]], &host[to[k]]))
			return gck_set_error(ctx, GCK_EINVAL, "GPU map: %s "
			    "(%s) and %s (%s) are not the same chip",
			    host[src[k]].uuidstr, host[src[k]].name,
			    host[to[k]].uuidstr, host[to[k]].name);
		memcpy(pairs[*np][0], host[src[k]].uuid, 16);
		memcpy(pairs[*np][1], host[to[k]].uuid, 16);
		(*np)++;
		named[src[k]] = named[to[k]] = 1;
	}
	for (h = 0; h < nhost; h++) {
		if (named[h])
			continue;
		memcpy(pairs[*np][0], host[h].uuid, 16);
		memcpy(pairs[*np][1], host[h].uuid, 16);
		(*np)++;
	}
	return GCK_OK;
}
