/*
 * gpuinspect: show and verify images.
 */
#include "config.h"

#include <sys/types.h>

#include <err.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compat.h"
#include "gpuckpt.h"
#include "tool.h"

static const struct option longopts[] = {
	{ "help",	no_argument,		NULL,	'h' },
	{ "version",	no_argument,		NULL,	'V' },
	{ "verbose",	no_argument,		NULL,	'v' },
	{ "verify",	no_argument,		NULL,	'C' },
	{ NULL,		0,			NULL,	0 }
};

static _Noreturn void
usage(int status)
{
	fprintf(status ? stderr : stdout,
	    "usage: %s [-hVv] [--verify] [file | -]\n", getprogname());
	exit(status);
}

int
main(int argc, char *argv[])
{
	const struct gck_manifest	*m;
	struct gck_image_stats		 st;
	struct gck_reader		*rd = NULL;
	struct gck_ctx			*ctx;
	const char			*text;
	size_t				 len;
	int				 ch, verbose = 0, verify = 0, r;
	int				 fd;

	while ((ch = getopt_long(argc, argv, "hVv", longopts, NULL)) != -1) {
		switch (ch) {
		case 'C':
			verify = 1;
			break;
		case 'h':
			usage(0);
		case 'V':
			tool_version();
		case 'v':
			verbose++;
			break;
		default:
			usage(2);
		}
	}
	argc -= optind;
	argv += optind;
	if (argc > 1)
		usage(2);
	fd = tool_open_image(argc == 1 ? argv[0] : NULL);

	tool_signals();
	ctx = tool_ctx(verbose);
	if ((r = gck_reader_new(ctx, fd, &rd)) == GCK_OK &&
	    (r = gck_reader_head(rd, &m)) == GCK_OK) {
		if (verify) {
			if ((r = gck_reader_extract(rd, -1)) == GCK_OK) {
				gck_reader_stats(rd, &st);
				printf("image ok: %llu entries, %llu bytes\n",
				    (unsigned long long)st.entries,
				    (unsigned long long)st.bytes);
			}
		} else {
			gck_reader_manifest_text(rd, &text, &len);
			fwrite(text, 1, len, stdout);
			if (len > 0 && text[len - 1] != '\n')
				putchar('\n');
		}
	}
	if (r != GCK_OK)
		warnx("%s", gck_error_string(ctx));
	gck_reader_free(rd);
	gck_ctx_free(ctx);
	if (fflush(stdout) == EOF)
		r = GCK_ESYS;
	return r == GCK_OK ? 0 : 1;
}
