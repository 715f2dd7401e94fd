/*
 * Unit tests for the GPU map: gck_gpumap_plan() and gck_gpumap_host(),
 * and the manifest's cuda section they are fed from.
 */

#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "private.h"
#include "gpu/cuda.h"
#include "gpu/gpumap.h"
#include "image/manifest.h"
#include "unit.h"

#define MIB		(1024LL * 1024)
#define NELEM(a)	(sizeof(a) / sizeof((a)[0]))

#define UA	"GPU-aaaaaaaa-0000-4000-8000-000000000001"
#define UB	"GPU-bbbbbbbb-0000-4000-8000-000000000002"
#define UC	"GPU-cccccccc-0000-4000-8000-000000000003"
#define UD	"GPU-dddddddd-0000-4000-8000-000000000004"
#define UE	"GPU-eeeeeeee-0000-4000-8000-000000000005"

#define H100	"NVIDIA H100 80GB HBM3"
#define A100	"NVIDIA A100-SXM4-40GB"

static void	gpu(struct gck_gpu *, int, const char *, const char *, int,
		    int, int64_t);
static void	image(struct gck_mcuda *, struct gck_mcproc *);
static void	test_identity(void **);
static void	test_auto_remap(void **);
static void	test_auto_no_room(void **);
static void	test_auto_no_room_huge(void **);
static void	test_auto_wrong_chip(void **);
static void	test_map_by_index_and_uuid(void **);
static void	test_map_refused(void **);
static void	test_map_wrong_chip(void **);
static void	test_map_short_of_memory(void **);
static void	test_unknown_memory(void **);
static void	test_host_pairs(void **);
static void	test_host_refused(void **);
static void	test_manifest_cuda(void **);
static void	test_manifest_cuda_bad(void **);

static void
gpu(struct gck_gpu *g, int index, const char *uuid, const char *name,
    int maj, int min, int64_t free_b)
{
	memset(g, 0, sizeof *g);
	g->index = index;
	assert_int_equal(gck_cuda_parse_uuid(uuid, g->uuid), 0);
	snprintf(g->uuidstr, sizeof g->uuidstr, "%s", uuid);
	snprintf(g->name, sizeof g->name, "%s", name);
	g->cc_major = maj;
	g->cc_minor = min;
	g->total = 80 * 1024 * MIB;
	g->free = free_b;
}

/*
 * The image: two H100s, indexes 0 and 1; process 100 holds 1 GiB on
 * the first and 2 GiB on the second, process 101 1 GiB on the second.
 */
static void
image(struct gck_mcuda *mc, struct gck_mcproc *procs)
{
	memset(mc, 0, sizeof *mc);
	gpu(&mc->gpus[0], 0, UA, H100, 9, 0, -1);
	gpu(&mc->gpus[1], 1, UB, H100, 9, 0, -1);
	mc->ngpus = 2;
	memset(procs, 0, 2 * sizeof *procs);
	procs[0].pid = 100;
	procs[0].gpus = 3;
	procs[0].mem[0] = 1024 * MIB;
	procs[0].mem[1] = 2048 * MIB;
	procs[1].pid = 101;
	procs[1].gpus = 2;
	procs[1].mem[1] = 1024 * MIB;
	mc->procs = procs;
	mc->nprocs = 2;
}

static void
test_identity(void **state)
{
	struct gck_mcuda	mc;
	struct gck_mcproc	procs[2];
	struct gck_gpu		host[3];
	int			dst[GCK_GPUS_MAX], remap = -1;

	image(&mc, procs);
	gpu(&host[0], 0, UC, H100, 9, 0, 70 * 1024 * MIB);
	gpu(&host[1], 1, UB, H100, 9, 0, 70 * 1024 * MIB);
	gpu(&host[2], 2, UA, H100, 9, 0, 70 * 1024 * MIB);
	assert_int_equal(gck_gpumap_plan(*state, &mc, host, 3, NULL, dst,
	    &remap), GCK_OK);
	assert_int_equal(dst[0], 2);
	assert_int_equal(dst[1], 1);
	assert_int_equal(remap, 0);
}

static void
test_auto_remap(void **state)
{
	struct gck_mcuda	mc;
	struct gck_mcproc	procs[2];
	struct gck_gpu		host[4];
	int			dst[GCK_GPUS_MAX], remap = 0;

	image(&mc, procs);
	/* GPU B is here; A is not: it takes the first free H100. */
	gpu(&host[0], 0, UC, A100, 8, 0, 70 * 1024 * MIB);
	gpu(&host[1], 1, UB, H100, 9, 0, 70 * 1024 * MIB);
	gpu(&host[2], 2, UD, H100, 9, 0, 512 * MIB);
	gpu(&host[3], 3, UE, H100, 9, 0, 70 * 1024 * MIB);
	assert_int_equal(gck_gpumap_plan(*state, &mc, host, 4, NULL, dst,
	    &remap), GCK_OK);
	assert_int_equal(dst[0], 3);	/* D is too small, A100 no match */
	assert_int_equal(dst[1], 1);
	assert_int_equal(remap, 1);
}

static void
test_auto_no_room(void **state)
{
	struct gck_mcuda	mc;
	struct gck_mcproc	procs[2];
	struct gck_gpu		host[2];
	int			dst[GCK_GPUS_MAX], remap;
	const char		*msg;

	image(&mc, procs);
	gpu(&host[0], 0, UC, H100, 9, 0, 70 * 1024 * MIB);
	gpu(&host[1], 1, UD, H100, 9, 0, 2047 * MIB);
	/* A goes to C; B needs 3 GiB and D has not got it. */
	assert_int_equal(gck_gpumap_plan(*state, &mc, host, 2, NULL, dst,
	    &remap), GCK_ECUDA);
	msg = gck_error_string(*state);
	assert_non_null(strstr(msg, "this host cannot take the image's GPUs"));
	assert_non_null(strstr(msg, "no " H100 " (compute capability 9.0) "
	    "with 3072 MiB free for " UB));
	assert_null(strchr(msg, '\n'));
}

/* Needs beyond any GPU, from a hostile manifest: refused, not overflowed. */
static void
test_auto_no_room_huge(void **state)
{
	struct gck_mcuda	mc;
	struct gck_mcproc	procs[2];
	struct gck_gpu		host[2];
	int			dst[GCK_GPUS_MAX], remap;

	image(&mc, procs);
	procs[0].mem[1] = INT64_MAX;
	procs[1].mem[1] = INT64_MAX;
	gpu(&host[0], 0, UA, H100, 9, 0, INT64_MAX);
	gpu(&host[1], 1, UD, H100, 9, 0, INT64_MAX / 4);
	assert_int_equal(gck_gpumap_plan(*state, &mc, host, 2, NULL, dst,
	    &remap), GCK_ECUDA);
	assert_non_null(strstr(gck_error_string(*state), "MiB free for " UB));
}

static void
test_auto_wrong_chip(void **state)
{
	struct gck_mcuda	mc;
	struct gck_mcproc	procs[2];
	struct gck_gpu		host[2];
	int			dst[GCK_GPUS_MAX], remap;
	const char		*msg;

	image(&mc, procs);
	gpu(&host[0], 0, UC, A100, 8, 0, 70 * 1024 * MIB);
	gpu(&host[1], 1, UD, H100, 8, 9, 70 * 1024 * MIB);
	assert_int_equal(gck_gpumap_plan(*state, &mc, host, 2, NULL, dst,
	    &remap), GCK_ECUDA);
	msg = gck_error_string(*state);
	/* Both of the image's GPUs are listed, in one line. */
	assert_non_null(strstr(msg, "for " UA));
	assert_non_null(strstr(msg, "for " UB));
}

static void
test_map_by_index_and_uuid(void **state)
{
	struct gck_mcuda	mc;
	struct gck_mcproc	procs[2];
	struct gck_gpu		host[3];
	int			dst[GCK_GPUS_MAX], remap = 0;

	image(&mc, procs);
	gpu(&host[0], 0, UA, H100, 9, 0, 70 * 1024 * MIB);
	gpu(&host[1], 1, UB, H100, 9, 0, 70 * 1024 * MIB);
	gpu(&host[2], 2, UC, H100, 9, 0, 70 * 1024 * MIB);
	/* Swapped, although both UUIDs are here: the map wins. */
	assert_int_equal(gck_gpumap_plan(*state, &mc, host, 3,
	    "0=" UB "," UB "=2", dst, &remap), GCK_OK);
	assert_int_equal(dst[0], 1);
	assert_int_equal(dst[1], 2);
	assert_int_equal(remap, 1);
	/* Case does not matter in a UUID. */
	assert_int_equal(gck_gpumap_plan(*state, &mc, host, 3,
	    "gpu-AAAAAAAA-0000-4000-8000-000000000001=0,1=1", dst, &remap),
	    GCK_OK);
	assert_int_equal(dst[0], 0);
	assert_int_equal(remap, 0);
}

static void
test_map_refused(void **state)
{
	static const struct {
		const char	*map;
		const char	*msg;
	} bad[] = {
		{ "", "invalid GPU map ''" },
		{ "0=1,", "invalid GPU map" },
		{ ",0=1", "invalid GPU map" },
		{ "0=1,,1=2", "invalid GPU map" },
		{ "0", "invalid GPU map item '0'" },
		{ "0=", "invalid GPU map item '0='" },
		{ "=1", "invalid GPU map item '=1'" },
		{ "0=1=2", "invalid GPU map item" },
		{ "7=1,1=2", "no GPU '7' in the image" },
		{ "GPU-x=1,1=2", "no GPU 'GPU-x' in the image" },
		{ "0=9,1=2", "no GPU '9' on this host" },
		{ "0=-1,1=2", "no GPU '-1' on this host" },
		{ "0=1,0=2", "is mapped twice" },
		{ "0=1,1=1", "is the target of both" },
		{ "0=1", "does not say where the image's GPU 1" },
	};
	struct gck_mcuda	mc;
	struct gck_mcproc	procs[2];
	struct gck_gpu		host[3];
	int			dst[GCK_GPUS_MAX], remap;
	size_t			i;

	image(&mc, procs);
	gpu(&host[0], 0, UA, H100, 9, 0, 70 * 1024 * MIB);
	gpu(&host[1], 1, UB, H100, 9, 0, 70 * 1024 * MIB);
	gpu(&host[2], 2, UC, H100, 9, 0, 70 * 1024 * MIB);
	for (i = 0; i < NELEM(bad); i++) {
		assert_int_equal(gck_gpumap_plan(*state, &mc, host, 3,
		    bad[i].map, dst, &remap), GCK_EINVAL);
		if (strstr(gck_error_string(*state), bad[i].msg) == NULL)
			fail_msg("map '%s': '%s' lacks '%s'", bad[i].map,
			    gck_error_string(*state), bad[i].msg);
	}
}

static void
test_map_wrong_chip(void **state)
{
	struct gck_mcuda	mc;
	struct gck_mcproc	procs[2];
	struct gck_gpu		host[2];
	int			dst[GCK_GPUS_MAX], remap;

	image(&mc, procs);
	gpu(&host[0], 0, UC, A100, 8, 0, 70 * 1024 * MIB);
	gpu(&host[1], 1, UD, H100, 9, 0, 70 * 1024 * MIB);
	assert_int_equal(gck_gpumap_plan(*state, &mc, host, 2, "0=0,1=1",
	    dst, &remap), GCK_ECUDA);
	assert_non_null(strstr(gck_error_string(*state), UA " (" H100
	    ", 9.0) cannot go to " UC ", a " A100 " (8.0)"));
}

static void
test_map_short_of_memory(void **state)
{
	struct gck_mcuda	mc;
	struct gck_mcproc	procs[2];
	struct gck_gpu		host[2];
	int			dst[GCK_GPUS_MAX], remap;

	image(&mc, procs);
	gpu(&host[0], 0, UC, H100, 9, 0, 70 * 1024 * MIB);
	gpu(&host[1], 1, UD, H100, 9, 0, 3 * 1024 * MIB - 1);
	assert_int_equal(gck_gpumap_plan(*state, &mc, host, 2, "0=0,1=1",
	    dst, &remap), GCK_ECUDA);
	assert_non_null(strstr(gck_error_string(*state), UD " has 3071 MiB "
	    "free, 3072 MiB needed for " UB));
	/* Exactly enough is enough. */
	host[1].free = 3 * 1024 * MIB;
	assert_int_equal(gck_gpumap_plan(*state, &mc, host, 2, "0=0,1=1",
	    dst, &remap), GCK_OK);
}

static void
test_unknown_memory(void **state)
{
	struct gck_mcuda	mc;
	struct gck_mcproc	procs[2];
	struct gck_gpu		host[2];
	int			dst[GCK_GPUS_MAX], remap;

	/* Without NVML at the source the need is unknown: not checked. */
	image(&mc, procs);
	procs[1].mem[1] = -1;
	gpu(&host[0], 0, UC, H100, 9, 0, 70 * 1024 * MIB);
	gpu(&host[1], 1, UD, H100, 9, 0, 1);
	assert_int_equal(gck_gpumap_plan(*state, &mc, host, 2, "0=0,1=1",
	    dst, &remap), GCK_OK);
}

static void
test_host_pairs(void **state)
{
	struct gck_gpu	host[3];
	unsigned char	pairs[GCK_GPUS_MAX][2][16];
	unsigned int	n;

	gpu(&host[0], 0, UA, H100, 9, 0, -1);
	gpu(&host[1], 1, UB, H100, 9, 0, -1);
	gpu(&host[2], 2, UC, H100, 9, 0, -1);
	assert_int_equal(gck_gpumap_host(*state, host, 3, "0=1", pairs, &n),
	    GCK_OK);
	/* 0 goes to 1; 2 stays; 1, taken, gets no pair of its own. */
	assert_int_equal(n, 2);
	assert_memory_equal(pairs[0][0], host[0].uuid, 16);
	assert_memory_equal(pairs[0][1], host[1].uuid, 16);
	assert_memory_equal(pairs[1][0], host[2].uuid, 16);
	assert_memory_equal(pairs[1][1], host[2].uuid, 16);
}

static void
test_host_refused(void **state)
{
	struct gck_gpu	host[2];
	unsigned char	pairs[GCK_GPUS_MAX][2][16];
	unsigned int	n;

	gpu(&host[0], 0, UA, H100, 9, 0, -1);
	gpu(&host[1], 1, UB, A100, 8, 0, -1);
	assert_int_equal(gck_gpumap_host(*state, host, 2, "0=1", pairs, &n),
	    GCK_EINVAL);
	assert_non_null(strstr(gck_error_string(*state),
	    "are not the same chip"));
	assert_int_equal(gck_gpumap_host(*state, host, 2, "0=5", pairs, &n),
	    GCK_EINVAL);
	assert_non_null(strstr(gck_error_string(*state),
	    "no GPU '5' on this host"));
}

#define MANIFEST_HEAD \
	"{\"format\": 1, \"root_pid\": 10, \"processes\": " \
	"[{\"pid\": 10, \"comm\": \"a\"}, {\"pid\": 11, \"comm\": \"b\"}], "
#define GPU_A \
	"{\"index\": 0, \"uuid\": \"" UA "\", \"name\": \"" H100 "\", " \
	"\"compute_capability\": \"9.0\", \"memory\": 85899345920, " \
	"\"pci_bus_id\": \"0000:01:00.0\"}"

static void
test_manifest_cuda(void **state)
{
	static const char text[] = MANIFEST_HEAD
	    "\"cuda\": {\"driver_version\": 13000, \"cuda_version\": \"13.0\", "
	    "\"driver\": null, \"nvml\": true, \"gpus\": [" GPU_A "], "
	    "\"processes\": [{\"pid\": 11, \"comm\": \"b\", \"gpus\": "
	    "[{\"uuid\": \"" UA "\", \"memory\": 4096}]}]}}";
	struct gck_manifest	*m;
	const struct gck_mcuda	*mc;

	assert_int_equal(gck_manifest_parse(*state, text, strlen(text), &m),
	    GCK_OK);
	mc = gck_manifest_cuda(m);
	assert_non_null(mc);
	assert_int_equal(gck_manifest_cuda_nprocs(m), 1);
	assert_int_equal(mc->driver_version, 13000);
	assert_int_equal(mc->ngpus, 1);
	assert_string_equal(mc->gpus[0].uuidstr, UA);
	assert_string_equal(mc->gpus[0].name, H100);
	assert_int_equal(mc->gpus[0].cc_major, 9);
	/* an image without NVML's minor numbers: unknown */
	assert_int_equal(mc->gpus[0].minor, -1);
	assert_int_equal(mc->procs[0].pid, 11);
	assert_string_equal(mc->procs[0].comm, "b");
	assert_int_equal(mc->procs[0].gpus, 1);
	assert_int_equal(mc->procs[0].mem[0], 4096);
	gck_manifest_free(m);
}

static void
test_manifest_cuda_minor(void **state)
{
	static const char text[] = MANIFEST_HEAD
	    "\"cuda\": {\"driver_version\": 13000, \"gpus\": [{\"index\": 0, "
	    "\"uuid\": \"" UA "\", \"name\": \"" H100 "\", "
	    "\"compute_capability\": \"9.0\", \"memory\": 1, "
	    "\"pci_bus_id\": \"p\", \"minor\": 3}], \"processes\": []}}";
	struct gck_manifest	*m;

	assert_int_equal(gck_manifest_parse(*state, text, strlen(text), &m),
	    GCK_OK);
	assert_int_equal(gck_manifest_cuda(m)->gpus[0].minor, 3);
	gck_manifest_free(m);
}

static void
test_manifest_cuda_bad(void **state)
{
	static const char *const bad[] = {
		/* not an object */
		MANIFEST_HEAD "\"cuda\": 3}",
		/* bad UUID */
		MANIFEST_HEAD "\"cuda\": {\"driver_version\": 13000, \"gpus\": "
		"[{\"index\": 0, \"uuid\": \"GPU-1\", \"name\": \"x\", "
		"\"compute_capability\": \"9.0\", \"memory\": 1, "
		"\"pci_bus_id\": \"p\"}], \"processes\": []}}",
		/* bad compute capability */
		MANIFEST_HEAD "\"cuda\": {\"driver_version\": 13000, \"gpus\": "
		"[{\"index\": 0, \"uuid\": \"" UA "\", \"name\": \"x\", "
		"\"compute_capability\": \"9.x\", \"memory\": 1, "
		"\"pci_bus_id\": \"p\"}], \"processes\": []}}",
		/* the same GPU twice */
		MANIFEST_HEAD "\"cuda\": {\"driver_version\": 13000, \"gpus\": "
		"[" GPU_A ", " GPU_A "], \"processes\": []}}",
		/* a process that is not in the tree */
		MANIFEST_HEAD "\"cuda\": {\"driver_version\": 13000, \"gpus\": "
		"[" GPU_A "], \"processes\": [{\"pid\": 12, \"comm\": \"c\", "
		"\"gpus\": []}]}}",
		/* a process twice */
		MANIFEST_HEAD "\"cuda\": {\"driver_version\": 13000, \"gpus\": "
		"[" GPU_A "], \"processes\": [{\"pid\": 10, \"comm\": \"a\", "
		"\"gpus\": []}, {\"pid\": 10, \"comm\": \"a\", \"gpus\": []}]}}",
		/* a GPU that is not listed */
		MANIFEST_HEAD "\"cuda\": {\"driver_version\": 13000, \"gpus\": "
		"[" GPU_A "], \"processes\": [{\"pid\": 10, \"comm\": \"a\", "
		"\"gpus\": [{\"uuid\": \"" UB "\", \"memory\": 1}]}]}}",
		/* a minor number that no GPU's device node has */
		MANIFEST_HEAD "\"cuda\": {\"driver_version\": 13000, \"gpus\": "
		"[{\"index\": 0, \"uuid\": \"" UA "\", \"name\": \"x\", "
		"\"compute_capability\": \"9.0\", \"memory\": 1, "
		"\"pci_bus_id\": \"p\", \"minor\": 255}], \"processes\": []}}",
		/* a minor number that is not a number */
		MANIFEST_HEAD "\"cuda\": {\"driver_version\": 13000, \"gpus\": "
		"[{\"index\": 0, \"uuid\": \"" UA "\", \"name\": \"x\", "
		"\"compute_capability\": \"9.0\", \"memory\": 1, "
		"\"pci_bus_id\": \"p\", \"minor\": \"0\"}], \"processes\": []}}",
		/* negative memory */
		MANIFEST_HEAD "\"cuda\": {\"driver_version\": 13000, \"gpus\": "
		"[" GPU_A "], \"processes\": [{\"pid\": 10, \"comm\": \"a\", "
		"\"gpus\": [{\"uuid\": \"" UA "\", \"memory\": -1}]}]}}",
	};
	struct gck_manifest	*m = NULL;
	size_t			 i;

	for (i = 0; i < NELEM(bad); i++) {
		if (gck_manifest_parse(*state, bad[i], strlen(bad[i]), &m) !=
		    GCK_EFORMAT)
			fail_msg("case %zu accepted: %s", i, bad[i]);
		assert_null(m);
		assert_non_null(strstr(gck_error_string(*state),
		    "corrupt image"));
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_identity),
		cmocka_unit_test(test_auto_remap),
		cmocka_unit_test(test_auto_no_room),
		cmocka_unit_test(test_auto_no_room_huge),
		cmocka_unit_test(test_auto_wrong_chip),
		cmocka_unit_test(test_map_by_index_and_uuid),
		cmocka_unit_test(test_map_refused),
		cmocka_unit_test(test_map_wrong_chip),
		cmocka_unit_test(test_map_short_of_memory),
		cmocka_unit_test(test_unknown_memory),
		cmocka_unit_test(test_host_pairs),
		cmocka_unit_test(test_host_refused),
		cmocka_unit_test(test_manifest_cuda),
		cmocka_unit_test(test_manifest_cuda_minor),
		cmocka_unit_test(test_manifest_cuda_bad),
	};

	return cmocka_run_group_tests(tests, unit_ctx_setup, unit_ctx_teardown);
}
