/*
 * dirpeak -- sample how much disk space some directories use, and report
 * the peak.
 *
 * usage: dirpeak [-i ms] -o file dir ...
 *
 * Every ms milliseconds (default 50, 20 samples a second) it adds up the
 * space allocated to the files under each dir (st_blocks, so sparse and
 * empty files count for what they really take; directories themselves
 * are not counted) and keeps the largest sum.
 * A directory that does not exist yet, or files that vanish during a walk,
 * count as nothing.  On SIGTERM or SIGINT it takes one last sample and
 * writes "PEAK SAMPLES\n" (bytes, number of samples) to FILE.
 */

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <sys/types.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int		 add(const char *, const struct stat *, int,
			    struct FTW *);
static void		 on_term(int);
static unsigned long long sample(char **, int);
static void		 usage(void) __attribute__((__noreturn__));

static volatile sig_atomic_t	 done;
static unsigned long long	 walked;

static void
usage(void)
{
	fprintf(stderr, "usage: dirpeak [-i ms] -o file dir ...\n");
	exit(2);
}

static void
on_term(int sig)
{
	done = 1;
}

static int
add(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	/* Files only: an empty directory stages nothing. */
	if (type == FTW_F || type == FTW_SL)
		walked += (unsigned long long)st->st_blocks * 512;
	return 0;
}

/* The bytes allocated under all of dirs. */
static unsigned long long
sample(char **dirs, int n)
{
	int	i;

	walked = 0;
	for (i = 0; i < n; i++)
		nftw(dirs[i], add, 16, FTW_PHYS);
	return walked;
}

int
main(int argc, char *argv[])
{
	struct sigaction	 sa;
	struct timespec		 ts;
	unsigned long long	 peak = 0, v, samples = 0;
	const char		*out = NULL;
	long			 ms = 50;
	char			*ep;
	FILE			*f;
	int			 ch;

	while ((ch = getopt(argc, argv, "i:o:")) != -1) {
		switch (ch) {
		case 'i':
			errno = 0;
			ms = strtol(optarg, &ep, 10);
			if (errno || *ep != '\0' || ms < 1 || ms > 60000)
				usage();
			break;
		case 'o':
			out = optarg;
			break;
		default:
			usage();
		}
	}
	argc -= optind;
	argv += optind;
	if (out == NULL || argc < 1)
		usage();

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_term;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (ms % 1000) * 1000000L;
	while (!done) {
		if ((v = sample(argv, argc)) > peak)
			peak = v;
		samples++;
		nanosleep(&ts, NULL);	/* SIGTERM cuts it short */
	}
	if ((v = sample(argv, argc)) > peak)
		peak = v;
	samples++;

	if ((f = fopen(out, "w")) == NULL) {
		fprintf(stderr, "dirpeak: %s: %s\n", out, strerror(errno));
		return 1;
	}
	fprintf(f, "%llu %llu\n", peak, samples);
	if (fclose(f) == EOF) {
		fprintf(stderr, "dirpeak: %s: %s\n", out, strerror(errno));
		return 1;
	}
	return 0;
}
