/*
 * counter -- a batch job whose state can be followed from its output
 * across checkpoints and restores.
 *
 * usage: counter [-m MiB] [-n steps] [-t ms] [-x status]
 *
 * It fills MiB of memory (default 16) with a pseudo-random pattern and
 * remembers its checksum, then prints
 *	start pid=PID sum=HEX
 * and, every ms milliseconds (default 100), checks the whole memory
 * against the checksum it remembers, changes one word of it, remembers
 * the new checksum and prints
 *	step N sum=HEX
 * with N counting from 1.  After the last step (default 100) it prints
 *	done N sum=HEX
 * and exits with status (default 0).  If the memory does not match, it
 * prints "FAIL step N: sum HEX, expected HEX" and exits 99.  Each line
 * goes to standard output with one write(2): a restored counter goes on
 * from the step it was checkpointed at, where a new one would start
 * again from 1.
 */

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <sys/types.h>

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/work.h"

static void	line(const char *, ...)
		    __attribute__((__format__(__printf__, 1, 2)));
static unsigned long number(const char *, int);

static void
line(const char *fmt, ...)
{
	char	buf[256];
	va_list	ap;
	int	n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof buf - 2)
		n = sizeof buf - 2;
	buf[n++] = '\n';
	if (write(STDOUT_FILENO, buf, n) != n) {
		/* the test reads the output: it will see what is missing */
	}
}

static unsigned long
number(const char *s, int opt)
{
	unsigned long	 v;
	char		*ep;

	errno = 0;
	v = strtoul(s, &ep, 10);
	if (errno != 0 || *s == '\0' || *ep != '\0') {
		fprintf(stderr, "counter: -%c: bad number '%s'\n", opt, s);
		exit(2);
	}
	return v;
}

int
main(int argc, char **argv)
{
	uint64_t	*mem, sum, now;
	unsigned long	 mib = 16, steps = 100, ms = 100, status = 0, i;
	size_t		 nwords, k;
	int		 ch;

	while ((ch = getopt(argc, argv, "m:n:t:x:")) != -1) {
		switch (ch) {
		case 'm':
			mib = number(optarg, ch);
			break;
		case 'n':
			steps = number(optarg, ch);
			break;
		case 't':
			ms = number(optarg, ch);
			break;
		case 'x':
			status = number(optarg, ch);
			break;
		default:
			fprintf(stderr, "usage: counter [-m MiB] [-n steps] "
			    "[-t ms] [-x status]\n");
			return 2;
		}
	}
	work_close_inherited();
	nwords = (mib > 0 ? mib : 1) * 1024 * 1024 / sizeof *mem;
	if ((mem = malloc(nwords * sizeof *mem)) == NULL) {
		fprintf(stderr, "counter: out of memory\n");
		return 1;
	}
	work_fill(mem, nwords, 0);
	sum = work_fnv(WORK_FNV_INIT, mem, nwords);
	line("start pid=%ld sum=%016" PRIx64, (long)getpid(), sum);
	for (i = 1; i <= steps; i++) {
		work_msleep(ms);
		now = work_fnv(WORK_FNV_INIT, mem, nwords);
		if (now != sum) {
			line("FAIL step %lu: sum %016" PRIx64 ", expected %016"
			    PRIx64, i, now, sum);
			return 99;
		}
		k = (i * 7919) % nwords;
		mem[k] = mem[k] * WORK_GOLDEN + i;
		sum = work_fnv(WORK_FNV_INIT, mem, nwords);
		line("step %lu sum=%016" PRIx64, i, sum);
	}
	line("done %lu sum=%016" PRIx64, steps, sum);
	return (int)status;
}
