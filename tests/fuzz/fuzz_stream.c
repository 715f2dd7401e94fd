/*
 * fuzz_stream: the bytes are an image stream, read as gpurestore and
 * gpuinspect read one: compression detected, the tar entries parsed,
 * the manifest, each part's digest, the trailer and the end checked,
 * the CRIU files written into a directory that is emptied after each
 * input.
 */
#include "config.h"

#include <fcntl.h>

#include "gpuckpt.h"
#include "fuzz.h"

static char	*dir;
static int	 dfd = -1;

static void
cleanup(void)
{
	if (dir != NULL)
		fuzz_rmdir(dir);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct gck_manifest	*m;
	struct gck_image_stats		 st;
	struct gck_reader		*rd = NULL;
	struct gck_ctx			*ctx;
	const char			*text;
	size_t				 len;
	int				 fd, r;

	if (dir == NULL) {
		dir = fuzz_tmpdir("stream");
		atexit(cleanup);
		if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
			abort();
	}
	if ((ctx = gck_ctx_new()) == NULL)
		abort();
	fd = fuzz_memfd(data, size);
	if ((r = gck_reader_new(ctx, fd, &rd)) == GCK_OK &&
	    (r = gck_reader_head(rd, &m)) == GCK_OK) {
		gck_reader_manifest_text(rd, &text, &len);
		if (strlen(text) > len)
			abort();
		(void)gck_manifest_nprocs(m);
		r = gck_reader_extract(rd, dfd);
		gck_reader_stats(rd, &st);
	}
	fuzz_say("stream", r, gck_error_string(ctx));
	gck_reader_free(rd);
	close(fd);
	gck_ctx_free(ctx);
	fuzz_empty(dir);
	return 0;
}
