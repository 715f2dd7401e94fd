/*
 * fuzz_manifest: the bytes are the text of gpuckpt.json.  It is parsed
 * and, when the parser takes it, every accessor is called, its GPUs are
 * planned onto a host that has the same ones, and it is written at the
 * head of an image that gck_inspect_show() describes.
 */
#include "config.h"

#include "private.h"
#include "image/image.h"
#include "gpu/cuda.h"
#include "gpu/gpumap.h"
#include "image/manifest.h"
#include "fuzz.h"

static const char *const names[] = { "pages-1.img", "mm-1.img",
	"inventory.img", "", "x/../y", NULL };

/* The image's GPUs onto a host with the same GPUs, in reverse order. */
static void
plan(struct gck_ctx *ctx, const struct gck_mcuda *mc)
{
	struct gck_gpu	host[GCK_GPUS_MAX];
	int		dst[GCK_GPUS_MAX], remap;
	size_t		i, n = mc->ngpus;

	for (i = 0; i < n; i++) {
		host[n - 1 - i] = mc->gpus[i];
		host[n - 1 - i].free = (int64_t)(mc->gpus[i].total / 2);
	}
	(void)gck_gpumap_plan(ctx, mc, host, n, NULL, dst, &remap);
}

static void
show(struct gck_ctx *ctx, const uint8_t *data, size_t size)
{
	struct gck_writer	*w = NULL;
	char			*text = NULL;
	int			 fd;

	if ((fd = memfd_create("image", MFD_CLOEXEC)) == -1)
		abort();
	if (gck_writer_new2(ctx, fd, 0, 0, 1, 0, &w) != GCK_OK ||
	    gck_writer_add(w, "gpuckpt.json", data, size) != GCK_OK ||
	    gck_writer_finish(w) != GCK_OK)
		abort();
	gck_writer_free(w);
	if (lseek(fd, 0, SEEK_SET) != 0)
		abort();
	if (gck_inspect_show(ctx, fd, &text) == GCK_OK &&
	    (text == NULL || strlen(text) == 0))
		abort();
	free(text);
	close(fd);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gck_manifest	*m = NULL;
	struct gck_ctx		*ctx;
	const char		*comm;
	size_t			 i, n;

	if ((ctx = gck_ctx_new()) == NULL)
		abort();
	if (gck_manifest_parse(ctx, (const char *)data, size, &m) == GCK_OK) {
		(void)gck_manifest_format(m);
		(void)gck_manifest_root_pid(m);
		(void)gck_manifest_shell_job(m);
		(void)gck_manifest_cuda_nprocs(m);
		(void)gck_manifest_this_boot(m);
		(void)gck_manifest_has_file_list(m);
		for (i = 0; names[i] != NULL; i++) {
			(void)gck_manifest_has_file(m, names[i]);
			(void)gck_manifest_file_size(m, names[i]);
			(void)gck_manifest_file_memory(m, names[i]);
		}
		if (gck_manifest_cuda(m) != NULL)
			plan(ctx, gck_manifest_cuda(m));
		n = gck_manifest_nprocs(m);
		for (i = 0; i < n; i++) {
			(void)gck_manifest_pid(m, i);
			if ((comm = gck_manifest_comm(m, i)) != NULL)
				(void)strlen(comm);
		}
		gck_manifest_free(m);
		show(ctx, data, size);
	} else if (gck_error_string(ctx) == NULL)
		abort();
	gck_ctx_free(ctx);
	return 0;
}
