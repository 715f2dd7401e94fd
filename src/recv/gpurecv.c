/*
 * gpurecv: the receiving end of gpusend.
 * Only --help and --version exist in this version.
 */
#include "config.h"

#include <err.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "compat.h"
#include "tool.h"

static const struct option longopts[] = {
	{ "help",	no_argument,	NULL,	'h' },
	{ "version",	no_argument,	NULL,	'V' },
	{ NULL,		0,		NULL,	0 }
};

static _Noreturn void
usage(int status)
{
	fprintf(status ? stderr : stdout, "usage: %s [-hV]\n", getprogname());
	exit(status);
}

int
main(int argc, char *argv[])
{
	int	ch;

	while ((ch = getopt_long(argc, argv, "hV", longopts, NULL)) != -1) {
		switch (ch) {
		case 'h':
			usage(0);
		case 'V':
			tool_version();
		default:
			usage(2);
		}
	}
	errx(1, "not implemented yet");
}
