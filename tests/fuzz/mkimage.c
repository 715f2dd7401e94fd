/*
 * mkimage: writes an image with the library's writer, for the seeds of
 * fuzz_stream and fuzz_recv (mkcorpus.py).  fuzz.sh builds it beside the
 * targets.
 *
 * usage: mkimage [-s KEY] OUT LEVEL PART MANIFEST [NAME[=|@] FILE]...
 *
 * LEVEL is zstd's (0: none), PART the part size, MANIFEST the file of
 * the manifest's text; each NAME is a CRIU file name, taken from FILE;
 * NAME= adds it as pages, zero pages as holes, NAME@ as gpuckpt adds
 * the files criu wrote, in parts.  -s signs the image (of format 2)
 * with KEY, as gpuckpt --sign does.
 */
#include "config.h"

#include <fcntl.h>

#include "private.h"
#include "image/image.h"
#include "fuzz.h"

static char *
slurp(const char *path, size_t *lenp)
{
	char	*buf = NULL;
	size_t	 len = 0, cap = 0;
	ssize_t	 n;
	int	 fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return NULL;
	for (;;) {
		if (len == cap && (buf = realloc(buf, cap = cap * 2 + 4096)) ==
		    NULL)
			abort();
		if ((n = read(fd, buf + len, cap - len)) <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	*lenp = len;
	return buf;
}

int
main(int argc, char **argv)
{
	struct gck_writer	*w = NULL;
	struct gck_ctx		*ctx;
	const char		*key = NULL;
	char			*data, name[256];
	size_t			 len, n;
	int			 dfd, fd, i, r, how;

	if (argc > 2 && strcmp(argv[1], "-s") == 0) {
		key = argv[2];
		argc -= 2;
		argv += 2;
	}
	if (argc < 5 || argc % 2 == 0) {
		fprintf(stderr, "usage: mkimage [-s key] out level part "
		    "manifest [name file]...\n");
		return 2;
	}
	if ((ctx = gck_ctx_new()) == NULL ||
	    (fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	    0644)) == -1 || (data = slurp(argv[4], &len)) == NULL)
		return 1;
	/* the format its manifest says */
	r = gck_writer_new2(ctx, fd, atoi(argv[2]), (size_t)atol(argv[3]),
	    memmem(data, len, "\"format\": 2", 11) != NULL ? 2 : 1, 0, &w);
	if (r == GCK_OK && key != NULL)
		r = gck_writer_set_sign(w, key);
	if (r == GCK_OK)
		r = gck_writer_add(w, "gpuckpt.json", data, len);
	free(data);
	for (i = 5; r == GCK_OK && i < argc; i += 2) {
		n = strlen(argv[i]);
		how = n > 0 && strchr("=@", argv[i][n - 1]) != NULL ?
		    argv[i][--n] : ' ';
		snprintf(name, sizeof name, "criu/%.*s", (int)n, argv[i]);
		if (how == '@') {
			if ((dfd = open(argv[i + 1], O_RDONLY | O_CLOEXEC)) ==
			    -1)
				return 1;
			r = gck_writer_add_file(w, name + 5, dfd);
			close(dfd);
			continue;
		}
		if ((data = slurp(argv[i + 1], &len)) == NULL)
			return 1;
		if (how == '=')
			r = gck_writer_add_pages(w, name, data, len);
		else
			r = gck_writer_add(w, name, data, len);
		free(data);
	}
	if (r == GCK_OK)
		r = gck_writer_finish(w);
	gck_writer_free(w);
	if (r != GCK_OK)
		fprintf(stderr, "mkimage: %s\n", gck_error_string(ctx));
	gck_ctx_free(ctx);
	return r != GCK_OK;
}
