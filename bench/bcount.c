/*
 * bcount -- copy standard input to standard output and count the bytes.
 *
 * usage: bcount file
 *
 * The benchmark puts it between the two ends of each pipeline, so that
 * the same relay measures the bytes on the wire of every variant.  At end
 * of input, or when the output is closed, the count is written to FILE in
 * decimal.  Exits 0 once everything read was written, 1 otherwise.
 */

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BUFSZ	(1024 * 1024)

static int	put_count(const char *, unsigned long long);

/* Writes n to path; returns 0, or -1 with errno set. */
static int
put_count(const char *path, unsigned long long n)
{
	char	buf[32];
	int	fd, len, r = 0;

	len = snprintf(buf, sizeof buf, "%llu\n", n);
	if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	    0644)) == -1)
		return -1;
	if (write(fd, buf, len) != len)
		r = -1;
	if (close(fd) == -1)
		r = -1;
	return r;
}

int
main(int argc, char *argv[])
{
	unsigned long long	 total = 0;
	char			*buf;
	ssize_t			 n, w, off;
	int			 status = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: bcount file\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	if ((buf = malloc(BUFSZ)) == NULL) {
		fprintf(stderr, "bcount: out of memory\n");
		return 1;
	}
	for (;;) {
		n = read(STDIN_FILENO, buf, BUFSZ);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			fprintf(stderr, "bcount: read: %s\n", strerror(errno));
			status = 1;
			break;
		}
		if (n == 0)
			break;
		for (off = 0; off < n; off += w) {
			w = write(STDOUT_FILENO, buf + off, n - off);
			if (w == -1 && errno == EINTR) {
				w = 0;
				continue;
			}
			if (w == -1) {
				fprintf(stderr, "bcount: write: %s\n",
				    strerror(errno));
				status = 1;
				goto out;
			}
			total += (unsigned long long)w;
		}
	}
out:
	free(buf);
	if (put_count(argv[1], total) == -1) {
		fprintf(stderr, "bcount: %s: %s\n", argv[1], strerror(errno));
		status = 1;
	}
	return status;
}
